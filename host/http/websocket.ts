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
import type { HttpRequest, HttpResponse, us_socket_context_t, WebSocket, WebSocketBehavior } from 'uWebSockets.js';
import type { Clock } from '../clock.js';
import { Outcome, OUTCOME_NAMES } from '../core/core.js';
import type { Claims, Core } from '../core/core.js';
import { RpcCode } from '../errors.js';
import type { Logger } from '../ops/log.js';
import { TO_CLIENT, TO_UPSTREAM } from '../ops/metrics.js';
import type { Metrics, WsClose, WsRefusal } from '../ops/metrics.js';
import { judged, loggedSession, upstreamAnswered } from './access-log.js';
import type { AccessLog, LoggedResponse, SessionCounts } from './access-log.js';
import { CountedResponse } from './counted-response.js';
import { Decision, webSocketWay, withoutToken } from './admission.js';
import type { Admission, Way } from './admission.js';
import type { Ticket } from './body-admission.js';
import { callCount, readCalls } from '../rpc/reading.js';
import { addressBytes, clientAddress, peerAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import type { InFlight } from './in-flight.js';
import { classify, refuse, upstreamHeaders, upstreamTarget, UpstreamWatch } from './forwarding.js';
import { statusLine } from './proxy.js';
import type { UpstreamOptions } from './proxy.js';
import { REFUSALS, writeRefusal } from './refusals.js';
import type { RefusedOutcome } from './refusals.js';
import { jsonLine } from './responses.js';
import { clientKey, Opening, SessionLedger } from './session-ledger.js';
import { CLIENT_HIGH_WATER, CLIENT_LOW_WATER, clientBackpressure } from './ws-memory.js';
import type { SessionKeys } from './session-ledger.js';
import type { Router } from './router.js';
import type { Route } from './routes.js';
import { UpstreamWsCode, UpstreamWsError } from './upstream-ws/errors.js';
import { connectUpstream } from './upstream-ws/socket.js';
import type { HandshakeHandler, SessionHandler, UpstreamWebSocket as Upstream } from './upstream-ws/socket.js';

/** How often each thread re-checks the tokens of its sessions, and looks for a quiet upstream. */
export const RECHECK_MS = 250;
/** How long a stop waits for the upstreams to answer its close frames before it cuts them. */
const SHUTDOWN_MS = 1000;
/** How long a closed session's upstream may take to answer the close frame and end its connection. */
const UPSTREAM_CLOSE_MS = 2000;
/** uWS's reasons for closing a client itself (the close handler gets 1006 with these). */
const UWS_IDLE = 'WebSocket timed out from inactivity';
const UWS_TOO_BIG = 'Received too big message';
const STOPPING_TEXT = 'api-auth is stopping';
const TOKEN_ENDED = 'the client\'s token is no longer valid';

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

/**
 * A socket's user data. uWS copies the user data's own fields onto an object of its
 * own, so the session rides in a field rather than being the user data itself.
 */
export interface SessionData {
  readonly session: Session;
}

/** The uWS handlers of the relay, for `app.ws('/*', ...)`. */
export type SessionBehavior = WebSocketBehavior<SessionData>;

/** The relay of one thread: its upgrades, its sessions, and their checks. */
export class WebSocketRelay {
  readonly behavior: SessionBehavior;
  private readonly sessions = new Set<Session>();
  private readonly handshakes = new Set<Handshake>();
  /** Every upstream socket not yet closed, sessions' and handshakes' alike. */
  private readonly upstreams = new Set<Upstream>();
  private readonly watch: UpstreamWatch;
  private readonly ledger: SessionLedger;
  /** The 503 bodies of the bounds, by Opening. */
  private readonly tooMany: Readonly<Record<Exclude<Opening, Opening.Opened>, Uint8Array>>;
  private readonly stoppingBody = jsonLine(RpcCode.Unavailable, `${STOPPING_TEXT}; retry on another connection`);
  private readonly idleMs: number;
  private readonly way: Way;
  private sweeper: NodeJS.Timeout | null = null;
  private stopped = false;
  /** Called once the last upstream socket has closed, while a shutdown waits for that. */
  private allClosed: (() => void) | null = null;

  constructor(private readonly parts: RelayParts) {
    const { settings, upstream } = parts;
    this.watch = new UpstreamWatch(upstream.url, upstream.timeoutMs, upstream.health, parts.metrics, parts.log);
    this.ledger = new SessionLedger(settings.sessions, {
      maxSessions: settings.maxSessions, perToken: settings.maxSessionsPerToken, perClient: settings.maxSessionsPerClient,
    });
    this.tooMany = {
      [Opening.Full]: jsonLine(RpcCode.Unavailable, `too many WebSocket sessions are open (at most ${settings.maxSessions}); retry later`),
      [Opening.TokenFull]: jsonLine(RpcCode.Unavailable, `too many WebSocket sessions are open with this token ` +
        `(at most ${settings.maxSessionsPerToken}); close one, or retry later`),
      [Opening.ClientFull]: jsonLine(RpcCode.Unavailable, `too many WebSocket sessions are open from this client address ` +
        `(at most ${settings.maxSessionsPerClient}); close one, or retry later`),
    };
    this.idleMs = settings.idleTimeout * 1000;
    this.way = webSocketWay(settings.queryToken);
    this.behavior = {
      // permessage-deflate stays off (uWS's default): a node's answers would be inflated
      // twice, and compression ratios are a known side channel.
      //
      // The limit itself, so that a session holds no more than ws-memory.ts counts: uWS
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
      open: (ws) => this.opened(ws),
      message: (ws, message, isBinary) => ws.getUserData().session.fromClient(message, isBinary),
      drain: (ws) => ws.getUserData().session.clientDrained(),
      close: (ws, code, message) => this.closed(ws.getUserData().session, code, message),
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
    if (this.stopped) return this.refuseSession(res, 'stopping', this.stoppingBody);
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
    const list = upstreamHeaders(req, peer, this.parts.trusted.has(peer), this.parts.upstream.clientScheme);
    if (!Array.isArray(list)) {
      this.ledger.give(keys);
      return this.refuseRequest(res, list);
    }
    const key = req.getHeader('sec-websocket-key');
    const protocols = req.getHeader('sec-websocket-protocol').split(',').map((p) => p.trim()).filter((p) => p !== '');
    const standing = claims === undefined ? null : this.parts.core.standing(claims);
    const handshake = new Handshake(this, res, key, context, { path, client, keys, claims, standing, ticket, logged: loggedSession(res) });
    handshake.start(target, protocols, list);
  }

  /** Ends every session (1001) and answers every handshake (503); resolves once the upstreams have closed, SHUTDOWN_MS at most. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    for (const handshake of this.handshakes) handshake.refuse('stopping', '503 Service Unavailable', this.stoppingBody);
    for (const session of this.sessions) session.end('stopping', 1001, STOPPING_TEXT, 1001, STOPPING_TEXT);
    if (this.upstreams.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, SHUTDOWN_MS);
        timer.unref();
        this.allClosed = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.close();
  }

  /** Cuts whatever upstream socket is left; sessions still open end with their client. */
  close(): void {
    for (const upstream of this.upstreams) upstream.terminate();
    this.stopSweeper();
  }

  // What handshakes and sessions report.

  tracked(upstream: Upstream): void {
    this.upstreams.add(upstream);
  }

  /** An upstream socket has closed. */
  untracked(upstream: Upstream): void {
    this.upstreams.delete(upstream);
    if (this.upstreams.size === 0) this.allClosed?.();
  }

  handshakeStarted(handshake: Handshake): void {
    this.handshakes.add(handshake);
    this.parts.inFlight.enter();
  }

  /** A handshake is over; `session` false: it gave no session, and its place in the ledger is free again. */
  handshakeEnded(handshake: Handshake, session: boolean): void {
    this.handshakes.delete(handshake);
    if (!session) this.ledger.give(handshake.keys);
    this.parts.inFlight.leave();
  }

  refused(reason: WsRefusal): void {
    this.parts.metrics.wsRefusal(reason);
  }

  /** The upstream did not answer a handshake: counted and logged as the proxy does. */
  upstreamFailed(error: Error, res: HttpResponse): { readonly status: string; readonly body: Uint8Array } {
    this.watch.failed(error);
    return this.watch.answer(error, res);
  }

  upstreamAnswered(): void {
    this.watch.answered();
  }

  get url(): URL {
    return this.parts.upstream.url;
  }

  get settings(): WebSocketSettings {
    return this.parts.settings;
  }

  get timeoutMs(): number {
    return this.parts.upstream.timeoutMs;
  }

  get metrics(): Metrics {
    return this.parts.metrics;
  }

  /**
   * A message of a session opened with a token that has limits or a method scope, judged
   * whole on the one reading of its calls: null when it goes on, else the JSON-RPC error
   * text to answer it with.
   */
  judge(ticket: Ticket, data: ArrayBuffer): string | null {
    return this.parts.admission.bodies!.judge(ticket, new Uint8Array(data), false, 'websocket').refusal?.text ?? null;
  }

  /** A message of a session opened with a token with neither: its calls (one, or a batch's number) counted in the token's usage. */
  countMessage(claims: Claims, data: ArrayBuffer): void {
    this.parts.core.countUsage(claims, callsIn(data), this.seconds());
  }

  /** A token's session ended with its token: one audit line, without the token or the query. */
  audit(session: Session, outcome: RefusedOutcome): void {
    const { claims } = session.opened;
    this.parts.log.info('audit', {
      method: 'websocket', outcome: OUTCOME_NAMES[outcome], client: session.opened.client, path: session.opened.path,
      ...(claims && { serial: claims.serial, generation: claims.generation }),
    });
  }

  private opened(ws: WebSocket<SessionData>): void {
    const { session } = ws.getUserData();
    session.attach(ws);
    this.sessions.add(session);
    const metrics = this.parts.metrics;
    metrics.wsOpen++;
    metrics.wsOpened++;
    this.sweeper ??= setInterval(() => this.sweep(), RECHECK_MS).unref();
  }

  private closed(session: Session, code: number, message: ArrayBuffer): void {
    session.clientClosed(code, message);
    if (!this.sessions.delete(session)) return;
    this.ledger.give(session.opened.keys);
    const metrics = this.parts.metrics;
    metrics.wsOpen--;
    metrics.wsClose(session.closeReason);
    session.opened.logged?.sessionEnded(session);
    if (this.sessions.size === 0) this.stopSweeper();
  }

  /**
   * Every RECHECK_MS while sessions are open: the tokens and the upstreams' silence, both
   * at the clock's time (the client's silence is uWS's, on its own timer).
   */
  private sweep(): void {
    const moment = this.parts.clock();
    for (const session of this.sessions) {
      if (session.stands()) session.watch(moment, this.idleMs);
    }
  }

  private stopSweeper(): void {
    if (this.sweeper === null) return;
    clearInterval(this.sweeper);
    this.sweeper = null;
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
  [Opening.Full]: 'limit', [Opening.TokenFull]: 'token limit', [Opening.ClientFull]: 'client limit',
};

/** What a session was opened with. */
interface Opened {
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

/** An upgrade waiting for the upstream: the client's 101 once the upstream accepts, or the HTTP error it earned. */
class Handshake implements HandshakeHandler {
  private upstream: Upstream | null = null;
  private timer: NodeJS.Timeout | undefined;
  private settled = false;

  constructor(private readonly relay: WebSocketRelay, private readonly res: HttpResponse, private readonly key: string,
    private readonly context: us_socket_context_t, private readonly opened: Opened) {}

  get keys(): SessionKeys {
    return this.opened.keys;
  }

  /** `headers`: the proxy's flat [name, value, ...] list; the handshake's own fields are the upstream socket's to write. */
  start(target: string, protocols: string[], headers: readonly string[]): void {
    const { relay, res } = this;
    relay.handshakeStarted(this);
    res.onAborted(() => this.clientGone());
    let upstream: Upstream;
    try {
      // The target goes out byte for byte, as the proxy's does.
      upstream = connectUpstream({
        url: relay.url, target, protocols, headers, maxMessage: relay.settings.maxMessage, closeTimeoutMs: UPSTREAM_CLOSE_MS,
      }, this);
    } catch (error) {
      if (!(error instanceof UpstreamWsError)) throw error;
      // A subprotocol list or a header value that cannot be sent as it is: the client's own mistake.
      this.settle(false);
      relay.refused('request');
      refuse(res, jsonLine(RpcCode.InvalidRequest, `the request cannot be forwarded: ${error.message}`));
      return;
    }
    this.upstream = upstream;
    relay.tracked(upstream);
    this.timer = setTimeout(() => this.timedOut(), relay.timeoutMs);
  }

  /** Answers the client with an HTTP error: the upstream is cut, and the place in the count freed. */
  refuse(reason: WsRefusal, status: string, body: Uint8Array): void {
    if (!this.settle(false)) return;
    this.upstream?.terminate();
    this.relay.refused(reason);
    this.res.cork(() => this.res.writeStatus(status).writeHeader('Content-Type', 'application/json').end(body));
  }

  accepted(upstream: Upstream): void {
    if (!this.settle(true)) return;
    this.relay.upstreamAnswered();
    const session = new Session(this.relay, upstream, this.opened);
    // Not within res.cork(), as uWS would have it: in this uWS, cork() after an
    // upgrade from outside its own callbacks may read the new WebSocket's memory as the
    // HTTP response's state and close the socket it just opened (uNetworking/uWebSockets
    // #1928, fixed by #1929, in no uWebSockets.js release yet). Uncorked, the 101 costs
    // a few more writes, and uWS prints a warning about it to stderr.
    // uWS calls the open handler within upgrade(), so the session is attached before any message can come.
    this.res.upgrade<SessionData>({ session }, this.key, upstream.protocol, '', this.context);
  }

  unexpected(status: number, message: string): void {
    upstreamAnswered(this.res, status);
    const text = status >= 400
      ? `the upstream node refused the WebSocket upgrade (HTTP ${status})`
      : `the upstream node answered the WebSocket upgrade with HTTP ${status}, not 101`;
    this.refuse('upstream status', status >= 400 ? statusLine(status, message) : '502 Bad Gateway', jsonLine(RpcCode.UpstreamUnavailable, text));
  }

  failed(error: Error, answered: boolean): void {
    if (this.settled) return;
    if (answered) {
      // It answered 101, but not as the handshake asked (a subprotocol not offered, a wrong accept key).
      const body = jsonLine(RpcCode.UpstreamUnavailable, `the upstream node answered the WebSocket upgrade wrongly: ${error.message}`);
      this.refuse('upstream status', '502 Bad Gateway', body);
      return;
    }
    const { status, body } = this.relay.upstreamFailed(error, this.res);
    this.refuse(classify(error) === 'timeout' ? 'upstream timeout' : 'upstream unreachable', status, body);
  }

  private timedOut(): void {
    const error = Object.assign(new Error('the WebSocket handshake timed out'), { code: 'ETIMEDOUT' });
    const { status, body } = this.relay.upstreamFailed(error, this.res);
    this.refuse('upstream timeout', status, body);
  }

  closed(): void {
    this.relay.untracked(this.upstream!);
  }

  private clientGone(): void {
    // Settled once the upstream accepted: its socket is then the session's to close.
    if (!this.settle(false)) return;
    this.upstream?.terminate();
  }

  /** Settles once: false when it was settled already. */
  private settle(session: boolean): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearTimeout(this.timer);
    this.relay.handshakeEnded(this, session);
    return true;
  }
}

/** A client message waiting for the upstream. */
interface Waiting {
  readonly data: Buffer;
  readonly binary: boolean;
}

/** One relayed session: the client's socket (uWS) and the upstream's (upstream-ws), and what it was opened with. */
export class Session implements SessionHandler, SessionCounts {
  /** Messages relayed and their payload bytes: in from the client to the upstream, out to the client. */
  messagesIn = 0;
  messagesOut = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** The client's socket, from its open to its close; uWS throws on any use of it after that. */
  private client: WebSocket<SessionData> | null = null;
  /** Set once, by whatever ended the session first; what comes after is the echo of that end. */
  private ended = false;
  closeReason: WsClose = 'client';
  /** The upstream is not read while the client catches up. */
  private paused = false;
  /**
   * Something arrived from the upstream since the last sweep; since when it has been
   * quiet, by the clock (from the moment it accepted the session); whether it was pinged since.
   */
  private heard = false;
  private quietSince: number;
  private pinged = false;
  /** The message being handed to the client, for the corked send (made once per session, not per message). */
  private outgoing: Buffer | null = null;
  private outgoingBinary = false;
  private readonly sendCorked = (): void => this.send();
  /** Client messages waiting for the upstream's socket to hold nothing, from `head` on; their bytes. */
  private queue: Array<Waiting | undefined> = [];
  private head = 0;
  private queuedBytes = 0;
  /** The close frame for the upstream, held back while client messages wait to go before it. */
  private closing: { code: number; text: string } | null = null;
  /** Cuts the upstream when the messages before a held close have not gone within UPSTREAM_CLOSE_MS. */
  private closingTimer: NodeJS.Timeout | undefined;
  /** The data of the latest ping from the upstream, not yet answered because its socket was not empty. */
  private owedPong: Buffer | null = null;
  /**
   * The callback of every write this session makes to the upstream (messages, pings,
   * pongs): the last of them to go finds the socket empty and hands it the next message.
   */
  private readonly written = (): void => this.flush();

  constructor(private readonly relay: WebSocketRelay, private readonly upstream: Upstream, readonly opened: Opened) {
    this.quietSince = relay.now();
    upstream.listen(this);
  }

  attach(client: WebSocket<SessionData>): void {
    this.client = client;
  }

  /** A message from the client; `data` is uWS's memory, valid only during this call. */
  fromClient(data: ArrayBuffer, isBinary: boolean): void {
    if (this.ended) return;
    const upstream = this.upstream;
    const max = this.relay.settings.maxMessage;
    // No message over `max` comes: uWS cuts the client first (maxPayloadLength).
    if (this.queuedBytes + upstream.bufferedAmount > max) {
      this.end('backpressure', 1013, 'the upstream node is not keeping up; try again later', 0, '');
      return;
    }
    if (!this.stands()) return;
    const ticket = this.opened.ticket;
    if (ticket !== null) {
      const refusal = this.relay.judge(ticket, data);
      if (refusal !== null) {
        // Within uWS's message callback, which is corked already.
        this.client?.send(refusal, false);
        return;
      }
    } else if (this.opened.claims !== undefined) {
      // No second verify: the session stands (checked above); only the usage is counted, as admit counts a limited token's.
      this.relay.countMessage(this.opened.claims, data);
    }
    if (this.head === this.queue.length && upstream.bufferedAmount === 0) {
      // uWS's memory goes to the upstream socket as it is, not copied first: send() masks it
      // into a frame of its own before it returns (a client's frames are always masked).
      this.write(new Uint8Array(data), isBinary);
    } else {
      // Held past this callback, after which uWS reuses its memory.
      const copy = Buffer.allocUnsafe(data.byteLength);
      copy.set(new Uint8Array(data));
      this.queue.push({ data: copy, binary: isBinary });
      this.queuedBytes += copy.length;
    }
  }

  /**
   * Whether the session's token still stands (always, without one). When it does not,
   * the session ends, and nothing it holds for the upstream is written any more.
   */
  stands(): boolean {
    const standing = this.opened.standing;
    if (standing === null) return true;
    const outcome = standing(this.relay.seconds());
    if (outcome === Outcome.Valid) return true;
    this.tokenEnded(outcome as RefusedOutcome);
    return false;
  }

  clientDrained(): void {
    if (this.paused && this.client !== null && this.client.getBufferedAmount() < CLIENT_LOW_WATER) {
      this.paused = false;
      this.upstream.resume();
    }
  }

  /** uWS closed the client's socket, at the client's word, its own (idle, too big), or this session's. */
  clientClosed(code: number, message: ArrayBuffer): void {
    this.client = null;
    if (this.ended) return;
    this.ended = true;
    const text = Buffer.from(message).toString('utf8');
    if (code === 1006 && text === UWS_IDLE) {
      this.closeReason = 'idle';
      this.closeUpstream(1001, 'the client stopped answering');
    } else if (code === 1006 && text.startsWith(UWS_TOO_BIG)) {
      this.closeReason = 'too big';
      this.closeUpstream(1001, `the client sent a message over ${this.relay.settings.maxMessage} bytes`);
    } else if (code === 1006) {
      this.closeUpstream(1001, 'the client went away');
    } else {
      this.closeUpstream(code, text);
    }
  }

  /**
   * The token this session was opened with is no longer valid. The messages waiting for
   * the upstream are dropped, and an upstream socket still holding part of one is cut
   * (its unwritten bytes go with it) rather than sent a close frame after them.
   */
  private tokenEnded(outcome: RefusedOutcome): void {
    this.drop();
    this.closing = null;
    clearTimeout(this.closingTimer);
    const cut = this.upstream.bufferedAmount > 0;
    if (this.ended) {
      // The client had gone, and its last messages were waiting.
      if (cut) this.upstream.terminate();
      else this.closeUpstream(1001, TOKEN_ENDED);
      return;
    }
    this.relay.audit(this, outcome);
    this.end('token', 1008, REFUSALS[outcome][1], cut ? 0 : 1001, TOKEN_ENDED);
  }

  /** The sweep: an upstream quiet for half the idle timeout is pinged, and one quiet for all of it is gone. */
  watch(moment: number, idleMs: number): void {
    if (this.heard) {
      this.heard = false;
      this.pinged = false;
      this.quietSince = moment;
      return;
    }
    const quiet = moment - this.quietSince;
    if (quiet >= idleMs) {
      this.end('idle', 1001, 'the upstream node stopped answering', 0, '');
    } else if (quiet >= idleMs / 2 && !this.pinged && this.upstream.open) {
      this.pinged = true;
      this.upstream.ping(this.written);
    }
  }

  /**
   * Ends the session from here: the client gets `code` and `text`; the upstream gets
   * `upstreamCode` and its text, or with 0 is cut (it is not reading, or not there).
   */
  end(reason: WsClose, code: number, text: string, upstreamCode: number, upstreamText: string): void {
    if (this.ended) return;
    this.ended = true;
    this.closeReason = reason;
    if (upstreamCode === 0) {
      this.drop();
      this.upstream.terminate();
    } else {
      this.closeUpstream(upstreamCode, upstreamText);
    }
    // uWS runs the close handler within end(): the relay counts the session closed there.
    this.client?.end(code, text);
  }

  /** A message from the upstream; `data` may be the upstream socket's read buffer, valid only during this call (uWS copies it in send()). */
  message(data: Buffer, isBinary: boolean): void {
    this.heard = true;
    if (this.ended || this.client === null) return;
    this.outgoing = data;
    this.outgoingBinary = isBinary;
    this.client.cork(this.sendCorked);
    const metrics = this.relay.metrics;
    metrics.wsMessages[TO_CLIENT]++;
    metrics.wsBytes[TO_CLIENT] += data.length;
    this.messagesOut++;
    this.bytesOut += data.length;
  }

  private send(): void {
    const client = this.client!;
    const data = this.outgoing!;
    this.outgoing = null;
    client.send(data, this.outgoingBinary);
    if (!this.paused && client.getBufferedAmount() > CLIENT_HIGH_WATER) {
      this.paused = true;
      this.upstream.pause();
    }
  }

  ping(data: Buffer): void {
    this.heard = true;
    if (this.upstream.bufferedAmount > 0) {
      // An upstream that does not read its pongs must not make them pile up here: while
      // its socket holds anything, only the latest ping is owed an answer (RFC 6455
      // §5.5.3), sent once the socket is empty. Copied: the read buffer is reused.
      this.owedPong = Buffer.from(data);
      return;
    }
    // Framed before pong() returns: the read buffer may be reused after this call.
    this.upstream.pong(data, this.written);
  }

  alive(): void {
    this.heard = true;
  }

  closed(code: number, reason: string, error: Error | null): void {
    clearTimeout(this.closingTimer);
    this.relay.untracked(this.upstream);
    if (this.ended) return;
    if (error instanceof UpstreamWsError && error.code === UpstreamWsCode.TooBig) {
      this.end('too big', 1009, `the upstream node sent a message over ${this.relay.settings.maxMessage} bytes`, 0, '');
    } else if (code === 1005) {
      this.end('upstream', 1005, '', 0, '');
    } else if (code === 1006 || !sendable(code)) {
      this.end('upstream', 1011, 'the upstream node closed the connection', 0, '');
    } else {
      this.end('upstream', code, reason, 0, '');
    }
  }

  /** A client message to the upstream, now: its socket holds nothing else. */
  private write(data: Uint8Array, binary: boolean): void {
    this.upstream.send(data, binary, this.written);
    const metrics = this.relay.metrics;
    metrics.wsMessages[TO_UPSTREAM]++;
    metrics.wsBytes[TO_UPSTREAM] += data.byteLength;
    this.messagesIn++;
    this.bytesIn += data.byteLength;
  }

  /** Hands the upstream the waiting messages while its socket takes them whole, each once the token is checked again; then the held close. */
  private flush(): void {
    const upstream = this.upstream;
    const owed = this.owedPong;
    if (owed !== null && upstream.bufferedAmount === 0) {
      this.owedPong = null;
      if (upstream.open) return upstream.pong(owed, this.written);
    }
    const queue = this.queue;
    while (this.head < queue.length) {
      if (!upstream.open) return this.drop();
      if (upstream.bufferedAmount > 0 || !this.stands()) return;
      const waiting = queue[this.head]!;
      queue[this.head++] = undefined;
      this.queuedBytes -= waiting.data.length;
      this.write(waiting.data, waiting.binary);
    }
    this.drop();
    const closing = this.closing;
    if (closing === null) return;
    this.closing = null;
    clearTimeout(this.closingTimer);
    this.closeUpstream(closing.code, closing.text);
  }

  /** The messages before the held close did not go in time: they are dropped, and the upstream cut. */
  private cutClosing(): void {
    this.closing = null;
    this.drop();
    this.upstream.terminate();
  }

  /** Forgets the waiting messages. */
  private drop(): void {
    if (this.queue.length === 0) return;
    this.queue = [];
    this.head = 0;
    this.queuedBytes = 0;
  }

  /**
   * A close frame to the upstream with a code that may be sent (1005 and 1006 only
   * describe closes; they are never sent), after the client messages still waiting.
   */
  private closeUpstream(code: number, text: string): void {
    const upstream = this.upstream;
    if (!upstream.open) return;
    if (this.head < this.queue.length) {
      this.closing = { code, text };
      // An upstream that stops reading would otherwise hold its socket, and the messages
      // queued for it, for as long as the process lives: it gets as long as a close
      // handshake would, then it is cut with what it still holds.
      this.closingTimer ??= setTimeout(() => this.cutClosing(), UPSTREAM_CLOSE_MS);
      return;
    }
    if (code === 1005 || sendable(code)) upstream.close(code, text);
    else upstream.close(1011, 'the client closed with a code that cannot be relayed');
  }
}

/**
 * The calls a message of a token without limits or scope holds, as its usage counts them:
 * a batch its number, anything else (a lone call, or a message that cannot be read) 1.
 * Only a message that starts with "[" is read, so that a session of single calls pays no
 * reading for its usage.
 */
function callsIn(data: ArrayBuffer): number {
  const bytes = new Uint8Array(data);
  let i = 0;
  // JSON's whitespace: space, tab, line feed, carriage return.
  while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x09 || bytes[i] === 0x0a || bytes[i] === 0x0d)) i++;
  return bytes[i] === 0x5b ? callCount(readCalls(bytes)) : 1;
}

/** Whether a close code may go in a close frame (RFC 6455 §7.4): 1000-1003, 1007-1014, 3000-4999. */
function sendable(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

