// Listening and stopping: the uWebSockets.js App on its port, alone there, and a stop
// that lets the requests under way finish before it releases what the server holds.
import { createServer } from 'node:net';
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { ListenError } from '../errors.js';
import type { Namer } from '../errors.js';
import type { Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import type { TlsFiles } from '../pem.js';
import { serveOn } from './handlers.js';
import type { InFlight } from './in-flight.js';
import type { Router } from './router.js';
import { acceptorApp, certificateFields, snapshotTlsFiles, tlsApp } from './tls.js';
import { addChild, descriptorOf, listenExclusive, omitServerMark, removeChild } from './uws-shim.js';
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
   * Serves new connections with the TLS certificate and key as their files are now
   * (SIGHUP does this for the command); connections already open keep theirs. Resolves
   * false, and keeps the old pair, when the files cannot be used (logged as an error);
   * false without TLS.
   */
  reloadTls(): Promise<boolean>;
  /**
   * Settles once the server has stopped. Rejects with a ThreadError when it stopped by
   * itself because an HTTP thread failed (the log says which and why): the process
   * should then exit 1.
   */
  readonly closed: Promise<void>;
  /**
   * Opens --access-log's file again, in every thread, within a fraction of a second
   * (SIGHUP does this for the command, after logrotate renamed the file); nothing without it.
   */
  reopenAccessLog(): void;
}

/** What a listener gives: the handle but for the access log, which startServer adds. */
export type Listening = Omit<ServerHandle, 'reopenAccessLog'>;

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
      const problem =
        LISTEN_PROBLEMS[e.code ?? ''] ?? ((name: Namer) => `${e.code ?? e.message}; choose another ${name('host')} or ${name('port')}`);
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
  /** The app that listens: with TLS, it only accepts, and hands each connection to `served` (tls.ts). */
  private readonly app: TemplatedApp;
  /** With TLS, the apps serving: the last one gets new connections, the others keep theirs until the stop. */
  private readonly served: TemplatedApp[] = [];
  private listenSocket: us_listen_socket | null = null;
  private stopping: Promise<void> | null = null;
  private stopped!: () => void;
  private readonly closed = new Promise<void>((resolve) => {
    this.stopped = resolve;
  });
  /** Puts the request handling on an app. */
  private readonly serve: (app: TemplatedApp) => TemplatedApp;

  /**
   * `release` runs once the last request is answered (or the grace is over), before the
   * stop resolves. `metrics` counts the requests (this is HTTP thread 1). `tls`: serve
   * HTTPS with these files, checked already. `websockets` takes the WebSocket upgrades;
   * without it they are requests like any other.
   */
  constructor(
    private readonly tls: TlsFiles | undefined,
    router: Router,
    private readonly inFlight: InFlight,
    metrics: Metrics,
    private readonly release: () => Promise<void>,
    private readonly log: Logger,
    private readonly websockets: WebSocketRelay | null = null,
  ) {
    // Each request counted; an exception answers 500 (handlers.ts), then ends the process as
    // any uncaught exception does (main.ts logs it), outside uWS's call.
    this.serve = (app) =>
      serveOn(
        app,
        {
          handle: (res, req) => {
            metrics.requests++;
            router.handle(res, req);
          },
          websocket: websockets && {
            ...websockets.behavior,
            upgrade: (res, req, context) => {
              metrics.requests++;
              websockets.upgrade(res, req, context);
            },
          },
        },
        (error) =>
          process.nextTick(() => {
            throw error;
          }),
      );
    omitServerMark();
    if (tls === undefined) {
      this.app = this.serve(App());
    } else {
      const served = this.serve(tlsApp(tls));
      this.served.push(served);
      this.app = acceptorApp(tls);
      addChild(this.app, descriptorOf(served));
    }
  }

  /** The reload under way: one at a time, so that each replaces the app the last one left. */
  private reloading: Promise<boolean> = Promise.resolve(false);

  /** New connections go to a new app with the files as they are now; the old apps keep theirs (tls.ts). */
  private reloadTls(): Promise<boolean> {
    this.reloading = this.reloading.catch(() => false).then(() => this.reloadTlsNow());
    return this.reloading;
  }

  private async reloadTlsNow(): Promise<boolean> {
    const tls = this.tls;
    if (tls === undefined || this.stopping !== null) return false;
    let served: TemplatedApp;
    let cert: Buffer;
    try {
      const snapshot = await snapshotTlsFiles(tls);
      cert = snapshot.cert;
      try {
        // A stop that began while the files were read has closed the apps: none is added.
        if (this.stopping !== null) return false;
        served = this.serve(tlsApp(snapshot.files));
      } finally {
        await snapshot.discard().catch(() => undefined);
      }
    } catch (error) {
      this.log.error('cannot reload the TLS certificate; serving with the one loaded before', { error: (error as Error).message });
      return false;
    }
    addChild(this.app, descriptorOf(served));
    removeChild(this.app, descriptorOf(this.served[this.served.length - 1]));
    this.served.push(served);
    this.log.info('TLS certificate reloaded', { certFile: tls.certFile, ...certificateFields(cert) });
    return true;
  }

  /**
   * Listens on the port alone. Unless told otherwise, uSockets sets SO_REUSEPORT when it
   * listens on a named port, so a second process listening there succeeds too, and the
   * kernel splits the connections between them: a second instance with auth off would
   * answer about half of the clients. Throws ListenError when the port is taken or the
   * address cannot be listened on.
   */
  listen(host: string, port: number): Promise<Listening> {
    return new Promise((resolve, reject) => {
      listenExclusive(this.app, host, port, (socket) => {
        if (!socket) {
          this.app.close();
          for (const served of this.served) served.close();
          void whyNotListening(host, port).then(reject);
          return;
        }
        this.listenSocket = socket;
        const actual = us_socket_local_port(socket as never);
        this.log.info('listening', { host, port: actual, httpThreads: 1, tls: this.tls !== undefined });
        resolve({ host, port: actual, stop: () => this.stop(), reloadTls: () => this.reloadTls(), closed: this.closed });
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
    for (const served of this.served) served.close();
    await this.release();
    this.log.info('stopped');
    this.stopped();
  }
}
