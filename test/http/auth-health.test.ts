// GET /ext/auth/health: api-auth's own readiness, without a token, for a load balancer;
// with --upstream it says whether the upstream takes connections. /ext/health stays the node's.
// GET /ext/auth/live: its liveness, for a supervisor's probe: 200 whatever the node's state.
import t from 'tap';
import { REASONS, expectRefused } from '../helpers/auth.js';
import { request } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import { closedPort, startUpstream } from '../helpers/upstream.js';

const HEALTH = '/ext/auth/health';
const LIVE = '/ext/auth/live';

t.test('answers 200 without a token once serving; /ext/health still needs one', async (t) => {
  const server = await startServer(t);
  const response = await request(server.url, HEALTH);
  t.equal(response.status, 200);
  t.equal(response.headers['content-type'], 'application/json');
  t.same(JSON.parse(response.text), { healthy: true, checks: { state: { healthy: true }, listener: { healthy: true } } });
  const head = await request(server.url, HEALTH, { method: 'HEAD' });
  t.equal(head.status, 200, 'HEAD too');
  t.equal(head.body.length, 0);
  expectRefused(t, await request(server.url, '/ext/health'), REASONS.noToken, "/ext/health is the node's, gated");
  t.equal((await request(server.url, HEALTH, { method: 'POST', body: '{}' })).status, 405, 'POST is not a probe');
});

t.test('also without --api-auth-required', async (t) => {
  const server = await startServer(t, { auth: false });
  t.equal((await request(server.url, HEALTH)).status, 200);
});

t.test('with --upstream: 200 while the upstream takes connections, 503 naming it when it does not', async (t) => {
  const upstream = await startUpstream(t);
  const up = await startServer(t, { args: ['--upstream', upstream.url] });
  const healthy = await request(up.url, HEALTH);
  t.equal(healthy.status, 200);
  t.same(JSON.parse(healthy.text).checks.upstream, { healthy: true });
  t.equal(upstream.seen.length, 0, 'the probe is a connection, not a request the node must answer');

  const down = await startServer(t, { args: ['--upstream', `http://127.0.0.1:${await closedPort()}`] });
  const unhealthy = await request(down.url, HEALTH);
  t.equal(unhealthy.status, 503);
  const body = JSON.parse(unhealthy.text);
  t.equal(body.healthy, false);
  t.equal(body.checks.upstream.healthy, false);
  t.match(body.checks.upstream.error, /could not be reached \(ECONNREFUSED\)/);
  t.same(body.checks.state, { healthy: true });
});

t.test('on several HTTP threads too', async (t) => {
  const server = await startServer(t, { args: ['--http-threads', '2'] });
  t.equal((await request(server.url, HEALTH)).status, 200);
});

t.test('/ext/auth/live: 200 without a token, no-store, GET and HEAD only, with auth on or off', async (t) => {
  for (const auth of [true, false]) {
    const server = await startServer(t, { auth });
    const live = await request(server.url, LIVE);
    t.equal(live.status, 200, `auth ${auth ? 'on' : 'off'}`);
    t.equal(live.headers['content-type'], 'application/json');
    t.equal(live.headers['cache-control'], 'no-store', "a probe's answer is never a cached one");
    t.same(JSON.parse(live.text), { live: true });
    const head = await request(server.url, LIVE, { method: 'HEAD' });
    t.equal(head.status, 200, 'HEAD too');
    t.equal(head.body.length, 0);
    const post = await request(server.url, LIVE, { method: 'POST', body: '{}' });
    t.equal(post.status, 405, 'POST is not a probe');
    t.equal(post.headers.allow, 'GET, HEAD');
  }
});

t.test(
  '/ext/auth/live stays 200 while the node is down and readiness is 503: a supervisor does not restart the gateway for it',
  async (t) => {
    const down = await startServer(t, { args: ['--upstream', `http://127.0.0.1:${await closedPort()}`] });
    t.equal((await request(down.url, HEALTH)).status, 503, 'not ready');
    const live = await request(down.url, LIVE);
    t.equal(live.status, 200, 'but alive');
    t.same(JSON.parse(live.text), { live: true });
  },
);

t.test("/ext/auth/live is api-auth's own on every HTTP thread, never forwarded to the node", async (t) => {
  const upstream = await startUpstream(t);
  const server = await startServer(t, { args: ['--upstream', upstream.url, '--http-threads', '2'] });
  for (let i = 0; i < 8; i++) t.equal((await request(server.url, LIVE)).status, 200);
  t.equal(upstream.seen.length, 0, 'the node saw none of them');
});
