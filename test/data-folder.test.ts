// The data folder is api-auth's alone (issue 10, item 6).
//
// A folder that others can write to, or that belongs to another user, stops the start:
// whoever can write there could plant a link at `state.tmp` and have the token key
// written to a file they read, or swap in a state whose key they know. No state file is
// reached through a link, when writing or reading.
import t, { type Test } from 'tap';
import {
  chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { call, expectGranted, expectRefused, newToken, REASONS, revokeToken } from './helpers/auth.js';
import {
  randomPassword, restartServer, runCli, startServer, tempDir, type CliResult,
} from './helpers/server.js';

const SUCCESS = { success: true };
const NOBODY = 65534;

/** Exit code 2, nothing listening, exactly one stderr line matching `line`. */
function expectRefusedStart(t: Test, result: Pick<CliResult, 'code' | 'stderr' | 'logs'>, line: RegExp, label: string): void {
  t.equal(result.code, 2, `exit code 2 (${label}; stderr: ${JSON.stringify(result.stderr)})`);
  const lines = result.stderr.split('\n');
  t.equal(lines.length, 2, `exactly one line on stderr (${label})`);
  t.match(lines[0], line, `the line says what is wrong and what to do (${label}): ${lines[0]}`);
  t.notOk(result.logs.some((l) => l.msg === 'listening'), `nothing listened (${label})`);
}

/** A password file and the command line of a server with auth on, on `dataDir`. */
function authArgs(dir: string, dataDir: string): string[] {
  const passwordFile = join(dir, 'password');
  if (!existsSync(passwordFile)) writeFileSync(passwordFile, randomPassword(), { mode: 0o600 });
  return ['--http-port', '0', '--data-dir', dataDir, '--api-auth-required', '--api-auth-password-file', passwordFile];
}

t.test('a data folder that others can write to, or that is not this user\'s, stops the start', async (t) => {
  const cases: [string, number, number | undefined, RegExp][] = [
    ['group-writable (0770)', 0o770, undefined, /^api-auth: the data folder .*\/data can be written by its group \(mode 0770\), who could then take the token key; chmod 700 .*\/data$/],
    ['world-writable (0777)', 0o777, undefined, /can be written by its group and by others \(mode 0777\).*; chmod 700 /],
    ['writable by others only (0702)', 0o702, undefined, /can be written by others \(mode 0702\).*; chmod 700 /],
    ['world-writable and sticky, like /tmp (1777)', 0o1777, undefined, /can be written by its group and by others \(mode 1777\).*; chmod 700 /],
    ['owned by another user (0700, nobody)', 0o700, NOBODY, new RegExp(`^api-auth: the data folder .*/data belongs to user ${NOBODY}, not to the user api-auth runs as \\(0\\), .*; chown 0 .*/data, or give api-auth a folder of its own with --data-dir$`)],
  ];
  for (const [name, mode, owner, line] of cases) {
    await t.test(name, async (t) => {
      const dir = tempDir(t);
      const dataDir = join(dir, 'data');
      mkdirSync(dataDir);
      chmodSync(dataDir, mode);
      // Only root can give a folder away; elsewhere this throws and the test fails.
      if (owner !== undefined) chownSync(dataDir, owner, owner);
      const result = await runCli(t, authArgs(dir, dataDir));
      expectRefusedStart(t, result, line, name);
      t.same(readdirSync(dataDir), [], 'nothing was written to the folder');
    });
  }
});

t.test('a link planted at state.tmp never receives the key; the service keeps working', async (t) => {
  let server = await startServer(t);
  const outside = join(server.dir, 'readable-by-all');
  writeFileSync(outside, '');
  chmodSync(outside, 0o644);
  const missing = join(server.dir, 'not-there-yet');
  const token = await newToken(server.url, server.password, ['/ext/info']);
  for (const [name, target] of [['an existing world-readable file', outside], ['a file not there yet', missing]]) {
    symlinkSync(target, join(server.dataDir, 'state.tmp'));
    const fresh = await newToken(server.url, server.password, [`/ext/bc/${name.length}`]);
    t.ok(fresh, `a new endpoint list writes the state (link to ${name})`);
    t.equal(readFileSync(outside).length, 0, `nothing reached ${outside}`);
    t.notOk(existsSync(missing), `nothing was created at ${missing}`);
    t.ok(lstatSync(join(server.dataDir, 'state')).isFile(), 'state is a file of the folder, not a link');
  }
  symlinkSync(outside, join(server.dataDir, 'state.tmp'));
  t.same(await revokeToken(server.url, server.password, token), SUCCESS, 'a revocation writes the state too');
  t.equal(readFileSync(outside).length, 0, 'and nothing reached the outside file');
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, 'the revocation holds');

  await server.stop('SIGKILL');
  server = await restartServer(t, server);
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, 'after kill -9: still revoked');
  const after = await newToken(server.url, server.password, ['/ext/info']);
  expectGranted(t, await call(server.url, '/ext/info', after), '/ext/info', 'after kill -9: tokens are issued and work');
});

t.test('a state file that is a link stops the start: exit 2 and one line', async (t) => {
  const server = await startServer(t);
  t.same(await server.stop('SIGTERM'), { code: 0, signal: null });
  const elsewhere = join(server.dir, 'state-elsewhere');
  renameSync(join(server.dataDir, 'state'), elsewhere);
  symlinkSync(elsewhere, join(server.dataDir, 'state'));
  const result = await runCli(t, server.args);
  expectRefusedStart(t, result, /^api-auth: state file .*\/data\/state is a symbolic link, and api-auth never follows links in its data folder; put the file itself in its place$/,
    'state is a link');
});

