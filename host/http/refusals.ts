// What a refused request gets: the one table from a core Outcome to an HTTP status and
// the reason text the original node sent, and the writer of that response. The bodies
// are encoded once here so a refusal costs the hot path no string work.
import type { HttpResponse } from 'uWebSockets.js';
import { FENCED_REASON } from '../cluster/fence.js';
import { Outcome, OUTCOME_NAMES, PATH_RULES } from '../core/core.js';
import { writeCorsHeaders } from './cors.js';
import { endWith } from './responses.js';

export type RefusedOutcome = Exclude<Outcome, Outcome.Valid>;

const UNAUTHORIZED = '401 Unauthorized';
const BAD_REQUEST = '400 Bad Request';

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
};

interface Encoded {
  readonly status: string;
  /** Only a 401 invites the client to present a token; a bad path is not about tokens. */
  readonly challenge: boolean;
  readonly body: Uint8Array;
}

// Indexed by outcome number, so the hot path's lookup is an array load.
const ENCODED: Encoded[] = [];
for (const [outcome, [status, reason]] of Object.entries(REFUSALS)) {
  // The original node answered id 1 whatever the request; clients match on this body.
  const body = `{"jsonrpc":"2.0","error":${JSON.stringify({ code: -32600, message: reason })},"id":1}\n`;
  ENCODED[Number(outcome)] = { status, challenge: status === UNAUTHORIZED, body: new TextEncoder().encode(body) };
}

/**
 * Not an outcome of the core: the gate's answer while a fleet gateway's fence is closed
 * (cluster/fence.ts). 503 with a JSON-RPC error that says why; the client may retry on
 * another gateway. The next number after the core's outcomes, so its tables skip it.
 */
export const UNAVAILABLE = OUTCOME_NAMES.length as RefusedOutcome;
ENCODED[UNAVAILABLE] = {
  status: '503 Service Unavailable',
  challenge: false,
  body: new TextEncoder().encode(`{"jsonrpc":"2.0","error":${JSON.stringify({ code: -32006, message: FENCED_REASON })},"id":1}\n`),
};

/**
 * Writes the refusal for an outcome; call it corked (directly in the handler, or inside
 * res.cork). `head`: the request was HEAD, so the body's length goes out without it.
 * `allowOrigin`: the CORS origin the answer is for (cors.ts), "" for none.
 */
export function writeRefusal(res: HttpResponse, outcome: RefusedOutcome, head = false, allowOrigin = ''): void {
  const refusal = ENCODED[outcome];
  res.writeStatus(refusal.status).writeHeader('Content-Type', 'application/json');
  if (refusal.challenge) res.writeHeader('WWW-Authenticate', 'Bearer');
  if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
  endWith(res, refusal.body, head);
}

/**
 * A gate's answer, for hosts that write responses their own way: `ok`, or the refusal to
 * send (status, headers and body exactly as the built-in gate sends them).
 */
export interface Verdict {
  readonly ok: boolean;
  readonly outcome: Outcome;
  /** 200 when ok; otherwise 401, or 400 for a path that is refused whatever the token. */
  readonly status: number;
  /** The refusal's reason text; empty when ok. */
  readonly reason: string;
  /** The refusal's headers: Content-Type, and WWW-Authenticate for a 401. Empty when ok. */
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
    if (ENCODED[outcome].challenge) headers['WWW-Authenticate'] = 'Bearer';
    verdicts[outcome] = Object.freeze({
      ok: false, outcome, status: Number(status.slice(0, 3)), reason, headers: Object.freeze(headers),
      body: new TextDecoder().decode(ENCODED[outcome].body),
    });
  }
  return Object.freeze(verdicts);
})();

