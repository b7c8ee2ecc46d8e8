// The HTTP side: one uWebSockets.js catch-all handler. Path rules and the token check
// come first, before routing, so a caller without a token learns nothing about which
// paths exist; then the few local routes (JSON-RPC endpoints, metrics), and everything
// else goes to the upstream node when there is one.
//
// The protected path is kept to: read the header and the URL, one core call, write.
import { createServer } from 'node:net';
import * as uws from 'uWebSockets.js';
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { AuthService, ServiceErrorCode, throttled } from './auth-service.js';
import { UsageError } from './cli.js';
import type { Options } from './cli.js';
import { clientAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import { Outcome } from './core.js';
import type { Core } from './core.js';
import { coreThreadsModule, newCore, newThreadsCore } from './core-module.js';
import { ErrorCode, errorResponse, JsonRpcEndpoint } from './jsonrpc.js';
import type { MethodTable, Reply, RpcHandler } from './jsonrpc.js';
import { createLogger, errorFields } from './log.js';
import type { Logger } from './log.js';
import { Metrics } from './metrics.js';
import type { MetricsSource } from './metrics.js';
import { HEALTH_BODY, healthMethods, infoMethods } from './node-endpoints.js';
import { loadPasswordFile } from './password-file.js';
import { Argon2idVerifier } from './password-hash.js';
import { UpstreamProxy } from './proxy.js';
import type { InFlight, UpstreamOptions } from './proxy.js';
import { restoreService, StateStore } from './state-store.js';
import { MAX_CLIENTS, OVERALL, PasswordThrottle, PER_CLIENT, Tarpit } from './throttle.js';
import { boardMemory, ThrottleBoard } from './threads/throttle-board.js';
import { serveOnThreads } from './threads/acceptor.js';
import { throttledAuth } from './threads/owner-auth.js';
import { endWith, Gate, writeRefusal } from './token-gate.js';
import { VERSION } from './version.js';

export const MAX_BODY_BYTES = 65536;
export const AUTH_PATH = '/ext/auth';
const STOP_GRACE_MS = 5000;

export interface ServerHandle {
  readonly host: string;
  /** The port listened on (the chosen one when the options said 0). */
  readonly port: number;
  /** Stops accepting, lets in-flight requests finish (at most 5 s), closes the state store and the hashing thread. */
  stop(): Promise<void>;
  /**
   * Settles once the server has stopped. Rejects when it stopped by itself because an
   * HTTP thread failed (the log says which and why): the process should then exit 1.
   */
  readonly closed: Promise<void>;
}

export interface ServerServices {
  readonly log?: Logger;
  readonly metrics?: Metrics;
}

/**
 * Starts the service from validated options: the core, the state of the data folder
 * (created on the first start), the password (from its file, generated when missing)
 * and the HTTP listener. Throws UsageError for a bad password file, StateError for a
 * data folder it cannot use, ListenError when it cannot listen.
 */
export async function startServer(options: Options, services: ServerServices = {}): Promise<ServerHandle> {
  const log = services.log ?? createLogger(undefined, options.logLevel);
  const threads = options.httpThreads;
  // With several threads, each counts its own requests and these are the owner's.
  const metrics = services.metrics ?? new Metrics({ processMetrics: true, httpThread: threads > 1 ? undefined : 1 });
  // One thread keeps the plain core: no shared memory to size, and checks as fast (see README, Threads).
  const core = threads > 1 ? newThreadsCore({ threads: threads + 1 }) : newCore();
  const board = threads > 1 ? boardMemory() : undefined;
  checkPaths(core, options.apiAuthPublicEndpoints, '--api-auth-public-endpoints');
  checkPaths(core, [options.metricsPath], '--metrics-path');
  if (options.metricsPath === AUTH_PATH) throw new UsageError(`--metrics-path must not be ${AUTH_PATH}`);
  const routes = localRoutes(options.metricsPath, metrics, options.upstream === undefined, log);
  let auth: OpenedAuth | undefined;
  let gateway: Gateway | undefined;
  let gate: Gate | null = null;
  // What stop() releases once the last request is answered.
  const release = async (): Promise<void> => {
    await gateway?.proxy?.close();
    await auth?.close();
  };
  try {
    if (options.apiAuthRequired) {
      const passwordFile = options.apiAuthPasswordFile;
      if (passwordFile === undefined) throw new Error('options.apiAuthRequired needs options.apiAuthPasswordFile');
      // With several threads, the throttle publishes who must wait for them to see.
      const throttle = board === undefined ? undefined : new PasswordThrottle(PER_CLIENT, OVERALL, MAX_CLIENTS, new ThrottleBoard(board).writer());
      auth = await openAuth(core, { passwordFile, dataDir: options.dataDir, tokenLifetime: options.apiAuthTokenLifetime, throttle }, log, metrics);
      routes.set(AUTH_PATH, auth.route);
      gate = new Gate(core, metrics, options.apiAuthPublicEndpoints);
    } else {
      if (options.apiAuthPasswordFile !== undefined) {
        log.warn('the password file is not used without --api-auth-required', { path: options.apiAuthPasswordFile });
      }
      if (options.apiAuthPublicEndpoints.length > 0) {
        log.warn('public endpoints mean nothing without --api-auth-required: every endpoint is public', { paths: options.apiAuthPublicEndpoints });
      }
    }
    const upstream = options.upstream === undefined
      ? undefined
      : { url: options.upstream, timeoutMs: options.upstreamTimeout, maxBody: options.upstreamMaxBody };
    if (threads > 1) {
      const opened = auth;
      return await serveOnThreads({
        threads,
        host: options.httpHost,
        port: options.httpPort,
        module: coreThreadsModule(),
        memory: core.memory,
        settings: {
          authRequired: options.apiAuthRequired,
          publicEndpoints: options.apiAuthPublicEndpoints,
          metricsPath: options.metricsPath,
          upstream: upstream && { origin: upstream.url.origin, timeoutMs: upstream.timeoutMs, maxBody: upstream.maxBody },
          trustedProxies: options.trustedProxies.entries,
          logLevel: options.logLevel,
          graceMs: STOP_GRACE_MS,
        },
        board: board!,
        auth: opened && throttledAuth(opened.route.rpc!, opened.service.throttle, metrics, Date.now),
        metrics,
        log,
        whyNotListening,
        release,
      });
    }
    gateway = new Gateway(core, gate, routes, log, metrics, options.trustedProxies, upstream);
    return await new HttpServer(App(), gateway, metrics, release, log).listen(options.httpHost, options.httpPort);
  } catch (error) {
    await release();
    throw error;
  }
}

/** The routes every HTTP thread serves itself: metrics, and without an upstream the built-in node endpoints. */
export function localRoutes(metricsPath: string, scrape: MetricsSource, builtIn: boolean, log: Logger): Map<string, Route> {
  const routes = new Map<string, Route>([[metricsPath, { rpc: null, allow: 'GET', body: null, scrape }]]);
  if (builtIn) {
    routes.set('/ext/info', { rpc: rpcEndpoint(infoMethods(VERSION), log), allow: 'POST', body: null });
    routes.set('/ext/health', { rpc: rpcEndpoint(healthMethods(), log), allow: 'GET, HEAD, POST', body: new TextEncoder().encode(HEALTH_BODY + '\n') });
  }
  return routes;
}

/** Paths given on the command line must be ones the gate would serve at all. */
function checkPaths(core: Core, paths: readonly string[], flag: string): void {
  for (const path of paths) {
    if (!core.pathAllowed(path)) {
      throw new UsageError(`${flag}: ${JSON.stringify(path)} is not a path the gate serves (no empty, "." or ".." segments, ` +
        'no encoded "/", "." or "%", visible ASCII only)');
    }
  }
}

function rpcEndpoint(methods: MethodTable, log: Logger): JsonRpcEndpoint {
  return new JsonRpcEndpoint(methods, (error, method) => log.error('internal error', { method, ...errorFields(error) }));
}

export interface AuthSettings {
  /** Absolute path of the password file; generated when missing. */
  readonly passwordFile: string;
  /** The password throttle; by default a fresh one. */
  readonly throttle?: PasswordThrottle;
  /** Absolute path of the data folder. */
  readonly dataDir: string;
  /** Seconds. */
  readonly tokenLifetime: number;
}

/** The token service, restored from its data folder, as the /ext/auth route. */
export interface OpenedAuth {
  readonly service: AuthService;
  readonly route: Route;
  /** Stops the hashing thread and releases the data folder. */
  close(): Promise<void>;
}

/**
 * Opens the token service: the password (from its file, generated when missing), the
 * data folder (created on the first start, locked), the hashing thread. Throws
 * UsageError for a bad password file, StateError for a data folder it cannot use.
 */
export async function openAuth(core: Core, settings: AuthSettings, log: Logger, metrics: Metrics): Promise<OpenedAuth> {
  const password = await loadPasswordFile(settings.passwordFile, () => core.generatePassword(), log);
  const store = await StateStore.open(settings.dataDir, log);
  const verifier = new Argon2idVerifier();
  const close = async (): Promise<void> => {
    await verifier.close();
    await store.close();
  };
  try {
    await restoreService(core, store, verifier, password, settings.tokenLifetime, log);
  } catch (error) {
    await close();
    throw error;
  }
  const service = new AuthService({ core, store, verifier, tokenLifetime: settings.tokenLifetime, log, metrics, throttle: settings.throttle });
  const route: Route = { rpc: rpcEndpoint(service.methods(), log), allow: 'POST', body: null, throttle: service.throttle, metrics };
  return { service, route, close };
}

export interface Route {
  /** The JSON-RPC endpoint that answers POST; null for routes that take no POST. */
  readonly rpc: RpcHandler | null;
  /** For routes that check passwords: clients that must wait are refused before their body is read. */
  readonly throttle?: { retryAfter(address: string, now: number): number };
  /** The Allow header of a 405. */
  readonly allow: string;
  /** The GET response body, for routes that answer GET with a fixed body. */
  readonly body: Uint8Array | null;
  /** For the metrics route: GET answers with these metrics. */
  readonly scrape?: MetricsSource;
  /** Where refusals by the throttle are counted. */
  readonly metrics?: Metrics;
}

const JSON_CONTENT_TYPE = /^[ \t]*application\/json[ \t]*(?:;|$)/i;
const NOT_FOUND = new TextEncoder().encode('404 page not found\n');
const BODY_TOO_LARGE = jsonLine(ErrorCode.InvalidRequest, `request body exceeds ${MAX_BODY_BYTES} bytes`);
const NOT_JSON = jsonLine(ErrorCode.InvalidRequest, 'content-type must be application/json');
const INTERNAL_ERROR = jsonLine(ErrorCode.InternalError, 'internal error');
// The same answer on every path, before the gate: it reveals nothing about a path, and
// nothing of a CONNECT reaches a handler that might forward it.
const CONNECT_ALLOW = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';
const CONNECT_REFUSED = jsonLine(ErrorCode.InvalidRequest, 'HTTP method CONNECT is not allowed: api-auth forwards requests, it opens no tunnels');

// The 429 bodies by wait, made once each: refusing a guess allocates nothing.
const THROTTLED_BODIES = new Map<number, Uint8Array>();

function throttledBody(wait: number): Uint8Array {
  let body = THROTTLED_BODIES.get(wait);
  if (body === undefined) {
    body = jsonLine(ServiceErrorCode.Throttled, throttled(wait).message);
    THROTTLED_BODIES.set(wait, body);
  }
  return body;
}

/** A JSON-RPC error body for a request that was not read (so its id is unknown). */
function jsonLine(code: number, message: string): Uint8Array {
  return new TextEncoder().encode(errorResponse(code, message) + '\n');
}

// uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT, and the listen that takes it with a host: the
// package has both, its typings neither.
const EXCLUSIVE_PORT = (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;

interface ExclusiveListen {
  listen(host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void): void;
}

/** The port or address cannot be listened on; the message is the one line to show. */
export class ListenError extends Error {
  readonly exitCode = 2;

  constructor(problem: string) {
    super(`api-auth: ${problem}`);
    this.name = 'ListenError';
  }
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
    probe.once('error', (e: NodeJS.ErrnoException) => resolve(new ListenError(`cannot listen on ${where}: ${LISTEN_PROBLEMS[e.code ?? ''] ??
      `${e.code ?? e.message}; choose another --http-host or --http-port`}`)));
    probe.listen({ host, port, exclusive: true }, () => {
      probe.close();
      resolve(new ListenError(`cannot listen on ${where}; choose another --http-host or --http-port`));
    });
  });
}

const LISTEN_PROBLEMS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the port is in use by another program (another api-auth?); stop it or choose another --http-port',
  EADDRNOTAVAIL: 'the address is not one of this machine\'s; choose another --http-host (0.0.0.0 for every address)',
  EACCES: 'ports below 1024 need privileges; choose another --http-port, or grant CAP_NET_BIND_SERVICE',
  ENOTFOUND: 'the host name does not resolve; give --http-host an address, such as 127.0.0.1',
  EAI_AGAIN: 'the host name does not resolve; give --http-host an address, such as 127.0.0.1',
};

class HttpServer {
  private listenSocket: us_listen_socket | null = null;
  private stopping: Promise<void> | null = null;
  private stopped!: () => void;
  private readonly closed = new Promise<void>((resolve) => {
    this.stopped = resolve;
  });

  constructor(
    private readonly app: TemplatedApp,
    private readonly gateway: Gateway,
    metrics: Metrics,
    private readonly release: () => Promise<void>,
    private readonly log: Logger,
  ) {
    this.app.any('/*', (res, req) => {
      metrics.requests++;
      this.gateway.handle(res, req);
    });
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
    const left = await this.gateway.drain(STOP_GRACE_MS);
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

/**
 * The request handling, apart from listening: the gate, the local routes and the proxy.
 * The standalone server routes every request through `handle`; an embedding host mounts
 * single routes with `serve`.
 */
/** A response that goes out later; `open` until it is written or its client is gone. */
interface Exchange {
  open: boolean;
  finish(): void;
}

export class Gateway implements InFlight {
  private inFlight = 0;
  private readonly tarpit = new Tarpit();
  private idle: (() => void) | null = null;
  readonly proxy: UpstreamProxy | null;

  /** `gate` null: no tokens needed, only the path rules apply. */
  constructor(
    private readonly core: Core,
    private readonly gate: Gate | null,
    private readonly routes: ReadonlyMap<string, Route>,
    private readonly log: Logger,
    metrics: Metrics,
    private readonly trusted: TrustedProxies,
    upstream?: UpstreamOptions,
  ) {
    this.proxy = upstream === undefined ? null : new UpstreamProxy(upstream, trusted, this, metrics, log);
  }

  handle(res: HttpResponse, req: HttpRequest): void {
    const method = req.getCaseSensitiveMethod();
    // Any spelling: some servers take methods without regard to case.
    if (method.length === 7 && method.toUpperCase() === 'CONNECT') {
      res.writeStatus('405 Method Not Allowed').writeHeader('Allow', CONNECT_ALLOW).writeHeader('Content-Type', 'application/json')
        .end(CONNECT_REFUSED, true);
      return;
    }
    const path = req.getUrl();
    const gate = this.gate;
    if (gate !== null) {
      if (path !== AUTH_PATH) {
        const outcome = gate.check(req.getHeader('authorization'), path);
        if (outcome !== Outcome.Valid) return writeRefusal(res, outcome, req.getMethod() === 'head');
      }
    } else if (!this.core.pathAllowed(path)) {
      return writeRefusal(res, Outcome.BadPath, req.getMethod() === 'head');
    }
    const route = this.routes.get(path);
    if (route !== undefined) return this.serve(res, req, path, route);
    if (this.proxy !== null) return this.proxy.forward(res, req, path, method);
    res.writeStatus('404 Not Found').writeHeader('Content-Type', 'text/plain; charset=utf-8');
    endWith(res, NOT_FOUND, req.getMethod() === 'head');
  }

  /** Answers a request for a local route (the gate, if any, has let it through). */
  serve(res: HttpResponse, req: HttpRequest, path: string, route: Route): void {
    const method = req.getMethod();
    if (method === 'post' && route.rpc !== null) return this.post(res, req, route, route.rpc);
    if (route.scrape !== undefined && method === 'get') return this.scrape(res, route.scrape);
    if (route.body !== null && method === 'get') {
      res.writeHeader('Content-Type', 'application/json').end(route.body);
      return;
    }
    if (route.body !== null && method === 'head') {
      res.writeHeader('Content-Type', 'application/json');
      endWith(res, route.body, true);
      return;
    }
    res.writeStatus('405 Method Not Allowed').writeHeader('Allow', route.allow).writeHeader('Content-Type', 'application/json');
    endWith(res, jsonLine(ErrorCode.InvalidRequest, `HTTP method ${method.toUpperCase()} is not allowed on ${path} (allowed: ${route.allow})`),
      method === 'head');
  }

  enter(): void {
    this.inFlight++;
  }

  leave(): void {
    if (--this.inFlight === 0 && this.idle !== null) this.idle();
  }

  /** Waits until no request is in flight, or `graceMs` at most; resolves with how many are left. */
  async drain(graceMs: number): Promise<number> {
    if (this.inFlight > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.idle = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      clearTimeout(timer);
    }
    return this.inFlight;
  }

  /**
   * An exchange answered later: in flight until it is answered or its client goes, and
   * `finish` runs once either way.
   */
  private begin(res: HttpResponse): Exchange {
    this.enter();
    const exchange: Exchange = {
      open: true,
      finish: () => {
        if (!exchange.open) return;
        exchange.open = false;
        this.leave();
      },
    };
    res.onAborted(exchange.finish);
    return exchange;
  }

  private scrape(res: HttpResponse, metrics: MetricsSource): void {
    const exchange = this.begin(res);
    metrics.scrape().then(({ contentType, text }) => {
      if (exchange.open) res.cork(() => res.writeHeader('Content-Type', contentType).end(text));
      exchange.finish();
    }, (error: unknown) => {
      this.log.error('internal error', { method: 'metrics', ...errorFields(error) });
      if (exchange.open) res.cork(() => res.writeStatus('500 Internal Server Error').writeHeader('Content-Type', 'application/json').end(INTERNAL_ERROR));
      exchange.finish();
    });
  }

  private post(res: HttpResponse, req: HttpRequest, route: Route, rpc: RpcHandler): void {
    const address = clientAddress(res, req, this.trusted);
    const wait = route.throttle?.retryAfter(address, Date.now()) ?? 0;
    if (wait > 0) {
      if (route.metrics !== undefined) route.metrics.passwordsThrottled++;
      // Not even the body is read (uWS skips it), the connection stays open, and the
      // refusal is held back a moment: a flood of guesses costs one header parse each,
      // and its connections idle rather than spin.
      const exchange = this.begin(res);
      this.tarpit.hold(() => {
        if (exchange.open) {
          res.cork(() => res.writeStatus('429 Too Many Requests').writeHeader('Content-Type', 'application/json')
            .writeHeader('Retry-After', String(wait)).end(throttledBody(wait)));
        }
        exchange.finish();
      });
      return;
    }
    if (!JSON_CONTENT_TYPE.test(req.getHeader('content-type'))) {
      res.writeStatus('415 Unsupported Media Type').writeHeader('Content-Type', 'application/json').end(NOT_JSON);
      return;
    }
    const declared = req.getHeader('content-length');
    if (declared !== '' && !(Number(declared) <= MAX_BODY_BYTES)) {
      // The body is not read, so the connection cannot carry another request.
      res.writeStatus('413 Content Too Large').writeHeader('Content-Type', 'application/json').end(BODY_TOO_LARGE, true);
      return;
    }
    const exchange = this.begin(res);
    const chunks: Buffer[] = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      if (!exchange.open) return;
      size += chunk.byteLength;
      if (size > MAX_BODY_BYTES) {
        // A chunked body that outgrew the limit: answer now and drop the rest with the connection.
        res.cork(() => res.writeStatus('413 Content Too Large').writeHeader('Content-Type', 'application/json').end(BODY_TOO_LARGE, true));
        exchange.finish();
        return;
      }
      // uWS reuses the chunk's memory once this callback returns.
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) void this.dispatch(res, rpc, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size), address, exchange);
    });
  }

  private async dispatch(res: HttpResponse, rpc: RpcHandler, body: Buffer, address: string, exchange: Exchange): Promise<void> {
    let reply: Reply;
    try {
      reply = await rpc.handle(body, { address });
    } catch (error) {
      this.log.error('internal error', errorFields(error));
      if (exchange.open) res.cork(() => res.writeStatus('500 Internal Server Error').writeHeader('Content-Type', 'application/json').end(INTERNAL_ERROR));
      exchange.finish();
      return;
    }
    if (exchange.open) {
      const { text, refusal } = reply;
      res.cork(() => {
        if (text === null) {
          res.writeStatus('204 No Content').endWithoutBody();
          return;
        }
        // A lone call refused for now says so in HTTP too, so that proxies and clients back off.
        if (refusal !== undefined) {
          res.writeStatus(refusal.code === ServiceErrorCode.Throttled ? '429 Too Many Requests' : '503 Service Unavailable')
            .writeHeader('Retry-After', String(refusal.retryAfter));
        }
        res.writeHeader('Content-Type', 'application/json').end(text + '\n');
      });
    }
    exchange.finish();
  }
}
