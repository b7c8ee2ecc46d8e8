// The service in this process, through the library entry (build/host/index.js): the
// options of a command line, parsed by the library's own parseArgs, served by its
// startServer, on a clock the test may drive. A start costs no process: what a test
// checks over HTTP is the same, and it sees the errors the CLI would print as the
// rejections they come from.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import {
  App,
  createLogger,
  parseArgs,
  StartError,
  startServer,
  us_listen_socket_close,
  us_socket_local_port,
} from '../../build/host/index.js';
import type { Auth, Clock, Logger, ServerOptions, TemplatedApp, us_listen_socket } from '../../build/host/index.js';
import { flagName } from '../../build/host/cli/flags.js';
import { randomPassword, tempDir, type LogLine } from './server.js';

/** A logger that keeps its lines, parsed, for the test to read; stamped by `clock` when given. */
export function recordingLogger(clock?: Clock): { log: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  return { log: createLogger((line) => lines.push(JSON.parse(line) as LogLine), 'debug', clock), lines };
}

/** A logger that drops every line. */
export const SILENT: Logger = createLogger(() => undefined);

/**
 * The line the CLI prints for an error of parsing its command line or of starting: the
 * message after "api-auth: ", with options named by their flags.
 */
export function cliLine(error: Error): string {
  return `api-auth: ${error instanceof StartError ? error.describe(flagName) : error.message}`;
}

/** A time to start a clock at: whole seconds, in the future of any clock this runs on. */
export const CLOCK_START = Date.parse('2030-01-01T00:00:00Z');

/** A clock that moves only when told: `clock.now += ms`. */
export function manualClock(start = CLOCK_START): { now: number; clock: Clock } {
  const state = { now: start, clock: (): number => state.now };
  return state;
}

/** The options of a command line, as the library parses them; throws the UsageError the CLI prints. */
export function optionsOf(args: readonly string[]): ServerOptions {
  const command = parseArgs(args);
  if (command.action !== 'serve') throw new Error(`${JSON.stringify(args)} is not a command line that serves`);
  return command.options;
}

/**
 * What the library makes of a command line the CLI would refuse: the error that parsing
 * it, or starting with it, throws; undefined when it started (and was stopped again).
 */
export async function refusalOf(args: readonly string[]): Promise<Error | undefined> {
  try {
    const server = await startServer(optionsOf(args), { log: SILENT });
    await server.stop();
    return undefined;
  } catch (error) {
    return error as Error;
  }
}

export interface LibraryServerOptions {
  /** --api-auth-required; default true. */
  auth?: boolean;
  /** The service password; default a random one. */
  password?: string;
  /** The password file's content; default the password itself. */
  fileContent?: string;
  /** The password file's mode; default 0600. */
  mode?: number;
  /** Extra flags, after the defaults. */
  args?: readonly string[];
  /** The clock the service runs on (and its log lines are stamped by); default the system's. */
  clock?: Clock;
  /** Start on a state whose password checks cost next to nothing (cheap-state.ts), for a test of many. */
  cheapChecks?: boolean;
}

export interface LibraryServer {
  url: string;
  port: number;
  password: string;
  passwordFile: string;
  dir: string;
  dataDir: string;
  /** The command line the options were parsed from. */
  args: readonly string[];
  /** Every log line so far, debug and up. */
  logs: LogLine[];
  /** The clean stop (what SIGTERM does to the program); stopping twice is stopping once. */
  stop(): Promise<void>;
}

/**
 * Serves on a free port of 127.0.0.1 from this process, with a temporary password file
 * and data folder (the same layout as the CLI helper's), stopped when `t` ends.
 */
export async function serveInProcess(t: Test, options: LibraryServerOptions = {}): Promise<LibraryServer> {
  const dir = tempDir(t);
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const passwordFile = join(dir, 'password');
  const password = options.password ?? randomPassword();
  if (options.cheapChecks && (options.auth ?? true))
    await (await import('./cheap-state.js')).writeCheapState(dataDir, options.fileContent?.trim() ?? password);
  const args = ['--http-port', '0', '--data-dir', dataDir];
  if (options.auth ?? true) {
    writeFileSync(passwordFile, options.fileContent ?? password, { mode: 0o600 });
    chmodSync(passwordFile, options.mode ?? 0o600);
    args.push('--api-auth-required', '--api-auth-password-file', passwordFile);
  }
  args.push(...(options.args ?? []));
  return serveAgain(t, { password, passwordFile, dir, dataDir, args }, options.clock);
}

/**
 * Serves again with the command line of `previous` (same data folder and password file),
 * which must have stopped: the in-process restart. `password` is the one the caller
 * expects in force (default `previous.password`).
 */
export async function serveAgain(
  t: Test,
  previous: Pick<LibraryServer, 'password' | 'passwordFile' | 'dir' | 'dataDir' | 'args'>,
  clock?: Clock,
  password: string = previous.password,
): Promise<LibraryServer> {
  const { log, lines } = recordingLogger(clock);
  // HTTP threads tell time by the system's clock: a clock of the test's own needs one thread.
  const options = clock === undefined ? optionsOf(previous.args) : { ...optionsOf(previous.args), httpThreads: 1 };
  const handle = await startServer(options, { log, clock });
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopped ??= handle.stop());
  t.teardown(stop);
  return {
    url: `http://127.0.0.1:${handle.port}`,
    port: handle.port,
    password,
    passwordFile: previous.passwordFile,
    dir: previous.dir,
    dataDir: previous.dataDir,
    args: previous.args,
    logs: lines,
    stop,
  };
}

/**
 * `auth` mounted on an App of this process listening on a free port of 127.0.0.1, as an
 * embedding node does; `routes` adds the node's own. The app and `auth` are closed when
 * `t` ends, or by `close` (closing twice is closing once: uWS must not close a socket twice).
 */
export async function mountedOnApp(
  t: Test,
  auth: Auth,
  routes: (app: TemplatedApp) => void = () => undefined,
): Promise<{ base: string; close(): Promise<void> }> {
  const app = App();
  auth.mount(app);
  routes(app);
  const socket = await new Promise<us_listen_socket>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (s) => (s ? resolve(s) : reject(new Error('no port')))),
  );
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= (async () => {
      us_listen_socket_close(socket);
      app.close();
      await auth.close();
    })();
    return closed;
  };
  t.teardown(close);
  return { base: `http://127.0.0.1:${us_socket_local_port(socket)}`, close };
}
