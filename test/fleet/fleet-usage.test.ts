// Usage in a fleet (issue 25) on a real etcd: each gateway publishes its counts under a key
// bound to its lease, and listTokens on any gateway shows the fleet's: the calls summed,
// the latest last use.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { authUrl, call, newToken } from '../helpers/auth.js';
import { startEtcd, startGateway } from '../helpers/etcd.js';
import type { Gateway } from '../helpers/etcd.js';
import { jsonrpc } from '../helpers/http.js';
import { randomPassword, sleep, tempDir } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s'];
const INFO = '/ext/info';

interface Listed { id: string; requests: number; lastUsedAt: string | null }

async function listed(gateway: Gateway, password: string): Promise<Listed[]> {
  const answer = await jsonrpc(authUrl(gateway.url), 'auth.listTokens', { password });
  return (answer.result as { tokens: Listed[] }).tokens;
}

/**
 * The gateway's list once it shows `requests` for the first token: the others' counts
 * arrive with their next publication (every 5 s), so this waits for a condition, not a time.
 */
async function showsRequests(gateway: Gateway, password: string, requests: number): Promise<Listed[]> {
  for (;;) {
    const tokens = await listed(gateway, password);
    if (tokens[0]?.requests === requests) return tokens;
    await sleep(200);
  }
}

t.test('two gateways: listTokens on either shows the calls of both, summed, and the latest last use', async (t) => {
  const etcd = await startEtcd(t);
  const password = randomPassword();
  const passwordFile = join(tempDir(t), 'password');
  writeFileSync(passwordFile, password, { mode: 0o600 });
  const [a, b] = await Promise.all([startGateway(t, etcd, passwordFile, LEASE), startGateway(t, etcd, passwordFile, LEASE)]);
  const plain = await newToken(a.url, password, [INFO]);
  const limited = (await jsonrpc(authUrl(b.url), 'auth.newToken', { password, endpoints: [INFO], rateLimit: '100/s' })).result?.token as string;
  for (let i = 0; i < 3; i++) t.equal((await call(a.url, INFO, plain)).status, 200);
  for (let i = 0; i < 2; i++) t.equal((await call(b.url, INFO, plain)).status, 200);
  t.equal((await call(a.url, INFO, limited)).status, 200);
  t.equal((await call(b.url, INFO, limited)).status, 200);
  t.equal((await call(b.url, INFO, limited)).status, 200);

  const onA = await showsRequests(a, password, 5);
  const onB = await showsRequests(b, password, 5);
  t.equal(onA[1].requests, 3, 'a token with limits: 1 call on A and 2 on B');
  t.same(onB, onA, 'both gateways show the same counts and last uses');
  t.not(onA[0].lastUsedAt, null);
  const latest = Math.max(Date.parse(onA[0].lastUsedAt!), Date.parse(onA[1].lastUsedAt!));
  t.ok(latest <= Date.now(), 'a last use that happened');

  // A's count leaves with A: its key goes with its lease (a clean stop gives the lease back).
  t.equal((await a.stop('SIGTERM')).code, 0);
  const after = await showsRequests(b, password, 2);
  t.equal(after[1].requests, 2, 'B alone: its own calls');
  const scraper = await newToken(b.url, password, ['/ext/metrics']);
  t.match((await call(b.url, '/ext/metrics', scraper, 'GET')).text, /\napi_auth_usage_uncounted_total 0\n/);
});
