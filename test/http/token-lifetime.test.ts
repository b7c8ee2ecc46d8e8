// --max-token-lifetime: the ceiling of expiresIn, apart from the 12 h default
// lifetime; "never" only under a ceiling of never; a token longer than the default keeps
// working across a restart. Through HTTP and the operator CLI, on the real binary.
import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runOperator } from '../helpers/operator.js';
import { authUrl, call, expectGranted, listTokens } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { CLOCK_START } from '../helpers/library.js';
import { launch, randomPassword, startServer, tempDir } from '../helpers/server.js';
import { startClocked } from '../helpers/clocked.js';

const INFO = '/ext/info';
const ONE_THREAD = ['--http-threads', '1'];
const HOUR = 3600_000;

interface Listed {
  id: string;
  issuedAt: string;
  expiresAt: string;
}

const api = (args: readonly string[]) => runOperator(args);

t.test('the default ceiling is the 12 h lifetime: 13h and "never" are refused, naming --max-token-lifetime', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const url = authUrl(node.url);
  for (const expiresIn of ['13h', 'never']) {
    const refused = await jsonrpc(url, 'auth.newToken', { password: node.password, endpoints: ['*'], expiresIn });
    t.equal(refused.error?.code, -32602, expiresIn);
    t.match(
      refused.error?.message,
      /^invalid params: expiresIn must be .* from 1s to 43200s \(12h, the node's --max-token-lifetime\)/,
      expiresIn,
    );
  }
  t.match(
    (await jsonrpc(url, 'auth.newToken', { password: node.password, endpoints: ['*'], expiresIn: 'never' })).error?.message,
    /"never" is taken only when the node's --max-token-lifetime is never/,
  );
  t.same(await listTokens<Listed>(node.url, node.password), [], 'bad input issued nothing');
  const plain = await jsonrpc(url, 'auth.newToken', { password: node.password, endpoints: ['*'] });
  t.type((plain.result as { token: string }).token, 'string');
  const [entry] = await listTokens<Listed>(node.url, node.password);
  t.equal(Date.parse(entry.expiresAt) - Date.parse(entry.issuedAt), 12 * HOUR, 'the default lifetime stays 12 h');
});

t.test('--max-token-lifetime 720h: 720h is issued over HTTP and by token new, 721h is not; the default stays 12 h', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: [...ONE_THREAD, '--max-token-lifetime', '720h'] });
  const url = authUrl(node.url);
  const month = await jsonrpc(url, 'auth.newToken', { password: node.password, endpoints: [INFO], expiresIn: '720h' });
  expectGranted(t, await call(node.url, INFO, (month.result as { token: string }).token), INFO);
  const over = await jsonrpc(url, 'auth.newToken', { password: node.password, endpoints: [INFO], expiresIn: '721h' });
  t.match(over.error?.message, /from 1s to 2592000s \(720h, the node's --max-token-lifetime\)/);
  const auth = ['--uri', node.url, '--password-file', node.passwordFile];
  const cli = await api(['token', 'new', ...auth, '--endpoints', INFO, '--expires-in', '720h', '--json']);
  t.equal(cli.code, 0, cli.stderr);
  const tooLong = await api(['token', 'new', ...auth, '--endpoints', INFO, '--expires-in', '721h']);
  t.equal(tooLong.code, 1, 'the node refuses past the ceiling');
  t.match(tooLong.stderr, /--max-token-lifetime/);
  const plain = await api(['token', 'new', ...auth, '--endpoints', INFO, '--json']);
  t.equal(plain.code, 0, plain.stderr);
  const lifetimes = (await listTokens<Listed>(node.url, node.password)).map(
    (e) => (Date.parse(e.expiresAt) - Date.parse(e.issuedAt)) / HOUR,
  );
  t.same(lifetimes, [720, 720, 12], 'two of 720 h, and the default 12 h');
});

t.test(
  'a restart keeps a 720 h token valid past the 12 h the node starts with: the data folder records the longest lifetime issued',
  async (t) => {
    const dir = tempDir(t);
    mkdirSync(join(dir, 'data'), { mode: 0o700 });
    const password = randomPassword();
    writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
    // A clock that moves 13 hours a SIGUSR2: past what a 12 h lifetime would bound the restored serials by.
    const start = (startMs: number) => startClocked(t, dir, startMs, 13 * HOUR, ['--max-token-lifetime', '720h']);
    let server = await start(CLOCK_START);
    const month = (await jsonrpc(authUrl(server.url), 'auth.newToken', { password, endpoints: [INFO], expiresIn: '720h' })).result as {
      token: string;
    };
    t.equal((await server.stop('SIGTERM')).code, 0);
    server = await start(CLOCK_START + HOUR);
    // Answered once the script has its SIGUSR2 handler (set once its start has resolved).
    expectGranted(t, await call(server.url, INFO, month.token), INFO, 'after the restart');
    server.child.kill('SIGUSR2');
    await server.waitForLog((l) => l.msg === 'clock moved');
    // An issue sweeps the revocation window: a page whose tokens all seem expired is dropped.
    t.type((await jsonrpc(authUrl(server.url), 'auth.newToken', { password, endpoints: [INFO] })).result, 'object');
    expectGranted(t, await call(server.url, INFO, month.token), INFO, 'the 720 h token, 14 h in, after a restart');
    t.equal((await server.stop('SIGTERM')).code, 0);
  },
);

t.test('--max-token-lifetime never, from the environment or a config file: expiresIn "never", by HTTP and by token new', async (t) => {
  const byEnv = await startServer(t, { cheapChecks: true, args: ONE_THREAD, node: { env: { API_AUTH_MAX_TOKEN_LIFETIME: 'never' } } });
  const never = await jsonrpc(authUrl(byEnv.url), 'auth.newToken', { password: byEnv.password, endpoints: [INFO], expiresIn: 'never' });
  expectGranted(t, await call(byEnv.url, INFO, (never.result as { token: string }).token), INFO);
  const cli = await api([
    'token',
    'new',
    '--uri',
    byEnv.url,
    '--password-file',
    byEnv.passwordFile,
    '--endpoints',
    INFO,
    '--expires-in',
    'never',
  ]);
  t.equal(cli.code, 0, cli.stderr);
  const lifetimes = (await listTokens<Listed>(byEnv.url, byEnv.password)).map(
    (e) => (Date.parse(e.expiresAt) - Date.parse(e.issuedAt)) / 1000,
  );
  t.same(lifetimes, [2 ** 32 - 1, 2 ** 32 - 1], '"never" is the longest lifetime a token carries, 2^32 - 1 s');

  const dir = tempDir(t);
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ 'max-token-lifetime': 'never' }));
  const byFile = await startServer(t, { cheapChecks: true, args: [...ONE_THREAD, '--config-file', config] });
  const fromFile = await jsonrpc(authUrl(byFile.url), 'auth.newToken', {
    password: byFile.password,
    endpoints: [INFO],
    expiresIn: 'never',
  });
  t.type((fromFile.result as { token: string }).token, 'string', "the config file's never");
});

t.test('a bad --max-token-lifetime, or a default lifetime above it, is refused at start, naming both', async (t) => {
  const cases: [string[], RegExp][] = [
    [
      ['--max-token-lifetime', 'forever'],
      /--max-token-lifetime must be a duration in whole seconds from 1s to 876000h, such as 12h, 720h or 8760h, or never, not "forever"/,
    ],
    [
      ['--max-token-lifetime', '1h', '--api-auth-token-lifetime', '2h'],
      /--api-auth-token-lifetime \(2h\) is longer than --max-token-lifetime \(1h\), the longest lifetime a token may have/,
    ],
  ];
  for (const [args, message] of cases) {
    const run = launch(t, ['--http-port', '0', ...args]);
    const exit = await run.exited;
    t.equal(exit.code, 2, args.join(' '));
    t.match(run.stderr(), message);
  }
});
