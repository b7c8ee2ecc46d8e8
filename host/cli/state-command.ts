// The data folder's own command: `api-auth state repair --data-dir DIR --accept-loss`,
// the step a start's refusal of a damaged, cut or missing file names (state/repair.ts).
// It works on the folder, not through a node, and refuses while a node holds the folder.
// Every line it writes is JSON: what it set aside, what it kept, or why it could not.
//
// Exit codes: 0 repaired, or nothing to repair; 2 a bad command line, or a folder it
// cannot repair (one line says why and what to do); 1 anything unforeseen.
import { resolve } from 'node:path';
import { ExitCode, StartError, UsageError } from '../errors.js';
import { createLogger, errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import { systemClock } from '../clock.js';
import { repairDataFolder } from '../state/repair.js';
import { nonEmpty, readArgs } from './args.js';
import { expandHome } from './sources.js';

export const STATE_USAGE = `Usage:
  api-auth state repair --data-dir DIR --accept-loss
                       set aside what a start of api-auth refused in the data
                       folder DIR, and make the folder one a start takes

A damaged token journal, or one cut short or missing, is copied aside to
tokens.damaged-TIME and replaced by one that lists the tokens of its whole groups
before the damage; the tokens it no longer lists stay valid until they expire, but
auth.revokeToken cannot reach them by id (revoke them by the token, or change the
password to end them all). A damaged or missing state file cannot be rebuilt: it is
moved aside with the journal and usage files written with it (NAME.damaged-TIME),
and the next start creates fresh state, so every token issued so far stops working.
Nothing is deleted. A folder with nothing to repair is left as it is.

Stop api-auth first: the command refuses while a node holds the folder.

Flags:
  --data-dir DIR   the data folder, as the node's --data-dir names it
  --accept-loss    say that the tokens the repair cannot keep are lost to the
                   inventory (or, for the state file, stop working)
  --help           print this help and exit

Exit codes: 0 repaired, or nothing to repair; 2 a bad command line, or a folder
that cannot be repaired (the line says why); 1 anything unforeseen.
`;

/** Runs `api-auth state ...` to its end; resolves with the exit code. `out` and `err` take whole JSON lines. */
export async function runStateCommand(
  args: readonly string[],
  out: Logger = createLogger(),
  err: Logger = createLogger((line) => process.stderr.write(line)),
): Promise<number> {
  try {
    const options = parseStateArgs(args);
    if (options === 'help') {
      process.stdout.write(STATE_USAGE);
      return ExitCode.Ok;
    }
    const report = await repairDataFolder(options.dataDir, out, systemClock);
    for (const moved of report.movedAside) out.info('set a file aside', moved);
    if (report.reason === undefined) out.info('nothing to repair: a start takes the data folder as it is', { path: options.dataDir });
    else {
      out.info('repaired the data folder', {
        path: options.dataDir,
        reason: report.reason,
        ...(report.keptEntries === undefined ? { state: 'the next start creates fresh state' } : { keptEntries: report.keptEntries }),
      });
    }
    return ExitCode.Ok;
  } catch (error) {
    if (error instanceof UsageError || error instanceof StartError) {
      err.error(error instanceof StartError ? error.describe((name) => (name === 'dataDir' ? '--data-dir' : name)) : error.message);
      return ExitCode.Usage;
    }
    err.error('api-auth state repair failed', errorFields(error));
    return ExitCode.Failed;
  }
}

function parseStateArgs(args: readonly string[]): { dataDir: string } | 'help' {
  let dataDir: string | undefined;
  let acceptLoss = false;
  const words: string[] = [];
  for (const arg of readArgs(
    args,
    { 'data-dir': 'string', 'accept-loss': 'boolean', help: 'boolean' },
    { command: 'api-auth state', stopAt: ['help'] },
  )) {
    if (arg.kind === 'positional') words.push(arg.value);
    else if (arg.name === 'help' && arg.value === true) return 'help';
    else if (arg.name === 'data-dir') {
      if (dataDir !== undefined) throw new UsageError('--data-dir is given twice; give it once');
      dataDir = nonEmpty('data-dir', String(arg.value));
    } else if (arg.name === 'accept-loss') acceptLoss = arg.value === true;
  }
  const action = words.join(' ');
  if (action !== 'state repair') {
    throw new UsageError(`unknown command "${action}"; did you mean "state repair"? (run api-auth state --help)`);
  }
  if (dataDir === undefined) throw new UsageError('state repair needs --data-dir, the data folder the node runs with');
  if (!acceptLoss) {
    throw new UsageError(
      'state repair sets aside what a start refused, and the tokens it cannot keep are lost to the inventory ' +
        '(for a state file, every token stops working); restore the data folder from a backup instead, or give --accept-loss to go on',
    );
  }
  return { dataDir: resolve(expandHome(dataDir)) };
}
