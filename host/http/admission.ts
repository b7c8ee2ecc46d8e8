// The one admission step, for every way a request comes in: a request to the router, a
// WebSocket upgrade, and the original request a front proxy asks /ext/auth/check about.
// In this order: CONNECT is refused (any spelling: some servers take methods without
// regard to case), the CORS origin is looked up, a preflight from an allowed origin is
// answered, then the gate (or, with no tokens, the path rules), a token with limits is
// admitted by the core's bucket and client ranges (assembly/limits.ts), and a token with
// a method scope is admitted with its grant, for its calls to be checked where they are
// seen (scope.ts). Written once, so that no way in can skip a step the others take.
//
// Where the ways differ, the difference is an input (Way), each with its reason. The
// step allocates nothing on the router's way: what an admitted request needs besides the
// decision (its grant, its CORS origin) is read from the admission's fields right after
// the call, as the core's scopedGrant is.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { ADMIT_CLIENT, ADMIT_OK, ADMIT_RATE, Outcome } from '../core/core.js';
import type { Core } from '../core/core.js';
import { addressBytes, clientAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import { writePreflight } from './cors.js';
import type { Cors } from './cors.js';
import type { Gate } from './gate.js';
import { writeLimitsFull, writeRateLimited, writeRefusal } from './refusals.js';
import type { RefusedOutcome } from './refusals.js';
import { writeConnectRefused } from './responses.js';

/** What admit() decided; the answer of anything but Admitted is written already. */
export const enum Decision {
  /** Go on: `grant` and `allow` say how. */
  Admitted,
  /** Refused with the gate's answer for `outcome` (a bad path, a token, a closed fence). */
  Refused,
  /** Answered here without the gate: a CONNECT, or a preflight. */
  Answered,
}

/** How requests come in by one way: where the ways differ, and why. */
export interface Way {
  /**
   * Whether a preflight from an allowed origin is answered. Not by /ext/auth/check: a
   * preflight that the check let through would reach the node, body and all, with no token.
   */
  readonly preflight: boolean;
  /**
   * Whether refusals carry CORS headers for an allowed origin. Not for a WebSocket
   * upgrade: a browser's WebSocket is not under CORS, and no page reads a refused upgrade's answer.
   */
  readonly cors: boolean;
  /**
   * Whether a request without an Authorization header may carry its token as access_token
   * in the query (RFC 6750 §2.3): a WebSocket upgrade with --api-auth-query-token, as a
   * browser's WebSocket cannot send headers. Never over HTTP, where a token in the URL ends up in logs.
   */
  readonly queryToken: boolean;
  /** Whether the token admitted is kept (`token`): a WebSocket session is re-checked on it for as long as it lasts. */
  readonly keepsToken: boolean;
  /**
   * The calls a request counts against its token's rate here: one. Not a WebSocket
   * upgrade, whose messages each count as they come (websocket.ts); its client is checked.
   */
  readonly calls: number;
}

/** A request to the router: any local route, or the proxy. */
export const HTTP: Way = Object.freeze({ preflight: true, cors: true, queryToken: false, keepsToken: false, calls: 1 });
/** The original request of a /ext/auth/check. */
export const CHECK: Way = Object.freeze({ preflight: false, cors: true, queryToken: false, keepsToken: false, calls: 1 });
/** A WebSocket upgrade to the upstream; `queryToken`: --api-auth-query-token. */
export function webSocketWay(queryToken: boolean): Way {
  return Object.freeze({ preflight: false, cors: false, queryToken, keepsToken: true, calls: 0 });
}

/** A request of a token with limits whose first call was counted at admission: the rest of a batch, once its body is read. */
export interface LimitedCalls {
  /** `calls` more calls against the token's rate: an ADMIT_ code. */
  admit(calls: number): number;
  /** After ADMIT_RATE: the wait, in milliseconds. */
  wait(): number;
}

/** The query parameter of RFC 6750 §2.3. */
const ACCESS_TOKEN = 'access_token';
/** `Bearer ` (any case), as the core reads it: what comes after it is the token. */
const BEARER_LENGTH = 7;

/**
 * What admission needs of a local route (routes.ts): its kind, 'rpc' for the node's
 * built-in endpoints. Only that, so that routes.ts, which serves /ext/auth/check, and
 * admission.ts, which the check calls, do not import each other.
 */
export interface OwnRoute {
  readonly kind: string;
}

export class Admission {
  /** After Admitted: the grant of a token with a method scope, whose calls must be checked; -1 for none. */
  grant = -1;
  /** After Admitted or Refused: the CORS origin the answer is for (cors.ts), "" for none. */
  allow = '';
  /** After Refused: the outcome refused. */
  outcome: RefusedOutcome = Outcome.NoToken;
  /** After Admitted, by a way that keeps it: the bare token; null when none was needed (a public path, or no tokens). */
  token: string | null = null;
  /** After Admitted: the serial, expiry and grant of a token with limits, whose later calls (WebSocket messages) are admitted too; -1 for none. */
  limitedSerial = -1;
  limitedExpiry = -1;
  limitedGrant = -1;
  /** After Admitted with a token with limits: its client's 16 bytes, for those later calls. */
  client: Uint8Array | null = null;
  /**
   * After Admitted with a token with limits, by a way that counts one call per request:
   * how the rest of a batch's calls are counted once its body is read (the proxy); null for none.
   */
  limited: LimitedCalls | null = null;

  /**
   * `gate` null: no tokens needed, only the path rules apply (checked by `core`). `cors`
   * null: no origin is allowed. `routes`: api-auth's own, which answer no other site's preflight.
   * `trusted`: the proxies whose X-Forwarded-For names the client a token's allowedClients are matched against.
   */
  constructor(private readonly core: Core, private readonly gate: Gate | null, private readonly cors: Cors | null,
    private readonly routes: ReadonlyMap<string, OwnRoute>, private readonly trusted: TrustedProxies) {}

  /**
   * Admits the request that `req` carries, or answers it on `res`. `method` (as sent) and
   * `path` (without its query) are the request's, or, for /ext/auth/check, the original's.
   * Call it from the uWS handler, before returning.
   */
  admit(res: HttpResponse, req: HttpRequest, method: string, path: string, way: Way): Decision {
    if (method.length === 7 && method.toUpperCase() === 'CONNECT') {
      writeConnectRefused(res);
      return Decision.Answered;
    }
    // Requests from scripts in browsers carry an Origin; most of a node's traffic does not.
    const allow = this.allow = way.cors && this.cors !== null ? this.cors.allow(req.getHeader('origin')) : '';
    // A preflight carries no token (browsers send none): an allowed origin is answered here,
    // for the node's endpoints. api-auth's own routes answer no other site's page (the token
    // service above all: a page must not spend an operator's password attempts), so their
    // preflights go on like any request and get no CORS header.
    if (way.preflight && allow !== '' && method === 'OPTIONS' && req.getHeader('access-control-request-method') !== '') {
      if (!this.core.pathAllowed(path)) return this.refuse(res, req, Outcome.BadPath);
      const own = this.routes.get(path);
      if (own === undefined || own.kind === 'rpc') {
        writePreflight(res, allow);
        return Decision.Answered;
      }
    }
    const gate = this.gate;
    this.grant = -1;
    this.token = null;
    this.limitedSerial = -1;
    this.limitedExpiry = -1;
    this.limitedGrant = -1;
    this.client = null;
    this.limited = null;
    if (gate === null) return this.core.pathAllowed(path) ? Decision.Admitted : this.refuse(res, req, Outcome.BadPath);
    const header = req.getHeader('authorization');
    let fromQuery: string | null = null;
    if (way.queryToken && header === '') {
      // Undefined, in this uWS, when the URL has no "?"; "" when it ends with one.
      const query = req.getQuery() as string | undefined;
      if (query !== undefined) fromQuery = queryToken(query);
    }
    const outcome = fromQuery !== null ? gate.check(fromQuery, path, true) : gate.check(header, path);
    if (outcome !== Outcome.Valid) {
      if (outcome === Outcome.Limited) {
        if (!this.admitLimited(res, req, gate, way)) return Decision.Refused;
      } else if (outcome !== Outcome.Scoped) {
        return this.refuse(res, req, outcome);
      } else {
        this.grant = this.core.scopedGrant;
      }
    }
    // A public path is never re-checked: it needs no token, whatever the request carried.
    if (way.keepsToken && !gate.open(path)) this.token = fromQuery ?? header.slice(BEARER_LENGTH);
    return Decision.Admitted;
  }

  /**
   * A token with limits: its client against its ranges, then `way.calls` against its
   * rate, both in the core, shared by every thread. Whether it was admitted; when not,
   * the answer is written: 403 for the client (naming neither the list nor the address),
   * 429 with Retry-After for the rate, 503 when the core has no slot for the token.
   */
  private admitLimited(res: HttpResponse, req: HttpRequest, gate: Gate, way: Way): boolean {
    const core = this.core;
    const serial = core.limitedSerial;
    const expiry = core.limitedExpiry;
    const grant = core.scopedGrant;
    const scoped = core.limitedScoped;
    const client = addressBytes(clientAddress(res, req, this.trusted), new Uint8Array(16));
    const result = gate.admitLimited(way.calls, client);
    if (result !== ADMIT_OK) {
      // The answer goes to the request in hand: a HEAD gets no body (also a check's).
      const head = req.getMethod() === 'head';
      this.outcome = Outcome.Limited;
      if (result === ADMIT_CLIENT) writeRefusal(res, Outcome.Limited, head, this.allow);
      // The body is not read here, so the call's id is unknown: null, as JSON-RPC has it then.
      else if (result === ADMIT_RATE) writeRateLimited(res, core.admitWait, 'null', head, this.allow);
      else writeLimitsFull(res, head, this.allow);
      return false;
    }
    if (scoped) this.grant = grant;
    this.limitedSerial = serial;
    this.limitedExpiry = expiry;
    this.limitedGrant = grant;
    this.client = client;
    if (way.calls > 0) this.limited = { admit: (calls) => gate.admitCalls(serial, expiry, grant, calls, client), wait: () => core.admitWait };
    return true;
  }

  private refuse(res: HttpResponse, req: HttpRequest, outcome: RefusedOutcome): Decision {
    this.outcome = outcome;
    // The answer goes to the request in hand: to a HEAD without its body, also when it is
    // a check (/ext/auth/check) that judged another request, whose method does not matter here.
    writeRefusal(res, outcome, req.getMethod() === 'head', this.allow);
    return Decision.Refused;
  }
}

/**
 * The access_token parameter of a query, as sent (tokens are base64url: nothing to
 * decode); null when there is none. Two of them name no one token: "", which no token is.
 */
function queryToken(query: string): string | null {
  let found: string | null = null;
  for (const pair of query.split('&')) {
    if (pair !== ACCESS_TOKEN && !pair.startsWith(`${ACCESS_TOKEN}=`)) continue;
    if (found !== null) return '';
    found = pair.slice(ACCESS_TOKEN.length + 1);
  }
  return found;
}

/** The query without its access_token parameters, so that the credential never reaches the upstream; undefined when nothing else was in it. */
export function withoutToken(query: string): string | undefined {
  const pairs = query.split('&');
  const kept = pairs.filter((pair) => pair !== ACCESS_TOKEN && !pair.startsWith(`${ACCESS_TOKEN}=`));
  if (kept.length === pairs.length) return query;
  return kept.length === 0 ? undefined : kept.join('&');
}
