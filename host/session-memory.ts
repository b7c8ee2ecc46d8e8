// What one WebSocket session may hold in memory, at most, by the bounds that hold each of
// its buffers; --ws-memory-budget bounds the sessions by it, so that every session at
// its worst fits the process's budget (an attack of the hardening round: ten sessions each
// announcing a 32 MiB - 1 frame and stopping 1 byte short took 321 MiB, and nothing bounded the sum).
//
// With M = --ws-max-message, a session holds at most:
//
// - from the client: M in uWS, a message gathered across reads (maxPayloadLength is M; a
//   longer frame or message is cut, with no close frame);
// - for the upstream: 2M, one message in its socket's buffer and one in the queue (a
//   client message that would make it more ends the session with 1013);
// - from the upstream: 2M in the frame reader (frames.ts), the message being joined and
//   the frame being gathered into it;
// - for the client: M + 1.25 MiB in uWS (maxBackpressure, below): the upstream stops
//   being read at CLIENT_HIGH_WATER, and what was read before that is at most a message
//   and a read's worth;
// - 0.75 MiB for the rest: frame headers, TLS records, the session's own objects.
//
// That is 6M + 2 MiB: 98 MiB at the default 16 MiB, 8 MiB at 1 MiB.

/** Bytes waiting for a client past which the upstream is no longer read, and below which it is again. */
export const CLIENT_HIGH_WATER = 256 * 1024;
export const CLIENT_LOW_WATER = 64 * 1024;
const MIB = 1024 * 1024;
/** Room above the high water for what was read before the upstream stopped: a read's worth, and more. */
const READ_SLACK = MIB;

/** uWS's bound on the bytes waiting for a client: past it, the session is closed. */
export function clientBackpressure(maxMessage: number): number {
  return CLIENT_HIGH_WATER + maxMessage + READ_SLACK;
}

/** The most one session may hold, in bytes, with messages of at most `maxMessage` bytes: 6 × maxMessage + 2 MiB. */
export function sessionBytes(maxMessage: number): number {
  return 6 * maxMessage + 2 * MIB;
}
