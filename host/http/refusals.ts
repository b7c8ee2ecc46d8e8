// What a refused request gets: the one table from a core Outcome to an HTTP status and
// the reason text the original node sent, and the writer of that response. The bodies
// are encoded once here so a refusal costs the hot path no string work. A token with a
// method scope that reaches a check which cannot see the request's calls (Outcome.Scoped
// here: /ext/auth/check) is refused with 403 insufficient_scope, a status the proxy in
// front can act on; the gate itself answers refused calls with their JSON-RPC errors (scope.ts).
import type { HttpResponse } from 'uWebSockets.js';
import { Outcome, OUTCOME_NAMES, PATH_RULES } from '../core/core.js';
import { RpcCode, SCOPE_ERRORS } from '../errors.js';
import { writeCorsHeaders } from './cors.js';
import { endWith, tableStatus } from './responses.js';
import { INSUFFICIENT_SCOPE } from './scope.js';
import type { ScopeRefusal } from './scope.js';

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
  [Outcome.Scoped]: [FORBIDDEN, 'the provided auth token allows only some JSON-RPC methods, and this check cannot see the ' +
    'request\'s calls (an auth subrequest carries no body): use a token without methods here, or put api-auth itself in front ' +
    'of the node (--upstream)'],
  // A token with limits from a client its allowedClients do not hold; the answer names
  // neither the list nor the address, so that it tells a stolen token's user nothing.
  [Outcome.Limited]: [FORBIDDEN, 'the provided auth token may not be used from this client'],
};

interface Encoded {
  readonly status: string;
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
  const body = `{"jsonrpc":"2.0","error":${JSON.stringify({ code, message: reason })},"id":1}\n`;
  const challenge = status === UNAUTHORIZED ? 'Bearer' : scoped ? INSUFFICIENT_SCOPE : '';
  ENCODED[Number(outcome)] = { status, challenge, body: new TextEncoder().encode(body) };
}

/** The body of the 503 a fenced gateway answers, with what the operator should look at. */
const FENCED_REASON = 'this api-auth gateway has lost touch with its fleet (etcd) and cannot vouch that it holds every ' +
  'revocation; it serves again by itself once it has caught up; meanwhile use another gateway';

/**
 * Not an outcome of the core: the gate's answer while a fleet gateway's fence is closed
 * (threads/fence.ts). 503 with a JSON-RPC error that says why; the client may retry on
 * another gateway. The next number after the core's outcomes, so its tables skip it.
 */
export const UNAVAILABLE = OUTCOME_NAMES.length as RefusedOutcome;
ENCODED[UNAVAILABLE] = {
  status: '503 Service Unavailable',
  challenge: '',
  body: new TextEncoder().encode(`{"jsonrpc":"2.0","error":${JSON.stringify({ code: RpcCode.Unavailable, message: FENCED_REASON })},"id":1}\n`),
};

/**
 * Writes the refusal for an outcome; call it corked (directly in the handler, or inside
 * res.cork). `head`: the request was HEAD, so the body's length goes out without it.
 * `allowOrigin`: the CORS origin the answer is for (cors.ts), "" for none.
 */
export function writeRefusal(res: HttpResponse, outcome: RefusedOutcome, head = false, allowOrigin = ''): void {
  const refusal = ENCODED[outcome];
  res.writeStatus(refusal.status).writeHeader('Content-Type', 'application/json');
  if (refusal.challenge !== '') res.writeHeader('WWW-Authenticate', refusal.challenge);
  if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
  endWith(res, refusal.body, head);
}

/**
 * Writes the answer to a body a token's method scope refused (scope.ts), with the error
 * table's status (SCOPE_ERRORS): 200 for calls it does not allow, whose JSON-RPC errors
 * Ethereum clients read only from a 200; 403 insufficient_scope for a body that is not
 * JSON-RPC, and for any refusal that answers a `check` (/ext/auth/check), whose proxy
 * acts on the status. Call it corked. The body was read whole, so the connection stays usable.
 */
export function writeScopeRefusal(res: HttpResponse, refusal: ScopeRefusal, head = false, allowOrigin = '', check = false): void {
  const status = check ? 403 : SCOPE_ERRORS[refusal.result].httpStatus;
  res.writeStatus(tableStatus(status)).writeHeader('Content-Type', 'application/json');
  if (status === 403) res.writeHeader('WWW-Authenticate', INSUFFICIENT_SCOPE);
  if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
  endWith(res, new TextEncoder().encode(`${refusal.text}\n`), head);
}

/** The message of a call past its token's rate, with the whole seconds to wait. */
export function rateLimitedMessage(retryAfter: number): string {
  return `the provided auth token is past its rate limit; retry in ${retryAfter} s`;
}

/** The message of a batch of more calls than its token's burst: no wait lets it through. */
export function overBurstMessage(calls: number): string {
  return `the provided auth token's burst is smaller than these ${calls} calls at once; send fewer calls at a time`;
}

/** Retry-After for a wait in milliseconds: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/**
 * Writes the 429 of a request past its token's rate (-32005, EIP-1474's "limit
 * exceeded", with `idJson` as its id), with Retry-After; call it corked. `waitMs`: the
 * core's wait; `calls`, for a request of more calls than the burst, which no wait helps
 * (then Retry-After is absent).
 */
export function writeRateLimited(res: HttpResponse, waitMs: number, idJson: string, head = false, allowOrigin = '', calls = 0): void {
  res.writeStatus('429 Too Many Requests').writeHeader('Content-Type', 'application/json');
  const message = calls > 0 ? overBurstMessage(calls) : rateLimitedMessage(retryAfterSeconds(waitMs));
  if (calls === 0) res.writeHeader('Retry-After', String(retryAfterSeconds(waitMs)));
  if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
  endWith(res, new TextEncoder().encode(`{"jsonrpc":"2.0","error":${JSON.stringify({ code: RpcCode.RateLimited, message })},"id":${idJson}}\n`), head);
}

/** The message of the 503 when the core's limits table has no slot for a token (assembly/limits.ts). */
export const LIMITS_FULL_REASON = 'this api-auth gateway tracks as many tokens with limits as it can; retry later, or use a token ' +
  'without limits';

/** Writes that 503; call it corked. */
export function writeLimitsFull(res: HttpResponse, head = false, allowOrigin = ''): void {
  res.writeStatus('503 Service Unavailable').writeHeader('Content-Type', 'application/json').writeHeader('Retry-After', '1');
  if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
  endWith(res, new TextEncoder().encode(`{"jsonrpc":"2.0","error":${JSON.stringify({ code: RpcCode.Unavailable, message: LIMITS_FULL_REASON })},"id":1}\n`), head);
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
  verdicts[Outcome.Valid] = Object.freeze({ ok: true, outcome: Outcome.Valid, status: 200, reason: '', headers: Object.freeze({}), body: '' });
  for (const [key, [status, reason]] of Object.entries(REFUSALS)) {
    const outcome = Number(key) as RefusedOutcome;
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (ENCODED[outcome].challenge !== '') headers['WWW-Authenticate'] = ENCODED[outcome].challenge;
    verdicts[outcome] = Object.freeze({
      ok: false, outcome, status: Number(status.slice(0, 3)), reason, headers: Object.freeze(headers),
      body: new TextDecoder().decode(ENCODED[outcome].body),
    });
  }
  return Object.freeze(verdicts);
})();

