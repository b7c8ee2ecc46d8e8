// WebSocket sessions through the gate: a node's subscription endpoints (eth_subscribe at
// /ext/bc/C/ws and the like) relayed to the upstream, with the guarantees of HTTP.
//
// The upgrade is a request like any other. An upgrade to one of api-auth's own routes
// is the router's, the Upgrade header ignored, as before. Any other goes through the
// router's admission step (admission.ts, by the WebSocket's way: path rules, then the
// token, with the same refusals), then the session limits (session-ledger.ts: the
// process's, and the token's and the client address's shares), and only then to the upstream:
// a WebSocket to the same target, with the same header rules (forwarding.ts), and the
// client's subprotocols. The client gets its 101 once the upstream has accepted; an upstream
// that refuses, cannot be reached or does not answer in time gives the HTTP error the
// proxy would.
//
// A session opened with a token that has a method scope or limits keeps to them message
// by message: each message from the client is judged as an HTTP body would be, on the
// one reading of its calls (body-admission.ts), whole (a batch is not split: its answers
// come apart), and one that is refused is not forwarded; the client gets the JSON-RPC
// error instead (one error for a lone call, an array of them for a batch, as over HTTP)
// and the session goes on. A message whose calls cannot be read is refused too. The
// upgrade itself carries no calls and is not refused for its scope; a token with limits
// had its client checked at the upgrade, and the upgrade counted as one call.
//
// A session lives only as long as its token. Every message from the client is checked
// against the token's standing (core.standing: the generation, the expiry at the clock's
// time, the revocation bit, all in the state every thread reads) before it goes on, and
// again as it leaves the queue below, so that nothing the client sends reaches the
// upstream once a revocation, a password change or the expiry is in force: their
// answers are sent after the core holds them. The session then ends with 1008 and the
// reason the gate gives over HTTP; what it still holds for the upstream is dropped, and
// an upstream socket that still holds part of it is cut rather than closed. Each thread
// also re-checks its sessions every RECHECK_MS, so that a quiet session ends too.
//
// Frames are relayed as whole messages, text as text and binary as binary; each side's
// pings are answered where they arrive. Backpressure: a client that reads slowly pauses
// the reading of the upstream (uWS's buffered amount, then its drain). The upstream's
// socket is handed a client message only when it holds nothing else; the rest wait in
// the session's queue, each written when the write before it has gone to the kernel.
// uWS offers no way to stop reading a client, so a client that outruns its upstream is
// bounded instead: once a whole largest message waits for the upstream, the session
// ends with 1013.
//
// Idle: a side from which nothing arrives, not even the pong to a ping, for the idle
// timeout is gone. uWS pings the client and closes it past the timeout, on its own
// timer; this module pings the upstream halfway through the timeout, by the injected
// clock. A subscription that is merely quiet (a logs filter that rarely matches) stays
// open.
import type { HttpRequest, HttpResponse, us_socket_context_t, WebSocketBehavior } from 'uWebSockets.js';
import { Outcome, OUTCOME_NAMES } from '../core/abi.js';
import type { Claims } from '../core/abi.js';
import { RpcCode } from '../errors.js';
import type { Logger } from '../ops/log.js';
import type { WsRefusal } from '../ops/metric-labels.js';
import type { Metrics } from '../ops/metrics.js';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import { judged, loggedSession, upstreamAnswered } from './access-log.js';
import type { AccessLog, LoggedResponse } from './access-log.js';
import { CountedResponse } from './counted-response.js';
import { Decision, webSocketWay, withoutToken } from './admission.js';
import type { Admission, Way } from './admission.js';
import type { Ticket } from './body-admission.js';
import { addressBytes } from '../addresses.js';
import type { TrustedProxies } from '../addresses.js';
import { clientAddress, peerAddress } from './client-address.js';
import type { InFlight } from './in-flight.js';
import { classify, ReceivedHeaders, refuse, upstreamHeaders, upstreamTarget, UpstreamWatch } from './forwarding.js';
import { statusLine } from './proxy.js';
import type { UpstreamOptions } from './proxy.js';
import { callRefusalReason, REFUSALS, writeRefusal } from './refusals.js';
import { RefusedMessages } from './refused-messages.js';
import type { RefusedOutcome } from './refusals.js';
import { jsonLine } from './responses.js';
import { clientKey, Opening, SessionLedger } from './session-ledger.js';
import { CLIENT_HIGH_WATER, CLIENT_LOW_WATER, clientBackpressure } from '../session-memory.js';
import type { SessionKeys } from './session-ledger.js';
import type { Router } from './router.js';
import type { Route } from './routes.js';
import type { UpstreamWsError } from './upstream-ws/errors.js';
import type { UpstreamWebSocket as Upstream } from './upstream-ws/socket.js';
import { Handshake } from './websocket/handshake.js';
import type { HandshakePeers, HandshakeRefusal } from './websocket/handshake.js';
import { callsIn } from './websocket/messages.js';
import { Relay, STOPPING_TEXT } from './websocket/relay.js';
import type { RelayPeers } from './websocket/relay.js';
import { Session } from './websocket/session.js';
import type { SessionData, SessionPeers } from './websocket/session.js';

export { RECHECK_MS } from './websocket/relay.js';

export interface WebSocketSettings {
  /** Bytes: the largest message relayed either way. */
  readonly maxMessage: number;
  /** Seconds a side may send nothing at all (8 to 960; uWS counts in steps of 4 s). */
  readonly idleTimeout: number;
  /** Sessions open at once in the whole process. */
  readonly maxSessions: number;
  /** Sessions open at once in the whole process with one token. */
  readonly maxSessionsPerToken: number;
  /** Sessions open at once in the whole process from one client address (an IPv6 address's /64). */
  readonly maxSessionsPerClient: number;
  /** Whether an upgrade without an Authorization header may carry its token as access_token in the query. */
  readonly queryToken: boolean;
  /** The sessions open or being opened in the whole process, every thread's (session-ledger.ts, ledgerMemory). */
  readonly sessions: SharedArrayBuffer;
  /** The messages refused inside sessions, every thread's (refused-messages.ts, refusedMessagesMemory). */
  readonly refusedMessages: SharedArrayBuffer;
}

/** What a relay works with: this thread's admission, router and counters, and the upstream. */
export interface RelayParts {
  readonly core: Core;
  /** The router's admission step; an upgrade goes through it by its own way (webSocketWay), and a ticket's messages by its `bodies`. */
  readonly admission: Admission;
  readonly router: Router;
  /** api-auth's own routes: an upgrade to one of them is the router's. */
  readonly routes: ReadonlyMap<string, Route>;
  readonly upstream: UpstreamOptions;
  readonly trusted: TrustedProxies;
  readonly inFlight: InFlight;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly clock: Clock;
  readonly settings: WebSocketSettings;
  /** --access-log's, null when it is off: an upgrade refused is one line, a session one line at its end. */
  readonly access: AccessLog | null;
}

/** The uWS handlers of the relay, for `app.ws('/*', ...)`. */
export type SessionBehavior = WebSocketBehavior<SessionData<Opened>>;

/**
 * The relay's door: an upgrade through the admission step and the session limits, then a
 * handshake with the upstream; and the peers its handshakes and sessions are handed
 * (what they need of the HTTP layer: the answers, the judging of a message, the audit line).
 */
export class WebSocketRelay implements HandshakePeers<Opened>, SessionPeers<Opened>, RelayPeers<Opened> {
  readonly behavior: SessionBehavior;
  private readonly relay: Relay<Opened>;
  private readonly watch: UpstreamWatch;
  private readonly ledger: SessionLedger;
  private readonly refusedMessages: RefusedMessages;
  /** The 503 bodies of the bounds, by Opening. */
  private readonly tooMany: Readonly<Record<Exclude<Opening, Opening.Opened>, Uint8Array>>;
  private readonly stoppingBody = jsonLine(RpcCode.Unavailable, `${STOPPING_TEXT}; retry on another connection`);
  /** Each upgrade's header lines, read once in its handler. */
  private readonly received = new ReceivedHeaders();
  readonly stopping: HandshakeRefusal = { reason: 'stopping', status: '503 Service Unavailable', body: this.stoppingBody };
  readonly idleMs: number;
  readonly maxMessage: number;
  readonly clientHighWater = CLIENT_HIGH_WATER;
  readonly clientLowWater = CLIENT_LOW_WATER;
  readonly url: URL;
  readonly timeoutMs: number;
  readonly metrics: Metrics;
  readonly clock: Clock;
  private readonly way: Way;

  constructor(private readonly parts: RelayParts) {
    const { settings, upstream } = parts;
    this.watch = new UpstreamWatch(upstream.url, upstream.timeoutMs, upstream.health, parts.metrics, parts.log);
    this.ledger = new SessionLedger(settings.sessions, {
      maxSessions: settings.maxSessions,
      perToken: settings.maxSessionsPerToken,
      perClient: settings.maxSessionsPerClient,
    });
    this.refusedMessages = new RefusedMessages(settings.refusedMessages);
    this.tooMany = {
      [Opening.Full]: jsonLine(RpcCode.Unavailable, `too many WebSocket sessions are open (at most ${settings.maxSessions}); retry later`),
      [Opening.TokenFull]: jsonLine(
        RpcCode.Unavailable,
        `too many WebSocket sessions are open with this token ` + `(at most ${settings.maxSessionsPerToken}); close one, or retry later`,
      ),
      [Opening.ClientFull]: jsonLine(
        RpcCode.Unavailable,
        `too many WebSocket sessions are open from this client address ` +
          `(at most ${settings.maxSessionsPerClient}); close one, or retry later`,
      ),
    };
    this.idleMs = settings.idleTimeout * 1000;
    this.maxMessage = settings.maxMessage;
    this.url = upstream.url;
    this.timeoutMs = upstream.timeoutMs;
    this.metrics = parts.metrics;
    this.clock = parts.clock;
    this.way = webSocketWay(settings.queryToken);
    const relay = (this.relay = new Relay<Opened>(this));
    this.behavior = {
      // permessage-deflate stays off (uWS's default): a node's answers would be inflated
      // twice, and compression ratios are a known side channel.
      //
      // The limit itself, so that a session holds no more than session-memory.ts counts: uWS
      // cuts a client whose frame or message is over it without a close frame (the client
      // sees 1006, not RFC 6455's 1009), rather than gather it first to refuse it whole.
      maxPayloadLength: settings.maxMessage,
      idleTimeout: settings.idleTimeout,
      sendPingsAutomatically: true,
      // Never reached while the upstream is paused at CLIENT_HIGH_WATER: what was read
      // before the pause (at most a message and a read's worth) still fits. Past it, uWS
      // would drop a message; closing the session is the honest answer.
      maxBackpressure: clientBackpressure(settings.maxMessage),
      closeOnBackpressureLimit: true,
      upgrade: (res, req, context) => this.upgrade(res, req, context),
      open: (ws) => relay.opened(ws),
      message: (ws, message, isBinary) => ws.getUserData().session.fromClient(message, isBinary),
      drain: (ws) => ws.getUserData().session.clientDrained(),
      close: (ws, code, message) => relay.closed(ws.getUserData().session, code, message),
    };
  }

  /** An upgrade request; call it from uWS's upgrade handler, before returning. */
  upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const { admission, settings, metrics, access } = this.parts;
    const path = req.getUrl();
    if (this.parts.routes.has(path)) return this.parts.router.handle(res, req);
    const method = req.getCaseSensitiveMethod();
    res = access !== null ? access.watch(res, req, method, path) : new CountedResponse(res, metrics);
    const decision = admission.admit(res, req, method, path, this.way);
    if (access !== null) judged(res, req, admission, decision, path);
    if (decision !== Decision.Admitted) {
      if (decision === Decision.Refused) metrics.wsRefusal(admission.outcome === Outcome.BadPath ? 'path' : 'token');
      return;
    }
    const { ticket, token } = admission;
    // Undefined, in this uWS, when the URL has no "?"; "" when it ends with one.
    let query = req.getQuery() as string | undefined;
    // The credential is the gate's alone: with the flag on, it never reaches the upstream.
    if (settings.queryToken && query !== undefined) query = withoutToken(query);
    const target = upstreamTarget(path, query);
    if (typeof target !== 'string') return this.refuseRequest(res, target);
    if (this.relay.stopped) return this.refuseSession(res, 'stopping', this.stoppingBody);
    let claims: Claims | undefined;
    if (token !== null) {
      // The claims the session is re-checked on. A token that ended since the gate's check is refused as the gate would.
      const inspected = this.parts.core.inspect(token, this.seconds());
      if (inspected.outcome !== Outcome.Valid) {
        metrics.wsRefusal('token');
        return writeRefusal(res, inspected.outcome as RefusedOutcome);
      }
      claims = inspected.claims;
    }
    // The client a trusted proxy names: behind one, every client would otherwise share the proxy's share.
    const client = clientAddress(res, req, this.parts.trusted);
    const keys: SessionKeys = { serial: claims?.serial ?? -1, client: clientKey(addressBytes(client, new Uint8Array(16))) };
    const opening = this.ledger.take(keys);
    if (opening !== Opening.Opened) return this.refuseSession(res, SHARE_REFUSALS[opening], this.tooMany[opening]);
    const peer = peerAddress(res);
    // X-Forwarded-Proto is the HTTP scheme (https under TLS) for an upgrade too, as nginx sends it.
    const list = upstreamHeaders(this.received.read(req), peer, this.parts.trusted.has(peer), this.parts.upstream.clientScheme);
    if (!Array.isArray(list)) {
      this.ledger.give(keys);
      return this.refuseRequest(res, list);
    }
    const key = req.getHeader('sec-websocket-key');
    const protocols = req
      .getHeader('sec-websocket-protocol')
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== '');
    const standing = claims === undefined ? null : this.parts.core.standing(claims);
    const opened: Opened = { path, client, keys, claims, standing, ticket, logged: loggedSession(res) };
    const handshake = new Handshake(this.relay, this, res, key, context, opened);
    handshake.start(target, protocols, list);
  }

  /** Ends every session (1001) and answers every handshake (503); resolves once the upstreams have closed, at most a second. */
  shutdown(): Promise<void> {
    return this.relay.shutdown();
  }

  /** Cuts whatever upstream socket is left; sessions still open end with their client. */
  close(): void {
    this.relay.close();
  }

  // What the relay's books report.

  handshakeStarted(): void {
    this.parts.inFlight.enter();
  }

  handshakeEnded(opened: Opened, session: boolean): void {
    if (!session) this.ledger.give(opened.keys);
    this.parts.inFlight.leave();
  }

  sessionClosed(session: Session<Opened>): void {
    this.ledger.give(session.opened.keys);
    session.opened.logged?.sessionEnded(session);
  }

  // What handshakes need.

  session(upstream: Upstream, opened: Opened): Session<Opened> {
    return new Session(this, upstream, opened);
  }

  refused(reason: WsRefusal): void {
    this.parts.metrics.wsRefusal(reason);
  }

  unsendable(res: HttpResponse, error: UpstreamWsError): void {
    this.refused('request');
    refuse(res, jsonLine(RpcCode.InvalidRequest, `the request cannot be forwarded: ${error.message}`));
  }

  upstreamStatus(res: HttpResponse, status: number, message: string): HandshakeRefusal {
    upstreamAnswered(res, status);
    const text =
      status >= 400
        ? `the upstream node refused the WebSocket upgrade (HTTP ${status})`
        : `the upstream node answered the WebSocket upgrade with HTTP ${status}, not 101`;
    return {
      reason: 'upstream status',
      status: status >= 400 ? statusLine(status, message) : '502 Bad Gateway',
      body: jsonLine(RpcCode.UpstreamUnavailable, text),
    };
  }

  answeredWrongly(error: Error): HandshakeRefusal {
    const body = jsonLine(RpcCode.UpstreamUnavailable, `the upstream node answered the WebSocket upgrade wrongly: ${error.message}`);
    return { reason: 'upstream status', status: '502 Bad Gateway', body };
  }

  /** The upstream did not answer a handshake: counted and logged as the proxy does. */
  upstreamFailed(error: Error, res: HttpResponse): HandshakeRefusal {
    this.watch.failed(error);
    const { status, body } = this.watch.answer(error, res);
    return { reason: classify(error) === 'timeout' ? 'upstream timeout' : 'upstream unreachable', status, body };
  }

  upstreamAnswered(): void {
    this.watch.answered();
  }

  // What sessions need.

  /**
   * A message of a session opened with a token that has limits or a method scope, judged
   * whole on the one reading of its calls: null when it goes on, else the JSON-RPC error
   * text to answer it with. A token with neither has its calls (one, or a batch's number)
   * counted in its usage, and goes on.
   */
  judge(opened: Opened, data: ArrayBuffer): string | null {
    if (opened.ticket !== null) {
      const { refusal } = this.parts.admission.bodies!.judge(opened.ticket, new Uint8Array(data), false, 'websocket');
      if (refusal === null) return null;
      this.refusedMessages.count(callRefusalReason(refusal));
      return refusal.text;
    }
    // No second verify: the session stands (checked before); only the usage is counted, as admit counts a limited token's.
    if (opened.claims !== undefined) this.parts.core.countUsage(opened.claims, callsIn(data), this.seconds());
    return null;
  }

  untracked(upstream: Upstream): void {
    this.relay.untracked(upstream);
  }

  endedText(outcome: RefusedOutcome): string {
    return REFUSALS[outcome][1];
  }

  /** A token's session ended with its token: one audit line, without the token or the query. */
  audit(opened: Opened, outcome: RefusedOutcome): void {
    const { claims } = opened;
    this.parts.log.info('audit', {
      method: 'websocket',
      outcome: OUTCOME_NAMES[outcome],
      client: opened.client,
      path: opened.path,
      ...(claims && { serial: claims.serial, generation: claims.generation }),
    });
  }

  /** The clock's time in Unix seconds, the core's unit. */
  seconds(): number {
    return Math.floor(this.parts.clock() / 1000);
  }

  /** The clock's time in milliseconds, the idle check's unit. */
  now(): number {
    return this.parts.clock();
  }

  /** A request that cannot be forwarded as it is: 400, as the proxy answers it. */
  private refuseRequest(res: HttpResponse, body: Uint8Array): void {
    this.parts.metrics.wsRefusal('request');
    refuse(res, body);
  }

  private refuseSession(res: HttpResponse, reason: WsRefusal, body: Uint8Array): void {
    this.parts.metrics.wsRefusal(reason);
    res.writeStatus('503 Service Unavailable').writeHeader('Content-Type', 'application/json').writeHeader('Retry-After', '1').end(body);
  }
}

/** The refusals' reasons in the metrics, by the bound that refused. */
const SHARE_REFUSALS: Readonly<Record<Exclude<Opening, Opening.Opened>, WsRefusal>> = {
  [Opening.Full]: 'limit',
  [Opening.TokenFull]: 'token limit',
  [Opening.ClientFull]: 'client limit',
};

/** What a session was opened with. */
export interface Opened {
  /** The path as the gate checked it (no query). */
  readonly path: string;
  /** Who asked, for the audit line: the peer, or the client a trusted proxy names. */
  readonly client: string;
  /** Its places in the process's ledger: its token's and its client address's. */
  readonly keys: SessionKeys;
  /** The token's claims, for the audit line; undefined when there is no token to check (a public path, or tokens not required). */
  readonly claims: Claims | undefined;
  /** The token's re-check (core.standing), run on every message; null without a token. */
  readonly standing: ((now: number) => Outcome) | null;
  /** What a token with limits or a method scope owes for each message: its calls judged; null for none. */
  readonly ticket: Ticket | null;
  /** The upgrade's access log line, which the session's end completes; null when not logged. */
  readonly logged: LoggedResponse | null;
}
