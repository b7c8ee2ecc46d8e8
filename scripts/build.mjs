#!/usr/bin/env node
// `npm run build`: the core three ways with asc (release, debug, and the shared-memory
// build the HTTP threads use), the host with tsc, and the operator's console with esbuild, into build/.
//
// A build whose inputs and outputs are both unchanged is not run again. `npm ci` builds
// (prepare), and then `npm test` and `npm pack` (prepare again) would rebuild the same tree,
// about 23 s of CPU each time. build/.stamp.json records a SHA-256 over every input (the
// sources under assembly/ and host/, the compilers' settings, this script, the lock file
// that pins the compilers and the compilers' installed versions) and one over every output.
// When both still match, the build says so and stops; anything else (a changed source, an
// upgraded compiler, a deleted or edited output, a build that failed or was interrupted,
// which leaves no stamp) builds in full, from an empty build/host and build/assembly, so
// that no output outlives its source.
// `--force` builds in full anyway.
//
// The seven steps are independent, so they run side by side, as many at a time as the
// machine has cores; each one's output is printed whole when it ends. What the build says goes
// to stderr, as asc's and tsc's errors do: stdout stays for what runs it (`npm pack --silent`
// prints only the tarball's name).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BUILD = join(ROOT, 'build');
const STAMP = join(BUILD, '.stamp.json');
const BIN = join(ROOT, 'node_modules', '.bin');

const STEPS = [
  { name: 'core (release)', command: 'asc', args: ['assembly/index.ts', '--target', 'release'] },
  { name: 'core (debug)', command: 'asc', args: ['assembly/index.ts', '--target', 'debug'] },
  { name: 'core (threads)', command: 'asc', args: ['assembly/threads.ts', '--target', 'threads'] },
  { name: 'host', command: 'tsc', args: ['-p', '.'] },
  // The operator's console (docs/guides/console.md): its script and its style, each one
  // file with uPlot bundled in, so that the page fetches nothing from elsewhere.
  {
    name: 'console (script)',
    command: 'esbuild',
    args: [
      'console/main.ts',
      '--bundle',
      '--format=iife',
      '--target=es2022',
      '--minify',
      '--legal-comments=none',
      '--log-level=warning',
      '--outfile=build/console/console.js',
    ],
  },
  {
    name: 'console (style)',
    command: 'esbuild',
    args: ['console/console.css', '--bundle', '--minify', '--log-level=warning', '--outfile=build/console/console.css'],
  },
  // esbuild strips the types without reading them: tsc checks them (console/tsconfig.json, the DOM's types).
  { name: 'console (types)', command: 'tsc', args: ['-p', 'console'] },
];
/** The console's page, copied as it is beside its script and style. */
const CONSOLE_PAGE = ['console/index.html', 'build/console/index.html'];

/**
 * What the steps read: folders walked whole, and single files. The compilers are in twice:
 * the lock file pins them, and their installed package.json says what is there.
 */
const INPUTS = [
  'assembly',
  'host',
  'console',
  'asconfig.json',
  'tsconfig.json',
  'package.json',
  'package-lock.json',
  'scripts/build.mjs',
  'node_modules/assemblyscript/package.json',
  'node_modules/typescript/package.json',
  'node_modules/esbuild/package.json',
  'node_modules/uplot/package.json',
];
/** What the steps write: the core's files at build/'s top, and tsc's trees. Test artefacts elsewhere in build/ are not the build's. */
const OUTPUT_TREES = ['build/host', 'build/assembly', 'build/console'];
const OUTPUT_FILE = /^core(\.debug|-threads)?\.(wasm|wat)$/;

const USAGE = `Usage: node scripts/build.mjs [--force | --check]   (npm run build [-- --force | --check])
  --force   build in full, even when up to date
  --check   build nothing: exit 0 when up to date, 1 (saying why) when a build is due`;

const args = process.argv.slice(2);
for (const arg of args) {
  if (arg !== '--force' && arg !== '--check') {
    process.stderr.write(`build: unknown argument ${JSON.stringify(arg)}\n${USAGE}\n`);
    process.exit(2);
  }
}
if (args.length > 1) {
  process.stderr.write(`build: one of --force and --check at most\n${USAGE}\n`);
  process.exit(2);
}
const force = args.includes('--force');
const check = args.includes('--check');

/** Every file under the folder `path`, or the file `path`, as paths from the root; none when it does not exist. */
function files(path) {
  const full = join(ROOT, path);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(ROOT, join(entry.parentPath ?? entry.path, entry.name)));
}

/** A SHA-256 over the paths and contents of `paths`: a file renamed, added, removed or edited changes it. */
function digest(paths) {
  const hash = createHash('sha256');
  for (const path of [...paths].sort()) {
    const content = readFileSync(join(ROOT, path));
    hash.update(`${path}\0${content.length}\0`);
    hash.update(content);
  }
  return hash.digest('hex');
}

const inputFiles = () => INPUTS.flatMap(files);
const outputFiles = () => [
  ...(existsSync(BUILD)
    ? readdirSync(BUILD)
        .filter((name) => OUTPUT_FILE.test(name))
        .map((name) => `build/${name}`)
    : []),
  ...OUTPUT_TREES.flatMap(files),
];

function readStamp() {
  try {
    return JSON.parse(readFileSync(STAMP, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Runs one step, its output held until it ends; resolves with its exit code. */
function run(step) {
  return new Promise((resolve) => {
    const child = spawn(join(BIN, step.command), step.args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks = [];
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    child.on('error', (error) => {
      chunks.push(Buffer.from(`${error.message}\n`));
    });
    child.on('close', (code, signal) => {
      const output = Buffer.concat(chunks).toString('utf8');
      const status = code ?? 1;
      process.stderr.write(`build: ${step.name}: ${status === 0 ? 'done' : `failed (${signal ?? `exit ${code}`})`}\n${output}`);
      resolve(status);
    });
  });
}

/** Why a build is due, or undefined when build/ holds what these inputs make. */
function due(inputs) {
  const stamp = readStamp();
  if (stamp === undefined) return 'no stamp: no build has finished here';
  if (stamp.inputs !== inputs) return 'the inputs changed since the last build';
  if (stamp.outputs !== digest(outputFiles())) return 'the outputs changed since the last build';
  return undefined;
}

const inputs = digest(inputFiles());
const reason = force ? 'asked to (--force)' : due(inputs);
if (reason === undefined) {
  process.stderr.write(`build: up to date (inputs ${inputs.slice(0, 12)}; \`npm run build -- --force\` rebuilds)\n`);
  process.exit(0);
}
if (check) {
  process.stderr.write(`build: due: ${reason}\n`);
  process.exit(1);
}
// The compilers are devDependencies: `npm ci --omit=dev` in a clone leaves them out and then
// runs `prepare`, which would fail four times with a spawn error that names no way forward.
const missing = [...new Set(STEPS.map((step) => step.command))].filter((command) => !existsSync(join(BIN, command)));
if (missing.length > 0) {
  process.stderr.write(
    `build: the compilers are not installed (${missing.join(', ')}: devDependencies, which \`npm ci --omit=dev\` leaves out): ` +
      'run `npm ci` to build in a clone; for production, install the packed tarball (`npm pack`: docs/guides/production.md)\n',
  );
  process.exit(1);
}
process.stderr.write(`build: building: ${reason}\n`);

rmSync(STAMP, { force: true });
// A full build starts from no outputs: tsc and asc only add and overwrite, so a host module
// whose source was moved or deleted would stay in build/host, loadable and shipped in the
// tarball (`files` takes build/ whole), though nothing builds it any more.
for (const path of outputFiles()) rmSync(join(ROOT, path), { force: true });
for (const tree of OUTPUT_TREES) rmSync(join(ROOT, tree), { recursive: true, force: true });
const queue = [...STEPS];
let failed = 0;
await Promise.all(
  Array.from({ length: Math.min(availableParallelism(), queue.length) }, async () => {
    for (let step = queue.shift(); step !== undefined; step = queue.shift()) {
      if ((await run(step)) !== 0) failed += 1;
    }
  }),
);
if (failed > 0) process.exit(1);
chmodSync(join(BUILD, 'host', 'main.js'), 0o755);
copyFileSync(join(ROOT, CONSOLE_PAGE[0]), join(ROOT, CONSOLE_PAGE[1]));
writeFileSync(STAMP, `${JSON.stringify({ inputs, outputs: digest(outputFiles()) })}\n`);
