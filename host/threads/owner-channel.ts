// The messages between an HTTP thread and the main thread, which owns the state. An HTTP
// thread checks tokens against the shared core by itself; everything else that is the
// owner's goes through here: the calls of /ext/auth (the token service, its throttle and
// its hashing thread are the owner's), metrics scrapes (every thread's counters, summed),
// and the log lines (one stream, written by one thread, so lines never interleave).
//
// Each request carries an id, and its answer the same id; an answer to a thread that has
// gone away is dropped by Node. The owner answers every request it gets, also while the
// threads drain: a call waiting for its answer is a request in flight.
import { systemClock } from '../clock.js';
import type { MessagePort, Worker } from 'node:worker_threads';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { AllowedOrigins } from '../origins.js';
import type { RpcHandler } from '../http/rpc-route.js';
import type { TlsFiles } from '../pem.js';
import type { WebSocketSettings } from '../http/websocket.js';
import type { LineTarget } from '../ops/line-target.js';
import type { Fields, Level, Logger } from '../ops/log.js';
import { LEVELS } from '../ops/log.js';
import type { MetricsSource, Scrape } from '../ops/metrics.js';
import type { CallContext, Reply, SessionCredentials } from '../rpc/jsonrpc.js';
import { InvariantError } from '../api-auth-error.js';

/** How often each HTTP thread bumps its heartbeat counter, in ms. */
export const HEARTBEAT_MS = 500;

/** What an HTTP thread needs to know of the options; plain data, as a thread gets it. */
export interface HttpSettings {
  readonly authRequired: boolean;
  /** --console: the operator's console is served. */
  readonly console: boolean;
  /** Exact paths that need no token. */
  readonly publicEndpoints: readonly string[];
  readonly metricsPath: string;
  /** The node to protect; undefined serves the built-in node endpoints. */
  readonly upstream:
    | { readonly origin: string; readonly timeoutMs: number; readonly maxBody: number; readonly pipelining: number }
    | undefined;
  /** How WebSocket sessions are relayed and bounded (the process's session count is `ThreadData.wsSessions`). */
  readonly websocket: Omit<WebSocketSettings, 'sessions' | 'refusedMessages'>;
  /** Addresses and CIDR ranges, as given. */
  readonly trustedProxies: readonly string[];
  readonly logLevel: Level;
  /** How long a stop waits for requests in flight, in ms. */
  readonly graceMs: number;
  /** Serve HTTPS with these files (checked by the owner); undefined serves plain HTTP. */
  readonly tls: TlsFiles | undefined;
  readonly allowedOrigins: AllowedOrigins;
  /** A fleet gateway's fence (threads/fence.ts), shared with the owner; undefined outside a fleet. */
  readonly fence?: Uint32Array;
  /** --access-log's target, shared with the owner (which bumps its reopen word); each thread opens its own descriptor. */
  readonly accessLog?: LineTarget;
}

/** An HTTP thread's `workerData`. */
export interface ThreadData {
  /** 1 to the number of threads; also the thread's slot in the shared core. */
  readonly thread: number;
  /** The compiled threads build of the core, and the memory its owner set up. */
  readonly module: WebAssembly.Module;
  readonly memory: WebAssembly.Memory;
  readonly settings: HttpSettings;
  /** One counter per thread, at the thread's number: the thread bumps its own, the acceptor watches them all. */
  readonly heartbeats: Int32Array;
  /** The upstream's health, one word for every thread (upstream-health.ts). */
  readonly upstreamHealth: Int32Array;
  /** Who must wait before a password check, as the owner's throttle publishes it (throttle-board.ts). */
  readonly board: SharedArrayBuffer;
  /** The WebSocket sessions open in the process, one ledger for every thread (session-ledger.ts), bounded by --ws-max-sessions and its shares. */
  readonly wsSessions: SharedArrayBuffer;
  /** The WebSocket messages refused inside sessions, every thread's (refused-messages.ts). */
  readonly wsRefused: SharedArrayBuffer;
}

/** One thread's metrics, as `registry.getMetricsAsJSON()` gives them, for `AggregatorRegistry.aggregate`. */
export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** From an HTTP thread to the owner. */
export type ThreadMessage =
  /** The thread's app is ready for connections: `descriptor` is its `getDescriptor()`. */
  | { readonly t: 'ready'; readonly descriptor: number }
  /** A line for the owner to write; `time` is when the thread logged it (lines from different threads reach the owner in any order). */
  | { readonly t: 'log'; readonly level: Level; readonly msg: string; readonly fields?: Fields; readonly time: number }
  /** Something failed that the thread cannot recover from; the owner stops the process. */
  | { readonly t: 'fatal'; readonly error: string }
  /** The thread's metrics as it ends, after its last answer: the owner's sums keep them once it has gone. */
  | { readonly t: 'final'; readonly metrics: MetricsJson }
  | { readonly t: 'auth'; readonly id: number; readonly body: Uint8Array; readonly address: string; readonly session?: SessionCredentials }
  | { readonly t: 'scrape'; readonly id: number }
  | { readonly t: 'collected'; readonly id: number; readonly metrics: MetricsJson }
  | { readonly t: 'collected'; readonly id: number; readonly error: string }
  /** The thread's new app, serving with the TLS files as they are now (tls.ts): its descriptor. */
  | { readonly t: 'reloadedTls'; readonly id: number; readonly descriptor: number }
  | { readonly t: 'reloadedTls'; readonly id: number; readonly error: string };

/** From the owner to an HTTP thread. */
export type OwnerMessage =
  | { readonly t: 'auth'; readonly id: number; readonly reply: Reply }
  | { readonly t: 'auth'; readonly id: number; readonly error: string }
  | { readonly t: 'scrape'; readonly id: number; readonly scrape: Scrape }
  | { readonly t: 'scrape'; readonly id: number; readonly error: string }
  /** Send your metrics (answered with `collected`). */
  | { readonly t: 'collect'; readonly id: number }
  /** Drain, close and end: the acceptor hands this thread no more connections. */
  | { readonly t: 'stop' }
  /** Make a new app with the TLS pair in `files`, a checked copy (answered with `reloadedTls`). */
  | { readonly t: 'reloadTls'; readonly id: number; readonly files: TlsFiles };

/** Waiting requests by id, each settled once by its answer. */
class Pending<T> {
  private readonly waiting = new Map<number, { resolve(value: T): void; reject(error: Error): void }>();
  private next = 0;
  private gone: Error | null = null;

  add(send: (id: number) => void): Promise<T> {
    if (this.gone !== null) return Promise.reject(this.gone);
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      send(id);
    });
  }

  settle(id: number, result: { value: T } | { error: Error }): void {
    const waiter = this.waiting.get(id);
    if (waiter === undefined) return;
    this.waiting.delete(id);
    if ('value' in result) waiter.resolve(result.value);
    else waiter.reject(result.error);
  }

  /** Fails every request still waiting, and every later one: the other side is gone. */
  abandon(error: Error): void {
    this.gone = error;
    for (const waiter of this.waiting.values()) waiter.reject(error);
    this.waiting.clear();
  }
}

/**
 * The HTTP thread's side: the owner's endpoints as local objects, a logger whose lines
 * the owner writes, and the thread's reports (ready, fatal).
 */
export class OwnerLink {
  private readonly calls = new Pending<Reply>();
  private readonly scrapes = new Pending<Scrape>();
  private stopped: (() => void) | null = null;
  /** The owner said stop before anyone listened for it. */
  private stopAsked = false;
  private collect: (() => Promise<MetricsJson>) | null = null;
  private reloadTls: ((files: TlsFiles) => number) | null = null;

  /** /ext/auth as the owner answers it. */
  readonly auth: RpcHandler = {
    handle: (body, context) =>
      this.calls.add((id) => {
        // The body may be a view on uWS's own memory, valid only until handle() returns (the
        // link's contract): it is copied, and the copy moved to the owner.
        const own = body.slice();
        this.post({ t: 'auth', id, body: own, address: context.address, session: context.session }, [own.buffer as ArrayBuffer]);
      }),
  };

  /** Every thread's metrics, summed by the owner. */
  readonly metrics: MetricsSource = {
    scrape: () => this.scrapes.add((id) => this.post({ t: 'scrape', id })),
  };

  constructor(private readonly port: MessagePort) {
    port.on('message', (message: OwnerMessage) => this.receive(message));
  }

  /**
   * A logger at `level` whose lines the owner writes, with `fields` added to each (the
   * thread's number). Lines below the level are dropped here, before any message.
   */
  logger(level: Level, fields: Fields): Logger {
    const threshold = LEVELS.indexOf(level);
    const emitter = (at: Level) =>
      LEVELS.indexOf(at) < threshold
        ? (): void => undefined
        : (msg: string, more?: Fields, time?: number): void =>
            this.post({ t: 'log', level: at, msg, fields: { ...more, ...fields }, time: time ?? systemClock() });
    return { debug: emitter('debug'), info: emitter('info'), warn: emitter('warn'), error: emitter('error') };
  }

  /** Answers the owner's requests for this thread's metrics with `collect()`. */
  onCollect(collect: () => Promise<MetricsJson>): void {
    this.collect = collect;
  }

  /** Answers the owner's TLS reloads with the descriptor of the new app that `reload(files)` makes. */
  onReloadTls(reload: (files: TlsFiles) => number): void {
    this.reloadTls = reload;
  }

  /** Runs `stop` when the owner says so, or now if it has (once). */
  onStop(stop: () => void): void {
    if (this.stopAsked) stop();
    else this.stopped = stop;
  }

  ready(descriptor: number): void {
    this.post({ t: 'ready', descriptor });
  }

  fatal(error: string): void {
    this.post({ t: 'fatal', error });
  }

  /** The thread's last metrics, as it ends (before close). */
  final(metrics: MetricsJson): void {
    this.post({ t: 'final', metrics });
  }

  /** Lets the thread end: no more messages either way. */
  close(): void {
    this.port.close();
    const gone = new Error('the connection to the main thread is closed');
    this.calls.abandon(gone);
    this.scrapes.abandon(gone);
  }

  private post(message: ThreadMessage, transfer?: ArrayBuffer[]): void {
    this.port.postMessage(message, transfer);
  }

  private receive(message: OwnerMessage): void {
    switch (message.t) {
      case 'auth':
        this.calls.settle(message.id, 'reply' in message ? { value: message.reply } : { error: new Error(message.error) });
        break;
      case 'scrape':
        this.scrapes.settle(message.id, 'scrape' in message ? { value: message.scrape } : { error: new Error(message.error) });
        break;
      case 'collect': {
        const { id } = message;
        const collect = this.collect ?? (() => Promise.resolve([]));
        // A failed collection still answers, so that the scrape fails rather than waits.
        collect().then(
          (metrics) => this.post({ t: 'collected', id, metrics }),
          (error: unknown) => this.post({ t: 'collected', id, error: messageOf(error) }),
        );
        break;
      }
      case 'reloadTls': {
        const { id, files } = message;
        try {
          if (this.reloadTls === null) throw new InvariantError('this thread serves no TLS');
          this.post({ t: 'reloadedTls', id, descriptor: this.reloadTls(files) });
        } catch (error) {
          this.post({ t: 'reloadedTls', id, error: messageOf(error) });
        }
        break;
      }
      case 'stop': {
        const stop = this.stopped;
        this.stopped = null;
        this.stopAsked = true;
        stop?.();
        break;
      }
    }
  }
}

/** What the owner does with an HTTP thread's requests and reports. */
export interface ThreadHandlers {
  ready(descriptor: number): void;
  log(level: Level, msg: string, fields: Fields | undefined, time: number): void;
  fatal(error: string): void;
  /** /ext/auth. */
  auth(body: Uint8Array, context: CallContext): Promise<Reply>;
  scrape(): Promise<Scrape>;
}

/** The owner's side of one HTTP thread. */
export class ThreadLink {
  private readonly collections = new Pending<MetricsJson>();
  private readonly reloads = new Pending<number>();
  /** The metrics the thread sent as it ended (`final`); undefined while it runs. */
  last: MetricsJson | undefined;

  constructor(
    private readonly worker: Worker,
    private readonly handlers: ThreadHandlers,
  ) {
    worker.on('message', (message: ThreadMessage) => this.receive(message));
  }

  /** This thread's metrics. */
  collect(): Promise<MetricsJson> {
    return this.collections.add((id) => this.worker.postMessage({ t: 'collect', id } satisfies OwnerMessage));
  }

  /** The descriptor of the thread's new app, serving with the TLS pair in `files`. */
  reloadTls(files: TlsFiles): Promise<number> {
    return this.reloads.add((id) => this.worker.postMessage({ t: 'reloadTls', id, files } satisfies OwnerMessage));
  }

  stop(): void {
    this.worker.postMessage({ t: 'stop' } satisfies OwnerMessage);
  }

  /** The thread has ended: what it was asked fails. */
  gone(): void {
    this.collections.abandon(new Error('the HTTP thread has ended'));
    this.reloads.abandon(new Error('the HTTP thread has ended'));
  }

  private receive(message: ThreadMessage): void {
    switch (message.t) {
      case 'ready':
        this.handlers.ready(message.descriptor);
        break;
      case 'log':
        this.handlers.log(message.level, message.msg, message.fields, message.time);
        break;
      case 'fatal':
        this.handlers.fatal(message.error);
        break;
      case 'final':
        this.last = message.metrics;
        break;
      case 'auth': {
        const { id } = message;
        this.handlers
          .auth(
            message.body,
            message.session === undefined ? { address: message.address } : { address: message.address, session: message.session },
          )
          .then(
            (reply) => this.reply({ t: 'auth', id, reply }),
            (error: unknown) => this.reply({ t: 'auth', id, error: messageOf(error) }),
          );
        break;
      }
      case 'scrape': {
        const { id } = message;
        this.handlers.scrape().then(
          (scrape) => this.reply({ t: 'scrape', id, scrape }),
          (error: unknown) => this.reply({ t: 'scrape', id, error: messageOf(error) }),
        );
        break;
      }
      case 'collected':
        this.collections.settle(message.id, 'metrics' in message ? { value: message.metrics } : { error: new Error(message.error) });
        break;
      case 'reloadedTls':
        this.reloads.settle(message.id, 'descriptor' in message ? { value: message.descriptor } : { error: new Error(message.error) });
        break;
    }
  }

  private reply(message: OwnerMessage): void {
    this.worker.postMessage(message);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
