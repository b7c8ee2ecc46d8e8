// The docs' examples run as written: every ```sh block of README.md,
// CONTRIBUTING.md and docs/**/*.md, in document order, in one shell session per file,
// and each command's output is what the docs show for it.
//
// The convention the docs follow (helpers/readme.ts has it in full, the README in a
// comment near its top): the `# ` lines directly under a command are its whole stdout,
// `...` matching any text in a line and a line of only `...` any number of lines; other
// comments are prose; every command must exit 0.
//
// Where it runs: a private machine (helpers/machine.ts), systemd as PID 1 in namespaces of
// its own, so the production guide's blocks really install into /opt, /usr/local/bin and
// /etc, add their user and start their unit, and the fixed ports (9650, 9652, 8545, etcd's)
// are its alone.
//
// How: one clean clone of this commit (`git clone`, as a reader's would be) serves every
// file, the README first. It shares the checkout's node_modules (read-only) and build:
// the README's test command (scripts/test.sh, which CI runs: .ci/run) ran `npm ci` first, so
// the README's first command (`test -d node_modules || npm ci && npm start ...`) finds them
// and installs nothing, as after a reader's first run; the production guide's `npm pack` runs `prepare`, which finds
// the copied build up to date (scripts/build.mjs), as a reader's pack after `npm ci` does.
// A command that starts a server (helpers/readme.ts: startsServer, startsUnit) runs in the
// background until the next one does or its file ends: the harness waits for its port to
// take connections, and stops it (SIGTERM to every process of the command, then waits for
// all of them; a systemd unit with `systemctl stop`) before the next server starts, then
// checks what it printed. A command that puts itself in the background (`... &`: ganache,
// etcd, a fleet's gateways) runs until its file ends, when the harness stops every job the
// file's shell still has. The README's test command is what CI runs (.ci/run,
// checked below), so it is not run again here.
//
// The fixture: the node the protect-a-node guide puts on 127.0.0.1:9652 is
// helpers/readme-node.js, started inside the machine before the first file.
//
// The registry: the machine has no network, so its npm installs from npm's cache alone.
// The production guide's `npm install ./api-auth-0.1.0.tgz` resolves the tarball's
// dependencies against the registry's package documents, which `npm ci` never fetches (it
// takes the lock file's tarballs), so after CI's `npm ci` on a fresh machine the cache had
// the tarballs and not the documents, and the install failed (ENOTCACHED). Before
// the machine boots, the test resolves that install itself, with the network, and caches
// what it picks: what an operator's registry serves.
import t from 'tap';
import type { Test } from 'tap';
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { createReadStream, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bootMachine, MACHINE_PATH, machineTools } from '../helpers/machine.js';
import type { Machine } from '../helpers/machine.js';
import { needsRoot } from '../helpers/root.js';
import { docBlocks, docFiles, outputDiffers, serverPort, startsServer, startsUnit } from '../helpers/readme.js';
import type { Command } from '../helpers/readme.js';
import { PROGRAM_ENV, ROOT, tempDir } from '../helpers/server.js';

// Every page's blocks in one private machine, one after the other: about 150 s on a quiet
// 2-core machine, and twice that while other test files run beside it (tap's 300 s per file
// would cut it off). Each command has its own bound (Session.run, start).
t.setTimeout(900_000);

const files = docFiles().map((file) => ({ file, blocks: docBlocks(file) }));
/** CI's own command: not run again inside the docs' run (it is the run's parent). */
const runsTheTests = (command: Command): boolean => /(^|\s)(npm test|scripts\/test\.sh)\b/.test(command.text);

t.test("CI runs the README's test command", async (t) => {
  const commands = files[0].blocks.flatMap((block) => block.commands).filter(runsTheTests);
  t.equal(commands.length, 1, 'the README has one command that runs the tests');
  const readme = commands[0].text.replace(/\s+#.*$/, '');
  const ci = readFileSync(join(ROOT, '.ci', 'run'), 'utf8')
    .split('\n')
    .filter((line) => !/^\s*(#|$)/.test(line));
  // The command itself, with only its output piped on (CI restates tap's summary from it).
  t.equal(ci.filter((line) => line === readme || line.startsWith(`${readme} 2>&1 |`)).length, 1, `.ci/run runs \`${readme}\``);
  const script = readFileSync(join(ROOT, 'scripts', 'test.sh'), 'utf8')
    .split('\n')
    .filter((line) => !/^\s*(#|$)/.test(line));
  t.ok(
    script.indexOf('. scripts/setup-tests.sh') !== -1 && script.indexOf('. scripts/setup-tests.sh') < script.indexOf('npm test'),
    'which sets up (scripts/setup-tests.sh), then runs npm test',
  );
});

const exec = promisify(execFile);

/**
 * Puts in npm's cache what the production guide's install of the packed tarball resolves to
 * (the package documents and the tarballs), fetching only what the cache lacks.
 */
async function cacheTheInstall(t: Test): Promise<void> {
  const { dependencies } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const project = tempDir(t);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'readme-registry', version: '0.0.0', private: true, dependencies }));
  const flags = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];
  // The tree resolved as the tarball's install resolves it, with nothing installed.
  await exec('npm', ['install', '--package-lock-only', '--omit=dev', ...flags], { cwd: project, env: PROGRAM_ENV });
  const lock = JSON.parse(readFileSync(join(project, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { name?: string; version: string }>;
  };
  // An alias (uWebSockets.js is uws-pack) is cached by the package's own name.
  const specs = Object.entries(lock.packages)
    .filter(([path]) => path !== '')
    .map(([path, { name, version }]) => `${name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)}@${version}`);
  await exec('npm', ['cache', 'add', ...flags, ...specs], { cwd: project, env: PROGRAM_ENV });
  t.pass(`npm's cache holds the production install's ${specs.length} packages and their documents`);
}

/** Sessions made so far: each names its files in /run/readme by its own number. */
let sessions = 0;

/** One bash inside the machine, fed commands on stdin; each tells its end with a marker line. */
class Session {
  /**
   * Where this session's commands write: its own names, since a name another session used
   * may still be the FIFO of a server it started, which a plain write would block on.
   */
  private readonly prefix = `/run/readme/${++sessions}`;
  private out = '';
  private waiting: { marker: string; done: (status: number) => void } | undefined;
  private count = 0;
  private readonly closed: Promise<void>;
  private readonly shell: ChildProcess;

  constructor(
    private readonly machine: Machine,
    private readonly t: Test,
  ) {
    const shell = machine.spawn('bash', ['--noprofile', '--norc'], {
      HOME: '/root',
      PATH: MACHINE_PATH,
      LANG: 'C.UTF-8',
      USER: 'root',
      LOGNAME: 'root',
    });
    this.shell = shell;
    let err = '';
    shell.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      err += chunk;
    });
    shell.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.out += chunk;
      const m = this.waiting && new RegExp(`^${this.waiting.marker} (\\d+)$`, 'm').exec(this.out);
      if (m) {
        const { done } = this.waiting!;
        this.waiting = undefined;
        this.out = '';
        done(Number(m[1]));
      }
    });
    this.closed = new Promise((resolve) =>
      shell.once('close', () => {
        if (this.waiting) this.t.fail(`the session's shell ended: ${err}`);
        resolve();
      }),
    );
  }

  /** Runs `script` in the session; resolves with the status its last line echoes as `@@done <n> <status>`. */
  private send(script: (marker: string) => string, timeoutMs: number): Promise<number> {
    const marker = `@@done-${++this.count}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no end within ${timeoutMs / 1000} s`)), timeoutMs);
      this.waiting = {
        marker,
        done: (status) => {
          clearTimeout(timer);
          resolve(status);
        },
      };
      this.shell.stdin!.write(script(marker) + '\n');
    });
  }

  /** Runs shell text to its end; its stdout and stderr and its exit status. */
  async run(text: string, timeoutMs = 120_000): Promise<{ status: number; stdout: string; stderr: string }> {
    const n = this.count + 1;
    const status = await this.send(
      (marker) => `{\n${text}\n} </dev/null >${this.prefix}-${n}.out 2>${this.prefix}-${n}.err\necho "${marker} $?"`,
      timeoutMs,
    ).catch((error: Error) => {
      throw new Error(`${error.message}: ${text.split('\n')[0].slice(0, 120)}`);
    });
    const read = (name: string): string => readFileSync(this.machine.path(`${this.prefix}-${name}`), 'utf8');
    return { status, stdout: read(`${n}.out`), stderr: read(`${n}.err`) };
  }

  /**
   * Starts shell text in the background, as a job of its own (every process of it in one
   * process group), and resolves once `port` takes connections; rejects if the command
   * ends first. Stopping it: `stop`.
   */
  async start(text: string, port: number, timeoutMs = 240_000): Promise<Background> {
    const n = this.count + 1;
    await this.send((marker) => `mkfifo ${this.prefix}-${n}.out; echo "${marker} $?"`, 10_000);
    // The FIFO ends when the last process of the command has closed it: all of them are gone.
    let stdout = '';
    const ended = new Promise<void>((resolve) => {
      createReadStream(this.machine.path(`${this.prefix}-${n}.out`), 'utf8')
        .on('data', (chunk) => {
          stdout += String(chunk);
        })
        .on('close', resolve);
    });
    const job = `server_${n}`;
    // Readiness is the port: a server's log line may be filtered away by the command itself (| jq ...).
    const up = await this.send(
      (marker) => `{\n${text}\n} </dev/null >${this.prefix}-${n}.out 2>${this.prefix}-${n}.err &
${job}=$!
up=1
until [ "$up" = 0 ]; do
  (exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && up=0 && break
  kill -0 "$${job}" 2>/dev/null || break
  sleep 0.05
done
echo "${marker} $up"`,
      timeoutMs,
    );
    const stderr = (): string => readFileSync(this.machine.path(`${this.prefix}-${n}.err`), 'utf8');
    if (up !== 0) {
      await ended;
      throw new Error(`it ended before listening on ${port}; stdout:\n${stdout}\nstderr:\n${stderr()}`);
    }
    return {
      stop: async () => {
        const running = await this.send(
          (marker) =>
            `if kill -0 -- -"$${job}" 2>/dev/null; then kill -TERM -- -"$${job}"; wait "$${job}"; echo "${marker} 0"; else echo "${marker} 1"; fi`,
          30_000,
        );
        await ended;
        return { running: running === 0, stdout, stderr: stderr() };
      },
    };
  }

  /** Stops every job the shell still runs (what a file put in the background), then ends the shell. */
  async end(): Promise<void> {
    await this.send((marker) => `for job in $(jobs -p); do kill -TERM -- -"$job" 2>/dev/null; done; wait; echo "${marker} 0"`, 30_000);
    this.shell.stdin!.end('exit\n');
    await this.closed;
  }
}

interface Background {
  /** Stops it; whether it was still running, and what it printed. */
  stop(): Promise<{ running: boolean; stdout: string; stderr: string }>;
}

const lines = (text: string): string[] => (text === '' ? [] : text.replace(/\n$/, '').split('\n'));
const where = (file: string, command: Command): string => `${file} line ${command.line}: ${command.text.split('\n')[0].slice(0, 100)}`;

t.test(
  'every shell block of the docs runs as written, in order, with the output it shows',
  needsRoot('unshare and mount for the private machine (namespaces, systemd as PID 1)'),
  async (t) => {
    const missing = machineTools();
    if (missing !== undefined) throw new Error(missing);
    await cacheTheInstall(t);
    const machine = await bootMachine(t);

    const node = machine.spawn('node', [join(ROOT, 'test', 'helpers', 'readme-node.js')], { PATH: MACHINE_PATH });
    await new Promise<void>((resolve, reject) => {
      node.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        if (chunk.includes('listening')) resolve();
      });
      node.once('exit', (code) => reject(new Error(`the fixture node exited (${code})`)));
    });

    const setup = new Session(machine, t);
    // The clone shares the checkout's install, read-only, and its build: the README's test
    // command runs `npm ci` first (.ci/run runs it, checked above), and a second one here, for the
    // same lock file, cost the most of this test's time. So the README's first command finds
    // node_modules and installs nothing, as after a reader's first run.
    const modules = realpathSync(join(ROOT, 'node_modules'));
    const clone = await setup.run(`git clone --quiet ${ROOT} /root/api-auth && mkdir /root/api-auth/node_modules &&
mount --bind -o ro ${modules} /root/api-auth/node_modules && cp -r ${ROOT}/build /root/api-auth/build && rm -rf /root/api-auth/build/readme-example-*`);
    t.equal(
      clone.status,
      0,
      `a clean clone of this commit, with the checkout's install and build, is the sessions' folder ${clone.stderr}`,
    );
    await setup.end();

    for (const { file, blocks } of files) {
      if (blocks.length === 0) continue;
      t.comment(`${file}: ${blocks.length} sh blocks`);
      const began = performance.now();
      const session = new Session(machine, t);
      const opened = await session.run('cd /root/api-auth');
      t.equal(opened.status, 0, `${file}: its shell starts in the clone`);
      await session.run('set -m');

      // What serves now: a command in the background, or a unit systemd runs.
      let server: { command: Command; job: Background } | undefined;
      let unit: string | undefined;
      const stopServing = async (): Promise<void> => {
        if (server) {
          const { command, job } = server;
          server = undefined;
          const result = await job.stop();
          t.ok(result.running, `${where(file, command)}: still serving when stopped ${result.stderr}`);
          if (command.output.length > 0) {
            t.equal(outputDiffers(command.output, lines(result.stdout)), undefined, `${where(file, command)}: prints what the docs show`);
          }
        }
        if (unit) {
          const stopped = await session.run(`systemctl stop ${unit}`);
          t.equal(stopped.status, 0, `systemctl stop ${unit} ${stopped.stderr}`);
          unit = undefined;
        }
      };

      for (const block of blocks) {
        t.comment(`${file} line ${block.line}, under "${block.heading}"`);
        for (const command of block.commands) {
          if (runsTheTests(command)) continue;
          if (startsServer(command.text)) {
            await stopServing();
            server = { command, job: await session.start(command.text, serverPort(command.text)) };
            t.pass(`${where(file, command)}: serving on ${serverPort(command.text)}`);
            continue;
          }
          const starts = startsUnit(command.text);
          if (starts !== undefined) await stopServing();
          const result = await session.run(command.text);
          t.equal(result.status, 0, `${where(file, command)}: exit 0 ${result.stderr}`);
          if (command.output.length > 0) {
            t.equal(outputDiffers(command.output, lines(result.stdout)), undefined, `${where(file, command)}: prints what the docs show`);
          }
          if (starts !== undefined && result.status === 0) unit = starts;
        }
      }
      await stopServing();
      await session.end();
      t.comment(`${file}: ${((performance.now() - began) / 1000).toFixed(1)} s`);
    }
  },
);
