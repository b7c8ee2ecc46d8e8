// /ext/auth/check: the gate's verdict for the request a proxy in front names, asked
// directly and through nginx auth_request and Caddy forward_auth run for real.
import t from 'tap';
import type { Test } from 'tap';
import { BAD_PATH_REASON, expectRefused, newToken, REASONS, refusalBody, REVOKED, revokeToken } from './helpers/auth.js';
import { startCaddy, startNginx } from './helpers/front-proxy.js';
import type { FrontProxy } from './helpers/front-proxy.js';
import { request } from './helpers/http.js';
import type { HttpResponse } from './helpers/http.js';
import { startServer } from './helpers/server.js';
import type { Server } from './helpers/server.js';
import { startUpstream } from './helpers/upstream.js';
import type { Upstream } from './helpers/upstream.js';

const CHECK = '/ext/auth/check';

function check(base: string, headers: ReadonlyArray<readonly [string, string]>): Promise<HttpResponse> {
  return request(base, CHECK, { method: 'GET', headers });
}

const server = await startServer(t);
const info = await newToken(server.url, server.password, ['/ext/info']);

t.test('needs no token, and without the original URI says which headers name it', async (t) => {
  const response = await check(server.url, []);
  t.equal(response.status, 400);
  t.equal(response.headers['content-type'], 'application/json');
  const message: string = JSON.parse(response.text).error.message;
  t.match(message, /X-Original-URI/);
  t.match(message, /X-Forwarded-Uri/);
});

t.test('a token that grants the original path: 200', async (t) => {
  for (const name of ['X-Original-URI', 'X-Forwarded-Uri']) {
    const response = await check(server.url, [[name, '/ext/info?verbose=1'], ['Authorization', `Bearer ${info}`]]);
    t.equal(response.status, 200, `${name}, the query left out`);
  }
});

t.test('refused as the gate refuses: the same status, headers and body', async (t) => {
  expectRefused(t, await check(server.url, [['X-Original-URI', '/ext/bc/X']]), REASONS.noToken, 'no token');
  expectRefused(t, await check(server.url, [['X-Forwarded-Uri', '/ext/bc/X'], ['Authorization', `Bearer ${info}`]]), REASONS.notGranted,
    'not granted');
  expectRefused(t, await check(server.url, [['X-Original-URI', '/ext/info'], ['Authorization', 'Basic abc']]), REASONS.badHeader,
    'not a bearer token');
  const badPath = await check(server.url, [['X-Original-URI', '/ext/x/../info'], ['Authorization', `Bearer ${info}`]]);
  t.equal(badPath.status, 400, 'a path the rules refuse: 400, whatever the token');
  t.equal(badPath.text, refusalBody(BAD_PATH_REASON));
  const token = await newToken(server.url, server.password, ['/ext/info']);
  await revokeToken(server.url, server.password, token);
  expectRefused(t, await check(server.url, [['X-Original-URI', '/ext/info'], ['Authorization', `Bearer ${token}`]]), REASONS.revoked, 'revoked');
});

t.test('X-Original-URI wins over X-Forwarded-Uri, and an original CONNECT is refused', async (t) => {
  const response = await check(server.url, [['X-Original-URI', '/ext/info'], ['X-Forwarded-Uri', '/ext/bc/X'], ['Authorization', `Bearer ${info}`]]);
  t.equal(response.status, 200);
  const connect = await check(server.url, [['X-Original-URI', '/ext/info'], ['X-Original-Method', 'CONNECT'], ['Authorization', `Bearer ${info}`]]);
  t.equal(connect.status, 405);
});

/** The four cases every proxy in front must get right. */
async function throughProxy(t: Test, front: FrontProxy, upstream: Upstream, api: Server, gateBody: boolean): Promise<void> {
  const granted = await newToken(api.url, api.password, ['/ext/info']);
  const revoked = await newToken(api.url, api.password, ['/ext/info']);
  // The token service itself is reached through the proxy too.
  t.same(await revokeToken(front.url, api.password, revoked), REVOKED, 'auth.revokeToken through the proxy');

  const ok = await request(front.url, '/ext/info?x=1', { headers: [['Authorization', `Bearer ${granted}`]] });
  t.equal(ok.status, 200, `granted: ${ok.text} ${front.stderr()}`);
  t.equal(upstream.seen.length, 1, 'the upstream got the granted request');
  t.equal(upstream.seen[0].url, '/ext/info?x=1');
  t.equal(upstream.seen[0].headers.authorization, undefined, 'without the token');

  const cases: [string, ReadonlyArray<readonly [string, string]>, string, string][] = [
    ['not granted', [['Authorization', `Bearer ${granted}`]], '/ext/bc/X', REASONS.notGranted],
    ['no token', [], '/ext/info', REASONS.noToken],
    ['revoked', [['Authorization', `Bearer ${revoked}`]], '/ext/info', REASONS.revoked],
  ];
  for (const [label, headers, path, reason] of cases) {
    const response = await request(front.url, path, { headers });
    t.equal(response.status, 401, `${label}: 401`);
    t.equal(response.headers['www-authenticate'], 'Bearer', `${label}: the challenge`);
    if (gateBody) t.equal(response.text, refusalBody(reason), `${label}: the gate's body`);
  }
  t.equal(upstream.seen.length, 1, 'no refused request reached the upstream');
}

t.test('nginx auth_request in front: granted, not granted, no token, revoked', async (t) => {
  const upstream = await startUpstream(t);
  const api = await startServer(t);
  const nginx = await startNginx(t, api.port, upstream.port);
  // nginx answers a refusal with its own page; the status and the challenge are the gate's.
  await throughProxy(t, nginx, upstream, api, false);
});

t.test('Caddy forward_auth in front: granted, not granted, no token, revoked, with the gate\'s own answers', async (t) => {
  const upstream = await startUpstream(t);
  const api = await startServer(t);
  const caddy = await startCaddy(t, api.port, upstream.port);
  await throughProxy(t, caddy, upstream, api, true);
});
