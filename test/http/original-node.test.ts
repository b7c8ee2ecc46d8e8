// The original node's own auth tests (reference/original-node-behaviour.md, "Its own tests
// checked"), one test each, through the CLI and HTTP instead of Go calls.
import t from 'tap';
import { createHash, createHmac } from 'node:crypto';
import { authUrl, call, expectGranted, expectRefused, expiringToken, newToken, notLive, REASONS, REVOKED } from '../helpers/auth.js';
import { jsonrpc, postJson, rpc } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';

const LIFETIME_SECONDS = 3;

// A second instance, in this process, with short-lived tokens on a clock the test moves:
// it has its own key (for "another key"), and its tokens expire without waiting.
const expiring = expiringToken(t, LIFETIME_SECONDS);
expiring.catch(() => undefined);

const [server, passwords] = await Promise.all([startServer(t, { cheapChecks: true }), startServer(t, { cheapChecks: true })]);
const AUTH = authUrl(server.url);

t.test('a wrong password gives no token', async (t) => {
  const answer = await jsonrpc(AUTH, 'auth.newToken', { password: 'wrong-password', endpoints: ['*'] });
  t.same(answer, { jsonrpc: '2.0', error: { code: -32000, message: 'incorrect password' }, id: 1 });
});

t.test('an empty password gives no token', async (t) => {
  const answer = await jsonrpc(AUTH, 'auth.newToken', { password: '', endpoints: ['*'] });
  t.same(answer, { jsonrpc: '2.0', error: { code: -32000, message: 'incorrect password' }, id: 1 });
});

t.test('a token carries exactly the endpoints asked for', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info', '/ext/bc/X']);
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info');
  expectGranted(t, await call(server.url, '/ext/bc/X', token), '/ext/bc/X');
  for (const path of ['/ext/health', '/ext/bc/Y', '/ext/bc/X/events', '/ext/metrics', '/']) {
    expectRefused(t, await call(server.url, path, token), REASONS.notGranted, path);
  }
});

t.test('a token expires once its lifetime has passed', async (t) => {
  const { server: short, token, fresh, lastSecond } = await expiring;
  expectGranted(t, fresh, '/ext/info', 'right after issue');
  expectGranted(t, lastSecond, '/ext/info', 'a second before the lifetime is up');
  const later = await call(short.url, '/ext/info', token);
  t.equal(later.status, 401, 'refused after the lifetime');
});

t.test('an expired token is refused with a reason containing "expired"', async (t) => {
  const { server: short, token } = await expiring;
  const response = await call(short.url, '/ext/info', token);
  expectRefused(t, response, REASONS.expired);
  t.match(JSON.parse(response.text).error.message, /expired/);
});

t.test('a token does not verify under another key (a token of another instance is invalid)', async (t) => {
  const { server: other } = await expiring;
  const foreign = await newToken(other.url, other.password, ['*']);
  expectGranted(t, await call(other.url, '/ext/info', foreign), '/ext/info', 'valid where it was issued');
  const response = await call(server.url, '/ext/info', foreign);
  expectRefused(t, response, REASONS.badSignature, 'refused by this instance');
  t.match(JSON.parse(response.text).error.message, /invalid/);
});

t.test('changePassword: a wrong old password is refused', async (t) => {
  const answer = await jsonrpc(authUrl(passwords.url), 'auth.changePassword', { oldPassword: 'wrong', newPassword: 'a-new-password' });
  t.same(answer.error, { code: -32000, message: 'incorrect password' });
  t.ok(await newToken(passwords.url, passwords.password, ['*']), 'the password is unchanged');
});

t.test('changePassword: an empty new password is refused', async (t) => {
  const answer = await jsonrpc(authUrl(passwords.url), 'auth.changePassword', { oldPassword: passwords.password, newPassword: '' });
  t.equal(answer.error?.code, -32602);
  t.match(answer.error?.message, /^invalid params: newPassword/);
  t.ok(await newToken(passwords.url, passwords.password, ['*']), 'the password is unchanged');
});

t.test('changePassword: the new password works and the old one stops working', async (t) => {
  const next = 'the-new-password';
  const answer = await jsonrpc(authUrl(passwords.url), 'auth.changePassword', { oldPassword: passwords.password, newPassword: next });
  t.same(answer.result, { success: true });
  t.ok(await newToken(passwords.url, next, ['*']), 'the new password gives tokens');
  const old = await jsonrpc(authUrl(passwords.url), 'auth.newToken', { password: passwords.password, endpoints: ['*'] });
  t.same(old.error, { code: -32000, message: 'incorrect password' }, 'the old password gives none');
});

t.test('a revoked token is refused on every endpoint with the revoked reason', async (t) => {
  const endpoints = ['/ext/info', '/ext/bc/X', '/ext/metrics'];
  const token = await newToken(server.url, server.password, endpoints);
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'before revocation');
  const revoked = await jsonrpc(AUTH, 'auth.revokeToken', { password: server.password, token });
  t.has(revoked.result, { success: true }, "the original's answer, which its clients read");
  t.same(revoked.result, REVOKED, 'and what the revocation did');
  for (const path of endpoints) expectRefused(t, await call(server.url, path, token), REASONS.revoked, path);
});

t.test('a request without Authorization header is refused', async (t) => {
  expectRefused(t, await call(server.url, '/ext/info'), REASONS.noToken);
});

t.test('a token for /ext/info is refused on /ext/bc/X, /ext/metrics, "", /foo and /ext/info/foo', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info']);
  // An HTTP request-target is never empty: the empty path of the original test is "/".
  for (const path of ['/ext/bc/X', '/ext/metrics', '/', '/foo', '/ext/info/foo']) {
    expectRefused(t, await call(server.url, path, token), REASONS.notGranted, path);
  }
});

t.test('/ext/auth is reachable with or without a token', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const [without, withToken] = await Promise.all([
    postJson(AUTH, rpc('auth.revokeToken', { password: server.password, token: 'none' }, 1)),
    postJson(AUTH, rpc('auth.revokeToken', { password: server.password, token: 'none' }, 1), [['Authorization', `Bearer ${token}`]]),
  ]);
  for (const response of [without, withToken]) {
    t.equal(response.status, 200);
    t.same(JSON.parse(response.text), { jsonrpc: '2.0', result: notLive('malformed'), id: 1 });
  }
});

t.test('a "*" token reaches every path', async (t) => {
  const token = await newToken(server.url, server.password, ['*']);
  for (const path of ['/ext/info', '/ext/health', '/ext/bc/X', '/ext/metrics', '/', '/foo', '/ext/info/foo']) {
    expectGranted(t, await call(server.url, path, token), path);
  }
});

t.test('a revoked token with "=" appended is still refused', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info']);
  await jsonrpc(AUTH, 'auth.revokeToken', { password: server.password, token });
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, 'the token');
  expectRefused(t, await call(server.url, '/ext/info', `${token}=`), REASONS.malformed, 'the token and "="');
  expectRefused(t, await call(server.url, '/ext/info', `${token}==`), REASONS.malformed, 'the token and "=="');
});

t.test('a token signed with another algorithm is refused', async (t) => {
  const token = await newToken(server.url, server.password, ['*']);
  const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const claims = b64({ exp: Math.floor(Date.now() / 1000) + 3600, jti: 'x', endpoints: ['*'] });
  const jwt = (alg: string, hash: string | null): string => {
    const unsigned = `${b64({ alg, typ: 'JWT' })}.${claims}`;
    return `${unsigned}.${hash === null ? '' : createHmac(hash, server.password).update(unsigned).digest('base64url')}`;
  };
  for (const [name, forged] of [
    ['an HS256 JWT', jwt('HS256', 'sha256')],
    ['an HS384 JWT', jwt('HS384', 'sha384')],
    ['an alg "none" JWT', jwt('none', null)],
  ]) {
    expectRefused(t, await call(server.url, '/ext/info', forged), REASONS.malformed, name);
  }
  // This format's own fields with the tag made another way: plain SHA-256, HMAC-SHA384
  // cut to 32 bytes, HMAC-SHA256 under the password.
  const raw = Buffer.from(token, 'base64url');
  const payload = raw.subarray(0, 25);
  const retagged = (tag: Buffer): string => Buffer.concat([payload, tag.subarray(0, 32)]).toString('base64url');
  const others: [string, string][] = [
    ['tagged with plain SHA-256', retagged(createHash('sha256').update(payload).digest())],
    ['tagged with HMAC-SHA384', retagged(createHmac('sha384', server.password).update(payload).digest())],
    ['tagged with HMAC-SHA256 under the password', retagged(createHmac('sha256', server.password).update(payload).digest())],
  ];
  for (const [name, forged] of others) {
    t.equal(forged.length, token.length);
    const response = await call(server.url, '/ext/info', forged);
    expectRefused(t, response, REASONS.badSignature, name);
  }
  const versioned = Buffer.from(raw);
  versioned[0] ^= 0x80;
  expectRefused(t, await call(server.url, '/ext/info', versioned.toString('base64url')), REASONS.malformed, 'another format version');
});
