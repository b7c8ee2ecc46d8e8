// The reverse proxy behind the gate: an authorised request goes to the same path on the
// upstream node, and the upstream's answer comes back as it was sent. The HTTP/1.1 client
// is api-auth's own (upstream/): each thread keeps its connections to the upstream alive,
// reads them into one preallocated buffer, writes each request in one go, and reads the
// answers with a strict parser that hands out offsets (upstream/parser.ts): an answer it
// refuses is a 502, and its connection is never used again. With --upstream-pipelining N
// a connection carries up to N requests at once (upstream/pool.ts). Bodies stream both
// ways with backpressure: a slow client pauses the upstream's answer, which is never held
// whole in memory; a slow upstream pauses the reading of the client's request body. uWS
// stops reading only some way after pause(), so what a request body may hold in memory
// is bounded by the body limit rather than by the pause.
//
// The request's target and headers (which go upstream, which are believed, byte for
// byte) are built by forwarding.ts, as for a WebSocket upgrade; so are the answers to an
// upstream that does not answer, and their log.
//
// What cannot be written as a request (a header value with control bytes, two
// Content-Length, a method that is not a token) is the client's own mistake: 400, and
// no word of it in the upstream's errors, metrics or health.
//
// A token with limits or a method scope (the router hands over its ticket) is the one
// exception to streaming: its request body is read whole first, up to the body limit,
// and judged on the one reading of its calls (body-admission.ts): only then are the bytes
// received, exactly those, sent upstream. A refused body sends the upstream nothing at
// all; of a batch with some calls allowed, only those are sent, as a batch, and the
// upstream's answer is read whole and merged with the refused calls' errors. Tokens with
// neither are streamed as before, and cost nothing more.
//
// This file makes a request's head (proxy/head.ts) and picks its exchange's mode, one a
// file in proxy/: sent whole with its answer streamed (streamed.ts), a body streamed from
// the client (streaming.ts), a split batch merged with its refusals (split.ts). It hands
// each exchange the relay (proxy/exchange.ts), the one way an exchange reaches http/.
import { systemClock, systemTimer } from '../clock.js';
import type { Clock } from '../clock.js';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { bodyRead, upstreamAnswered } from './access-log.js';
import type { BodyAdmission, Ticket } from './body-admission.js';
import { peerAddress } from './client-address.js';
import type { TrustedProxies } from '../addresses.js';
import { BodyTooLargeError, ClientGoneError, LimitRefusedError, RpcCode, ScopeRefusedError } from '../errors.js';
import type { Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import type { InFlight } from './in-flight.js';
import { writeCorsHeaders } from './cors.js';
import { connectionTokens, HOP_BY_HOP, ReceivedHeaders, refuse, upstreamHeaders, upstreamTarget, UpstreamWatch } from './forwarding.js';
import type { UpstreamHealth } from './forwarding.js';
import { writeCallRefusal } from './refusals.js';
import { withoutToken } from './admission.js';
import { jsonLine, writeBodyTooLarge } from './responses.js';
import { AnswerHeads } from './proxy/answer-head.js';
import { loneCallId } from './proxy/exchange.js';
import type { Exchange, Relay } from './proxy/exchange.js';
import { requestHead, Unwritable, withBody } from './proxy/head.js';
import { SPLIT_ANSWER_MAX, SplitExchange } from './proxy/split.js';
import { StreamedExchange } from './proxy/streamed.js';
import { StreamingExchange } from './proxy/streaming.js';
import { UpstreamPool } from './upstream/pool.js';

export { statusLine } from './proxy/answer-head.js';

/** Connections kept open to the upstream at most; requests past that wait for one. */
export const UPSTREAM_CONNECTIONS = 128;

export interface UpstreamOptions {
  /** The upstream's origin (scheme, host, port). */
  readonly url: URL;
  /** How long the upstream may take to start answering, and to send each next part of its answer. */
  readonly timeoutMs: number;
  /** The largest request body forwarded, in bytes; larger ones get 413. */
  readonly maxBody: number;
  /** Whether the upstream answers, as every thread's proxy saw it last; by default this proxy's own. */
  readonly health?: UpstreamHealth;
  /** How clients reach api-auth, for X-Forwarded-Proto: 'https' when it serves TLS itself. */
  readonly clientScheme: 'http' | 'https';
  /** Requests on one upstream connection at once (--upstream-pipelining); 1, the default, for none. */
  readonly pipelining?: number;
  /** --api-auth-query-token: the query's access_token is the gate's, and is taken out of every request forwarded. */
  readonly queryToken?: boolean;
}

/** Methods whose request a body is expected with: sent without one, they say Content-Length: 0. */
const EXPECTS_BODY = new Set(['PUT', 'POST', 'PATCH', 'QUERY', 'PROPFIND', 'PROPPATCH']);
/** RFC 9110 §9.2.2's idempotent methods: one of them may be sent again after the upstream may have read it (upstream/pool.ts). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

// Never sent back: uWS writes its own Date and Content-Length (from the body it sends);
// Proxy-Authenticate would ask the client for credentials this proxy does not take; CORS
// is api-auth's (--http-allowed-origins, cors.ts): an upstream's own would let an origin
// in that the gateway keeps out, or send the header twice, which browsers refuse.
const RESPONSE_DROPPED = new Set([
  ...HOP_BY_HOP,
  'date',
  'proxy-authenticate',
  'access-control-allow-origin',
  'access-control-allow-credentials',
  'access-control-expose-headers',
  'access-control-allow-methods',
  'access-control-allow-headers',
  'access-control-max-age',
]);

export class UpstreamProxy {
  private readonly pool: UpstreamPool;
  private readonly relay: Relay;
  /** The Host line and the keep-alive line of every request, made once. */
  private readonly hostLines: string;
  private readonly watch: UpstreamWatch;
  /** The 413 body of a request body over the limit. */
  private readonly tooLarge: Uint8Array;
  /** Each request's header lines, read once in its handler. */
  private readonly received = new ReceivedHeaders();

  constructor(
    private readonly options: UpstreamOptions,
    private readonly trusted: TrustedProxies,
    private readonly inFlight: InFlight,
    metrics: Metrics,
    log: Logger,
    private readonly bodies: BodyAdmission | null = null,
    clock: Clock = systemClock,
  ) {
    const pool = new UpstreamPool({
      url: options.url,
      timeoutMs: options.timeoutMs,
      connectTimeoutMs: Math.min(options.timeoutMs, 10_000),
      maxConnections: UPSTREAM_CONNECTIONS,
      pipelining: options.pipelining ?? 1,
      clock,
    });
    this.pool = pool;
    this.hostLines = `HTTP/1.1\r\nhost: ${options.url.host}\r\nconnection: keep-alive\r\n`;
    const watch = (this.watch = new UpstreamWatch(options.url, options.timeoutMs, options.health, metrics, log));
    const tooLarge = jsonLine(RpcCode.InvalidRequest, `request body exceeds ${options.maxBody} bytes`);
    this.tooLarge = tooLarge;
    this.relay = {
      dispatch: (exchange) => {
        exchange.dispatchedAt = systemTimer();
        pool.dispatch(exchange);
      },
      withdraw: (exchange) => pool.withdraw(exchange),
      maxBody: options.maxBody,
      tooLarge: (res) => writeBodyTooLarge(res, tooLarge),
      switched: jsonLine(RpcCode.UpstreamUnavailable, 'the upstream node switched protocols, which api-auth does not relay'),
      splitTooLarge: jsonLine(
        RpcCode.UpstreamUnavailable,
        `the upstream node's answer to the allowed calls of a batch exceeds ` +
          `${SPLIT_ANSWER_MAX} bytes, the most api-auth merges with the refused calls' errors: send the calls the token allows apart`,
      ),
      failure: (error, res, id) => watch.answer(error, res, id),
      answered: (res, status, milliseconds) => {
        metrics.observeUpstream(milliseconds);
        upstreamAnswered(res, status);
      },
      cors: writeCorsHeaders,
      heads: new AnswerHeads(RESPONSE_DROPPED, (connection) => connectionTokens(connection, RESPONSE_DROPPED)),
      settle: (error) => this.settled(error),
    };
  }

  /**
   * Forwards the request (`path` as the gate checked it, `method` as received); call it
   * from the uWS handler, before returning. `allowOrigin`: the CORS origin the answer is
   * for (cors.ts), "" for none. `ticket`: what a request with a body of a token with
   * limits or a method scope still owes its admission: its body is read whole and its
   * calls judged before anything is sent; null for none.
   */
  forward(res: HttpResponse, req: HttpRequest, path: string, method: string, allowOrigin = '', ticket: Ticket | null = null): void {
    const received = this.received.read(req);
    const declared = received.contentLength;
    if (declared !== '' && !(Number(declared) <= this.options.maxBody)) {
      // The body is not read, so the connection cannot carry another request.
      writeBodyTooLarge(res, this.tooLarge);
      return;
    }
    // Undefined, in this uWS, when the URL has no "?"; "" when it ends with one.
    let query = req.getQuery() as string | undefined;
    // The credential is the gate's alone, as on a WebSocket upgrade: a request that carries
    // it here (beside its header, or on a public path) does not hand it to the upstream.
    if (this.options.queryToken === true && query !== undefined) query = withoutToken(query);
    const target = upstreamTarget(path, query);
    if (typeof target !== 'string') return refuse(res, target);
    const peer = peerAddress(res);
    const headers = upstreamHeaders(received, peer, this.trusted.has(peer), this.options.clientScheme);
    if (!Array.isArray(headers)) return refuse(res, headers);
    const head = requestHead(method, target, this.hostLines, headers);
    if (head instanceof Unwritable) return refuse(res, jsonLine(RpcCode.InvalidRequest, `the request cannot be forwarded: ${head.why}`));
    const hasBody = received.codings > 0 || (declared !== '' && declared !== '0');
    const isHead = method === 'HEAD';
    const idempotent = IDEMPOTENT.has(method);
    this.inFlight.enter();
    if (!hasBody) {
      const exchange = new StreamedExchange(this.relay, res, isHead, idempotent, allowOrigin);
      res.onAborted(() => exchange.clientGone());
      exchange.send(Buffer.from(`${head}${EXPECTS_BODY.has(method) ? 'content-length: 0\r\n' : ''}\r\n`, 'latin1'));
      return;
    }
    if (ticket === null) {
      const exchange = new StreamingExchange(this.relay, res, isHead, idempotent, allowOrigin, head, declared);
      res.onAborted(() => exchange.clientGone());
      res.onData((chunk, isLast) => exchange.requestData(chunk, isLast));
      return;
    }
    // A split batch's answer is merged with the refusals, so it must come as JSON text: its head asks for no coding.
    const judged = new JudgedBody(
      this.relay,
      this.bodies!,
      res,
      isHead,
      idempotent,
      allowOrigin,
      ticket,
      head,
      () => requestHead(method, target, this.hostLines, headers, true) as string,
    );
    res.onAborted(() => judged.clientGone());
    res.onData((chunk, isLast) => judged.data(chunk, isLast));
  }

  /** Closes the upstream connections; requests still under way fail. */
  async close(): Promise<void> {
    this.pool.close();
  }

  /** Each exchange's end: out of flight, and the upstream's health as it showed. */
  private settled(error: Error | null): void {
    this.inFlight.leave();
    if (error === null) return this.watch.answered();
    if (
      error instanceof ClientGoneError ||
      error instanceof BodyTooLargeError ||
      error instanceof ScopeRefusedError ||
      error instanceof LimitRefusedError
    )
      return;
    this.watch.failed(error);
  }
}

/**
 * The body of a request with a ticket: held until its last chunk, then judged on the
 * one reading of its calls (body-admission.ts), and only then sent, as received, or as
 * the scope split it (split.ts); a refused body sends the upstream nothing at all.
 */
class JudgedBody {
  /** The body so far, and its length. */
  private chunks: Buffer[] | null = null;
  private received = 0;
  /** The body was refused, or the client went away, before an exchange took over. */
  private closed = false;
  /** The exchange the judged body went on; null until then. */
  private exchange: Exchange | null = null;

  /**
   * `requestHead`: the request's head (head.ts); `identityHead` makes it without the
   * client's Accept-Encoding, for a split batch only.
   */
  constructor(
    private readonly relay: Relay,
    private readonly bodies: BodyAdmission,
    private readonly res: HttpResponse,
    private readonly head: boolean,
    private readonly idempotent: boolean,
    private readonly allowOrigin: string,
    private readonly ticket: Ticket,
    private readonly requestHead: string,
    private readonly identityHead: () => string,
  ) {}

  clientGone(): void {
    if (this.exchange !== null) return this.exchange.clientGone();
    if (this.closed) return;
    this.closed = true;
    this.relay.settle(new ClientGoneError());
  }

  /** A chunk of the body, as uWS hands it over. */
  data(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.closed) return;
    this.received += chunk.byteLength;
    if (this.received > this.relay.maxBody) {
      this.chunks = null;
      this.closed = true;
      this.res.cork(() => this.relay.tooLarge(this.res));
      this.relay.settle(new BodyTooLargeError());
      return;
    }
    // uWS reuses the chunk's memory once this callback returns.
    const copy = Buffer.allocUnsafe(chunk.byteLength);
    copy.set(new Uint8Array(chunk));
    if (!isLast) {
      (this.chunks ??= []).push(copy);
      return;
    }
    const body = this.chunks === null ? copy : Buffer.concat([...this.chunks, copy], this.received);
    this.chunks = null;
    const res = this.res;
    // A HEAD's answer has no body to merge a split batch's refusals into: its batch goes whole or not at all.
    const judged = this.bodies.judge(this.ticket, body, !this.head, 'http');
    bodyRead(res, judged.reading);
    const { refusal, split } = judged;
    if (refusal !== null) {
      this.closed = true;
      res.cork(() => writeCallRefusal(res, refusal, this.head, this.allowOrigin));
      this.relay.settle(refusal.error);
      return;
    }
    const exchange = (this.exchange =
      split === null
        ? new StreamedExchange(this.relay, res, this.head, this.idempotent, this.allowOrigin)
        : new SplitExchange(this.relay, res, this.head, this.idempotent, this.allowOrigin, split));
    exchange.callId = loneCallId(judged.reading);
    exchange.send(split === null ? withBody(this.requestHead, body) : withBody(this.identityHead(), split.forward));
  }
}
