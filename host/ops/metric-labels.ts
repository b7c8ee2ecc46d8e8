// The bounded label values of the service's metrics (metrics.ts): each a fixed list, so
// that nothing a client sends can grow the series, and the index helpers the request
// path counts by.
import { OUTCOME_NAMES } from '../core/abi.js';
import { METHOD_SETS } from '../method-sets.js';

/** Why a proxied request got no answer from the upstream. */
export const UPSTREAM_ERROR_KINDS = ['refused', 'reset', 'timeout', 'other'] as const;
export type UpstreamErrorKind = (typeof UPSTREAM_ERROR_KINDS)[number];

/** Why a WebSocket upgrade got an HTTP answer rather than a session. */
export const WS_REFUSALS = [
  'token',
  'path',
  'limit',
  'token limit',
  'client limit',
  'stopping',
  'request',
  'upstream status',
  'upstream unreachable',
  'upstream timeout',
] as const;
export type WsRefusal = (typeof WS_REFUSALS)[number];

/** What ended a WebSocket session. */
export const WS_CLOSES = ['client', 'upstream', 'token', 'idle', 'too big', 'backpressure', 'stopping'] as const;
export type WsClose = (typeof WS_CLOSES)[number];

/** Which way a WebSocket message went. */
export const WS_DIRECTIONS = ['to upstream', 'to client'] as const;
export const TO_UPSTREAM = 0;
export const TO_CLIENT = 1;

/** Where a token's method scope was checked: an HTTP request's body, or a WebSocket message. */
export const SCOPE_VIAS = ['http', 'websocket'] as const;
export type ScopeVia = (typeof SCOPE_VIAS)[number];

/**
 * What a method check found: every call allowed; a call whose method the token does not
 * allow; or a body that is not JSON-RPC (none, not JSON, no "method" string), refused as well.
 */
export const SCOPE_RESULTS = ['allowed', 'method not allowed', 'not json-rpc'] as const;
export type ScopeResult = (typeof SCOPE_RESULTS)[number];

/**
 * Why a token with limits was refused: past its rate, from a client it does not allow, no
 * slot in the core's limits table, or a body whose calls could not be read (and counted).
 */
export const LIMIT_REFUSALS = ['rate', 'client', 'table full', 'unreadable', 'quota'] as const;
export type LimitRefusal = (typeof LIMIT_REFUSALS)[number];

/**
 * Why api-auth refused a request it answered over HTTP (api_auth_http_responses_total's
 * `reason`): the gate's outcome for its token or path (`limited`: from a client the
 * token does not allow), a fleet gateway's closed fence, the token's limits or method
 * scope, or an upstream that gave no answer; `none` for every other answer, whatever its
 * status. A fixed list, so the label stays bounded.
 */
export const RESPONSE_REASONS = [
  'none',
  ...OUTCOME_NAMES.filter((name) => name !== 'valid'),
  'unavailable',
  'rate',
  'quota',
  'table full',
  'unreadable',
  'method not allowed',
  'not json-rpc',
  ...UPSTREAM_ERROR_KINDS.map((kind) => `upstream ${kind}`),
] as const;
/** An index into RESPONSE_REASONS. */
export type ResponseReason = number;
export const NOT_REFUSED: ResponseReason = 0;

/** The index of `name` in RESPONSE_REASONS; throws for a name not there, so that a writer cannot count under a label that is not listed. */
export function responseReason(name: string): ResponseReason {
  const at = (RESPONSE_REASONS as readonly string[]).indexOf(name);
  if (at < 0) throw new Error(`no response reason ${JSON.stringify(name)}`);
  return at;
}

/**
 * Namespaces of the node's JSON-RPC methods: the Ethereum ones (eth_call), on the C-Chain
 * and every EVM node, and Avalanche's (platform.getHeight). A method of one that is not
 * named in METHOD_SETS is counted under its namespace (`debug_*`, `platform.*`).
 */
const ETHEREUM_NAMESPACES = ['eth', 'net', 'web3', 'debug', 'txpool', 'trace', 'personal', 'admin', 'engine', 'rpc'];
const AVALANCHE_NAMESPACES = ['avax', 'avm', 'platform', 'info', 'health', 'index', 'admin', 'keystore', 'ipcs', 'auth'];

/**
 * The `method` label's values (api_auth_rpc_calls_total): the methods of the named sets
 * (method-sets.ts), the namespaces, and `other` for the rest, so that what a client sends
 * as a method name cannot grow the series.
 */
export const METHOD_LABELS: readonly string[] = [
  ...[...new Set(Object.values(METHOD_SETS).flat())].sort(),
  ...ETHEREUM_NAMESPACES.map((ns) => `${ns}_*`),
  ...AVALANCHE_NAMESPACES.map((ns) => `${ns}.*`),
  'other',
];
const METHOD_LABEL = new Map(METHOD_LABELS.map((label, i) => [label, i]));
const OTHER_METHOD = METHOD_LABELS.length - 1;

/** The index of `method`'s label in METHOD_LABELS: its own name, its namespace's, or `other`. */
export function methodLabel(method: string): number {
  const exact = METHOD_LABEL.get(method);
  if (exact !== undefined) return exact;
  const at = method.search(/[._]/);
  if (at <= 0) return OTHER_METHOD;
  return METHOD_LABEL.get(`${method.slice(0, at + 1)}*`) ?? OTHER_METHOD;
}
