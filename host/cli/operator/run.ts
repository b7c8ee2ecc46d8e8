// The operator commands: `api-auth token new`, `api-auth token list`, `api-auth token
// revoke`, `api-auth token rotate`, `api-auth password change`. Each is one call to a
// running node's /ext/auth: the command line read (args.ts, node-settings.ts), the
// call's params and secrets (request.ts, secrets.ts), the call (client.ts), and what it
// prints (output.ts). Passwords come from a file, from stdin, or from a prompt that does
// not echo; never from the command line, where other users could read them in the process
// list. A token to revoke comes the same ways; on the command line it is still taken, with
// a warning.
//
// Exit codes: 0 success; 1 the node refused (a JSON-RPC error: incorrect password,
// throttled, invalid params); 2 a bad command line; 3 the node could not be reached, or
// did not answer like an api-auth node.
import { NodeRefusedError, NodeUnreachableError, OperatorExitCode as ExitCode, UsageError } from '../../errors.js';
import { processIo } from '../io.js';
import type { CommandIo } from '../io.js';
import { checkFlagsOf, parseOperatorArgs } from './args.js';
import type { Action, OperatorOptions } from './args.js';
import { call, readCaFile } from './client.js';
import { fromNodeSettings } from './node-settings.js';
import { printResult } from './output.js';
import { requestOf } from './request.js';
import { OPERATOR_USAGE } from './usage.js';

/** Whether `args` (after the program name) is an operator command rather than server flags. */
export function isOperatorCommand(args: readonly string[]): boolean {
  return args[0] === 'token' || args[0] === 'password';
}

/** Runs an operator command to its end; resolves with the exit code. */
export async function runOperatorCommand(args: readonly string[], io: CommandIo = processIo()): Promise<number> {
  const json = args.includes('--json') || args.includes('--json=true');
  try {
    const { action, options, positional } = parseOperatorArgs(args);
    if (options.help) {
      io.stdout(OPERATOR_USAGE);
      return ExitCode.Ok;
    }
    fromNodeSettings(options, io.env ?? process.env, io);
    return await run(action, options, positional, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`api-auth: ${error.message}\n`);
      return ExitCode.Usage;
    }
    if (error instanceof NodeRefusedError) {
      if (json) io.stdout(JSON.stringify({ error: { code: error.rpcCode, message: error.message } }) + '\n');
      else io.stderr(`api-auth: the node refused: ${error.message} (${error.rpcCode})\n`);
      return error.exitCode;
    }
    // Only a node that did not answer is "unreachable" (3): a script retries that, and
    // must not retry the command's own failure.
    const unreachable = error instanceof NodeUnreachableError;
    const message = unreachable ? error.message : `unexpected failure: ${error instanceof Error ? error.message : String(error)}`;
    if (json) io.stdout(JSON.stringify({ error: { message } }) + '\n');
    else io.stderr(`api-auth: ${message}\n`);
    return unreachable ? error.exitCode : ExitCode.Failed;
  }
}

async function run(action: Action, options: OperatorOptions, positional: string[], io: CommandIo): Promise<number> {
  const rest = checkFlagsOf(action, options, positional);
  const { method, params } = await requestOf(action, options, rest, io);
  const ca = options.cacert === undefined ? undefined : await readCaFile(options.cacert, options.uri);
  const result = await call(options.uri, options.timeoutMs, method, params, ca);
  return printResult(action, result, options.json, options.id !== undefined, io);
}
