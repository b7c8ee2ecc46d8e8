// No secret leaves the server except where it must: after a whole session (tokens
// issued, used, refused, revoked; wrong passwords; a password change), no password
// (the file's, the new one, the wrong ones) and no token appears in the server's
// stdout or stderr, nor in any error a client was sent.
import t from 'tap';
import { authUrl, call, callWithHeader, changePassword, newToken, REVOKED, revokeToken, tamperLast } from '../helpers/auth.js';
import { jsonrpc, postJson, type HttpResponse } from '../helpers/http.js';
import { randomPassword, startServer } from '../helpers/server.js';

t.test('a full session leaks no password and no token into the logs or into error messages', async (t) => {
  const filePassword = randomPassword();
  const server = await startServer(t, { cheapChecks: true, password: filePassword, fileContent: `  ${filePassword}\n` });
  const AUTH = authUrl(server.url);
  const newPassword = `${randomPassword()}-new`;
  const wrong = [`${randomPassword()}-wrong`, `${filePassword}x`, filePassword.toUpperCase()];
  const errors: string[] = [];
  const keepError = (response: HttpResponse): HttpResponse => {
    if (response.status !== 200 || /"error"/.test(response.text)) errors.push(response.text);
    return response;
  };
  const keepRpcError = (answer: { error?: { message: string } }): void => {
    if (answer.error !== undefined) errors.push(answer.error.message);
  };

  // Tokens, used and refused.
  const [info, star] = await Promise.all([newToken(server.url, filePassword, ['/ext/info']), newToken(server.url, filePassword, ['*'])]);
  t.equal(keepError(await call(server.url, '/ext/info', info)).status, 200, 'the /ext/info token works');
  keepError(await call(server.url, '/ext/health', info));
  keepError(await call(server.url, '/ext/info', tamperLast(info)));
  keepError(await call(server.url, '/ext/info', `${info}=`));
  keepError(await callWithHeader(server.url, '/ext/info', `Basic ${star}`));
  keepError(await callWithHeader(server.url, '/ext/info', star));
  keepError(await call(server.url, '/ext/./info', star));

  // Wrong passwords, each method (each from its own client address: the helpers connect from a fresh one).
  for (const candidate of wrong) {
    keepRpcError(await jsonrpc(AUTH, 'auth.newToken', { password: candidate, endpoints: ['*'] }));
  }
  keepRpcError(await jsonrpc(AUTH, 'auth.revokeToken', { password: wrong[0], token: star }));
  keepRpcError(await jsonrpc(AUTH, 'auth.changePassword', { oldPassword: wrong[1], newPassword }));
  // Requests that name secrets and fail for another reason.
  keepRpcError(await jsonrpc(AUTH, 'auth.newToken', { password: filePassword, endpoints: ['/ext/./x'] }));
  keepRpcError(await jsonrpc(AUTH, 'auth.newToken', { password: filePassword, endpoints: 'x', extra: star }));
  keepRpcError(await jsonrpc(AUTH, 'auth.changePassword', { oldPassword: filePassword, newPassword: filePassword }));
  keepRpcError(await jsonrpc(AUTH, 'auth.revokeToken', { password: filePassword, token: 5 }));
  keepRpcError(await jsonrpc(AUTH, 'auth.changePassword', { oldPassword: filePassword, newPassword: 'x'.repeat(1025) }));

  // Revoke, then use the revoked token.
  t.same(await revokeToken(server.url, filePassword, star), REVOKED, 'the "*" token is revoked');
  keepError(await call(server.url, '/ext/info', star));

  // Change the password: the earlier tokens refuse, the old password is wrong now.
  t.same(await changePassword(server.url, filePassword, newPassword), { success: true }, 'the password is changed');
  keepError(await call(server.url, '/ext/info', info));
  keepRpcError(await jsonrpc(AUTH, 'auth.newToken', { password: filePassword, endpoints: ['*'] }));
  const after = await newToken(server.url, newPassword, ['/ext/info']);
  t.equal(keepError(await call(server.url, '/ext/info', after)).status, 200, 'a token under the new password works');
  keepError(await call(server.url, '/ext/health', after));
  t.same(await revokeToken(server.url, newPassword, after), REVOKED, 'and is revoked');
  keepError(await call(server.url, '/ext/info', after));

  await server.stop();
  const secrets: [string, string][] = [
    ['the file password', filePassword],
    ['the new password', newPassword],
    ...wrong.map((w, i) => [`wrong password ${i + 1}`, w] as [string, string]),
    ['the /ext/info token', info],
    ['the "*" token', star],
    ['the token issued after the change', after],
    // The tag alone (the last 43 characters) is as secret as the token.
    ['the tag of the /ext/info token', info.slice(-43)],
    ['the tag of the "*" token', star.slice(-43)],
  ];
  t.ok(errors.length >= 20, `${errors.length} error answers were collected`);
  const stdout = server.stdout();
  const stderr = server.stderr();
  t.ok(stdout.includes('"password changed"'), 'the log did record the session (a check of the test)');
  for (const [name, secret] of secrets) {
    t.notOk(stdout.includes(secret), `${name} is not in stdout`);
    t.notOk(stderr.includes(secret), `${name} is not in stderr`);
    t.notOk(
      errors.some((e) => e.includes(secret)),
      `${name} is in no error sent to a client`,
    );
  }
});

t.test('a body that is not JSON is not echoed back in the parse error', async (t) => {
  // A client that forgets the quotes around a password, or posts the password file by
  // mistake, must not get part of the password back in an error (clients and proxies log
  // errors). Any 6 characters of it in a row count.
  // The helpers' passwords start with a letter, so JSON.parse stops at their first character.
  const server = await startServer(t, { cheapChecks: true });
  const secret = server.password;
  const quotes = (message: string): boolean => {
    for (let i = 0; i + 6 <= secret.length; i++) if (message.includes(secret.slice(i, i + 6))) return true;
    return false;
  };
  for (const [name, body] of [
    ['the password unquoted', `{"jsonrpc":"2.0","method":"auth.newToken","params":{"password":${secret},"endpoints":["*"]},"id":1}`],
    ['the password file posted as the body', `${secret}\n`],
    ['the password in a broken batch', `[{"jsonrpc":"2.0","method":"auth.newToken","params":{"password":"x"}}, ${secret}]`],
  ] as const) {
    const response = await postJson(authUrl(server.url), body);
    const error = JSON.parse(response.text).error;
    t.equal(error?.code, -32700, `${name}: a parse error`);
    t.notOk(quotes(error?.message ?? ''), `${name}: the message quotes none of the password (${JSON.stringify(error?.message)})`);
  }
});
