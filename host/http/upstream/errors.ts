// The ways an exchange with the upstream fails, each an UpstreamError of the error table
// (host/errors.ts: UPSTREAM_ERRORS, with its stable code and status) that forwarding.ts's
// classify() maps to a metric's kind and an answer (502 or 504). The system's own errors
// (ECONNREFUSED, ECONNRESET, EPIPE) pass through as they are.
import { UpstreamError } from '../../errors.js';

export { UpstreamError };

/** The upstream took longer than --upstream-timeout to connect, to start answering (also behind other answers), or between parts of an answer. */
export const timedOut = (timeoutMs: number): UpstreamError =>
  new UpstreamError(`the upstream node did not answer within ${timeoutMs / 1000} s`, 'timeout');

/** The connection ended before the answer was whole. */
export const closedEarly = (): UpstreamError =>
  new UpstreamError('the upstream node closed the connection before its answer was whole', 'closed');

/**
 * The upstream closed the connection after an earlier answer, with this request written
 * behind it: it may have been run (node:http runs what it has read), so it is not sent again.
 */
export const closedBehind = (): UpstreamError =>
  new UpstreamError(
    'the upstream node closed the connection after an earlier answer; the request may have been run, so it was not sent again',
    'closed',
  );

/** No connection to the upstream came free within --upstream-timeout (all of them busy, up to the limit). */
export const waitedOut = (timeoutMs: number): UpstreamError =>
  new UpstreamError(`no connection to the upstream node came free within ${timeoutMs / 1000} s`, 'timeout');

/** As many requests as the pool lets wait are waiting for a connection already. */
export const queueFull = (waiting: number): UpstreamError =>
  new UpstreamError(`${waiting} requests are waiting for a connection to the upstream node already`, 'timeout');

/** An answer the parser refuses (parser.ts says which rule it broke). */
export const badAnswer = (why: string): UpstreamError => new UpstreamError(why, 'bad-answer');

/** An answer that switches protocols (101), which nothing api-auth sends asks for. */
export const switched = (): UpstreamError => new UpstreamError('the upstream node switched protocols', 'switched');

/** The proxy is closing: requests still waiting for a connection, or under way, end with this. */
export const poolClosed = (): UpstreamError => new UpstreamError('the connections to the upstream node are closed', 'pool-closed');
