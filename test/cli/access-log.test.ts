// --access-log from the command line: the flag, API_AUTH_ACCESS_LOG and the
// config file's key; standard output only when named; a path that cannot be opened for
// appending is a start error (exit 2, nothing listening); logrotate's rename and SIGHUP;
// a disk that fills up loses lines, counted and logged once, and serving goes on.
import t from 'tap';
import type { Test } from 'tap';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { authUrl } from '../helpers/auth.js';
import { jsonrpc, request } from '../helpers/http.js';
import { needsRoot } from '../helpers/root.js';
import { launch, MAIN, randomPassword, runCli, sleep, tempDir } from '../helpers/server.js';
import type { Running } from '../helpers/server.js';
import { fillUp, tmpfsDataDir } from '../helpers/tmpfs.js';

interface Line {
  path: string;
  status: number;
  [field: string]: unknown;
}

function linesOf(file: string): Line[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  return text === ''
    ? []
    : text
        .slice(0, -1)
        .split('\n')
        .map((line) => JSON.parse(line) as Line);
}

async function waitForLine(file: string, path: string): Promise<Line> {
  for (;;) {
    const line = linesOf(file).find((l) => l.path === path);
    if (line !== undefined) return line;
    await sleep(50);
  }
}

/** api-auth on a free port with auth on, started with `args` and `env`; its URL and password once listening. */
async function serve(
  t: Test,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<Running & { url: string; password: string }> {
  const dir = tempDir(t);
  const password = randomPassword();
  writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  const run = launch(
    t,
    [
      '--http-port',
      '0',
      '--data-dir',
      join(dir, 'data'),
      '--api-auth-required',
      '--api-auth-password-file',
      join(dir, 'password'),
      ...args,
    ],
    MAIN,
    { env },
  );
  const listening = await run.waitForLog((l) => l.msg === 'listening');
  return { ...run, url: `http://127.0.0.1:${String(listening.port)}`, password };
}

t.test('the flag, API_AUTH_ACCESS_LOG and the config file each turn it on; the file is created 0640', async (t) => {
  const dir = tempDir(t);
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ 'access-log': join(dir, 'from-config.log') }));
  const forms: [string, string[], Record<string, string>][] = [
    ['from-flag.log', ['--access-log', join(dir, 'from-flag.log')], {}],
    ['from-env.log', [], { API_AUTH_ACCESS_LOG: join(dir, 'from-env.log') }],
    ['from-config.log', ['--config-file', config], {}],
  ];
  for (const [name, args, env] of forms) {
    // The sources are the subject here, not the HTTP threads (the tests below keep them).
    const server = await serve(t, [...args, '--http-threads', '1'], env);
    t.equal((await request(server.url, `/ext/info/${name}`)).status, 401);
    const line = await waitForLine(join(dir, name), `/ext/info/${name}`);
    t.equal(line.status, 401, name);
    t.equal(statSync(join(dir, name)).mode & 0o777, 0o640 & ~process.umask(), `${name}: created 0640`);
    t.notOk(
      server.logs.some((l) => l.path === `/ext/info/${name}`),
      `${name}: nothing of it on stdout`,
    );
    await server.stop('SIGTERM');
  }
});

t.test('"stdout" writes the lines to standard output, among the log\'s, each whole; "-" is refused', async (t) => {
  const server = await serve(t, ['--access-log', 'stdout']);
  await request(server.url, '/ext/info/on-stdout');
  const [line] = await server.waitForLines((l) => l.path === '/ext/info/on-stdout', 1);
  t.match(line, { status: 401, token: null, method: 'GET' });
  t.notOk('msg' in line, 'an access line, not a log event');
  await server.stop('SIGTERM');
  t.notOk(
    server.logs.some((l) => l.raw !== undefined),
    'every line on stdout is JSON',
  );

  const dash = await runCli(t, ['--http-port', '0', '--data-dir', join(tempDir(t), 'data'), '--access-log', '-']);
  t.equal(dash.code, 2);
  t.match(dash.stderr, /^api-auth: --access-log must be a file's path, or "stdout" for standard output, not "-"\n$/);
});

t.test('a path that cannot be opened for appending: one line naming it and why, exit 2, nothing listening', async (t) => {
  const dir = tempDir(t);
  const cases: [string, string[], Record<string, string>, RegExp][] = [
    [
      'no folder',
      ['--access-log', join(dir, 'none', 'access.log')],
      {},
      /^api-auth: --access-log: .*\/none\/access\.log cannot be opened for appending \(ENOENT\): its folder does not exist; create the folder, or name another file\n$/,
    ],
    ['a folder', ['--access-log', dir], {}, /^api-auth: --access-log: .* cannot be opened for appending \(EISDIR\)/],
    [
      'the environment',
      [],
      { API_AUTH_ACCESS_LOG: join(dir, 'none', 'access.log') },
      /^api-auth: API_AUTH_ACCESS_LOG \(environment\): .* \(ENOENT\)/,
    ],
  ];
  for (const [what, args, env, message] of cases) {
    const run = launch(t, ['--http-port', '0', '--data-dir', join(dir, 'data'), ...args], MAIN, { env });
    const exit = await run.exited;
    t.equal(exit.code, 2, `${what}: exit 2`);
    t.match(run.stderr(), message, `${what}: the message`);
    t.notOk(
      run.logs.some((l) => l.msg === 'listening'),
      `${what}: never listening`,
    );
  }
});

t.test("logrotate: the file renamed, SIGHUP, and the lines go to a new file, every thread's; none lost", async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'access.log');
  const server = await serve(t, ['--access-log', file, '--http-threads', '2']);
  const before = 20;
  for (let i = 0; i < before; i++) await request(server.url, `/ext/info/before/${i}`);
  for (let i = 0; i < before; i++) await waitForLine(file, `/ext/info/before/${i}`);
  renameSync(file, `${file}.1`);
  server.child.kill('SIGHUP');
  await server.waitForLog((l) => l.msg === 'SIGHUP: the access log is opened again');
  const after = 20;
  for (let i = 0; i < after; i++) await request(server.url, `/ext/info/after/${i}`);
  for (let i = 0; i < after; i++) await waitForLine(file, `/ext/info/after/${i}`);
  t.equal((await server.stop('SIGTERM')).code, 0);
  t.same(
    linesOf(`${file}.1`)
      .map((l) => l.path)
      .sort(),
    Array.from({ length: before }, (_, i) => `/ext/info/before/${i}`).sort(),
    'the renamed file: the lines before, and only them',
  );
  t.same(
    linesOf(file)
      .map((l) => l.path)
      .sort(),
    Array.from({ length: after }, (_, i) => `/ext/info/after/${i}`).sort(),
    'the new file: the lines after',
  );
});

t.test(
  'a full disk: lines lost, counted and logged once; serving goes on, and the lines come back with the room',
  needsRoot('mount, for a small tmpfs that really fills up'),
  async (t) => {
    const { dataDir: disk } = tmpfsDataDir(t);
    const file = join(disk, 'access.log');
    const server = await serve(t, ['--access-log', file, '--http-threads', '1']);
    const { result } = await jsonrpc(authUrl(server.url), 'auth.newToken', { password: server.password, endpoints: ['*'] });
    const token = (result as { token: string }).token;
    const filler = fillUp(disk);
    // Together longer than the part of a page the file may have left: the write cannot fit.
    const long = `/ext/info/full/${'x'.repeat(3000)}`;
    for (let i = 0; i < 5; i++) t.equal((await request(server.url, long)).status, 401, 'answered while the log cannot be written');
    await server.waitForLog((l) => l.msg?.startsWith('the access log cannot be written') === true && l.code === 'ENOSPC');
    const metrics = async (): Promise<string> =>
      (await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${token}`]] })).text;
    let text = await metrics();
    for (; !/^api_auth_access_log_lines_lost_total [1-9]/m.test(text); text = await metrics()) await sleep(50);
    t.match(text, /^api_auth_access_log_write_errors_total [1-9]/m, 'the failed writes counted');
    rmSync(filler);
    await request(server.url, '/ext/info/room-again');
    // A write the disk filled up within may have left the start of one line; every other line is whole.
    const whole = (): Line[] =>
      readFileSync(file, 'utf8')
        .split('\n')
        .slice(0, -1)
        .flatMap((text) => {
          try {
            return [JSON.parse(text) as Line];
          } catch {
            return [];
          }
        });
    while (!whole().some((l) => l.path === '/ext/info/room-again')) await sleep(50);
    const all = readFileSync(file, 'utf8').split('\n').slice(0, -1);
    t.ok(all.length - whole().length <= 1, 'at most one cut line');
    await server.waitForLog((l) => l.msg === 'the access log is written again');
    t.equal(server.logs.filter((l) => l.msg?.startsWith('the access log cannot be written') === true).length, 1, 'logged once');
    t.equal((await server.stop('SIGTERM')).code, 0);
  },
);
