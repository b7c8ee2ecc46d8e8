// CORS for browser dapps (--http-allowed-origins, the node's flag and default "*"):
// preflights answered without a token for an allowed origin, real requests still gated
// and answered with the headers their origin needs, nothing for an origin not allowed.
import t from 'tap';
import type { Test } from 'tap';
import { REASONS, expectRefused, newToken } from '../helpers/auth.js';
import { post, request } from '../helpers/http.js';
import type { HttpResponse } from '../helpers/http.js';
import { runCli, startServer, tempDir } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';

const WALLET = 'https://wallet.example';

function preflight(base: string, origin: string, path = '/ext/info'): Promise<HttpResponse> {
  return request(base, path, {
    method: 'OPTIONS',
    headers: [
      ['Origin', origin],
      ['Access-Control-Request-Method', 'POST'],
      ['Access-Control-Request-Headers', 'authorization,content-type'],
    ],
  });
}

const NODE_VERSION = '{"jsonrpc":"2.0","method":"info.getNodeVersion","id":1}';

function noCors(t: Test, response: HttpResponse, label: string): void {
  t.same(
    Object.keys(response.headers).filter((name) => name.startsWith('access-control-')),
    [],
    `${label}: no CORS header`,
  );
}

// The tests of the default origins ask it for preflights only: none leaves anything that
// another looks at.
const byDefault = await startServer(t, { cheapChecks: true });

t.test('by default (the node\'s "*"), any origin\'s preflight is answered without a token', async (t) => {
  const server = byDefault;
  const response = await preflight(server.url, 'https://any.example');
  t.equal(response.status, 204);
  t.equal(response.headers['access-control-allow-origin'], '*');
  t.match(response.headers['access-control-allow-headers'], /Authorization/);
  t.match(response.headers['access-control-allow-headers'], /Content-Type/);
  t.match(response.headers['access-control-allow-methods'], /POST/);
  t.equal(response.headers['www-authenticate'], undefined, 'not a refusal');
});

t.test('on several HTTP threads, each thread answers for the origins given', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ['--http-threads', '2', '--http-allowed-origins', WALLET] });
  for (let i = 0; i < 4; i++) {
    t.equal((await preflight(server.url, WALLET)).headers['access-control-allow-origin'], WALLET, `preflight ${i}`);
    noCors(t, await preflight(server.url, 'https://evil.example'), `preflight ${i} from another origin`);
  }
});

t.test('real requests are still gated, and refused or granted, they carry the CORS headers', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ['--http-allowed-origins', `${WALLET} https://*.dapps.example`] });
  const refused = await post(server.url, '/ext/info', NODE_VERSION, { headers: [['Origin', WALLET]] });
  expectRefused(t, refused, REASONS.noToken, 'no token');
  t.equal(refused.headers['access-control-allow-origin'], WALLET, 'the refusal is readable by the page');
  t.match(refused.headers['access-control-expose-headers'], /WWW-Authenticate/);
  t.match(refused.headers.vary, /Origin/, 'an answer naming one origin varies by origin');
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const granted = await post(server.url, '/ext/info', NODE_VERSION, { token, headers: [['Origin', 'https://swap.dapps.example']] });
  t.equal(granted.status, 200);
  t.equal(granted.headers['access-control-allow-origin'], 'https://swap.dapps.example', 'a pattern with "*"');
  const preflighted = await preflight(server.url, WALLET);
  t.equal(preflighted.status, 204);
  t.equal(preflighted.headers['access-control-allow-origin'], WALLET);
});

t.test('an origin that is not allowed gets no CORS headers, and its preflight is refused like any request without a token', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ['--http-allowed-origins', WALLET] });
  for (const origin of ['https://evil.example', 'https://wallet.example.evil', 'http://wallet.example']) {
    const response = await preflight(server.url, origin);
    expectRefused(t, response, REASONS.noToken, `preflight from ${origin}`);
    noCors(t, response, `preflight from ${origin}`);
    noCors(t, await post(server.url, '/ext/info', NODE_VERSION, { headers: [['Origin', origin]] }), `POST from ${origin}`);
  }
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const noOrigin = await post(server.url, '/ext/info', NODE_VERSION, { token, headers: [['Origin', '']] });
  t.equal(noOrigin.status, 200);
  noCors(t, noOrigin, 'no Origin at all');
});

t.test('a preflight is answered only for a path the rules allow: the others are refused, whatever the origin', async (t) => {
  const server = byDefault;
  t.equal((await preflight(server.url, WALLET, '/ext/bc/X/rpc')).status, 204, 'a path the rules allow');
  const refused = await preflight(server.url, WALLET, '/ext/x/../info');
  t.equal(refused.status, 400, 'dot segments');
  t.equal(refused.headers['access-control-allow-origin'], '*', 'the refusal is readable by the page');
});

t.test("behind the proxy: the upstream gets the request, and the answer carries api-auth's CORS headers, not the upstream's", async (t) => {
  const upstream = await startUpstream(t, () => (_req, res) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Content-Type', 'application/json');
    res.end('{"jsonrpc":"2.0","result":{},"id":1}');
  });
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--http-allowed-origins', WALLET] });
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const allowed = await post(server.url, '/ext/info', NODE_VERSION, { token, headers: [['Origin', WALLET]] });
  t.equal(allowed.status, 200);
  t.equal(allowed.headers['access-control-allow-origin'], WALLET, 'one value, the allowed origin');
  const other = await post(server.url, '/ext/info', NODE_VERSION, { token, headers: [['Origin', 'https://evil.example']] });
  t.equal(other.status, 200, 'a request without CORS is served as before');
  noCors(t, other, 'the upstream\'s "*" is not passed on for an origin api-auth does not allow');
  t.equal((await preflight(server.url, WALLET)).status, 204, 'the preflight is answered by api-auth');
  t.equal(upstream.seen.length, 2, 'the preflight never reached the upstream');
});

t.test("api-auth's own routes answer no preflight: the token service above all, whatever the origin", async (t) => {
  const server = byDefault;
  for (const path of ['/ext/auth', '/ext/auth/health', '/ext/auth/check']) {
    const response = await preflight(server.url, 'https://any.example', path);
    t.not(response.status, 204, `${path}: not answered as a preflight (${response.status})`);
    noCors(t, response, path);
  }
  t.equal((await preflight(server.url, 'https://any.example', '/ext/info')).status, 204, "the node's endpoints still are");
});

t.test('a "*" stands for whole labels in front of a domain; any other place is refused at start with exit 2', async (t) => {
  for (const origin of [
    'https://*example',
    'https://*example.com',
    'https://wallet*.example',
    'https://wal*let.example',
    'https://wallet.example:*',
    'https://*',
    'https://*.*.example',
    '*://wallet.example',
  ]) {
    const dir = tempDir(t);
    const result = await runCli(t, ['--http-port', '0', '--data-dir', dir, '--http-allowed-origins', `https://wallet.example ${origin}`]);
    t.equal(result.code, 2, `${origin}: exit 2`);
    t.equal(
      result.stderr,
      `api-auth: --http-allowed-origins: ${JSON.stringify(origin)} is not an origin: give scheme://host[:port] such as ` +
        'https://wallet.example, scheme://*.domain[:port] for its subdomains (https://*.wallet.example), or "*" for every origin\n',
      origin,
    );
  }
  const server = await startServer(t, { cheapChecks: true, args: ['--http-allowed-origins', 'https://*.example:8443'] });
  t.equal(
    (await preflight(server.url, 'https://a.b.example:8443')).headers['access-control-allow-origin'],
    'https://a.b.example:8443',
    'subdomains at any depth, with the port given',
  );
  for (const origin of ['https://evilexample:8443', 'https://a.example', 'https://.example:8443'])
    noCors(t, await preflight(server.url, origin), origin);
});

t.test('a bad origin is one clear line and exit 2', async (t) => {
  const dir = tempDir(t);
  const result = await runCli(t, ['--http-port', '0', '--data-dir', dir, '--http-allowed-origins', 'wallet.example']);
  t.equal(result.code, 2);
  t.match(result.stderr, /^api-auth: --http-allowed-origins: "wallet\.example" is not an origin: give scheme:\/\/host\[:port\]/);
  t.equal(result.stderr.trim().split('\n').length, 1);
});
