// auth.revokeToken says what it did: a live token is revoked now, a revoked one
// already was, and anything else (mistyped, expired, forged, of an earlier password) is
// not a live token of this node and revokes nothing. The original's `success: true` stays,
// so its clients keep working; `revocation` is the new field. `api-auth token revoke`
// prints which, and exits 0 only when the token is revoked now. In-process: the service
// through the library on a clock the test moves, the command through its entry.
import t from 'tap';
import type { Test } from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { changePassword, newToken, revokeToken } from '../helpers/auth.js';
import { manualClock, serveInProcess } from '../helpers/library.js';
import { runOperator } from '../helpers/operator.js';
import { tempDir } from '../helpers/server.js';

/** `api-auth token revoke`, through the entry the binary calls: the password on stdin, the token from a file. */
async function revokeCommand(
  t: Test,
  url: string,
  password: string,
  token: string,
  json = false,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const tokenFile = join(tempDir(t), 'token');
  writeFileSync(tokenFile, token, { mode: 0o600 });
  return runOperator(
    ['token', 'revoke', '--uri', url, '--password-stdin', '--token-file', tokenFile, ...(json ? ['--json'] : [])],
    password,
  );
}

/** `token` with its last characters changed: well formed, with a signature that does not match. */
function forged(token: string): string {
  return token.slice(0, -4) + (token.endsWith('AAAA') ? 'BBBB' : 'AAAA');
}

t.test('the wire: revoked now, already revoked, or not a live token with the reason', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { clock: time.clock, args: ['--api-auth-token-lifetime', '1h'] });
  const live = await newToken(server.url, server.password, ['/ext/info']);
  t.same(await revokeToken(server.url, server.password, live), { success: true, revocation: 'revoked' }, 'a live token: revoked now');
  t.same(await revokeToken(server.url, server.password, live), { success: true, revocation: 'already revoked' }, 'again: already revoked');
  t.same(
    await revokeToken(server.url, server.password, 'not-a-token'),
    { success: true, revocation: 'not a live token', reason: 'malformed' },
    'a mistyped token: nothing revoked',
  );
  const other = await newToken(server.url, server.password, ['/ext/info']);
  t.same(
    await revokeToken(server.url, server.password, forged(other)),
    { success: true, revocation: 'not a live token', reason: 'bad signature' },
    'a forged signature: nothing revoked',
  );
  const expiring = await newToken(server.url, server.password, ['/ext/info']);
  time.now += 3601_000;
  t.same(
    await revokeToken(server.url, server.password, expiring),
    { success: true, revocation: 'not a live token', reason: 'expired' },
    'an expired token: nothing revoked',
  );
  const before = await newToken(server.url, server.password, ['/ext/info']);
  const next = `${server.password}-2`;
  await changePassword(server.url, server.password, next);
  t.same(
    await revokeToken(server.url, next, before),
    { success: true, revocation: 'not a live token', reason: 'earlier generation' },
    'a token of the earlier password: nothing revoked',
  );
  const audits = server.logs.filter((l) => l.msg === 'audit' && l.method === 'auth.revokeToken');
  t.same(
    audits.map((l) => l.revoked),
    [true, false, false, false, false, false],
    'the audit lines agree: one revocation',
  );
});

t.test('api-auth token revoke says what happened and exits 0 only when the token is revoked now', async (t) => {
  const server = await serveInProcess(t);
  const token = await newToken(server.url, server.password, ['/ext/info']);
  t.same(
    await revokeCommand(t, server.url, server.password, token),
    { code: 0, stdout: 'token revoked\n', stderr: '' },
    'live: revoked, exit 0',
  );
  t.same(
    await revokeCommand(t, server.url, server.password, token),
    { code: 0, stdout: 'token already revoked: nothing to do\n', stderr: '' },
    'again: already revoked, exit 0',
  );
  const mistyped = await revokeCommand(t, server.url, server.password, token.slice(1));
  t.same(
    mistyped,
    {
      code: 1,
      stdout: '',
      stderr: 'api-auth: nothing revoked: not a live token of this node (malformed); ' + 'check that it is the whole token\n',
    },
    'mistyped: nothing revoked, exit 1',
  );
  const json = await revokeCommand(t, server.url, server.password, 'junk', true);
  t.equal(json.code, 1, '--json: exit 1 all the same');
  t.same(JSON.parse(json.stdout), { success: true, revocation: 'not a live token', reason: 'malformed' }, '--json prints the result');
});
