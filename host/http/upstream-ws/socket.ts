// The relay's WebSocket to its upstream: RFC 6455's client over one node:net (or, for an
// https:// upstream, node:tls) socket, with no stream in the way of the data.
//
// Why not `ws`: the relay pays for its upstream client twice per echo, and `ws` reads
// through a Node stream, a Writable parser and an event per message, which the bench
// measured at a third more CPU per echo than nginx (docs/explanation/performance.md). Here the kernel reads into
// one buffer (`onread`), frames are read in place from it (frames.ts), and each message
// goes out as one masked frame in one write. What `ws` did for the relay is kept: the
// same handshake and checks of the answer, the largest message, the close handshake
// with a timeout, and the socket's own buffer as the measure of backpressure.
//
// The session writes every frame but the close itself, pongs included, each with a
// callback for when it has gone to the kernel: the relay hands the upstream a message
// only when its socket holds nothing else, and writes of this module's own, which no
// callback of the session's follows, would leave a message waiting with nothing to wake it.
//
// Events go to handlers the relay hands over (no emitter): the handshake's until the
// upstream has accepted, then the session's, which listen() attaches from within
// accepted(). Each socket ends with exactly one closed() call, to whichever is attached.
import { connect as netConnect, isIP } from 'node:net';
import type { Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { ConnectionOptions } from 'node:tls';
import { UpstreamWsCode, UpstreamWsError } from './errors.js';
import { closeFrame, frame, FrameReader, Opcode } from './frames.js';
import type { FrameSink } from './frames.js';
import { ResponseHead } from '../upstream/response-head.js';
import { answerOf, answerProblem, newKey, requestHead } from './handshake.js';
import type { Answer } from './handshake.js';

export interface UpstreamWsRequest {
  /** The upstream's origin: http:// for ws, https:// for wss. */
  readonly url: URL;
  /** The request target, byte for byte (Latin-1 text). */
  readonly target: string;
  /** The subprotocols offered, in order. */
  readonly protocols: readonly string[];
  /** Header fields, a flat [name, value, ...] list of lower-case names (handshake.ts: what is left out). */
  readonly headers: readonly string[];
  /** The largest message read, in bytes; a larger one ends the session with 1009. */
  readonly maxMessage: number;
  /** How long a close may wait for the upstream's close frame and the end of its connection. */
  readonly closeTimeoutMs: number;
}

/** What happens before the upstream has accepted. Exactly one of accepted, unexpected and failed is called, unless terminate() came first. */
export interface HandshakeHandler {
  /** The upstream accepted, and its answer checked out: attach a session with listen() now. */
  accepted(upstream: UpstreamWebSocket): void;
  /** The upstream answered with a status other than 101. */
  unexpected(status: number, message: string): void;
  /** No valid answer: `answered` true when it was a 101 that failed the checks (the error says which). */
  failed(error: Error, answered: boolean): void;
  /** The socket is closed, and no session was attached. */
  closed(): void;
}

/** What happens once the upstream has accepted. */
export interface SessionHandler {
  /** A whole message; `data` may be the read buffer itself, valid only during the call. */
  message(data: Buffer, binary: boolean): void;
  /**
   * A ping came: the upstream is there, and waits for pong(data) (which this module does
   * not send itself). `data` may be the read buffer itself, valid only during the call.
   */
  ping(data: Buffer): void;
  /** A pong came: the upstream is there. */
  alive(): void;
  /**
   * The socket is closed: the code and reason of the upstream's close frame (1005: none),
   * 1006 when none came; `error` what went wrong first, if anything did (an UpstreamWsError
   * for a broken frame, a message over the limit, or a socket error).
   */
  closed(code: number, reason: string, error: Error | null): void;
}

/** What send(), ping() and pong() call once their frame has gone to the kernel. */
export type Written = (error?: Error | null) => void;

const CONNECTING = 0;
const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;

/**
 * The buffer every plain upstream socket of this thread reads into. Sharing it is safe:
 * libuv reads into it and hands the bytes to the read callback at once, which is done
 * with them before it returns (what must wait, a cut frame or a handshake's head, is
 * copied out). A TLS socket keeps one of its own: its bytes come from the TLS layer, not
 * straight from the kernel, and this module does not lean on when that layer runs.
 */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);
/** A TLS record holds at most 16 KiB of data: no read is longer. */
const TLS_READ = 16 * 1024;
const EMPTY = Buffer.alloc(0);

/**
 * Opens a WebSocket to the upstream. Throws an UpstreamWsError (BadRequest) at once, with
 * nothing sent, when the request cannot be written as it is.
 */
export function connectUpstream(request: UpstreamWsRequest, handshake: HandshakeHandler): UpstreamWebSocket {
  const key = newKey();
  const head = requestHead(request.url.host, request.target, request.protocols, request.headers, key);
  return new UpstreamWebSocket(request, handshake, key, head);
}

export class UpstreamWebSocket {
  /** The subprotocol the upstream chose; '' for none. */
  protocol = '';
  private state = CONNECTING;
  private readonly socket: Socket;
  private readonly reader: FrameReader;
  private session: SessionHandler | null = null;
  /** The reader of the answer's head, until it is read. */
  private answerHead: ResponseHead | null = new ResponseHead();
  /** The handshake's handler was told its outcome, or terminate() made that moot. */
  private settled = false;
  private closeSent = false;
  private closeReceived = false;
  private code = 1006;
  private reason = '';
  private error: Error | null = null;
  private closeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly request: UpstreamWsRequest,
    private readonly handshake: HandshakeHandler,
    private readonly key: string,
    head: string,
  ) {
    const { url } = request;
    const secure = url.protocol === 'https:';
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
    const onread = { buffer: secure ? Buffer.allocUnsafe(TLS_READ) : READ_BUFFER, callback: this.received };
    this.socket = secure
      ? tlsConnect({ host, port, servername: isIP(host) === 0 ? host : undefined, onread } as ConnectionOptions)
      : netConnect({ host, port, onread });
    this.reader = new FrameReader(request.maxMessage, this.sink);
    this.socket.setNoDelay(true);
    this.socket.on('error', (error) => {
      this.error ??= error;
    });
    this.socket.once('close', () => this.socketClosed());
    // A connecting socket keeps what is written, and sends it once connected.
    this.socket.write(head, 'latin1');
  }

  /** Whether messages may be sent: accepted, and no close sent or received. */
  get open(): boolean {
    return this.state === OPEN;
  }

  /** Bytes written and not yet taken by the kernel. */
  get bufferedAmount(): number {
    return this.socket.writableLength;
  }

  /** Where the session's events go from now on; call it from the handshake's accepted(). */
  listen(session: SessionHandler): void {
    this.session = session;
  }

  /**
   * Sends one message as one masked frame; nothing once the session is closing.
   * `written`, when the frame was written: called once it has gone to the kernel, or
   * with the error that ended the connection first.
   */
  send(data: Uint8Array, binary: boolean, written?: Written): void {
    if (this.state !== OPEN) return;
    this.socket.write(frame(binary ? Opcode.Binary : Opcode.Text, data), written);
  }

  /** A ping without data; `written` as for send(). */
  ping(written?: Written): void {
    if (this.state === OPEN) this.socket.write(frame(Opcode.Ping, EMPTY), written);
  }

  /**
   * The answer to a ping, with its data; `written` as for send(). Throws a RangeError for
   * data over 125 bytes, which no control frame may carry (a ping's never is).
   */
  pong(data: Uint8Array, written?: Written): void {
    if (data.length > 125)
      throw new RangeError(`a pong carries at most 125 bytes of data, not ${data.length}: answer with the ping's own data`);
    if (this.state === OPEN) this.socket.write(frame(Opcode.Pong, data), written);
  }

  /**
   * Starts the close handshake: a close frame with `code` and `reason` (1005: none), then
   * the upstream's, then the end of the connection, or its cut after closeTimeoutMs.
   * Throws a RangeError for a code no close frame may carry or a reason over 123 bytes.
   * Before the upstream has accepted, the connection is cut.
   */
  close(code: number, reason: string): void {
    if (this.state === CLOSED) return;
    if (this.state === CONNECTING) return this.terminate();
    if (this.closeSent) return;
    this.sendClose(code, reason);
  }

  /** Cuts the connection without a close frame. Before the upstream has accepted, the handshake's handler hears only closed(). */
  terminate(): void {
    if (this.state === CLOSED) return;
    // Closed from here on, not when the socket's close event comes: a caller that cut the
    // connection for what it held must not find it open and write more in the meantime.
    this.state = CLOSED;
    this.settled = true;
    this.reader.stop();
    this.socket.destroy();
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  /** The frame reader's sink. */
  private readonly sink: FrameSink = {
    message: (data, binary) => this.session?.message(data, binary),
    ping: (data) => this.session?.ping(data),
    pong: () => this.session?.alive(),
    close: (code, reason) => {
      this.closeReceived = true;
      this.code = code;
      this.reason = reason;
      // The upstream's close is answered with its own code (RFC 6455 §5.5.1); the close
      // frames exchanged, the connection ends.
      if (this.closeSent) this.socket.end();
      else this.sendClose(code, reason);
    },
    fail: (error) => {
      this.error ??= error;
      // RFC 6455 §7.1.7: a close frame with the code, then the upstream's end awaited.
      if (!this.closeSent) this.sendClose(error.closeCode, '');
    },
  };

  private sendClose(code: number, reason: string): void {
    const bytes = closeFrame(code, reason);
    this.state = CLOSING;
    this.closeSent = true;
    this.socket.write(bytes);
    if (this.closeReceived) this.socket.end();
    this.closeTimer ??= setTimeout(() => this.socket.destroy(), this.request.closeTimeoutMs);
  }

  /** The read callback: `n` bytes at the start of `buffer`. */
  private readonly received = (n: number, buffer: Uint8Array): boolean => {
    const bytes = buffer as Buffer;
    if (this.state === CONNECTING) this.answerRead(bytes, n);
    else if (this.state !== CLOSED) this.reader.read(bytes, 0, n);
    return true;
  };

  /** Bytes of the answer's head, cut anywhere; frames may follow it in the same read. */
  private answerRead(buffer: Buffer, n: number): void {
    const reader = this.answerHead;
    let p = 0;
    while (reader !== null && !this.settled && p < n) {
      p = reader.readHead(buffer, p, n);
      if (p < 0) return this.refused(new UpstreamWsError(UpstreamWsCode.BadResponse, reader.refusal), false);
      if (reader.head === null) return;
      // 100 Continue, 103 Early Hints: the answer follows them (RFC 9110 §15.2).
      if (reader.status >= 200 || reader.status === 101) {
        this.answerHead = null;
        return this.answered(answerOf(reader), buffer, p, n);
      }
    }
  }

  /** The answer, read whole; `buffer[from, end)` is what followed its head in the last read. */
  private answered(answer: Answer, buffer: Buffer, from: number, end: number): void {
    if (answer.status !== 101) {
      this.settled = true;
      this.handshake.unexpected(answer.status, answer.message);
      this.terminate();
      return;
    }
    const problem = answerProblem(answer, this.key, this.request.protocols);
    if (problem !== null) return this.refused(new UpstreamWsError(UpstreamWsCode.BadHandshake, problem), true);
    this.settled = true;
    this.state = OPEN;
    this.protocol = answer.fields.get('sec-websocket-protocol') ?? '';
    this.handshake.accepted(this);
    if (from < end && this.state !== CLOSED) this.reader.read(buffer, from, end);
  }

  private refused(error: Error, answered: boolean): void {
    this.settled = true;
    this.handshake.failed(error, answered);
    this.terminate();
  }

  private socketClosed(): void {
    clearTimeout(this.closeTimer);
    this.state = CLOSED;
    this.reader.stop();
    if (!this.settled) {
      this.settled = true;
      const error =
        this.error ??
        Object.assign(new Error('the upstream node closed the connection before it answered the upgrade'), { code: 'ECONNRESET' });
      this.handshake.failed(error, false);
    }
    if (this.session !== null) this.session.closed(this.code, this.reason, this.error);
    else this.handshake.closed();
  }
}
