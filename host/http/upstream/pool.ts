// The connections of one HTTP thread to the upstream (connection.ts): kept alive, made
// as needed up to a limit, each read into the thread's one read buffer (a read is taken
// whole, parsed and relayed before the next), each request written in one go.
//
// With pipelining (N > 1) the requests dispatched in one turn of the event loop go out
// together: up to N of them on one connection, held in its socket's cork and written in
// one system call when the turn's events are all handled, and their answers, which come
// back in order (as Go's net/http and node:http answer them), are read in as few reads.
// A batch starts only on a connection with nothing under way, so a request never waits
// behind one written in an earlier turn, however slow that one turns out to be, nor
// behind a body still coming: a streaming request, or one over BATCH_REQUEST_MAX, has its
// connection to itself.
//
// The upstream's count of requests per connection (nginx's keepalive_requests, 1000 by
// default) must not close a connection with a batch written behind its last answer: with
// pipelining, a connection carries at most LAST_REQUEST requests (nginx's default count, so
// that its closing answer is to the last), and then ends once
// they are answered, unless the upstream closed one earlier: then that count is its
// budget, learned for the pool's later connections.
//
// Requests past the connections wait, in the order they came, up to WAITING_MAX of them
// and each at most until its deadline (from when it was dispatched): past either, 504.
import { alone, Connection } from './connection.js';
import type { ConnectionPool, PoolOptions, UpstreamRequest } from './connection.js';
import { poolClosed, queueFull, timedOut, waitedOut } from './errors.js';

/** Requests that may wait for a connection at once, on one thread; one more gets 504. */
export const WAITING_MAX = 1024;
/** With pipelining, the most requests one upstream connection carries, unless the upstream is seen to close sooner. */
export const LAST_REQUEST = 1000;
/** The read buffer of a thread: a read takes at most this many bytes. */
const READ_BUFFER = 64 * 1024;

export class UpstreamPool implements ConnectionPool {
  /** Every read of this pool's connections lands here, and is relayed before the next. */
  readonly readBuffer = Buffer.allocUnsafe(READ_BUFFER);
  private readonly all = new Set<Connection>();
  /** Connections with nothing under way, the one freed last on top (its socket is warm). */
  private readonly idle: Connection[] = [];
  /** Requests waiting for a connection, in the order they came, and when each one's answer must have started. */
  private readonly waiting: UpstreamRequest[] = [];
  private readonly waitingDues: number[] = [];
  private readonly port: number;
  private sweeper: NodeJS.Timeout | null = null;
  private closed = false;

  /** The pool is closing: nothing is sent again. */
  get closing(): boolean {
    return this.closed;
  }

  /** With pipelining, the most requests a connection carries: the last of them has nothing written behind it. */
  lastRequest = LAST_REQUEST;

  closedAfter(answers: number): void {
    if (answers < this.lastRequest) this.lastRequest = Math.max(1, answers);
  }
  /** Connections corked in this turn of the event loop, uncorked together after its events. */
  private readonly corked: Connection[] = [];

  constructor(readonly options: PoolOptions) {
    this.port = options.url.port === '' ? (options.url.protocol === 'https:' ? 443 : 80) : Number(options.url.port);
  }

  /**
   * Sends `request` on an idle connection, pipelined on a busy one, on a new one, or when
   * one is freed. Its answer must start within the timeout; a request sent again passes
   * the `due` it had (ms since the epoch).
   */
  dispatch(request: UpstreamRequest, due = 0): void {
    if (this.closed) {
      request.onError(poolClosed());
      return;
    }
    const now = this.options.clock();
    if (due === 0) {
      due = now + this.options.timeoutMs;
    } else if (due <= now) {
      // Sent again once its time had run out.
      request.onError(timedOut(this.options.timeoutMs));
      return;
    }
    const connection = this.pick(alone(request));
    if (connection === null) {
      if (this.waiting.length >= WAITING_MAX) {
        request.onError(queueFull(WAITING_MAX));
        return;
      }
      this.waiting.push(request);
      this.waitingDues.push(due);
    } else {
      connection.send(request, due);
    }
  }

  /** Holds `connection`'s writes until this turn of the event loop has handled its events. */
  cork(connection: Connection): void {
    if (connection.cork() && this.corked.push(connection) === 1) setImmediate(() => this.uncork());
  }

  private uncork(): void {
    for (const connection of this.corked.splice(0)) connection.uncork();
  }

  /** A connection has answered a request and has room: the requests waiting take it. */
  freed(connection: Connection): void {
    const now = this.options.clock();
    while (this.waiting.length > 0 && connection.canTake(alone(this.waiting[0]))) {
      const due = this.waitingDues.shift()!;
      const request = this.waiting.shift()!;
      // Its time ran out since the last sweep: written now, it would make the connection late.
      if (due <= now) request.onError(waitedOut(this.options.timeoutMs));
      else connection.send(request, due);
    }
    if (connection.queue.length === 0) this.idle.push(connection);
  }

  /** A connection has ended: it is forgotten, and a request waiting gets a new one. */
  removed(connection: Connection): void {
    if (!this.all.delete(connection)) return;
    const at = this.idle.lastIndexOf(connection);
    if (at >= 0) this.idle.splice(at, 1);
    if (this.waiting.length === 0 || this.closed) return;
    const now = this.options.clock();
    while (this.waiting.length > 0) {
      const due = this.waitingDues.shift()!;
      const request = this.waiting.shift()!;
      if (due > now) {
        this.open().send(request, due);
        return;
      }
      request.onError(waitedOut(this.options.timeoutMs));
    }
  }

  /** Takes back a request still waiting for a connection; false when it has one. */
  withdraw(request: UpstreamRequest): boolean {
    const at = this.waiting.indexOf(request);
    if (at < 0) return false;
    this.waiting.splice(at, 1);
    this.waitingDues.splice(at, 1);
    return true;
  }

  /** Fails the requests waiting and those under way, and closes every connection. */
  close(): void {
    this.closed = true;
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.waitingDues.length = 0;
    for (const request of this.waiting.splice(0)) request.onError(poolClosed());
    for (const connection of [...this.all]) connection.fail(poolClosed());
  }

  /** The connection a request goes on now: the batch of this turn with room, an idle connection, a new one; null to wait. */
  private pick(single: boolean): Connection | null {
    if (!single) {
      // The batch started last in this turn, if it has room.
      const batch = this.corked.length > 0 ? this.corked[this.corked.length - 1] : null;
      if (batch?.canTake(false)) return batch;
    }
    while (this.idle.length > 0) {
      const connection = this.idle.pop()!;
      // An idle connection the upstream has closed meanwhile: this request's bytes are not
      // written yet, so it goes on another.
      if (connection.canTake(single)) return connection;
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
    const now = this.options.clock();
    for (const connection of this.all) {
      if (connection.late(now)) connection.fail(timedOut(this.options.timeoutMs));
      else connection.expire(now);
    }
    // Not in the order of their deadlines: a request sent again keeps its own.
    const { waiting, waitingDues } = this;
    let kept = 0;
    const expired: UpstreamRequest[] = [];
    for (let i = 0; i < waiting.length; i++) {
      if (waitingDues[i] <= now) {
        expired.push(waiting[i]);
      } else {
        waiting[kept] = waiting[i];
        waitingDues[kept++] = waitingDues[i];
      }
    }
    waiting.length = waitingDues.length = kept;
    for (const request of expired) request.onError(waitedOut(this.options.timeoutMs));
  }
}
