// The ways an exchange with the upstream fails, each with a stable code that proxy.ts's
// classify() maps to a metric's kind and an answer (502 or 504). The system's own errors
// (ECONNREFUSED, ECONNRESET, EPIPE) pass through as they are.

export class UpstreamError extends Error {
  constructor(message: string, readonly code: string) {
    super(message);
    this.name = 'UpstreamError';
  }
}

/** The upstream took longer than --upstream-timeout to connect, to start answering, or between parts of an answer. */
export const timedOut = (timeoutMs: number): UpstreamError =>
  new UpstreamError(`the upstream node did not answer within ${timeoutMs / 1000} s`, 'UPSTREAM_TIMEOUT');

/** The connection ended before the answer was whole. */
export const closedEarly = (): UpstreamError =>
  new UpstreamError('the upstream node closed the connection before its answer was whole', 'UPSTREAM_CLOSED');

/** An answer the parser refuses (parser.ts says which rule it broke). */
export const badAnswer = (why: string): UpstreamError => new UpstreamError(why, 'UPSTREAM_BAD_ANSWER');

/** An answer that switches protocols (101), which nothing api-auth sends asks for. */
export const switched = (): UpstreamError => new UpstreamError('the upstream node switched protocols', 'UPSTREAM_SWITCHED');

/** The proxy is closing: requests still waiting for a connection, or under way, end with this. */
export const poolClosed = (): UpstreamError => new UpstreamError('the connections to the upstream node are closed', 'UPSTREAM_POOL_CLOSED');
