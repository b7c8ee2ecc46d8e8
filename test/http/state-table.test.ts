// Every transition of the seed's state table (section 3): (none) -> valid by newToken,
// valid -> expired by time, valid -> revoked by revokeToken, valid -> invalid by
// changePassword, and revokeToken of an invalid token changing nothing.
import t from 'tap';
import {
  ALREADY_REVOKED,
  authUrl,
  call,
  expectGranted,
  expectRefused,
  expiringToken,
  newToken,
  notLive,
  REASONS,
  REVOKED,
  tamperLast,
  TOKEN_PATTERN,
} from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';

const LIFETIME_SECONDS = 3;
const WRONG = 'not-the-password';

// Tokens on this server (in this process) live three seconds by a clock the test moves:
// the token is checked right after issue, a second before its lifetime is up, and at
// its end.
const expiring = expiringToken(t, LIFETIME_SECONDS);
expiring.catch(() => undefined);

const [server, passwords] = await Promise.all([startServer(t, { cheapChecks: true }), startServer(t, { cheapChecks: true })]);
const AUTH = authUrl(server.url);

async function revoke(s: { url: string }, password: string, token: string): Promise<unknown> {
  const answer = await jsonrpc(authUrl(s.url), 'auth.revokeToken', { password, token });
  return answer.error ?? answer.result;
}

t.test('(none) -> valid: auth.newToken with the correct password returns a token that grants its endpoints', async (t) => {
  const answer = await jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: ['/ext/info'] }, 'new');
  t.same(Object.keys(answer.result ?? {}), ['token', 'id'], 'the result is {"token": ..., "id": ...}');
  t.match(answer.result?.token, TOKEN_PATTERN, '76 characters of unpadded base64url');
  expectGranted(t, await call(server.url, '/ext/info', answer.result.token), '/ext/info');
  const other = await newToken(server.url, server.password, ['/ext/info']);
  t.not(other, answer.result.token, 'each call issues a distinct token');
});

t.test('(none) -> no token: a wrong password never yields a token', async (t) => {
  for (const password of [WRONG, '', ` ${server.password}`, server.password.toUpperCase()]) {
    const answer = await jsonrpc(AUTH, 'auth.newToken', { password, endpoints: ['*'] });
    t.same(answer.error, { code: -32000, message: 'incorrect password' }, `refused: ${JSON.stringify(password)}`);
    t.notOk('result' in answer, 'no result');
  }
});

t.test('valid -> revoked: auth.revokeToken ends the token on every endpoint, and only that token', async (t) => {
  const [token, bystander] = await Promise.all([
    newToken(server.url, server.password, ['*']),
    newToken(server.url, server.password, ['*']),
  ]);
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'before revocation');
  t.same(await revoke(server, server.password, token), REVOKED);
  for (const path of ['/ext/info', '/ext/health', '/ext/bc/X', '/ext/metrics', '/foo', '/']) {
    expectRefused(t, await call(server.url, path, token), REASONS.revoked, `POST ${path}`);
  }
  expectRefused(t, await call(server.url, '/ext/health', token, 'GET'), REASONS.revoked, 'GET /ext/health');
  expectGranted(t, await call(server.url, '/ext/info', bystander), '/ext/info', 'another token stays valid');
});

t.test('revoking a malformed token succeeds and changes nothing', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info']);
  for (const malformed of ['', 'abc', `${token}=`, token.slice(0, -1), `${token}A`, token.replace(/.$/, '+'), `Bearer ${token}`]) {
    t.same(await revoke(server, server.password, malformed), notLive('malformed'), `revoking ${JSON.stringify(malformed.slice(0, 20))}...`);
  }
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'the token they resemble is still valid');
});

t.test('revoking a forged token succeeds and changes nothing', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const forged = tamperLast(token);
  t.same(await revoke(server, server.password, forged), notLive('bad signature'));
  expectRefused(t, await call(server.url, '/ext/info', forged), REASONS.badSignature, 'the forgery is still refused as forged');
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'the genuine token is still valid');
});

t.test('revoking an already revoked token succeeds and it stays revoked', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info']);
  t.same(await revoke(server, server.password, token), REVOKED);
  t.same(await revoke(server, server.password, token), ALREADY_REVOKED, 'the second revocation');
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked);
});

t.test('a wrong password is an error whatever the token, and changes nothing', async (t) => {
  const [valid, revoked] = await Promise.all([
    newToken(server.url, server.password, ['/ext/info']),
    newToken(server.url, server.password, ['/ext/info']),
  ]);
  await revoke(server, server.password, revoked);
  for (const [name, token] of [
    ['valid', valid],
    ['revoked', revoked],
    ['malformed', 'abc'],
    ['forged', tamperLast(valid)],
    ['empty', ''],
  ]) {
    t.same(await revoke(server, WRONG, token), { code: -32000, message: 'incorrect password' }, `${name} token`);
  }
  expectGranted(t, await call(server.url, '/ext/info', valid), '/ext/info', 'the valid token was not revoked');
  const newTokenWrong = await jsonrpc(AUTH, 'auth.newToken', { password: WRONG, endpoints: [''] });
  t.same(
    newTokenWrong.error,
    { code: -32000, message: 'incorrect password' },
    'newToken: the password is checked before the endpoint entries',
  );
});

// The password tests run in order on their own server: A -> B -> A -> (long) password.
const A = passwords.password;
const B = 'the-second-password';
const PW_AUTH = authUrl(passwords.url);
const firstGeneration: { info?: string; star?: string; revoked?: string } = {};

t.test('changePassword with a wrong oldPassword is refused and changes nothing', async (t) => {
  firstGeneration.info = await newToken(passwords.url, A, ['/ext/info']);
  firstGeneration.star = await newToken(passwords.url, A, ['*']);
  firstGeneration.revoked = await newToken(passwords.url, A, ['/ext/info']);
  t.same(await revoke(passwords, A, firstGeneration.revoked), REVOKED);
  const answer = await jsonrpc(PW_AUTH, 'auth.changePassword', { oldPassword: WRONG, newPassword: B });
  t.same(answer.error, { code: -32000, message: 'incorrect password' });
  expectGranted(t, await call(passwords.url, '/ext/info', firstGeneration.info), '/ext/info', 'tokens stay valid');
  t.ok(await newToken(passwords.url, A, ['*']), 'the password is unchanged');
  const refused = await jsonrpc(PW_AUTH, 'auth.newToken', { password: B, endpoints: ['*'] });
  t.equal(refused.error?.code, -32000, 'the would-be new password does not work');
});

t.test('changePassword to the current password is invalid params', async (t) => {
  const answer = await jsonrpc(PW_AUTH, 'auth.changePassword', { oldPassword: A, newPassword: A });
  t.equal(answer.error?.code, -32602);
  t.match(answer.error?.message, /newPassword must differ from the current password/);
  expectGranted(t, await call(passwords.url, '/ext/info', firstGeneration.info!), '/ext/info', 'tokens stay valid');
});

t.test('valid -> invalid: changePassword ends every earlier token; the new password works, the old one no longer', async (t) => {
  const answer = await jsonrpc(PW_AUTH, 'auth.changePassword', { oldPassword: A, newPassword: B }, 'change');
  t.same(answer, { jsonrpc: '2.0', result: { success: true }, id: 'change' });
  expectRefused(t, await call(passwords.url, '/ext/info', firstGeneration.info!), REASONS.earlierGeneration, '/ext/info token');
  for (const path of ['/ext/info', '/ext/health', '/foo']) {
    expectRefused(t, await call(passwords.url, path, firstGeneration.star!), REASONS.earlierGeneration, `"*" token on ${path}`);
  }
  const fresh = await newToken(passwords.url, B, ['/ext/info']);
  expectGranted(t, await call(passwords.url, '/ext/info', fresh), '/ext/info', 'a token under the new password');
  const incorrect = { code: -32000, message: 'incorrect password' };
  t.same((await jsonrpc(PW_AUTH, 'auth.newToken', { password: A, endpoints: ['*'] })).error, incorrect, 'newToken with the old password');
  t.same(await revoke(passwords, A, fresh), incorrect, 'revokeToken with the old password');
  t.same(
    (await jsonrpc(PW_AUTH, 'auth.changePassword', { oldPassword: A, newPassword: 'x-password' })).error,
    incorrect,
    'changePassword with the old password',
  );
  expectGranted(t, await call(passwords.url, '/ext/info', fresh), '/ext/info', 'the refused revocation changed nothing');
});

t.test('revoking a token of an earlier password generation succeeds and changes nothing', async (t) => {
  t.same(await revoke(passwords, B, firstGeneration.info!), notLive('earlier generation'));
  expectRefused(
    t,
    await call(passwords.url, '/ext/info', firstGeneration.info!),
    REASONS.earlierGeneration,
    'still refused as of a previous password',
  );
});

t.test('changing back to an earlier password revives no token, revoked or not', async (t) => {
  const second = await newToken(passwords.url, B, ['/ext/info']);
  const answer = await jsonrpc(PW_AUTH, 'auth.changePassword', { oldPassword: B, newPassword: A });
  t.same(answer.result, { success: true }, 'back to the first password');
  for (const [name, token] of [
    ['a first-password token', firstGeneration.info!],
    ['a first-password "*" token', firstGeneration.star!],
    ['a first-password token that was revoked', firstGeneration.revoked!],
    ['a second-password token', second],
  ] as const) {
    expectRefused(t, await call(passwords.url, '/ext/info', token), REASONS.earlierGeneration, name);
  }
  expectGranted(
    t,
    await call(passwords.url, '/ext/info', await newToken(passwords.url, A, ['/ext/info'])),
    '/ext/info',
    'the first password works again for new tokens',
  );
  t.equal(
    (await jsonrpc(PW_AUTH, 'auth.newToken', { password: B, endpoints: ['*'] })).error?.code,
    -32000,
    'the second password no longer works',
  );
});

t.test('a new password of 1024 code points is accepted, 1025 are not', async (t) => {
  const tooLong = await jsonrpc(PW_AUTH, 'auth.changePassword', { oldPassword: A, newPassword: '\u00e9'.repeat(1025) });
  t.equal(tooLong.error?.code, -32602, '1025 code points');
  const long = '\u{1F600}'.repeat(1024);
  const answer = await jsonrpc(PW_AUTH, 'auth.changePassword', { oldPassword: A, newPassword: long });
  t.same(answer.result, { success: true }, '1024 emoji (4096 bytes of UTF-8)');
  t.ok(await newToken(passwords.url, long, ['*']), 'the long password works');
});

t.test('valid -> expired: a token stops granting once its lifetime has passed', async (t) => {
  const { server: short, token, fresh, lastSecond } = await expiring;
  expectGranted(t, fresh, '/ext/info', 'right after issue');
  expectGranted(t, lastSecond, '/ext/info', 'a second before the lifetime is up');
  expectRefused(t, await call(short.url, '/ext/info', token), REASONS.expired, 'after the lifetime');
});

t.test('revoking an expired token succeeds and changes nothing', async (t) => {
  const { server: short, token } = await expiring;
  t.same(await revoke(short, short.password, token), notLive('expired'));
  expectRefused(t, await call(short.url, '/ext/info', token), REASONS.expired, 'still refused as expired, not revoked');
});
