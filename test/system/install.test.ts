// A production install (issue 14), the way an operator does it: from `npm pack`'s
// tarball, installed into a project outside the repository, the `api-auth` command runs and the library embeds with the App it
// re-exports. Packages come from npm's cache (CI's own `npm ci` filled it), so nothing
// here needs the registry.
import t from 'tap';
import type { Test } from 'tap';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { REASONS, call, expectRefused, newToken } from '../helpers/auth.js';
import { PROGRAM_ENV, ROOT, VERSION, launch, randomPassword, tempDir } from '../helpers/server.js';

const run = promisify(execFile);
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

async function npm(t: Test, cwd: string, args: string[]): Promise<string> {
  const { stdout } = await run('npm', [...args, ...NPM_FLAGS], { cwd, env: PROGRAM_ENV, maxBuffer: 16 << 20 });
  t.pass(`npm ${args.join(' ')}: exit 0`);
  return stdout;
}

// The clean clone's `npm ci --omit=dev` and the installed command serving are the README's
// Production block, run as written by test/system/readme.test.ts. Here: the tarball that `npm pack`
// makes of a clone of this commit with the build under test.
const dir = tempDir(t);
const clone = join(dir, 'api-auth');

t.test('from the tarball, in a project of its own: the command and the library', async (t) => {
  await run('git', ['clone', '--quiet', '--no-hardlinks', ROOT, clone]);
  // Other tests write scratch folders under build/ while this one runs; they are no part of the build.
  cpSync(join(ROOT, 'build'), join(clone, 'build'), { recursive: true, filter: (source) => !basename(source).startsWith('readme-example-') });
  await npm(t, clone, ['pack', '--ignore-scripts']);
  const tarball = join(clone, readdirSync(clone).find((f) => f.endsWith('.tgz'))!);

  const project = join(dir, 'my-node');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'my-node', version: '1.0.0', private: true, type: 'module' }));
  await npm(t, project, ['install', tarball]);
  const { stdout } = await run(join(project, 'node_modules', '.bin', 'api-auth'), ['--version'], { env: PROGRAM_ENV });
  t.equal(stdout, `api-auth ${VERSION}\n`, 'node_modules/.bin/api-auth runs');

  // The README's embedding example, with App taken from api-auth.
  const password = randomPassword();
  writeFileSync(join(project, 'password.txt'), password, { mode: 0o600 });
  writeFileSync(join(project, 'my-node.mjs'), `
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
`);
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
