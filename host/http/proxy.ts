// The reverse proxy behind the gate: an authorised request goes to the same path on the
// upstream node, and the upstream's answer comes back as it was sent. Connections to
// the upstream are kept alive, an undici Client each (see Upstreams). Bodies stream both ways with
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
// X-Forwarded-For (the peer), X-Forwarded-Host (the client's Host) and -Proto (https when
// api-auth serves TLS itself, else http; the same for a WebSocket upgrade, as nginx sends it).
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
//
// A token with a method scope (the router hands over its grant) is the one exception to
// streaming: its request body is read whole first, up to the body limit, and its calls
// checked (scope.ts); only then are the bytes received, exactly those, sent upstream. A
// refused body sends the upstream nothing at all. Tokens without methods are streamed
// as before, and cost nothing more.
import { STATUS_CODES } from 'node:http';
import { Readable } from 'node:stream';
import type { Duplex } from 'node:stream';
import { Client, errors } from 'undici';
import type { Dispatcher } from 'undici';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { peerAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import { RpcCode } from '../errors.js';
import type { Logger } from '../ops/log.js';
import type { Metrics, UpstreamErrorKind } from '../ops/metrics.js';
import type { InFlight } from './in-flight.js';
import { writeCorsHeaders } from './cors.js';
import { writeScopeRefusal } from './refusals.js';
import { jsonLine } from './responses.js';
import type { MethodScope } from './scope.js';

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

export function ownHealth(): UpstreamHealth {
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

/** What the client gets when the upstream did not answer: the status and body for each kind of failure. */
export type UpstreamFailures = Readonly<Record<UpstreamErrorKind, { readonly status: string; readonly body: Uint8Array }>>;

/** The answers to upstream failures, encoded once; `timeoutMs` is --upstream-timeout. */
export function upstreamFailures(timeoutMs: number): UpstreamFailures {
  const unavailable = (message: string) => ({ status: '502 Bad Gateway', body: jsonLine(RpcCode.UpstreamUnavailable, message) });
  return {
    refused: unavailable('the upstream node refused the connection'),
    reset: unavailable('the upstream node closed the connection'),
    other: unavailable('the upstream node could not be reached'),
    timeout: {
      status: '504 Gateway Timeout',
      body: jsonLine(RpcCode.UpstreamTimeout, `the upstream node did not answer within ${timeoutMs / 1000} s`),
    },
  };
}

/**
 * What every exchange of one proxy is given, made once with the proxy: the collaborators
 * an exchange works with, as undici hands a handler its dispatch, rather than the proxy
 * itself.
 */
interface Relay {
  /** Sends a request upstream, on an idle connection or, past the limit, when one is freed. */
  readonly dispatch: (options: Dispatcher.DispatchOptions, exchange: Exchange) => void;
  /** Hands back the connection of a request undici is done with. */
  readonly release: (client: Client) => void;
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
  /** Where the calls of a scoped token's body are checked; null when there are no tokens. */
  readonly scope: MethodScope | null;
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
export const BEYOND_ASCII = /[^\x00-\x7f]/;

// Never sent back: uWS writes its own Date and Content-Length (from the body it sends);
// Proxy-Authenticate would ask the client for credentials this proxy does not take; CORS
// is api-auth's (--http-allowed-origins, cors.ts): an upstream's own would let an origin
// in that the gateway keeps out, or send the header twice, which browsers refuse.
const RESPONSE_DROPPED = new Set([...HOP_BY_HOP, 'date', 'proxy-authenticate', 'access-control-allow-origin',
  'access-control-allow-credentials', 'access-control-expose-headers', 'access-control-allow-methods', 'access-control-allow-headers',
  'access-control-max-age']);

/** 1 at the length of each name RESPONSE_DROPPED holds, and of Content-Length (dropped from answers with a body). */
const RESPONSE_DROPPED_LENGTHS = new Uint8Array(64);
for (const name of [...RESPONSE_DROPPED, 'content-length']) RESPONSE_DROPPED_LENGTHS[name.length] = 1;

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

class ScopeRefused extends Error {
  constructor() {
    super('the token\'s method scope refused the request');
    this.name = 'ScopeRefused';
  }
}

class ProtocolSwitched extends Error {
  constructor() {
    super('the upstream node switched protocols');
    this.name = 'ProtocolSwitched';
  }
}

/**
 * The connections to the upstream: an undici Client each, one request at a time (no
 * pipelining), made as needed up to UPSTREAM_CONNECTIONS. What undici's Pool does, for
 * less per request: an idle Client is taken from a stack (the last one freed, whose
 * connection is warm) rather than found by scanning every Client, and a Client is handed
 * back by its request's end rather than through a 'drain' event. Requests that find no
 * Client free wait in order, as in a Pool.
 */
class Upstreams {
  private readonly all: Client[] = [];
  private readonly idle: Client[] = [];
  private readonly waiting: { options: Dispatcher.DispatchOptions; exchange: Exchange }[] = [];

  constructor(private readonly origin: string, private readonly clientOptions: Client.Options) {}

  dispatch(options: Dispatcher.DispatchOptions, exchange: Exchange): void {
    let client = this.idle.pop();
    if (client === undefined && this.all.length < UPSTREAM_CONNECTIONS) {
      client = new Client(this.origin, this.clientOptions);
      this.all.push(client);
    }
    if (client === undefined) {
      this.waiting.push({ options, exchange });
      return;
    }
    exchange.client = client;
    client.dispatch(options, exchange);
  }

  /** The request on `client` has ended (answered, failed or aborted): the next waiting request gets it. */
  release(client: Client): void {
    const next = this.waiting.shift();
    if (next === undefined) {
      this.idle.push(client);
      return;
    }
    next.exchange.client = client;
    client.dispatch(next.options, next.exchange);
  }

  /** Fails the requests still waiting, as Pool.destroy did, and closes every connection. */
  async close(): Promise<void> {
    for (const { exchange } of this.waiting.splice(0)) exchange.onError(new errors.ClientDestroyedError());
    await Promise.all(this.all.map((client) => client.destroy()));
  }
}

export class UpstreamProxy {
  private readonly upstreams: Upstreams;
  private readonly relay: Relay;
  /** Whether the last exchange got an answer; failures are logged as warnings only when this changes. */
  private readonly health: UpstreamHealth;

  constructor(private readonly options: UpstreamOptions, private readonly trusted: TrustedProxies, private readonly inFlight: InFlight,
    private readonly metrics: Metrics, private readonly log: Logger, scope: MethodScope | null = null) {
    const upstreams = new Upstreams(options.url.origin, {
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: { timeout: Math.min(options.timeoutMs, 10_000) },
    });
    this.upstreams = upstreams;
    this.health = options.health ?? ownHealth();
    const failures = upstreamFailures(options.timeoutMs);
    this.relay = {
      dispatch: (dispatched, exchange) => upstreams.dispatch(dispatched, exchange),
      release: (client) => upstreams.release(client),
      maxBody: options.maxBody,
      tooLarge: jsonLine(RpcCode.InvalidRequest, `request body exceeds ${options.maxBody} bytes`),
      switched: jsonLine(RpcCode.UpstreamUnavailable, 'the upstream node switched protocols, which api-auth does not relay'),
      failure: (error) => failures[classify(error)],
      settle: (error) => this.settled(error),
      scope,
    };
  }

  /**
   * Forwards the request (`path` as the gate checked it, `method` as received); call it
   * from the uWS handler, before returning. `allowOrigin`: the CORS origin the answer is
   * for (cors.ts), "" for none. `grant`: the grant of a token with a method scope, whose
   * body is checked before anything is sent; -1 for none.
   */
  forward(res: HttpResponse, req: HttpRequest, path: string, method: string, allowOrigin = '', grant = -1): void {
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
    const headers = upstreamHeaders(req, peer, this.trusted.has(peer), this.options.clientScheme);
    if (typeof headers === 'string') return refuse(res, jsonLine(RpcCode.InvalidRequest, headers));
    const hasBody = req.getHeader('transfer-encoding') !== '' || (declared !== '' && declared !== '0');
    if (grant >= 0 && !hasBody) return writeScopeRefusal(res, this.relay.scope!.noBody('http'), method === 'HEAD', allowOrigin);
    const exchange = new Exchange(this.relay, res, method === 'HEAD', headers, allowOrigin);
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
    if (grant >= 0) res.onData((chunk, isLast) => exchange.scopedData(chunk, isLast, options, grant));
    else res.onData((chunk, isLast) => exchange.requestData(chunk, isLast, options));
  }

  /** Closes the upstream connections; requests still under way fail. */
  async close(): Promise<void> {
    await this.upstreams.close();
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
    if (error instanceof ClientGone || error instanceof BodyTooLarge || error instanceof ScopeRefused || refusedRequest(error)) return;
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
  /** The upstream connection this request went to; handed back when undici is done with the request. */
  client: Client | null = null;
  /** undici's abort of the upstream request, once it has started it. */
  private abort: ((reason: Error) => void) | null = null;
  /** undici's resume of the upstream's answer, and whether this exchange paused it. */
  private resume: (() => void) | null = null;
  private paused = false;
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
  /** The answer's status line and headers, held (rawHeaders not null) until its first body bytes or its end. */
  private statusLine = '';
  private rawHeaders: Buffer[] | null = null;
  private listed: Set<string> | null = null;
  private bodiless = false;
  /** The writable handler is set. */
  private watching = false;
  /** The request body, when it comes in more than one chunk. */
  private body: Readable | null = null;
  private received = 0;
  private readingPaused = false;
  /** A scoped token's body, as far as it has come. */
  private chunks: Buffer[] | null = null;

  constructor(private readonly relay: Relay, private readonly res: HttpResponse, private readonly head: boolean,
    readonly headers: string[], private readonly allowOrigin: string) {}

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
    // uWS reuses the chunk's memory once this callback returns. The copy goes into Node's
    // buffer pool (for bodies under 4 KiB) rather than a fresh ArrayBuffer: a malloc'd
    // backing store per request costs more than the copy, in allocation and in GC.
    const copy = Buffer.allocUnsafe(chunk.byteLength);
    copy.set(new Uint8Array(chunk));
    if (this.body === null) {
      if (isLast) {
        // The common case, a body in one piece: no stream needed.
        options.body = copy;
        this.relay.dispatch(options, this);
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
      options.body = this.body;
      this.relay.dispatch(options, this);
    }
    if (!this.body.push(copy) && !isLast) {
      this.readingPaused = true;
      this.res.pause();
    }
    if (isLast) this.body.push(null);
  }

  /**
   * A chunk of a scoped token's body: held until the last one, then the whole body is
   * checked, and forwarded as received only if its calls pass.
   */
  scopedData(chunk: ArrayBuffer, isLast: boolean, options: Dispatcher.DispatchOptions, grant: number): void {
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
    const refusal = this.relay.scope!.check(grant, body, 'http');
    if (refusal === null) {
      options.body = body;
      this.relay.dispatch(options, this);
      return;
    }
    this.closed = true;
    const res = this.res;
    res.cork(() => writeScopeRefusal(res, refusal, this.head, this.allowOrigin));
    this.relay.settle(new ScopeRefused());
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
    this.abort?.(reason);
  }

  // undici's side: its dispatcher's own handler interface (onConnect, onHeaders, onData,
  // onComplete, onError, onUpgrade). undici 7 marks it deprecated in favour of
  // onRequestStart and onResponse*, but runs every request through it: a handler of the
  // newer kind is wrapped in an UnwrapHandler, which makes a controller and a header object
  // (parseHeaders) for each answer. Called directly, the raw header list is all that is made.
  // undici is pinned; a major that drops this interface needs the onResponse* form back.

  onConnect(abort: (reason?: Error) => void): void {
    this.abort = abort;
    if (this.closed) abort(new ClientGone());
  }

  onHeaders(statusCode: number, raw: Buffer[], resume: () => void, statusMessage: string): boolean {
    if (this.closed) {
      this.abort?.(new ClientGone());
      return true;
    }
    // Informational answers (100, 103) are not relayed; the final one follows.
    if (statusCode < 200) return true;
    this.resume = resume;
    this.started = true;
    this.bodiless = this.head || statusCode === 204 || statusCode === 304;
    // Content-Length and Connection as a header object would have them: a repeated
    // Content-Length is no length at all, repeated Connection fields are one list.
    let length: string | null = null;
    let lengths = 0;
    let connection: string | undefined;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const size = raw[i].length;
      if (size !== 14 && size !== 10) continue;
      const name = raw[i].toString('latin1').toLowerCase();
      if (name === 'content-length') {
        length = raw[i + 1].toString('latin1');
        lengths++;
      } else if (name === 'connection') {
        connection = connection === undefined ? raw[i + 1].toString('latin1') : `${connection},${raw[i + 1].toString('latin1')}`;
      }
    }
    this.total = this.bodiless ? NO_BODY : lengths === 1 && /^\d+$/.test(length as string) ? Number(length) : CHUNKED;
    this.listed = connectionTokens(connection, RESPONSE_DROPPED);
    // The raw list keeps the upstream's order and spelling of names.
    this.rawHeaders = raw;
    this.statusLine = statusLine(statusCode, statusMessage);
    // The head is written with the first body bytes (or the end), so that a small answer
    // leaves in one write rather than two. Nothing is lost in waiting: uWS ends a head only
    // when the body starts, so before that the client could not have read it anyway.
    return true;
  }

  /** Writes the status line and headers if they are still held; call it corked. */
  private writeHead(): void {
    const raw = this.rawHeaders;
    if (raw === null) return;
    this.rawHeaders = null;
    const res = this.res;
    const listed = this.listed;
    res.writeStatus(this.statusLine);
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const field = raw[i];
      // A name of a length no dropped name has passes as the bytes it is; only the others
      // are made a lower-case string to be looked up (most of an answer's names pass).
      if (listed !== null || RESPONSE_DROPPED_LENGTHS[field.length] === 1) {
        const name = field.toString('latin1').toLowerCase();
        if (RESPONSE_DROPPED.has(name) || (listed !== null && listed.has(name))) continue;
        // uWS writes Content-Length itself from the body it sends; a bodiless answer keeps the upstream's.
        if (name === 'content-length' && !this.bodiless) continue;
      }
      res.writeHeader(field, raw[i + 1]);
    }
    if (this.allowOrigin !== '') writeCorsHeaders(res, this.allowOrigin);
  }

  /** Returns false to pause the upstream's answer (resumed by writable()). */
  onData(chunk: Buffer): boolean {
    if (this.closed || this.total === NO_BODY) return true;
    const res = this.res;
    res.cork(() => {
      this.writeHead();
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
        this.pending = chunk;
        this.pendingOffset = offset;
        this.waitForClient();
      }
    });
    return !this.paused;
  }

  onComplete(): void {
    this.releaseClient();
    if (this.closed) return;
    if (this.pending !== null) {
      // The end came before the client took the last bytes; writable() completes it.
      this.ended = true;
      return;
    }
    const res = this.res;
    res.cork(() => {
      this.writeHead();
      if (this.total === NO_BODY) res.endWithoutBody();
      else if (this.total === CHUNKED || this.total === 0) res.end();
      // Fewer bytes than announced: the client must not take a cut body for a whole one.
      else res.close();
    });
    this.complete();
  }

  onError(error: Error): void {
    this.releaseClient();
    if (this.closed) return;
    this.closed = true;
    const res = this.res;
    if (this.started) {
      // The upstream's status is taken already: cutting the connection is the only way to say the body is not whole.
      res.close();
    } else if (refusedRequest(error)) {
      res.cork(() => refuse(res, jsonLine(RpcCode.InvalidRequest, `the request cannot be forwarded: ${error.message}`)));
    } else {
      const { status, body } = this.relay.failure(error);
      res.cork(() => {
        res.writeStatus(status).writeHeader('Content-Type', 'application/json');
        // A page must be able to read that the node is down, not only that it was refused.
        if (this.allowOrigin !== '') writeCorsHeaders(res, this.allowOrigin);
        res.end(body);
      });
    }
    this.relay.settle(error);
  }

  /**
   * undici hands over the connection of an answer that switches protocols, and forgets
   * it. Nothing dispatched here asks for one (CONNECT is refused before the gate, and
   * Upgrade is not forwarded), so this is an upstream gone wrong: the connection is
   * destroyed, never left open nor pooled.
   */
  onUpgrade(_statusCode: number, _headers: Buffer[], socket: Duplex): void {
    socket.destroy();
    if (this.closed) return;
    this.closed = true;
    const res = this.res;
    res.cork(() => res.writeStatus('502 Bad Gateway').writeHeader('Content-Type', 'application/json').end(this.relay.switched));
    this.relay.settle(new ProtocolSwitched());
  }

  /**
   * Holds the upstream's answer until the client reads. The writable handler is set only
   * here, the first time: most answers never need it, and it would cost each a closure.
   */
  private waitForClient(): void {
    this.paused = true;
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

  /** undici calls onComplete or onError once per request it was given, aborted ones included. */
  private releaseClient(): void {
    const client = this.client;
    if (client === null) return;
    this.client = null;
    this.relay.release(client);
  }

  private resumeUpstream(): void {
    if (!this.paused) return;
    this.paused = false;
    this.resume?.();
  }

  private complete(): void {
    if (this.closed) return;
    this.closed = true;
    this.relay.settle(null);
  }
}

export const QUERY_NOT_UTF8 = jsonLine(RpcCode.InvalidRequest,
  'the query string holds bytes that are not UTF-8, which api-auth cannot forward unchanged; percent-encode them');

/** A 400 for a request that is not forwarded; the connection closes, as its body may be unread. */
export function refuse(res: HttpResponse, body: Uint8Array): void {
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
export function utf8Bytes(text: string): string | null {
  return text.includes('\ufffd') ? null : Buffer.from(text, 'utf8').toString('latin1');
}

/**
 * The headers to send upstream, as undici's flat [name, value, ...] list; or, for a
 * header that cannot be forwarded unchanged, the message that says so. `peer` is the
 * connection's far end, `fromProxy` whether it is a trusted proxy.
 */
export function upstreamHeaders(req: HttpRequest, peer: string, fromProxy: boolean, scheme: 'http' | 'https'): string[] | string {
  const listed = connectionTokens(req.getHeader('connection'), REQUEST_DROPPED);
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
  if (!forwardedProto) headers.push('x-forwarded-proto', scheme);
  return headers;
}

// Status lines with the standard reason, made once per status.
const STATUS_LINES: string[] = [];

export function statusLine(code: number, message: string | undefined): string {
  const standard = STATUS_CODES[code];
  if (message && message !== standard) return `${code} ${message}`;
  return STATUS_LINES[code] ??= `${code} ${standard || ''}`;
}

/**
 * The field names a Connection header lists, lower-cased, but for those `dropped` holds
 * anyway; null when that leaves none. The usual "keep-alive" costs no Set.
 */
function connectionTokens(value: string | string[] | undefined, dropped: ReadonlySet<string>): Set<string> | null {
  if (value === undefined || value === '') return null;
  if (typeof value === 'string' && !value.includes(',')) {
    const name = value.trim().toLowerCase();
    return name === '' || dropped.has(name) ? null : new Set([name]);
  }
  const names = (Array.isArray(value) ? value.join(',') : value).split(',').map((n) => n.trim().toLowerCase())
    .filter((n) => n !== '' && !dropped.has(n));
  return names.length === 0 ? null : new Set(names);
}

// What undici refuses in the request it is handed (checked before anything is sent, or
// for a body of another length than declared, while it is sent). That request is the
// client's, with fixed pool options: so is the mistake.
const REFUSED_REQUEST_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH']);
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

export function classify(error: Error): UpstreamErrorKind {
  const code = (error as NodeJS.ErrnoException).code ?? '';
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  if (code === 'ECONNREFUSED') return 'refused';
  if (RESET_CODES.has(code)) return 'reset';
  return 'other';
}
