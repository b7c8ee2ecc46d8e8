// The operator commands run in the test's own process, through the entry the binary calls
// (runOperatorCommand), with their stdout and stderr collected and stdin given as bytes.
import { Readable } from 'node:stream';
import { runOperatorCommand } from '../../build/host/cli/operator/index.js';

export interface OperatorRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `api-auth ...args` to its end: its exit code and what it printed. `env`: the API_AUTH_ variables it sees (none by default). */
export async function runOperator(
  args: readonly string[],
  stdin: string | Buffer = '',
  env: Record<string, string> = {},
): Promise<OperatorRun> {
  let stdout = '';
  let stderr = '';
  const code = await runOperatorCommand(args, {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    stdin: Readable.from(Buffer.from(stdin)) as unknown as NodeJS.ReadStream,
    env,
  });
  return { code, stdout, stderr };
}
