// What a refused request gets: the one table from a core Outcome to an HTTP status and
// the reason text the original node sent, and the writer of that response. The bodies
// are encoded once here so a refusal costs the hot path no string work. A token with a
// method scope that reaches a check which cannot see the request's calls (Outcome.Scoped
// here: /ext/auth/check) is refused with 403 insufficient_scope, a status the proxy in
// front can act on; the gate itself answers refused calls with their JSON-RPC errors (scope.ts).
import type { HttpResponse } from 'uWebSockets.js';
import { ADMIT_OVER_BURST, ADMIT_QUOTA, ADMIT_RATE, Outcome, OUTCOME_NAMES, PATH_RULES } from '../core/abi.js';
import type { AdmitRecord } from '../core/abi.js';
import { LimitRefusedError, RpcCode, ScopeRefusedError } from '../errors.js';
import { MAX_DEPTH } from '../rpc/reading.js';
import { errorWithId } from '../rpc/jsonrpc.js';
import type { Unreadable } from '../rpc/reading.js';
import { responseReason } from '../ops/metric-labels.js';
import type { ResponseReason } from '../ops/metric-labels.js';
import { writeCorsHeaders } from './cors.js';
import { refusedFor } from './counted-response.js';
import { endWith, tableStatus } from './responses.js';

/** The challenge of a refused scope (RFC 6750 §3.1). */
export const INSUFFICIENT_SCOPE = 'Bearer error="insufficient_scope"';

export type RefusedOutcome = Exclude<Outcome, Outcome.Valid>;

const UNAUTHORIZED = '401 Unauthorized';
const BAD_REQUEST = '400 Bad Request';
const FORBIDDEN = '403 Forbidden';

/** Status line and reason text of every refusal. */
export const REFUSALS: Readonly<Record<RefusedOutcome, readonly [status: string, reason: string]>> = {
  [Outcome.NoToken]: [UNAUTHORIZED, 'auth token not provided'],
  [Outcome.BadHeader]: [UNAUTHORIZED, 'couldn\'t parse auth token. Header "Authorization" should be "Bearer TOKEN.GOES.HERE"'],
  [Outcome.Malformed]: [UNAUTHORIZED, 'the provided auth token is invalid'],
  [Outcome.BadSignature]: [UNAUTHORIZED, 'the provided auth token is invalid: signature mismatch'],
  [Outcome.Expired]: [UNAUTHORIZED, 'the provided auth token is expired'],
  [Outcome.Revoked]: [UNAUTHORIZED, 'the provided auth token was revoked'],
  [Outcome.EarlierGeneration]: [UNAUTHORIZED, 'the provided auth token is invalid: issued under a previous password'],
  [Outcome.NotGranted]: [UNAUTHORIZED, 'the provided auth token does not allow access to this endpoint'],
  [Outcome.BadPath]: [BAD_REQUEST, `invalid request path: ${PATH_RULES}`],
  [Outcome.Scoped]: [
    FORBIDDEN,
    'the provided auth token allows only some JSON-RPC methods, and this check cannot see the ' +
      "request's calls (an auth subrequest carries no body): use a token without methods here, or put api-auth itself in front " +
      'of the node (--upstream)',
  ],
  // A token with limits from a client its allowedClients do not hold; the answer names
  // neither the list nor the address, so that it tells a stolen token's user nothing.
  [Outcome.Limited]: [FORBIDDEN, 'the provided auth token may not be used from this client'],
};

interface Encoded {
  readonly status: string;
  /** The body's text up to its id (`...,"id":`), for an answer that echoes a call's id. */
  readonly beforeId: string;
  /** Its reason in the metrics (api_auth_http_responses_total). */
  readonly reason: ResponseReason;
  /**
   * The WWW-Authenticate challenge, "" for none: a 401 invites the client to present a
   * token, a 403 says the token's scope is short (RFC 6750 §3.1); a bad path is not about tokens.
   */
  readonly challenge: string;
  readonly body: Uint8Array;
}

// Indexed by outcome number, so the hot path's lookup is an array load.
const ENCODED: Encoded[] = [];
for (const [outcome, [status, reason]] of Object.entries(REFUSALS)) {
  const scoped = Number(outcome) === Outcome.Scoped;
  // The original node answered id 1 whatever the request; clients match on this body.
  const code = scoped ? RpcCode.InsufficientScope : Number(outcome) === Outcome.Limited ? RpcCode.ClientNotAllowed : RpcCode.InvalidRequest;
  const body = `${errorWithId(code, reason, '1')}\n`;
  const challenge = status === UNAUTHORIZED ? 'Bearer' : scoped ? INSUFFICIENT_SCOPE : '';
  ENCODED[Number(outcome)] = {
    status,
    reason: responseReason(OUTCOME_NAMES[Number(outcome)]),
    challenge,
    body: new TextEncoder().encode(body),
    beforeId: body.slice(0, -'1}\n'.length),
  };
}

/** The body of the 503 a fenced gateway answers, with what the operator should look at. */
const FENCED_REASON =
  'this api-auth gateway has lost touch with its fleet (etcd) and cannot vouch that it holds every ' +
  'revocation; it serves again by itself once it has caught up; meanwhile use another gateway';

/**
 * Not an outcome of the core: the gate's answer while a fleet gateway's fence is closed
 * (threads/fence.ts). 503 with a JSON-RPC error that says why; the client may retry on
 * another gateway. The next number after the core's outcomes, so its tables skip it.
 */
export const UNAVAILABLE = OUTCOME_NAMES.length as RefusedOutcome;
const FENCED_BODY = `${errorWithId(RpcCode.Unavailable, FENCED_REASON, '1')}\n`;
ENCODED[UNAVAILABLE] = {
  status: '503 Service Unavailable',
  reason: responseReason('unavailable'),
  challenge: '',
  body: new TextEncoder().encode(FENCED_BODY),
  beforeId: FENCED_BODY.slice(0, -'1}\n'.length),
};

/**
 * Writes the refusal for an outcome; call it corked (directly in the handler, or inside
 * res.cork). `head`: the request was HEAD, so the body's length goes out without it.
 * `allowOrigin`: the CORS origin the answer is for (cors.ts), "" for none. `id`: the id of
 * the request's one call, to echo. `close`: the connection closes after it (the rest of
 * the body was not read).
 */
export function writeRefusal(
  res: HttpResponse,
  outcome: RefusedOutcome,
  head = false,
  allowOrigin = '',
  id: string | null = null,
  close = false,
): void {
  const refusal = ENCODED[outcome];
  refusedFor(res, refusal.reason);
  res.writeStatus(refusal.status).writeHeader('Content-Type', 'application/json');
  if (refusal.challenge !== '') res.writeHeader('WWW-Authenticate', refusal.challenge);
  if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
  // The request's one call's id, as its source text (rpc/reading.ts): the digits the client sent.
  // Without one (no body, a batch, a notification, a body that is not a call), the original node's id 1.
  const body = id === null || id === '1' ? refusal.body : new TextEncoder().encode(`${refusal.beforeId}${id}}\n`);
  if (close) res.end(body, true);
  else endWith(res, body, head);
}

/**
 * A request refused once its calls were known (admission.ts and body-admission.ts): by
 * its token's method scope, or by its limits. The one shape both refusals take, so that
 * HTTP writes its status and headers (writeCallRefusal), a WebSocket session sends its
 * text, and an embedder gets both (embed.ts), from one table.
 */
export interface CallRefusal {
  /** The HTTP status. */
  readonly status: number;
  /** The JSON-RPC error (an object, or an array of them for a batch), as JSON text without a line feed. */
  readonly text: string;
  /** Retry-After in whole seconds; 0 for none. */
  readonly retryAfter: number;
  /** Refused by the method scope (403 insufficient_scope on /ext/auth/check); otherwise by the limits. */
  readonly scope: boolean;
  /** What ended the exchange, for the proxy's settle (never an upstream failure). */
  readonly error: ScopeRefusedError | LimitRefusedError;
}

/**
 * Writes a CallRefusal; call it corked. `check`: it answers /ext/auth/check, whose proxy
 * acts on the status, so a scope's refusal is a 403 there, not the gate's 200. The body
 * was read whole (or there was none), so the connection stays usable.
 */
export function writeCallRefusal(res: HttpResponse, refusal: CallRefusal, head = false, allowOrigin = '', check = false): void {
  const status = check && refusal.scope ? 403 : refusal.status;
  refusedFor(res, callRefusalReason(refusal));
  res.writeStatus(tableStatus(status)).writeHeader('Content-Type', 'application/json');
  if (refusal.scope && status === 403) res.writeHeader('WWW-Authenticate', INSUFFICIENT_SCOPE);
  if (refusal.retryAfter > 0) res.writeHeader('Retry-After', String(refusal.retryAfter));
  if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
  endWith(res, new TextEncoder().encode(`${refusal.text}\n`), head);
}

/** The metrics' reason of a CallRefusal (rate, quota, method not allowed...). */
export function callRefusalReason(refusal: CallRefusal): ResponseReason {
  return CALL_REASONS.get(refusal.error.result)!;
}

/** The metrics' reason of a CallRefusal, by its error's result. */
const CALL_REASONS = new Map<string, ResponseReason>(
  ['rate', 'quota', 'table full', 'unreadable', 'method not allowed', 'not json-rpc'].map((result) => [result, responseReason(result)]),
);

/** The message of a call past its token's rate, with the whole seconds to wait. */
export function rateLimitedMessage(retryAfter: number): string {
  return `the provided auth token is past its rate limit; retry in ${retryAfter} s`;
}

/** The message of a call past its token's quota, with the time (RFC 3339) at which the quota's window resets. */
export function quotaSpentMessage(resetsAt: string): string {
  return `the provided auth token's quota for this period is spent; it resets at ${resetsAt}`;
}

/** The message of a batch of more calls than its token's burst: no wait lets it through. */
export function overBurstMessage(calls: number): string {
  return `the provided auth token's burst is smaller than these ${calls} calls at once; send fewer calls at a time`;
}

/** Retry-After for a wait in milliseconds: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/** The message of the 503 when the core's limits table has no slot for a token (assembly/limits.ts). */
export const LIMITS_FULL_REASON =
  'this api-auth gateway tracks as many tokens with limits as it can; retry later, or use a token ' + 'without limits';

/**
 * The refusal of `calls` calls (with `idJson`, the lone call's id, or null) that a token's
 * limits did not let through, with what `admit` filled in beside it (`admitted`): the one
 * table of the core's ADMIT_ refusals but the client's (writeRefusal's Outcome.Limited,
 * 403). Past the rate: 429 with Retry-After from the core's wait (`waitMs`), -32005
 * (EIP-1474's "limit exceeded"); more calls than the burst, which no wait lets through:
 * 429 without Retry-After; past the quota of its day or month: 429, -32005, with
 * Retry-After and `data.resetsAt` (RFC 3339) from the window's end (`resetMs`); no slot
 * to track the token: 503, Retry-After 1, -32046.
 */
export function limitRefusal(result: number, admitted: AdmitRecord, calls: number, idJson: string): CallRefusal {
  const { waitMs, resetMs } = admitted;
  if (result === ADMIT_QUOTA) {
    const wait = retryAfterSeconds(waitMs);
    const resetsAt = new Date(resetMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
    return {
      status: 429,
      text: errorWithId(RpcCode.RateLimited, quotaSpentMessage(resetsAt), idJson, { resetsAt }),
      retryAfter: wait,
      scope: false,
      error: QUOTA,
    };
  }
  if (result === ADMIT_RATE) {
    const wait = retryAfterSeconds(waitMs);
    return {
      status: 429,
      text: errorWithId(RpcCode.RateLimited, rateLimitedMessage(wait), idJson),
      retryAfter: wait,
      scope: false,
      error: RATE,
    };
  }
  if (result === ADMIT_OVER_BURST) {
    return {
      status: 429,
      text: errorWithId(RpcCode.RateLimited, overBurstMessage(calls), idJson),
      retryAfter: 0,
      scope: false,
      error: RATE,
    };
  }
  return {
    status: 503,
    text: errorWithId(RpcCode.Unavailable, LIMITS_FULL_REASON, idJson),
    retryAfter: 1,
    scope: false,
    error: TABLE_FULL,
  };
}

const RATE = new LimitRefusedError('rate');
const QUOTA = new LimitRefusedError('quota');
const TABLE_FULL = new LimitRefusedError('table full');

/** Why a body's calls could not be read (host/rpc/reading.ts), as a refusal says it; `at` is a batch element's place, -1 for the body. */
export function unreadableReason(problem: Unreadable | 'encoding' | 'unseen' | 'unjudged', at: number): string {
  const what = at < 0 ? 'the body' : `call ${at} of the batch`;
  switch (problem) {
    case 'none':
      return 'the request must carry a JSON-RPC call or batch in its body, and it has none';
    case 'utf8':
      return 'the body is not UTF-8';
    case 'bom':
      return 'the body starts with a byte order mark, which nodes read differently';
    case 'json':
      return 'the body is not one JSON value alone (nothing may follow it)';
    case 'depth':
      return `the body nests deeper than ${MAX_DEPTH}`;
    case 'empty batch':
      return 'the batch is empty';
    case 'not a call':
      return `${what} is not a JSON-RPC call (an object with a "method" string)`;
    case 'method twice':
      return `${what} names its method more than once (servers differ on which one counts)`;
    case 'encoding':
      return 'the body is compressed (Content-Encoding), which api-auth does not read';
    case 'unseen':
      return (
        "this check cannot see the request's calls (an auth subrequest carries no body): use a token without " +
        'limits here, or put api-auth itself in front of the node (--upstream)'
      );
    case 'unjudged':
      return (
        'protect() hands the body to the handler unread, so api-auth cannot judge its calls: the node reads ' +
        'the body, then asks auth.authorize(header, path, { client, body })'
      );
  }
}

/** The start of the refusal of a body that a token with a method scope cannot have its calls read from. */
export const SCOPED_PREFIX = 'the provided auth token allows only some JSON-RPC methods';
const LIMITED_PREFIX =
  'the provided auth token has limits, so its request must be one JSON-RPC call or a batch that api-auth ' + 'reads exactly';
const UNREADABLE_SCOPED = new ScopeRefusedError('not json-rpc');
const UNREADABLE_LIMITED = new LimitRefusedError('unreadable');

/**
 * The refusal of a body whose calls cannot be read, for a token that needs them read:
 * with a method scope, 403 insufficient_scope (-32047); with limits only, 400 (-32600).
 * `idJson`: the lone call's id when it could be read, else null.
 */
export function unreadableRefusal(
  problem: Unreadable | 'encoding' | 'unseen' | 'unjudged',
  at: number,
  idJson: string | null,
  scoped: boolean,
): CallRefusal {
  const reason = unreadableReason(problem, at);
  if (scoped) {
    return {
      status: 403,
      text: errorWithId(RpcCode.InsufficientScope, `${SCOPED_PREFIX}: ${reason}`, idJson ?? 'null'),
      retryAfter: 0,
      scope: true,
      error: UNREADABLE_SCOPED,
    };
  }
  return {
    status: 400,
    text: errorWithId(RpcCode.InvalidRequest, `${LIMITED_PREFIX}: ${reason}`, idJson ?? 'null'),
    retryAfter: 0,
    scope: false,
    error: UNREADABLE_LIMITED,
  };
}

/**
 * A gate's answer, for hosts that write responses their own way: `ok`, or the refusal to
 * send (status, headers and body exactly as the built-in gate sends them).
 */
export interface Verdict {
  readonly ok: boolean;
  readonly outcome: Outcome;
  /** 200 when ok; otherwise 401, 400 for a path that is refused whatever the token, 403 for a token with a method scope (its calls unseen). */
  readonly status: number;
  /** The refusal's reason text; empty when ok. */
  readonly reason: string;
  /** The refusal's headers: Content-Type, and WWW-Authenticate for a 401 or 403. Empty when ok. */
  readonly headers: Readonly<Record<string, string>>;
  /** The refusal's body (JSON and a line feed); empty when ok. */
  readonly body: string;
}

/** One frozen verdict per outcome, so that handing one out allocates nothing. */
export const VERDICTS: readonly Verdict[] = (() => {
  const verdicts: Verdict[] = [];
  verdicts[Outcome.Valid] = Object.freeze({
    ok: true,
    outcome: Outcome.Valid,
    status: 200,
    reason: '',
    headers: Object.freeze({}),
    body: '',
  });
  for (const [key, [status, reason]] of Object.entries(REFUSALS)) {
    const outcome = Number(key) as RefusedOutcome;
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (ENCODED[outcome].challenge !== '') headers['WWW-Authenticate'] = ENCODED[outcome].challenge;
    verdicts[outcome] = Object.freeze({
      ok: false,
      outcome,
      status: Number(status.slice(0, 3)),
      reason,
      headers: Object.freeze(headers),
      body: new TextDecoder().decode(ENCODED[outcome].body),
    });
  }
  return Object.freeze(verdicts);
})();

/** The verdict of a CallRefusal, for hosts that write responses their own way (embed.ts): `outcome` Limited or Scoped, by which refused. */
export function callRefusalVerdict(outcome: RefusedOutcome, refusal: CallRefusal): Verdict {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (refusal.scope && refusal.status === 403) headers['WWW-Authenticate'] = INSUFFICIENT_SCOPE;
  if (refusal.retryAfter > 0) headers['Retry-After'] = String(refusal.retryAfter);
  const parsed = JSON.parse(refusal.text) as { error: { message: string } } | { error: { message: string } }[];
  const reason = (Array.isArray(parsed) ? parsed[0] : parsed).error.message;
  return Object.freeze({ ok: false, outcome, status: refusal.status, reason, headers: Object.freeze(headers), body: `${refusal.text}\n` });
}
