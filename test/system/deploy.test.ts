// The systemd unit under deploy/: systemd's own checker finds nothing wrong
// with it, its hardening rates "OK" in systemd-analyze security, and its command line is
// one api-auth accepts (a flag it refused would leave the service restarting forever).
import t from 'tap';
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseArgs } from '../../build/host/index.js';
import { ROOT, startServer, tempDir } from '../helpers/server.js';
import { request } from '../helpers/http.js';

const run = promisify(execFile);
const UNIT = join(ROOT, 'deploy', 'api-auth.service');
const text = readFileSync(UNIT, 'utf8');

/** The unit's settings, a continued line joined, comments left out. */
function settings(): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const line of text.replace(/\\\n\s*/g, ' ').split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (m) map.set(m[1], [...(map.get(m[1]) ?? []), m[2]]);
  }
  return map;
}

t.test('systemd-analyze verify finds nothing to say', async (t) => {
  const { stdout, stderr } = await run('systemd-analyze', ['verify', UNIT]);
  t.equal(stdout + stderr, '', 'no warning, no error (exit 0)');
});

t.test('systemd-analyze security rates the hardening OK (exposure 2.0 or less)', async (t) => {
  const { stdout } = await run('systemd-analyze', ['security', '--offline=true', '--no-pager', UNIT]);
  const m = /Overall exposure level for api-auth\.service: ([\d.]+) (\w+)/.exec(stdout);
  t.ok(m, 'an overall exposure level');
  t.ok(Number(m![1]) <= 2.0, `exposure ${m![1]} ${m![2]}`);
  const set = settings();
  for (const [key, value] of [
    ['User', 'api-auth'],
    ['NoNewPrivileges', 'yes'],
    ['ProtectSystem', 'strict'],
    ['ReadWritePaths', '/var/lib/api-auth'],
    ['CapabilityBoundingSet', ''],
    ['PrivateTmp', 'yes'],
    ['ProtectHome', 'yes'],
  ]) {
    t.ok(set.get(key)?.includes(value), `${key}=${value}`);
  }
});

t.test('the unit runs api-auth with a command line api-auth accepts', async (t) => {
  const exec = settings().get('ExecStart')![0].split(/\s+/);
  t.same(
    exec.slice(0, 3),
    ['/usr/bin/env', 'node', '/opt/api-auth/node_modules/api-auth/build/host/main.js'],
    'node runs the build the tarball installed',
  );
  // biome-ignore lint/suspicious/noTemplateCurlyInString: systemd's own ${CREDENTIALS_DIRECTORY}, as the unit writes it
  const args = exec.slice(3).map((arg) => arg.replace('${CREDENTIALS_DIRECTORY}', '/run/credentials/api-auth.service'));
  const command = parseArgs(args);
  t.equal(command.action, 'serve');
  t.match(
    command,
    {
      options: {
        authRequired: true,
        passwordFile: '/run/credentials/api-auth.service/password',
        dataDir: '/var/lib/api-auth',
        upstream: 'http://127.0.0.1:9652',
      },
    },
    "tokens required, the password from systemd's credential, the state directory, an upstream",
  );
  t.ok(settings().get('LoadCredential')?.includes('password:/etc/api-auth/password'), 'the password file handed over as a credential');
  t.ok(
    settings().get('StateDirectory')?.includes('api-auth') && settings().get('StateDirectoryMode')?.includes('0700'),
    "the data folder is systemd's state directory, open to the service alone",
  );
});

t.test("systemctl reload: the unit's ExecReload sends SIGHUP to the main process; without TLS it logs so and keeps serving", async (t) => {
  const reload = settings().get('ExecReload');
  t.same(reload, ['/bin/kill -HUP $MAINPID'], 'one ExecReload, SIGHUP to the main process');
  const server = await startServer(t);
  const [command, ...args] = reload![0].split(/\s+/).map((arg) => arg.replace('$MAINPID', String(server.child.pid)));
  await run(command, args);
  const line = await server.waitForLog((l) => l.msg === 'SIGHUP: nothing to reload', 5000);
  t.match(line, { level: 'info', reason: /TLS is off/ }, 'an info line saying why');
  await run(command, args);
  await server.waitForLines((l) => l.msg === 'SIGHUP: nothing to reload', 2, 5000);
  t.notOk(server.hasExited(), 'still running after two reloads');
  t.equal((await request(server.url, '/ext/auth/health')).status, 200, 'still serving');
  t.same(await server.stop(), { code: 0, signal: null }, 'and a clean stop exits 0');
});

/**
 * What the unit lets the service write under ProtectSystem=strict: ReadWritePaths, and
 * the folders systemd makes for it (StateDirectory= under /var/lib, LogsDirectory= under
 * /var/log, RuntimeDirectory= under /run, CacheDirectory= under /var/cache).
 */
function writable(): string[] {
  const set = settings();
  const under: [string, string][] = [
    ['StateDirectory', '/var/lib'],
    ['LogsDirectory', '/var/log'],
    ['RuntimeDirectory', '/run'],
    ['CacheDirectory', '/var/cache'],
  ];
  return [
    ...(set.get('ReadWritePaths') ?? []).flatMap((v) => v.split(/\s+/)),
    ...under.flatMap(([key, root]) => (set.get(key) ?? []).flatMap((v) => v.split(/\s+/)).map((name) => `${root}/${name}`)),
  ];
}

t.test('the access log the docs name can be written under the unit: LogsDirectory=, and a start with it logs each request', async (t) => {
  const page = readFileSync(join(ROOT, 'docs', 'reference', 'access-log.md'), 'utf8');
  const named = /^(\/var\/log\/\S+) \{$/m.exec(page)?.[1];
  t.equal(named, '/var/log/api-auth/access.log', "the logrotate block of docs/reference/access-log.md names the service's log");
  t.equal(settings().get('ProtectSystem')?.[0], 'strict', 'the file system is read-only but for what the unit opens');
  const folder = writable().find((path) => named!.startsWith(`${path}/`));
  t.equal(folder, '/var/log/api-auth', "the log's folder is one the unit makes writable (LogsDirectory=api-auth)");
  t.same(settings().get('LogsDirectoryMode'), ['0750'], "open to the service (and its group to read), as the access log's rules allow");
  // As systemd leaves it: the folder the service's own, 0750; the unit's command line with
  // the drop-in's flag. systemd-run cannot run here (no systemd as PID 1).
  const dir = tempDir(t);
  const logs = join(dir, 'var-log-api-auth');
  mkdirSync(logs, { mode: 0o750 });
  chmodSync(logs, 0o750);
  const exec = settings().get('ExecStart')![0].split(/\s+/).slice(3);
  // biome-ignore lint/suspicious/noTemplateCurlyInString: systemd's own ${CREDENTIALS_DIRECTORY}, as the unit writes it
  const args = exec.map((arg) => arg.replace('${CREDENTIALS_DIRECTORY}', dir));
  t.ok(parseArgs([...args, '--access-log', named!]).action === 'serve', "the unit's command line takes the flag");
  const server = await startServer(t, { args: ['--access-log', join(logs, 'access.log')] });
  t.equal((await request(server.url, '/ext/info')).status, 401, 'a request without a token');
  t.same(await server.stop(), { code: 0, signal: null });
  const lines = readFileSync(join(logs, 'access.log'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { path: string; status: number });
  t.ok(
    lines.some((line) => line.path === '/ext/info' && line.status === 401),
    'the request is in the log',
  );
});
