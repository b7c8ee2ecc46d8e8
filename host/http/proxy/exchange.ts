// What every proxied request is, whichever way its body comes and its answer goes: the
// request the pool sends (upstream/pool.ts, upstream/connection.ts), and the end of its exchange, once. The
// modes are subclasses, each with the state of its own: a request sent whole with its
// answer streamed back (streamed.ts), a request body that streams from the client
// (streaming.ts), a split batch whose answer is read whole and merged (split.ts).
//
// An exchange reaches nothing of the gateway but its Relay, made once by the proxy
// (proxy.ts), as undici hands a handler its dispatch: the pool, the answers it writes
// that are not the upstream's, and where its end is counted.
import type { HttpResponse } from 'uWebSockets.js';
import { systemTimer } from '../../clock.js';
import { ClientGoneError, UpstreamError } from '../../errors.js';
import type { Reading } from '../../rpc/reading.js';
import { readCalls } from '../../rpc/reading.js';
import type { Connection, UpstreamRequest } from '../upstream/connection.js';
import type { ResponseParser } from '../upstream/parser.js';
import type { AnswerHeads } from './answer-head.js';

const NOTHING = Buffer.alloc(0);

/** What every exchange of one proxy is given, made once with the proxy. */
export interface Relay {
  /** Sends a request upstream: on an idle connection, pipelined, on a new one, or when one is freed. */
  readonly dispatch: (exchange: Exchange) => void;
  /** Takes back a request still waiting for a connection; false when it has one. */
  readonly withdraw: (exchange: Exchange) => boolean;
  /** The largest request body forwarded, in bytes. */
  readonly maxBody: number;
  /** Answers a request body over maxBody with 413; call it corked. */
  readonly tooLarge: (res: HttpResponse) => void;
  /** The 502 body of an answer that switched protocols. */
  readonly switched: Uint8Array;
  /** The 502 body of a split batch's answer over SPLIT_ANSWER_MAX (split.ts). */
  readonly splitTooLarge: Uint8Array;
  /** The answer to an upstream failure on `res`; `id`: the source text of the request's one call's id, to echo (null for none). */
  readonly failure: (error: Error, res: HttpResponse, id: string | null) => { status: string; body: Uint8Array };
  /** The upstream answered `res`'s request with `status`, `milliseconds` after its dispatch. */
  readonly answered: (res: HttpResponse, status: number, milliseconds: number) => void;
  /** Writes the CORS headers of an answer for `origin` (cors.ts). */
  readonly cors: (res: HttpResponse, origin: string) => void;
  /** Writes an upstream answer's status line and headers, as relayed (answer-head.ts). */
  readonly heads: AnswerHeads;
  /** Called once per exchange, with what ended it (null: the whole answer was relayed). */
  readonly settle: (error: Error | null) => void;
}

/** The source text of the id of a body's one call; null for a batch, a notification, or a body that is not a call. */
export function loneCallId(reading: Reading): string | null {
  return reading.ok ? (reading.batch ? null : reading.calls[0].id) : reading.id;
}

/** One proxied request: its bytes for the pool, and the end of its exchange. */
export abstract class Exchange implements UpstreamRequest {
  /** The request's head and, when whole, its body: what the pool writes, set before the exchange is dispatched. */
  bytes: Buffer = NOTHING;
  /** The body is still coming from the client (streaming.ts). */
  streaming = false;
  /** When the request was dispatched (clock.ts, systemTimer), for the upstream's latency. */
  dispatchedAt = 0;
  /** The connection the request went on, once it has one. */
  protected connection: Connection | null = null;
  /** This exchange paused the connection's reading, for its client to catch up. */
  protected paused = false;
  /** The client went away, or the response is complete: `res` may no longer be touched. */
  protected closed = false;
  /** The answer's head is read. */
  protected started = false;
  /**
   * Where the body starts in `bytes`, when it came in one piece and went as it came
   * (-1 otherwise); or, for a judged body, its one call's id (`callId`). Read only for
   * a failure's answer, to echo the call's id.
   */
  protected bodyAt = -1;
  callId: string | null = null;

  constructor(
    protected readonly relay: Relay,
    protected readonly res: HttpResponse,
    readonly head: boolean,
    readonly idempotent: boolean,
    protected readonly allowOrigin: string,
  ) {}

  /** Sends `bytes`, the whole request. */
  send(bytes: Buffer): void {
    this.bytes = bytes;
    this.relay.dispatch(this);
  }

  clientGone(): void {
    if (this.closed) return;
    this.closed = true;
    this.abandonUpstream();
    this.relay.settle(new ClientGoneError());
  }

  // The upstream side: the pool's (upstream/pool.ts).

  onSent(connection: Connection): void {
    this.connection = connection;
  }

  abstract onHead(parser: ResponseParser, bytes: Buffer): void;
  abstract onBody(bytes: Buffer, start: number, end: number): void;
  abstract onReadEnd(): void;
  abstract onEnd(): void;

  /** The upstream's status has gone to the client: a failure can then only cut the connection. */
  protected abstract relayed(): boolean;

  onError(error: Error): void {
    this.connection = null;
    if (this.closed) return;
    this.closed = true;
    const res = this.res;
    if (this.relayed()) {
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
        if (this.allowOrigin !== '') this.relay.cors(res, this.allowOrigin);
        res.end(body);
      });
    }
    this.relay.settle(error);
  }

  /** The answer is no longer wanted: out of the queue, or its connection told. */
  protected abandonUpstream(): void {
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

  /** The upstream answered: its latency, and its status for the access log. */
  protected answered(parser: ResponseParser): void {
    this.started = true;
    this.relay.answered(this.res, parser.status, systemTimer() - this.dispatchedAt);
  }

  protected resumeUpstream(): void {
    if (!this.paused) return;
    this.paused = false;
    this.connection?.resume();
  }

  /** The exchange ended with the whole answer relayed. */
  protected complete(): void {
    if (this.closed) return;
    this.closed = true;
    this.relay.settle(null);
  }
}
