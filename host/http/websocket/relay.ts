// The relay of one thread, as books: its handshakes, its sessions and every upstream socket
// not yet closed; the sweep that re-checks the sessions' tokens and their upstreams'
// silence; and the stop, which ends them all. It admits nothing and writes no HTTP: the
// upgrade (http/websocket.ts) does, and is told of what the books see through RelayPeers.
import type { WebSocket } from 'uWebSockets.js';
import type { Clock } from '../../clock.js';
import type { Metrics } from '../../ops/metrics.js';
import type { UpstreamWebSocket as Upstream } from '../upstream-ws/socket.js';
import type { Handshake, HandshakeBooks, HandshakeRefusal } from './handshake.js';
import type { Session, SessionData, SessionTerms } from './session.js';

/** How often each thread re-checks the tokens of its sessions, and looks for a quiet upstream. */
export const RECHECK_MS = 250;
/** How long a stop waits for the upstreams to answer its close frames before it cuts them. */
const SHUTDOWN_MS = 1000;
export const STOPPING_TEXT = 'api-auth is stopping';

/** What the books tell the upgrade that fills them; `O` is what a session is opened with. */
export interface RelayPeers<O extends SessionTerms> {
  readonly clock: Clock;
  readonly metrics: Metrics;
  /** Milliseconds an upstream may send nothing at all. */
  readonly idleMs: number;
  /** The answer a handshake gets when the relay stops. */
  readonly stopping: HandshakeRefusal;
  /** A handshake is in flight. */
  handshakeStarted(): void;
  /** A handshake is over; `session` false: it gave no session, and its place is free again. */
  handshakeEnded(opened: O, session: boolean): void;
  /** A session's client has closed, and the session with it. */
  sessionClosed(session: Session<O>): void;
}

/** The relay's books: its upgrades, its sessions, and their checks. */
export class Relay<O extends SessionTerms> implements HandshakeBooks<O> {
  private readonly sessions = new Set<Session<O>>();
  private readonly handshakes = new Set<Handshake<O>>();
  /** Every upstream socket not yet closed, sessions' and handshakes' alike. */
  private readonly upstreams = new Set<Upstream>();
  private sweeper: NodeJS.Timeout | null = null;
  /** Set once a stop has begun: an upgrade is then refused before it starts. */
  stopped = false;
  /** Called once the last upstream socket has closed, while a shutdown waits for that. */
  private allClosed: (() => void) | null = null;

  constructor(private readonly peers: RelayPeers<O>) {}

  /** Ends every session (1001) and answers every handshake (503); resolves once the upstreams have closed, SHUTDOWN_MS at most. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    for (const handshake of this.handshakes) handshake.refuse(this.peers.stopping);
    for (const session of this.sessions) session.end('stopping', 1001, STOPPING_TEXT, 1001, STOPPING_TEXT);
    if (this.upstreams.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, SHUTDOWN_MS);
        timer.unref();
        this.allClosed = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.close();
  }

  /** Cuts whatever upstream socket is left; sessions still open end with their client. */
  close(): void {
    for (const upstream of this.upstreams) upstream.terminate();
    this.stopSweeper();
  }

  tracked(upstream: Upstream): void {
    this.upstreams.add(upstream);
  }

  /** An upstream socket has closed. */
  untracked(upstream: Upstream): void {
    this.upstreams.delete(upstream);
    if (this.upstreams.size === 0) this.allClosed?.();
  }

  started(handshake: Handshake<O>): void {
    this.handshakes.add(handshake);
    this.peers.handshakeStarted();
  }

  /** A handshake is over; `session` false: it gave no session. */
  ended(handshake: Handshake<O>, session: boolean): void {
    this.handshakes.delete(handshake);
    this.peers.handshakeEnded(handshake.opened, session);
  }

  /** uWS opened a session's client socket. */
  opened(ws: WebSocket<SessionData<O>>): void {
    const { session } = ws.getUserData();
    session.attach(ws);
    this.sessions.add(session);
    const metrics = this.peers.metrics;
    metrics.wsOpen++;
    metrics.wsOpened++;
    this.sweeper ??= setInterval(() => this.sweep(), RECHECK_MS).unref();
  }

  /** uWS closed a session's client socket. */
  closed(session: Session<O>, code: number, message: ArrayBuffer): void {
    session.clientClosed(code, message);
    if (!this.sessions.delete(session)) return;
    const metrics = this.peers.metrics;
    this.peers.sessionClosed(session);
    metrics.wsOpen--;
    metrics.wsClose(session.closeReason);
    if (this.sessions.size === 0) this.stopSweeper();
  }

  /**
   * Every RECHECK_MS while sessions are open: the tokens and the upstreams' silence, both
   * at the clock's time (the client's silence is uWS's, on its own timer).
   */
  private sweep(): void {
    const moment = this.peers.clock();
    for (const session of this.sessions) {
      if (session.stands()) session.watch(moment, this.peers.idleMs);
    }
  }

  private stopSweeper(): void {
    if (this.sweeper === null) return;
    clearInterval(this.sweeper);
    this.sweeper = null;
  }
}
