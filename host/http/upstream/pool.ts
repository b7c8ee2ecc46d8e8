// The connections of one HTTP thread to the upstream: kept alive, made as needed up to a
// limit, each read into the thread's one read buffer (a read is taken whole, parsed and
// relayed before the next), each request written in one go. With pipelining (N > 1) a
// connection carries up to N requests at once, answered in order, as Go's net/http and
// node:http answer them; a request is never put behind one that has waited longer than
// PIPELINE_MAX_WAIT_MS, nor behind a request whose body is still coming.
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { badAnswer, closedEarly, poolClosed, switched, timedOut } from './errors.js';
import { ResponseParser, SWITCHED, type AnswerHandler } from './parser.js';

/** Requests are not pipelined behind one that has waited this long for its answer. */
export const PIPELINE_MAX_WAIT_MS = 10;
/** The read buffer of a thread: a read takes at most this many bytes. */
const READ_BUFFER = 64 * 1024;

/** One request as the pool carries it. */
export interface UpstreamRequest extends AnswerHandler {
  /** The request's head, and its body when whole: written in one go. */
  readonly bytes: Buffer;
  /** More body bytes follow (the client is still sending them): the request has its connection to itself. */
  readonly streaming: boolean;
  /** The method is HEAD: the answer has no body, and the connection is not used again. */
  readonly head: boolean;
  /** `bytes` are written on `connection`; a streaming body goes on there. Called again if the request is sent again. */
  onSent(connection: Connection): void;
  /** No whole answer came: the request failed. */
  onError(error: Error): void;
  /** A read ended after this request's head but before its body's end: what points into the read's bytes must be used now. */
  onReadEnd(): void;
}

export interface PoolOptions {
  /** The upstream's origin: http: or https:, host and port. */
  readonly url: URL;
  /** How long the upstream may take to start answering, and between parts of its answer. */
  readonly timeoutMs: number;
  /** How long a connection may take to open. */
  readonly connectTimeoutMs: number;
  /** Connections kept open at most; requests past them wait. */
  readonly maxConnections: number;
  /** Requests on one connection at once; 1 for no pipelining. */
  readonly pipelining: number;
}

export class Connection {
  /** The requests written and not yet answered, oldest first. */
  readonly queue: UpstreamRequest[] = [];
  /** When each request of the queue was written (ms). */
  private readonly times: number[] = [];
  /** The request whose body is still being written; nothing else is written meanwhile. */
  streaming: UpstreamRequest | null = null;
  /** False once the connection may carry no further request. */
  reusable = true;
  /** When the upstream is late (ms since the epoch); 0 when nothing is awaited. */
  deadline = 0;
  private readonly socket: Socket;
  private readonly parser = new ResponseParser();
  private paused = false;
  private connected = false;
  private done = false;
  /** A read is being taken: nothing new is written until it is all read (see read()). */
  private reading = false;
  /** An answer ended in the read under way: the pool hears of the room after it. */
  private roomMade = false;

  constructor(private readonly pool: UpstreamPool, url: URL, port: number) {
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const onread = { buffer: pool.readBuffer, callback: (n: number, buffer: Uint8Array) => this.read(buffer as Buffer, n) };
    if (url.protocol === 'https:') {
      // SNI takes a name, never an address (RFC 6066 §3). node:tls reads into onread as
      // node:net does, though its types leave the option out.
      const options: ConnectionOptions & { onread: typeof onread } = {
        host, port, servername: isIP(host) === 0 ? host : undefined, ALPNProtocols: ['http/1.1'], onread,
      };
      this.socket = tlsConnect(options);
      this.socket.once('secureConnect', () => this.onConnect());
    } else {
      this.socket = netConnect({ host, port, noDelay: true, onread });
      this.socket.once('connect', () => this.onConnect());
    }
    this.socket.setNoDelay(true);
    this.socket.on('end', () => this.onEnd());
    this.socket.on('error', (error) => this.fail(error));
    this.socket.on('close', () => this.fail(closedEarly()));
    this.deadline = Date.now() + pool.options.connectTimeoutMs;
  }

  /** Whether `request` may be written now: alone, or pipelined behind answers that are not late. */
  canTake(request: UpstreamRequest, now: number): boolean {
    if (!this.reusable || this.reading || this.streaming !== null || this.done || this.socket.destroyed || !this.socket.writable) return false;
    const count = this.queue.length;
    if (count === 0) return true;
    return !request.streaming && count < this.pool.options.pipelining && now - this.times[0] <= PIPELINE_MAX_WAIT_MS;
  }

  send(request: UpstreamRequest): void {
    // The first request goes at once; those pipelined behind it in the same turn of the
    // event loop leave together, in one write, when the turn's events are all handled.
    if (this.queue.length > 0) this.pool.cork(this.socket);
    this.queue.push(request);
    this.times.push(Date.now());
    if (request.head) this.reusable = false;
    if (request.streaming) this.streaming = request;
    else if (this.connected && this.deadline === 0) this.deadline = Date.now() + this.pool.options.timeoutMs;
    this.socket.write(request.bytes);
    request.onSent(this);
  }

  /** More of a streaming body; false when the socket's buffer is full (then wait for drained()). */
  writeBody(bytes: Buffer): boolean {
    return this.socket.write(bytes);
  }

  /** The last of a streaming body: the wait for the answer starts. */
  endBody(bytes: Buffer | null, request: UpstreamRequest): void {
    if (this.streaming !== request) return;
    this.streaming = null;
    if (bytes !== null) this.socket.write(bytes);
    if (this.connected) this.deadline = Date.now() + this.pool.options.timeoutMs;
  }

  /** Calls `then` once the socket's buffer has room again. */
  drained(then: () => void): void {
    this.socket.once('drain', then);
  }

  /** The client of the answer under way cannot take more: read nothing until resume(). */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    if (this.deadline !== 0) this.deadline = Date.now() + this.pool.options.timeoutMs;
    this.socket.resume();
  }

  /**
   * Whether the upstream is late now: to connect, or to answer; not while the client holds
   * the answer back, nor while a body is still being sent.
   */
  late(now: number): boolean {
    return this.deadline !== 0 && now >= this.deadline && (!this.connected || (!this.paused && this.streaming === null));
  }

  /**
   * `request` no longer wants its answer (its client went away). Alone on the connection,
   * it takes the connection with it, which stops the upstream sending; with answers
   * pipelined behind it, its answer is read and dropped, so theirs still come (reading
   * on if it was `paused` for its client).
   */
  abandon(request: UpstreamRequest, paused: boolean): void {
    if (this.queue[0] === request && this.queue.length === 1) {
      this.fail(closedEarly(), request);
      return;
    }
    if (this.streaming === request) {
      // Its body will never be whole: the connection cannot carry anything after it.
      this.fail(closedEarly(), request);
      return;
    }
    if (paused) this.resume();
  }

  /** Ends the connection; the requests on it fail with `error` (but `quiet`, which asked for it). */
  fail(error: Error, quiet: UpstreamRequest | null = null): void {
    if (this.done) return;
    this.done = true;
    this.reusable = false;
    this.deadline = 0;
    this.socket.destroy();
    const requests = this.queue.splice(0);
    this.times.length = 0;
    this.pool.removed(this);
    for (const request of requests) if (request !== quiet) request.onError(error);
  }

  private onConnect(): void {
    this.connected = true;
    this.deadline = this.queue.length > 0 && this.streaming === null ? Date.now() + this.pool.options.timeoutMs : 0;
  }

  private read(bytes: Buffer, n: number): boolean {
    const parser = this.parser;
    let p = 0;
    // A request written while this read is taken cannot have its answer in it: were one
    // written, the read's bytes past an answer would be taken for its answer. So the pool
    // hears that there is room only once the read is all taken.
    this.reading = true;
    while (p < n) {
      const request = this.queue[0];
      if (request === undefined) {
        // Bytes nobody asked for: an answer longer than it said, or a body after a 204.
        // Read as the next request's answer, they would give it someone else's.
        this.fail(closedEarly());
        return false;
      }
      parser.noBody = request.head;
      const answers = parser.answers;
      const at = parser.execute(bytes, p, n, request);
      if (at < 0) {
        this.fail(at === SWITCHED ? switched() : badAnswer(parser.refusal));
        return false;
      }
      p = at;
      if (parser.answers !== answers) this.answered();
      if (this.done) return false;
    }
    this.reading = false;
    if (this.queue.length > 0) {
      if (!parser.idle()) this.queue[0].onReadEnd();
      this.deadline = Date.now() + this.pool.options.timeoutMs;
    }
    if (this.roomMade) {
      this.roomMade = false;
      this.pool.freed(this);
    }
    return !this.paused;
  }

  /** The oldest request has its whole answer. */
  private answered(): void {
    const request = this.queue.shift()!;
    this.times.shift();
    if (this.streaming === request) {
      // Answered before its body was all sent: the rest cannot follow on this connection.
      this.streaming = null;
      this.reusable = false;
    }
    if (!this.parser.keepAlive) {
      // The upstream closes after this answer and, by RFC 9112 §9.6, reads no request after
      // it: those pipelined behind it were never processed, and are sent again elsewhere.
      this.reusable = false;
      const unread = this.queue.splice(0);
      this.times.length = 0;
      this.done = true;
      this.socket.destroy();
      this.pool.removed(this);
      for (const next of unread) this.pool.dispatch(next);
      return;
    }
    if (this.queue.length === 0) {
      this.deadline = 0;
      if (!this.reusable) {
        this.fail(closedEarly());
        return;
      }
    }
    this.roomMade = true;
  }

  private onEnd(): void {
    // An answer that runs to the close is whole now; any other is cut.
    const request = this.queue[0];
    if (request !== undefined && this.parser.finish(request)) {
      this.queue.shift();
      this.times.shift();
    }
    this.fail(closedEarly());
  }
}

export class UpstreamPool {
  /** Every read of this pool's connections lands here, and is relayed before the next. */
  readonly readBuffer = Buffer.allocUnsafe(READ_BUFFER);
  private readonly all = new Set<Connection>();
  /** Connections with nothing under way, the one freed last on top (its socket is warm). */
  private readonly idle: Connection[] = [];
  private readonly waiting: UpstreamRequest[] = [];
  private readonly port: number;
  private sweeper: NodeJS.Timeout | null = null;
  private closed = false;
  /** Sockets corked in this turn of the event loop, uncorked together after its events. */
  private readonly corked: Socket[] = [];

  constructor(readonly options: PoolOptions) {
    this.port = options.url.port === '' ? (options.url.protocol === 'https:' ? 443 : 80) : Number(options.url.port);
  }

  /** Sends `request` on an idle connection, pipelined on a busy one, on a new one, or when one is freed. */
  dispatch(request: UpstreamRequest): void {
    if (this.closed) {
      request.onError(poolClosed());
      return;
    }
    const connection = this.pick(request);
    if (connection === null) this.waiting.push(request);
    else connection.send(request);
  }

  /** Holds `socket`'s writes until this turn of the event loop has handled its events. */
  cork(socket: Socket): void {
    if (socket.writableCorked > 0) return;
    socket.cork();
    if (this.corked.push(socket) === 1) setImmediate(() => this.uncork());
  }

  private uncork(): void {
    for (const socket of this.corked.splice(0)) socket.uncork();
  }

  /** A connection has answered a request and has room: the requests waiting take it. */
  freed(connection: Connection): void {
    const now = Date.now();
    while (this.waiting.length > 0 && connection.canTake(this.waiting[0], now)) connection.send(this.waiting.shift()!);
    if (connection.queue.length === 0) this.idle.push(connection);
  }

  /** A connection has ended: it is forgotten, and a request waiting gets a new one. */
  removed(connection: Connection): void {
    if (!this.all.delete(connection)) return;
    const at = this.idle.lastIndexOf(connection);
    if (at >= 0) this.idle.splice(at, 1);
    if (this.waiting.length > 0 && !this.closed) this.open().send(this.waiting.shift()!);
  }

  /** Takes back a request still waiting for a connection; false when it has one. */
  withdraw(request: UpstreamRequest): boolean {
    const at = this.waiting.indexOf(request);
    if (at < 0) return false;
    this.waiting.splice(at, 1);
    return true;
  }

  /** Fails the requests waiting and those under way, and closes every connection. */
  close(): void {
    this.closed = true;
    if (this.sweeper !== null) clearInterval(this.sweeper);
    for (const request of this.waiting.splice(0)) request.onError(poolClosed());
    for (const connection of [...this.all]) connection.fail(poolClosed());
  }

  private pick(request: UpstreamRequest): Connection | null {
    const now = Date.now();
    while (this.idle.length > 0) {
      const connection = this.idle.pop()!;
      // An idle connection the upstream has closed meanwhile: this request's bytes are not
      // written yet, so it goes on another.
      if (connection.canTake(request, now)) return connection;
    }
    if (this.options.pipelining > 1 && !request.streaming) {
      let best: Connection | null = null;
      for (const connection of this.all) {
        if (connection.canTake(request, now) && (best === null || connection.queue.length < best.queue.length)) best = connection;
      }
      if (best !== null) return best;
    }
    return this.all.size < this.options.maxConnections ? this.open() : null;
  }

  private open(): Connection {
    const connection = new Connection(this, this.options.url, this.port);
    this.all.add(connection);
    // One timer for every connection of the thread, rather than one per request.
    this.sweeper ??= setInterval(() => this.sweep(), Math.max(10, Math.min(1000, this.options.timeoutMs / 8))).unref();
    return connection;
  }

  private sweep(): void {
    const now = Date.now();
    for (const connection of this.all) if (connection.late(now)) connection.fail(timedOut(this.options.timeoutMs));
  }
}
