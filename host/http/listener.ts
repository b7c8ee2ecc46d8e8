// Listening and stopping: the uWebSockets.js App on its port, alone there, and a stop
// that lets the requests under way finish before it releases what the server holds.
import { createServer } from 'node:net';
import * as uws from 'uWebSockets.js';
import { us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { ListenError } from '../errors.js';
import type { Namer } from '../errors.js';
import type { Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import type { InFlight } from './in-flight.js';
import type { Router } from './router.js';
import type { WebSocketRelay } from './websocket.js';

/** How long a stop waits for requests under way. */
export const STOP_GRACE_MS = 5000;

export interface ServerHandle {
  readonly host: string;
  /** The port listened on (the chosen one when the options said 0). */
  readonly port: number;
  /** Stops accepting, lets in-flight requests finish (at most 5 s), closes the state store and the hashing thread. */
  stop(): Promise<void>;
  /**
   * Settles once the server has stopped. Rejects with a ThreadError when it stopped by
   * itself because an HTTP thread failed (the log says which and why): the process
   * should then exit 1.
   */
  readonly closed: Promise<void>;
}

// uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT, and the listen that takes it with a host: the
// package has both, its typings neither.
const EXCLUSIVE_PORT = (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;

interface ExclusiveListen {
  listen(host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void): void;
}

/**
 * Why uWebSockets.js could not listen, which it does not say: the same listen through
 * Node names the cause (the port in use, an address not of this machine, a privileged
 * port), and that cause picks the advice.
 */
export function whyNotListening(host: string, port: number): Promise<ListenError> {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (e: NodeJS.ErrnoException) => {
      const problem = LISTEN_PROBLEMS[e.code ?? ''] ?? ((name: Namer) => `${e.code ?? e.message}; choose another ${name('host')} or ${name('port')}`);
      resolve(new ListenError((name) => `cannot listen on ${where}: ${problem(name)}`));
    });
    probe.listen({ host, port, exclusive: true }, () => {
      probe.close();
      resolve(new ListenError((name) => `cannot listen on ${where}; choose another ${name('host')} or ${name('port')}`));
    });
  });
}

const LISTEN_PROBLEMS: Readonly<Record<string, (name: Namer) => string>> = {
  EADDRINUSE: (name) => `the port is in use by another program (another api-auth?); stop it or choose another ${name('port')}`,
  EADDRNOTAVAIL: (name) => `the address is not one of this machine's; choose another ${name('host')} (0.0.0.0 for every address)`,
  EACCES: (name) => `ports below 1024 need privileges; choose another ${name('port')}, or grant CAP_NET_BIND_SERVICE`,
  ENOTFOUND: (name) => `the host name does not resolve; give ${name('host')} an address, such as 127.0.0.1`,
  EAI_AGAIN: (name) => `the host name does not resolve; give ${name('host')} an address, such as 127.0.0.1`,
};

/** The server on one thread, which serves every request itself (--http-threads 1). */
export class HttpServer {
  private listenSocket: us_listen_socket | null = null;
  private stopping: Promise<void> | null = null;
  private stopped!: () => void;
  private readonly closed = new Promise<void>((resolve) => {
    this.stopped = resolve;
  });

  /**
   * `release` runs once the last request is answered (or the grace is over), before the
   * stop resolves. `metrics` counts the requests (this is HTTP thread 1). `websockets`
   * takes the WebSocket upgrades; without it they are requests like any other.
   */
  constructor(
    private readonly app: TemplatedApp,
    router: Router,
    private readonly inFlight: InFlight,
    metrics: Metrics,
    private readonly release: () => Promise<void>,
    private readonly log: Logger,
    private readonly websockets: WebSocketRelay | null = null,
  ) {
    this.app.any('/*', (res, req) => {
      metrics.requests++;
      router.handle(res, req);
    });
    // uWS hands this route only GETs that ask for a WebSocket (a Sec-WebSocket-Key), before any().
    if (websockets !== null) {
      this.app.ws('/*', {
        ...websockets.behavior,
        upgrade: (res, req, context) => {
          metrics.requests++;
          websockets.upgrade(res, req, context);
        },
      });
    }
  }

  /**
   * Listens on the port alone. Unless told otherwise, uSockets sets SO_REUSEPORT when it
   * listens on a named port, so a second process listening there succeeds too, and the
   * kernel splits the connections between them: a second instance with auth off would
   * answer about half of the clients. Throws ListenError when the port is taken or the
   * address cannot be listened on.
   */
  listen(host: string, port: number): Promise<ServerHandle> {
    return new Promise((resolve, reject) => {
      (this.app as unknown as ExclusiveListen).listen(host, port, EXCLUSIVE_PORT, (socket) => {
        if (!socket) {
          this.app.close();
          void whyNotListening(host, port).then(reject);
          return;
        }
        this.listenSocket = socket;
        const actual = us_socket_local_port(socket as never);
        this.log.info('listening', { host, port: actual, httpThreads: 1 });
        resolve({ host, port: actual, stop: () => this.stop(), closed: this.closed });
      });
    });
  }

  private stop(): Promise<void> {
    this.stopping ??= this.drainAndClose();
    return this.stopping;
  }

  private async drainAndClose(): Promise<void> {
    if (this.listenSocket !== null) us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    // Sessions last as long as their clients like: they are ended (1001), not waited for.
    await this.websockets?.shutdown();
    const left = await this.inFlight.drain(STOP_GRACE_MS);
    if (left > 0) this.log.warn('stopping with requests still in flight', { requests: left });
    // The last response may have been written inside a uWS callback that is still on the
    // stack; uWS sends it when that callback returns, and closing first would drop it.
    await new Promise((resolve) => setImmediate(resolve));
    // Closes the kept-alive connections too, which would otherwise hold the process.
    this.app.close();
    await this.release();
    this.log.info('stopped');
    this.stopped();
  }
}
