// One kept-alive connection to the upstream: the requests written on it and not yet
// answered, oldest first, each with the time its answer must have started by; its reads,
// each taken whole into the pool's one read buffer and parsed before anything new is
// written; the batch of this turn held in its socket's cork (pool.ts); and what becomes of
// the requests on it when it ends.
//
// Every request has a deadline, from when it is dispatched: its answer must start within
// the timeout, also behind another answer on its connection. Past it, it fails (504); one
// already written has its answer read and dropped when it comes, so that the answers
// behind it still reach their clients.
//
// A request is sent twice only when that cannot run it twice: it was never written (its
// bytes still held in the socket's cork when the connection ended or failed), or its
// method is idempotent. node:http runs the requests it has read behind an answer that
// says Connection: close, and then closes without answering them: a POST that may have
// been read fails (502) rather than run again.
import type { Clock } from '../../clock.js';
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { badAnswer, closedBehind, closedEarly, switched, timedOut } from './errors.js';
import { ResponseParser, SWITCHED, type AnswerHandler } from './parser.js';

/**
 * A request this large (head and body) is never batched with others: an upstream may
 * close the connection after answering a large body it did not read whole (Go's
 * net/http does past 256 KiB unread), and the requests behind it would fail.
 */
export const BATCH_REQUEST_MAX = 64 * 1024;

/** Whether `request` goes on a connection alone, never batched: its body streams, or it is large. */
export const alone = (request: UpstreamRequest): boolean => request.streaming || request.bytes.length > BATCH_REQUEST_MAX;

/** One request as the pool carries it. */
export interface UpstreamRequest extends AnswerHandler {
  /** The request's head, and its body when whole: written in one go. */
  readonly bytes: Buffer;
  /** More body bytes follow (the client is still sending them): the request has its connection to itself. */
  readonly streaming: boolean;
  /** The method is HEAD: the answer has no body, and the connection is not used again. */
  readonly head: boolean;
  /** The method is idempotent (RFC 9110 §9.2.2): running it twice does what running it once does, so it may be sent again once written. */
  readonly idempotent: boolean;
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
  /** The time its deadlines are kept by (clock.ts): the server's, which a test may drive. */
  readonly clock: Clock;
}

export class Connection {
  /** The requests written and not yet answered, oldest first. */
  readonly queue: UpstreamRequest[] = [];
  /** When the answer of each request of the queue must have started (ms since the epoch). */
  private readonly dues: number[] = [];
  /** The index in the queue of the first request written while the socket was corked (its bytes not sent yet); -1 for none. */
  private corkedFrom = -1;
  /** The request whose body is still being written; nothing else is written meanwhile. */
  streaming: UpstreamRequest | null = null;
  /** False once the connection may carry no further request. */
  reusable = true;
  /** Requests written on it so far. */
  private written = 0;
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

  constructor(
    private readonly pool: ConnectionPool,
    url: URL,
    port: number,
  ) {
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const onread = { buffer: pool.readBuffer, callback: (n: number, buffer: Uint8Array) => this.read(buffer as Buffer, n) };
    if (url.protocol === 'https:') {
      // SNI takes a name, never an address (RFC 6066 §3). node:tls reads into onread as
      // node:net does, though its types leave the option out.
      const options: ConnectionOptions & { onread: typeof onread } = {
        host,
        port,
        servername: isIP(host) === 0 ? host : undefined,
        ALPNProtocols: ['http/1.1'],
        onread,
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
    this.deadline = this.pool.options.clock() + pool.options.connectTimeoutMs;
  }

  /** Whether a request may be written now: nothing is under way, or (not `single`: alone()) it joins the batch of this turn. */
  canTake(single: boolean): boolean {
    if (!this.reusable || this.reading || this.streaming !== null || this.done || this.socket.destroyed || !this.socket.writable)
      return false;
    const count = this.queue.length;
    return count === 0 || (!single && this.corkedFrom === 0 && count < this.pool.options.pipelining);
  }

  /** Writes `request`, whose answer must start by `due`. */
  send(request: UpstreamRequest, due: number): void {
    // With pipelining, the batch of this turn starts here: its requests leave together, in
    // one write, when the turn's events are all handled (pool.uncork()).
    if (this.queue.length === 0 && this.pool.options.pipelining > 1 && !alone(request)) this.pool.cork(this);
    this.queue.push(request);
    this.dues.push(due);
    // With batches, the connection's last request (pool.lastRequest) has nothing behind it:
    // the upstream's count of requests per connection never closes it with requests written behind.
    if (request.head || (++this.written >= this.pool.lastRequest && this.pool.options.pipelining > 1)) this.reusable = false;
    if (request.streaming) this.streaming = request;
    else if (this.connected && this.deadline === 0) this.deadline = due;
    this.socket.write(request.bytes);
    request.onSent(this);
  }

  /** Holds the socket's writes until uncork(): requests written meanwhile are not sent yet. False when it was corked already. */
  cork(): boolean {
    if (this.corkedFrom >= 0) return false;
    this.corkedFrom = this.queue.length;
    this.socket.cork();
    return true;
  }

  /** Sends what cork() held, in one write. */
  uncork(): void {
    if (this.corkedFrom < 0) return;
    this.corkedFrom = -1;
    this.socket.uncork();
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
    // A body takes as long as its client sends it: the answer's time counts from its end.
    // (A streaming request is alone on its connection.)
    const due = this.pool.options.clock() + this.pool.options.timeoutMs;
    this.dues[0] = due;
    if (this.connected) this.deadline = due;
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
    if (this.deadline !== 0) this.deadline = this.pool.options.clock() + this.pool.options.timeoutMs;
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
   * The requests pipelined behind the one being answered whose deadline has passed fail
   * (504); each one's answer will be read and dropped. The first is the connection's own
   * deadline's (late()).
   */
  expire(now: number): void {
    const { queue, dues } = this;
    const timeoutMs = this.pool.options.timeoutMs;
    for (let i = 1; i < queue.length; i++) {
      if (dues[i] > now || queue[i] instanceof Dropped) continue;
      const request = queue[i];
      queue[i] = new Dropped(request.head);
      // The upstream gets its whole timeout for an answer it will not be blamed for
      // holding back: the connection fails only if that one is late too.
      dues[i] = now + timeoutMs;
      request.onError(timedOut(timeoutMs));
    }
  }

  /**
   * `request` no longer wants its answer (its client went away). Alone on the connection
   * (or with only requests that timed out behind it), it takes the connection with it,
   * which stops the upstream sending; with answers still wanted behind it, its answer is
   * read and dropped, so theirs still come (reading on if it was `paused` for its client).
   */
  abandon(request: UpstreamRequest, paused: boolean): void {
    if (this.queue[0] === request && this.nothingWantedBehind()) {
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

  /** Whether no request behind the first wants its answer: each one behind it, if any, timed out. */
  private nothingWantedBehind(): boolean {
    for (let i = 1; i < this.queue.length; i++) if (!(this.queue[i] instanceof Dropped)) return false;
    return true;
  }

  /**
   * Ends the connection; the requests on it fail with `error` (but `quiet`, which asked
   * for it), except those never written (still in the cork), which are sent again
   * elsewhere unless the pool is closing.
   */
  fail(error: Error, quiet: UpstreamRequest | null = null): void {
    if (this.done) return;
    this.done = true;
    this.reusable = false;
    this.deadline = 0;
    this.socket.destroy();
    const requests = this.queue.splice(0);
    const dues = this.dues.splice(0);
    const written = this.corkedFrom < 0 || this.pool.closing ? requests.length : this.corkedFrom;
    this.corkedFrom = -1;
    this.pool.removed(this);
    for (let i = 0; i < requests.length; i++) {
      const request = requests[i];
      if (request === quiet) continue;
      if (i >= written) this.pool.dispatch(request, dues[i]);
      else request.onError(error);
    }
  }

  private onConnect(): void {
    this.connected = true;
    this.deadline = this.queue.length > 0 && this.streaming === null ? this.dues[0] : 0;
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
      // Within an answer, the next part is due within the timeout; before one, the
      // request's own deadline holds, also when it waited behind others.
      if (!parser.idle()) {
        this.queue[0].onReadEnd();
        this.deadline = this.pool.options.clock() + this.pool.options.timeoutMs;
      } else if (this.streaming === null) {
        this.deadline = this.dues[0];
      }
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
    this.dues.shift();
    if (this.corkedFrom > 0) this.corkedFrom--;
    if (this.streaming === request) {
      // Answered before its body was all sent: the rest cannot follow on this connection.
      this.streaming = null;
      this.reusable = false;
    }
    if (!this.parser.keepAlive) {
      // The upstream closes after this answer. RFC 9112 §9.6 says it processes no request
      // after it, but node:http runs those it has read: only what was never written, or
      // may run twice, is sent again elsewhere. The pool learns how many it answers on a
      // connection, so that later batches stop short of that.
      this.reusable = false;
      this.pool.closedAfter(this.parser.answers);
      const behind = this.queue.splice(0);
      const dues = this.dues.splice(0);
      const written = this.corkedFrom < 0 ? behind.length : this.corkedFrom;
      this.corkedFrom = -1;
      this.done = true;
      this.socket.destroy();
      this.pool.removed(this);
      for (let i = 0; i < behind.length; i++) {
        const next = behind[i];
        if (i >= written || next.idempotent) this.pool.dispatch(next, dues[i]);
        else next.onError(closedBehind());
      }
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
      this.dues.shift();
    }
    this.fail(closedEarly());
  }
}

/** What stands in the queue for a request whose deadline passed: its answer is read, and dropped. */
class Dropped implements UpstreamRequest {
  readonly bytes = Buffer.alloc(0);
  readonly streaming = false;
  readonly idempotent = true;

  constructor(readonly head: boolean) {}

  onSent(): void {}
  onError(): void {}
  onReadEnd(): void {}
  onHead(): void {}
  onBody(): void {}
  onEnd(): void {}
}

/** What a connection needs of its pool (pool.ts). */
export interface ConnectionPool {
  /** Every read of the pool's connections lands here, and is relayed before the next. */
  readonly readBuffer: Buffer;
  readonly options: PoolOptions;
  /** The pool is closing: nothing is sent again. */
  readonly closing: boolean;
  /** Holds `connection`'s writes until this turn of the event loop has handled its events. */
  cork(connection: Connection): void;
  /** Sends `request` again (on another connection, or when one is free), by its own `due`. */
  dispatch(request: UpstreamRequest, due: number): void;
  /** `connection` answered a request and has room. */
  freed(connection: Connection): void;
  /** `connection` has ended. */
  removed(connection: Connection): void;
  /** With pipelining, the most requests a connection carries: the last has nothing written behind it. */
  readonly lastRequest: number;
  /** The upstream closed a connection with its `answers`-th answer. */
  closedAfter(answers: number): void;
}
