#!/usr/bin/env node
// `npm test`'s tests, as plain JavaScript: each test/<kind>/<name>.test.ts bundled with the
// TypeScript helpers it imports into test/<kind>/<name>.test.mjs beside it (git ignores
// them), with an inline source map, so that tap reports failures at the .ts lines.
//
// Why: the suite is CPU-bound, and a TypeScript loader (tsx) in every test process costs
// it about 0.2 s of CPU per file, for hooks that then see every module the test loads. tap
// runs these bundles with no loader. `npx tap test/<kind>/<name>.test.ts` still runs one
// file from its source, through tsx (package.json's tap config).
//
// tap itself is bundled too, once, into node_modules/.cache/api-auth/tap.mjs (where tools
// keep what they generate from the install), which every test bundle imports. tap starts
// each test file with its process tracker (@tapjs/processinfo), which on Node 20 sends
// every module the process loads through a loader thread and measures its lines, tap's own
// 200 modules among them. With them as one module, a test file's process spends about
// 0.35 s less CPU (test/unit/doc-links: 0.87 s, then 0.51 s; the suite's CPU went from about
// 445 s to 405 s). Its source map is a file beside it, built from those of tap's modules,
// so a frame in tap still names its file under node_modules/, which is how tap tells its
// own frames from the test's when it reports where a failure is. The bundle has the
// plugins tap is configured with (package.json): tap builds its Test class with them, and
// does so here first when the installed one was built with others.
//
// What stays outside a bundle, imported from where it is: the other packages, and every
// JavaScript file that exists (the build under build/, the helpers written in JavaScript,
// which some tests start as threads or programs by their path). A bundle sits in its test's
// folder, so the relative paths in it, and its import.meta.url, mean what they meant in the
// source.

// tap's own parts, at the versions tap pins (package-lock.json): its config as the runner
// reads it, and the plugins its installed Test class was built with.
import { TapConfig } from '@tapjs/config';
import { signature } from '@tapjs/test';
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const TEST = join(ROOT, 'test');

if (process.argv.length > 2) {
  process.stderr.write(`bundle-tests: takes no arguments\nUsage: node scripts/bundle-tests.mjs   (npm test runs it)\n`);
  process.exit(2);
}

const kinds = readdirSync(TEST, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);
const sources = [];
for (const kind of kinds) {
  for (const name of readdirSync(join(TEST, kind))) {
    // Bundles of a test that is gone go too.
    if (name.endsWith('.test.mjs')) rmSync(join(TEST, kind, name));
    else if (name.endsWith('.test.ts')) sources.push(join(TEST, kind, name));
  }
}

/**
 * JavaScript that exists is imported as it is, by its path from a folder of test/ (every
 * bundle is in one, at the same depth), whichever file imported it: a helper's
 * `./threads-server.js` is `../helpers/threads-server.js` in a bundle. `./x.js` naming a
 * TypeScript source is bundled.
 */
const existingJavaScript = {
  name: 'existing-javascript',
  setup(esbuild) {
    esbuild.onResolve({ filter: /^\.\.?\/.*\.(c|m)?js$/ }, (args) => {
      const file = resolve(args.resolveDir, args.path);
      if (!existsSync(file)) return undefined;
      const path = relative(join(TEST, 'kind'), file);
      return { path: path.startsWith('.') ? path : `./${path}`, external: true };
    });
  },
};

// tap's Test class, with the plugins of package.json's tap config: `tap` rebuilds it when
// they differ, but only once the tests start, after the bundle has copied the old one.
const config = await TapConfig.load();
if (signature !== config.pluginSignature) {
  process.stderr.write('bundle-tests: tap was built with other plugins; tap build\n');
  const rebuilt = spawnSync(join(ROOT, 'node_modules', '.bin', 'tap'), ['build'], { cwd: ROOT, stdio: ['ignore', 2, 2] });
  if (rebuilt.status !== 0) {
    process.stderr.write(`bundle-tests: tap build failed (${rebuilt.error?.message ?? `exit ${rebuilt.status ?? rebuilt.signal}`})\n`);
    process.exit(1);
  }
}

const TAP_BUNDLE = join(ROOT, 'node_modules', '.cache', 'api-auth', 'tap.mjs');
await build({
  entryPoints: { tap: 'tap' },
  outfile: TAP_BUNDLE,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // tap's CommonJS parts require Node's own modules, which an ES module does by a require of its own.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  sourcemap: 'linked',
  sourcesContent: false,
  logLevel: 'warning',
});

/** `tap`, in a test bundle: the one bundle of it, by its path from a folder of test/. */
const bundledTap = {
  name: 'bundled-tap',
  setup(esbuild) {
    esbuild.onResolve({ filter: /^tap$/ }, () => ({ path: relative(join(TEST, 'kind'), TAP_BUNDLE), external: true }));
  },
};

await build({
  entryPoints: sources,
  outbase: TEST,
  outdir: TEST,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  plugins: [existingJavaScript, bundledTap],
  sourcemap: 'inline',
  sourcesContent: false,
  logLevel: 'warning',
});
const folders = [...new Set(sources.map((source) => relative(ROOT, dirname(source))))];
process.stderr.write(`bundle-tests: ${sources.length} test files in ${folders.join(', ')}\n`);
