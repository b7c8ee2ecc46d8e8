// Runs the real CLI (build/host/main.js) in a child process, as an operator would, and
// reads its JSON log lines from stdout. Every child is killed when its test ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const MAIN = join(ROOT, 'build', 'host', 'main.js');
export const VERSION: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

/** One parsed stdout line; `raw` is set (and nothing else) when the line was not JSON. */
export interface LogLine {
  time?: string;
  level?: string;
  msg?: string;
  raw?: string;
  [field: string]: unknown;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A started child process of the CLI. */
export interface Running {
  child: ChildProcess;
  logs: LogLine[];
  stdout(): string;
  stderr(): string;
  exited: Promise<Exit>;
  hasExited(): boolean;
  /**
   * Resolves with the first log line matching, rejects on exit or after `timeoutMs` (none
   * by default: a slow start on a loaded machine is still a start; a process that never
   * logs the line is caught by the test's own timeout).
   */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /**
   * The lines matching, once there are `count` of them. Lines come on a pipe, apart from
   * the answers: a line written before an answer may still be on its way when the answer
   * is read.
   */
  waitForLines(match: (line: LogLine) => boolean, count: number, timeoutMs?: number): Promise<LogLine[]>;
  /**
   * Sends `signal` and waits for the exit; SIGKILL after `graceMs` when given. None by
   * default: a clean stop that a loaded machine makes slow is still a clean stop (exit 0),
   * and one that never ends is caught by the test's own timeout.
   */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<Exit>;
  /** Waits for the exit without sending anything; SIGKILL after `graceMs` when given. */
  waitForExit(graceMs?: number): Promise<Exit>;
}

/** The owner of the test's temporary files; removed when the test ends. */
export function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function randomPassword(): string {
  return 'pw-' + randomBytes(12).toString('hex');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/**
 * The environment of a program a test starts: this one's, without what tap adds to
 * NODE_OPTIONS. tap loads its process tracker into every Node process started under it;
 * in a child that is a module loader on a thread of its own (and again on every thread
 * of the child's own) and exit handlers on SIGTERM and SIGINT, which more than doubles
 * the CPU time of a start and is not the program an operator runs. tap puts it back into
 * the environment of every spawn, whatever that is given: spawn what `untracked` makes.
 */
export const PROGRAM_ENV: NodeJS.ProcessEnv = (() => {
  const env = { ...process.env };
  const kept = (env.NODE_OPTIONS ?? '').split(/\s+/).filter((option) => option !== '' && !option.includes('@tapjs/'));
  if (kept.length > 0) env.NODE_OPTIONS = kept.join(' ');
  else delete env.NODE_OPTIONS;
  return env;
})();

/**
 * The command and arguments that run `command ...args` with PROGRAM_ENV's NODE_OPTIONS.
 * tap hooks every spawn of a test process (process-on-spawn) and adds its tracker to the
 * NODE_OPTIONS of the spawn's environment; env(1), first on the command line, sets them
 * back just before it executes the program, in the same process.
 */
export function untracked(command: string, args: readonly string[], nodeOptions = PROGRAM_ENV.NODE_OPTIONS): [string, string[]] {
  return ['env', [...(nodeOptions === undefined ? ['-u', 'NODE_OPTIONS'] : [`NODE_OPTIONS=${nodeOptions}`]), command, ...args]];
}

/** How launch starts node, beyond the script and its arguments. */
export interface NodeSettings {
  /** Flags before the script. */
  nodeFlags?: readonly string[];
  /** NODE_OPTIONS; default PROGRAM_ENV's. */
  nodeOptions?: string;
  /** Variables set beside PROGRAM_ENV's (API_AUTH_*, say). */
  env?: Readonly<Record<string, string>>;
}

/**
 * Starts `node build/host/main.js ...args` (or another script, and as `node` says); the
 * child is killed at the end of `t`.
 */
export function launch(t: Test, args: readonly string[], script = MAIN, node: NodeSettings = {}): Running {
  return launchProgram(
    t,
    untracked(process.execPath, [...(node.nodeFlags ?? []), script, ...args], node.nodeOptions ?? PROGRAM_ENV.NODE_OPTIONS),
    node.env,
  );
}

/** Starts a program that logs JSON lines on stdout, as api-auth does (the Go node of test/fleet/go.test.ts); killed at the end of `t`. */
export function launchProgram(t: Test, command: [string, string[]], env: NodeJS.ProcessEnv = {}): Running {
  const child = spawn(...command, { cwd: ROOT, env: { ...PROGRAM_ENV, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let pending = '';
  let exit: Exit | undefined;
  const logs: LogLine[] = [];
  const waiters = new Set<(line: LogLine | undefined) => void>();

  child.stdout!.setEncoding('utf8');
  child.stderr!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    out += chunk;
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const text = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (text === '') continue;
      let line: LogLine;
      try {
        const parsed: unknown = JSON.parse(text);
        line = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as LogLine) : { raw: text };
      } catch {
        line = { raw: text };
      }
      logs.push(line);
      for (const waiter of [...waiters]) waiter(line);
    }
  });
  child.stderr!.on('data', (chunk: string) => {
    err += chunk;
  });

  child.on('exit', (code, signal) => {
    exit = { code, signal };
  });
  // 'close' comes once the process has exited AND its stdout and stderr have been read to
  // their end: what a caller reads then is all the process wrote, however loaded the
  // machine (after 'exit' alone, a refusal's line could still be in the pipe).
  const exited = new Promise<Exit>((done) => {
    child.on('close', (code, signal) => {
      exit = { code, signal };
      for (const waiter of [...waiters]) waiter(undefined);
      done(exit);
    });
  });

  const running: Running = {
    child,
    logs,
    stdout: () => out,
    stderr: () => err,
    exited,
    hasExited: () => exit !== undefined,
    waitForLog(match, timeoutMs) {
      const seen = logs.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((done, fail) => {
        const timer =
          timeoutMs === undefined
            ? undefined
            : setTimeout(() => {
                waiters.delete(waiter);
                fail(new Error(`no matching log line within ${timeoutMs} ms; stdout:\n${out}\nstderr:\n${err}`));
              }, timeoutMs);
        const waiter = (line: LogLine | undefined): void => {
          if (line === undefined) {
            clearTimeout(timer);
            waiters.delete(waiter);
            fail(new Error(`the process exited (${JSON.stringify(exit)}) first; stdout:\n${out}\nstderr:\n${err}`));
          } else if (match(line)) {
            clearTimeout(timer);
            waiters.delete(waiter);
            done(line);
          }
        };
        if (exit !== undefined) waiter(undefined);
        else waiters.add(waiter);
      });
    },
    async waitForLines(match, count, timeoutMs) {
      await running.waitForLog(() => logs.filter(match).length >= count, timeoutMs);
      return logs.filter(match);
    },
    async stop(signal = 'SIGTERM', graceMs) {
      if (exit !== undefined) return exit;
      child.kill(signal);
      return running.waitForExit(graceMs);
    },
    async waitForExit(graceMs) {
      if (exit !== undefined) return exit;
      const timer = graceMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), graceMs);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
  t.teardown(async () => {
    if (exit === undefined) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  return running;
}

export interface CliResult extends Exit {
  stdout: string;
  stderr: string;
  logs: LogLine[];
}

/**
 * Runs the CLI to its exit. A run that starts listening is killed at once (the result
 * then shows the listening line and signal SIGKILL), so a command line that should have
 * been refused fails its test quickly instead of serving. With `timeoutMs`, a run still
 * going by then is killed (signal SIGKILL); without, it may take as long as the machine
 * makes it, and one that hangs is caught by the test's own timeout.
 */
export async function runCli(t: Test, args: readonly string[], timeoutMs?: number): Promise<CliResult> {
  const run = launch(t, args);
  const listening = run
    .waitForLog((l) => l.msg === 'listening', timeoutMs)
    .then(
      () => run.stop('SIGKILL'),
      () => undefined,
    );
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => run.child.kill('SIGKILL'), timeoutMs);
  const exit = await run.exited;
  clearTimeout(timer);
  await listening;
  return { ...exit, stdout: run.stdout(), stderr: run.stderr(), logs: run.logs };
}

export interface ServerOptions {
  /** --api-auth-required; default true. */
  auth?: boolean;
  /** The service password; default a random one. */
  password?: string;
  /** The password file's content; default the password itself. */
  fileContent?: string;
  /** The password file's mode; default 0600. */
  mode?: number;
  /** Leave the password file missing so that the server generates it. */
  generate?: boolean;
  /** Extra flags, after the defaults. */
  args?: readonly string[];
  /** Create the data folder before the start; default true (false leaves it to the server). */
  createDataDir?: boolean;
  /** Start on a state whose password checks cost next to nothing (cheap-state.ts), for a test of many. */
  cheapChecks?: boolean;
  /** How node runs the CLI (flags before the script, say); default as `launch` does. */
  node?: NodeSettings;
}

export interface Server extends Running {
  url: string;
  port: number;
  password: string;
  passwordFile: string;
  dir: string;
  /** The --data-dir folder (`<dir>/data`). */
  dataDir: string;
  /** The command line the server was started with (after `main.js`). */
  args: readonly string[];
  listening: LogLine;
}

/**
 * Starts the CLI on a free port (--http-port 0) with a temporary password file and data
 * folder, and waits for its `listening` log line.
 */
export async function startServer(t: Test, options: ServerOptions = {}): Promise<Server> {
  const dir = tempDir(t);
  const dataDir = join(dir, 'data');
  // 0700 whatever the umask: a data folder its group can write to is refused.
  if (options.createDataDir ?? true) mkdirSync(dataDir, { mode: 0o700 });
  const args = ['--http-port', '0', '--data-dir', dataDir];
  const auth = options.auth ?? true;
  const passwordFile = join(dir, 'password');
  let password = options.password ?? randomPassword();
  if (options.cheapChecks && auth)
    await (await import('./cheap-state.js')).writeCheapState(dataDir, options.fileContent?.trim() ?? password);
  if (auth) {
    args.push('--api-auth-required', '--api-auth-password-file', passwordFile);
    if (!options.generate) {
      writeFileSync(passwordFile, options.fileContent ?? password, { mode: 0o600 });
      chmodSync(passwordFile, options.mode ?? 0o600);
    }
  }
  args.push(...(options.args ?? []));
  const run = launch(t, args, MAIN, options.node);
  const listening = await run.waitForLog((l) => l.msg === 'listening');
  if (auth && options.generate) password = readFileSync(passwordFile, 'utf8').trim();
  const port = Number(listening.port);
  return { ...run, url: `http://127.0.0.1:${port}`, port, password, passwordFile, dir, dataDir, args, listening };
}

/**
 * Starts the CLI again with the command line of `previous` (same data folder, same
 * password file, which is left as it is) once `previous` has exited, and waits for its
 * `listening` line. `password` is the password the caller expects to be in force now
 * (default: `previous.password`); it is carried along, not checked.
 */
export async function restartServer(t: Test, previous: Server, password: string = previous.password): Promise<Server> {
  if (!previous.hasExited()) throw new Error('restartServer: the previous server is still running; stop it first');
  const run = launch(t, previous.args);
  const listening = await run.waitForLog((l) => l.msg === 'listening');
  const port = Number(listening.port);
  return {
    ...run,
    url: `http://127.0.0.1:${port}`,
    port,
    password,
    passwordFile: previous.passwordFile,
    dir: previous.dir,
    dataDir: previous.dataDir,
    args: previous.args,
    listening,
  };
}
