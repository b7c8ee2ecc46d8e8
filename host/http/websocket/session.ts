// One relayed session: the client's socket (uWS) and the upstream's (upstream-ws), the
// messages between them, their backpressure, the upstream's silence, and the session's
// end by whichever side ends it first. What a session needs from the thread that opened
// it (the clock, the counters, the judging of a message, the audit line, the books of
// upstream sockets) comes in as its peers (SessionPeers), so that it reaches back into
// nothing: the relay is one implementation of them.
import type { WebSocket } from 'uWebSockets.js';
import { Outcome } from '../../core/abi.js';
import { TO_CLIENT, TO_UPSTREAM } from '../../ops/metric-labels.js';
import type { WsClose } from '../../ops/metric-labels.js';
import type { Metrics } from '../../ops/metrics.js';
import { UpstreamWsCode, UpstreamWsError } from '../upstream-ws/errors.js';
import type { SessionHandler, UpstreamWebSocket as Upstream } from '../upstream-ws/socket.js';
import { sendable, UPSTREAM_CLOSE_MS } from './messages.js';

/** uWS's reasons for closing a client itself (the close handler gets 1006 with these). */
const UWS_IDLE = 'WebSocket timed out from inactivity';
const UWS_TOO_BIG = 'Received too big message';
const TOKEN_ENDED = "the client's token is no longer valid";

/** What a session keeps to, from what it was opened with: its token's re-check. */
export interface SessionTerms {
  /** The token's re-check (core.standing), run on every message; null without a token. */
  readonly standing: ((now: number) => Outcome) | null;
}

/**
 * What a session needs from the thread that opened it; `O` is what it was opened with,
 * which the session holds for its peers and reads only for its terms.
 */
export interface SessionPeers<O extends SessionTerms> {
  /** Bytes: the largest message relayed either way. */
  readonly maxMessage: number;
  /** The client's buffered bytes past which the upstream is no longer read, and below which it is again. */
  readonly clientHighWater: number;
  readonly clientLowWater: number;
  readonly metrics: Metrics;
  /** The clock's time in milliseconds, the idle check's unit. */
  now(): number;
  /** The clock's time in Unix seconds, the core's unit. */
  seconds(): number;
  /** A client message, judged by what the session was opened with: null when it goes on, else the error text to answer it with. */
  judge(opened: O, data: ArrayBuffer): string | null;
  /** The close reason a client gets when its token no longer stands. */
  endedText(outcome: Exclude<Outcome, Outcome.Valid>): string;
  /** A token's session ended with its token: its audit line. */
  audit(opened: O, outcome: Exclude<Outcome, Outcome.Valid>): void;
  /** An upstream socket has closed. */
  untracked(upstream: Upstream): void;
}

/**
 * A socket's user data. uWS copies the user data's own fields onto an object of its
 * own, so the session rides in a field rather than being the user data itself.
 */
export interface SessionData<O extends SessionTerms> {
  readonly session: Session<O>;
}

/** A client message waiting for the upstream. */
interface Waiting {
  readonly data: Buffer;
  readonly binary: boolean;
}

/** One relayed session: the client's socket (uWS) and the upstream's (upstream-ws), and what it was opened with. */
export class Session<O extends SessionTerms> implements SessionHandler {
  /** Messages relayed and their payload bytes: in from the client to the upstream, out to the client. */
  messagesIn = 0;
  messagesOut = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** The client's socket, from its open to its close; uWS throws on any use of it after that. */
  private client: WebSocket<SessionData<O>> | null = null;
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

  constructor(
    private readonly peers: SessionPeers<O>,
    private readonly upstream: Upstream,
    readonly opened: O,
  ) {
    this.quietSince = peers.now();
    upstream.listen(this);
  }

  attach(client: WebSocket<SessionData<O>>): void {
    this.client = client;
  }

  /** A message from the client; `data` is uWS's memory, valid only during this call. */
  fromClient(data: ArrayBuffer, isBinary: boolean): void {
    if (this.ended) return;
    const upstream = this.upstream;
    const max = this.peers.maxMessage;
    // No message over `max` comes: uWS cuts the client first (maxPayloadLength).
    if (this.queuedBytes + upstream.bufferedAmount > max) {
      this.end('backpressure', 1013, 'the upstream node is not keeping up; try again later', 0, '');
      return;
    }
    if (!this.stands()) return;
    const refusal = this.peers.judge(this.opened, data);
    if (refusal !== null) {
      // Within uWS's message callback, which is corked already.
      this.client?.send(refusal, false);
      return;
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
    const outcome = standing(this.peers.seconds());
    if (outcome === Outcome.Valid) return true;
    this.tokenEnded(outcome);
    return false;
  }

  clientDrained(): void {
    if (this.paused && this.client !== null && this.client.getBufferedAmount() < this.peers.clientLowWater) {
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
      this.closeUpstream(1001, `the client sent a message over ${this.peers.maxMessage} bytes`);
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
  private tokenEnded(outcome: Exclude<Outcome, Outcome.Valid>): void {
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
    this.peers.audit(this.opened, outcome);
    this.end('token', 1008, this.peers.endedText(outcome), cut ? 0 : 1001, TOKEN_ENDED);
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
    const metrics = this.peers.metrics;
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
    if (!this.paused && client.getBufferedAmount() > this.peers.clientHighWater) {
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
    this.peers.untracked(this.upstream);
    if (this.ended) return;
    if (error instanceof UpstreamWsError && error.code === UpstreamWsCode.TooBig) {
      this.end('too big', 1009, `the upstream node sent a message over ${this.peers.maxMessage} bytes`, 0, '');
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
    const metrics = this.peers.metrics;
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
