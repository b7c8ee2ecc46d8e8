// Durable state through the real CLI: tokens,
// revocations and password changes survive a clean restart (SIGTERM) and a crash
// (SIGKILL); the operator's reset path; changing back revives nothing; the password file
// is never written and no password is stored in plaintext; the data folder's modes; the
// lock against a second instance; expired revocations are dropped from the state file.
import t, { type Test } from 'tap';
import { argon2Verify } from 'hash-wasm';
import { existsSync, readdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync, type BigIntStats } from 'node:fs';
import { join } from 'node:path';
import {
  ALREADY_REVOKED,
  call,
  changePassword,
  expectGranted,
  expectRefused,
  INCORRECT_PASSWORD,
  newToken,
  REASONS,
  refusalBody,
  REVOKED,
  revokeToken,
  tryPassword,
} from '../helpers/auth.js';
import type { HttpResponse } from '../helpers/http.js';
import { manualClock, serveAgain, serveInProcess } from '../helpers/library.js';
import { randomPassword, restartServer, runCli, startServer, type Server } from '../helpers/server.js';

// Two tests at a time: each has a server and a data folder of its own, and a restart
// spends most of its time starting a process.
t.jobs = 2;

const SUCCESS = { success: true };
/** The PHC prefix of the argon2id parameters the team brief fixes. */
const ARGON2ID_PHC = '$argon2id$v=19$m=19456,t=2,p=1$';
/** A revocation's bytes in the state file: the token's serial and expiry, 8 bytes each. */
const REVOCATION_BYTES = 16;
/**
 * The state, the data folder and the CLI are these tests' subject, not the HTTP threads
 * (test/http/threads.test.ts): one thread, whose start costs about a third less CPU time.
 */
const ONE_THREAD = ['--http-threads', '1'];

function statePath(server: { dataDir: string }): string {
  return join(server.dataDir, 'state');
}

function stateFile(server: { dataDir: string }): Buffer {
  return readFileSync(statePath(server));
}

/** Stops `server` with `signal` and checks how it ended: exit 0 after SIGTERM, killed by SIGKILL. */
async function stop(t: Test, server: Server, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  const exit = await server.stop(signal);
  if (signal === 'SIGTERM') t.same(exit, { code: 0, signal: null }, 'SIGTERM: a clean stop, exit code 0');
  else t.same(exit, { code: null, signal: 'SIGKILL' }, 'SIGKILL: the process was killed');
}

/** Stops `server` with `signal` and starts it again on the same data folder and password file. */
async function restart(t: Test, server: Server, signal: 'SIGTERM' | 'SIGKILL', password?: string): Promise<Server> {
  await stop(t, server, signal);
  return restartServer(t, server, password);
}

/** A 401 refusal whose reason is one of `reasons` (for tokens that more than one rule ends). */
function expectRefusedOneOf(t: Test, response: HttpResponse, reasons: readonly string[], label: string): void {
  t.equal(response.status, 401, `status 401 (${label})`);
  t.ok(
    reasons.some((r) => response.text === refusalBody(r)),
    `refused for one of ${JSON.stringify(reasons)} (${label}): ${response.text}`,
  );
}

/** `password` is the service password: a token comes back and grants /ext/info. */
async function expectPasswordWorks(t: Test, server: Server, password: string, label: string): Promise<string> {
  const token = await tryPassword(server.url, password);
  t.ok(token, `the password works (${label})`);
  if (token !== undefined) expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', `a token under it (${label})`);
  return token ?? '';
}

/**
 * `password` is refused with -32000 by newToken and by changePassword, and changes
 * nothing: `current` works after each refusal. (A correct password between failures also
 * keeps a client clear of any throttling of repeated failures.)
 */
async function expectPasswordFails(t: Test, server: Server, password: string, current: string, label: string): Promise<void> {
  t.equal(await tryPassword(server.url, password), undefined, `auth.newToken refuses it: incorrect password (${label})`);
  t.ok(await tryPassword(server.url, current), `the current password still works (${label})`);
  t.same(
    await changePassword(server.url, password, `never-${randomPassword()}`),
    INCORRECT_PASSWORD,
    `auth.changePassword refuses it as oldPassword (${label})`,
  );
  t.ok(await tryPassword(server.url, current), `the current password still works (${label})`);
}

/** Every file under `dir`, with its bytes. */
function filesUnder(dir: string): { path: string; bytes: Buffer }[] {
  const found: { path: string; bytes: Buffer }[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...filesUnder(path));
    else if (entry.isFile()) found.push({ path, bytes: readFileSync(path) });
  }
  return found;
}

/** What would show that the program wrote, replaced or chmodded the password file. */
function fileIdentity(path: string): Record<string, string> {
  const st: BigIntStats = statSync(path, { bigint: true });
  return {
    content: readFileSync(path).toString('hex'),
    ino: String(st.ino),
    mode: st.mode.toString(8),
    mtimeNs: String(st.mtimeNs),
    ctimeNs: String(st.ctimeNs),
    size: String(st.size),
  };
}

t.test('a token stays valid across a clean restart and a kill -9, on exactly its endpoints', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const info = await newToken(server.url, server.password, ['/ext/info']);
  const star = await newToken(server.url, server.password, ['*']);
  const subtree = await newToken(server.url, server.password, ['/ext/bc/*']);
  const check = async (label: string): Promise<void> => {
    expectGranted(t, await call(server.url, '/ext/info', info), '/ext/info', `${label}: the /ext/info token`);
    expectRefused(t, await call(server.url, '/ext/health', info), REASONS.notGranted, `${label}: the /ext/info token on /ext/health`);
    expectGranted(t, await call(server.url, '/ext/health', star), '/ext/health', `${label}: the "*" token`);
    expectGranted(t, await call(server.url, '/ext/bc/X', subtree), '/ext/bc/X', `${label}: the /ext/bc/* token`);
    expectRefused(t, await call(server.url, '/ext/info', subtree), REASONS.notGranted, `${label}: the /ext/bc/* token on /ext/info`);
  };
  await check('before any restart');

  server = await restart(t, server, 'SIGTERM');
  await check('after a clean restart');
  // Tokens issued after a restart must not reuse the serial of an earlier one: a revocation
  // of one would then end the other.
  const later = [await newToken(server.url, server.password, ['/ext/info']), await newToken(server.url, server.password, ['/ext/info'])];
  t.equal(new Set([info, star, subtree, ...later]).size, 5, 'every token is distinct');

  server = await restart(t, server, 'SIGKILL');
  await check('after kill -9');
  for (const token of later)
    expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'a token issued after the first restart');
  const last = await newToken(server.url, server.password, ['/ext/info']);

  t.same(await revokeToken(server.url, server.password, later[0]), REVOKED, 'revoke a token issued after the first restart');
  expectRefused(t, await call(server.url, '/ext/info', later[0]), REASONS.revoked, 'the revoked one');
  await check('after revoking a later token');
  expectGranted(t, await call(server.url, '/ext/info', later[1]), '/ext/info', 'its sibling');
  expectGranted(t, await call(server.url, '/ext/info', last), '/ext/info', 'a token issued after the second restart');
  t.same(await revokeToken(server.url, server.password, info), REVOKED, 'revoke a token issued before any restart');
  for (const token of [later[1], last])
    expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'later tokens stay valid');
});

t.test('a revoked token stays revoked after a clean restart and after kill -9; the revocation is on disk at the reply', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const [a, b, c, d, e] = [
    await newToken(server.url, server.password, ['/ext/info']),
    await newToken(server.url, server.password, ['/ext/info']),
    await newToken(server.url, server.password, ['/ext/info']),
    await newToken(server.url, server.password, ['/ext/info']),
    await newToken(server.url, server.password, ['/ext/info']),
  ];
  const before = stateFile(server);
  t.same(await revokeToken(server.url, server.password, a), REVOKED, 'revoke a');
  const after = stateFile(server);
  t.notSame(after, before, 'the state file changed before the reply arrived');
  t.equal(after.length, before.length + REVOCATION_BYTES, `the state file grew by ${REVOCATION_BYTES} bytes: one revocation`);

  server = await restart(t, server, 'SIGTERM');
  expectRefused(t, await call(server.url, '/ext/info', a), REASONS.revoked, 'a after a clean restart');
  for (const token of [b, c, d, e]) expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'the others stay valid');

  t.same(await revokeToken(server.url, server.password, b), REVOKED, 'revoke b, then kill -9 at once');
  server = await restart(t, server, 'SIGKILL');
  expectRefused(t, await call(server.url, '/ext/info', a), REASONS.revoked, 'a after kill -9');
  expectRefused(t, await call(server.url, '/ext/info', b), REASONS.revoked, 'b after kill -9');

  t.same(
    await Promise.all([revokeToken(server.url, server.password, c), revokeToken(server.url, server.password, d)]),
    [REVOKED, REVOKED],
    'revoke c and d concurrently, then kill -9 at once',
  );
  server = await restart(t, server, 'SIGKILL');
  for (const [name, token] of [
    ['a', a],
    ['b', b],
    ['c', c],
    ['d', d],
  ]) {
    expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, `${name} after the second kill -9`);
  }
  expectGranted(t, await call(server.url, '/ext/info', e), '/ext/info', 'e was never revoked');
  t.same(await revokeToken(server.url, server.password, a), ALREADY_REVOKED, 'revoking a again succeeds');
  server = await restart(t, server, 'SIGTERM');
  expectRefused(t, await call(server.url, '/ext/info', a), REASONS.revoked, 'a is still revoked');
  expectGranted(t, await call(server.url, '/ext/info', e), '/ext/info', 'e is still valid');
});

t.test('a password changed by auth.changePassword stays in force after a clean restart and after kill -9', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  // The password file (mode 0600) is never written along the way (see also the test of that name).
  const identity = fileIdentity(server.passwordFile);
  const file = server.password;
  const p1 = `p1-${randomPassword()}`;
  const p2 = `p2-${randomPassword()}`;
  const underFile = await newToken(server.url, file, ['/ext/info']);
  t.same(await revokeToken(server.url, file, await newToken(server.url, file, ['/ext/info'])), REVOKED, 'a revocation');
  const before = stateFile(server);
  t.same(await changePassword(server.url, file, p1), SUCCESS, 'file password -> p1');
  t.notSame(stateFile(server), before, 'the state file changed before the reply arrived');
  const underP1 = await newToken(server.url, p1, ['/ext/info']);

  server = await restart(t, server, 'SIGTERM', p1);
  await expectPasswordWorks(t, server, p1, 'p1 after a clean restart');
  await expectPasswordFails(t, server, file, server.password, 'the file password after a clean restart');
  expectRefused(t, await call(server.url, '/ext/info', underFile), REASONS.earlierGeneration, 'a token under the file password');
  expectGranted(t, await call(server.url, '/ext/info', underP1), '/ext/info', 'a token under p1 survives');

  t.same(await changePassword(server.url, p1, p2), SUCCESS, 'p1 -> p2, then kill -9 at once');
  server = await restart(t, server, 'SIGKILL', p2);
  const underP2 = await expectPasswordWorks(t, server, p2, 'p2 after kill -9');
  await expectPasswordFails(t, server, p1, server.password, 'p1 after kill -9');
  await expectPasswordFails(t, server, file, server.password, 'the file password after kill -9');
  for (const [name, token] of [
    ['the file password', underFile],
    ['p1', underP1],
  ]) {
    expectRefused(t, await call(server.url, '/ext/info', token), REASONS.earlierGeneration, `a token under ${name}`);
  }

  server = await restart(t, server, 'SIGTERM', p2);
  await expectPasswordWorks(t, server, p2, 'p2 after one more clean restart');
  await expectPasswordFails(t, server, file, server.password, 'the file password, once more');
  expectGranted(t, await call(server.url, '/ext/info', underP2), '/ext/info', 'a token under p2 survives');
  await stop(t, server, 'SIGTERM');
  t.same(fileIdentity(server.passwordFile), identity, 'the password file: same bytes, inode, mode, mtime and ctime');
});

t.test('changing the password back to an earlier one revives nothing, across restarts', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const file = server.password;
  const p1 = `p1-${randomPassword()}`;
  const underFile = await newToken(server.url, file, ['/ext/info']);
  const revokedUnderFile = await newToken(server.url, file, ['*']);
  t.same(await revokeToken(server.url, file, revokedUnderFile), REVOKED, 'revoke one token under the file password');
  t.same(await changePassword(server.url, file, p1), SUCCESS, 'file password -> p1');
  const underP1 = await newToken(server.url, p1, ['/ext/info']);
  const revokedUnderP1 = await newToken(server.url, p1, ['/ext/info']);
  t.same(await revokeToken(server.url, p1, revokedUnderP1), REVOKED, 'revoke one token under p1');

  server = await restart(t, server, 'SIGTERM', p1);
  t.same(await changePassword(server.url, p1, file), SUCCESS, 'p1 -> the file password again');
  server = await restart(t, server, 'SIGKILL', file);
  const dead = (): [string, string, readonly string[]][] => [
    ['a token under the first file password', underFile, [REASONS.earlierGeneration]],
    ['a revoked token under the first file password', revokedUnderFile, [REASONS.earlierGeneration, REASONS.revoked]],
    ['a token under p1', underP1, [REASONS.earlierGeneration]],
    ['a revoked token under p1', revokedUnderP1, [REASONS.earlierGeneration, REASONS.revoked]],
  ];
  for (const [name, token, reasons] of dead()) {
    expectRefusedOneOf(t, await call(server.url, '/ext/info', token), reasons, `${name}, after the change back and kill -9`);
    expectRefusedOneOf(t, await call(server.url, '/ext/health', token), [...reasons, REASONS.notGranted], `${name} on /ext/health`);
  }
  await expectPasswordFails(t, server, p1, server.password, 'p1 after the change back');
  // The file holds the password in force again; it was not edited, so this is no reset:
  // tokens issued now live on.
  const again = await expectPasswordWorks(t, server, file, 'the file password after the change back');
  server = await restart(t, server, 'SIGTERM', file);
  expectGranted(t, await call(server.url, '/ext/info', again), '/ext/info', 'a token issued after the change back survives a restart');
  for (const [name, token, reasons] of dead()) {
    expectRefusedOneOf(t, await call(server.url, '/ext/info', token), reasons, `${name}, after one more restart`);
  }

  t.same(await changePassword(server.url, file, p1), SUCCESS, 'the file password -> p1 again');
  server = await restart(t, server, 'SIGKILL', p1);
  for (const [name, token, reasons] of [
    ...dead(),
    ['a token of the second file-password generation', again, [REASONS.earlierGeneration]] as const,
  ]) {
    expectRefusedOneOf(t, await call(server.url, '/ext/info', token), reasons, `${name}, with p1 back in force`);
  }
  await expectPasswordWorks(t, server, p1, 'p1 back in force');
  await expectPasswordFails(t, server, file, server.password, 'the file password, replaced again');
});

t.test(
  "the operator's reset path: a password file edited while the program was down is adopted, and every earlier token ends",
  async (t) => {
    let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
    const file = server.password;
    const p1 = `p1-${randomPassword()}`;
    const reset = `reset-${randomPassword()}`;
    const underFile = await newToken(server.url, file, ['/ext/info']);
    t.same(await changePassword(server.url, file, p1), SUCCESS, 'file password -> p1 through the API');
    const underP1 = await newToken(server.url, p1, ['*']);
    await stop(t, server, 'SIGTERM');

    writeFileSync(server.passwordFile, `${reset}\n`);
    server = await restartServer(t, server, reset);
    const underReset = await expectPasswordWorks(t, server, reset, 'the new file password');
    await expectPasswordFails(t, server, p1, server.password, 'p1, set through the API before the reset');
    await expectPasswordFails(t, server, file, server.password, 'the old file password');
    expectRefused(t, await call(server.url, '/ext/info', underP1), REASONS.earlierGeneration, 'a token under p1');
    expectRefused(t, await call(server.url, '/ext/info', underFile), REASONS.earlierGeneration, 'a token under the old file password');

    // The reset happens once: the next starts, with the file as it is, keep what followed it.
    server = await restart(t, server, 'SIGTERM', reset);
    expectGranted(
      t,
      await call(server.url, '/ext/info', underReset),
      '/ext/info',
      'a token issued after the reset survives the next restart',
    );
    await expectPasswordWorks(t, server, reset, 'the adopted password after the next restart');
    server = await restart(t, server, 'SIGKILL', reset);
    expectGranted(t, await call(server.url, '/ext/info', underReset), '/ext/info', 'and a kill -9');
    expectRefused(t, await call(server.url, '/ext/info', underP1), REASONS.earlierGeneration, 'a token under p1 stays dead');
  },
);

t.test('the reset path applies when the file is edited to the password set through the API: earlier tokens end', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const p1 = `p1-${randomPassword()}`;
  t.same(await changePassword(server.url, server.password, p1), SUCCESS, 'file password -> p1 through the API');
  const underP1 = await newToken(server.url, p1, ['/ext/info']);
  await stop(t, server, 'SIGTERM');
  writeFileSync(server.passwordFile, p1);
  server = await restartServer(t, server, p1);
  await expectPasswordWorks(t, server, p1, "p1, now also the file's content");
  expectRefused(t, await call(server.url, '/ext/info', underP1), REASONS.earlierGeneration, 'a token issued before the reset');
});

t.test('a password file rewritten with the same content is no reset: the API password and its tokens stay', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const file = server.password;
  const p1 = `p1-${randomPassword()}`;
  t.same(await changePassword(server.url, file, p1), SUCCESS, 'file password -> p1 through the API');
  const underP1 = await newToken(server.url, p1, ['/ext/info']);
  await stop(t, server, 'SIGTERM');
  const before = statSync(server.passwordFile);
  writeFileSync(server.passwordFile, file);
  // A minute later by the clock, however coarse the file system's timestamps are.
  utimesSync(server.passwordFile, before.atime, new Date(before.mtimeMs + 60_000));
  t.not(statSync(server.passwordFile).mtimeMs, before.mtimeMs, "the file's mtime changed, its content did not");
  server = await restartServer(t, server, p1);
  await expectPasswordWorks(t, server, p1, 'p1 stays in force');
  await expectPasswordFails(t, server, file, server.password, 'the file password stays replaced');
  expectGranted(t, await call(server.url, '/ext/info', underP1), '/ext/info', 'a token under p1 stays valid');
});

t.test('resets back to an earlier file password revive nothing', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const first = server.password;
  const second = `second-${randomPassword()}`;
  const underFirst = await newToken(server.url, first, ['/ext/info']);
  await stop(t, server, 'SIGTERM');
  writeFileSync(server.passwordFile, second);
  server = await restartServer(t, server, second);
  const underSecond = await expectPasswordWorks(t, server, second, 'the second file password');
  await stop(t, server, 'SIGKILL');
  writeFileSync(server.passwordFile, first);
  server = await restartServer(t, server, first);
  await expectPasswordWorks(t, server, first, 'the first file password, back in the file');
  await expectPasswordFails(t, server, second, server.password, 'the second file password');
  expectRefused(t, await call(server.url, '/ext/info', underFirst), REASONS.earlierGeneration, 'a token of the first file password');
  expectRefused(t, await call(server.url, '/ext/info', underSecond), REASONS.earlierGeneration, 'a token of the second file password');
});

t.test('the password file is never written, and a read-only one works', async (t) => {
  // The default mode, 0600, through the same calls and restarts: the password change test.
  t.jobs = 2;
  t.test('password file mode 400', async (t) => {
    let server = await startServer(t, { mode: 0o400, cheapChecks: true, args: ONE_THREAD });
    const identity = fileIdentity(server.passwordFile);
    const p1 = `p1-${randomPassword()}`;
    const p2 = `p2-${randomPassword()}`;
    const token = await newToken(server.url, server.password, ['/ext/info']);
    t.same(await revokeToken(server.url, server.password, token), REVOKED, 'a revocation');
    t.same(await changePassword(server.url, server.password, p1), SUCCESS, 'a password change');
    server = await restart(t, server, 'SIGTERM', p1);
    t.same(await changePassword(server.url, p1, p2), SUCCESS, 'another password change');
    server = await restart(t, server, 'SIGKILL', p2);
    await expectPasswordWorks(t, server, p2, 'the changed password');
    await stop(t, server, 'SIGTERM');
    t.same(fileIdentity(server.passwordFile), identity, 'the password file: same bytes, inode, mode, mtime and ctime');
  });

  t.test('a password file the program generated is not written again', async (t) => {
    let server = await startServer(t, { generate: true, args: ONE_THREAD });
    const identity = fileIdentity(server.passwordFile);
    t.equal(identity.mode, '100600', 'generated with mode 0600');
    const p1 = `p1-${randomPassword()}`;
    const underFile = await newToken(server.url, server.password, ['/ext/info']);
    t.same(await changePassword(server.url, server.password, p1), SUCCESS, 'a password change');
    server = await restart(t, server, 'SIGKILL', p1);
    await expectPasswordWorks(t, server, p1, 'the changed password after kill -9');
    expectRefused(t, await call(server.url, '/ext/info', underFile), REASONS.earlierGeneration, 'a token under the generated password');
    server = await restart(t, server, 'SIGTERM', p1);
    await stop(t, server, 'SIGTERM');
    t.same(fileIdentity(server.passwordFile), identity, 'the generated file is unchanged');
    t.notOk(
      server.logs.some((l) => l.msg === 'generated a password file'),
      'no restart generates a password file',
    );
  });
});

t.test('no password is stored in plaintext: the data folder holds argon2id hashes only', async (t) => {
  let server = await startServer(t, { args: ONE_THREAD });
  const file = server.password;
  const passwords = [
    file,
    `p1-${randomPassword()}`,
    `p2-\u00e9t\u00e9-\u043f\u0430\u0440\u043e\u043b\u044c-\u{1F511}-${randomPassword()}`,
    `p3-${randomPassword()}`,
  ];
  const token = await newToken(server.url, file, ['/ext/info']);
  t.same(await revokeToken(server.url, file, token), REVOKED, 'a revocation');
  t.same(await changePassword(server.url, passwords[0], passwords[1]), SUCCESS, 'change 1');
  t.same(await changePassword(server.url, passwords[1], passwords[2]), SUCCESS, 'change 2');
  server = await restart(t, server, 'SIGTERM', passwords[2]);
  await newToken(server.url, passwords[2], ['/ext/bc/*']);
  t.same(await changePassword(server.url, passwords[2], passwords[3]), SUCCESS, 'change 3');
  await stop(t, server, 'SIGKILL');

  const files = filesUnder(server.dataDir);
  t.ok(
    files.some((f) => f.path === statePath(server)),
    'the state file is there',
  );
  for (const { path, bytes } of files) {
    passwords.forEach((password, i) => {
      const utf8 = Buffer.from(password, 'utf8');
      for (const [encoding, needle] of [
        ['UTF-8', utf8],
        ['UTF-16LE', Buffer.from(password, 'utf16le')],
        ['hex', Buffer.from(utf8.toString('hex'))],
        ['base64', Buffer.from(utf8.toString('base64').replace(/=+$/, ''))],
      ] as const) {
        t.equal(bytes.indexOf(needle), -1, `${path} does not hold password ${i} (${encoding})`);
      }
    });
  }
  const allLogs = server.stdout();
  passwords.forEach((password, i) => t.notOk(allLogs.includes(password), `the log does not hold password ${i}`));

  const text = stateFile(server).toString('latin1');
  // A 16-byte salt and a 32-byte hash (team brief) are 22 and 43 characters of unpadded base64.
  const records = text.match(/\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}/g) ?? [];
  t.ok(records.length >= 2, `the state file holds argon2id PHC records (current password, file password): ${records.length}`);
  for (const record of records) t.ok(record.startsWith(ARGON2ID_PHC), `argon2id with m=19456, t=2, p=1: ${record.slice(0, 40)}...`);
  t.equal(text.split('$argon2').length - 1, records.length, 'every $argon2 record is a complete argon2id one');
  const matches = async (password: string): Promise<boolean> => {
    for (const hash of records) if (await argon2Verify({ password, hash })) return true;
    return false;
  };
  t.ok(await matches(passwords[3]), 'one record is the hash of the password in force');
  t.ok(await matches(file), "one record is the hash of the password file's content");
  for (const i of [1, 2]) t.notOk(await matches(passwords[i]), `no record of replaced password ${i} is kept`);
});

t.test('the data folder is created 0700 and the state file 0600, whatever the umask', async (t) => {
  const old = process.umask(0);
  let pending: Promise<Server>;
  try {
    pending = startServer(t, { createDataDir: false, args: ONE_THREAD });
  } finally {
    process.umask(old);
  }
  let server = await pending;
  const mode = (path: string): string => (statSync(path).mode & 0o777).toString(8);
  t.equal(mode(server.dataDir), '700', 'the data folder is 0700');
  t.equal(mode(statePath(server)), '600', 'the state file is 0600');
  const token = await newToken(server.url, server.password, ['/ext/info']);
  t.same(await revokeToken(server.url, server.password, token), REVOKED, 'a revocation rewrites the state');
  t.equal(mode(statePath(server)), '600', 'the rewritten state file is 0600');
  t.same(await changePassword(server.url, server.password, `p1-${randomPassword()}`), SUCCESS, 'a password change rewrites it');
  for (const { path } of filesUnder(server.dataDir)) t.equal(mode(path), '600', `${path} is 0600`);
  server = await restart(t, server, 'SIGKILL');
  t.equal(mode(server.dataDir), '700', 'the data folder is still 0700 after a restart');
  for (const { path } of filesUnder(server.dataDir)) t.equal(mode(path), '600', `${path} is 0600 after a restart`);
});

t.test('with auth off the data folder is not touched', async (t) => {
  const server = await startServer(t, { auth: false, createDataDir: false, args: ONE_THREAD });
  t.equal((await call(server.url, '/ext/auth')).status, 404, 'no /ext/auth');
  await stop(t, server, 'SIGTERM');
  t.notOk(existsSync(server.dataDir), 'the data folder was not created');
});

t.test('a second instance on the same data folder refuses to start; the first keeps serving', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const before = stateFile(server);
  const alias = join(server.dir, 'alias');
  symlinkSync(server.dataDir, alias);
  const dataDirAt = server.args.indexOf('--data-dir') + 1;
  for (const [name, dataDir] of [
    ['the same path', server.dataDir],
    ['a symlink to it', alias],
    ['the path with a trailing slash', `${server.dataDir}/`],
  ]) {
    const args = server.args.map((a, i) => (i === dataDirAt ? dataDir : a));
    const second = await runCli(t, args);
    t.equal(second.code, 2, `exit code 2 (${name}; stderr: ${JSON.stringify(second.stderr)})`);
    const lines = second.stderr.split('\n');
    t.equal(lines.length, 2, `exactly one line on stderr (${name})`);
    t.match(lines[0], /^api-auth: .*another api-auth is using the data folder/, `the line says so (${name})`);
    t.notOk(
      second.logs.some((l) => l.msg === 'listening'),
      `the second never listened (${name})`,
    );
  }
  t.same(stateFile(server), before, 'the refused instances left the state file alone');
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'the first instance still serves');
  const fresh = await newToken(server.url, server.password, ['/ext/info']);
  t.same(await revokeToken(server.url, server.password, fresh), REVOKED, 'and still writes its state');

  server = await restart(t, server, 'SIGKILL');
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'after kill -9 the lock is free: a new instance starts');
  expectRefused(t, await call(server.url, '/ext/info', fresh), REASONS.revoked, "with the first instance's last write");
});

// Expiry by a clock the test moves: the service in this process, restarted in-process.
t.test('revocations of tokens that have expired are dropped from the state file', async (t) => {
  const LIFETIME = 2;
  const time = manualClock();
  let server = await serveInProcess(t, { args: ['--api-auth-token-lifetime', `${LIFETIME}s`], clock: time.clock, cheapChecks: true });
  const doomed = [];
  for (let i = 0; i < 5; i++) doomed.push(await newToken(server.url, server.password, ['/ext/info']));
  const base = stateFile(server).length;
  for (const token of doomed) t.same(await revokeToken(server.url, server.password, token), REVOKED, 'revoke');
  t.equal(
    stateFile(server).length,
    base + doomed.length * REVOCATION_BYTES,
    `${doomed.length} revocations: the state file grew by ${doomed.length * REVOCATION_BYTES} bytes`,
  );

  time.now += LIFETIME * 1000;
  for (const token of doomed)
    expectRefusedOneOf(t, await call(server.url, '/ext/info', token), [REASONS.expired, REASONS.revoked], 'expired by now');
  const fresh = await newToken(server.url, server.password, ['/ext/info']);
  t.same(await revokeToken(server.url, server.password, fresh), REVOKED, 'revoke a fresh token: a state write');
  t.equal(
    stateFile(server).length,
    base + REVOCATION_BYTES,
    'the state file holds the fresh revocation only: the expired ones were dropped',
  );
  expectRefused(t, await call(server.url, '/ext/info', fresh), REASONS.revoked, 'the fresh token is revoked');

  await server.stop();
  server = await serveAgain(t, server, time.clock);
  for (const token of doomed) expectRefused(t, await call(server.url, '/ext/info', token), REASONS.expired, 'after a restart: expired');
  expectRefusedOneOf(t, await call(server.url, '/ext/info', fresh), [REASONS.revoked, REASONS.expired], 'the fresh token after a restart');
  t.ok(stateFile(server).length <= base + REVOCATION_BYTES, 'the restart brought no dropped revocation back');
});

t.test('a token keeps its own expiry across a restart with a shorter lifetime, and so does its revocation', async (t) => {
  const time = manualClock();
  let server = await serveInProcess(t, { clock: time.clock, cheapChecks: true });
  const [kept, revoked] = [
    await newToken(server.url, server.password, ['/ext/info']),
    await newToken(server.url, server.password, ['/ext/info']),
  ];
  t.same(await revokeToken(server.url, server.password, revoked), REVOKED, 'revoke a 12h token');
  await server.stop();
  server = await serveAgain(t, { ...server, args: [...server.args, '--api-auth-token-lifetime', '1s'] }, time.clock);
  const short = await newToken(server.url, server.password, ['/ext/info']);
  // Past the short token's expiry, a state write (a revocation) drops expired revocations.
  time.now += 1000;
  expectRefused(t, await call(server.url, '/ext/info', short), REASONS.expired, 'a 1s token has expired');
  const trigger = await newToken(server.url, server.password, ['/ext/health']);
  t.same(await revokeToken(server.url, server.password, trigger), REVOKED, 'a state write after its expiry');
  expectGranted(t, await call(server.url, '/ext/info', kept), '/ext/info', 'the 12h token is still valid');
  expectRefused(t, await call(server.url, '/ext/info', revoked), REASONS.revoked, 'the revoked 12h token is still revoked');
  await server.stop();
  server = await serveAgain(t, server, time.clock);
  expectGranted(t, await call(server.url, '/ext/info', kept), '/ext/info', 'the 12h token, after a restart on that state');
  expectRefused(t, await call(server.url, '/ext/info', revoked), REASONS.revoked, 'the revoked 12h token, after a restart on that state');
  // Issued 1 s before the short token's lifetime was counted.
  time.now += 12 * 3600_000 - 2000;
  expectGranted(t, await call(server.url, '/ext/info', kept), '/ext/info', 'the 12h token, a second before its 12 hours are up');
  time.now += 1000;
  expectRefused(t, await call(server.url, '/ext/info', kept), REASONS.expired, 'and expired at their end');
});
