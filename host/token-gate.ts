// What a refused request gets: the one table from a core Outcome to an HTTP status and
// the reason text the original node sent, and the writer of that response. The bodies
// are encoded once here so a refusal costs the hot path no string work.
import type { HttpResponse } from 'uWebSockets.js';
import { Outcome } from './core.js';

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
  [Outcome.BadPath]: [BAD_REQUEST, 'invalid request path: dot segments, empty segments and encoded "/", "." or "%" are refused'],
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

/** Writes the refusal for an outcome; call it corked (directly in the handler, or inside res.cork). */
export function writeRefusal(res: HttpResponse, outcome: RefusedOutcome): void {
  const refusal = ENCODED[outcome];
  res.writeStatus(refusal.status).writeHeader('Content-Type', 'application/json');
  if (refusal.challenge) res.writeHeader('WWW-Authenticate', 'Bearer');
  res.end(refusal.body);
}
