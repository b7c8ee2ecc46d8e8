// Usage over time in a fleet on a real etcd: each gateway publishes its hourly
// counts under keys of its own (/<cluster>.usage-history/<id>/...), and auth.usageHistory
// on any gateway sums the fleet's, those of stopped gateways included; the clean-up drops
// the entries of expired tokens and the parts left empty. The gateways run on the system's
// clock, so the checks sum the hours rather than name one: an hour may turn during a test.
import { Etcd3 } from 'etcd3';
import t, { type Test } from 'tap';
import { authUrl, call, newToken } from '../helpers/auth.js';
import { seededEtcd, startGateway } from '../helpers/etcd.js';
import type { Etcd, Gateway } from '../helpers/etcd.js';
import { jsonrpc } from '../helpers/http.js';
import { sleep } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s'];
const INFO = '/ext/info';

// Two tests at a time: each has its etcd and gateways of its own (twoGateways), and waits on
// the counts' publication (every 5 s) and an expiry more than it computes.
t.jobs = 2;

interface Hour {
  at: string;
  requests: number;
  refusals: Record<string, number>;
}

async function hours(gateway: Gateway, password: string, id?: string): Promise<Hour[]> {
  const answer = await jsonrpc(authUrl(gateway.url), 'auth.usageHistory', id === undefined ? { password } : { password, id });
  if (answer.result === undefined) throw new Error(`usageHistory failed: ${JSON.stringify(answer.error)}`);
  return (answer.result as { hours: Hour[] }).hours;
}

const sum = (list: Hour[], of: (h: Hour) => number = (h) => h.requests): number => list.reduce((n, h) => n + of(h), 0);

/** The gateway's history once its hours sum to `requests` (of `id`, or node-wide): the others' counts arrive with their next publication (every 5 s). */
async function sumsTo(gateway: Gateway, password: string, requests: number, id?: string): Promise<Hour[]> {
  for (;;) {
    const list = await hours(gateway, password, id);
    if (sum(list) === requests) return list;
    await sleep(200);
  }
}

async function twoGateways(t: Test) {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const [a, b] = await Promise.all([startGateway(t, etcd, passwordFile, LEASE), startGateway(t, etcd, passwordFile, LEASE)]);
  return { etcd, password, passwordFile, a, b };
}

async function tokenId(gateway: Gateway, password: string, index: number): Promise<string> {
  const listed = await jsonrpc(authUrl(gateway.url), 'auth.listTokens', { password });
  return (listed.result as { tokens: { id: string }[] }).tokens[index].id;
}

t.test('two gateways: auth.usageHistory on either sums the calls and refusals of both', async (t) => {
  const { password, a, b } = await twoGateways(t);
  const one = await newToken(a.url, password, [INFO]);
  const other = await newToken(b.url, password, [INFO]);
  const oneId = await tokenId(a, password, 0);
  const otherId = await tokenId(a, password, 1);
  for (let i = 0; i < 3; i++) t.equal((await call(a.url, INFO, one)).status, 200);
  for (let i = 0; i < 2; i++) t.equal((await call(b.url, INFO, one)).status, 200);
  t.equal((await call(b.url, INFO, other)).status, 200);
  t.equal((await call(a.url, INFO)).status, 401, 'no token, on A');
  for (let i = 0; i < 2; i++) t.equal((await call(b.url, INFO)).status, 401, 'no token, on B');

  for (const gateway of [a, b]) {
    const ofOne = await sumsTo(gateway, password, 5, oneId);
    t.equal(ofOne.length, 168);
    t.same(sum(await hours(gateway, password, otherId)), 1, 'the other token: its call on B');
    const node = await sumsTo(gateway, password, 6);
    t.equal(
      sum(node, (h) => h.refusals['no token']),
      3,
      'the refusals of both gateways, by reason',
    );
  }

  // A's hours stay when A stops: a clean stop publishes its last counts.
  t.equal((await call(a.url, INFO, one)).status, 200);
  t.equal((await a.stop('SIGTERM')).code, 0);
  t.equal(sum(await hours(b, password, oneId)), 6, "B shows A's calls after A stopped");
});

/** The fleet's usage history parts: by key, the serials of the tokens each holds (undefined for a node part). */
async function historyKeys(etcd: Etcd): Promise<Record<string, number[] | undefined>> {
  const client = new Etcd3({ hosts: etcd.url });
  try {
    const all = await client.getAll().prefix('/api-auth.usage-history/').strings();
    return Object.fromEntries(
      Object.entries(all).map(([key, value]) => [key, (JSON.parse(value) as { tokens?: number[][] }).tokens?.map((e) => e[0])]),
    );
  } finally {
    client.close();
  }
}

t.test('the clean-up drops the hours of expired tokens, and the parts left with none', async (t) => {
  const { etcd, password, passwordFile, a, b } = await twoGateways(t);
  const plain = await newToken(a.url, password, [INFO]);
  const short = (await jsonrpc(authUrl(a.url), 'auth.newToken', { password, endpoints: [INFO], expiresIn: '3s' })).result?.token as string;
  const expiresAt = Date.now() + 3000;
  t.equal((await call(a.url, INFO, short)).status, 200);
  t.equal((await call(b.url, INFO, plain)).status, 200);
  t.equal((await call(b.url, INFO, short)).status, 200);
  t.equal((await a.stop('SIGTERM')).code, 0);
  t.equal((await b.stop('SIGTERM')).code, 0);
  const parts = Object.values(await historyKeys(etcd))
    .filter((serials) => serials !== undefined)
    .map((s) => s!.length)
    .sort();
  t.same(parts, [1, 2], "A published the short token's hours, B both tokens'");

  while (Date.now() <= expiresAt + 1000) await sleep(200);
  // Alone in the fleet, the new gateway is the one that cleans up, at once when it joins.
  const c = await startGateway(t, etcd, passwordFile, LEASE);
  for (;;) {
    const left = Object.values(await historyKeys(etcd)).filter((serials) => serials !== undefined);
    if (left.length === 1 && left[0]!.length === 1) break;
    await sleep(200);
  }
  const nodes = Object.entries(await historyKeys(etcd))
    .filter(([, serials]) => serials === undefined)
    .map(([key]) => key);
  t.equal(nodes.length, 2, "each stopped gateway's node part stays: its hours are still in the window");
  const id = await tokenId(c, password, 0);
  t.equal(sum(await hours(c, password, id)), 1, 'the live token still shows its call');
  t.equal(sum(await hours(c, password)), 3, "node-wide: every call, the expired token's too");
});
