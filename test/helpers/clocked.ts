// The CLI's server on a clock of the test's (test/helpers/clocked-server.js): it starts at
// `startMs` and moves `stepMs` (SNAPSHOT_MS by default) on each SIGUSR2, so a test reaches
// the owner's snapshot times, or a token's end, without waiting for them.
import type { Test } from 'tap';
import { join } from 'node:path';
import { launchProgram, PROGRAM_ENV, ROOT, untracked, type Running } from './server.js';

/** How far the clock moves on each SIGUSR2: the usage snapshots' interval. */
export const SNAPSHOT_MS = 30_000;
const CLOCKED = join(ROOT, 'test', 'helpers', 'clocked-server.js');

export interface Clocked extends Running {
  url: string;
}

/** The server with auth on over `dir` (its data/ and password) and `extra` flags, on the clock of clocked-server.js from `startMs`. */
export async function startClocked(
  t: Test,
  dir: string,
  startMs: number,
  stepMs = SNAPSHOT_MS,
  extra: readonly string[] = [],
): Promise<Clocked> {
  const args = [
    '--http-port',
    '0',
    '--data-dir',
    join(dir, 'data'),
    '--api-auth-required',
    '--api-auth-password-file',
    join(dir, 'password'),
    ...extra,
  ];
  const run = launchProgram(t, untracked(process.execPath, [CLOCKED, String(startMs), String(stepMs), ...args], PROGRAM_ENV.NODE_OPTIONS));
  const listening = await run.waitForLog((l) => l.msg === 'listening');
  return { ...run, url: `http://127.0.0.1:${Number(listening.port)}` };
}
