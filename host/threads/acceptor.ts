// The main thread when several threads serve HTTP. It listens, accepts each connection
// and hands it to the HTTP threads in turn (uWebSockets.js's child app descriptors: the
// acceptor's own routes never run while a thread is registered); it owns the state (the
// core's owner instance, the token service, the state store, the hashing thread, the
// throttle) and answers what the threads ask of it (owner-channel.ts); and it keeps the
// process whole: every thread runs, or the process stops.
//
// A uWS app's thread must never end, nor the process exit, while the app holds a
// socket: Node aborts (uv_loop_close() with open handles); and a thread that ends while
// its descriptor is still registered makes the next connection handed to it a
// segfault. So the threads never end on their own (http-thread.ts turns every failure
// into a report), and every stop, clean or not, goes the one way that is safe:
//
//   1. close the listening socket (new connections are refused; before step 2, since an
//      acceptor without children serves connections itself),
//   2. remove every thread's descriptor, in the same turn (nothing more is handed over),
//   3. tell each thread to stop: it drains, closes its app and ends by itself,
//   4. once every thread has ended: close the acceptor, release the state, and let the
//      process exit.
//
// A start that fails before the listen (a thread that cannot start, a port in use, a
// data folder the owner cannot open) simply terminates the threads: none has had a
// socket.
//
// A thread that reports a failure, stops beating, or ends unasked starts the same stop,
// and the process then exits 1 after one log line naming the thread. A thread that
// never ends (stuck in a loop) is the one case left: the process kills itself with
// SIGKILL, the only hard stop that does not abort, after the stop's grace.
import { createRequire } from 'node:module';
import type { Worker } from 'node:worker_threads';
import type * as Prometheus from 'prom-client';
import { us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { ThreadError } from '../errors.js';
import type { Listening } from '../http/listener.js';
import { acceptorApp, certificateFields, snapshotTlsFiles } from '../http/tls.js';
import type { TlsSnapshot } from '../http/tls.js';
import type { RpcHandler } from '../http/rpc-route.js';
import { addChild, listenExclusive, omitServerMark, removeChild } from '../http/uws-shim.js';
import type { Fields, Level, Logger } from '../ops/log.js';
import { responsesByReasonOf } from '../ops/metrics.js';
import { nodeStatusOf } from '../ops/node-status.js';
import type { NodeStatus } from '../ops/node-status.js';
import type { Metrics, Scrape } from '../ops/metrics.js';
import { ownThread } from '../own-thread.js';
import { ledgerMemory } from '../http/session-ledger.js';
import { addByReason, RefusedMessages, refusedMessagesMemory } from '../http/refused-messages.js';
import { ThreadLink } from './owner-channel.js';
import type { HttpSettings, ThreadData } from './owner-channel.js';
import { healthWord } from './upstream-health.js';

// The one part of prom-client this needs, loaded itself as ops/prometheus.ts loads its parts.
const AggregatorRegistry = createRequire(import.meta.url)('prom-client/lib/cluster') as typeof Prometheus.AggregatorRegistry;

/** How often the acceptor looks at the heartbeats (each thread beats every HEARTBEAT_MS). */
const WATCHDOG_MS = 1000;
/** Checks in a row without a beat after which a thread counts as hung (GC pauses are far shorter). */
const WATCHDOG_MISSES = 5;
/** After the stop's grace, how long the threads get to end before the process kills itself. */
const END_GRACE_MS = 2000;

export interface ThreadsPlan {
  /** HTTP threads, 2 or more. */
  readonly threads: number;
  readonly host: string;
  readonly port: number;
  /** The compiled threads build of the core, and the shared memory its owner set up (slots 1..threads are the threads'). */
  readonly module: WebAssembly.Module;
  readonly memory: WebAssembly.Memory;
  readonly settings: HttpSettings;
  /** The throttle board the owner's throttle writes (throttle-board.ts). */
  readonly board: SharedArrayBuffer;
  /** The owner's own metrics (the token service's, the process's); the threads' are added when scraped. */
  readonly metrics: Metrics;
  readonly log: Logger;
  /** The threads' entry point: worker.js, or in tests one of their own (see http-thread.ts). */
  readonly script?: URL;
  /** Why the address and port cannot be listened on (uWS does not say). */
  whyNotListening(host: string, port: number): Promise<Error>;
}

/** What the owner brings once its state is open: the HTTP threads may then serve. */
export interface OwnerParts {
  /** The owner's /ext/auth, when tokens are required. */
  readonly auth: RpcHandler | undefined;
  /** Releases what the owner holds (state store, hashing thread), once every thread has ended. */
  release(): Promise<void>;
}

/** HTTP threads starting: they load and attach while the owner opens its state. */
export interface HttpThreads {
  /**
   * Listens once every thread is ready. Rejects (after ending every thread, and logging
   * nothing) when a thread could not start or the port cannot be listened on.
   */
  listen(owner: OwnerParts): Promise<Listening>;
  /** Ends every thread, before it ever served: the owner could not open its state. */
  abort(): Promise<void>;
  /**
   * What the threads have refused so far, by reason: their answers (Metrics.responsesByReason)
   * and the WebSocket messages refused inside sessions (http/refused-messages.ts), summed,
   * those of threads that have ended included.
   */
  refusalsByReason(): Promise<Map<string, number>>;
  /** The sessions open and the upstream's latency, every thread's (ops/node-status.ts). */
  nodeStatus(): Promise<NodeStatus>;
}

interface HttpThread {
  readonly number: number;
  readonly worker: Worker;
  readonly link: ThreadLink;
  /** Registered with the acceptor: connections may be handed to it. */
  descriptor: number | null;
  ready: boolean;
  ended: boolean;
  readonly end: Promise<void>;
}

/**
 * Starts `plan.threads` HTTP threads now; each registers with an acceptor on this thread
 * once ready, and `listen` listens once all are.
 */
export function startThreads(plan: ThreadsPlan): HttpThreads {
  const owner = new ThreadsOwner(plan);
  return {
    listen: (parts) => owner.start(parts),
    abort: () => owner.endThreads(),
    refusalsByReason: () => owner.refusalsByReason(),
    nodeStatus: () => owner.nodeStatus(),
  };
}

class ThreadsOwner {
  /** Listens, and hands each connection to a thread's app: of their kind (acceptorApp). */
  private readonly app: TemplatedApp;
  private readonly threads: HttpThread[] = [];
  private readonly heartbeats: Int32Array;
  private readonly upstreamHealth = healthWord();
  private readonly wsSessions: SharedArrayBuffer;
  private readonly wsRefused = refusedMessagesMemory();
  private listenSocket: us_listen_socket | null = null;
  private stopping: Promise<void> | null = null;
  /** The threads are being told to stop: they end as asked. */
  private ending = false;
  /** Connections may have been handed to the threads. */
  private listened = false;
  private failure: ThreadError | null = null;
  private watchdog: NodeJS.Timeout | undefined;
  private settleClosed!: { resolve(): void; reject(error: Error): void };
  /** Until the server listens: settles once every thread is ready, or one failed. */
  private starting: { resolve(): void; reject(error: Error): void } | null = null;
  private readonly allReady = new Promise<void>((resolve, reject) => {
    this.starting = { resolve, reject };
  });
  private owner: OwnerParts | null = null;
  /** The reload under way: one at a time, so that each swaps the descriptors the last one left. */
  private reloading: Promise<boolean> = Promise.resolve(false);
  private readonly closed = new Promise<void>((resolve, reject) => {
    this.settleClosed = { resolve, reject };
  });

  constructor(private readonly plan: ThreadsPlan) {
    // Answers only if a connection is ever accepted while no thread is registered, which
    // the order of start and stop rules out: a 503 rather than uWS's bare 404.
    omitServerMark();
    this.app = acceptorApp(plan.settings.tls).any('/*', (res) => {
      res
        .writeStatus('503 Service Unavailable')
        .writeHeader('Content-Type', 'text/plain; charset=utf-8')
        .end('api-auth is not serving\n', true);
    });
    // One counter per thread (index = thread number), bumped by the thread's own loop.
    this.heartbeats = new Int32Array(new SharedArrayBuffer(4 * (plan.threads + 1)));
    this.wsSessions = ledgerMemory(plan.settings.websocket.maxSessions);
    // Nobody need wait on these for a failure to be safe: start() and the server's user do.
    this.closed.catch(() => undefined);
    this.allReady.catch(() => undefined);
    for (let number = 1; number <= plan.threads; number++) this.spawn(number);
  }

  async start(owner: OwnerParts): Promise<Listening> {
    const { plan } = this;
    this.owner = owner;
    try {
      await this.allReady;
      this.listenSocket = await this.listen();
      this.listened = true;
      // A thread may have failed while the listen was answered.
      if (this.failure !== null) throw this.failure;
    } catch (error) {
      // Nothing was served and nothing is logged: the caller reports the error and releases the state.
      await this.endThreads();
      throw error;
    }
    this.starting = null;
    this.watch();
    const port = us_socket_local_port(this.listenSocket as never);
    plan.log.info('listening', { host: plan.host, port, httpThreads: plan.threads, tls: plan.settings.tls !== undefined });
    return { host: plan.host, port, stop: () => this.shutdown(), reloadTls: () => this.reloadTls(), closed: this.closed };
  }

  private spawn(number: number): void {
    const { plan } = this;
    const data: ThreadData = {
      thread: number,
      module: plan.module,
      memory: plan.memory,
      settings: plan.settings,
      heartbeats: this.heartbeats,
      upstreamHealth: this.upstreamHealth,
      board: plan.board,
      wsSessions: this.wsSessions,
      wsRefused: this.wsRefused,
    };
    const worker = ownThread(plan.script ?? new URL('./worker.js', import.meta.url), { workerData: data });
    let ended!: () => void;
    const thread: HttpThread = {
      number,
      worker,
      descriptor: null,
      ready: false,
      ended: false,
      end: new Promise((resolve) => {
        ended = resolve;
      }),
      link: new ThreadLink(worker, {
        // Threads call it only once listening, and by then the owner has given it.
        auth: (body, context) =>
          this.owner?.auth ? Promise.resolve(this.owner.auth.handle(body, context)) : Promise.reject(new Error('/ext/auth is not served')),
        ready: (descriptor) => {
          if (this.ending || thread.ready) return;
          thread.ready = true;
          thread.descriptor = descriptor;
          addChild(this.app, descriptor);
          if (this.threads.every((t) => t.ready)) this.starting?.resolve();
        },
        log: (level: Level, msg: string, fields: Fields | undefined, time: number) => plan.log[level](msg, fields, time),
        fatal: (error) => this.fail(thread, `HTTP thread ${number} failed: ${error}`),
        scrape: () => this.scrape(),
      }),
    };
    // Only a failure before the thread's own handlers are in place (it could not load or
    // start) gets here; 'exit' follows.
    worker.on('error', (error) => this.fail(thread, `HTTP thread ${number} failed: ${error.message}`));
    worker.on('exit', (code) => {
      thread.ended = true;
      thread.link.gone();
      // Too late if a connection was handed to it meanwhile; taken out all the same, so
      // that no more are.
      this.unregister(thread);
      if (!this.ending) this.fail(thread, `HTTP thread ${number} ended (exit code ${code})`);
      ended();
    });
    this.threads.push(thread);
  }

  private listen(): Promise<us_listen_socket> {
    const { host, port } = this.plan;
    return new Promise((resolve, reject) => {
      listenExclusive(this.app, host, port, (socket) => {
        if (socket) resolve(socket);
        else void this.plan.whyNotListening(host, port).then(reject);
      });
    });
  }

  /**
   * Before the server listens: fails the start. After: logs why, and stops, with exit
   * code 1 to come.
   */
  private fail(thread: HttpThread, message: string): void {
    if (this.failure !== null) return;
    this.failure = new ThreadError(message);
    if (this.starting !== null) {
      this.starting.reject(this.failure);
      return;
    }
    this.plan.log.error('an HTTP thread failed; stopping', { thread: thread.number, error: message });
    void this.shutdown();
  }

  private reloadTls(): Promise<boolean> {
    this.reloading = this.reloading.catch(() => false).then(() => this.reloadTlsNow());
    return this.reloading;
  }

  /**
   * Each thread makes a new app with the files as they are now, and gets new connections
   * there; its older apps keep theirs. The files are read and checked here first, off the
   * event loop (tls.ts), so that a bad pair is one error and every thread keeps the old
   * one; the threads load the private copy of what was checked.
   */
  private async reloadTlsNow(): Promise<boolean> {
    const {
      log,
      settings: { tls },
    } = this.plan;
    if (tls === undefined || this.ending) return false;
    let snapshot: TlsSnapshot;
    try {
      snapshot = await snapshotTlsFiles(tls);
    } catch (error) {
      log.error('cannot reload the TLS certificate; serving with the one loaded before', { error: (error as Error).message });
      return false;
    }
    let answers: PromiseSettledResult<number>[];
    try {
      if (this.ending) return false;
      answers = await Promise.allSettled(this.threads.map((thread) => thread.link.reloadTls(snapshot.files)));
    } finally {
      await snapshot.discard().catch(() => undefined);
    }
    const failed: string[] = [];
    answers.forEach((answer, i) => {
      const thread = this.threads[i];
      if (answer.status === 'rejected') {
        failed.push(`thread ${thread.number}: ${(answer.reason as Error).message}`);
        return;
      }
      // A thread taken out meanwhile (a stop began) gets no connections any more.
      if (this.ending || thread.descriptor === null) return;
      addChild(this.app, answer.value);
      removeChild(this.app, thread.descriptor);
      thread.descriptor = answer.value;
    });
    if (failed.length > 0) {
      log.error('cannot reload the TLS certificate on every thread; those named serve with the one loaded before', { errors: failed });
      return false;
    }
    log.info('TLS certificate reloaded', { certFile: tls.certFile, ...certificateFields(snapshot.cert) });
    return true;
  }

  private unregister(thread: HttpThread): void {
    if (thread.descriptor === null) return;
    removeChild(this.app, thread.descriptor);
    thread.descriptor = null;
  }

  /** The one way to stop once listening: the threads end, then the owner's state is released. */
  private shutdown(): Promise<void> {
    this.stopping ??= (async () => {
      try {
        await this.endThreads();
        await this.owner?.release();
      } catch (error) {
        this.settleClosed.reject(error instanceof Error ? error : new Error(String(error)));
        throw error;
      }
      this.plan.log.info('stopped');
      if (this.failure === null) this.settleClosed.resolve();
      else this.settleClosed.reject(this.failure);
    })();
    return this.stopping;
  }

  /** Steps 1 to 4 above, but the release. */
  async endThreads(): Promise<void> {
    this.ending = true;
    clearInterval(this.watchdog);
    if (this.listenSocket !== null) us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    for (const thread of this.threads) this.unregister(thread);
    if (!this.listened) {
      // Never listened, so no thread ever got a socket: ending them from here is safe, and
      // a start that failed does not wait for threads still loading.
      await Promise.all(this.threads.map((t) => (t.ended ? undefined : t.worker.terminate())));
      await Promise.all(this.threads.map((t) => t.end));
      this.app.close();
      return;
    }
    for (const thread of this.threads) if (!thread.ended) thread.link.stop();
    // A thread stuck in a loop never reads `stop`, and ending it from here (terminate,
    // process.exit) would abort the process while its app holds sockets.
    const deadline = setTimeout(() => {
      const stuck = this.threads.filter((t) => !t.ended).map((t) => t.number);
      this.plan.log.error('HTTP threads did not stop in time; killing the process', { threads: stuck });
      process.kill(process.pid, 'SIGKILL');
    }, this.plan.settings.graceMs + END_GRACE_MS);
    await Promise.all(this.threads.map((t) => t.end));
    clearTimeout(deadline);
    this.app.close();
  }

  /** A thread whose counter has not moved for WATCHDOG_MISSES checks is hung: it would swallow its share of connections. */
  private watch(): void {
    const last = new Int32Array(this.threads.length + 1);
    const misses = new Int32Array(this.threads.length + 1);
    this.watchdog = setInterval(() => {
      for (const thread of this.threads) {
        const beat = Atomics.load(this.heartbeats, thread.number);
        misses[thread.number] = beat === last[thread.number] ? misses[thread.number] + 1 : 0;
        last[thread.number] = beat;
        if (misses[thread.number] >= WATCHDOG_MISSES) {
          this.fail(
            thread,
            `HTTP thread ${thread.number} stopped responding (no heartbeat for ${(WATCHDOG_MISSES * WATCHDOG_MS) / 1000} s)`,
          );
        }
      }
    }, WATCHDOG_MS);
    this.watchdog.unref();
  }

  /** The refusals by reason of every thread, summed (the owner writes none): an ended one's from its last metrics. */
  async refusalsByReason(): Promise<Map<string, number>> {
    const metrics = await Promise.all(this.threads.map((t) => t.link.last ?? (t.ended ? [] : t.link.collect())));
    return addByReason(responsesByReasonOf(metrics), new RefusedMessages(this.wsRefused).byReason());
  }

  /** The sessions open and the upstream's latency, from the threads still running. */
  async nodeStatus(): Promise<NodeStatus> {
    return nodeStatusOf(await Promise.all(this.threads.filter((t) => !t.ended).map((t) => t.link.collect())));
  }

  /** Every thread's metrics and the owner's, summed (counters and histograms add up; series by thread stay apart). */
  private async scrape(): Promise<Scrape> {
    const registry = this.plan.metrics.registry;
    const all = await Promise.all([registry.getMetricsAsJSON(), ...this.threads.filter((t) => !t.ended).map((t) => t.link.collect())]);
    return { contentType: registry.contentType, text: await AggregatorRegistry.aggregate(all).metrics() };
  }
}
