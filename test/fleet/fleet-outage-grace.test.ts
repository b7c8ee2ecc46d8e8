// --fleet-outage-grace on a real etcd: with it, a gateway that etcd
// no longer answers serves tokens on its last known state past its lease, for at most the
// grace, and refuses every change with an error that says so; then 503, and it recovers
// once etcd is back. Without it (the default) the gateway beside it stays fail-closed.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseArgs } from '../../build/host/index.js';
import { resolveServerOptions } from '../../build/host/options.js';
import { authUrl, call, expectRefused, newToken, REASONS, REVOKED, revokeToken, waitForStatus } from '../helpers/auth.js';
import { countingRelay, seededEtcd, startGateway } from '../helpers/etcd.js';
import { jsonrpc, request } from '../helpers/http.js';
import { runCli, tempDir } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s', '--http-threads', '1'];
const INFO = '/ext/info';
// The tests at once: each has its etcd and gateways of its own, and mostly waits out a
// lease and a grace (15 s, 20 s) on the real clock of processes apart.
t.jobs = 3;

const GRACE_REFUSAL =
  /the fleet's etcd does not answer this gateway: it serves tokens on its last known state for --fleet-outage-grace, and takes no change/;

t.test(
  'with --fleet-outage-grace a gateway serves through an etcd outage for the grace, refusing every change; the default 503s',
  async (t) => {
    const { etcd, password, passwordFile } = await seededEtcd(t);
    const graced = await startGateway(t, etcd, passwordFile, [...LEASE, '--fleet-outage-grace', '15s']);
    const strict = await startGateway(t, etcd, passwordFile, LEASE);
    const token = await newToken(graced.url, password, [INFO]);
    const revoked = await newToken(strict.url, password, [INFO]);
    t.same(await revokeToken(strict.url, password, revoked), REVOKED);

    await etcd.kill();
    // Past its lease, the default gateway refuses; the graced one says that it serves on.
    await waitForStatus(strict.url, token, 503, 60_000);
    t.equal((await request(strict.url, '/ext/auth/health')).status, 503, 'the default stays fail-closed');
    const begun = await graced.waitForLog(
      (l) => typeof l.msg === 'string' && l.msg.startsWith("the fleet's etcd has not answered for the lease time"),
      30_000,
    );
    t.match(begun, { level: 'warn', graceSeconds: 15 });
    t.equal((await call(graced.url, INFO, token)).status, 200, 'a token works on the last known state');
    expectRefused(t, await call(graced.url, INFO, revoked), REASONS.revoked, 'what it knew was revoked stays revoked');
    t.equal((await request(graced.url, '/ext/auth/health')).status, 200, 'ready: it serves');
    for (const [method, params] of [
      ['auth.newToken', { password, endpoints: [INFO] }],
      ['auth.revokeToken', { password, token }],
      ['auth.changePassword', { oldPassword: password, newPassword: 'another-password-of-enough-length' }],
    ] as const) {
      const answer = await jsonrpc(authUrl(graced.url), method, params);
      t.equal(answer.result, undefined, `${method}: no success`);
      t.match(answer.error, { code: -32046, message: GRACE_REFUSAL }, `${method}: refused, saying why`);
    }
    t.equal((await call(graced.url, INFO, token)).status, 200, 'the refused revoke changed nothing');

    // Then the grace runs out: 503, as the default gateway answers.
    await waitForStatus(graced.url, token, 503, 60_000);
    t.equal((await request(graced.url, '/ext/auth/health')).status, 503);
    const blamed = graced.logs.filter((l) => typeof l.msg === 'string' && l.msg.includes('role needs readwrite'));
    t.same(blamed, [], "no line blames the etcd user's role for the outage");
    t.ok(
      graced.logs.some(
        (l) =>
          typeof l.msg === 'string' &&
          l.msg.startsWith("cannot publish this gateway's usage counts to the fleet; " + "the fleet's etcd did not answer (an outage"),
      ),
      'the usage line names the outage',
    );

    await etcd.start();
    for (const g of [graced, strict]) await waitForStatus(g.url, token, 200, 60_000);
    t.same(await revokeToken(graced.url, password, token), REVOKED, 'changes are taken again');
    for (const g of [graced, strict]) expectRefused(t, await call(g.url, INFO, token), REASONS.revoked);
  },
);

// What the grace gives up, as the fleet guide states it: a gateway cut off from etcd while
// another still reaches it serves, for up to the grace after the revoke answered, a token
// that the connected one revoked. Then 503; once it reaches etcd again it refuses it.
t.test(
  'a gateway cut off from etcd may serve within its grace a token a connected one revoked; then 503; rejoined, it refuses it',
  async (t) => {
    const { etcd, password, passwordFile } = await seededEtcd(t);
    const relay = await countingRelay(t, etcd.url);
    const cutOff = await startGateway(t, { ...etcd, url: relay.url }, passwordFile, [...LEASE, '--fleet-outage-grace', '20s']);
    const connected = await startGateway(t, etcd, passwordFile, LEASE);
    const token = await newToken(connected.url, password, [INFO]);
    t.equal((await call(cutOff.url, INFO, token)).status, 200);
    relay.cut();
    // The barrier stops waiting for the cut-off gateway once its lease has expired.
    t.same(await revokeToken(connected.url, password, token), REVOKED);
    expectRefused(t, await call(connected.url, INFO, token), REASONS.revoked, 'in force where etcd is reached');
    t.equal((await call(cutOff.url, INFO, token)).status, 200, 'the cut-off gateway, in its grace, does not know of it');
    await waitForStatus(cutOff.url, token, 503, 60_000);
    relay.mend();
    const until = Date.now() + 90_000;
    for (;;) {
      const got = await call(cutOff.url, INFO, token);
      if (got.status !== 503) {
        expectRefused(t, got, REASONS.revoked, 'rejoined, it holds the revoke');
        break;
      }
      if (Date.now() > until) throw new Error('the cut-off gateway did not rejoin');
      await new Promise((r) => setTimeout(r, 200));
    }
  },
);

t.test('--fleet-outage-grace is checked at start: a duration from 0s to 24h, with --cluster-etcd only', async (t) => {
  const auth = ['--api-auth-required', '--api-auth-password-file', '/nonexistent/password'];
  for (const [args, message] of [
    [
      ['--cluster-etcd', 'http://127.0.0.1:2379', '--fleet-outage-grace', '25h'],
      /--fleet-outage-grace must be a duration in whole seconds from 0s to 24h/,
    ],
    [['--cluster-etcd', 'http://127.0.0.1:2379', '--fleet-outage-grace', 'soon'], /--fleet-outage-grace must be a duration/],
    [['--fleet-outage-grace', '30s'], /--fleet-outage-grace sets how this gateway joins a fleet, and there is no --cluster-etcd/],
  ] as const) {
    const run = await runCli(t, [...auth, ...args], 20_000);
    t.equal(run.code, 2, args.join(' '));
    t.match(run.stderr, message);
  }
  // The flag, its variable and its config file key, as every option has them; 0 without any.
  const fleet = [...auth, '--cluster-etcd', 'http://127.0.0.1:2379'];
  const grace = (args: readonly string[], env: Record<string, string> = {}): number | undefined => {
    const command = parseArgs(args, env);
    return command.action === 'serve' ? resolveServerOptions(command.options).cluster?.outageGraceSeconds : undefined;
  };
  t.equal(grace(fleet), 0, 'the default: fail-closed');
  t.equal(grace([...fleet, '--fleet-outage-grace', '2m']), 120);
  t.equal(grace(fleet, { API_AUTH_FLEET_OUTAGE_GRACE: '45s' }), 45);
  const file = join(tempDir(t), 'config.json');
  writeFileSync(file, JSON.stringify({ 'fleet-outage-grace': '1h' }), { mode: 0o600 });
  t.equal(grace([...fleet, '--config-file', file]), 3600);
});
