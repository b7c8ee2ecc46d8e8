// The library entry: what a node needs to embed the token service (createAuth), to run
// the standalone service in-process (startServer), and to tell its errors and verdicts
// apart. The work sits in the modules named below; this file only re-exports.
export { createAuth } from './embed.js';
export type { Auth, Handler } from './embed.js';
export { startServer } from './server.js';
export type { ServerHandle, ServerServices } from './server.js';
export { DEFAULTS, LIMITS } from './options.js';
export { AUTH_PATH } from './own-endpoints.js';
export { parseDuration } from './duration.js';
export type { AuthOptions, ServerOptions } from './options.js';
export { parseArgs, USAGE } from './cli/flags.js';
export type { Command } from './cli/flags.js';
export {
  ApiAuthError,
  BodyTooLargeError,
  BusyError,
  ClientGoneError,
  CoreResult,
  ExitCode,
  FleetError,
  GRANT_ERRORS,
  GrantError,
  InvariantError,
  ISSUE_ERRORS,
  IssueError,
  ListenError,
  NodeRefusedError,
  NodeUnreachableError,
  OperatorExitCode,
  OptionError,
  RPC_ERRORS,
  RpcCode,
  RpcError,
  LIMIT_ERRORS,
  LimitRefusedError,
  SCOPE_ERRORS,
  ScopeRefusedError,
  StartError,
  StateError,
  ThreadError,
  UPSTREAM_ERRORS,
  UpstreamError,
  UsageError,
} from './errors.js';
export type { ErrorAnswer, GrantErrorCode, IssueErrorCode, Namer, UpstreamErrorCode } from './errors.js';
export { systemClock } from './clock.js';
export type { Clock } from './clock.js';
export { Outcome, OUTCOME_NAMES } from './core/abi.js';
export { REFUSALS, VERDICTS } from './http/refusals.js';
export type { RefusedOutcome, Verdict } from './http/refusals.js';
export { createLogger, LEVELS } from './ops/log.js';
export type { Fields, Level, Logger } from './ops/log.js';
export { Metrics } from './ops/metrics.js';
// The uWebSockets.js that createAuth's mount and protect are made for. Its package is a
// repack under another name (uws-pack), so an embedder's own `import ... from
// 'uWebSockets.js'` only resolves with the same alias in its package.json; taking App from
// here always gives the one api-auth was built and tested with.
export { App, SSLApp, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
