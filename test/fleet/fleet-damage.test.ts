// A damaged key in the fleet's etcd, on a real etcd, keys written with the
// etcd client as etcdctl would write them. A key no gateway needs to verify (an inventory
// entry, a usage key) is reported once, counted, skipped, and deleted by `api-auth fleet
// delete-key`; a key verification needs (a revocation, a grant) fences every gateway, which
// serves again by itself once the key is repaired or deleted.
import { Etcd3 } from 'etcd3';
import t from 'tap';
import { authUrl, call, expectRefused, newToken, REASONS, REVOKED, revokeToken, waitForStatus } from '../helpers/auth.js';
import { restartGateway, seededEtcd, startGateway } from '../helpers/etcd.js';
import type { Gateway } from '../helpers/etcd.js';
import { jsonrpc, request } from '../helpers/http.js';
import { runCli } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s', '--http-threads', '1'];
const INFO = '/ext/info';

// The tests at once: each has its etcd and gateways of its own, and waits on etcd and
// leases more than it computes.
t.jobs = 3;
const DAMAGED_TOKEN = '/api-auth/tokens/0000000000099999';

async function metric(g: Gateway, scraper: string, name: string): Promise<string | undefined> {
  const text = (await call(g.url, '/ext/metrics', scraper, 'GET')).text;
  return new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1];
}

t.test('a damaged inventory entry or usage key is reported once and skipped; fleet delete-key deletes it, and only it', async (t) => {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const client = new Etcd3({ hosts: etcd.url });
  t.teardown(() => client.close());
  const a = await startGateway(t, etcd, passwordFile, LEASE);
  const b = await startGateway(t, etcd, passwordFile, LEASE);
  const token = await newToken(a.url, password, [INFO]);
  const scraper = await newToken(a.url, password, ['/ext/metrics']);
  await client.put(DAMAGED_TOKEN).value('garbage');
  const reported = (l: Record<string, unknown>): boolean => l.key === DAMAGED_TOKEN;
  for (const g of [a, b]) {
    const line = await g.waitForLog(reported, 10_000);
    t.equal(line.level, 'warn');
    t.match(
      line.msg,
      `the fleet api-auth holds a damaged key ${DAMAGED_TOKEN} (it is not JSON); no gateway needs it to verify tokens: ` +
        `delete it with api-auth fleet delete-key ${DAMAGED_TOKEN}`,
    );
  }
  for (const g of [a, b]) {
    t.equal((await call(g.url, INFO, token)).status, 200, 'tokens still work');
    t.equal((await request(g.url, '/ext/auth/health')).status, 200, 'ready');
    t.equal(await metric(g, scraper, 'api_auth_fleet_damaged_keys'), '1');
  }
  const other = await newToken(b.url, password, [INFO]);
  t.same(await revokeToken(a.url, password, other), REVOKED, 'changes go through');
  expectRefused(t, await call(b.url, INFO, other), REASONS.revoked);
  // A start reads the key with the whole state: it serves, and says so once.
  await b.stop();
  const again = await restartGateway(t, b);
  t.equal((await call(again.url, INFO, token)).status, 200, 'a restart serves');
  t.equal(again.logs.filter(reported).length, 1, 'reported once at the start');
  t.equal(a.logs.filter(reported).length, 1, 'reported once by the gateway that saw it through its watch');

  // The command refuses a key that is whole, and deletes the damaged one.
  const [whole] = (await client.getAll().prefix('/api-auth/tokens/').keys()).filter((k) => k !== DAMAGED_TOKEN);
  const refused = await runCli(t, ['fleet', 'delete-key', whole, ...a.args], 20_000);
  t.equal(refused.code, 1, refused.stderr);
  t.match(refused.stderr, `api-auth: nothing deleted: ${whole} is not damaged`);
  t.not(await client.get(whole).string(), null, 'the whole key is kept');
  const deleted = await runCli(t, ['fleet', 'delete-key', DAMAGED_TOKEN, ...a.args], 20_000);
  t.equal(deleted.code, 0, deleted.stderr);
  t.equal(deleted.stdout, `deleted the damaged key ${DAMAGED_TOKEN}\n`);
  t.equal(await client.get(DAMAGED_TOKEN).string(), null, 'gone from etcd');
  const absent = await runCli(t, ['fleet', 'delete-key', DAMAGED_TOKEN, ...a.args], 20_000);
  t.equal(absent.code, 1);
  t.match(absent.stderr, `etcd holds no key ${DAMAGED_TOKEN}`);
  t.equal(await metric(a, scraper, 'api_auth_fleet_damaged_keys'), '0', 'no longer counted');

  // A usage key of no gateway's making: listTokens leaves it out, and says so once.
  const usage = '/api-auth.usage/0123456789abcdef';
  await client.put(usage).value('{"tokens":"many"}');
  for (let i = 0; i < 2; i++) {
    const listed = await jsonrpc(authUrl(a.url), 'auth.listTokens', { password });
    t.equal((listed.result as { tokens: unknown[] }).tokens.length, 3, 'listTokens answers');
  }
  t.equal(a.logs.filter((l) => l.key === usage).length, 1, 'reported once');
  t.match(a.logs.find((l) => l.key === usage)?.msg, `delete it with api-auth fleet delete-key ${usage}`);
  t.equal(await metric(a, scraper, 'api_auth_fleet_damaged_keys'), '1');
  const usageDeleted = await runCli(t, ['fleet', 'delete-key', usage, ...a.args], 20_000);
  t.equal(usageDeleted.code, 0, usageDeleted.stderr);
  t.equal(await client.get(usage).string(), null);

  // Counts out of bounds: a lastUsedMs of 9e15 made listTokens answer
  // -32603 on every gateway; 2^53 - 1 requests, and a serial listed twice, are damage too.
  const serial = Number(listedSerial(await jsonrpc(authUrl(a.url), 'auth.listTokens', { password })));
  for (const [name, counts] of [
    ['a lastUsedMs of 9e15', [[serial, 1, 9e15]]],
    ['2^53 - 1 requests', [[serial, 2 ** 53 - 1, 1]]],
    [
      'a serial listed twice',
      [
        [serial, 1, 1],
        [serial, 1, 1],
      ],
    ],
  ] as const) {
    const key = `/api-auth.usage/00000000000000${String(counts.length)}${name.length % 10}`;
    await client.put(key).value(JSON.stringify({ tokens: counts }));
    for (const g of [a, again]) {
      const listed = await jsonrpc(authUrl(g.url), 'auth.listTokens', { password });
      t.notOk(listed.error, `${name}: listTokens answers on each gateway`);
      const entry = (listed.result as { tokens: { id: string; requests: number; lastUsedAt: string | null }[] }).tokens.find(
        (e) => e.id === `t${serial}`,
      );
      t.ok(
        entry !== undefined && entry.requests < 2 ** 53 - 1 && (entry.lastUsedAt === null || entry.lastUsedAt < '2200'),
        `${name}: the key's counts are not added: ${JSON.stringify(entry)}`,
      );
    }
    t.match(
      a.logs.find((l) => l.key === key)?.msg,
      `delete it with api-auth fleet delete-key ${key}`,
      `${name}: reported, with the command`,
    );
    await client.delete().key(key);
  }

  // A member key that is not JSON: reported, and no write stalls on it.
  const member = '/api-auth/members/7f';
  await client.put(member).value('garbage');
  const line = await a.waitForLog((l) => l.key === member && String(l.msg).includes('damaged key'), 10_000);
  t.match(line.msg, `delete it with api-auth fleet delete-key ${member}`);
  const third = await newToken(a.url, password, [INFO]);
  t.same(await revokeToken(again.url, password, third), REVOKED, 'writes go through');
  const memberDeleted = await runCli(t, ['fleet', 'delete-key', member, ...a.args], 20_000);
  t.equal(memberDeleted.code, 0, memberDeleted.stderr);
  t.equal(await client.get(member).string(), null);
});

t.test('a damaged key that verification needs fences every gateway until it is repaired or deleted', async (t) => {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const client = new Etcd3({ hosts: etcd.url });
  t.teardown(() => client.close());
  const a = await startGateway(t, etcd, passwordFile, LEASE);
  const b = await startGateway(t, etcd, passwordFile, LEASE);
  const revoked = await newToken(a.url, password, [INFO]);
  const token = await newToken(a.url, password, [INFO]);
  t.same(await revokeToken(b.url, password, revoked), REVOKED);
  const [key] = await client.getAll().prefix('/api-auth/revoked/').keys();
  const value = (await client.get(key).string())!;

  // A revocation whose value is lost: no gateway can tell what it holds.
  await client.put(key).value('garbage');
  for (const g of [a, b]) {
    await waitForStatus(g.url, token, 503, 30_000);
    t.equal((await request(g.url, '/ext/auth/health')).status, 503, 'not ready');
    t.equal((await request(g.url, '/ext/auth/live')).status, 200, 'alive');
    const line = await g.waitForLog((l) => l.key === key && l.level === 'error', 10_000);
    t.match(
      line.msg,
      `the fleet api-auth holds a damaged key ${key} (it is not a decimal number); this gateway cannot verify tokens ` +
        'without it: write its value back from a backup of etcd, or delete it',
    );
  }
  const change = await jsonrpc(authUrl(a.url), 'auth.newToken', { password, endpoints: [INFO] });
  t.match(change.error, { code: -32046 }, 'changes refused');
  const refused = await runCli(t, ['fleet', 'delete-key', key, ...a.args], 20_000);
  t.equal(refused.code, 1, 'the command does not delete what verification needs');
  t.match(refused.stderr, 'the gateways need it to verify tokens');
  t.equal(await client.get(key).string(), 'garbage');
  // A start while it is there stops, naming it.
  const start = await runCli(t, b.args, 20_000);
  t.equal(start.code, 2);
  t.match(start.stderr, `holds a damaged key ${key} (it is not a decimal number)`);

  // Repaired: both serve again by themselves, with the revocation.
  await client.put(key).value(value);
  for (const g of [a, b]) {
    await waitForStatus(g.url, token, 200, 30_000);
    expectRefused(t, await call(g.url, INFO, revoked), REASONS.revoked, 'the revocation holds');
  }

  // A grant whose name is no number: deleted, and both serve again.
  await client.put('/api-auth/grants/oops').value('["/ext/info"]');
  for (const g of [a, b]) await waitForStatus(g.url, token, 503, 30_000);
  await client.delete().key('/api-auth/grants/oops');
  for (const g of [a, b]) await waitForStatus(g.url, token, 200, 30_000);
  const later = await newToken(b.url, password, [INFO]);
  t.same(await revokeToken(a.url, password, later), REVOKED, 'the fleet takes changes again');
  for (const g of [a, b]) expectRefused(t, await call(g.url, INFO, later), REASONS.revoked);
});

t.test(
  'fleet delete-key refuses a bad command line with exit 2, and an etcd that does not answer with exit 3, deleting nothing',
  async (t) => {
    const { etcd, passwordFile } = await seededEtcd(t);
    const flags = ['--api-auth-required', '--api-auth-password-file', passwordFile, '--cluster-etcd', etcd.url];
    for (const [args, message] of [
      [['fleet', 'remove', DAMAGED_TOKEN, ...flags], /unknown command "fleet remove"; did you mean "fleet delete-key"\?/],
      [['fleet', 'delete-key'], /fleet delete-key needs the KEY to delete/],
      [
        ['fleet', 'delete-key', DAMAGED_TOKEN, '--api-auth-required', '--api-auth-password-file', passwordFile],
        /fleet delete-key reaches etcd as the gateway does: give the gateway's --cluster-etcd/,
      ],
      [
        ['fleet', 'delete-key', '/elsewhere/tokens/1', ...flags],
        /\/elsewhere\/tokens\/1 is no key of the fleet api-auth: its keys start with \/api-auth\/ or \/api-auth.usage\//,
      ],
      [['fleet', 'delete-key', DAMAGED_TOKEN, ...flags, '--no-such-flag'], /--no-such-flag/],
    ] as const) {
      const run = await runCli(t, args, 20_000);
      t.equal(run.code, 2, args.slice(0, 3).join(' '));
      t.match(run.stderr, message);
    }
    const help = await runCli(t, ['fleet', '--help'], 20_000);
    t.equal(help.code, 0);
    t.match(help.stdout, /api-auth fleet delete-key KEY \[the gateway's flags\]/);
    await etcd.kill();
    const down = await runCli(t, ['fleet', 'delete-key', DAMAGED_TOKEN, ...flags, '--cluster-lease', '2s'], 30_000);
    t.equal(down.code, 3, down.stderr);
    t.match(
      down.stderr,
      /api-auth: etcd could not be reached through the gateway's --cluster-etcd; nothing deleted; retry once it answers\n$/,
    );
  },
);

/** The serial of the first token auth.listTokens lists ("t12" -> 12). */
function listedSerial(listed: { result?: unknown }): number {
  return Number((listed.result as { tokens: { id: string }[] }).tokens[0].id.slice(1));
}
