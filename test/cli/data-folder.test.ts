// The data folder is api-auth's alone.
//
// A folder that others can write to, or that belongs to another user, stops the start:
// whoever can write there could plant a link at `state.tmp` and have the token key
// written to a file they read, or swap in a state whose key they know. No state file is
// reached through a link, when writing or reading.
//
// One process holds a folder, also across network namespaces (containers sharing a
// volume): the lock is a Unix socket in the folder, which connect() reaches from any
// namespace, where it used to be an abstract socket, which exists in one namespace only.
// A crash leaves nothing that blocks the next start. The namespace tests use
// `unshare --net` (util-linux) and need root, as CI has: run as another user, they and the
// folder given to another user are skipped, saying so; as root, without them they fail.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { call, expectGranted, expectRefused, newToken, REASONS, REVOKED, revokeToken } from '../helpers/auth.js';
import { cliLine, refusalOf } from '../helpers/library.js';
import { needsRoot } from '../helpers/root.js';
import {
  launch,
  MAIN,
  PROGRAM_ENV,
  ROOT,
  randomPassword,
  restartServer,
  runCli,
  startServer,
  tempDir,
  untracked,
  type CliResult,
  type Exit,
} from '../helpers/server.js';

// Two tests at a time: each has a data folder and servers of its own.
t.jobs = 2;

const NOBODY = 65534;
/**
 * The data folder and its lock are these tests' subject, not the HTTP threads
 * (test/http/threads.test.ts): one thread, whose start costs about a third less CPU time.
 */
const ONE_THREAD = ['--http-threads', '1'];
const LOCKED = /^api-auth: another api-auth is using the data folder .*; stop it first, or give this one its own --data-dir$/;

/** Exit code 2, nothing listening, exactly one stderr line matching `line`. */
function expectRefusedStart(t: Test, result: Pick<CliResult, 'code' | 'stderr' | 'logs'>, line: RegExp, label: string): void {
  t.equal(result.code, 2, `exit code 2 (${label}; stderr: ${JSON.stringify(result.stderr)})`);
  const lines = result.stderr.split('\n');
  t.equal(lines.length, 2, `exactly one line on stderr (${label})`);
  t.match(lines[0], line, `the line says what is wrong and what to do (${label}): ${lines[0]}`);
  t.notOk(
    result.logs.some((l) => l.msg === 'listening'),
    `nothing listened (${label})`,
  );
}

/** A password file and the command line of a server with auth on, on `dataDir`. */
function authArgs(dir: string, dataDir: string): string[] {
  const passwordFile = join(dir, 'password');
  if (!existsSync(passwordFile)) writeFileSync(passwordFile, randomPassword(), { mode: 0o600 });
  return ['--http-port', '0', '--data-dir', dataDir, '--api-auth-required', '--api-auth-password-file', passwordFile, ...ONE_THREAD];
}

interface Namespaced {
  exited: Promise<Exit & { stdout: string; stderr: string }>;
  /** Resolves with the port once the process logs `listening`; rejects if it exits first. */
  listening: Promise<number>;
  /** Whichever comes first: `listening` (with the port) or the exit. */
  settled: Promise<{ port: number } | (Exit & { stdout: string; stderr: string })>;
  kill(): void;
}

/**
 * The CLI in a network namespace of its own (`unshare --net`, which execs it: the pid is
 * the program's). Killed when `t` ends.
 */
function launchInNewNetwork(t: Test, args: readonly string[]): Namespaced {
  const child = spawn('unshare', ['--net', ...untracked(process.execPath, [MAIN, ...args]).flat()], {
    cwd: ROOT,
    env: PROGRAM_ENV,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let onLine: ((line: string) => void) | undefined;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    onLine?.(stdout);
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<Exit & { stdout: string; stderr: string }>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  const listening = new Promise<number>((resolve, reject) => {
    onLine = (out) => {
      const line = out.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (line !== undefined) resolve(Number(JSON.parse(line).port));
    };
    void exited.then((e) => reject(new Error(`exited first (${JSON.stringify(e)})`)), reject);
  });
  listening.catch(() => undefined);
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited.catch(() => undefined);
  });
  const settled = Promise.race([listening.then((port) => ({ port })), exited]);
  return { exited, listening, settled, kill: () => child.kill('SIGKILL') };
}

function lockNames(dataDir: string): string[] {
  return readdirSync(dataDir).filter((n) => n.startsWith('lock'));
}

t.test("a data folder that others can write to, or that is not this user's, stops the start", async (t) => {
  const cases: [string, number, number | undefined, RegExp][] = [
    [
      'group-writable (0770)',
      0o770,
      undefined,
      /^api-auth: the data folder .*\/data can be written by its group \(mode 0770\), who could then take the token key; chmod 700 .*\/data$/,
    ],
    ['world-writable (0777)', 0o777, undefined, /can be written by its group and by others \(mode 0777\).*; chmod 700 /],
    ['writable by others only (0702)', 0o702, undefined, /can be written by others \(mode 0702\).*; chmod 700 /],
    [
      'world-writable and sticky, like /tmp (1777)',
      0o1777,
      undefined,
      /can be written by its group and by others \(mode 1777\).*; chmod 700 /,
    ],
    [
      'owned by another user (0700, nobody)',
      0o700,
      NOBODY,
      new RegExp(
        `^api-auth: the data folder .*/data belongs to user ${NOBODY}, not to the user api-auth runs as \\(0\\), .*; chown 0 .*/data, or give api-auth a folder of its own with --data-dir$`,
      ),
    ],
  ];
  // Each through the library (startServer with the command line's options), whose error
  // is the CLI's line; the CLI itself on the first and the last.
  for (const [index, [name, mode, owner, line]] of cases.entries()) {
    await t.test(name, owner === undefined ? {} : needsRoot('chown to give the folder to another user'), async (t) => {
      const dir = tempDir(t);
      const dataDir = join(dir, 'data');
      mkdirSync(dataDir);
      chmodSync(dataDir, mode);
      if (owner !== undefined) chownSync(dataDir, owner, owner);
      const error = await refusalOf(authArgs(dir, dataDir));
      t.match(error, { name: 'StateError', code: 'API_AUTH_BAD_STATE' }, `a StateError (${error?.message})`);
      t.match(error === undefined ? '' : cliLine(error), line, `the line says what is wrong and what to do (${name})`);
      if (index === 0 || index === cases.length - 1) {
        const result = await runCli(t, authArgs(dir, dataDir));
        expectRefusedStart(t, result, line, name);
        t.equal(result.stderr, error === undefined ? 'no error' : `${cliLine(error)}\n`, "the CLI prints the library's error");
      }
      t.same(readdirSync(dataDir), [], 'nothing was written to the folder');
    });
  }
});

t.test('a link planted at state.tmp never receives the key; the service keeps working', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const outside = join(server.dir, 'readable-by-all');
  writeFileSync(outside, '');
  chmodSync(outside, 0o644);
  const missing = join(server.dir, 'not-there-yet');
  const token = await newToken(server.url, server.password, ['/ext/info']);
  for (const [name, target] of [
    ['an existing world-readable file', outside],
    ['a file not there yet', missing],
  ]) {
    symlinkSync(target, join(server.dataDir, 'state.tmp'));
    const fresh = await newToken(server.url, server.password, [`/ext/bc/${name.length}`]);
    t.ok(fresh, `a new endpoint list writes the state (link to ${name})`);
    t.equal(readFileSync(outside).length, 0, `nothing reached ${outside}`);
    t.notOk(existsSync(missing), `nothing was created at ${missing}`);
    t.ok(lstatSync(join(server.dataDir, 'state')).isFile(), 'state is a file of the folder, not a link');
  }
  symlinkSync(outside, join(server.dataDir, 'state.tmp'));
  t.same(await revokeToken(server.url, server.password, token), REVOKED, 'a revocation writes the state too');
  t.equal(readFileSync(outside).length, 0, 'and nothing reached the outside file');
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, 'the revocation holds');

  await server.stop('SIGKILL');
  server = await restartServer(t, server);
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, 'after kill -9: still revoked');
  const after = await newToken(server.url, server.password, ['/ext/info']);
  expectGranted(t, await call(server.url, '/ext/info', after), '/ext/info', 'after kill -9: tokens are issued and work');
});

t.test('a state file that is a link stops the start: exit 2 and one line', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  t.same(await server.stop('SIGTERM'), { code: 0, signal: null });
  const elsewhere = join(server.dir, 'state-elsewhere');
  renameSync(join(server.dataDir, 'state'), elsewhere);
  symlinkSync(elsewhere, join(server.dataDir, 'state'));
  const result = await runCli(t, server.args);
  expectRefusedStart(
    t,
    result,
    /^api-auth: state file .*\/data\/state is a symbolic link, and api-auth never follows links in its data folder; put the file itself in its place$/,
    'state is a link',
  );
});

t.test(
  'a start in another network namespace is refused while the folder is held; after kill -9, the next start succeeds',
  needsRoot('unshare --net for a network namespace'),
  async (t) => {
    const first = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
    const second = await launchInNewNetwork(t, first.args).settled;
    if ('port' in second) {
      t.fail(`a second instance in a new network namespace listens on port ${second.port}, on the same data folder`);
      return;
    }
    expectRefusedStart(t, { code: second.code, stderr: second.stderr, logs: [] }, LOCKED, 'a second instance in a new network namespace');
    t.notOk(second.stdout.includes('"msg":"listening"'), 'it never listened');
    const token = await newToken(first.url, first.password, ['/ext/info']);
    expectGranted(t, await call(first.url, '/ext/info', token), '/ext/info', 'the first still serves');

    t.same(await first.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
    const next = await restartServer(t, first);
    expectGranted(
      t,
      await call(next.url, '/ext/info', token),
      '/ext/info',
      'after kill -9 the next start holds the folder, with the state',
    );
    t.equal(lockNames(next.dataDir).length, 1, `one lock name is left in the folder: ${lockNames(next.dataDir)}`);
  },
);

t.test(
  'a holder in another network namespace keeps a start in this one out; after its kill -9, the next start succeeds',
  needsRoot('unshare --net for a network namespace'),
  async (t) => {
    const dir = tempDir(t);
    const dataDir = join(dir, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    const holder = launchInNewNetwork(t, authArgs(dir, dataDir));
    await holder.listening;
    const here = await runCli(t, authArgs(dir, dataDir));
    expectRefusedStart(t, here, LOCKED, 'a start in this namespace');
    holder.kill();
    t.same((await holder.exited).signal, 'SIGKILL', 'the holder was killed');
    const run = launch(t, authArgs(dir, dataDir));
    const listening = await run.waitForLog((l) => l.msg === 'listening');
    t.ok(listening.port, 'the next start listens');
    t.equal(lockNames(dataDir).length, 1, `one lock name is left in the folder: ${lockNames(dataDir)}`);
  },
);

t.test('starts at the same moment on one folder: exactly one runs, round after round of kill -9', async (t) => {
  // The first round is on a fresh folder, the others after a kill -9 of the last winner;
  // three are enough for a lock name left by each killed winner to show (three names).
  const ROUNDS = 3;
  const STARTS = 3;
  const dir = tempDir(t);
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const args = authArgs(dir, dataDir);
  for (let round = 1; round <= ROUNDS; round++) {
    const runs = Array.from({ length: STARTS }, () => launch(t, args));
    const outcomes = await Promise.all(
      runs.map((run) =>
        run
          .waitForLog((l) => l.msg === 'listening')
          .then(
            () => 'listening',
            async () => {
              const exit = await run.waitForExit();
              const lines = run.stderr().split('\n');
              return exit.code === 2 && lines.length === 2 && LOCKED.test(lines[0])
                ? 'refused'
                : `exit ${JSON.stringify(exit)}: ${run.stderr()}`;
            },
          ),
      ),
    );
    t.same(
      [...outcomes].sort(),
      ['listening', ...Array(STARTS - 1).fill('refused')],
      `round ${round}: one of ${STARTS} starts listens, the others are refused`,
    );
    const winner = runs[outcomes.indexOf('listening')];
    if (winner === undefined) break;
    t.same(await winner.stop('SIGKILL'), { code: null, signal: 'SIGKILL' }, `round ${round}: kill -9 the one that runs`);
  }
  t.ok(lockNames(dataDir).length <= 2, `the lock names do not pile up: ${lockNames(dataDir)}`);
});

t.test('a data folder whose path is too long for a socket address is locked all the same', async (t) => {
  const dir = tempDir(t);
  const dataDir = join(dir, 'a-folder-name-of-forty-characters-------', 'another-folder-name-of-forty-characters-', 'data');
  t.ok(Buffer.byteLength(dataDir) > 108, `the path is ${Buffer.byteLength(dataDir)} bytes; a socket address holds 107`);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const args = authArgs(dir, dataDir);
  const run = launch(t, args);
  await run.waitForLog((l) => l.msg === 'listening');
  expectRefusedStart(t, await runCli(t, args), LOCKED, 'a second start on the long path');
  t.same(lockNames(dataDir).length, 1, `the lock is in the folder itself: ${lockNames(dataDir)}`);
  t.same(await run.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
  const next = launch(t, args);
  t.ok((await next.waitForLog((l) => l.msg === 'listening')).port, 'after kill -9, the next start listens');
});

t.test('a clean stop (SIGTERM, SIGINT) removes its lock from the folder, and the next start holds it', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const token = await newToken(server.url, server.password, ['/ext/info']);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    t.equal(lockNames(server.dataDir).length, 1, `one lock while serving: ${lockNames(server.dataDir)}`);
    t.same(await server.stop(signal), { code: 0, signal: null }, `${signal}: a clean stop`);
    t.same(lockNames(server.dataDir), [], `${signal}: no lock.* left in the folder`);
    server = await restartServer(t, server);
    expectGranted(
      t,
      await call(server.url, '/ext/info', token),
      '/ext/info',
      `after the ${signal} stop, the next start holds the folder, with the state`,
    );
    expectRefusedStart(
      t,
      await runCli(t, server.args),
      LOCKED,
      `a second start while the restarted one holds the folder (after ${signal})`,
    );
  }
});

t.test('a clean stop leaves a lock name that is no longer its socket alone', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const [held] = lockNames(server.dataDir);
  renameSync(join(server.dataDir, held), join(server.dataDir, 'moved-aside'));
  writeFileSync(join(server.dataDir, held), "not the server's socket");
  t.same(await server.stop('SIGTERM'), { code: 0, signal: null });
  t.equal(readFileSync(join(server.dataDir, held), 'utf8'), "not the server's socket", `${held}, now another file, was left in place`);
});
