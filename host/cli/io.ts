// Where a command of the CLI (the operator's, the fleet's) writes and reads: the process's
// own streams by default, others in tests.
import type { Environment } from './sources.js';

/** Where a command writes; the defaults are the process's own. */
export interface CommandIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly stdin: NodeJS.ReadStream;
  /** The environment whose API_AUTH_ variables give the node's settings (default: the process's). */
  readonly env?: Environment;
}

/** The process's stdout, stderr and stdin. */
export function processIo(): CommandIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    stdin: process.stdin,
  };
}
