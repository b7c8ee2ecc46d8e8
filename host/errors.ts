// Every error of api-auth in one table: the JSON-RPC codes it answers with, the exit
// codes of its commands, the core's outcome and result codes, and the error classes the
// host throws. Each class carries a stable `code` beside its message, as undici's and
// fast-jwt's errors do: callers and tests match the code, and the prose may improve.
import { ApiAuthError } from './api-auth-error.js';
import type { GrantErrorCode, IssueErrorCode } from './core/core.js';

/** JSON-RPC 2.0 error codes: the standard ones, the token service's (-32000 down), the proxy's. */
export const RpcCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** auth.*: the password is not the service password. */
  IncorrectPassword: -32000,
  /** auth.newToken: too many live tokens, or too many distinct endpoint lists. */
  ResourceLimit: -32001,
  /** auth.*: the client failed too many password checks of late (HTTP 429, Retry-After). */
  Throttled: -32002,
  /** auth.*: too many password checks are waiting (HTTP 503, Retry-After). */
  Busy: -32003,
  /** A proxied request the upstream refused, reset, or could not be reached for (HTTP 502). */
  UpstreamUnavailable: -32004,
  /** A proxied request the upstream did not answer within --upstream-timeout (HTTP 504). */
  UpstreamTimeout: -32005,
  /** A WebSocket upgrade api-auth cannot take now: --ws-max-sessions are open, or it is stopping (HTTP 503, Retry-After). */
  Unavailable: -32006,
  /** A call the token's method scope does not allow, or a body it cannot check (HTTP 403, insufficient_scope; a WebSocket message's error). */
  InsufficientScope: -32007,
  /** A request past its token's rate (HTTP 429, Retry-After; a WebSocket message's error): EIP-1474's "limit exceeded". */
  RateLimited: -32005,
  /** A token used from a client its allowedClients do not hold (HTTP 403). */
  ClientNotAllowed: -32040,
} as const;

export type RpcCode = (typeof RpcCode)[keyof typeof RpcCode];

/** The message of -32002, with the whole seconds to wait. */
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
export { GrantError, IssueError } from './core/core.js';
export type { GrantErrorCode, IssueErrorCode } from './core/core.js';

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
  'empty': { code: 'API_AUTH_GRANT_EMPTY', rpcCode: RpcCode.InvalidParams, httpStatus: 200 },
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

/** The token the core could not issue (IssueError's codes): every one answers -32001, resource limit. */
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
 * (the proxy's 502 and 504, a scope's 403, an upgrade's 503). A method's error that
 * refuses for good travels in a 200, as the node's own do (RpcError.httpStatus).
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
  [RpcCode.InsufficientScope]: { code: 'API_AUTH_INSUFFICIENT_SCOPE', rpcCode: RpcCode.InsufficientScope, httpStatus: 403 },
  [RpcCode.ClientNotAllowed]: { code: 'API_AUTH_CLIENT_NOT_ALLOWED', rpcCode: RpcCode.ClientNotAllowed, httpStatus: 403 },
};

/**
 * A JSON-RPC error the client should see as is (rpc/jsonrpc.ts answers it; any other
 * exception becomes -32603 "internal error"). One with `retryAfter` (seconds) refuses
 * the call for now rather than for good, and is answered with RPC_ERRORS' status.
 */
export class RpcError extends ApiAuthError implements ErrorAnswer {
  readonly code: string;
  readonly httpStatus: number;
  override readonly name = 'RpcError';

  constructor(readonly rpcCode: RpcCode, message: string, readonly retryAfter?: number) {
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

  constructor(readonly rpcCode: number, message: string) {
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
  constructor(readonly option: string, text: Text) {
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

  constructor(text: string | Text) {
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
