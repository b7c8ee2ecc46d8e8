// A console session's life on the service's clock (docs/guides/console.md, Sessions): it
// ends 15 minutes after it was had; a renewal before then gives a new one, an ended one is
// not renewed; and a chain of renewals runs no longer than --console-session-max-lifetime
// (12 hours unless given) from its sign-in, after which the operator signs in again. The
// clock is the test's: nothing waits for the time to pass.
import t from 'tap';
import type { Test } from 'tap';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { authUrl } from '../helpers/auth.js';
import { jsonrpc, postJson } from '../helpers/http.js';
import { CLOCK_START, manualClock, serveInProcess } from '../helpers/library.js';
import type { LibraryServer } from '../helpers/library.js';
import { parseArgs } from '../../build/host/index.js';
import { runCli, tempDir } from '../helpers/server.js';

const MINUTE = 60_000;
const COOKIE = /^api-auth-session=([A-Za-z0-9_-]{76}\.[A-Za-z0-9_-]{76}); Max-Age=(\d+); Path=\/ext\/auth; HttpOnly; SameSite=Strict$/;

function csrfOf(cookie: string): string {
  return createHash('sha256').update('api-auth console csrf\0').update(cookie).digest('base64url');
}

interface Session {
  cookie: string;
  maxAge: number;
  expiresAt: number;
}

function headersOf(session: Session): [string, string][] {
  return [
    ['Cookie', `api-auth-session=${session.cookie}`],
    ['X-Api-Auth-Csrf', csrfOf(session.cookie)],
  ];
}

/** The session a signIn or renewSession answered, or its error. */
async function sessionCall(
  url: string,
  method: string,
  params: unknown,
  headers: [string, string][] = [],
): Promise<Session | { code: number; message: string }> {
  const response = await postJson(authUrl(url), { jsonrpc: '2.0', id: 1, method, params }, headers);
  const answer = JSON.parse(response.text);
  if (answer.error !== undefined) return answer.error;
  const cookie = COOKIE.exec(response.headers['set-cookie'] ?? '');
  if (cookie === null) throw new Error(`no session cookie: ${response.headers['set-cookie']}`);
  if (answer.result.csrf !== csrfOf(cookie[1])) throw new Error("the CSRF value is not the cookie's");
  return { cookie: cookie[1], maxAge: Number(cookie[2]), expiresAt: Date.parse(answer.result.expiresAt) };
}

async function signIn(t: Test, server: LibraryServer): Promise<Session> {
  const session = await sessionCall(server.url, 'auth.signIn', { password: server.password });
  if (!('cookie' in session)) throw new Error(`signIn refused: ${session.message}`);
  t.pass('signed in');
  return session;
}

/** Whether the session still authorises a management call (auth.listTokens). */
async function works(server: LibraryServer, session: Session): Promise<boolean | string> {
  const listed = await jsonrpc(authUrl(server.url), 'auth.listTokens', {}, 1, headersOf(session));
  if (listed.result !== undefined) return true;
  return String(listed.error?.message);
}

t.test('a session ends at its 15 minutes; renewed before, it goes on; ended, it is not renewed', async (t) => {
  const clock = manualClock();
  const server = await serveInProcess(t, { clock: clock.clock, cheapChecks: true, args: ['--console'] });
  const first = await signIn(t, server);
  t.equal(first.expiresAt, CLOCK_START + 15 * MINUTE, 'expiresAt is 15 minutes after the sign-in, on the service clock');
  t.equal(first.maxAge, 900, 'the cookie lasts as long');

  clock.now += 15 * MINUTE - 1000;
  t.equal(await works(server, first), true, 'a second before its end, it works');
  clock.now += 1000;
  t.match(await works(server, first), /not live/, 'at its end, it is refused: not live');
  t.match(
    await sessionCall(server.url, 'auth.renewSession', {}, headersOf(first)),
    { code: -32000, message: /not live.*sign in again/ },
    'an ended session cannot be renewed',
  );

  const second = await signIn(t, server);
  clock.now += 10 * MINUTE;
  const renewed = await sessionCall(server.url, 'auth.renewSession', {}, headersOf(second));
  if (!('cookie' in renewed)) throw new Error(`renewal refused: ${renewed.message}`);
  t.equal(renewed.expiresAt, clock.now + 15 * MINUTE, 'a renewal before the end runs 15 minutes from the renewal');
  t.equal(renewed.maxAge, 900, 'and so does its cookie');
  t.match(await works(server, second), /not live/, 'the renewed one ends at once');
  clock.now += 14 * MINUTE;
  t.ok(clock.now > second.expiresAt, "past the first session's end...");
  t.equal(await works(server, renewed), true, '...the renewed one works');
  clock.now += MINUTE;
  t.match(await works(server, renewed), /not live/, 'and it too ends at its 15 minutes');
});

t.test('renewals run no longer than --console-session-max-lifetime from the sign-in', async (t) => {
  const clock = manualClock();
  const server = await serveInProcess(t, {
    clock: clock.clock,
    cheapChecks: true,
    args: ['--console', '--console-session-max-lifetime', '1h'],
  });
  const signedIn = CLOCK_START;
  let session = await signIn(t, server);
  for (const at of [14, 28, 42]) {
    clock.now = signedIn + at * MINUTE;
    const next = await sessionCall(server.url, 'auth.renewSession', {}, headersOf(session));
    if (!('cookie' in next)) throw new Error(`renewal at ${at} min refused: ${next.message}`);
    t.equal(next.expiresAt, clock.now + 15 * MINUTE, `renewed at ${at} min: 15 minutes on`);
    session = next;
  }
  clock.now = signedIn + 56 * MINUTE;
  const last = await sessionCall(server.url, 'auth.renewSession', {}, headersOf(session));
  if (!('cookie' in last)) throw new Error(`renewal at 56 min refused: ${last.message}`);
  t.equal(last.expiresAt, signedIn + 60 * MINUTE, 'renewed at 56 min: it ends at the hour from the sign-in, not 15 minutes on');
  t.equal(last.maxAge, 4 * 60, 'its cookie lasts the 4 minutes left');

  clock.now = signedIn + 57 * MINUTE;
  t.match(
    await sessionCall(server.url, 'auth.renewSession', {}, headersOf(last)),
    {
      code: -32000,
      message:
        'the console session cannot be renewed: it ends 1h after its sign-in, the longest a session runs ' +
        '(--console-session-max-lifetime); sign in again',
    },
    'renewed again, it is refused, saying why and what to do',
  );
  t.equal(await works(server, last), true, 'the refusal does not end the session...');
  clock.now = signedIn + 60 * MINUTE;
  t.match(await works(server, last), /not live/, '...its end does');
  t.match(
    await sessionCall(server.url, 'auth.renewSession', {}, headersOf(last)),
    { code: -32000, message: /not live/ },
    'nor is it renewed then',
  );

  const again = await signIn(t, server);
  t.equal(again.expiresAt, clock.now + 15 * MINUTE, 'a new sign-in starts a new chain');
  clock.now += 10 * MINUTE;
  const renewed = await sessionCall(server.url, 'auth.renewSession', {}, headersOf(again));
  t.match(renewed, { expiresAt: clock.now + 15 * MINUTE }, 'which renews');
});

t.test('unless told, a chain of renewals ends 12 hours after its sign-in', async (t) => {
  const clock = manualClock();
  const server = await serveInProcess(t, { clock: clock.clock, cheapChecks: true, args: ['--console'] });
  let session = await signIn(t, server);
  let renewals = 0;
  for (;;) {
    clock.now = session.expiresAt - 5 * MINUTE;
    const next = await sessionCall(server.url, 'auth.renewSession', {}, headersOf(session));
    if (!('cookie' in next)) {
      t.match(next, { code: -32000, message: /cannot be renewed: it ends 12h after its sign-in/ }, 'the renewal past it is refused');
      break;
    }
    session = next;
    renewals++;
  }
  t.equal(session.expiresAt, CLOCK_START + 12 * 3600_000, 'the last session ends 12 hours after the sign-in');
  t.equal(renewals, Math.ceil((12 * 60 - 15) / 10), 'renewed every 10 minutes until then');
});

t.test("the sign-in's token is no session, and a session cookie needs both its tokens", async (t) => {
  const clock = manualClock();
  const server = await serveInProcess(t, { clock: clock.clock, cheapChecks: true, args: ['--console'] });
  const session = await signIn(t, server);
  const [own, signInToken] = session.cookie.split('.');
  for (const [what, cookie] of [
    ['the two swapped', `${signInToken}.${own}`],
    ['the sign-in twice', `${signInToken}.${signInToken}`],
    ['the session alone', own],
    ['the sign-in alone', signInToken],
  ] as const) {
    const forged = { cookie, maxAge: 0, expiresAt: 0 };
    t.match(await works(server, forged), /not live/, `${what}: no session`);
    t.match(await sessionCall(server.url, 'auth.renewSession', {}, headersOf(forged)), { code: -32000 }, `${what}: no renewal`);
  }
  t.equal(await works(server, session), true, 'the session itself works');
  const out = await jsonrpc(authUrl(server.url), 'auth.signOut', {}, 1, headersOf(session));
  t.same(out.result, { success: true }, 'signed out');
  t.match(await works(server, session), /not live/, 'after sign-out it is refused');
});

t.test('--console-session-max-lifetime from the flag, the environment and the config file; a bad one is refused', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'api-auth.json');
  writeFileSync(file, JSON.stringify({ 'console-session-max-lifetime': '8h' }));
  const options = (args: string[], env: Record<string, string> = {}): unknown => {
    const command = parseArgs(args, env);
    return command.action === 'serve' ? command.options.consoleSessionMaxLifetime : command.action;
  };
  t.equal(options(['--console-session-max-lifetime', '2h']), '2h', 'the flag');
  t.equal(options([], { API_AUTH_CONSOLE_SESSION_MAX_LIFETIME: '4h' }), '4h', 'the environment');
  t.equal(options(['--config-file', file]), '8h', 'the config file');
  const refused = await runCli(t, ['--http-port', '0', '--console-session-max-lifetime', '30s']);
  t.equal(refused.code, 2, 'a lifetime under a minute exits 2');
  t.match(
    refused.stderr.trim(),
    /^api-auth: --console-session-max-lifetime must be a duration in whole seconds from 60s to 720h, .*not "30s"$/,
    'naming the flag and its range',
  );
});
