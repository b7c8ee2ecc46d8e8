// The one clock. Every module that needs the time is handed one (startServer's and
// createAuth's `clock`), so that tests and embedders drive expiry, throttling and
// backoff with plain numbers, without waiting.

/** The time now, in milliseconds since the Unix epoch. */
export type Clock = () => number;

/** The system's clock: the one place api-auth reads the time of day. */
export const systemClock: Clock = () => Date.now();

/** `clock`'s time in whole Unix seconds, the core's and the tokens' unit. */
export function unixSeconds(clock: Clock): number {
  return Math.floor(clock() / 1000);
}
