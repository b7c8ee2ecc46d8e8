// Every error of api-auth in one table: the JSON-RPC codes it answers with, the exit
// codes of its commands, the core's outcome and result codes, and the error classes the
// host throws. Each class carries a stable `code` beside its message, as undici's and
// fast-jwt's errors do: callers and tests match the code, and the prose may improve.
import { ApiAuthError } from './api-auth-error.js';
import type { GrantErrorCode, IssueErrorCode } from './core/abi.js';

/**
 * JSON-RPC 2.0 error codes: the standard ones, the original node's -32000, and the
 * gateway's own, -32041 to -32048. EIP-1474, which Ethereum libraries read, gives
 * -32000 to -32006 meanings of its own (-32001 resource not found, -32002 resource
 * unavailable, -32003 transaction rejected, -32004 method not supported, -32005 limit
 * exceeded, -32006 JSON-RPC version not supported): viem, for one, reports -32004 as
 * MethodNotSupportedRpcError and retries -32005. So no code of the gateway's sits there
 * but -32000, the original node's "incorrect password" (EIP-1474's "invalid input"), kept
 * as the avalanche SDK reads it; and -32005, "limit exceeded", is the password throttle's
 * and a token's rate limit's, where that meaning is true. The gateway's codes moved from
 * -3200N to -3204N in 0.2, the throttle's to -32005 (docs/reference/errors.md, "What
 * moved"; CHANGELOG.md).
 *
 * | code   | HTTP | stable code                   | when |
 * |--------|------|-------------------------------|------|
 * | -32700 | 200  | API_AUTH_RPC_PARSE_ERROR      | /ext/auth: the body is not UTF-8 JSON |
 * | -32600 | 200  | API_AUTH_RPC_INVALID_REQUEST  | /ext/auth: not a JSON-RPC 2.0 request (the gate's own 400, 401 and 413 carry it too) |
 * | -32600 | 400  | API_AUTH_LIMITS_UNREADABLE    | a token with limits whose body cannot be read exactly (rpc/reading.ts) |
 * | -32601 | 200  | API_AUTH_RPC_METHOD_NOT_FOUND | /ext/auth: no such method |
 * | -32602 | 200  | API_AUTH_RPC_INVALID_PARAMS   | /ext/auth: a param missing, unknown or bad |
 * | -32603 | 200  | API_AUTH_RPC_INTERNAL_ERROR   | anything unforeseen (500 where HTTP answers it) |
 * | -32000 | 200  | API_AUTH_INCORRECT_PASSWORD   | auth.*: the password is not the service password |
 * | -32005 | 429  | API_AUTH_THROTTLED            | auth.*: too many failed password checks of late (Retry-After) |
 * | -32005 | 429  | API_AUTH_RATE_LIMITED         | a request past its token's rateLimit (Retry-After); a WebSocket message's error |
 * | -32005 | 429  | API_AUTH_QUOTA_SPENT          | a request past its token's quota for the day or month (Retry-After, data.resetsAt) |
 * | -32041 | 200  | API_AUTH_RESOURCE_LIMIT       | auth.newToken: too many live tokens, or distinct grants |
 * | -32043 | 503  | API_AUTH_BUSY                 | auth.*: too many password checks waiting (Retry-After) |
 * | -32044 | 502  | API_AUTH_UPSTREAM_UNAVAILABLE | --upstream refused, reset, or could not be reached |
 * | -32045 | 504  | API_AUTH_UPSTREAM_TIMEOUT     | --upstream did not answer within --upstream-timeout |
 * | -32046 | 503  | API_AUTH_UNAVAILABLE          | no WebSocket session now, a fenced fleet gateway, no limits slot (503); a fleet change etcd did not confirm (200) |
 * | -32047 | 200  | API_AUTH_INSUFFICIENT_SCOPE   | a call the token's methods do not allow (403 for a body that is not JSON-RPC, and on /ext/auth/check) |
 * | -32048 | 403  | API_AUTH_CLIENT_NOT_ALLOWED   | a token used from a client its allowedClients do not hold |
 */
export const RpcCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** auth.*: the password is not the service password (the original node's code). */
  IncorrectPassword: -32000,
  /** auth.newToken: too many live tokens, or too many distinct endpoint lists. */
  ResourceLimit: -32041,
  /** auth.*: the client failed too many password checks of late (HTTP 429, Retry-After). */
  Throttled: -32005,
  /** auth.*: too many password checks are waiting (HTTP 503, Retry-After). */
  Busy: -32043,
  /** A proxied request the upstream refused, reset, or could not be reached for (HTTP 502). */
  UpstreamUnavailable: -32044,
  /** A proxied request the upstream did not answer within --upstream-timeout (HTTP 504). */
  UpstreamTimeout: -32045,
  /**
   * A WebSocket upgrade api-auth cannot take now (--ws-max-sessions are open, or it is
   * stopping), or a fleet gateway that has lost touch with etcd (HTTP 503, Retry-After);
   * a state change the fleet could not confirm (HTTP 200, FleetError).
   */
  Unavailable: -32046,
  /**
   * A call the token's method scope does not allow: HTTP 200 with the call's id, as
   * Ethereum clients expect a method's error; HTTP 403 insufficient_scope for a body
   * that is not JSON-RPC, and on /ext/auth/check, which cannot see the calls.
   */
  InsufficientScope: -32047,
  /** A request past its token's rate (HTTP 429, Retry-After; a WebSocket message's error): EIP-1474's "limit exceeded". */
  RateLimited: -32005,
  /** A token used from a client its allowedClients do not hold (HTTP 403). */
  ClientNotAllowed: -32048,
} as const;

export type RpcCode = (typeof RpcCode)[keyof typeof RpcCode];

/** The message of RpcCode.Throttled, with the whole seconds to wait. */
export function throttledMessage(retryAfter: number): string {
  return `too many failed password attempts; retry in ${retryAfter} s`;
}

/** Exit codes of `api-auth [flags]`, the server. */
export const ExitCode = {
  /** After --help, --version, or a clean stop (SIGTERM, SIGINT). */
  Ok: 0,
  /** Anything unforeseen; one log line says what. */
  Failed: 1,
  /** It could not start: a bad command line or password file, a data folder or an address it cannot use. */
  Usage: 2,
} as const;

/** Exit codes of the operator commands, `api-auth token ...` and `api-auth password ...`. */
export const OperatorExitCode = {
  Ok: 0,
  /** The node answered with a JSON-RPC error: incorrect password, throttled, invalid params. */
  Refused: 1,
  /** Anything unforeseen (never "unreachable"); one line says what. */
  Failed: 1,
  /** A bad command line, or a secret that cannot be read. */
  Usage: 2,
  /** The node could not be reached, or did not answer like an api-auth node. */
  Unreachable: 3,
} as const;

// The core's codes are defined once, in the core's own sources, which the host compiles
// too: Outcome (assembly/outcome.ts), the result codes of its calls (assembly/results.ts),
// and the errors the Core class raises from them, with codes of their own.
export { Outcome } from '../assembly/outcome.js';
export * as CoreResult from '../assembly/results.js';
export { GrantError, IssueError } from './core/abi.js';
export type { GrantErrorCode, IssueErrorCode } from './core/abi.js';

/**
 * How a client is answered for an error: its stable code, the JSON-RPC code of the
 * answer, and the answer's HTTP status. A JSON-RPC error travels in a 200 answer, as the
 * node's own do; only a refusal for now (throttled, busy) changes the status.
 */
export interface ErrorAnswer {
  readonly code: string;
  readonly rpcCode: RpcCode;
  readonly httpStatus: number;
}

/** The grant the core refused (GrantError's codes): the client's list, except when the table itself is full. */
export const GRANT_ERRORS: Readonly<Record<GrantErrorCode, ErrorAnswer>> = {
  empty: { code: 'API_AUTH_GRANT_EMPTY', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'too-many-entries': { code: 'API_AUTH_GRANT_TOO_MANY_ENTRIES', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'table-full': { code: 'API_AUTH_GRANT_TABLE_FULL', rpcCode: RpcCode.ResourceLimit, httpStatus: 200 },
  'bad-entry': { code: 'API_AUTH_GRANT_BAD_ENTRY', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'entry-too-long': { code: 'API_AUTH_GRANT_ENTRY_TOO_LONG', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'bad-method': { code: 'API_AUTH_GRANT_BAD_METHOD', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'method-too-long': { code: 'API_AUTH_GRANT_METHOD_TOO_LONG', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'too-many-methods': { code: 'API_AUTH_GRANT_TOO_MANY_METHODS', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'no-methods': { code: 'API_AUTH_GRANT_NO_METHODS', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'bad-limit': { code: 'API_AUTH_GRANT_BAD_LIMIT', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  'too-many-clients': { code: 'API_AUTH_GRANT_TOO_MANY_CLIENTS', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
};

/** The token the core could not issue (IssueError's codes): every one answers RpcCode.ResourceLimit. */
export const ISSUE_ERRORS: Readonly<Record<IssueErrorCode, ErrorAnswer>> = {
  'unknown-grant': { code: 'API_AUTH_ISSUE_UNKNOWN_GRANT', rpcCode: RpcCode.ResourceLimit, httpStatus: 200 },
  'window-full': { code: 'API_AUTH_ISSUE_WINDOW_FULL', rpcCode: RpcCode.ResourceLimit, httpStatus: 200 },
  'bad-time': { code: 'API_AUTH_ISSUE_BAD_TIME', rpcCode: RpcCode.ResourceLimit, httpStatus: 200 },
  'no-key': { code: 'API_AUTH_ISSUE_NO_KEY', rpcCode: RpcCode.ResourceLimit, httpStatus: 200 },
  'bad-serial': { code: 'API_AUTH_ISSUE_BAD_SERIAL', rpcCode: RpcCode.ResourceLimit, httpStatus: 200 },
};

/**
 * Each JSON-RPC code's stable code, and the HTTP status of its answer when that is not
 * 200: a refusal for now (429, 503, with Retry-After), or one the HTTP side writes itself
 * (the proxy's 502 and 504, an upgrade's 503). A method's error that refuses for good
 * travels in a 200, as the node's own do (RpcError.httpStatus), and so does a call a
 * token's method scope refuses (SCOPE_ERRORS has the 403 of a body that is not JSON-RPC).
 */
export const RPC_ERRORS: Readonly<Record<RpcCode, ErrorAnswer>> = {
  [RpcCode.ParseError]: { code: 'API_AUTH_RPC_PARSE_ERROR', rpcCode: RpcCode.ParseError, httpStatus: 200 },
  [RpcCode.InvalidRequest]: { code: 'API_AUTH_RPC_INVALID_REQUEST', rpcCode: RpcCode.InvalidRequest, httpStatus: 200 },
  [RpcCode.MethodNotFound]: { code: 'API_AUTH_RPC_METHOD_NOT_FOUND', rpcCode: RpcCode.MethodNotFound, httpStatus: 200 },
  [RpcCode.InvalidParams]: { code: 'API_AUTH_RPC_INVALID_PARAMS', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
  [RpcCode.InternalError]: { code: 'API_AUTH_RPC_INTERNAL_ERROR', rpcCode: RpcCode.InternalError, httpStatus: 200 },
  [RpcCode.IncorrectPassword]: { code: 'API_AUTH_INCORRECT_PASSWORD', rpcCode: RpcCode.IncorrectPassword, httpStatus: 200 },
  [RpcCode.ResourceLimit]: { code: 'API_AUTH_RESOURCE_LIMIT', rpcCode: RpcCode.ResourceLimit, httpStatus: 200 },
  [RpcCode.Throttled]: { code: 'API_AUTH_THROTTLED', rpcCode: RpcCode.Throttled, httpStatus: 429 },
  [RpcCode.Busy]: { code: 'API_AUTH_BUSY', rpcCode: RpcCode.Busy, httpStatus: 503 },
  [RpcCode.UpstreamUnavailable]: { code: 'API_AUTH_UPSTREAM_UNAVAILABLE', rpcCode: RpcCode.UpstreamUnavailable, httpStatus: 502 },
  [RpcCode.UpstreamTimeout]: { code: 'API_AUTH_UPSTREAM_TIMEOUT', rpcCode: RpcCode.UpstreamTimeout, httpStatus: 504 },
  [RpcCode.Unavailable]: { code: 'API_AUTH_UNAVAILABLE', rpcCode: RpcCode.Unavailable, httpStatus: 503 },
  [RpcCode.InsufficientScope]: { code: 'API_AUTH_INSUFFICIENT_SCOPE', rpcCode: RpcCode.InsufficientScope, httpStatus: 200 },
  [RpcCode.ClientNotAllowed]: { code: 'API_AUTH_CLIENT_NOT_ALLOWED', rpcCode: RpcCode.ClientNotAllowed, httpStatus: 403 },
};

/**
 * Why an exchange with the upstream failed (http/upstream/errors.ts makes them), each
 * answered as the client sees it: 504 when it took too long, 502 otherwise.
 */
export const UPSTREAM_ERRORS = {
  timeout: { code: 'API_AUTH_UPSTREAM_TIMEOUT', rpcCode: RpcCode.UpstreamTimeout, httpStatus: 504 },
  closed: { code: 'API_AUTH_UPSTREAM_CLOSED', rpcCode: RpcCode.UpstreamUnavailable, httpStatus: 502 },
  'bad-answer': { code: 'API_AUTH_UPSTREAM_BAD_ANSWER', rpcCode: RpcCode.UpstreamUnavailable, httpStatus: 502 },
  switched: { code: 'API_AUTH_UPSTREAM_SWITCHED', rpcCode: RpcCode.UpstreamUnavailable, httpStatus: 502 },
  'pool-closed': { code: 'API_AUTH_UPSTREAM_POOL_CLOSED', rpcCode: RpcCode.UpstreamUnavailable, httpStatus: 502 },
} as const satisfies Readonly<Record<string, ErrorAnswer>>;

export type UpstreamErrorCode = keyof typeof UPSTREAM_ERRORS;

/** An exchange with the upstream failed in a way of api-auth's own parser or pool (the system's errors, ECONNRESET..., pass as they are). */
export class UpstreamError extends ApiAuthError implements ErrorAnswer {
  readonly code: string;
  readonly rpcCode: RpcCode;
  readonly httpStatus: number;
  override readonly name = 'UpstreamError';

  constructor(
    message: string,
    readonly kind: UpstreamErrorCode,
  ) {
    super(message);
    ({ code: this.code, rpcCode: this.rpcCode, httpStatus: this.httpStatus } = UPSTREAM_ERRORS[kind]);
  }
}

/** Why a token's limits refused a request once its body was read (a batch counts its calls). */
export const LIMIT_ERRORS = {
  rate: { code: 'API_AUTH_RATE_LIMITED', rpcCode: RpcCode.RateLimited, httpStatus: 429 },
  quota: { code: 'API_AUTH_QUOTA_SPENT', rpcCode: RpcCode.RateLimited, httpStatus: 429 },
  'table full': { code: 'API_AUTH_LIMITS_FULL', rpcCode: RpcCode.Unavailable, httpStatus: 503 },
  unreadable: { code: 'API_AUTH_LIMITS_UNREADABLE', rpcCode: RpcCode.InvalidRequest, httpStatus: 400 },
} as const satisfies Readonly<Record<string, ErrorAnswer>>;

/** A request its token's limits refused: past the rate, or no room to track the token. */
export class LimitRefusedError extends ApiAuthError implements ErrorAnswer {
  readonly code: string;
  readonly rpcCode: RpcCode;
  readonly httpStatus: number;
  override readonly name = 'LimitRefusedError';

  constructor(readonly result: keyof typeof LIMIT_ERRORS) {
    super(
      result === 'rate'
        ? "the token's rate refused the request"
        : result === 'quota'
          ? "the token's quota for this day or month is spent"
          : result === 'table full'
            ? "no room to track the token's limits"
            : "the token's limits need the request's calls, and its body could not be read",
    );
    ({ code: this.code, rpcCode: this.rpcCode, httpStatus: this.httpStatus } = LIMIT_ERRORS[result]);
  }
}

/** The client went away before its answer was written: nothing is answered, and the upstream's health is not at fault. */
export class ClientGoneError extends ApiAuthError {
  readonly code = 'API_AUTH_CLIENT_GONE';
  /** No answer: there is nobody to write it to. */
  readonly httpStatus = null;
  override readonly name = 'ClientGoneError';

  constructor() {
    super('the client went away');
  }
}

/** A request body over the limit (--upstream-max-body, or 64 KiB on api-auth's own endpoints): 413, -32600. */
export class BodyTooLargeError extends ApiAuthError implements ErrorAnswer {
  readonly code = 'API_AUTH_BODY_TOO_LARGE';
  readonly rpcCode = RpcCode.InvalidRequest;
  readonly httpStatus = 413;
  override readonly name = 'BodyTooLargeError';

  constructor() {
    super('the request body is over the limit');
  }
}

/**
 * How a token's method scope refused a request body (http/scope.ts), by what the check
 * found: calls it does not allow are JSON-RPC errors of a well-formed request, which
 * Ethereum clients read only from a 200; a body that is not JSON-RPC has no call to
 * answer, and gets 403 insufficient_scope.
 */
export const SCOPE_ERRORS = {
  'method not allowed': { code: 'API_AUTH_INSUFFICIENT_SCOPE', rpcCode: RpcCode.InsufficientScope, httpStatus: 200 },
  'not json-rpc': { code: 'API_AUTH_SCOPE_UNREADABLE', rpcCode: RpcCode.InsufficientScope, httpStatus: 403 },
} as const satisfies Readonly<Record<string, ErrorAnswer>>;

/** A token's method scope refused the request: its body was not forwarded, or only its allowed calls were. */
export class ScopeRefusedError extends ApiAuthError implements ErrorAnswer {
  readonly code: string;
  readonly rpcCode = RpcCode.InsufficientScope;
  readonly httpStatus: number;
  override readonly name = 'ScopeRefusedError';

  constructor(readonly result: keyof typeof SCOPE_ERRORS) {
    super("the token's method scope refused the request");
    ({ code: this.code, httpStatus: this.httpStatus } = SCOPE_ERRORS[result]);
  }
}

/**
 * A JSON-RPC error the client should see as is (rpc/jsonrpc.ts answers it; any other
 * exception becomes -32603 "internal error"). One with `retryAfter` (seconds) refuses
 * the call for now rather than for good, and is answered with RPC_ERRORS' status.
 */
export class RpcError extends ApiAuthError implements ErrorAnswer {
  readonly code: string;
  readonly httpStatus: number;
  override readonly name = 'RpcError';

  constructor(
    readonly rpcCode: RpcCode,
    message: string,
    readonly retryAfter?: number,
  ) {
    super(message);
    this.code = RPC_ERRORS[rpcCode].code;
    this.httpStatus = retryAfter === undefined ? 200 : RPC_ERRORS[rpcCode].httpStatus;
  }
}

/** The node answered an operator command with a JSON-RPC error (`rpcCode`): incorrect password, throttled, invalid params. */
export class NodeRefusedError extends ApiAuthError {
  readonly code = 'API_AUTH_NODE_REFUSED';
  override readonly name = 'NodeRefusedError';
  readonly exitCode = OperatorExitCode.Refused;

  constructor(
    readonly rpcCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** An operator command found no node at --uri, or not the answer of an api-auth node. */
export class NodeUnreachableError extends ApiAuthError {
  readonly code = 'API_AUTH_NODE_UNREACHABLE';
  override readonly name = 'NodeUnreachableError';
  readonly exitCode = OperatorExitCode.Unreachable;
}

/**
 * How messages name an option: the library by its name in the options object
 * (`passwordFile`), the command line by its flag (`--api-auth-password-file`).
 */
export type Namer = (option: string) => string;

/** Names options as the library does. */
export const optionName: Namer = (option) => option;

/** A message that names options, written once for every way of naming them. */
export type Text = (name: Namer) => string;

// The base class, and the broken invariant, live in a module that imports nothing, so
// that the core's loader, which this table imports, can throw them too.
export { ApiAuthError, InvariantError } from './api-auth-error.js';

/**
 * What stops api-auth before it serves: options, the password file, the data folder,
 * the address. The message names options as the library does; `describe` names them
 * another way (the command line shows its flags), and the command exits with `exitCode`.
 */
export abstract class StartError extends ApiAuthError {
  readonly exitCode = ExitCode.Usage;

  /** `text` writes the message for a way of naming options. */
  constructor(readonly text: Text) {
    super(text(optionName));
  }

  /** The message, naming options with `name`. */
  describe(name: Namer): string {
    return this.text(name);
  }
}

/** An option that is missing or has a bad value, or a password file that cannot be used. */
export class OptionError extends StartError {
  readonly code = 'API_AUTH_BAD_OPTION';
  override readonly name = 'OptionError';

  /** `option`: the option at fault, by its library name. */
  constructor(
    readonly option: string,
    text: Text,
  ) {
    super(text);
  }
}

/** `${name of option}${problem}`: the usual shape of an OptionError's message. */
export function badOption(option: string, problem: string): OptionError {
  return new OptionError(option, (name) => `${name(option)}${problem}`);
}

/** The data folder cannot be used: not a folder, open to others, locked by another api-auth, its state damaged. */
export class StateError extends StartError {
  readonly code = 'API_AUTH_BAD_STATE';
  override readonly name = 'StateError';

  /** `damage`: the file is there but damaged (not unreadable, nor of a newer format), which `api-auth state repair` sets aside. */
  constructor(
    text: string | Text,
    readonly damage = false,
  ) {
    super(typeof text === 'string' ? () => text : text);
  }
}

/** The address or port cannot be listened on. */
export class ListenError extends StartError {
  readonly code = 'API_AUTH_CANNOT_LISTEN';
  override readonly name = 'ListenError';
}

/** A bad command line: a flag the command does not take, an argument it does not expect, a flag's syntax. */
export class UsageError extends ApiAuthError {
  readonly code = 'API_AUTH_BAD_COMMAND_LINE';
  override readonly name = 'UsageError';
  readonly exitCode = ExitCode.Usage;
}

/**
 * An HTTP thread failed, stopped responding or ended unasked; the server has stopped
 * in order because of it (threads/acceptor.ts), and the process should exit 1.
 */
export class ThreadError extends ApiAuthError {
  readonly code = 'API_AUTH_THREAD_FAILED';
  override readonly name = 'ThreadError';
  readonly exitCode = ExitCode.Failed;
}

/** More password checks wait than the bound allows; retry shortly. */
export class BusyError extends ApiAuthError {
  readonly code = 'API_AUTH_BUSY';
  override readonly name = 'BusyError';

  constructor() {
    super('too many password checks are waiting');
  }
}

/**
 * A state change the fleet could not make (etcd did not answer, or this gateway does not
 * serve): the message is for the client; etcd's own error is the cause (the log has it,
 * and a start that fails explains it: cluster/refusals.ts).
 */
export class FleetError extends ApiAuthError implements ErrorAnswer {
  readonly code = 'API_AUTH_FLEET_UNAVAILABLE';
  readonly rpcCode = RpcCode.Unavailable;
  readonly httpStatus = 200;
  override readonly name = 'FleetError';
}
