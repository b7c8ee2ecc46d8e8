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
import { systemClock, systemTimer } from '../clock.js';
import type { Clock } from '../clock.js';
import { STATUS_CODES } from 'node:http';
import type { HttpRequest, HttpResponse, RecognizedString } from 'uWebSockets.js';
import { bodyRead, upstreamAnswered } from './access-log.js';
import type { BodyAdmission, Ticket } from './body-admission.js';
import { peerAddress } from './client-address.js';
import type { TrustedProxies } from '../addresses.js';
import { BodyTooLargeError, ClientGoneError, LimitRefusedError, RpcCode, ScopeRefusedError, UpstreamError } from '../errors.js';
import { readCalls } from '../rpc/reading.js';
import type { Reading } from '../rpc/reading.js';
import type { Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import type { InFlight } from './in-flight.js';
import { writeCorsHeaders } from './cors.js';
import { connectionTokens, HOP_BY_HOP, refuse, upstreamHeaders, upstreamTarget, UpstreamWatch } from './forwarding.js';
import type { UpstreamHealth } from './forwarding.js';
import { writeCallRefusal } from './refusals.js';
import { withoutToken } from './admission.js';
import { jsonLine, writeBodyTooLarge } from './responses.js';
import type { ScopeSplit } from './scope.js';
import { equalsIgnoringCase, FIELD, Framing, type ResponseParser } from './upstream/parser.js';
import { UpstreamPool, type Connection, type UpstreamRequest } from './upstream/pool.js';

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


/**
 * What every exchange of one proxy is given, made once with the proxy: the collaborators
 * an exchange works with, as undici hands a handler its dispatch, rather than the proxy
 * itself.
 */
interface Relay {
  /** Sends a request upstream: on an idle connection, pipelined, on a new one, or when one is freed. */
  readonly dispatch: (exchange: Exchange) => void;
  /** Takes back a request still waiting for a connection; false when it has one. */
  readonly withdraw: (exchange: Exchange) => boolean;
  /** The largest request body forwarded, in bytes. */
  readonly maxBody: number;
  /** The 413 body of a request body over the limit. */
  readonly tooLarge: Uint8Array;
  /** The 502 body of an answer that switched protocols. */
  readonly switched: Uint8Array;
  /** The 502 body of a split batch's answer over SPLIT_ANSWER_MAX. */
  readonly splitTooLarge: Uint8Array;
  /** The status and body that tell the client why the upstream did not answer. */
  /** The answer to an upstream failure on `res`; `id`: the source text of the request's one call's id, to echo (null for none). */
  readonly failure: (error: Error, res: HttpResponse, id: string | null) => { status: string; body: Uint8Array };
  /** The upstream answered a request `milliseconds` after its dispatch. */
  readonly answered: (milliseconds: number) => void;
  /** Called once per exchange, with what ended it (null: the whole answer was relayed). */
  readonly settle: (error: Error | null) => void;
  /** Where the calls of a body with a ticket are judged; null when there are no tokens. */
  readonly bodies: BodyAdmission | null;
}

/** What a request head cannot hold: a method or a header name that is not a token, a value with a control byte, a target with a space. */
const NOT_TOKEN = /[^!#$%&'*+\-.^_`|~0-9A-Za-z]/;
const NOT_FIELD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** Methods whose request a body is expected with: sent without one, they say Content-Length: 0. */
const EXPECTS_BODY = new Set(['PUT', 'POST', 'PATCH', 'QUERY', 'PROPFIND', 'PROPPATCH']);
/** RFC 9110 §9.2.2's idempotent methods: one of them may be sent again after the upstream may have read it (upstream/pool.ts). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
const LAST_CHUNK = Buffer.from('0\r\n\r\n');
const NOTHING = Buffer.alloc(0);

// Never sent back: uWS writes its own Date and Content-Length (from the body it sends);
// Proxy-Authenticate would ask the client for credentials this proxy does not take; CORS
// is api-auth's (--http-allowed-origins, cors.ts): an upstream's own would let an origin
// in that the gateway keeps out, or send the header twice, which browsers refuse.
const RESPONSE_DROPPED = new Set([...HOP_BY_HOP, 'date', 'proxy-authenticate', 'access-control-allow-origin',
  'access-control-allow-credentials', 'access-control-expose-headers', 'access-control-allow-methods', 'access-control-allow-headers',
  'access-control-max-age']);

/** The names RESPONSE_DROPPED holds, and Content-Length (dropped from answers with a body), as bytes by their length. */
const RESPONSE_DROPPED_BY_LENGTH: Buffer[][] = [];
for (const name of [...RESPONSE_DROPPED, 'content-length']) (RESPONSE_DROPPED_BY_LENGTH[name.length] ??= []).push(Buffer.from(name));
const CONTENT_LENGTH = Buffer.from('content-length');
const CONTENT_TYPE = Buffer.from('content-type');
const CONTENT_ENCODING = Buffer.from('content-encoding');
/** The largest answer to a split batch's allowed calls that is merged with the refusals (scope.ts). */
const SPLIT_ANSWER_MAX = 16 * 1024 * 1024;

const NO_BODY = -2;
const CHUNKED = -1;

export class UpstreamProxy {
  private readonly pool: UpstreamPool;
  private readonly relay: Relay;
  /** The Host line and the keep-alive line of every request, made once. */
  private readonly hostLines: string;
  private readonly watch: UpstreamWatch;

  constructor(private readonly options: UpstreamOptions, private readonly trusted: TrustedProxies, private readonly inFlight: InFlight,
    metrics: Metrics, log: Logger, bodies: BodyAdmission | null = null, clock: Clock = systemClock) {
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
    const watch = this.watch = new UpstreamWatch(options.url, options.timeoutMs, options.health, metrics, log);
    this.relay = {
      dispatch: (exchange) => {
        exchange.dispatchedAt = systemTimer();
        pool.dispatch(exchange);
      },
      withdraw: (exchange) => pool.withdraw(exchange),
      maxBody: options.maxBody,
      tooLarge: jsonLine(RpcCode.InvalidRequest, `request body exceeds ${options.maxBody} bytes`),
      switched: jsonLine(RpcCode.UpstreamUnavailable, 'the upstream node switched protocols, which api-auth does not relay'),
      splitTooLarge: jsonLine(RpcCode.UpstreamUnavailable, `the upstream node's answer to the allowed calls of a batch exceeds ` +
        `${SPLIT_ANSWER_MAX} bytes, the most api-auth merges with the refused calls' errors: send the calls the token allows apart`),
      failure: (error, res, id) => watch.answer(error, res, id),
      answered: (milliseconds) => metrics.observeUpstream(milliseconds),
      settle: (error) => this.settled(error),
      bodies,
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
    const declared = req.getHeader('content-length');
    if (declared !== '' && !(Number(declared) <= this.options.maxBody)) {
      // The body is not read, so the connection cannot carry another request.
      writeBodyTooLarge(res, this.relay.tooLarge);
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
    const headers = upstreamHeaders(req, peer, this.trusted.has(peer), this.options.clientScheme);
    if (!Array.isArray(headers)) return refuse(res, headers);
    const head = requestHead(method, target, this.hostLines, headers);
    if (head instanceof Unwritable) return refuse(res, jsonLine(RpcCode.InvalidRequest, `the request cannot be forwarded: ${head.why}`));
    const hasBody = req.getHeader('transfer-encoding') !== '' || (declared !== '' && declared !== '0');
    const exchange = new Exchange(this.relay, res, method === 'HEAD', IDEMPOTENT.has(method), head, allowOrigin);
    this.inFlight.enter();
    res.onAborted(() => exchange.clientGone());
    if (!hasBody) {
      exchange.sendWithoutBody(EXPECTS_BODY.has(method));
      return;
    }
    if (ticket !== null) res.onData((chunk, isLast) => exchange.judgedData(chunk, isLast, ticket));
    else res.onData((chunk, isLast) => exchange.requestData(chunk, isLast, declared));
  }

  /** Closes the upstream connections; requests still under way fail. */
  async close(): Promise<void> {
    this.pool.close();
  }

  /** Each exchange's end: out of flight, and the upstream's health as it showed. */
  private settled(error: Error | null): void {
    this.inFlight.leave();
    if (error === null) return this.watch.answered();
    if (error instanceof ClientGoneError || error instanceof BodyTooLargeError || error instanceof ScopeRefusedError ||
      error instanceof LimitRefusedError) return;
    this.watch.failed(error);
  }
}

/** What requestHead returns for a request that cannot be written. */
class Unwritable {
  constructor(readonly why: string) {}
}

/**
 * The request line and header lines of a request (its target from upstreamTarget), as one Latin-1 string, without the
 * framing of its body and the empty line; or why it cannot be written.
 * The client's Content-Length is left out (upstreamHeaders judged the framing as received):
 * the framing line is written from the body sent.
 */
function requestHead(method: string, target: string, hostLines: string, headers: string[]): string | Unwritable {
  if (NOT_TOKEN.test(method)) return new Unwritable('its method is not a token');
  let head = `${method} ${target} ${hostLines}`;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i];
    const value = headers[i + 1];
    if (NOT_TOKEN.test(name)) return new Unwritable('a header name is not a token');
    if (NOT_FIELD_VALUE.test(value)) return new Unwritable(`the value of header ${name} holds a control byte`);
    if (name === 'content-length') continue;
    head += `${name}: ${value}\r\n`;
  }
  return head;
}

/** One proxied request: its bytes and body for the pool, and the writer of the upstream's answer to the client. */
class Exchange implements UpstreamRequest {
  /** The request's head and, when whole, its body: what the pool writes, set before the exchange is dispatched. */
  bytes: Buffer = NOTHING;
  /** The body is still coming from the client. */
  streaming = false;
  /** When the request was dispatched (clock.ts, systemTimer), for the upstream's latency. */
  dispatchedAt = 0;
  /** The connection the request went on, once it has one. */
  private connection: Connection | null = null;
  /** This exchange paused the connection's reading, for its client to catch up. */
  private paused = false;
  /** The client went away, or the response is complete: `res` may no longer be touched. */
  private closed = false;
  /** The answer's head is read; once it is relayed too (headBytes null), a failure can only cut the connection. */
  private started = false;
  /** The body's length as the upstream announced it, or CHUNKED, or NO_BODY. */
  private total = CHUNKED;
  /** A chunk uWS could not take whole yet (a copy), and the write offset it started at. */
  private pending: Buffer | null = null;
  private pendingOffset = 0;
  private ended = false;
  /** The answer's head, held until its first body bytes, its end, or the end of the read it came in. */
  private parser: ResponseParser | null = null;
  private headBytes: Buffer | null = null;
  /** The body's parts in the read under way: offsets into readBytes, start and end by twos. */
  private readBytes: Buffer | null = null;
  private ranges: number[] | null = null;
  private bodiless = false;
  /** The writable handler is set. */
  private watching = false;
  /** A streaming body: chunked (no Content-Length from the client), what is received, parts held until there is a connection. */
  private chunked = false;
  private received = 0;
  private held: Buffer[] | null = null;
  private lastHeld = false;
  private readingPaused = false;
  /** A body with a ticket, as far as it has come. */
  private chunks: Buffer[] | null = null;
  /** A batch of which only some calls went upstream: its answer is read whole, then merged with the refusals. */
  private split: ScopeSplit | null = null;
  private splitStatus = 0;
  private splitType = '';
  private splitEncoding = '';
  private splitParts: Buffer[] = [];
  private splitBytes = 0;
  /**
   * Where the body starts in `bytes`, when it came in one piece and went as it came
   * (-1 otherwise); or, for a judged body, its one call's id (`callId`). Read only for
   * a failure's answer, to echo the call's id.
   */
  private bodyAt = -1;
  private callId: string | null = null;

  constructor(private readonly relay: Relay, private readonly res: HttpResponse, readonly head: boolean, readonly idempotent: boolean,
    private readonly requestHead: string, private readonly allowOrigin: string) {}

  // The client side.

  clientGone(): void {
    if (this.closed) return;
    this.closed = true;
    this.abandonUpstream();
    this.relay.settle(new ClientGoneError());
  }

  sendWithoutBody(expectsBody: boolean): void {
    this.bytes = Buffer.from(`${this.requestHead}${expectsBody ? 'content-length: 0\r\n' : ''}\r\n`, 'latin1');
    this.relay.dispatch(this);
  }

  requestData(chunk: ArrayBuffer, isLast: boolean, declared: string): void {
    if (this.closed) return;
    this.received += chunk.byteLength;
    if (this.received > this.relay.maxBody) {
      this.refuseBody();
      return;
    }
    if (!this.streaming) {
      if (isLast) {
        // The common case, a body in one piece: copied once, behind the head, from uWS's
        // memory, which it reuses once this callback returns.
        this.bytes = withBody(this.requestHead, new Uint8Array(chunk));
        this.bodyAt = this.bytes.length - chunk.byteLength;
        this.relay.dispatch(this);
        return;
      }
      this.streaming = true;
      this.chunked = declared === '';
      const framing = this.chunked ? 'transfer-encoding: chunked\r\n' : `content-length: ${declared}\r\n`;
      this.bytes = Buffer.concat([Buffer.from(`${this.requestHead}${framing}\r\n`, 'latin1'), this.frame(chunk, false)]);
      this.relay.dispatch(this);
      if (this.connection === null) this.pauseReading();
      return;
    }
    const framed = this.frame(chunk, isLast);
    const connection = this.connection;
    if (connection === null) {
      // No connection yet: held (at most the body limit), and the client paused meanwhile.
      (this.held ??= []).push(framed);
      this.lastHeld = isLast;
      this.pauseReading();
      return;
    }
    if (isLast) {
      connection.endBody(framed, this);
    } else if (!connection.writeBody(framed)) {
      this.pauseReading();
      connection.drained(() => this.resumeReading());
    }
  }

  /**
   * A chunk of a body with a ticket: held until the last one, then the whole body is
   * judged, and forwarded as received (or as the scope split it) only if it passes.
   */
  judgedData(chunk: ArrayBuffer, isLast: boolean, ticket: Ticket): void {
    if (this.closed) return;
    this.received += chunk.byteLength;
    if (this.received > this.relay.maxBody) {
      this.chunks = null;
      this.refuseBody();
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
    // A HEAD's answer has no body to merge a split batch's refusals into: its batch goes whole or not at all.
    const judged = this.relay.bodies!.judge(ticket, body, !this.head, 'http');
    bodyRead(this.res, judged.reading);
    this.callId = loneCallId(judged.reading);
    const { refusal, split } = judged;
    if (refusal !== null) {
      this.closed = true;
      const res = this.res;
      res.cork(() => writeCallRefusal(res, refusal, this.head, this.allowOrigin));
      this.relay.settle(refusal.error);
      return;
    }
    if (split === null) {
      this.bytes = withBody(this.requestHead, body);
      this.relay.dispatch(this);
      return;
    }
    // The answer is merged with the refusals, so it must come as JSON text: not compressed.
    this.split = split;
    this.bytes = withBody(this.requestHead.replace(/\r\naccept-encoding: [^\r]*/g, ''), split.forward);
    this.relay.dispatch(this);
  }

  /** A copy of a chunk of a streaming body, framed as a chunk when the client sent it chunked. */
  private frame(chunk: ArrayBuffer, isLast: boolean): Buffer {
    const bytes = new Uint8Array(chunk);
    if (!this.chunked) return Buffer.from(bytes);
    if (bytes.length === 0) return isLast ? LAST_CHUNK : Buffer.alloc(0);
    const size = `${bytes.length.toString(16)}\r\n`;
    const framed = Buffer.allocUnsafe(size.length + bytes.length + 2 + (isLast ? LAST_CHUNK.length : 0));
    framed.write(size, 0, 'latin1');
    framed.set(bytes, size.length);
    framed.write(isLast ? '\r\n0\r\n\r\n' : '\r\n', size.length + bytes.length, 'latin1');
    return framed;
  }

  private pauseReading(): void {
    if (this.readingPaused || this.closed) return;
    this.readingPaused = true;
    this.res.pause();
  }

  private resumeReading(): void {
    if (!this.readingPaused || this.closed) return;
    this.readingPaused = false;
    this.res.resume();
  }

  private refuseBody(): void {
    const started = this.started;
    this.closed = true;
    this.abandonUpstream();
    // A chunked body that outgrew the limit: answer now and drop the rest with the connection.
    if (started) this.res.close();
    else this.res.cork(() => writeBodyTooLarge(this.res, this.relay.tooLarge));
    this.relay.settle(new BodyTooLargeError());
  }

  /** The answer is no longer wanted: out of the queue, or its connection told. */
  private abandonUpstream(): void {
    if (this.connection === null) {
      this.relay.withdraw(this);
      return;
    }
    const connection = this.connection;
    const paused = this.paused;
    this.connection = null;
    this.paused = false;
    connection.abandon(this, paused);
  }

  // The upstream side: the pool's (upstream/pool.ts).

  onSent(connection: Connection): void {
    this.connection = connection;
    const held = this.held;
    if (held === null) {
      if (this.streaming) this.resumeReading();
      return;
    }
    this.held = null;
    const last = this.lastHeld ? held.pop()! : null;
    for (const part of held) connection.writeBody(part);
    if (last !== null) connection.endBody(last, this);
    else this.resumeReading();
  }

  onHead(parser: ResponseParser, bytes: Buffer): void {
    if (this.closed) return;
    this.started = true;
    this.relay.answered(systemTimer() - this.dispatchedAt);
    upstreamAnswered(this.res, parser.status);
    if (this.split !== null) return this.splitHead(parser, bytes);
    this.bodiless = this.head || parser.status === 204 || parser.status === 304;
    this.total = parser.framing === Framing.Length ? parser.length : this.bodiless ? NO_BODY : parser.framing === Framing.None ? 0 : CHUNKED;
    // The head is written with the first body bytes (or the end), so that a small answer
    // leaves in one write rather than two; at the latest when the read it came in ends,
    // as `bytes` is then reused.
    this.parser = parser;
    this.headBytes = bytes;
  }

  onReadEnd(): void {
    if (this.closed || this.split !== null || (this.headBytes === null && this.readBytes === null)) return;
    this.res.cork(() => this.flush());
  }

  /** Writes the status line and headers if they are still held; call it corked. */
  private writeHead(): void {
    const bytes = this.headBytes;
    const parser = this.parser;
    if (bytes === null || parser === null) return;
    this.headBytes = null;
    this.parser = null;
    const res = this.res;
    res.writeStatus(answerStatusLine(parser, bytes));
    const listed = connectionTokens(parser.connection ?? undefined, RESPONSE_DROPPED);
    const fields = parser.fields;
    for (let i = 0, end = parser.fieldCount * FIELD; i < end; i += FIELD) {
      const nameStart = fields[i];
      const nameEnd = fields[i + 1];
      if (droppedFromAnswer(bytes, nameStart, nameEnd)) {
        // uWS writes Content-Length itself from the body it sends; a bodiless answer keeps the upstream's.
        if (!this.bodiless || !equalsIgnoringCase(bytes, nameStart, nameEnd, CONTENT_LENGTH)) continue;
      }
      const name = bytes.toString('latin1', nameStart, nameEnd);
      if (listed !== null && listed.has(name.toLowerCase())) continue;
      // A JavaScript string would reach uWS as UTF-8: bytes beyond ASCII go as they are.
      res.writeHeader(name, fields[i + 4] === 1 ? bytes.subarray(fields[i + 2], fields[i + 3]) : bytes.toString('latin1', fields[i + 2], fields[i + 3]));
    }
    if (this.allowOrigin !== '') writeCorsHeaders(res, this.allowOrigin);
  }

  onBody(bytes: Buffer, start: number, end: number): void {
    if (this.closed) return;
    if (this.split !== null) return this.splitBody(bytes, start, end);
    if (this.total === NO_BODY) return;
    // Held until the read is all parsed (or the answer ends in it): an answer refused
    // further on in the same read is then still a clean 502, and the parts a read holds
    // leave with the head in one send.
    this.readBytes = bytes;
    (this.ranges ??= []).push(start, end);
  }

  /** Writes what the read so far holds of the answer: its head, if held, and its body's parts; call it corked. */
  private flush(): void {
    this.writeHead();
    const bytes = this.readBytes;
    const ranges = this.ranges;
    if (bytes === null || ranges === null) return;
    this.readBytes = null;
    for (let i = 0; i < ranges.length; i += 2) this.writeBody(bytes.subarray(ranges[i], ranges[i + 1]));
    ranges.length = 0;
  }

  /** Writes a part of the body, or holds it (copied: the read buffer is reused) while the client cannot take it; call it corked. */
  private writeBody(chunk: Buffer): void {
    if (this.closed) return;
    if (this.pending !== null) {
      this.pending = Buffer.concat([this.pending, chunk]);
      return;
    }
    const res = this.res;
    if (this.total === CHUNKED) {
      if (!res.write(chunk)) this.waitForClient();
      return;
    }
    const offset = res.getWriteOffset();
    const [ok, done] = res.tryEnd(chunk, this.total);
    if (done) {
      this.complete();
    } else if (!ok) {
      // uWS took part of the chunk; the rest waits for the client to read.
      this.pending = Buffer.from(chunk);
      this.pendingOffset = offset;
      this.waitForClient();
    }
  }

  onEnd(): void {
    if (this.closed) return;
    // The whole answer is read: the connection may go on with the next one.
    this.resumeUpstream();
    this.connection = null;
    const res = this.res;
    if (this.split !== null) {
      res.cork(() => this.writeSplitAnswer(this.split!));
      this.complete();
      return;
    }
    res.cork(() => {
      this.flush();
      if (this.closed) return;
      if (this.pending !== null) {
        // The end came before the client took the last bytes; writable() completes it.
        this.ended = true;
        return;
      }
      if (this.total === NO_BODY) res.endWithoutBody();
      else if (this.total === CHUNKED || this.total === 0) res.end();
      // Fewer bytes than announced: the client must not take a cut body for a whole one.
      else res.close();
      this.complete();
    });
  }

  onError(error: Error): void {
    this.connection = null;
    if (this.closed) return;
    this.closed = true;
    const res = this.res;
    // What the read held of the answer is not relayed: the answer is refused, or cut.
    this.readBytes = null;
    if (this.started && this.headBytes === null && this.split === null) {
      // The upstream's status is relayed already: cutting the connection is the only way to say the body is not whole.
      res.close();
    } else if (error instanceof UpstreamError && error.kind === 'switched') {
      res.cork(() => res.writeStatus('502 Bad Gateway').writeHeader('Content-Type', 'application/json').end(this.relay.switched));
    } else {
      // The one call's id, from the judged reading, or read now from a body that went as it came (rpc/reading.ts).
      const id = this.bodyAt >= 0 ? loneCallId(readCalls(this.bytes.subarray(this.bodyAt))) : this.callId;
      const { status, body } = this.relay.failure(error, res, id);
      res.cork(() => {
        res.writeStatus(status).writeHeader('Content-Type', 'application/json');
        // A page must be able to read that the node is down, not only that it was refused.
        if (this.allowOrigin !== '') writeCorsHeaders(res, this.allowOrigin);
        res.end(body);
      });
    }
    this.relay.settle(error);
  }

  // A split batch's answer (scope.ts): read whole, then written once, merged.

  private splitHead(parser: ResponseParser, bytes: Buffer): void {
    this.splitStatus = parser.status;
    const fields = parser.fields;
    for (let i = 0, end = parser.fieldCount * FIELD; i < end; i += FIELD) {
      const value = (): string => bytes.toString('latin1', fields[i + 2], fields[i + 3]);
      if (equalsIgnoringCase(bytes, fields[i], fields[i + 1], CONTENT_TYPE)) this.splitType = value();
      else if (equalsIgnoringCase(bytes, fields[i], fields[i + 1], CONTENT_ENCODING)) this.splitEncoding = value();
    }
  }

  private splitBody(bytes: Buffer, start: number, end: number): void {
    this.splitBytes += end - start;
    if (this.splitBytes > SPLIT_ANSWER_MAX) {
      this.abandonUpstream();
      this.closed = true;
      this.splitParts = [];
      const res = this.res;
      res.cork(() => {
        res.writeStatus(statusLine(502, undefined)).writeHeader('Content-Type', 'application/json');
        if (this.allowOrigin !== '') writeCorsHeaders(res, this.allowOrigin);
        res.end(this.relay.splitTooLarge);
      });
      this.relay.settle(new ScopeRefusedError('method not allowed'));
      return;
    }
    // The read buffer is reused once the read is parsed.
    this.splitParts.push(Buffer.from(bytes.subarray(start, end)));
  }

  /**
   * The answer to a split batch: the node's answers and the refusals in the calls' order,
   * in a 200; or, when the node did not answer the batch with a batch (an error status,
   * an error object, a body that is not JSON), the node's answer as it is. Call it corked.
   */
  private writeSplitAnswer(split: ScopeSplit): void {
    const res = this.res;
    const body = Buffer.concat(this.splitParts, this.splitBytes);
    this.splitParts = [];
    const encoding = this.splitEncoding.trim().toLowerCase();
    const ok = this.splitStatus >= 200 && this.splitStatus < 300 && (encoding === '' || encoding === 'identity');
    const merged = ok ? split.merge(body.toString('utf8')) : undefined;
    res.writeStatus(statusLine(merged === undefined ? this.splitStatus : 200, undefined));
    if (merged !== undefined || this.splitType !== '') res.writeHeader('Content-Type', merged === undefined ? this.splitType : 'application/json');
    if (merged === undefined && this.splitEncoding !== '') res.writeHeader('Content-Encoding', this.splitEncoding);
    if (this.allowOrigin !== '') writeCorsHeaders(res, this.allowOrigin);
    res.end(merged === undefined ? body : `${merged}\n`);
  }

  /**
   * Holds the upstream's answer until the client reads. The writable handler is set only
   * here, the first time: most answers never need it, and it would cost each a closure.
   */
  private waitForClient(): void {
    if (!this.paused) {
      this.paused = true;
      this.connection?.pause();
    }
    if (this.watching) return;
    this.watching = true;
    this.res.onWritable((offset) => this.writable(offset));
  }

  /** uWS can take more: the rest of a pending chunk, or (chunked) whatever comes next. */
  private writable(offset: number): boolean {
    if (this.closed) return true;
    const pending = this.pending;
    if (pending === null) {
      this.resumeUpstream();
      return true;
    }
    const [ok, done] = this.res.tryEnd(pending.subarray(offset - this.pendingOffset), this.total);
    if (done) {
      this.complete();
    } else if (ok) {
      this.pending = null;
      if (this.ended) {
        this.res.close();
        this.complete();
      } else {
        this.resumeUpstream();
      }
    }
    return ok;
  }

  private resumeUpstream(): void {
    if (!this.paused) return;
    this.paused = false;
    this.connection?.resume();
  }

  private complete(): void {
    if (this.closed) return;
    this.closed = true;
    this.relay.settle(null);
  }
}

/** Whether the name in bytes[start, end) is one RESPONSE_DROPPED holds, or Content-Length. */
function droppedFromAnswer(bytes: Buffer, start: number, end: number): boolean {
  // A name of a length no dropped name has passes as it is; only the others are compared.
  const candidates = RESPONSE_DROPPED_BY_LENGTH[end - start];
  if (candidates === undefined) return false;
  for (const name of candidates) if (equalsIgnoringCase(bytes, start, end, name)) return true;
  return false;
}

/** The head and the body of a request, in one buffer: one write. */
function withBody(head: string, body: Uint8Array): Buffer {
  const lines = `${head}content-length: ${body.length}\r\n\r\n`;
  const bytes = Buffer.allocUnsafe(lines.length + body.length);
  bytes.write(lines, 0, 'latin1');
  bytes.set(body, lines.length);
  return bytes;
}

/** The status line of an answer, for uWS: its code and reason phrase, the standard ones made once. */
function answerStatusLine(parser: ResponseParser, bytes: Buffer): RecognizedString {
  const { status, reasonStart, reasonEnd } = parser;
  const standard = STANDARD_REASONS[status] ??= Buffer.from(STATUS_CODES[status] ?? '', 'latin1');
  if (reasonEnd === reasonStart || bytes.compare(standard, 0, standard.length, reasonStart, reasonEnd) === 0) return statusLine(status, undefined);
  // A JavaScript string would reach uWS as UTF-8: a reason beyond ASCII goes as its bytes.
  if (parser.reasonWide) return Buffer.concat([Buffer.from(`${status} `), bytes.subarray(reasonStart, reasonEnd)]);
  return statusLine(status, bytes.toString('latin1', reasonStart, reasonEnd));
}

const STANDARD_REASONS: Buffer[] = [];

// Status lines with the standard reason, made once per status.
const STATUS_LINES: string[] = [];

export function statusLine(code: number, message: string | undefined): string {
  const standard = STATUS_CODES[code];
  if (message && message !== standard) return `${code} ${message}`;
  return STATUS_LINES[code] ??= `${code} ${standard || ''}`;
}

/** The source text of the id of a body's one call; null for a batch, a notification, or a body that is not a call. */
function loneCallId(reading: Reading): string | null {
  return reading.ok ? (reading.batch ? null : reading.calls[0].id) : reading.id;
}
