// JSON lines on stdout, one object per event, so that journald, Docker and log shippers
// can parse them without a custom format. Fields must never hold a password or a token.

import { systemClock } from '../clock.js';
import type { Clock } from '../clock.js';

export type Level = 'debug' | 'info' | 'warn' | 'error';

export const LEVELS: readonly Level[] = ['debug', 'info', 'warn', 'error'];

export type Fields = Record<string, unknown>;

/**
 * `time` is when the event happened (ms since the epoch), for a line written later than
 * that, by another thread; without it, the line is stamped when written.
 */
export interface Logger {
  debug(msg: string, fields?: Fields, time?: number): void;
  info(msg: string, fields?: Fields, time?: number): void;
  warn(msg: string, fields?: Fields, time?: number): void;
  error(msg: string, fields?: Fields, time?: number): void;
}

/**
 * A logger that hands each finished line (with its newline) to `write`, for events at
 * `level` and above, each with `clock`'s time; the methods below it do nothing.
 */
export function createLogger(
  write: (line: string) => void = (line) => process.stdout.write(line),
  level: Level = 'info',
  clock: Clock = systemClock,
): Logger {
  const threshold = LEVELS.indexOf(level);
  const emitter = (at: Level) =>
    LEVELS.indexOf(at) < threshold
      ? (): void => undefined
      : (msg: string, fields?: Fields, time?: number): void => {
          write(JSON.stringify({ time: new Date(time ?? clock()).toISOString(), level: at, msg, ...fields }) + '\n');
        };
  return { debug: emitter('debug'), info: emitter('info'), warn: emitter('warn'), error: emitter('error') };
}

/**
 * The fields that describe an error in a log line: its message and, for system errors,
 * the code (ENOSPC, EACCES). Callers only pass errors whose messages hold no secrets.
 */
export function errorFields(error: unknown): Fields {
  if (!(error instanceof Error)) return { error: String(error) };
  const code = (error as NodeJS.ErrnoException).code;
  return code === undefined ? { error: error.message } : { error: error.message, code };
}
