// The build (scripts/build.mjs, `npm run build`) is skipped only when it would make what
// build/ already holds: any change to an input (a source, a setting, the lock file that
// pins the compilers, the script) or to an output makes a build due. Checked with
// `--check`, which builds nothing, on a copy of the checkout's inputs and build: the
// checkout's own build is up to date, since `npm test` builds first. That a skipped build
// is complete is the docs test's to show: the production guide's `npm pack` in a clean
// clone takes the checkout's build as up to date, and its tarball serves.
import t from 'tap';
import type { Test } from 'tap';
import { execFile } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, PROGRAM_ENV, tempDir, untracked } from '../helpers/server.js';

const COPIED = ['assembly', 'host', 'console', 'scripts', 'build', 'asconfig.json', 'tsconfig.json', 'package.json', 'package-lock.json'];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function build(tree: string, args: string[]): Promise<Run> {
  return new Promise((done) => {
    execFile(
      ...untracked(process.execPath, [join(tree, 'scripts', 'build.mjs'), ...args]),
      { cwd: tree, env: PROGRAM_ENV },
      (error, stdout, stderr) => done({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A copy of the checkout's inputs and build (without what tests leave in build/), which the test changes and changes back. */
function copy(t: Test): string {
  const tree = join(tempDir(t), 'api-auth');
  mkdirSync(tree);
  const built = join(ROOT, 'build');
  // The installed compilers are inputs too (their package.json): the checkout's, shared.
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'));
  for (const path of COPIED) {
    cpSync(join(ROOT, path), join(tree, path), {
      recursive: true,
      filter: (source) =>
        !source.startsWith(built + '/') || /^(core[.-]|host|assembly|console|\.stamp\.json)/.test(source.slice(built.length + 1)),
    });
  }
  return tree;
}

/** A change to the tree, and how to undo it. */
type Change = [name: string, change: (tree: string) => () => void];

/** Appends to a file; undone by writing its old content back (with a new mtime: the stamp is of content). */
const append = (path: string, text: string) => (tree: string) => {
  const file = join(tree, path);
  const before = readFileSync(file);
  appendFileSync(file, text);
  return () => writeFileSync(file, before);
};

/** Removes a file; undone by writing it back. */
const remove = (path: string) => (tree: string) => {
  const file = join(tree, path);
  const before = readFileSync(file);
  rmSync(file);
  return () => writeFileSync(file, before);
};

/**
 * Each change, alone on the same copy: a build is due with `reason`, or none when it is
 * undefined; after it is undone, the copy is up to date again.
 */
async function expectDue(t: Test, tree: string, changes: readonly Change[], reason: string | undefined): Promise<void> {
  for (const [name, change] of changes) {
    const undo = change(tree);
    const run = await build(tree, ['--check']);
    if (reason === undefined) {
      t.equal(run.code, 0, `${name}: still up to date (${run.stderr.trim()})`);
    } else {
      t.equal(run.code, 1, `${name}: exit 1`);
      t.equal(run.stderr, `build: due: ${reason}\n`, `${name}: says why`);
    }
    undo();
    const again = await build(tree, ['--check']);
    t.equal(again.code, 0, `${name}, undone: up to date again (${again.stderr.trim()})`);
  }
}

t.test("the checkout's build is up to date, and a copy of it is too", async (t) => {
  const checkout = await build(ROOT, ['--check']);
  t.equal(checkout.code, 0, `the checkout: ${checkout.stderr.trim()} (npm test builds first)`);
  const tree = copy(t);
  const copied = await build(tree, ['--check']);
  t.equal(copied.code, 0, 'exit 0');
  t.match(copied.stderr, /^build: up to date \(inputs [0-9a-f]{12}; `npm run build -- --force` rebuilds\)\n$/, 'says so, on stderr');
  t.equal(copied.stdout, '', 'nothing on stdout');

  t.test('a change to any input makes a build due', (t) =>
    expectDue(
      t,
      tree,
      [
        ['a host source edited', append('host/main.ts', '\n')],
        ['a core source edited', append('assembly/index.ts', '// x\n')],
        [
          'a source added',
          (tree) => {
            writeFileSync(join(tree, 'host', 'extra.ts'), 'export {};\n');
            return () => rmSync(join(tree, 'host', 'extra.ts'));
          },
        ],
        ['a source removed', remove('assembly/README.md')],
        ['the compiler settings', append('asconfig.json', ' ')],
        ["the lock file (the compilers' versions)", append('package-lock.json', ' ')],
        ['the build script', append('scripts/build.mjs', '\n')],
      ],
      'the inputs changed since the last build',
    ),
  );

  t.test('a change to any output makes a build due', (t) =>
    expectDue(
      t,
      tree,
      [
        [
          'a byte of the core changed',
          (tree) => {
            const file = join(tree, 'build', 'core.wasm');
            const before = readFileSync(file);
            const bytes = Buffer.from(before);
            bytes[bytes.length - 1] ^= 1;
            writeFileSync(file, bytes);
            return () => writeFileSync(file, before);
          },
        ],
        ['the threads core removed', remove('build/core-threads.wasm')],
        ['a host module edited', append('build/host/main.js', '\n')],
      ],
      'the outputs changed since the last build',
    ),
  );

  t.test('no stamp (a build that failed or was stopped leaves none) makes a build due', (t) =>
    expectDue(t, tree, [['the stamp removed', remove('build/.stamp.json')]], 'no stamp: no build has finished here'),
  );

  t.test("what tests leave in build/ is not the build's", (t) =>
    expectDue(
      t,
      tree,
      [
        [
          "a folder of a test's files",
          (tree) => {
            mkdirSync(join(tree, 'build', 'readme-example-1'));
            writeFileSync(join(tree, 'build', 'readme-example-1', 'out'), 'x');
            return () => rmSync(join(tree, 'build', 'readme-example-1'), { recursive: true });
          },
        ],
      ],
      undefined,
    ),
  );

  t.test('a build in full removes outputs whose source is gone', async (t) => {
    // A host module moved away leaves its old output behind unless the build clears it:
    // it would still load, and the tarball would ship it.
    const stale = ['build/host/moved-away.js', 'build/host/http/moved-away.d.ts', 'build/assembly/moved-away.js', 'build/core.old.wasm'];
    for (const path of stale) writeFileSync(join(tree, path), 'stale');
    const run = await build(tree, ['--force']);
    t.equal(run.code, 0, `the build ends (${run.stderr.split('\n')[0]})`);
    for (const path of stale.slice(0, 3)) t.notOk(existsSync(join(tree, path)), `${path}: removed`);
    t.ok(existsSync(join(tree, 'build/core.old.wasm')), "a file at build/'s top that is not a core output stays (a test's)");
    t.ok(existsSync(join(tree, 'build/host/main.js')) && existsSync(join(tree, 'build/core.wasm')), 'the outputs are there');
    const again = await build(tree, ['--check']);
    t.equal(again.code, 0, `then up to date (${again.stderr.trim()})`);
  });

  t.test('an unknown argument, or two, is exit 2 with the usage, and builds nothing', async (t) => {
    rmSync(join(tree, 'build', '.stamp.json'));
    for (const args of [['--quick'], ['--force', '--check'], ['build']]) {
      const run = await build(tree, args);
      t.equal(run.code, 2, `${args.join(' ')}: exit 2`);
      t.match(
        run.stderr,
        /^build: .*\nUsage: node scripts\/build\.mjs \[--force \| --check\]/,
        `${args.join(' ')}: names it, then the usage`,
      );
      const still = await build(tree, ['--check']);
      t.equal(
        still.stderr,
        'build: due: no stamp: no build has finished here\n',
        `${args.join(' ')}: no build ran (none would end without a stamp)`,
      );
    }
  });
});
