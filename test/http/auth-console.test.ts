// The console's session methods over HTTP (docs/guides/console.md, Sessions): auth.signIn,
// auth.renewSession, auth.signOut and the management methods taking the session in place
// of the password, on one HTTP thread and on several (the owner's channel), and the
// cookie's Secure under TLS. The browser's side is test/system/console.test.ts.
import t from 'tap';
import type { Test } from 'tap';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { authUrl } from '../helpers/auth.js';
import { jsonrpc, postJson } from '../helpers/http.js';
import type { HttpResponse } from '../helpers/http.js';
import { startServer, tempDir } from '../helpers/server.js';
import { selfSigned } from '../helpers/certificate.js';

function csrfOf(session: string): string {
  return createHash('sha256').update('api-auth console csrf\0').update(session).digest('base64url');
}

const COOKIE = /^api-auth-session=([A-Za-z0-9_-]{76}\.[A-Za-z0-9_-]{76}); Max-Age=(\d+); Path=\/ext\/auth; HttpOnly; SameSite=Strict$/;

/** auth.signIn: the session from the cookie, the answer's CSRF value. */
async function signIn(t: Test, url: string, password: string): Promise<{ session: string; csrf: string; response: HttpResponse }> {
  const response = await postJson(authUrl(url), { jsonrpc: '2.0', id: 1, method: 'auth.signIn', params: { password } });
  const cookie = COOKIE.exec(response.headers['set-cookie'] ?? '');
  t.ok(cookie, `the session cookie, HttpOnly, SameSite=Strict, Path=/ext/auth: ${response.headers['set-cookie']}`);
  const answer = JSON.parse(response.text);
  return { session: cookie?.[1] ?? '', csrf: answer.result?.csrf, response };
}

for (const threads of ['1', '2']) {
  t.test(`on ${threads} HTTP thread(s)`, async (t) => {
    const server = await startServer(t, { cheapChecks: true, args: ['--console', '--http-threads', threads] });
    const AUTH = authUrl(server.url);
    const { session, csrf, response } = await signIn(t, server.url, server.password);
    const answer = JSON.parse(response.text);
    t.same(Object.keys(answer.result), ['csrf', 'expiresAt'], 'the answer holds the CSRF value and the end, not the session');
    t.notOk(response.text.includes(session), 'the session is in the cookie alone');
    t.equal(csrf, csrfOf(session), "the CSRF value is the session's");
    t.equal(Number(COOKIE.exec(response.headers['set-cookie'])?.[2]), 900, 'for 15 minutes');
    t.equal(response.headers['cache-control'], 'no-store', 'no-store');
    const expires = Date.parse(answer.result.expiresAt) - Date.now();
    t.ok(expires > 800_000 && expires <= 901_000, 'expiresAt is 15 minutes on');

    const headers: [string, string][] = [
      ['Cookie', `other=1; api-auth-session=${session}`],
      ['X-Api-Auth-Csrf', csrf],
    ];
    const issued = await jsonrpc(AUTH, 'auth.newToken', { endpoints: ['/'], label: 'by session' }, 1, headers);
    t.match(issued.result, { id: /^t\d+$/, token: /^[A-Za-z0-9_-]{76}$/ }, 'newToken with the session');
    const listed = await jsonrpc(AUTH, 'auth.listTokens', {}, 1, headers);
    t.same(
      listed.result.tokens.map((x: { label: string }) => x.label),
      ['by session'],
      'listTokens with the session; the session is not listed',
    );
    const rotated = await jsonrpc(AUTH, 'auth.rotateToken', { id: issued.result.id }, 1, headers);
    t.match(rotated.result, { id: /^t\d+$/ }, 'rotateToken with the session');
    const revoked = await jsonrpc(AUTH, 'auth.revokeToken', { id: rotated.result.id }, 1, headers);
    t.same(revoked.result, { success: true, revocation: 'revoked' }, 'revokeToken with the session');
    const wrongPassword = await jsonrpc(AUTH, 'auth.listTokens', { password: 'not-it' }, 1, headers);
    t.equal(wrongPassword.error?.code, -32000, 'a password given is the one checked, cookie or not');
    const change = await jsonrpc(AUTH, 'auth.changePassword', { newPassword: 'x-new' }, 1, headers);
    t.equal(change.error?.code, -32602, 'changePassword takes no session: the old password is asked');

    const unknown = await jsonrpc(AUTH, 'auth.signIn', { password: server.password, session: 'x' });
    t.match(unknown.error, { code: -32602, message: /unknown param "session"/ }, 'an unknown param of signIn is refused');
    const foreign = await jsonrpc(AUTH, 'auth.signIn', { password: server.password }, 1, [['Origin', 'http://evil.example']]);
    t.match(foreign.error, { code: -32000, message: /own origin/ }, 'a sign-in from a foreign page is refused (login CSRF)');
    const wrong = await postJson(AUTH, { jsonrpc: '2.0', id: 1, method: 'auth.signIn', params: { password: 'not-it' } });
    t.equal(JSON.parse(wrong.text).error.code, -32000, 'a wrong password is refused');
    t.equal(wrong.headers['set-cookie'], undefined, 'and sets no cookie');

    const renewed = await postJson(AUTH, { jsonrpc: '2.0', id: 1, method: 'auth.renewSession' }, headers);
    const next = COOKIE.exec(renewed.headers['set-cookie'] ?? '')?.[1] ?? '';
    t.not(next, session, 'renewal sets a new session');
    t.equal(JSON.parse(renewed.text).result.csrf, csrfOf(next), 'with its CSRF value');
    t.equal((await jsonrpc(AUTH, 'auth.listTokens', {}, 1, headers)).error?.code, -32000, 'the old session is over');
    const nextHeaders: [string, string][] = [
      ['Cookie', `api-auth-session=${next}`],
      ['X-Api-Auth-Csrf', csrfOf(next)],
    ];
    const out = await postJson(AUTH, { jsonrpc: '2.0', id: 1, method: 'auth.signOut' }, nextHeaders);
    t.equal(
      out.headers['set-cookie'],
      'api-auth-session=; Max-Age=0; Path=/ext/auth; HttpOnly; SameSite=Strict',
      'sign-out clears the cookie',
    );
    t.same(JSON.parse(out.text).result, { success: true }, 'signed out');
    t.equal((await jsonrpc(AUTH, 'auth.listTokens', {}, 1, nextHeaders)).error?.code, -32000, 'the signed-out session is refused');

    const audits = await server.waitForLines((l) => l.msg === 'audit' && l.method === 'auth.newToken' && l.by === 'session', 1);
    t.equal(audits[0].outcome, 'ok', 'a call by session is audited as one');
    await server.waitForLines((l) => l.msg === 'audit' && l.method === 'auth.signOut', 1);
    const written = server.stdout() + server.stderr();
    t.notOk(
      written.includes(session) || written.includes(next) || written.includes(server.password),
      'no log line holds a session or the password',
    );

    const batch = await postJson(AUTH, [
      { jsonrpc: '2.0', id: 1, method: 'auth.signIn', params: { password: server.password } },
      { jsonrpc: '2.0', id: 2, method: 'auth.listTokens', params: { password: server.password } },
    ]);
    t.match(batch.headers['set-cookie'] ?? '', COOKIE, 'a sign-in in a batch sets its cookie too');
  });
}

t.test('under TLS the cookie is Secure', async (t) => {
  const dir = tempDir(t);
  const { cert, key } = selfSigned(dir, 'console');
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--console', '--http-threads', '1', '--http-tls-enabled', '--http-tls-cert-file', cert, '--http-tls-key-file', key],
  });
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'auth.signIn', params: { password: server.password } });
  const setCookie = await new Promise<string>((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port: server.port,
        path: '/ext/auth',
        method: 'POST',
        ca: readFileSync(cert),
        headers: { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(String(res.headers['set-cookie'] ?? '')));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
  t.match(
    setCookie,
    /^api-auth-session=[A-Za-z0-9_-]{76}\.[A-Za-z0-9_-]{76}; Max-Age=900; Path=\/ext\/auth; HttpOnly; SameSite=Strict; Secure$/,
    'Secure',
  );
});
