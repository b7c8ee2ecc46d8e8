// A fleet gateway behind the proxy guide's nginx and Caddy (docs/guides/behind-a-proxy.md,
// run as test/http/auth-check.test.ts runs them): once it has lost touch with etcd, its
// check's 503 reaches the client as a 503 with -32046, not as nginx's 500.
import t from 'tap';
import { newToken } from '../helpers/auth.js';
import { seededEtcd, startGateway } from '../helpers/etcd.js';
import { startCaddy, startNginx } from '../helpers/front-proxy.js';
import { request } from '../helpers/http.js';
import { sleep } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';

t.test('a fenced gateway, through nginx and Caddy: its 503 with -32046 reaches the client, and nothing reaches the node', async (t) => {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const gateway = await startGateway(t, etcd, passwordFile, ['--cluster-lease', '2s']);
  const upstream = await startUpstream(t);
  const auth = [['Authorization', `Bearer ${await newToken(gateway.url, password, ['/ext/info'])}`]] as const;
  const fronts = [
    ['nginx', await startNginx(t, gateway.port, upstream.port)],
    ['Caddy', await startCaddy(t, gateway.port, upstream.port)],
  ] as const;
  for (const [name, front] of fronts) t.equal((await request(front.url, '/ext/info', { headers: auth })).status, 200, `${name}: served`);
  await etcd.kill();
  await gateway.waitForLog((l) => l.msg === 'cannot renew the fleet lease; protected requests get 503 once it runs out', 10_000);
  // The fence closes when the lease has run out, which nothing outside the process announces: ask until it has.
  const until = Date.now() + 20_000;
  while ((await request(gateway.url, '/ext/info', { headers: auth })).status !== 503) {
    if (Date.now() > until) throw new Error('the gateway never fenced itself');
    await sleep(100);
  }
  const direct = await request(gateway.url, '/ext/auth/check', { headers: [['X-Original-Request', 'GET /ext/info HTTP/1.1'], ...auth] });
  t.equal(direct.status, 503, 'the check answers 503');
  for (const [name, front] of fronts) {
    const fenced = await request(front.url, '/ext/info', { headers: auth });
    t.equal(fenced.status, 503, `${name}: 503 (${fenced.status} ${fenced.text})`);
    t.equal(fenced.headers['content-type'], 'application/json', `${name}: JSON`);
    t.match(JSON.parse(fenced.text), { jsonrpc: '2.0', error: { code: -32046 } }, `${name}: -32046`);
    t.equal(fenced.headers['retry-after'], direct.headers['retry-after'], `${name}: the check's Retry-After (none here)`);
  }
  t.equal(upstream.seen.length, fronts.length, 'nothing more reached the node');
});
