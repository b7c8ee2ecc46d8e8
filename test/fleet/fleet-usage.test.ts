// Usage in a fleet on a real etcd: each gateway publishes its counts under a key
// of its own, bound to no lease, and listTokens on any gateway shows the fleet's: the calls
// summed, the latest last use, those of gateways that stopped or died included; the clean-up
// drops the counts of expired tokens.
import { Etcd3 } from 'etcd3';
import t, { type Test } from 'tap';
import { authUrl, call, listTokens, newToken } from '../helpers/auth.js';
import { seededEtcd, startGateway } from '../helpers/etcd.js';
import type { Etcd, Gateway } from '../helpers/etcd.js';
import { jsonrpc } from '../helpers/http.js';
import { sleep } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s'];
const INFO = '/ext/info';

// Two tests at a time: each has its etcd and gateways of its own (twoGateways), and waits on
// the counts' publication (every 5 s) and an expiry more than it computes.
t.jobs = 2;

interface Listed {
  id: string;
  requests: number;
  lastUsedAt: string | null;
}

/**
 * The gateway's list once it shows `requests` for the first token: the others' counts
 * arrive with their next publication (every 5 s), so this waits for a condition, not a time.
 */
async function showsRequests(gateway: Gateway, password: string, requests: number): Promise<Listed[]> {
  for (;;) {
    const tokens = await listTokens<Listed>(gateway.url, password);
    if (tokens[0]?.requests === requests) return tokens;
    await sleep(200);
  }
}

/**
 * A real etcd, a password file, and two gateways of one fleet on them. The fleet is seeded
 * as its first gateway would seed it, with a record whose checks cost next to nothing:
 * these tests are about usage counts, not the seeding or hashing.
 */
async function twoGateways(t: Test) {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const [a, b] = await Promise.all([startGateway(t, etcd, passwordFile, LEASE), startGateway(t, etcd, passwordFile, LEASE)]);
  return { etcd, password, passwordFile, a, b };
}

t.test('two gateways: listTokens on either shows the calls of both, summed, and the latest last use', async (t) => {
  const { etcd, password, passwordFile, a, b } = await twoGateways(t);
  const plain = await newToken(a.url, password, [INFO]);
  const limited = (await jsonrpc(authUrl(b.url), 'auth.newToken', { password, endpoints: [INFO], rateLimit: '100/s' })).result
    ?.token as string;
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

  // A's counts stay when A stops: a clean stop gives its lease back at once, and publishes
  // its last counts first (this call may not have been published yet).
  t.equal((await call(a.url, INFO, plain)).status, 200);
  t.equal((await a.stop('SIGTERM')).code, 0);
  const after = await listTokens<Listed>(b.url, password);
  t.equal(after[0].requests, 6, "B shows A's calls after A stopped");
  t.equal(after[1].requests, 3);
  const scraper = await newToken(b.url, password, ['/ext/metrics']);
  t.match((await call(b.url, '/ext/metrics', scraper, 'GET')).text, /\napi_auth_usage_uncounted_total 0\n/);

  // And when a gateway dies once its counts were published: kill -9 loses only what it had not published yet.
  const c = await startGateway(t, etcd, passwordFile, LEASE);
  for (let i = 0; i < 4; i++) t.equal((await call(c.url, INFO, plain)).status, 200);
  await showsRequests(b, password, 10);
  await c.stop('SIGKILL');
  // A change waits for every member's key to hold it or be gone: once it answers, C's lease has expired.
  await newToken(b.url, password, [INFO]);
  const survived = await listTokens<Listed>(b.url, password);
  t.equal(survived[0].requests, 10, 'B shows the calls of a gateway killed after it published them');
  t.equal(survived[1].requests, 3);
});

/** The fleet's usage keys' values (the counts of each gateway that published). */
async function usageKeys(etcd: Etcd): Promise<number[][][]> {
  const client = new Etcd3({ hosts: etcd.url });
  try {
    const all = await client.getAll().prefix('/api-auth.usage/').strings();
    return Object.values(all).map((v) => (JSON.parse(v) as { tokens: number[][] }).tokens);
  } finally {
    client.close();
  }
}

t.test('the clean-up drops the counts of expired tokens, and the keys of stopped gateways left with none', async (t) => {
  const { etcd, password, passwordFile, a, b } = await twoGateways(t);
  const plain = await newToken(a.url, password, [INFO]);
  const short = (await jsonrpc(authUrl(a.url), 'auth.newToken', { password, endpoints: [INFO], expiresIn: '3s' })).result?.token as string;
  const expiresAt = Date.now() + 3000;
  t.equal((await call(a.url, INFO, short)).status, 200);
  for (let i = 0; i < 3; i++) t.equal((await call(b.url, INFO, plain)).status, 200);
  t.equal((await call(b.url, INFO, short)).status, 200);
  t.equal((await a.stop('SIGTERM')).code, 0);
  t.equal((await b.stop('SIGTERM')).code, 0);
  const counts = (await usageKeys(etcd)).map((tokens) => tokens.map(([, requests]) => requests).sort());
  t.same(
    counts.sort((x, y) => x.length - y.length),
    [[1], [1, 3]],
    'A counted the short token, B both',
  );

  // The expiry is a condition here: the token must be past it when the next gateway tidies.
  while (Date.now() <= expiresAt + 1000) await sleep(200);
  // Alone in the fleet, the new gateway is the one that cleans up, at once when it joins.
  const c = await startGateway(t, etcd, passwordFile, LEASE);
  for (;;) {
    const left = await usageKeys(etcd);
    if (left.length === 1 && left[0].length === 1) {
      t.equal(left[0][0][1], 3, "B's key holds the live token's calls alone; A's key, left with none, is gone");
      break;
    }
    await sleep(200);
  }
  const tokens = await listTokens<Listed>(c.url, password);
  t.equal(tokens.find((e) => e.requests === 3) !== undefined, true, 'the live token still shows its calls');
});
