// An upgrade waiting for the upstream: the upstream socket's handshake, its timeout, and
// the client's answer, given once: the 101 and a session when the upstream accepts, else
// the HTTP error it earned. The HTTP answers themselves (the proxy's bodies and status
// lines, the access log's upstream status) and the relay's books come in as its peers
// (HandshakePeers, HandshakeBooks), so that a handshake reaches back into nothing.
import type { HttpResponse, us_socket_context_t } from 'uWebSockets.js';
import type { WsRefusal } from '../../ops/metric-labels.js';
import { UpstreamWsError } from '../upstream-ws/errors.js';
import { connectUpstream } from '../upstream-ws/socket.js';
import type { HandshakeHandler, UpstreamWebSocket as Upstream } from '../upstream-ws/socket.js';
import { UPSTREAM_CLOSE_MS } from './messages.js';
import type { Session, SessionData, SessionTerms } from './session.js';

/** An HTTP error for the client in place of its 101: its reason in the metrics, its status line, its body. */
export interface HandshakeRefusal {
  readonly reason: WsRefusal;
  readonly status: string;
  readonly body: Uint8Array;
}

/** The books a handshake is kept in, and its upstream socket (the relay's, relay.ts). */
export interface HandshakeBooks<O extends SessionTerms> {
  started(handshake: Handshake<O>): void;
  /** The handshake is over; `session` false: it gave no session. */
  ended(handshake: Handshake<O>, session: boolean): void;
  tracked(upstream: Upstream): void;
  /** An upstream socket has closed. */
  untracked(upstream: Upstream): void;
}

/** What a handshake needs of the upgrade that started it; `O` is what its session is opened with. */
export interface HandshakePeers<O extends SessionTerms> {
  /** The upstream's URL, the largest message, and how long the upstream has to accept. */
  readonly url: URL;
  readonly maxMessage: number;
  readonly timeoutMs: number;
  /** The upstream accepted: the session that carries it on. */
  session(upstream: Upstream, opened: O): Session<O>;
  /** A request the upstream socket cannot send as it is (a subprotocol list, a header value): answered 400 here. */
  unsendable(res: HttpResponse, error: UpstreamWsError): void;
  /** The upstream answered with another status than 101. */
  upstreamStatus(res: HttpResponse, status: number, message: string): HandshakeRefusal;
  /** The upstream answered 101, but not as the handshake asked. */
  answeredWrongly(error: Error): HandshakeRefusal;
  /** The upstream did not answer (it could not be reached, or not in time). */
  upstreamFailed(error: Error, res: HttpResponse): HandshakeRefusal;
  /** The upstream answered, for its health. */
  upstreamAnswered(): void;
  /** A refusal has been answered, for the metrics. */
  refused(reason: WsRefusal): void;
}

/** An upgrade waiting for the upstream: the client's 101 once the upstream accepts, or the HTTP error it earned. */
export class Handshake<O extends SessionTerms> implements HandshakeHandler {
  private upstream: Upstream | null = null;
  private timer: NodeJS.Timeout | undefined;
  private settled = false;

  constructor(
    private readonly books: HandshakeBooks<O>,
    private readonly peers: HandshakePeers<O>,
    private readonly res: HttpResponse,
    private readonly key: string,
    private readonly context: us_socket_context_t,
    readonly opened: O,
  ) {}

  /** `headers`: the proxy's flat [name, value, ...] list; the handshake's own fields are the upstream socket's to write. */
  start(target: string, protocols: string[], headers: readonly string[]): void {
    const { books, peers, res } = this;
    books.started(this);
    res.onAborted(() => this.clientGone());
    let upstream: Upstream;
    try {
      // The target goes out byte for byte, as the proxy's does.
      upstream = connectUpstream(
        {
          url: peers.url,
          target,
          protocols,
          headers,
          maxMessage: peers.maxMessage,
          closeTimeoutMs: UPSTREAM_CLOSE_MS,
        },
        this,
      );
    } catch (error) {
      if (!(error instanceof UpstreamWsError)) throw error;
      // A subprotocol list or a header value that cannot be sent as it is: the client's own mistake.
      this.settle(false);
      peers.unsendable(res, error);
      return;
    }
    this.upstream = upstream;
    books.tracked(upstream);
    this.timer = setTimeout(() => this.timedOut(), peers.timeoutMs);
  }

  /** Answers the client with an HTTP error: the upstream is cut, and the place in the count freed. */
  refuse(refusal: HandshakeRefusal): void {
    if (!this.settle(false)) return;
    this.upstream?.terminate();
    this.peers.refused(refusal.reason);
    this.res.cork(() => this.res.writeStatus(refusal.status).writeHeader('Content-Type', 'application/json').end(refusal.body));
  }

  accepted(upstream: Upstream): void {
    if (!this.settle(true)) return;
    this.peers.upstreamAnswered();
    const session = this.peers.session(upstream, this.opened);
    // Not within res.cork(), as uWS would have it: in this uWS, cork() after an
    // upgrade from outside its own callbacks may read the new WebSocket's memory as the
    // HTTP response's state and close the socket it just opened (uNetworking/uWebSockets
    // #1928, fixed by #1929, in no uWebSockets.js release yet). Uncorked, the 101 costs
    // a few more writes, and uWS prints a warning about it to stderr.
    // uWS calls the open handler within upgrade(), so the session is attached before any message can come.
    this.res.upgrade<SessionData<O>>({ session }, this.key, upstream.protocol, '', this.context);
  }

  unexpected(status: number, message: string): void {
    this.refuse(this.peers.upstreamStatus(this.res, status, message));
  }

  failed(error: Error, answered: boolean): void {
    if (this.settled) return;
    // Answered: it answered 101, but not as the handshake asked (a subprotocol not offered, a wrong accept key).
    this.refuse(answered ? this.peers.answeredWrongly(error) : this.peers.upstreamFailed(error, this.res));
  }

  private timedOut(): void {
    const error = Object.assign(new Error('the WebSocket handshake timed out'), { code: 'ETIMEDOUT' });
    this.refuse(this.peers.upstreamFailed(error, this.res));
  }

  closed(): void {
    this.books.untracked(this.upstream!);
  }

  private clientGone(): void {
    // Settled once the upstream accepted: its socket is then the session's to close.
    if (!this.settle(false)) return;
    this.upstream?.terminate();
  }

  /** Settles once: false when it was settled already. */
  private settle(session: boolean): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearTimeout(this.timer);
    this.books.ended(this, session);
    return true;
  }
}
