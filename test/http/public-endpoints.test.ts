// --api-auth-public-endpoints: exact paths that need no token (health probes, load
// balancers). Empty by default; the path rules still apply; entries are checked at start.
import t from 'tap';
import { REASONS, call, expectBadPath, expectGranted, expectRefused, newToken } from '../helpers/auth.js';
import { request } from '../helpers/http.js';
import { cliLine, refusalOf } from '../helpers/library.js';
import { runCli, startServer, tempDir } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';

const [open, closed] = await Promise.all([
  startServer(t, { args: ['--api-auth-public-endpoints', '/ext/health,/ext/bc/P/ping'] }),
  startServer(t),
]);

t.test('by default every endpoint needs a token, /ext/health too', async (t) => {
  expectRefused(t, await call(closed.url, '/ext/health', undefined, 'GET'), REASONS.noToken, 'GET /ext/health');
  expectRefused(t, await call(closed.url, '/ext/health'), REASONS.noToken, 'POST /ext/health');
});

t.test('a public endpoint answers without a token, for GET, HEAD and POST', async (t) => {
  expectGranted(t, await call(open.url, '/ext/health', undefined, 'GET'), '/ext/health', 'GET');
  expectGranted(t, await call(open.url, '/ext/health'), '/ext/health', 'POST');
  const head = await request(open.url, '/ext/health', { method: 'HEAD' });
  t.equal(head.status, 200, 'HEAD');
  expectGranted(t, await call(open.url, '/ext/health?verbose=1', undefined, 'GET'), '/ext/health', 'the query string does not matter');
  expectGranted(
    t,
    await call(open.url, '/ext/bc/P/ping', undefined, 'GET'),
    '/ext/bc/P/ping',
    'the second entry (404: no such built-in route)',
  );
});

t.test('a public endpoint also answers with any token, even a bad one', async (t) => {
  expectGranted(t, await call(open.url, '/ext/health', 'not-a-token', 'GET'), '/ext/health', 'a malformed token');
});

t.test('only the exact path is public: other paths, a trailing slash, a longer path need a token', async (t) => {
  expectRefused(t, await call(open.url, '/ext/info'), REASONS.noToken, '/ext/info');
  expectRefused(t, await call(open.url, '/ext/health/', undefined, 'GET'), REASONS.noToken, 'a trailing slash');
  expectRefused(t, await call(open.url, '/ext/health/x', undefined, 'GET'), REASONS.noToken, 'a longer path');
  expectRefused(t, await call(open.url, '/ext/bc/P', undefined, 'GET'), REASONS.noToken, 'a shorter path');
  expectRefused(t, await call(open.url, '/EXT/HEALTH', undefined, 'GET'), REASONS.noToken, 'another case');
  const info = await newToken(open.url, open.password, ['/ext/info']);
  expectGranted(t, await call(open.url, '/ext/info', info), '/ext/info', 'with a token, as before');
});

t.test('the path rules still apply around public endpoints', async (t) => {
  for (const path of ['/ext/health/.', '/ext/x/../health', '//ext/health', '/ext/%2e/health', '/ext/heal%74h/..']) {
    expectBadPath(t, await call(open.url, path, undefined, 'GET'), path);
  }
});

t.test('behind the proxy, a public endpoint reaches the upstream without a token, and Authorization is still stripped', async (t) => {
  const upstream = await startUpstream(t);
  const gateway = await startServer(t, { args: ['--upstream', upstream.url, '--api-auth-public-endpoints', '/ext/health'] });
  const response = await request(gateway.url, '/ext/health', { headers: [['Authorization', 'Bearer whatever']] });
  t.equal(response.status, 200);
  t.equal(upstream.seen.length, 1);
  t.equal(upstream.seen[0].url, '/ext/health');
  t.equal(upstream.seen[0].headers.authorization, undefined);
  expectRefused(t, await request(gateway.url, '/ext/info'), REASONS.noToken, 'other paths still need a token');
  t.equal(upstream.seen.length, 1, 'and never reach the upstream without one');
});

t.test('public endpoints without --api-auth-required: a warning, every endpoint is public anyway', async (t) => {
  const server = await startServer(t, { auth: false, args: ['--api-auth-public-endpoints', '/ext/health'] });
  t.ok(
    server.logs.some((l) => l.level === 'warn' && l.msg?.includes('public endpoints') === true),
    'a warning',
  );
  expectGranted(t, await call(server.url, '/ext/info'), '/ext/info');
});

t.test('entries that are not exact valid paths are refused at start (exit 2, one line)', async (t) => {
  const dir = tempDir(t);
  const bad = [
    'ext/health',
    '/ext/*',
    '*',
    '/ext/health?x=1',
    '/ext/../health',
    '/ext//health',
    '/ext/%2Fhealth',
    '/ext/health,',
    '/ext/heal th',
  ];
  const args = (entry: string): string[] => ['--http-port', '0', '--data-dir', dir, `--api-auth-public-endpoints=${entry}`];
  for (const entry of bad) {
    const error = await refusalOf(args(entry));
    t.match(error, { code: /^API_AUTH_BAD_(OPTION|COMMAND_LINE)$/ }, `${JSON.stringify(entry)}: refused`);
    const line = error === undefined ? '' : cliLine(error);
    t.match(line, /^api-auth: --api-auth-public-endpoints/, `${JSON.stringify(entry)}: the line names the flag`);
    t.notOk(line.includes('\n'), 'one line');
  }
  const error = await refusalOf(args('/ext/../health'));
  const result = await runCli(t, args('/ext/../health'));
  t.equal(result.code, 2, 'the CLI exits 2');
  t.equal(result.stderr, error === undefined ? 'no error' : `${cliLine(error)}\n`, 'with that line alone on stderr');
});
