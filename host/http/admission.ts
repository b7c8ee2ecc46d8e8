// The one admission step, for every way a request comes in: a request to the router, a
// WebSocket upgrade, the original request a front proxy asks /ext/auth/check about, and
// an embedder's request (embed.ts). In this order: CONNECT is refused (any spelling: some
// servers take methods without regard to case), the CORS origin is looked up, a
// preflight from an allowed origin is answered, then the gate (or, with no tokens, the
// path rules); a token with limits has its client checked by the core's client ranges
// (assembly/limits.ts); and a token with limits or a method scope is handed a Ticket,
// what its request still owes: its calls, judged by body-admission.ts on the one reading
// of its body, or of each WebSocket message. Written once, so that no way in can skip a
// step the others take.
//
// What a request's head already says is judged here: a request with no body has no
// call a scope could allow (refused) and counts as one call against a token's rate; a
// compressed body cannot be read (refused); a WebSocket upgrade counts as one call (each
// message then counts its own). Only a request whose body will be read leaves with a ticket.
//
// Where the ways differ, the difference is an input (Way), each with its reason. The
// step allocates nothing on the router's way for a token without limits or scope: what an
// admitted request needs besides the decision (its ticket, its CORS origin) is read from
// the admission's fields right after the call.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { ADMIT_CLIENT, ADMIT_OK, admitRecord, checkRecord, Outcome } from '../core/abi.js';
import type { Core } from '../core/core.js';
import type { Metrics } from '../ops/metrics.js';
import type { ScopeVia } from '../ops/metric-labels.js';
import { BodyAdmission } from './body-admission.js';
import type { Ticket } from './body-admission.js';
import { addressBytes } from '../addresses.js';
import { clientAddress } from './client-address.js';
import type { TrustedProxies } from '../addresses.js';
import { writePreflight } from './cors.js';
import type { Cors } from './cors.js';
import type { Gate } from './gate.js';
import { limitRefusal, unreadableRefusal, writeCallRefusal, writeRefusal } from './refusals.js';
import type { CallRefusal, RefusedOutcome } from './refusals.js';
import { readBody, writeConnectRefused, writeForeignOrigin } from './responses.js';
import type { InFlight } from './in-flight.js';
import { readCalls } from '../rpc/reading.js';

/** What admit() decided; the answer of anything but Admitted is written already. */
export const enum Decision {
  /** Go on: `ticket` and `allow` say how. */
  Admitted,
  /** Refused with the gate's answer for `outcome` (a bad path, a token, a closed fence), or `refusal`. */
  Refused,
  /** Answered here without the gate: a CONNECT, a preflight, or a WebSocket upgrade from a page of an origin not allowed. */
  Answered,
}

/** What a request's head says of its body, for a token whose calls must be known. */
export const enum Body {
  /** It has none. */
  None,
  /** It has one, which will be read and judged. */
  Present,
  /** It has one compressed (Content-Encoding), which is not read. */
  Compressed,
  /** It may have one that nobody here will see: an auth subrequest's original request (its proxy sends no body). */
  Unseen,
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
   * Whether the request's calls come as messages after it (a WebSocket upgrade): its ticket
   * is kept for each of them, and the upgrade itself counts as one call. Otherwise they come
   * in its body, if any.
   */
  readonly messages: boolean;
  /** Whether a refusal answers /ext/auth/check, whose proxy acts on the status (a scope's refusal is then a 403). */
  readonly check: boolean;
  /**
   * Whether a request that names an Origin must come from an allowed one
   * (--http-allowed-origins): a WebSocket upgrade. CORS does not cover WebSocket, so a
   * browser opens one from any page and lets the page read every message; only the
   * server can refuse it, as geth's --ws.origins does. A request with no Origin (a
   * program, not a page) is not held to it.
   */
  readonly origin: boolean;
}

/** A request to the router: any local route, or the proxy. */
export const HTTP: Way = Object.freeze({
  preflight: true,
  cors: true,
  queryToken: false,
  keepsToken: false,
  messages: false,
  check: false,
  origin: false,
});
/** The original request of a /ext/auth/check. */
export const CHECK: Way = Object.freeze({
  preflight: false,
  cors: true,
  queryToken: false,
  keepsToken: false,
  messages: false,
  check: true,
  origin: false,
});
/** A WebSocket upgrade to the upstream; `queryToken`: --api-auth-query-token. */
export function webSocketWay(queryToken: boolean): Way {
  return Object.freeze({ preflight: false, cors: false, queryToken, keepsToken: true, messages: true, check: false, origin: true });
}

/** The query parameter of RFC 6750 §2.3. */
const ACCESS_TOKEN = 'access_token';
/** `Bearer ` (any case), as the core reads it: what comes after it is the token. */
const BEARER_LENGTH = 7;
/** Methods whose requests no node runs calls from: an auth subrequest's original request of one of them counts as a call without a body. */
const BODILESS_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** decide()'s `body` when the request's head is to be read from its `req`. */
export const NO_BODY_LOOKUP = -1;

/**
 * What admission needs of a local route (routes.ts): its kind, 'rpc' for the node's
 * built-in endpoints. Only that, so that routes.ts, which serves /ext/auth/check, and
 * admission.ts, which the check calls, do not import each other.
 */
export interface OwnRoute {
  readonly kind: string;
}

export class Admission {
  /** After Admitted or Refused: the CORS origin the answer is for (cors.ts), "" for none. */
  allow = '';
  /** After Refused: the outcome refused; Outcome.Limited or Outcome.Scoped also when `refusal` says more. */
  outcome: RefusedOutcome = Outcome.NoToken;
  /** After Refused for the token's limits or scope (not the gate's own outcome): the refusal. */
  refusal: CallRefusal | null = null;
  /** After Admitted, by a way that keeps it: the bare token; null when none was needed (a public path, or no tokens). */
  token: string | null = null;
  /**
   * After Admitted: what the request still owes its admission, for a token with limits or
   * a method scope: its body's calls (the caller reads the body and judges it with
   * `bodies`), or each message's (a WebSocket session). Null when nothing is owed.
   */
  ticket: Ticket | null = null;
  /** Where a ticket's calls are judged; null when there are no tokens. */
  readonly bodies: BodyAdmission | null;
  // What the gate's check and the head's `admit` found besides their answers: this call
  // site's own records, filled by each call and read before the next.
  private readonly checked = checkRecord();
  private readonly admitted = admitRecord();

  /**
   * `gate` null: no tokens needed, only the path rules apply (checked by `core`). `cors`
   * null: no origin is allowed. `routes`: api-auth's own, which answer no other site's preflight.
   * `trusted`: the proxies whose X-Forwarded-For names the client a token's allowedClients are matched against.
   */
  constructor(
    private readonly core: Core,
    private readonly gate: Gate | null,
    private readonly cors: Cors | null,
    private readonly routes: ReadonlyMap<string, OwnRoute>,
    private readonly trusted: TrustedProxies,
    metrics: Metrics | null = null,
    private readonly inFlight: InFlight | null = null,
  ) {
    this.bodies = gate === null || metrics === null ? null : new BodyAdmission(core, gate, metrics);
  }

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
    const origin = req.getHeader('origin');
    if (way.origin && origin !== '' && (this.cors === null || this.cors.allow(origin) === '')) {
      // Before the token: a page of another site learns nothing of it, and spends none of its calls.
      writeForeignOrigin(res, req.getMethod() === 'head');
      return Decision.Answered;
    }
    const allow = (this.allow = way.cors && this.cors !== null ? this.cors.allow(origin) : '');
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
    const header = req.getHeader('authorization');
    let fromQuery: string | null = null;
    if (way.queryToken && header === '') {
      // Undefined, in this uWS, when the URL has no "?"; "" when it ends with one.
      const query = req.getQuery() as string | undefined;
      if (query !== undefined) fromQuery = queryToken(query);
    }
    const decision =
      fromQuery !== null
        ? this.decide(fromQuery, true, path, method, way, NO_BODY_LOOKUP, res, req)
        : this.decide(header, false, path, method, way, NO_BODY_LOOKUP, res, req);
    if (decision === Decision.Refused) this.write(res, req, way);
    else if (way.keepsToken && this.gate !== null && !this.gate.open(path)) this.token = fromQuery ?? header.slice(BEARER_LENGTH);
    return decision;
  }

  /**
   * The decision for a request, without writing it: Admitted (with `ticket`), or Refused
   * (with `outcome`, and `refusal` when its limits or scope refused it). `credential`: the
   * Authorization header's value, or (`bare`) a token alone. `body`: what the request's
   * head says of its body, or NO_BODY_LOOKUP to read it from `req`. `client`: the client's
   * 16 bytes, or null to read them from `res` and `req` (only for a token with limits).
   */
  decide(
    credential: string,
    bare: boolean,
    path: string,
    method: string,
    way: Way,
    body: Body | typeof NO_BODY_LOOKUP,
    res: HttpResponse | null,
    req: HttpRequest | null,
    client: Uint8Array | null = null,
  ): Decision {
    this.token = null;
    this.ticket = null;
    this.refusal = null;
    const gate = this.gate;
    if (gate === null) return this.core.pathAllowed(path) ? Decision.Admitted : this.refused(Outcome.BadPath);
    const checked = this.checked;
    const outcome = gate.check(credential, path, bare, checked);
    if (outcome === Outcome.Valid) return Decision.Admitted;
    if (outcome !== Outcome.Limited && outcome !== Outcome.Scoped) return this.refused(outcome);
    const grant = checked.grant;
    let ticket: Ticket;
    if (outcome === Outcome.Limited) {
      const { serial, expiry } = checked;
      const bytes = client ?? addressBytes(clientAddress(res!, req!, this.trusted), new Uint8Array(16));
      // The client first, with no call counted: a refused client spends nothing.
      const admitted = this.admitted;
      const result = gate.admitCalls(serial, expiry, grant, 0, bytes, admitted);
      // 403 for the client, naming neither the list nor the address (refusals.ts).
      if (result === ADMIT_CLIENT) return this.refused(Outcome.Limited);
      if (result !== ADMIT_OK) return this.refused(Outcome.Limited, limitRefusal(result, admitted, 0, 'null'));
      ticket = { grant: checked.scoped ? grant : -1, limited: { serial, expiry, grant, client: bytes } };
    } else {
      ticket = { grant, limited: null };
    }
    const bodies = this.bodies!;
    const via: ScopeVia = way.messages ? 'websocket' : 'http';
    if (way.messages) {
      // The upgrade is a call of its own: a token cannot open sessions faster than its rate.
      if (ticket.limited !== null) {
        const refusal = bodies.withoutBody({ grant: -1, limited: ticket.limited }, via);
        if (refusal !== null) return this.refused(Outcome.Limited, refusal);
      }
      this.ticket = ticket;
      return Decision.Admitted;
    }
    const head = body === NO_BODY_LOOKUP ? bodyOf(req!, method, way) : body;
    if (head === Body.Present) {
      this.ticket = ticket;
      return Decision.Admitted;
    }
    if (head === Body.Unseen) {
      if (ticket.grant >= 0) return this.refused(Outcome.Scoped);
      return this.refused(Outcome.Limited, unreadableRefusal('unseen', -1, null, false));
    }
    const refusal = head === Body.Compressed ? bodies.compressed(ticket, via) : bodies.withoutBody(ticket, via);
    return refusal === null ? Decision.Admitted : this.refused(ticket.grant >= 0 ? Outcome.Scoped : Outcome.Limited, refusal);
  }

  private refused(outcome: RefusedOutcome, refusal: CallRefusal | null = null): Decision {
    this.outcome = outcome;
    this.refusal = refusal;
    return Decision.Refused;
  }

  /**
   * Writes the refusal decided; the answer goes to the request in hand: a HEAD gets no body (also a check's).
   * A gate's refusal of a request whose body is one JSON-RPC call echoes that call's id,
   * as a JSON-RPC answer must (web3.js shows an empty message for an answer whose id is
   * not its call's): the body is read first, by the one reading (rpc/reading.ts).
   */
  private write(res: HttpResponse, req: HttpRequest, way: Way): void {
    const head = req.getMethod() === 'head';
    if (this.refusal !== null) writeCallRefusal(res, this.refusal, head, this.allow, way.check);
    else if (
      way.messages ||
      way.check ||
      this.inFlight === null ||
      req.getMethod() !== 'post' ||
      bodyOf(req, 'POST', way) !== Body.Present
    ) {
      writeRefusal(res, this.outcome, head, this.allow);
    } else {
      const outcome = this.outcome;
      const allow = this.allow;
      const pending = this.inFlight.begin(res);
      readBody(
        res,
        pending,
        (body) => {
          const reading = readCalls(body);
          const id = reading.ok ? (reading.batch ? null : reading.calls[0].id) : reading.id;
          res.cork(() => writeRefusal(res, outcome, false, allow, id));
          pending.finish();
        },
        () => {
          // Past what a call's id is read from: the refusal as it is, and the rest of the body is not read.
          res.cork(() => writeRefusal(res, outcome, false, allow, null, true));
          pending.finish();
        },
      );
    }
  }

  private refuse(res: HttpResponse, req: HttpRequest, outcome: RefusedOutcome): Decision {
    this.refused(outcome);
    this.write(res, req, HTTP);
    return Decision.Refused;
  }
}

/**
 * What the head of `req` says of its body (or, for a check, of the original request's):
 * a check's own body is the original's when a checker sends it (Envoy's ext_authz
 * with_request_body); otherwise the original's body is unseen, but for a method no node
 * runs calls from.
 */
function bodyOf(req: HttpRequest, method: string, way: Way): Body {
  const declared = req.getHeader('content-length');
  const hasBody = req.getHeader('transfer-encoding') !== '' || (declared !== '' && declared !== '0');
  if (!hasBody) return way.check && !BODILESS_METHODS.has(method.toUpperCase()) ? Body.Unseen : Body.None;
  const encoding = req.getHeader('content-encoding');
  return encoding === '' || encoding.trim().toLowerCase() === 'identity' ? Body.Present : Body.Compressed;
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
