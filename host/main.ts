#!/usr/bin/env node
// The api-auth command. Exit codes: 0 after --help, --version or a clean stop; 2 for a
// bad command line, a data folder it cannot use, or an address and port it cannot
// listen on (one line on stderr, and nothing listening); 1 for anything else (one log
// line). `api-auth token ...` and `api-auth password ...` are the operator commands,
// with their own exit codes (operator-cli.ts).
import { parseArgs, UsageError, USAGE } from './cli.js';
import { createLogger, errorFields } from './log.js';
import type { Logger } from './log.js';
import { isOperatorCommand, runOperatorCommand } from './operator-cli.js';
import { ListenError, startServer } from './server.js';
import type { ServerHandle } from './server.js';
import { StateError } from './state-file.js';
import { VERSION } from './version.js';

// Replaced by one at the chosen level once the command line is read.
let log: Logger = createLogger();
// Once serving: with several HTTP threads, the process must not exit before they have
// stopped (Node aborts when a thread's loop ends with sockets open), so a failure stops
// the server first.
let server: ServerHandle | undefined;

function fail(error: unknown): void {
  if (server !== undefined) {
    const stopping = server;
    server = undefined;
    log.error('api-auth failed', errorFields(error));
    stopping.stop().finally(() => process.exit(1));
    return;
  }
  if (error instanceof UsageError || error instanceof ListenError) {
    process.stderr.write(error.message + '\n');
    process.exit(error.exitCode);
  }
  if (error instanceof StateError) {
    process.stderr.write(`api-auth: ${error.message}\n`);
    process.exit(2);
  }
  // Only the message: error objects of this program never carry a password or a token.
  log.error('api-auth failed', errorFields(error));
  process.exit(1);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (isOperatorCommand(args)) {
    process.exitCode = await runOperatorCommand(args);
    return;
  }
  const command = parseArgs(args);
  if (command.action === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if (command.action === 'version') {
    process.stdout.write(`api-auth ${VERSION}\n`);
    return;
  }
  log = createLogger(undefined, command.options.logLevel);
  const started = await startServer(command.options, { log });
  server = started;
  // An HTTP thread failed: the server has stopped by itself and logged why.
  started.closed.catch((error: unknown) => {
    server = undefined;
    fail(error);
  });
  const stop = (): void => {
    started.stop().then(() => process.exit(0), fail);
  };
  // A second signal while stopping changes nothing: the stop is already bounded.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);
main().catch(fail);
