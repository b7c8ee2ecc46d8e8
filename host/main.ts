#!/usr/bin/env node
// The api-auth command: `api-auth [flags]` serves; `api-auth token ...` and `api-auth
// password ...` are the operator commands (cli/operator/), `api-auth fleet delete-key`
// the fleet's repair (cli/fleet.ts), and `api-auth state repair` the data folder's
// (cli/state-command.ts), with exit codes of their own. Serving exits (errors.ts, ExitCode) 0 after --help, --version or a clean stop; 2
// when it cannot start: a bad command line, environment variable, config file or
// password file, a data folder it cannot use, an address and port it cannot listen on
// (one line on stderr, and nothing listening); 1 for anything else (one log line).
import { flagName, readCommand, USAGE } from './cli/flags.js';
import { processIo } from './cli/io.js';
import { isOperatorCommand, runOperatorCommand } from './cli/operator/index.js';
import { unknownEnvironment } from './cli/sources.js';
import { ExitCode, StartError, UsageError } from './errors.js';
import type { Namer } from './errors.js';
import { createLogger, errorFields } from './ops/log.js';
import type { Logger } from './ops/log.js';
import type { ServerHandle } from './server.js';
import { VERSION } from './version.js';

// Replaced by one at the chosen level once the command line is read.
let log: Logger = createLogger();
// How the messages name options: as they were given (a flag, the environment, the config file).
let name: Namer = flagName;
// Once serving: with several HTTP threads, the process must not exit before they have
// stopped (Node aborts when a thread ends with sockets open), so a failure stops the
// server first, in order, and the process exits once it has.
let server: ServerHandle | undefined;

function fail(error: unknown): void {
  if (server !== undefined) {
    const serving = server;
    server = undefined;
    log.error('api-auth failed', errorFields(error));
    serving.stop().finally(() => exit(ExitCode.Failed));
    return;
  }
  if (error instanceof UsageError || error instanceof StartError) {
    // The library's messages name its options; the command's name them as they were given.
    process.stderr.write(`api-auth: ${error instanceof StartError ? error.describe(name) : error.message}\n`);
    process.exit(error.exitCode);
  }
  // Only the message: error objects of this program never carry a password or a token.
  log.error('api-auth failed', errorFields(error));
  exit(ExitCode.Failed);
}

/** How long an exit waits for standard output to take the log lines it holds. */
const DRAIN_MS = 5000;

/**
 * Exits once standard output has taken the log lines queued for it: a pipe whose reader
 * pauses takes them later (Node queues them), and process.exit alone would drop them.
 */
function exit(code: number): void {
  if (process.stdout.writableLength === 0) process.exit(code);
  setTimeout(() => process.exit(code), DRAIN_MS).unref();
  process.stdout.once('drain', () => process.exit(code));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (isOperatorCommand(args)) {
    process.exitCode = await runOperatorCommand(args);
    return;
  }
  if (args[0] === 'fleet') {
    // Loaded only for it: the fleet's modules (etcd3, gRPC) are no part of the other commands, nor of a start without a fleet.
    const { runFleetCommand } = await import('./cli/fleet.js');
    process.exitCode = await runFleetCommand(args, process.env, processIo());
    return;
  }
  if (args[0] === 'state') {
    // Loaded only for it: the data folder's modules are no part of the other commands.
    const { runStateCommand } = await import('./cli/state-command.js');
    process.exitCode = await runStateCommand(args);
    return;
  }
  const read = readCommand(args, process.env);
  const { command } = read;
  name = read.name;
  if (command.action === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if (command.action === 'version') {
    process.stdout.write(`api-auth ${VERSION}\n`);
    return;
  }
  log = createLogger(undefined, command.options.logLevel);
  // Node's own warnings (a deprecation a dependency runs into) as log lines, for every line
  // the process writes is JSON: gRPC, for one, gives an etcd's address as the TLS server
  // name, which Node warns of (DEP0123), on a fleet whose --cluster-etcd names an address.
  process.removeAllListeners('warning');
  process.on('warning', (warning: Error & { code?: string }) => {
    log.warn('node warning', { name: warning.name, code: warning.code, message: warning.message });
  });
  const unknown = unknownEnvironment(process.env);
  if (unknown.length > 0) {
    log.warn('environment variables named like options are not options, and change nothing', {
      names: unknown,
      hint: "API_AUTH_ and a flag's name in upper snake case, such as API_AUTH_HTTP_PORT (api-auth --help)",
    });
  }
  // Listened for before the start: the listening line is out before startServer returns,
  // and a signal that came in between would end the process at once, without a stop. One
  // that comes while starting stops the server once it has started.
  let started: ServerHandle | undefined;
  let stopAsked = false;
  const stop = (): void => {
    stopAsked = true;
    started?.stop().then(() => exit(ExitCode.Ok), fail);
  };
  // A second signal while stopping changes nothing: the stop is already bounded.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Certificate renewal without a restart; the server logs how it went. One that comes
  // while starting is carried out once started (the files may have changed after they
  // were read). Without TLS there is nothing to reload, but SIGHUP is still the reload
  // signal (systemctl reload sends it): its default action would end the node. It also
  // reopens the access log's file, which logrotate has renamed; one that comes while
  // starting, once started, as the file may have been renamed after it was opened.
  let reloadAsked = false;
  let reopenAsked = false;
  const tls = command.options.tlsEnabled === true;
  const accessLog = command.options.accessLog !== undefined;
  const reopen = (serving: ServerHandle): void => {
    serving.reopenAccessLog();
    log.info('SIGHUP: the access log is opened again', { path: command.options.accessLog });
  };
  process.on('SIGHUP', () => {
    if (accessLog) {
      if (started === undefined) reopenAsked = true;
      else reopen(started);
    }
    if (tls) {
      if (started === undefined) reloadAsked = true;
      else void started.reloadTls();
    } else if (!accessLog) {
      log.info('SIGHUP: nothing to reload', {
        reason: 'TLS is off (no --http-tls-enabled), and the other settings are read only at start',
      });
    }
  });
  // Loaded only to serve: help, the version, an operator command or a refused command
  // line need none of the server's modules (uWS, the core, the HTTP stack).
  const { startServer } = await import('./server.js');
  started = await startServer(command.options, { log });
  server = started;
  // An HTTP thread failed: the server has stopped by itself, in order, and logged why.
  started.closed.catch((error: unknown) => {
    server = undefined;
    fail(error);
  });
  if (stopAsked) {
    stop();
    return;
  }
  if (reloadAsked) void started.reloadTls();
  if (reopenAsked) reopen(started);
}

process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);
main().catch(fail);
