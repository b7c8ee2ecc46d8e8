// What --access-log opens: only a regular file, never
// through a link, that only root or api-auth's user can change, opened off the event loop.
// At start anything else is refused (exit 2, nothing listening, the repair named); on a
// reopen (SIGHUP) it is logged, and the lines go on to the file opened before.
import t from 'tap';
import type { Test } from 'tap';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { request } from '../helpers/http.js';
import { needsRoot } from '../helpers/root.js';
import { launch, randomPassword, runCli, sleep, tempDir } from '../helpers/server.js';

function pathsIn(file: string): string[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  return text === ''
    ? []
    : text
        .slice(0, -1)
        .split('\n')
        .map((line) => (JSON.parse(line) as { path: string }).path);
}

/** The start with `--access-log path`: its exit and stderr, and whether it listened. */
async function start(t: Test, dir: string, path: string): ReturnType<typeof runCli> {
  return runCli(t, ['--http-port', '0', '--data-dir', join(dir, 'data'), '--access-log', path]);
}

t.test("at start, a path that is not a regular file of api-auth's own is refused: exit 2, the repair named, nothing written", async (t) => {
  const dir = tempDir(t);
  const fifo = join(dir, 'fifo.log');
  execFileSync('mkfifo', [fifo]);
  const victim = join(dir, 'victim');
  writeFileSync(victim, 'kept\n', { mode: 0o600 });
  const link = join(dir, 'link.log');
  symlinkSync(victim, link);
  const open = join(dir, 'open.log');
  writeFileSync(open, '');
  chmodSync(open, 0o666);
  const group = join(dir, 'group.log');
  writeFileSync(group, '');
  chmodSync(group, 0o660);
  const cases: [string, string, RegExp][] = [
    [
      'a FIFO with no reader',
      fifo,
      /^api-auth: --access-log: .*\/fifo\.log is a FIFO, not a regular file; remove it, or name a regular file\n$/,
    ],
    [
      'a link',
      link,
      /^api-auth: --access-log: .*\/link\.log is a symbolic link, and api-auth never follows one there; name the file itself\n$/,
    ],
    [
      'a file others can write',
      open,
      /^api-auth: --access-log: .*\/open\.log can be written by its group and by others \(mode 0666\), who could then forge its lines; chmod 644 .*\/open\.log\n$/,
    ],
    [
      'a file its group can write',
      group,
      /^api-auth: --access-log: .*\/group\.log can be written by its group \(mode 0660\), who could then forge its lines; chmod 640 .*\/group\.log\n$/,
    ],
  ];
  for (const [what, path, message] of cases) {
    const run = await start(t, dir, path);
    t.equal(run.code, 2, `${what}: exit 2`);
    t.match(run.stderr, message, `${what}: the message`);
    t.notOk(
      run.logs.some((l) => l.msg === 'listening'),
      `${what}: never listening`,
    );
  }
  t.equal(readFileSync(victim, 'utf8'), 'kept\n', "the link's target is untouched");

  // A FIFO that has a reader opens at once: the kind is what refuses it.
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  t.teardown(() => closeSync(reader));
  const read = await start(t, dir, fifo);
  t.equal(read.code, 2, 'a FIFO with a reader: exit 2');
  t.match(read.stderr, /^api-auth: --access-log: .*\/fifo\.log is a FIFO, not a regular file; remove it, or name a regular file\n$/);
});

t.test(
  'at start, a file of another user is refused, with the chown that fixes it',
  needsRoot('chown, to give the file to another user'),
  async (t) => {
    const dir = tempDir(t);
    const file = join(dir, 'theirs.log');
    writeFileSync(file, '', { mode: 0o600 });
    chownSync(file, 4321, 4321);
    const run = await start(t, dir, file);
    t.equal(run.code, 2);
    t.match(
      run.stderr,
      /^api-auth: --access-log: .*\/theirs\.log belongs to user 4321, not to root or the user api-auth runs as \(0\), who could then forge its lines; chown 0 .*\/theirs\.log\n$/,
    );
    t.equal(readFileSync(file, 'utf8'), '', 'nothing written to it');
  },
);

t.test('a reopen onto a FIFO or a link is refused and logged; serving goes on, the lines go on to the file opened before', async (t) => {
  const dir = tempDir(t);
  const password = randomPassword();
  writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
  const data = join(dir, 'data');
  mkdirSync(data, { mode: 0o700 });
  const file = join(dir, 'access.log');
  const server = launch(t, [
    '--http-port',
    '0',
    '--data-dir',
    data,
    '--api-auth-required',
    '--api-auth-password-file',
    join(dir, 'password'),
    '--access-log',
    file,
    '--http-threads',
    '2',
  ]);
  const listening = await server.waitForLog((l) => l.msg === 'listening');
  const url = `http://127.0.0.1:${String(listening.port)}`;
  const refusals = (): number =>
    server.logs.filter((l) => l.msg === 'the access log cannot be opened again; lines go on to the file opened before').length;
  const state = readFileSync(join(data, 'state'));
  renameSync(file, `${file}.1`);

  // logrotate's rename, then a FIFO where the file was: each thread refuses it, and nothing waits on it.
  execFileSync('mkfifo', [file]);
  server.child.kill('SIGHUP');
  await server.waitForLines((l) => l.msg === 'the access log cannot be opened again; lines go on to the file opened before', 2);
  t.match(
    server.logs.filter((l) => l.msg === 'the access log cannot be opened again; lines go on to the file opened before'),
    [
      { level: 'warn', code: 'ENXIO', error: /is a FIFO, not a regular file/ },
      { level: 'warn', code: 'ENXIO' },
    ],
  );
  for (let i = 0; i < 10; i++) t.equal((await request(url, `/ext/info/fifo/${i}`)).status, 401, 'serving goes on');
  t.equal((await request(url, '/ext/auth/health')).status, 200);

  // A link to api-auth's own state file, in the FIFO's place: never followed.
  rmSync(file);
  symlinkSync(join(data, 'state'), file);
  server.child.kill('SIGHUP');
  await server.waitForLog(() => refusals() >= 4);
  t.ok(
    server.logs
      .filter((l) => l.msg === 'the access log cannot be opened again; lines go on to the file opened before')
      .slice(2)
      .every((l) => l.code === 'ELOOP'),
    'the link is refused',
  );
  for (let i = 0; i < 10; i++) t.equal((await request(url, `/ext/info/link/${i}`)).status, 401);
  // Written within a tick, to the file opened before: waited for, before the path is repaired.
  const written = (kind: string): boolean =>
    Array.from({ length: 10 }, (_, i) => `/ext/info/${kind}/${i}`).every((p) => pathsIn(`${file}.1`).includes(p));
  while (!written('fifo') || !written('link')) await sleep(50);

  // The file itself again: the next reopen takes it.
  rmSync(file);
  server.child.kill('SIGHUP');
  await server.waitForLines((l) => l.msg === 'SIGHUP: the access log is opened again', 3);
  // Each thread opens it at its next tick: requests until one's line is in the new file.
  let after = 0;
  while (pathsIn(file).length === 0) {
    t.equal((await request(url, `/ext/info/file/${after++}`)).status, 401);
    await sleep(50);
  }
  t.equal((await server.stop('SIGTERM')).code, 0, 'a clean stop');
  t.same(readFileSync(join(data, 'state')), state, 'the state file is untouched');
  const before = pathsIn(`${file}.1`);
  for (const kind of ['fifo', 'link']) {
    for (let i = 0; i < 10; i++)
      t.equal(before.filter((p) => p === `/ext/info/${kind}/${i}`).length, 1, `${kind} ${i}: once in the file opened before`);
  }
  const now = pathsIn(file);
  t.ok(
    now.every((path) => path.startsWith('/ext/info/file/')),
    'the new file: only lines after the repair',
  );
  for (let i = 0; i < after; i++)
    t.equal([...before, ...now].filter((path) => path === `/ext/info/file/${i}`).length, 1, `after ${i}: written once`);
  t.notOk(
    server.logs.some((l) => l.raw !== undefined),
    'every line on stdout is JSON',
  );
});
