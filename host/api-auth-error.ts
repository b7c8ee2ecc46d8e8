// The base of api-auth's error classes, and the one error for a broken invariant, in a
// module that imports nothing: errors.ts, the table, re-exports them, and the core's
// portable loader (core/core.ts), which errors.ts imports, can throw them too.

/** The base of api-auth's errors: a stable `code` beside the message. */
export abstract class ApiAuthError extends Error {
  abstract readonly code: string;
}

/**
 * What cannot happen unless api-auth itself, or a program calling its library wrongly, is
 * at fault: a state change out of order, a call the object does not take in its state, a
 * build of the core that does not match the host. Never a client's or an operator's
 * mistake, which each have their own error; answered as an internal error (HTTP 500,
 * JSON-RPC -32603, its text only in the log), and a command that meets one exits 1.
 */
export class InvariantError extends ApiAuthError {
  readonly code = 'API_AUTH_INVARIANT';
  readonly httpStatus = 500;
  readonly exitCode = 1;
  override readonly name = 'InvariantError';
}
