// Token limits in a fleet on a real etcd: three gateways, each letting a token
// through at rate / live gateways and burst / gateways (rounded up), with no call between
// them per request; the share is taken anew when a member leaves.
import t from 'tap';
import { call, newToken } from '../helpers/auth.js';
import { seededEtcd, startGateway } from '../helpers/etcd.js';
import type { Gateway } from '../helpers/etcd.js';
import { jsonrpc } from '../helpers/http.js';
import { sleep } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s'];
const INFO = '/ext/info';

/** Waits until the gateway's metrics say it sees `count` live members (a condition, not a time: the lease bounds it). */
async function seesMembers(gateway: Gateway, scraper: string, count: number): Promise<void> {
  for (;;) {
    const text = (await call(gateway.url, '/ext/metrics', scraper, 'GET')).text;
    if (new RegExp(`^api_auth_fleet_members ${count}$`, 'm').test(text)) return;
    await sleep(100);
  }
}

async function limitedToken(gateway: Gateway, password: string, burst: number): Promise<string> {
  // 1 call per hour: nothing refills while the test runs, so the counts are exact.
  const answer = await jsonrpc(`${gateway.url}/ext/auth`, 'auth.newToken', { password, endpoints: [INFO], rateLimit: '1/h', burst });
  return answer.result?.token as string;
}

/** How many of `calls` calls on each gateway were let through. */
async function letThrough(gateways: readonly Gateway[], token: string, calls: number): Promise<number[]> {
  const passed: number[] = [];
  for (const g of gateways) {
    let n = 0;
    for (let i = 0; i < calls; i++) if ((await call(g.url, INFO, token)).status === 200) n++;
    passed.push(n);
  }
  return passed;
}

t.test("three gateways share a token's rate: each a third of the burst; two, once one has left, each a half", async (t) => {
  // Seeded as the first gateway would, with a record whose checks cost next to nothing:
  // this test is about the shares of a token's rate, not the seeding or hashing.
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const a = await startGateway(t, etcd, passwordFile, LEASE);
  const [b, c] = await Promise.all([startGateway(t, etcd, passwordFile, LEASE), startGateway(t, etcd, passwordFile, LEASE)]);
  const scraper = await newToken(a.url, password, ['/ext/metrics']);
  for (const g of [a, b, c]) await seesMembers(g, scraper, 3);

  const token = await limitedToken(a, password, 6);
  t.same(await letThrough([a, b, c], token, 4), [2, 2, 2], 'a burst of 6 over 3 gateways: 2 on each, 6 in all');

  const odd = await limitedToken(b, password, 7);
  t.same(await letThrough([a, b, c], odd, 4), [3, 3, 3], 'a burst of 7: 3 on each (rounded up), at most 2 over the burst in all');

  c.child.kill('SIGKILL');
  await c.exited;
  // Once C's lease has ended, A and B take half each.
  for (const g of [a, b]) await seesMembers(g, scraper, 2);
  const after = await limitedToken(a, password, 6);
  t.same(await letThrough([a, b], after, 4), [3, 3], 'two gateways left: 3 on each, 6 in all');
});
