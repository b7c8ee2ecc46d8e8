// A thread of api-auth's own (an HTTP thread, the hashing thread) starts with the
// process's flags, from its command line and NODE_OPTIONS, but without its loaders and
// preloads (a TypeScript loader, an agent's --import). Those would start again on every
// thread, for modules that are api-auth's own: under a TypeScript loader, most of a
// second of CPU a thread. The other flags stay, since they may matter there
// (--dns-result-order for the upstream's name).
import { Worker } from 'node:worker_threads';
import type { WorkerOptions } from 'node:worker_threads';

// Flags that load code into every thread that inherits them; each takes its value as
// `--flag=value` or as the next argument.
const PRELOADS = ['--import', '--require', '-r', '--loader', '--experimental-loader'];

function withoutPreloads(flags: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < flags.length; i++) {
    const flag = flags[i];
    if (PRELOADS.includes(flag)) i++;
    else if (!PRELOADS.some((name) => flag.startsWith(`${name}=`))) kept.push(flag);
  }
  return kept;
}

/** NODE_OPTIONS split as Node splits it: at spaces, but not within "double quotes", where a backslash escapes. */
function splitNodeOptions(text: string): string[] {
  const flags: string[] = [];
  let quoted = false;
  let current: string | undefined;
  for (let i = 0; i < text.length; i++) {
    let c = text[i];
    if (c === '\\' && quoted) {
      c = text[++i] ?? '';
    } else if (c === ' ' && !quoted) {
      if (current !== undefined) flags.push(current);
      current = undefined;
      continue;
    } else if (c === '"') {
      quoted = !quoted;
      continue;
    }
    current = (current ?? '') + c;
  }
  if (current !== undefined) flags.push(current);
  return flags;
}

/** NODE_OPTIONS without the loaders and preloads, as Node reads them back (each flag quoted). */
function environment(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  if (env.NODE_OPTIONS !== undefined) {
    const kept = withoutPreloads(splitNodeOptions(env.NODE_OPTIONS));
    if (kept.length > 0) env.NODE_OPTIONS = kept.map((flag) => `"${flag.replace(/[\\"]/g, '\\$&')}"`).join(' ');
    else delete env.NODE_OPTIONS;
  }
  return env;
}

/** Starts `script` on a thread of api-auth's own. */
export function ownThread(script: URL, options: WorkerOptions = {}): Worker {
  const env = environment();
  // Node refuses, for a thread, a flag it takes for the process (V8's own, such as
  // --max-old-space-size, or the process's, such as --title), which holds for every
  // thread already: then the thread goes without the command line's flags, and failing
  // that, with the environment as it is (its loaders then run on the thread).
  const tries: Pick<WorkerOptions, 'execArgv' | 'env'>[] = [
    { execArgv: withoutPreloads(process.execArgv), env },
    { execArgv: [], env },
    { execArgv: [] },
  ];
  let refused: unknown;
  for (const flags of tries) {
    try {
      return new Worker(script, { ...options, ...flags });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw error;
      refused = error;
    }
  }
  throw refused;
}
