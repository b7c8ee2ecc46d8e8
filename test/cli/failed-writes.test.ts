// A state write that fails changes nothing. auth.newToken used to add
// a new endpoint list to the core and only then write it; when the write failed (a full
// disk, no file descriptor left), the core kept a list the state file lacked, and every
// later new list was refused as "recorded out of order" until a restart. Now each effect
// is written first and applied to the core after: a call whose write fails answers an
// internal error, and the next call works as if the failed one had never happened.
//
// The disk really fills up: the data folder is a small tmpfs, filled to the last page
// (helpers/tmpfs.ts).
import t from 'tap';
import { existsSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { Core } from '../../build/host/core/core.js';
import { GrantError, Outcome } from '../../build/host/core/abi.js';
import { coreModule } from '../../build/host/core/module.js';
import {
  authUrl,
  call,
  changePassword,
  expectGranted,
  expectRefused,
  newToken,
  REASONS,
  REVOKED,
  revokeToken,
  tryPassword,
} from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { randomPassword, restartServer, type LogLine, type Running } from '../helpers/server.js';
import { needsRoot } from '../helpers/root.js';
import { fillUp, startOnTmpfs, tmpfsDataDir } from '../helpers/tmpfs.js';

const INTERNAL_ERROR = { code: -32603, message: 'internal error' };
const SUCCESS = { success: true };
const NOW = 1_700_000_000;
/**
 * The state's writes are these tests' subject, not the HTTP threads (test/http/threads.test.ts): one thread,
 * whose start costs about a third less CPU time.
 */
const ONE_THREAD = ['--http-threads', '1'];

/** An audit line of a token issued. */
const isIssue = (l: LogLine): boolean => l.msg === 'audit' && l.method === 'auth.newToken' && l.outcome === 'ok';

/** The grant ids of the first `count` tokens `server` logged as issued, once it has logged them. */
async function issuedGrants(server: Running, count: number): Promise<unknown[]> {
  return (await server.waitForLines(isIssue, count)).map((l) => l.grant);
}

t.test(
  'calls whose state write fails change nothing, and the next calls work as if they never happened',
  needsRoot('mount, for a small tmpfs that really fills up'),
  async (t) => {
    const { root, dataDir } = tmpfsDataDir(t);
    let server = await startOnTmpfs(t, root, dataDir, ONE_THREAD);
    const { password } = server;
    const info = await newToken(server.url, password, ['/ext/info']);
    const filler = fillUp(dataDir);

    const failed = await jsonrpc(authUrl(server.url), 'auth.newToken', { password, endpoints: ['/ext/health'] });
    t.same(failed.error, INTERNAL_ERROR, 'a new endpoint list on a full disk: internal error, nothing more said');
    t.notOk(failed.result, 'no token');
    t.ok(await server.waitForLog((l) => l.msg === 'internal error' && l.code === 'ENOSPC'), 'the log names the cause: ENOSPC');
    t.notOk(existsSync(join(dataDir, 'state.tmp')), 'the failed write removed its temporary file');
    t.same(await revokeToken(server.url, password, info), INTERNAL_ERROR, 'a revocation on a full disk: internal error');
    expectGranted(t, await call(server.url, '/ext/info', info), '/ext/info', 'the token whose revocation failed still works');
    const p1 = `p1-${randomPassword()}`;
    t.same(await changePassword(server.url, password, p1), INTERNAL_ERROR, 'a password change on a full disk: internal error');
    t.equal(await tryPassword(server.url, p1), undefined, 'the new password was not adopted');
    const again = await tryPassword(server.url, password);
    t.ok(again, 'the old password still works, and a known list within the reserved serials needs no write');

    unlinkSync(filler);
    // Another new list first: the core once kept the failed list, and refused every other new one.
    const bc = await newToken(server.url, password, ['/ext/bc/X']);
    const health = await newToken(server.url, password, ['/ext/health']);
    t.same(await issuedGrants(server, 4), [0, 0, 1, 2], 'the new lists got the ids they would have had without the failures');
    expectGranted(t, await call(server.url, '/ext/bc/X', bc), '/ext/bc/X', 'the /ext/bc/X token');
    expectGranted(t, await call(server.url, '/ext/health', health), '/ext/health', 'the /ext/health token');
    t.same(await revokeToken(server.url, password, info), REVOKED, 'the revocation works now');
    expectRefused(t, await call(server.url, '/ext/info', info), REASONS.revoked, 'and holds');

    await server.stop('SIGKILL');
    server = await restartServer(t, server);
    expectRefused(t, await call(server.url, '/ext/info', info), REASONS.revoked, 'after kill -9: still revoked');
    expectGranted(t, await call(server.url, '/ext/info', again!), '/ext/info', 'after kill -9: the token issued on the full disk');
    expectGranted(t, await call(server.url, '/ext/bc/X', bc), '/ext/bc/X', 'after kill -9: the /ext/bc/X token');
    expectGranted(t, await call(server.url, '/ext/health', health), '/ext/health', 'after kill -9: the /ext/health token');
    expectRefused(t, await call(server.url, '/ext/info', bc), REASONS.notGranted, 'after kill -9: each on its own list only');
    t.same(await changePassword(server.url, password, p1), SUCCESS, 'the password change works now');

    await server.stop('SIGKILL');
    server = await restartServer(t, server, p1);
    t.ok(await tryPassword(server.url, p1), 'after kill -9: the new password is in force');
    t.equal(await tryPassword(server.url, password), undefined, 'and the old one is not');
    const fourth = await newToken(server.url, p1, ['/ext/bc/Y']);
    expectGranted(t, await call(server.url, '/ext/bc/Y', fourth), '/ext/bc/Y', 'a token for a fourth list');
    t.same(await issuedGrants(server, 2), [0, 3], 'which gets grant 3');
  },
);

t.test('the core looks ahead without changing: findGrant and inspect', async (t) => {
  const core = new Core(coreModule());
  core.setKey(Buffer.alloc(32, 7));
  t.equal(core.findGrant(['/ext/info']), 0, 'a new list: the id addGrant would give it');
  t.equal(core.grantCount, 0, 'and nothing added');
  t.equal(core.findGrant(['/ext/info']), 0, 'asked again: the same id');
  t.equal(core.addGrant(['/ext/info']), 0, 'addGrant gives that id');
  t.equal(core.findGrant(['/ext/info', '/ext/info']), 0, 'an equal list: its id');
  t.equal(core.findGrant(['*', '/ext/info']), 1, 'a list with "*": the next id');
  t.equal(core.addGrant(['*']), 1, 'which "*" alone gets');
  t.equal(core.findGrant(['/ext/info', '*']), 1, 'a list with "*" finds it');
  for (const bad of [[], [''], ['relative'], ['/ext/../x'], ['/x', 'x\ny'], ['/' + 'a'.repeat(1100)]]) {
    t.throws(() => core.findGrant(bad), GrantError, `refused like addGrant: ${JSON.stringify(bad).slice(0, 40)}`);
  }
  t.equal(core.grantCount, 2, 'two lists held');

  const { token, claims } = core.issue(0, NOW, 3600);
  const seen = core.inspect(token, NOW);
  t.same(seen, { outcome: Outcome.Valid, claims }, 'inspect: Valid, with the claims');
  t.equal(core.verify(token, '/ext/info', NOW), Outcome.Valid, 'and the token is not revoked');
  t.same(core.inspect(token, NOW), seen, 'inspecting again changes nothing');
  t.equal(core.revokeSerial(claims.serial), 0, 'revokeSerial marks it');
  t.same(core.inspect(token, NOW), { outcome: Outcome.Revoked, claims }, 'inspect: Revoked, with the claims');
  t.equal(core.verify(token, '/ext/info', NOW), Outcome.Revoked);
  t.same(core.inspect(token, NOW + 3600), { outcome: Outcome.Expired }, 'expired: no claims');
  t.same(core.inspect(token.slice(1), NOW), { outcome: Outcome.Malformed }, 'malformed: no claims');
});
