// How the options' values are written in messages and docs: durations, sizes, and a
// refused value (never with a URL's user and password).
import { NEVER, NEVER_SECONDS } from '../duration.js';

/** Seconds as the docs write them: in hours when whole hours, else in seconds (1s, 960s, 8760h). */
export function formatSeconds(seconds: number): string {
  if (seconds === NEVER_SECONDS) return NEVER;
  return seconds >= 3600 && seconds % 3600 === 0 ? `${seconds / 3600}h` : `${seconds}s`;
}

/** Bytes as the docs write them: in MiB or KiB when whole ones, else bytes. */
export function formatBytes(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)}MiB` : bytes % 1024 === 0 ? `${bytes / 1024}KiB` : `${bytes}`;
}

/**
 * A refused value, for its message: never a URL's user and password (--upstream
 * http://user:secret@..., an etcd URL), which the message would put in every log that
 * keeps the start's stderr. Everything from "://" to the last "@" of the text is left out.
 */
export function show(value: unknown): string {
  const text = value instanceof URL ? JSON.stringify(value.href) : (JSON.stringify(value) ?? String(value));
  return text.replace(/:\/\/[^\s]*@/g, '://…@');
}
