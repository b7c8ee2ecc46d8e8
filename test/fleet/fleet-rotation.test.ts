// Rotation in a fleet on a real etcd: a token rotated through one gateway is
// linked, and its usage carried, on the other; the old token's end is applied by both
// gateways, and recorded as a revocation in etcd (which a Go follower reads); a gateway
// that restarts during the overlap ends it too.
import { Etcd3 } from 'etcd3';
import t from 'tap';
import { authUrl, call, expectGranted, expectRefused, listTokens, REASONS, refusedSoon } from '../helpers/auth.js';
import { restartGateway, seededEtcd, startGateway } from '../helpers/etcd.js';
import { jsonrpc } from '../helpers/http.js';
import { sleep } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s'];
const INFO = '/ext/info';

interface Listed {
  id: string;
  label: string | null;
  methods: string[] | null;
  revoked: boolean;
  rotatedFrom: string | null;
  rotatedTo: string | null;
  requests: number;
}

t.test(
  'two gateways: rotated through A, the old token ends on both, after its overlap or at once, and etcd holds the revocation',
  async (t) => {
    const { etcd, password, passwordFile } = await seededEtcd(t);
    const [a, b] = await Promise.all([startGateway(t, etcd, passwordFile, LEASE), startGateway(t, etcd, passwordFile, LEASE)]);
    const issued = (await jsonrpc(authUrl(a.url), 'auth.newToken', { password, endpoints: [INFO], label: 'partner', methods: ['info.*'] }))
      .result as { token: string; id: string };
    for (let i = 0; i < 2; i++) expectGranted(t, await call(a.url, INFO, issued.token), INFO);

    // Overlap 0: once the call answers, neither gateway lets the old token through.
    const first = (await jsonrpc(authUrl(a.url), 'auth.rotateToken', { password, token: issued.token })).result as {
      token: string;
      id: string;
    };
    expectRefused(t, await call(b.url, INFO, issued.token), REASONS.revoked, 'B refuses the old token as A answers');
    expectRefused(t, await call(a.url, INFO, issued.token), REASONS.revoked, 'and A');
    expectGranted(t, await call(b.url, INFO, first.token), INFO, 'B takes the new one');
    const onB = await listTokens<Listed>(b.url, password);
    t.match(onB, [
      { id: issued.id, revoked: true, rotatedTo: first.id },
      { id: first.id, label: 'partner', methods: ['info.*'], rotatedFrom: issued.id },
    ]);
    t.ok(onB[1].requests >= 2, "the old token's calls carried over");

    // An overlap through B, and A restarted meanwhile: A learns the end from etcd's state at
    // start (the overlap's own timing, on a clock the test drives, is test/http/token-rotation.test.ts's).
    const second = (await jsonrpc(authUrl(b.url), 'auth.rotateToken', { password, id: first.id, overlap: '4s' })).result as {
      token: string;
      id: string;
    };
    t.equal((await a.stop('SIGTERM')).code, 0);
    const a2 = await restartGateway(t, a);
    await refusedSoon(a2.url, first.token);
    await refusedSoon(b.url, first.token);
    expectRefused(t, await call(a2.url, INFO, first.token), REASONS.revoked, 'A, past the overlap');
    expectRefused(t, await call(b.url, INFO, first.token), REASONS.revoked, 'B, past the overlap');
    expectGranted(t, await call(a2.url, INFO, second.token), INFO);

    // The ends are recorded as revocations, kept until the old tokens expire.
    const client = new Etcd3({ hosts: etcd.url });
    t.teardown(() => client.close());
    for (;;) {
      const revoked = Object.keys(await client.getAll().prefix('/api-auth/revoked/').strings());
      if (revoked.length === 2) break;
      await sleep(200);
    }
    t.pass('etcd holds both revocations');
    const rotation = JSON.parse((await client.get(`/api-auth/tokens/${second.id.slice(1).padStart(16, '0')}`).string())!) as {
      rotation: unknown;
    };
    t.match(
      rotation.rotation,
      { from: Number(first.id.slice(1)), endsAt: Number, fromExpiry: Number },
      "the end travels in the new token's entry",
    );
  },
);
