// A quota in a fleet on a real etcd: each gateway counts its own calls and, as often as it
// publishes them (every 5 s), reads the others' counts of the window; a call passes when
// its own count, the others' and the call's are within the quota. So the fleet lets
// through the quota, plus at most what the others let through since they last published.
// Each step here waits until the counts have travelled: a condition, not a time.
import t from 'tap';
import { authUrl, call, listTokens } from '../helpers/auth.js';
import { seededEtcd, startGateway } from '../helpers/etcd.js';
import type { Gateway } from '../helpers/etcd.js';
import { jsonrpc } from '../helpers/http.js';
import { sleep } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s'];
const INFO = '/ext/info';

interface Listed {
  id: string;
  requests: number;
  quota: { used: number; resetsAt: string } | null;
}

/** Token `id`'s listing on `gateway` once its quota shows `used` calls: the others' counts arrive with their next publication and this one's next read. */
async function showsUsed(gateway: Gateway, password: string, id: string, used: number): Promise<Listed> {
  for (;;) {
    const token = (await listTokens<Listed>(gateway.url, password)).find((e) => e.id === id);
    if (token?.quota?.used === used) return token;
    await sleep(200);
  }
}

t.test('two gateways count one quota: the calls on A are spent on B, and B refuses past their sum', async (t) => {
  const { password, passwordFile, etcd } = await seededEtcd(t);
  const [a, b] = await Promise.all([startGateway(t, etcd, passwordFile, LEASE), startGateway(t, etcd, passwordFile, LEASE)]);
  // A month's window, read before and after: should the test straddle its end (midnight
  // UTC on the first), the counts start again from 0 and the case is run again.
  for (;;) {
    const issued = await jsonrpc(authUrl(a.url), 'auth.newToken', { password, endpoints: [INFO], quota: { requests: 10, per: 'month' } });
    const { token, id } = issued.result as { token: string; id: string };
    const before = (await listTokens<Listed>(a.url, password)).find((e) => e.id === id)!.quota!.resetsAt;
    for (let i = 0; i < 6; i++) t.equal((await call(a.url, INFO, token)).status, 200, `call ${i + 1} on A`);
    const onB = await showsUsed(b, password, id, 6);
    t.equal(onB.requests, 6, "B lists A's calls");
    for (let i = 0; i < 4; i++) t.equal((await call(b.url, INFO, token)).status, 200, `call ${i + 1} on B: within the 4 left`);
    const refused = await call(b.url, INFO, token);
    t.equal(refused.status, 429, 'B refuses the 11th call');
    t.match(JSON.parse(refused.text), { error: { code: -32005, data: { resetsAt: before } } });
    await showsUsed(a, password, id, 10);
    t.equal((await call(a.url, INFO, token)).status, 429, "and A, once B's calls reached it");
    const after = (await listTokens<Listed>(a.url, password)).find((e) => e.id === id)!.quota!.resetsAt;
    if (after === before) break;
    t.comment('the month ended during the case: again, in the new one');
    await jsonrpc(authUrl(a.url), 'auth.revokeToken', { password, token });
  }
});
