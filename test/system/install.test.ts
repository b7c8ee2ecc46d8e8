// A production install, the way an operator does it: from `npm pack`'s
// tarball, installed into an empty folder outside the repository, the `api-auth` command
// serves (health answers, a token works) and the library embeds with the App it
// re-exports. The tarball holds the build and what runs, and installs what runs: no
// sources, tests or benchmarks, no compiler. Packages come from npm's cache (CI's own
// `npm ci` filled it), so nothing here needs the registry.
import t from 'tap';
import type { Test } from 'tap';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { REASONS, call, expectRefused, newToken } from '../helpers/auth.js';
import { PROGRAM_ENV, ROOT, VERSION, launch, randomPassword, tempDir } from '../helpers/server.js';
import { request } from '../helpers/http.js';

const run = promisify(execFile);
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

async function npm(t: Test, cwd: string, args: string[]): Promise<string> {
  const { stdout } = await run('npm', [...args, ...NPM_FLAGS], { cwd, env: PROGRAM_ENV, maxBuffer: 16 << 20 });
  t.pass(`npm ${args.join(' ')}: exit 0`);
  return stdout;
}

// The production guide's install (npm pack, npm install --prefix /opt/api-auth, the unit)
// is run as written by test/docs/readme.test.ts. Here: the tarball that `npm pack` makes
// of a clone of this commit with the build under test.
const dir = tempDir(t);
const clone = join(dir, 'api-auth');

t.test('from the tarball, in a project of its own: the command and the library', async (t) => {
  await run('git', ['clone', '--quiet', '--no-hardlinks', ROOT, clone]);
  // Other tests write scratch folders under build/ while this one runs; they are no part of the build.
  cpSync(join(ROOT, 'build'), join(clone, 'build'), {
    recursive: true,
    filter: (source) => !basename(source).startsWith('readme-example-'),
  });
  await npm(t, clone, ['pack', '--ignore-scripts']);
  const tarball = join(clone, readdirSync(clone).find((f) => f.endsWith('.tgz'))!);
  const listed = (await run('tar', ['-tzf', tarball])).stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.replace(/^package\//, ''));
  t.ok(
    listed.includes('build/host/main.js') && listed.includes('build/core.wasm') && listed.includes('build/core-threads.wasm'),
    'the tarball holds the build',
  );
  t.same(
    listed.filter((file) => /^(test|bench|go|assembly|host|\.ci)\//.test(file) || file.endsWith('.wat')),
    [],
    'and no sources, tests, benchmarks, Go module or text formats of the core',
  );

  const project = join(dir, 'my-node');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'my-node', version: '1.0.0', private: true, type: 'module' }));
  await npm(t, project, ['install', tarball]);
  const installed = readdirSync(join(project, 'node_modules'));
  for (const compiler of ['typescript', 'assemblyscript', 'binaryen'])
    t.notOk(installed.includes(compiler), `${compiler} is not installed: it only builds`);
  t.notOk(existsSync(join(project, 'node_modules', '@types', 'ws')), 'no development package is installed');
  const { stdout } = await run(join(project, 'node_modules', '.bin', 'api-auth'), ['--version'], { env: PROGRAM_ENV });
  t.equal(stdout, `api-auth ${VERSION}\n`, 'node_modules/.bin/api-auth runs');

  // The installed command serves: its health answers, and a token it issues works at the gate.
  const password = randomPassword();
  writeFileSync(join(project, 'password.txt'), password, { mode: 0o600 });
  mkdirSync(join(project, 'data'), { mode: 0o700 });
  const server = launch(
    t,
    [
      '--api-auth-required',
      '--api-auth-password-file',
      join(project, 'password.txt'),
      '--data-dir',
      join(project, 'data'),
      '--http-port',
      '0',
      '--http-threads',
      '1',
    ],
    join(project, 'node_modules', 'api-auth', 'build', 'host', 'main.js'),
  );
  const served = `http://127.0.0.1:${String((await server.waitForLog((line) => line.msg === 'listening', 20_000)).port)}`;
  const health = await request(served, '/ext/auth/health', { method: 'GET' });
  t.equal(health.status, 200, 'its /ext/auth/health answers 200');
  const issued = await newToken(served, password, ['/ext/info']);
  t.equal((await call(served, '/ext/info', issued)).status, 200, 'a token it issued opens the endpoint it grants');
  expectRefused(t, await call(served, '/ext/info'), REASONS.noToken, 'and without one the gate refuses');
  server.child.kill('SIGTERM');
  t.same(await server.exited, { code: 0, signal: null }, 'the installed server stops cleanly');

  // The library reference's embedding example, with App taken from api-auth.
  writeFileSync(
    join(project, 'my-node.mjs'),
    `
import { fileURLToPath } from 'node:url';
import { App, createAuth, us_socket_local_port } from 'api-auth';
const here = (name) => fileURLToPath(new URL(name, import.meta.url));
const auth = await createAuth({ passwordFile: here('./password.txt'), dataDir: here('./auth-data') });
const app = App();
auth.mount(app);
app.post('/ext/info', auth.protect((res) => {
  res.writeHeader('Content-Type', 'application/json').end('{"jsonrpc":"2.0","result":{"version":"my-node/1.0"},"id":1}');
}));
app.listen('127.0.0.1', 0, (socket) => {
  if (!socket) throw new Error('cannot listen');
  console.log(JSON.stringify({ msg: 'listening', port: us_socket_local_port(socket) }));
});
process.on('SIGTERM', () => { app.close(); auth.close().then(() => process.exit(0)); });
`,
  );
  const node = launch(t, [], join(project, 'my-node.mjs'));
  const listening = await node.waitForLog((line) => line.msg === 'listening' && line.port !== undefined, 20_000);
  const url = `http://127.0.0.1:${String(listening.port)}`;
  expectRefused(t, await call(url, '/ext/info'), REASONS.noToken, 'protect() refuses a call without a token');
  const token = await newToken(url, password, ['/ext/info']);
  const answer = await call(url, '/ext/info', token);
  t.equal(answer.status, 200, 'protect() lets a granted token through');
  node.child.kill('SIGTERM');
  t.same(await node.exited, { code: 0, signal: null }, 'the embedding node stops cleanly');
});

// A clone is for building: its compilers are devDependencies. `npm ci --omit=dev` there
// leaves them out and runs `prepare` all the same; the build then says, in one line, what
// to run instead, rather than failing with a spawn error for each compile.
t.test('npm ci --omit=dev in a clone fails with one line naming the production install', async (t) => {
  const bare = join(dir, 'omit-dev');
  await run('git', ['clone', '--quiet', '--no-hardlinks', ROOT, bare]);
  const failed = await run('npm', ['ci', '--omit=dev', ...NPM_FLAGS], { cwd: bare, env: PROGRAM_ENV, maxBuffer: 16 << 20 }).then(
    () => undefined,
    (error: { code?: number; stderr?: string }) => error,
  );
  t.ok(failed !== undefined && failed.code !== 0, `npm ci --omit=dev exits non-zero (${String(failed?.code)})`);
  const said = (failed?.stderr ?? '').split('\n').filter((line) => line.startsWith('build:'));
  t.equal(said.length, 1, `the build says one line: ${said.join(' | ')}`);
  t.match(said[0], /docs\/guides\/production\.md/, 'which names the production guide');
  t.match(said[0], /`npm pack`/, 'and the packed tarball');
  t.notMatch(failed?.stderr ?? '', /ENOENT/, 'and no compiler is spawned');
  t.notOk(existsSync(join(bare, 'build', 'core.wasm')), 'nothing is built');
});
