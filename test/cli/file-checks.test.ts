// The config file and the password file follow the data folder's rules: a
// regular file, never a link, that only root or api-auth's user can change, in a
// folder likewise (a sticky one, as /tmp, is fine). Anything else stops the start with
// exit 2 and one line naming the file and the chmod or chown that fixes it; nothing
// listens, and no password file is generated.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { needsRoot } from '../helpers/root.js';
import { runCli, tempDir } from '../helpers/server.js';

/** A folder (0700) holding a password file (0600) and a config file (0600) naming a free port. */
function files(dir: string): { password: string; config: string } {
  mkdirSync(dir, { mode: 0o700, recursive: true });
  const password = join(dir, 'password');
  writeFileSync(password, 'pw-0123456789abcdef\n', { mode: 0o600 });
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ 'http-port': 0 }), { mode: 0o600 });
  return { password, config };
}

function args(dir: string, config: string, password: string): string[] {
  return ['--config-file', config, '--data-dir', join(dir, 'data'), '--api-auth-required', '--api-auth-password-file', password];
}

t.test("files of the operator's own start; a sticky folder (/tmp) is fine", async (t) => {
  const dir = tempDir(t);
  const { password, config } = files(join(dir, 'ok'));
  chmodSync(password, 0o640);
  chmodSync(config, 0o644);
  const run = await runCli(t, args(dir, config, password));
  t.ok(
    run.logs.some((l) => l.msg === 'listening'),
    `listening; stderr: ${run.stderr}`,
  );
  const sticky = join(dir, 'sticky');
  mkdirSync(sticky);
  chmodSync(sticky, 0o1777);
  const inSticky = files(join(sticky, 'x'));
  const stickyConfig = join(sticky, 'config.json');
  writeFileSync(stickyConfig, JSON.stringify({ 'http-port': 0 }), { mode: 0o600 });
  const fromSticky = await runCli(t, args(dir, stickyConfig, inSticky.password));
  t.ok(
    fromSticky.logs.some((l) => l.msg === 'listening'),
    `a config file in a sticky folder: listening; stderr: ${fromSticky.stderr}`,
  );
});

t.test('a config file or password file others can change, or a link, stops the start naming the repair', async (t) => {
  const dir = tempDir(t);
  const cases: [string, (d: string, f: { password: string; config: string }) => { config?: string; password?: string }, RegExp][] = [
    [
      'a config file at 0666',
      (_, f) => {
        chmodSync(f.config, 0o666);
        return {};
      },
      /^api-auth: config file (\S+)\/config\.json can be written by its group and by others \(mode 0666\), who could then turn auth off or redirect the upstream; chmod go-w \1\/config\.json\n$/,
    ],
    [
      'a config file its group can write',
      (_, f) => {
        chmodSync(f.config, 0o620);
        return {};
      },
      /config\.json can be written by its group \(mode 0620\).*; chmod go-w /,
    ],
    [
      'a config file that is a link',
      (d, f) => {
        const link = join(d, 'link.json');
        symlinkSync(f.config, link);
        return { config: link };
      },
      /^api-auth: --config-file \S+\/link\.json is a symbolic link, which api-auth does not follow: whoever can change the link chooses the options; name the file itself\n$/,
    ],
    [
      'a config file in a folder others can write',
      (d) => {
        const open = join(d, 'open');
        mkdirSync(open);
        chmodSync(open, 0o777);
        const config = join(open, 'config.json');
        writeFileSync(config, JSON.stringify({ 'http-port': 0 }), { mode: 0o600 });
        return { config };
      },
      /^api-auth: the folder of config file (\S+)\/open\/config\.json, \1\/open, can be written by its group and by others \(mode 0777\), who could then turn auth off or redirect the upstream; chmod go-w \1\/open\n$/,
    ],
    [
      'a config file that is a FIFO',
      (d) => {
        const fifo = join(d, 'fifo.json');
        execFileSync('mkfifo', ['-m', '600', fifo]);
        return { config: fifo };
      },
      /^api-auth: --config-file \S+\/fifo\.json is not a regular file \(a FIFO, a socket or a device\)/,
    ],
    [
      'a password file at 0622',
      (_, f) => {
        chmodSync(f.password, 0o622);
        return {};
      },
      /^api-auth: --api-auth-password-file: the password file (\S+)\/password can be written by its group and by others \(mode 0622\), who could then choose the password adopted at the next start; chmod go-w \1\/password\n$/,
    ],
    [
      'a password file that is a link',
      (d, f) => {
        const link = join(d, 'link-password');
        symlinkSync(f.password, link);
        return { password: link };
      },
      /^api-auth: --api-auth-password-file \S+\/link-password: the file is a symbolic link, which api-auth does not follow: whoever can change the link chooses the password; put the file itself in its place\n$/,
    ],
    [
      'a password file in a folder its group can write',
      (d) => {
        const open = join(d, 'group');
        mkdirSync(open);
        chmodSync(open, 0o770);
        const password = join(open, 'password');
        writeFileSync(password, 'pw-0123456789abcdef\n', { mode: 0o600 });
        return { password };
      },
      /^api-auth: --api-auth-password-file: the folder of the password file (\S+)\/group\/password, \1\/group, can be written by its group \(mode 0770\).*; chmod go-w \1\/group\n$/,
    ],
    [
      'a password file that is a FIFO',
      (d) => {
        const fifo = join(d, 'fifo-password');
        execFileSync('mkfifo', ['-m', '600', fifo]);
        return { password: fifo };
      },
      /^api-auth: --api-auth-password-file \S+\/fifo-password: this is not a regular file/,
    ],
  ];
  let n = 0;
  for (const [what, make, message] of cases) {
    const d = join(dir, String(n++));
    const f = files(d);
    const chosen = { ...f, ...make(d, f) };
    const run = await runCli(t, args(d, chosen.config, chosen.password));
    t.equal(run.code, 2, `${what}: exit 2`);
    t.match(run.stderr, message, `${what}: the message`);
    t.notOk(
      run.logs.some((l) => l.msg === 'listening'),
      `${what}: never listening`,
    );
  }
});

t.test(
  'a config file or password file of another user stops the start, with the chown',
  needsRoot('chown, to give a file to another user'),
  async (t) => {
    const dir = tempDir(t);
    const f = files(join(dir, 'a'));
    chownSync(f.config, 4321, 4321);
    const config = await runCli(t, args(join(dir, 'a'), f.config, f.password));
    t.equal(config.code, 2);
    t.match(
      config.stderr,
      /^api-auth: config file (\S+) belongs to user 4321, not to root or the user api-auth runs as \(0\), who could then turn auth off or redirect the upstream; chown 0 \1\n$/,
    );
    const g = files(join(dir, 'b'));
    chownSync(g.password, 4321, 4321);
    const password = await runCli(t, args(join(dir, 'b'), g.config, g.password));
    t.equal(password.code, 2);
    t.match(password.stderr, /^api-auth: --api-auth-password-file: the password file (\S+) belongs to user 4321, .*; chown 0 \1\n$/);
    const h = files(join(dir, 'c'));
    chownSync(join(dir, 'c'), 4321, 4321);
    const folder = await runCli(t, args(join(dir, 'c'), h.config, h.password));
    t.equal(folder.code, 2);
    t.match(folder.stderr, /^api-auth: the folder of config file \S+, (\S+), belongs to user 4321, .*; chown 0 \1\n$/);
  },
);
