// A private Linux machine for test/docs/readme.test.ts: the README's commands install into
// /opt, /usr/local/bin and /etc, add a user and start a systemd service, and its servers
// take the fixed ports 9650 and 9652. Here they do all that in namespaces of their own
// (PID, mount, network), with systemd as PID 1, so nothing on the host changes and no
// port collides with a test running beside it. /etc, /usr/local/bin, /opt, /var/lib and
// /var/log are the host's under a private writable layer (overlayfs, upper layer in
// memory); /root, /home, /tmp and /var/tmp start empty, but for the checkout itself,
// which keeps its path wherever it was cloned. Killing PID 1 of the namespace
// ends every process in it, and the memory goes with the last one.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, watch } from 'node:fs';
import { execFileSync } from 'node:child_process';
import type { Test } from 'tap';
import { PROGRAM_ENV, ROOT, untracked } from './server.js';

export const MACHINE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** What runs in the new namespaces before systemd replaces it (as PID 1). */
const SETUP = String.raw`set -eu
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/machine /run/readme /run/machine/checkout
# The checkout (the README's git clone and readme-node.js come from it) may be anywhere,
# a home folder or /tmp included, which are replaced below: held here, put back after.
mount --bind "$CHECKOUT" /run/machine/checkout
for dir in /etc /usr/local/bin /opt /var/lib /var/log; do
  layer=/run/machine/layers$(echo "$dir" | tr / _)
  mkdir -p "$layer/upper" "$layer/work"
  mount -t overlay overlay -o "lowerdir=$dir,upperdir=$layer/upper,workdir=$layer/work" "$dir"
done
# npm's cache, read-only below a private layer, before /root is replaced.
mkdir -p /run/machine/npm-cache/upper /run/machine/npm-cache/work /run/machine/npm-cache/lower
mount --bind "$HOST_NPM_CACHE" /run/machine/npm-cache/lower
mount -t tmpfs -o mode=0700 tmpfs /root
mkdir /root/.npm
mount -t overlay overlay -o lowerdir=/run/machine/npm-cache/lower,upperdir=/run/machine/npm-cache/upper,workdir=/run/machine/npm-cache/work /root/.npm
for dir in /tmp /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$dir"; done
mount -t tmpfs -o mode=0755 tmpfs /home
# Where the checkout was hidden by an empty folder above, it is bound back at its path.
if [ ! -d "$CHECKOUT/.git" ] && [ ! -f "$CHECKOUT/.git" ]; then
  mkdir -p "$CHECKOUT"
  mount --bind /run/machine/checkout "$CHECKOUT"
fi
# The machine has no network: its npm installs from the cache alone (filled by the repository's
# npm ci and, for the production install, by test/docs/readme.test.ts) and says so at once when a package is missing, rather than retrying
# a registry it cannot reach for minutes.
printf 'offline=true\nfund=false\naudit=false\nupdate-notifier=false\n' > /root/.npmrc
# Only what the README starts runs: none of the host's enabled services.
find /etc/systemd/system -path '*.wants/*' -delete
# CI runs as root without sudo, and so does this machine: when sudo is not installed, a
# sudo that runs the command as its caller (root) lets the README's commands run as written.
if ! command -v sudo >/dev/null; then
  printf '#!/bin/sh\nexec "$@"\n' > /usr/local/bin/sudo
  chmod 0755 /usr/local/bin/sudo
fi
ip link set lo up
# systemd shares / with what it mounts for a unit (the ramfs of LoadCredential=) only when
# it is shared; it does that itself at boot but not in a container, which it takes this for.
# The peer groups made here are the machine's own: unshare left every mount private.
mount --make-rshared /
echo ready
exec /lib/systemd/systemd --system --unit=basic.target </dev/null >/run/machine/systemd.log 2>&1
`;

export interface Machine {
  /** systemd's PID on the host. */
  pid: number;
  /** A path inside the machine, as the host reaches it. */
  path(inside: string): string;
  /** Spawns `command` inside the machine (every namespace, its root, /), with `env` only. */
  spawn(command: string, args: readonly string[], env: Record<string, string>): ChildProcess;
  /** Runs `command` inside the machine to its end and returns its stdout; throws on failure. */
  run(command: string, args: readonly string[]): string;
}

function npmCache(): string {
  return execFileSync('npm', ['config', 'get', 'cache'], { env: PROGRAM_ENV, encoding: 'utf8' }).trim();
}

/** Checks that the host has the tools the machine needs, naming what is missing (root is the caller's to check). */
export function machineTools(): string | undefined {
  for (const tool of ['unshare', 'nsenter', 'ip']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      return `${tool} is missing: install ${tool === 'ip' ? 'iproute2' : 'util-linux'}`;
    }
  }
  return undefined;
}

/** Boots the machine and waits until systemd has finished starting it; torn down when `t` ends. */
export async function bootMachine(t: Test): Promise<Machine> {
  const env = { PATH: MACHINE_PATH, HOST_NPM_CACHE: npmCache(), CHECKOUT: ROOT };
  // --kill-child: if unshare itself is killed, the machine goes with it.
  const unshare = spawn(
    ...untracked('unshare', ['--pid', '--fork', '--kill-child=SIGKILL', '--mount', '--mount-proc', '--net', 'sh', '-c', SETUP]),
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => unshare.once('exit', () => resolve()));
  let err = '';
  unshare.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  let pid = 0;
  t.teardown(async () => {
    if (pid !== 0) process.kill(pid, 'SIGKILL');
    else unshare.kill('SIGKILL');
    await exited;
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    unshare.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('ready\n')) resolve();
    });
    unshare.once('exit', (code) => reject(new Error(`the machine did not start (unshare exited ${code}):\n${err}`)));
  });
  pid = Number(readFileSync(`/proc/${unshare.pid}/task/${unshare.pid}/children`, 'utf8').trim().split(/\s+/)[0]);
  const machine: Machine = {
    pid,
    path: (inside) => `/proc/${pid}/root${inside}`,
    spawn: (command, args, env) =>
      spawn(
        ...untracked('nsenter', [
          '-t',
          String(pid),
          '-a',
          '--',
          'env',
          '-i',
          ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
          command,
          ...args,
        ]),
        { env: { PATH: MACHINE_PATH }, stdio: ['pipe', 'pipe', 'pipe'] },
      ),
    run: (command, args) =>
      execFileSync(...untracked('nsenter', ['-t', String(pid), '-a', '--', 'env', '-i', `PATH=${MACHINE_PATH}`, command, ...args]), {
        encoding: 'utf8',
        env: { PATH: MACHINE_PATH },
      }),
  };
  // systemctl reaches systemd by its private socket, which exists once systemd has set up.
  const socket = machine.path('/run/systemd/private');
  await new Promise<void>((resolve) => {
    const watcher = watch(machine.path('/run'), { recursive: true }, () => {
      if (existsSync(socket)) done();
    });
    const done = (): void => {
      watcher.close();
      resolve();
    };
    if (existsSync(socket)) done();
  });
  // --wait returns once the start-up jobs are done; "degraded" would name a failed unit.
  const state = await new Promise<string>((resolve) => {
    const child = machine.spawn('systemctl', ['is-system-running', '--wait'], { PATH: MACHINE_PATH });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.once('close', () => resolve(out.trim()));
  });
  if (state !== 'running') throw new Error(`the machine's systemd is ${state}: ${machine.run('systemctl', ['--failed', '--no-pager'])}`);
  return machine;
}
