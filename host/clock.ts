// The one clock. Every module that needs the time is handed one (startServer's and
// createAuth's `clock`), so that tests and embedders drive expiry, throttling, backoff
// and the upstream's deadlines with plain numbers, without waiting. Durations measured
// for the metrics read the monotonic timer below; nothing else under host/ reads either
// (test/unit/clock-reads.test.ts).

/** The time now, in milliseconds since the Unix epoch. */
export type Clock = () => number;

/** The system's clock: the one place api-auth reads the time of day. */
export const systemClock: Clock = () => Date.now();

/**
 * A monotonic timer in milliseconds, for how long something took (a check, an answer, a
 * barrier): never the time of day, and never stepped by the system's clock.
 */
export type Timer = () => number;

/** The system's monotonic timer: the one place api-auth reads it. */
export const systemTimer: Timer = () => performance.now();

/** `clock`'s time in whole Unix seconds, the core's and the tokens' unit. */
export function unixSeconds(clock: Clock): number {
  return Math.floor(clock() / 1000);
}
