// The reverse proxy behind the gate: an authorised request goes to the same path on the
// upstream node, and the upstream's answer comes back as it was sent. Connections to
// the upstream are kept alive in an undici Pool. Bodies stream both ways with
// backpressure: a slow client pauses the upstream's answer, which is never held whole in
// memory; a slow upstream pauses the reading of the client's request body. uWS stops
// reading only some way after pause(), so what a request body may hold in memory is
// bounded by the body limit rather than by the pause.
//
// Headers (RFC 9110 §7.6.1): hop-by-hop fields (Connection and the fields it names,
// Keep-Alive, Proxy-Connection, TE, Transfer-Encoding, Upgrade, Trailer) are not
// forwarded either way. Authorization and Proxy-Authorization never reach the upstream.
// Host is the upstream's own (a node checks it against its allowed hosts). Forwarding
// headers (Forwarded, X-Forwarded-*, X-Real-IP and kin) are believed only from a trusted
// proxy: from one, X-Forwarded-For, -Host and -Proto are kept and X-Forwarded-For is
// extended with the peer; from anyone else all of them are dropped, and api-auth writes
// X-Forwarded-For (the peer), X-Forwarded-Host (the client's Host) and -Proto (http).
//
// The request line and header values reach the upstream byte for byte. uWS hands the
// query and header values over decoded as UTF-8, and undici writes strings as Latin-1,
// so text beyond ASCII is turned back into its UTF-8 bytes (one Latin-1 character per
// byte) before it is handed on. Text uWS could only decode with U+FFFD in it (bytes
// that are not UTF-8) cannot be turned back, and is refused with 400 rather than
// forwarded altered.
//
// What undici refuses in a request (a header value with control bytes, two
// Content-Length, a method that is not a token) is the client's own mistake: 400, and
// no word of it in the upstream's errors, metrics or health.
import { STATUS_CODES } from 'node:http';
import { Readable } from 'node:stream';
import type { Duplex } from 'node:stream';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { peerAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import { RpcCode } from '../errors.js';
import type { Logger } from '../ops/log.js';
import type { Metrics, UpstreamErrorKind } from '../ops/metrics.js';
import type { InFlight } from './in-flight.js';
import { jsonLine } from './responses.js';

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
}

/**
 * Whether the upstream answered the last exchange, kept so that a change is logged once
 * (one warning when it starts failing, one line when it answers again), also when
 * several threads proxy to it.
 */
export interface UpstreamHealth {
  /** Records an answer; true when the upstream was failing until now. */
  answered(): boolean;
  /** Records a failure; true when the upstream was answering until now. */
  failed(): boolean;
}

function ownHealth(): UpstreamHealth {
  let healthy = true;
  return {
    answered() {
      if (healthy) return false;
      healthy = true;
      return true;
    },
    failed() {
      if (!healthy) return false;
      healthy = false;
      return true;
    },
  };
}

/**
 * What every exchange of one proxy is given, made once with the proxy: the collaborators
 * an exchange works with, as undici hands a handler its dispatch, rather than the proxy
 * itself.
 */
interface Relay {
  /** Sends a request upstream: the pool's dispatch. */
  readonly dispatch: (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) => boolean;
  /** The largest request body forwarded, in bytes. */
  readonly maxBody: number;
  /** The 413 body of a request body over the limit. */
  readonly tooLarge: Uint8Array;
  /** The 502 body of an answer that switched protocols. */
  readonly switched: Uint8Array;
  /** The status and body that tell the client why the upstream did not answer. */
  readonly failure: (error: Error) => { status: string; body: Uint8Array };
  /** Called once per exchange, with what ended it (null: the whole answer was relayed). */
  readonly settle: (error: Error | null) => void;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'transfer-encoding', 'upgrade', 'trailer']);
// Never sent upstream: the gate's credentials, a proxy's credentials, and what undici
// sets itself (Host, and Expect, which it refuses).
const REQUEST_DROPPED = new Set([...HOP_BY_HOP, 'authorization', 'proxy-authorization', 'host', 'expect']);
// Headers that tell an upstream who the client is, how it connected, or which path it
// asked for, beside every x-forwarded-* name: believed by some upstream, so never taken
// from a client. The last two are route overrides some frameworks honour: the upstream
// must route by the path the gate authorised.
const FORWARDING = new Set(['forwarded', 'x-forwarded', 'forwarded-for', 'x-real-ip', 'true-client-ip', 'x-client-ip',
  'client-ip', 'cf-connecting-ip', 'fastly-client-ip', 'x-cluster-client-ip', 'x-original-forwarded-for',
  'x-envoy-external-address', 'x-azure-clientip', 'front-end-https', 'x-url-scheme', 'x-original-url', 'x-rewrite-url']);
/** Text beyond ASCII: uWS decoded it from UTF-8, and undici would write it as Latin-1. */
const BEYOND_ASCII = /[^\x00-\x7f]/;

// Never sent back: uWS writes its own Date and Content-Length (from the body it sends);
// Proxy-Authenticate would ask the client for credentials this proxy does not take.
const RESPONSE_DROPPED = new Set([...HOP_BY_HOP, 'date', 'proxy-authenticate']);

const NO_BODY = -2;
const CHUNKED = -1;

class ClientGone extends Error {
  constructor() {
    super('the client went away');
    this.name = 'ClientGone';
  }
}

class BodyTooLarge extends Error {
  constructor() {
    super('the request body is over the limit');
    this.name = 'BodyTooLarge';
  }
}

class ProtocolSwitched extends Error {
  constructor() {
    super('the upstream node switched protocols');
    this.name = 'ProtocolSwitched';
  }
}

export class UpstreamProxy {
  private readonly pool: Pool;
  private readonly relay: Relay;
  /** Whether the last exchange got an answer; failures are logged as warnings only when this changes. */
  private readonly health: UpstreamHealth;

  constructor(private readonly options: UpstreamOptions, private readonly trusted: TrustedProxies, private readonly inFlight: InFlight,
    private readonly metrics: Metrics, private readonly log: Logger) {
    const pool = new Pool(options.url.origin, {
      connections: UPSTREAM_CONNECTIONS,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: { timeout: Math.min(options.timeoutMs, 10_000) },
    });
    this.pool = pool;
    this.health = options.health ?? ownHealth();
    const unavailable = (message: string) => ({ status: '502 Bad Gateway', body: jsonLine(RpcCode.UpstreamUnavailable, message) });
    const failures: Record<UpstreamErrorKind, { status: string; body: Uint8Array }> = {
      refused: unavailable('the upstream node refused the connection'),
      reset: unavailable('the upstream node closed the connection'),
      other: unavailable('the upstream node could not be reached'),
      timeout: {
        status: '504 Gateway Timeout',
        body: jsonLine(RpcCode.UpstreamTimeout, `the upstream node did not answer within ${options.timeoutMs / 1000} s`),
      },
    };
    this.relay = {
      dispatch: (dispatched, handler) => pool.dispatch(dispatched, handler),
      maxBody: options.maxBody,
      tooLarge: jsonLine(RpcCode.InvalidRequest, `request body exceeds ${options.maxBody} bytes`),
      switched: jsonLine(RpcCode.UpstreamUnavailable, 'the upstream node switched protocols, which api-auth does not relay'),
      failure: (error) => failures[classify(error)],
      settle: (error) => this.settled(error),
    };
  }

  /**
   * Forwards the request (`path` as the gate checked it, `method` as received); call it
   * from the uWS handler, before returning.
   */
  forward(res: HttpResponse, req: HttpRequest, path: string, method: string): void {
    const declared = req.getHeader('content-length');
    if (declared !== '' && !(Number(declared) <= this.options.maxBody)) {
      // The body is not read, so the connection cannot carry another request.
      res.writeStatus('413 Content Too Large').writeHeader('Content-Type', 'application/json').end(this.relay.tooLarge, true);
      return;
    }
    // Undefined, in this uWS, when the URL has no "?"; "" when it ends with one.
    const query = req.getQuery() as string | undefined;
    let target = path;
    if (query !== undefined) {
      const raw = BEYOND_ASCII.test(query) ? utf8Bytes(query) : query;
      if (raw === null) return refuse(res, QUERY_NOT_UTF8);
      target = `${path}?${raw}`;
    }
    const peer = peerAddress(res);
    const headers = upstreamHeaders(req, peer, this.trusted.has(peer));
    if (typeof headers === 'string') return refuse(res, jsonLine(RpcCode.InvalidRequest, headers));
    const hasBody = req.getHeader('transfer-encoding') !== '' || (declared !== '' && declared !== '0');
    const exchange = new Exchange(this.relay, res, method === 'HEAD', headers);
    this.inFlight.enter();
    res.onAborted(() => exchange.clientGone());
    const options: Dispatcher.DispatchOptions = {
      path: target,
      method: method as Dispatcher.HttpMethod,
      headers: exchange.headers,
      body: null,
    };
    if (!hasBody) {
      this.relay.dispatch(options, exchange);
      return;
    }
    res.onData((chunk, isLast) => exchange.requestData(chunk, isLast, options));
  }

  /** Closes the upstream connections; requests still under way fail. */
  async close(): Promise<void> {
    await this.pool.destroy();
  }

  /** Each exchange's end: out of flight, and the upstream's health as it showed. */
  private settled(error: Error | null): void {
    this.inFlight.leave();
    if (error === null) {
      if (this.health.answered()) {
        this.log.info('the upstream node answers again', { upstream: this.options.url.origin });
      }
      return;
    }
    if (error instanceof ClientGone || error instanceof BodyTooLarge || refusedRequest(error)) return;
    const kind = classify(error);
    this.metrics.upstreamError(kind);
    const fields = { upstream: this.options.url.origin, kind, error: error.message, code: (error as NodeJS.ErrnoException).code };
    // One warning when the upstream starts failing, not one per request while it is down.
    if (this.health.failed()) {
      this.log.warn('the upstream node did not answer', fields);
    } else {
      this.log.debug('the upstream node did not answer', fields);
    }
  }
}

/** One proxied request: undici's handler for the upstream's answer, and the writer of it to the client. */
class Exchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  /** The client went away, or the response is complete: `res` may no longer be touched. */
  private closed = false;
  /** The response's status line and headers are written. */
  private started = false;
  /** The body's length as the upstream announced it, or CHUNKED, or NO_BODY. */
  private total = CHUNKED;
  /** A chunk uWS could not take whole yet, and the write offset it started at. */
  private pending: Buffer | null = null;
  private pendingOffset = 0;
  private ended = false;
  /** The request body, when it comes in more than one chunk. */
  private body: Readable | null = null;
  private received = 0;
  private readingPaused = false;

  constructor(private readonly relay: Relay, private readonly res: HttpResponse, private readonly head: boolean,
    readonly headers: string[]) {}

  // The client side.

  clientGone(): void {
    if (this.closed) return;
    this.closed = true;
    this.abortUpstream(new ClientGone());
    this.relay.settle(new ClientGone());
  }

  requestData(chunk: ArrayBuffer, isLast: boolean, options: Dispatcher.DispatchOptions): void {
    if (this.closed) return;
    this.received += chunk.byteLength;
    if (this.received > this.relay.maxBody) {
      this.refuseBody();
      return;
    }
    // uWS reuses the chunk's memory once this callback returns.
    const copy = Buffer.from(chunk.slice(0));
    if (this.body === null) {
      if (isLast) {
        // The common case, a body in one piece: no stream needed.
        this.relay.dispatch({ ...options, body: copy }, this);
        return;
      }
      this.body = new Readable({
        read: () => {
          if (this.readingPaused && !this.closed) {
            this.readingPaused = false;
            this.res.resume();
          }
        },
      });
      this.body.on('error', () => undefined);
      this.relay.dispatch({ ...options, body: this.body }, this);
    }
    if (!this.body.push(copy) && !isLast) {
      this.readingPaused = true;
      this.res.pause();
    }
    if (isLast) this.body.push(null);
  }

  private refuseBody(): void {
    const started = this.started;
    this.closed = true;
    this.abortUpstream(new BodyTooLarge());
    // A chunked body that outgrew the limit: answer now and drop the rest with the connection.
    if (started) this.res.close();
    else this.res.cork(() => this.res.writeStatus('413 Content Too Large').writeHeader('Content-Type', 'application/json').end(this.relay.tooLarge, true));
    this.relay.settle(new BodyTooLarge());
  }

  private abortUpstream(reason: Error): void {
    this.body?.destroy(reason);
    this.controller?.abort(reason);
  }

  // undici's side.

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.closed) controller.abort(new ClientGone());
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>,
    statusMessage?: string): void {
    if (this.closed) {
      controller.abort(new ClientGone());
      return;
    }
    // Informational answers (100, 103) are not relayed; the final one follows.
    if (statusCode < 200) return;
    this.started = true;
    const bodiless = this.head || statusCode === 204 || statusCode === 304;
    const length = headers['content-length'];
    this.total = bodiless ? NO_BODY : typeof length === 'string' && /^\d+$/.test(length) ? Number(length) : CHUNKED;
    const res = this.res;
    const listed = connectionTokens(headers.connection);
    // The raw list keeps the upstream's order and spelling of names.
    const raw = Array.isArray(controller.rawHeaders) ? controller.rawHeaders : flatten(headers);
    res.cork(() => {
      res.writeStatus(`${statusCode} ${statusMessage || STATUS_CODES[statusCode] || ''}`);
      for (let i = 0; i + 1 < raw.length; i += 2) {
        const name = String(raw[i]).toLowerCase();
        if (RESPONSE_DROPPED.has(name) || (listed !== null && listed.has(name))) continue;
        // uWS writes Content-Length itself from the body it sends; a bodiless answer keeps the upstream's.
        if (name === 'content-length' && !bodiless) continue;
        res.writeHeader(raw[i], raw[i + 1]);
      }
    });
    res.onWritable((offset) => this.writable(offset));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.closed || this.total === NO_BODY) return;
    const res = this.res;
    res.cork(() => {
      if (this.total === CHUNKED) {
        if (!res.write(chunk)) controller.pause();
        return;
      }
      const offset = res.getWriteOffset();
      const [ok, done] = res.tryEnd(chunk, this.total);
      if (done) {
        this.complete();
      } else if (!ok) {
        // uWS took part of the chunk; the rest waits for the client to read.
        this.pending = chunk;
        this.pendingOffset = offset;
        controller.pause();
      }
    });
  }

  onResponseEnd(): void {
    if (this.closed) return;
    if (this.pending !== null) {
      // The end came before the client took the last bytes; writable() completes it.
      this.ended = true;
      return;
    }
    const res = this.res;
    res.cork(() => {
      if (this.total === NO_BODY) res.endWithoutBody();
      else if (this.total === CHUNKED || this.total === 0) res.end();
      // Fewer bytes than announced: the client must not take a cut body for a whole one.
      else res.close();
    });
    this.complete();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.closed) return;
    this.closed = true;
    const res = this.res;
    if (this.started) {
      // The status is sent already: cutting the connection is the only way to say the body is not whole.
      res.close();
    } else if (refusedRequest(error)) {
      res.cork(() => refuse(res, jsonLine(RpcCode.InvalidRequest, `the request cannot be forwarded: ${error.message}`)));
    } else {
      const { status, body } = this.relay.failure(error);
      res.cork(() => res.writeStatus(status).writeHeader('Content-Type', 'application/json').end(body));
    }
    this.relay.settle(error);
  }

  /**
   * undici hands over the connection of an answer that switches protocols, and forgets
   * it. Nothing dispatched here asks for one (CONNECT is refused before the gate, and
   * Upgrade is not forwarded), so this is an upstream gone wrong: the connection is
   * destroyed, never left open nor pooled.
   */
  onRequestUpgrade(_controller: Dispatcher.DispatchController, _statusCode: number, _headers: unknown, socket: Duplex): void {
    socket.destroy();
    if (this.closed) return;
    this.closed = true;
    const res = this.res;
    res.cork(() => res.writeStatus('502 Bad Gateway').writeHeader('Content-Type', 'application/json').end(this.relay.switched));
    this.relay.settle(new ProtocolSwitched());
  }

  /** uWS can take more: the rest of a pending chunk, or (chunked) whatever comes next. */
  private writable(offset: number): boolean {
    if (this.closed) return true;
    const pending = this.pending;
    if (pending === null) {
      this.controller?.resume();
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
        this.controller?.resume();
      }
    }
    return ok;
  }

  private complete(): void {
    if (this.closed) return;
    this.closed = true;
    this.relay.settle(null);
  }
}

const QUERY_NOT_UTF8 = jsonLine(RpcCode.InvalidRequest,
  'the query string holds bytes that are not UTF-8, which api-auth cannot forward unchanged; percent-encode them');

/** A 400 for a request that is not forwarded; the connection closes, as its body may be unread. */
function refuse(res: HttpResponse, body: Uint8Array): void {
  res.writeStatus('400 Bad Request').writeHeader('Content-Type', 'application/json').end(body, true);
}

function refusedRequest(error: Error): boolean {
  return REFUSED_REQUEST_CODES.has((error as NodeJS.ErrnoException).code ?? '');
}

/**
 * Text uWS decoded from UTF-8, as its bytes again (one Latin-1 character per byte, which
 * undici writes as that byte); null when the text holds U+FFFD, which stands for bytes
 * that were not UTF-8 and cannot be told apart from an encoded U+FFFD.
 */
function utf8Bytes(text: string): string | null {
  return text.includes('\ufffd') ? null : Buffer.from(text, 'utf8').toString('latin1');
}

/**
 * The headers to send upstream, as undici's flat [name, value, ...] list; or, for a
 * header that cannot be forwarded unchanged, the message that says so. `peer` is the
 * connection's far end, `fromProxy` whether it is a trusted proxy.
 */
function upstreamHeaders(req: HttpRequest, peer: string, fromProxy: boolean): string[] | string {
  const listed = connectionTokens(req.getHeader('connection'));
  const headers: string[] = [];
  let chain = '';
  let forwardedHost = false;
  let forwardedProto = false;
  let problem = '';
  req.forEach((name, text) => {
    if (problem !== '' || REQUEST_DROPPED.has(name) || (listed !== null && listed.has(name))) return;
    if (name.startsWith('x-forwarded-') || FORWARDING.has(name)) {
      if (!fromProxy) return;
      if (name === 'x-forwarded-host') forwardedHost = true;
      else if (name === 'x-forwarded-proto') forwardedProto = true;
      else if (name !== 'x-forwarded-for') return;
    }
    const value = BEYOND_ASCII.test(text) ? utf8Bytes(text) : text;
    if (value === null) {
      problem = `the value of header ${name} holds bytes that are not UTF-8, which api-auth cannot forward unchanged`;
    } else if (name === 'x-forwarded-for') {
      chain = chain === '' ? value : `${chain}, ${value}`;
    } else {
      headers.push(name, value);
    }
  });
  if (problem !== '') return problem;
  headers.push('x-forwarded-for', chain === '' ? peer : `${chain}, ${peer}`);
  if (!forwardedHost) {
    // uWS hands this one over byte for byte (as Latin-1).
    const host = req.getHeader('host');
    if (host !== '') headers.push('x-forwarded-host', host);
  }
  if (!forwardedProto) headers.push('x-forwarded-proto', 'http');
  return headers;
}

function flatten(headers: Record<string, string | string[] | undefined>): string[] {
  const list: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === 'string') list.push(name, value);
    else if (value !== undefined) for (const v of value) list.push(name, v);
  }
  return list;
}

/** The field names a Connection header lists, lower-cased; null when there are none. */
function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined || value === '') return null;
  const names = (Array.isArray(value) ? value.join(',') : value).split(',').map((n) => n.trim().toLowerCase()).filter((n) => n !== '');
  return names.length === 0 ? null : new Set(names);
}

// What undici refuses in the request it is handed (checked before anything is sent, or
// for a body of another length than declared, while it is sent). That request is the
// client's, with fixed pool options: so is the mistake.
const REFUSED_REQUEST_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH']);
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

function classify(error: Error): UpstreamErrorKind {
  const code = (error as NodeJS.ErrnoException).code ?? '';
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  if (code === 'ECONNREFUSED') return 'refused';
  if (RESET_CODES.has(code)) return 'reset';
  return 'other';
}
