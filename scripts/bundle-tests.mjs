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
// What stays outside a bundle, imported from where it is: packages, and every JavaScript
// file that exists (the build under build/, the helpers written in JavaScript, which some
// tests start as threads or programs by their path). A bundle sits in its test's folder,
// so the relative paths in it, and its import.meta.url, mean what they meant in the source.
import { build } from 'esbuild';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const TEST = join(ROOT, 'test');

if (process.argv.length > 2) {
  process.stderr.write(`bundle-tests: takes no arguments\nUsage: node scripts/bundle-tests.mjs   (npm test runs it)\n`);
  process.exit(2);
}

const kinds = readdirSync(TEST, { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
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
  plugins: [existingJavaScript],
  sourcemap: 'inline',
  sourcesContent: false,
  logLevel: 'warning',
});
const folders = [...new Set(sources.map((source) => relative(ROOT, dirname(source))))];
process.stderr.write(`bundle-tests: ${sources.length} test files in ${folders.join(', ')}\n`);
