// A fleet of gateways on a real etcd (test/helpers/etcd.ts): three api-auth processes
// started as an operator would, with --cluster-etcd. What one gateway does holds on the
// others as soon as its call returns; a gateway that is killed, stopped, or cut off
// from etcd never serves what the fleet has revoked. Requests go over fresh connections.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import t from 'tap';
import type { Test } from 'tap';
import { createLogger, startServer } from '../../build/host/index.js';
import {
  ALREADY_REVOKED,
  call,
  changePassword,
  expectRefused,
  newToken,
  REASONS,
  REVOKED,
  revokeToken,
  tryPassword,
  waitForStatus,
} from '../helpers/auth.js';
import { restartGateway, seededEtcd, startGateway } from '../helpers/etcd.js';
import { closedPort } from '../helpers/upstream.js';
import type { Etcd, Gateway } from '../helpers/etcd.js';
import { jsonrpc, postJson, request } from '../helpers/http.js';
import { randomPassword, runCli, tempDir } from '../helpers/server.js';

// Short, for the tests' waits; long enough that a loaded machine's late renewal does not fence a gateway.
const LEASE_SECONDS = 3;
const LEASE = ['--cluster-lease', `${LEASE_SECONDS}s`];
const INFO = '/ext/info';

// Two tests at a time: each has its etcd and gateways of its own (fleet()), and waits on
// leases and etcd more than it computes.
t.jobs = 2;

// Every fleet here is seeded as its first gateway would seed it, with a password record
// whose checks cost next to nothing (seedCheapFleet): these tests are about the fleet, not
// the seeding or hashing, and make many password checks.

interface Fleet {
  etcd: Etcd;
  password: string;
  passwordFile: string;
  gateways: Gateway[];
}

/** etcd and three gateways: A on two HTTP threads (shared core, fence in shared memory), B and C on one. */
async function fleet(t: Test, extra: readonly string[] = []): Promise<Fleet> {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const a = await startGateway(t, etcd, passwordFile, [...LEASE, '--http-threads', '2', ...extra]);
  const [b, c] = await Promise.all([
    startGateway(t, etcd, passwordFile, [...LEASE, '--http-threads', '1', ...extra]),
    startGateway(t, etcd, passwordFile, [...LEASE, '--http-threads', '1', ...extra]),
  ]);
  return { etcd, password, passwordFile, gateways: [a, b, c] };
}

async function status(gateway: Gateway, token: string): Promise<number> {
  return (await call(gateway.url, INFO, token)).status;
}

// Two tests on one fleet: the first leaves revoked tokens of the password, which the
// second, a password change made last, does not look at.
t.test("one fleet, for checks that leave each other's untouched", async (t) => {
  const {
    password,
    gateways: [a, b, c],
  } = await fleet(t);

  t.test('a token issued on A works on B and C at once; revoked on B, A and C refuse it as soon as the call returns', async (t) => {
    for (let round = 0; round < 15; round++) {
      const issuer = [a, b, c][round % 3];
      const revoker = [b, c, a][round % 3];
      const token = await newToken(issuer.url, password, [INFO]);
      const granted = await Promise.all([a, b, c].map((g) => status(g, token)));
      t.same(granted, [200, 200, 200], `round ${round}: issued on one, valid on all three at once`);
      t.same(await revokeToken(revoker.url, password, token), REVOKED, `round ${round}: revoked`);
      for (const g of [a, b, c]) expectRefused(t, await call(g.url, INFO, token), REASONS.revoked, `round ${round}`);
    }
    // Each gateway's metrics: the members it sees, its lease, its watch, its writes' barriers.
    const scraper = await newToken(a.url, password, ['/ext/metrics']);
    for (const g of [a, b, c]) {
      const text = (await call(g.url, '/ext/metrics', scraper, 'GET')).text;
      t.match(text, /^api_auth_fleet_members 3$/m, 'three live members');
      t.match(text, /^api_auth_fleet_lease_remaining_seconds (0\.\d*[1-9]|[1-9])/m, 'a lease with time left');
      t.match(text, /^api_auth_fleet_watch_lag_revisions \d+$/m);
      t.match(text, /^api_auth_fleet_barrier_duration_seconds_count [1-9]\d*$/m, 'its writes waited on the barrier');
    }
  });

  t.test('a password changed on C holds on A and B when the call returns; old tokens stop everywhere', async (t) => {
    const before = await newToken(a.url, password, [INFO]);
    const next = randomPassword();
    t.same(await changePassword(c.url, password, next), { success: true });
    for (const g of [a, b, c]) {
      t.equal(await tryPassword(g.url, password), undefined, 'the old password is refused');
      const token = await tryPassword(g.url, next);
      t.type(token, 'string', 'the new password issues');
      t.equal(await status(g, before), 401, 'a token of the old password is refused');
      t.same(await Promise.all([a, b, c].map((h) => status(h, token!))), [200, 200, 200], 'a new token works everywhere');
    }
  });
});

t.test(
  "the inventory and method scopes are the fleet's: issued on A with a label and methods, listed on B, revoked by id on C",
  async (t) => {
    const {
      password,
      gateways: [a, b, c],
    } = await fleet(t);
    const url = (g: Gateway): string => `${g.url}/ext/auth`;
    const issued = await jsonrpc(url(a), 'auth.newToken', {
      password,
      endpoints: [INFO],
      label: 'fleet dashboard',
      expiresIn: '1h',
      methods: ['info.getNodeVersion'],
    });
    const { token, id } = issued.result as { token: string; id: string };
    t.match(id, /^t\d+$/, 'an id');
    const other = await jsonrpc(url(b), 'auth.newToken', { password, endpoints: [INFO], methods: ['info.getNetworkID'] });
    const otherToken = (other.result as { token: string }).token;
    for (const g of [a, b, c]) {
      t.equal(await status(g, token), 200, 'a scoped token works on every gateway for its method');
      const refused = await call(g.url, INFO, otherToken);
      t.equal(refused.status, 200, 'and every gateway holds its scope: another method is refused, with its JSON-RPC error');
      t.match(JSON.parse(refused.text), { error: { code: -32047, message: /^the provided auth token does not allow method / } });
    }
    for (const g of [a, b, c]) {
      const listed = await jsonrpc(url(g), 'auth.listTokens', { password });
      const tokens = (
        listed.result as {
          tokens: { id: string; label: string | null; methods: string[] | null; revoked: boolean; expiresAt: string; issuedAt: string }[];
        }
      ).tokens;
      const entry = tokens.find((e) => e.id === id);
      t.ok(entry, 'every gateway lists the token as soon as newToken returned');
      t.equal(entry?.label, 'fleet dashboard');
      t.same(entry?.methods, ['info.getNodeVersion']);
      t.equal(entry?.revoked, false);
      t.equal(Date.parse(entry!.expiresAt) - Date.parse(entry!.issuedAt), 3600_000, 'its own lifetime');
      t.equal(tokens.length, 2, 'both tokens, issued on two gateways');
    }
    const revoked = await jsonrpc(url(c), 'auth.revokeToken', { password, id });
    t.same(revoked.result, REVOKED, 'revoked by id on a gateway that did not issue it');
    for (const g of [a, b, c])
      expectRefused(t, await call(g.url, INFO, token), REASONS.revoked, 'refused everywhere when the call returns');
    const again = await jsonrpc(url(a), 'auth.revokeToken', { password, id });
    t.same(again.result, ALREADY_REVOKED);
    const listed = await jsonrpc(url(b), 'auth.listTokens', { password });
    t.equal(
      (listed.result as { tokens: { id: string; revoked: boolean }[] }).tokens.find((e) => e.id === id)?.revoked,
      true,
      'listed revoked',
    );
    // A restarted gateway reads the inventory from etcd.
    await b.stop('SIGKILL');
    const back = await restartGateway(t, b);
    const relisted = await jsonrpc(url(back), 'auth.listTokens', { password });
    t.same(
      (relisted.result as { tokens: { id: string }[] }).tokens.map((e) => e.id).sort(),
      [id, (other.result as { id: string }).id].sort(),
      'after kill -9, the inventory is back',
    );
    // A new password: the inventory of the old one is listed nowhere.
    const next = randomPassword();
    t.same(await changePassword(a.url, password, next), { success: true });
    for (const g of [a, back, c]) {
      const empty = await jsonrpc(url(g), 'auth.listTokens', { password: next });
      t.same(empty.result, { tokens: [] }, 'a new password lists none of the earlier tokens');
    }
  },
);

t.test('a gateway killed with SIGKILL comes back with every change made while it was down', async (t) => {
  const {
    password,
    gateways: [a, b, c],
  } = await fleet(t);
  const kept = await newToken(a.url, password, [INFO]);
  const doomed = await newToken(b.url, password, [INFO]);
  await c.stop('SIGKILL');
  // Made while C is down: its lease still runs, so the revoke waits for it to expire.
  t.same(await revokeToken(a.url, password, doomed), REVOKED);
  // A grant and a serial block C has never seen.
  const later = await newToken(b.url, password, ['/ext/health', INFO]);
  const back = await restartGateway(t, c);
  expectRefused(t, await call(back.url, INFO, doomed), REASONS.revoked, 'revoked while down');
  t.equal(await status(back, kept), 200, 'issued before, still valid');
  t.equal(await status(back, later), 200, 'issued while down, with a grant made while down');
  const next = randomPassword();
  t.same(await changePassword(a.url, password, next), { success: true });
  await back.stop('SIGKILL');
  const again = await restartGateway(t, back);
  await again.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith("the password file differs from the fleet's password"));
  t.equal(await status(again, kept), 401, 'the password changed while it was down: earlier tokens are refused');
  t.type(await tryPassword(again.url, next), 'string', 'the new password is in force');
  t.equal(await tryPassword(again.url, password), undefined, "the password file's (the old one) is not");
});

t.test('a stopped gateway holds a revoke up for at most its lease, and once continued never serves the revoked token', async (t) => {
  const {
    etcd,
    password,
    gateways: [a, b, c],
  } = await fleet(t);
  const token = await newToken(a.url, password, [INFO]);
  t.equal(await status(c, token), 200);
  const client = new Etcd3({ hosts: etcd.url });
  t.teardown(() => client.close());
  const members = async (): Promise<string[]> => (await client.getAll().prefix('/api-auth/members/').keys()).sort();
  const before = await members();
  t.equal(before.length, 3, 'three members hold a lease');
  c.child.kill('SIGSTOP');
  t.teardown(() => {
    c.child.kill('SIGCONT');
  });
  // The barrier waits for every live member or its lease's end; C, stopped, applies
  // nothing, so a success that comes while C's key is gone came at its lease's end: the
  // event, not a time that a loaded machine stretches.
  t.same(await revokeToken(b.url, password, token), REVOKED);
  const after = await members();
  t.equal(after.length, 2, "the revoke returned once one lease, the stopped C's, had ended");
  t.ok(
    after.every((key) => before.includes(key)),
    "and A's and B's still hold",
  );
  expectRefused(t, await call(a.url, INFO, token), REASONS.revoked, 'on A');
  c.child.kill('SIGCONT');
  // Here C's watch stream stayed open, so the revocation waits in its socket; the
  // compaction test below breaks that stream, where only the fence keeps C from serving.
  // C's first answers, from the moment it runs again: never 200 for the token.
  const first = await call(c.url, INFO, token);
  t.not(first.status, 200, `C does not serve the revoked token (got ${first.status})`);
  if (first.status === 503) t.match(JSON.parse(first.text), { error: { code: -32046 } }, 'a clear 503');
  // It rejoins by itself: then it refuses the token as revoked, and serves the others.
  const rejoined = await c.waitForLog(
    (l) => l.msg === 'serving in the fleet' && l !== c.logs.find((m) => m.msg === 'serving in the fleet'),
    15_000,
  );
  t.ok(rejoined);
  expectRefused(t, await call(c.url, INFO, token), REASONS.revoked, 'after rejoining');
  t.equal(await status(c, await newToken(b.url, password, [INFO])), 200, 'it serves again');
});

t.test(
  'with etcd killed a revoke is never acknowledged, gateways 503 once their lease runs out, and all recover when etcd returns',
  async (t) => {
    const {
      etcd,
      password,
      gateways: [a, b, c],
    } = await fleet(t);
    const token = await newToken(a.url, password, [INFO]);
    await etcd.kill();
    const answer = await jsonrpc(`${b.url}/ext/auth`, 'auth.revokeToken', { password, token });
    t.equal(answer.result, undefined, 'no success');
    t.match(
      answer.error,
      { code: -32046, message: /the fleet's etcd did not answer, so the change is not confirmed/ },
      'an error that says why',
    );
    // Past the lease, every gateway refuses protected requests with 503.
    await a.waitForLog((l) => l.msg === 'cannot renew the fleet lease; protected requests get 503 once it runs out', 10_000);
    for (const g of [a, b, c]) {
      await waitForStatus(g.url, token, 503, 20_000);
      const fenced = await call(g.url, INFO, token);
      t.equal(fenced.headers['content-type'], 'application/json');
      t.match(JSON.parse(fenced.text), { error: { code: -32046, message: /lost touch with its fleet/ } }, 'a 503 that says why');
      const health = await request(g.url, '/ext/auth/health');
      t.equal(health.status, 503, 'not ready for a load balancer');
      t.match(JSON.parse(health.text), { healthy: false, checks: { fleet: { healthy: false } } });
      t.equal((await request(g.url, '/ext/auth/live')).status, 200, "but alive: a supervisor's probe does not restart it");
    }
    await etcd.start();
    for (const g of [a, b, c]) await waitForStatus(g.url, token, 200, 20_000);
    t.equal((await request(a.url, '/ext/auth/health')).status, 200, 'ready again');
    t.same(await revokeToken(c.url, password, token), REVOKED, 'the fleet takes changes again');
    for (const g of [a, b, c]) expectRefused(t, await call(g.url, INFO, token), REASONS.revoked);
    t.same(await revokeToken(a.url, password, token), ALREADY_REVOKED);
  },
);

t.test('a gateway whose watch fell behind a compaction reads the whole state again, and serves nothing revoked meanwhile', async (t) => {
  const {
    etcd,
    password,
    gateways: [a, b, c],
  } = await fleet(t);
  const token = await newToken(a.url, password, [INFO]);
  c.child.kill('SIGSTOP');
  t.teardown(() => {
    c.child.kill('SIGCONT');
  });
  // etcd restarts while C is stopped: C's watch stream is broken, and C cannot know yet.
  // What follows never reaches it through that stream, and then the history it would
  // resume its watch from is compacted away.
  await etcd.kill();
  await etcd.start();
  t.same(await revokeToken(b.url, password, token), REVOKED);
  const later = await newToken(a.url, password, ['/ext/health', INFO]);
  const client = new Etcd3({ hosts: etcd.url });
  const head = await client.get('/api-auth/key').exec();
  await client.kv.compact({ revision: head.header.revision, physical: true });
  client.close();
  c.child.kill('SIGCONT');
  const first = await call(c.url, INFO, token);
  t.not(first.status, 200, `C does not serve the revoked token (got ${first.status})`);
  await c.waitForLog((l) => l.msg === 'the fleet watch was cancelled; reading the whole state again', 20_000);
  await waitForStatus(c.url, later, 200, 20_000);
  expectRefused(t, await call(c.url, INFO, token), REASONS.revoked, 'after the resync');
  t.same(await revokeToken(c.url, password, later), REVOKED, 'it takes part in writes again');
  for (const g of [a, b, c]) expectRefused(t, await call(g.url, INFO, later), REASONS.revoked);
});

t.test('wrong passwords spread over the gateways and over many clients count against one fleet-wide allowance', async (t) => {
  const { password, gateways } = await fleet(t, ['--trusted-proxies', '127.0.0.1']);
  // 150 guesses, each from a client of its own (so no client's own limit is reached),
  // 50 to each gateway (so no gateway's overall burst of 100 is reached): only the
  // fleet's allowance of 100 per minute stops them.
  const answers: { code?: number }[] = [];
  for (let i = 0; i < 50; i++) {
    answers.push(
      ...(await Promise.all(
        gateways.map(async (g, k) => {
          const response = await postJson(
            `${g.url}/ext/auth`,
            { jsonrpc: '2.0', id: 1, method: 'auth.newToken', params: { password: `wrong-${i}-${k}`, endpoints: [INFO] } },
            [['X-Forwarded-For', `10.0.${k}.${i + 1}`]],
          );
          return (JSON.parse(response.text) as { error: { code?: number } }).error;
        }),
      )),
    );
  }
  const refused = answers.filter((e) => e.code === -32000).length;
  const throttled = answers.filter((e) => e.code === -32005).length;
  t.equal(refused + throttled, 150, 'every guess is refused');
  t.ok(refused <= 100 + 2, `at most the fleet's allowance was checked (${refused}; two gateways may count at the same moment)`);
  t.ok(refused >= 100 - 2, `the allowance was there (${refused})`);
  // Everyone waits now, on every gateway: even the right password, as with one gateway's overall limit.
  const answer = await postJson(
    `${gateways[1].url}/ext/auth`,
    { jsonrpc: '2.0', id: 1, method: 'auth.newToken', params: { password, endpoints: [INFO] } },
    [['X-Forwarded-For', '10.9.9.9']],
  );
  t.match(JSON.parse(answer.text), { error: { code: -32005, message: /too many failed password attempts; retry in \d+ s/ } });
});

t.test('revocations of expired tokens leave etcd', async (t) => {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const gateway = await startGateway(t, etcd, passwordFile, [...LEASE, '--http-threads', '1', '--api-auth-token-lifetime', '2s']);
  const token = await newToken(gateway.url, password, [INFO]);
  t.same(await revokeToken(gateway.url, password, token), REVOKED);
  const client = new Etcd3({ hosts: etcd.url });
  t.teardown(() => client.close());
  t.equal(await client.getAll().prefix('/api-auth/revoked/').count(), 1, 'the revocation is in etcd');
  // Once the token has expired (the gateway says so), the revocation is nothing to keep.
  await waitForReason(gateway, token, REASONS.expired);
  await gateway.stop();
  const again = await restartGateway(t, gateway);
  await again.waitForLog((l) => l.msg === 'deleted expired revocations, serial blocks and inventory entries from the fleet');
  t.equal(await client.getAll().prefix('/api-auth/revoked/').count(), 0, 'it is gone');
  expectRefused(t, await call(again.url, INFO, token), REASONS.expired);
});

t.test('a value in etcd that verification needs and is not what its key holds stops the start with a line naming the key', async (t) => {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const gateway = await startGateway(t, etcd, passwordFile, [...LEASE, '--http-threads', '1']);
  await newToken(gateway.url, password, [INFO]);
  await gateway.stop();
  const client = new Etcd3({ hosts: etcd.url });
  t.teardown(() => client.close());
  const [key] = await client.getAll().prefix('/api-auth/grants/').keys();
  await client.put(key).value('["/ext/info"');
  const run = await runCli(t, gateway.args, 20_000);
  t.equal(run.code, 2, 'the start fails as a start does');
  t.match(
    run.stderr,
    `cannot join the fleet api-auth through --cluster-etcd ${etcd.url}: the fleet api-auth holds a damaged key ${key} (it is not JSON)`,
  );
});

t.test("a fleet gateway's readiness reads its fence by the clock it is given, as its gate does", async (t) => {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const dir = tempDir(t);
  // A day behind the system's: the lease's deadline, and so the fence, are in this clock's time.
  const clock = (): number => Date.now() - 86_400_000;
  const server = await startServer(
    {
      port: 0,
      authRequired: true,
      passwordFile,
      dataDir: join(dir, 'data'),
      httpThreads: 1,
      clusterEtcd: etcd.url,
      clusterLease: `${LEASE_SECONDS}s`,
    },
    { clock, log: createLogger(() => undefined) },
  );
  t.teardown(() => server.stop());
  const base = `http://127.0.0.1:${server.port}`;
  t.equal((await call(base, INFO, await newToken(base, password, [INFO]))).status, 200, 'the gate serves');
  const health = await request(base, '/ext/auth/health');
  t.equal(health.status, 200, 'and the gateway is ready');
  t.match(JSON.parse(health.text), { healthy: true, checks: { fleet: { healthy: true } } });
});

t.test('the fleet flags are checked before anything starts, and an etcd that does not answer stops the start', async (t) => {
  const passwordFile = join(tempDir(t), 'password');
  writeFileSync(passwordFile, randomPassword(), { mode: 0o600 });
  const auth = ['--http-port', '0', '--api-auth-required', '--api-auth-password-file', passwordFile, '--data-dir', join(tempDir(t), 'd')];
  const cases: [string[], RegExp][] = [
    [['--cluster-name', 'x'], /--cluster-name sets how this gateway joins a fleet, and there is no --cluster-etcd/],
    [['--cluster-etcd', 'etcd.example:2379'], /--cluster-etcd must be etcd client URLs/],
    [['--cluster-etcd', 'https://etcd.example'], /--cluster-etcd must be etcd client URLs, http:\/\/ or https:\/\/ with host and port/],
    [['--cluster-etcd', 'http://127.0.0.1:2379', '--cluster-name', 'a/b'], /--cluster-name must be 1 to 64 letters/],
    [
      ['--cluster-etcd', 'http://127.0.0.1:2379', '--cluster-lease', '1s'],
      /--cluster-lease must be a duration in whole seconds from 2s to 300s/,
    ],
  ];
  for (const [flags, message] of cases) {
    const run = await runCli(t, [...auth, ...flags]);
    t.equal(run.code, 2, flags.join(' '));
    t.match(run.stderr, message);
  }
  const noAuth = await runCli(t, ['--http-port', '0', '--cluster-etcd', 'http://127.0.0.1:2379']);
  t.equal(noAuth.code, 2);
  t.match(noAuth.stderr, /--cluster-etcd shares the token state of a fleet, and without --api-auth-required there is none/);
  const nobody = `http://127.0.0.1:${await closedPort()}`;
  const down = await runCli(t, [...auth, '--cluster-etcd', nobody, '--cluster-lease', '2s'], 20_000);
  t.equal(down.code, 2, 'no fleet to join: the start fails');
  t.match(down.stderr, new RegExp(`cannot join the fleet api-auth through --cluster-etcd ${nobody}: .*check that etcd runs there`));
});

/** Asks until the gateway refuses the token with `reason` (its expiry comes with time). */
async function waitForReason(g: Gateway, token: string, reason: string): Promise<void> {
  const until = Date.now() + 20_000;
  for (;;) {
    const got = await call(g.url, INFO, token);
    if (got.text.includes(reason)) return;
    if (Date.now() > until) throw new Error(`${g.url} still answers ${got.status} ${got.text}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// A member key without a lease (as `etcdctl make-mirror` or a hand-written put leaves it;
// the same Put with no lease, here through the etcd client) is no member: no one renews
// it and nothing ever deletes it. The barrier does not wait for it, each gateway reports
// it once (a JSON warning naming the key, a gauge), and counts it nowhere.
t.test('a member key with no lease does not hold up the barrier; it is reported once', async (t) => {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const client = new Etcd3({ hosts: etcd.url });
  t.teardown(() => client.close());
  // One read with the whole state at the join, one through the watch.
  await client.put('/api-auth/members/0').value('{"applied":0}');
  const a = await startGateway(t, etcd, passwordFile, [...LEASE, '--http-threads', '1']);
  const b = await startGateway(t, etcd, passwordFile, [...LEASE, '--http-threads', '1']);
  await client.put('/api-auth/members/1').value('{"applied":0,"follower":true}');
  await b.waitForLog((l) => l.key === '/api-auth/members/1', 10_000);
  for (let round = 0; round < 3; round++) {
    const token = await newToken(a.url, password, [INFO]);
    t.equal(await status(b, token), 200, `round ${round}: issued on A, valid on B`);
    t.same(await revokeToken(b.url, password, token), REVOKED, `round ${round}: revoked, not -32046`);
    expectRefused(t, await call(a.url, INFO, token), REASONS.revoked, `round ${round}`);
  }
  const scraper = await newToken(a.url, password, ['/ext/metrics']);
  for (const g of [a, b]) {
    const reports = g.logs.filter((l) => typeof l.key === 'string' && String(l.key).startsWith('/api-auth/members/'));
    t.same(
      reports.map((l) => [l.level, l.key]).sort(),
      [
        ['warn', '/api-auth/members/0'],
        ['warn', '/api-auth/members/1'],
      ],
      'each key reported once, as a warning naming it',
    );
    const text = (await call(g.url, '/ext/metrics', scraper, 'GET')).text;
    t.match(text, /^api_auth_fleet_members 2$/m, 'the two gateways, not the keys without a lease');
    t.match(text, /^api_auth_fleet_ignored_member_keys 2$/m);
  }
  await client.delete().key('/api-auth/members/0');
  await client.delete().key('/api-auth/members/1');
  const token = await newToken(a.url, password, [INFO]);
  t.same(await revokeToken(b.url, password, token), REVOKED);
  const text = (await call(b.url, '/ext/metrics', scraper, 'GET')).text;
  t.match(text, /^api_auth_fleet_ignored_member_keys 0$/m, 'deleted, no longer counted');
});
