// A password is Unicode text. JSON can carry a lone surrogate ("\ud800"), but UTF-8 has
// no form for one: hashed, it became U+FFFD, so "pw-\ud800", "pw-\udbff" and "pw-\ufffd"
// were one password. A lone surrogate is invalid params wherever a password goes, before
// any hashing and before the throttle counts a guess; a password file that is not UTF-8
// is refused at start.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { changePassword, tryPassword } from '../helpers/auth.js';
import { request, rpc } from '../helpers/http.js';
import type { RpcResponse } from '../helpers/http.js';
import { runCli, startServer, tempDir } from '../helpers/server.js';

/** A call to /ext/auth from `source`, answered with HTTP 200. */
async function callFrom(base: string, source: string, method: string, params: Record<string, unknown>): Promise<RpcResponse> {
  const response = await request(base, '/ext/auth', {
    method: 'POST',
    headers: [['Content-Type', 'application/json']],
    body: JSON.stringify(rpc(method, params, 1)),
    localAddress: source,
  });
  if (response.status !== 200) throw new Error(`${method}: HTTP ${response.status}: ${response.text}`);
  return JSON.parse(response.text) as RpcResponse;
}

const invalid = (name: string) => ({
  code: -32602,
  message: `invalid params: ${name} must be valid Unicode text, without lone surrogates (\\ud800 to \\udfff outside a pair)`,
});

t.test('a lone surrogate in password, oldPassword or newPassword is invalid params naming it, and no guess', async (t) => {
  const server = await startServer(t, { cheapChecks: true });
  const source = '127.6.0.1';
  const cases: [string, Record<string, unknown>, string][] = [
    ['auth.newToken', { password: 'pw-\ud800', endpoints: ['*'] }, 'password'],
    ['auth.newToken', { password: `${server.password}\udbff`, endpoints: ['*'] }, 'password'],
    ['auth.revokeToken', { password: '\udc00pw', token: 'x' }, 'password'],
    ['auth.changePassword', { oldPassword: 'pw-\ud83d', newPassword: 'next-password' }, 'oldPassword'],
    ['auth.changePassword', { oldPassword: server.password, newPassword: 'pw-\ud800' }, 'newPassword'],
    ['auth.changePassword', { oldPassword: server.password, newPassword: '\ude00-low-alone' }, 'newPassword'],
  ];
  for (const [method, params, name] of cases) {
    t.same((await callFrom(server.url, source, method, params)).error, invalid(name), `${method}: ${name}`);
  }
  const after = await callFrom(server.url, source, 'auth.newToken', { password: server.password, endpoints: ['/ext/info'] });
  t.type(after.result?.token, 'string', `${cases.length} calls from one address, none counted as a wrong password`);
  t.ok(await tryPassword(server.url, server.password), 'the password is unchanged');
});

t.test('after a change to a valid password, neither "pw-\\ufffd" nor "pw-\\udbff" authenticates', async (t) => {
  const server = await startServer(t, { cheapChecks: true });
  t.same(await changePassword(server.url, server.password, 'pw-\ud800'), invalid('newPassword'), 'no password with a lone surrogate');
  t.ok(await tryPassword(server.url, server.password), 'the password is unchanged');
  t.equal(await tryPassword(server.url, 'pw-\ufffd'), undefined, '"pw-\\ufffd" is a wrong password');
  const astral = 'pw-\u{1f511}';
  t.same(await changePassword(server.url, server.password, astral), { success: true }, 'a pair of surrogates is one character, and fine');
  t.ok(await tryPassword(server.url, astral), 'the new password works');
  t.equal(await tryPassword(server.url, 'pw-\ufffd'), undefined, '"pw-\\ufffd" is still a wrong password');
  t.equal(await tryPassword(server.url, 'pw-\ufffd\ufffd'), undefined);
  for (const half of ['pw-\ud83d', 'pw-\udd11', 'pw-\udbff']) {
    const answer = await callFrom(server.url, '127.6.0.2', 'auth.newToken', { password: half, endpoints: ['*'] });
    t.same(answer.error, invalid('password'), `${JSON.stringify(half)} is invalid params`);
  }
});

t.test('a password file that is not UTF-8 is refused at start (exit 2), whatever its bytes would decode to', async (t) => {
  const dir = tempDir(t);
  for (const [name, bytes] of [
    ['an encoded surrogate (ED A0 80)', Buffer.from([0x70, 0x77, 0x2d, 0xed, 0xa0, 0x80])],
    ['a byte 0xFF', Buffer.from([0x70, 0x77, 0x2d, 0xff])],
  ] as const) {
    const file = join(dir, 'password');
    writeFileSync(file, bytes, { mode: 0o600 });
    const run = await runCli(t, [
      '--http-port',
      '0',
      '--data-dir',
      join(dir, 'data'),
      '--api-auth-required',
      '--api-auth-password-file',
      file,
    ]);
    t.equal(run.code, 2, `${name}: exit 2`);
    t.equal(
      run.stderr,
      `api-auth: --api-auth-password-file ${file}: the file is not UTF-8 text; save the password as UTF-8\n`,
      `${name}: says so`,
    );
  }
});
