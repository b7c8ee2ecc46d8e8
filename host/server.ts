// The HTTP side: one uWebSockets.js catch-all handler. Path rules and the token check
// come first, before routing, so a caller without a token learns nothing about which
// paths exist; then the few routes, each a JSON-RPC endpoint.
//
// The protected path is kept to: read the header and the URL, one core call, write.
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, us_listen_socket } from 'uWebSockets.js';
import { AuthService, ServiceErrorCode, throttled } from './auth-service.js';
import type { Options } from './cli.js';
import { Outcome } from './core.js';
import type { Core } from './core.js';
import { newCore } from './core-module.js';
import { ErrorCode, errorResponse, JsonRpcEndpoint } from './jsonrpc.js';
import type { MethodTable, Reply } from './jsonrpc.js';
import { createLogger, errorFields } from './log.js';
import type { Logger } from './log.js';
import { HEALTH_BODY, healthMethods, infoMethods } from './node-endpoints.js';
import { loadPasswordFile } from './password-file.js';
import { Argon2idVerifier } from './password-hash.js';
import { restoreService, StateStore } from './state-store.js';
import type { PasswordThrottle } from './throttle.js';
import { writeRefusal } from './token-gate.js';
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
}

export interface ServerServices {
  readonly log?: Logger;
}

/**
 * Starts the service from validated options: the core, the state of the data folder
 * (created on the first start), the password (from its file, generated when missing)
 * and the HTTP listener. Throws UsageError for a bad password file, StateError for a
 * data folder it cannot use, Error when it cannot listen.
 */
export async function startServer(options: Options, services: ServerServices = {}): Promise<ServerHandle> {
  const log = services.log ?? createLogger();
  const core = newCore();
  const onInternalError = (error: unknown, method: string): void => log.error('internal error', { method, ...errorFields(error) });
  const rpc = (methods: MethodTable): JsonRpcEndpoint => new JsonRpcEndpoint(methods, onInternalError);
  const routes = new Map<string, Route>([
    ['/ext/info', { rpc: rpc(infoMethods(VERSION)), allow: 'POST', body: null }],
    ['/ext/health', { rpc: rpc(healthMethods()), allow: 'GET, HEAD, POST', body: new TextEncoder().encode(HEALTH_BODY + '\n') }],
  ]);
  let store: StateStore | undefined;
  let verifier: Argon2idVerifier | undefined;
  // What stop() releases once the last request is answered.
  const release = async (): Promise<void> => {
    await verifier?.close();
    await store?.close();
  };
  try {
    if (options.apiAuthRequired) {
      const passwordFile = options.apiAuthPasswordFile;
      if (passwordFile === undefined) throw new Error('options.apiAuthRequired needs options.apiAuthPasswordFile');
      const password = await loadPasswordFile(passwordFile, () => core.generatePassword(), log);
      store = await StateStore.open(options.dataDir, log);
      verifier = new Argon2idVerifier();
      await restoreService(core, store, verifier, password, options.apiAuthTokenLifetime, log);
      const auth = new AuthService({ core, store, verifier, tokenLifetime: options.apiAuthTokenLifetime, log });
      routes.set(AUTH_PATH, { rpc: rpc(auth.methods()), allow: 'POST', body: null, throttle: auth.throttle });
    } else if (options.apiAuthPasswordFile !== undefined) {
      log.warn('the password file is not used without --api-auth-required', { path: options.apiAuthPasswordFile });
    }
    return await new HttpServer(core, routes, options.apiAuthRequired, release, log).listen(options.httpHost, options.httpPort);
  } catch (error) {
    await release();
    throw error;
  }
}

interface Route {
  readonly rpc: JsonRpcEndpoint;
  /** For routes that check passwords: clients that must wait are refused before their body is read. */
  readonly throttle?: PasswordThrottle;
  /** The Allow header of a 405. */
  readonly allow: string;
  /** The GET response body, for routes that answer GET. */
  readonly body: Uint8Array | null;
}

const JSON_CONTENT_TYPE = /^[ \t]*application\/json[ \t]*(?:;|$)/i;
const NOT_FOUND = new TextEncoder().encode('404 page not found\n');
const BODY_TOO_LARGE = jsonLine(ErrorCode.InvalidRequest, `request body exceeds ${MAX_BODY_BYTES} bytes`);
const NOT_JSON = jsonLine(ErrorCode.InvalidRequest, 'content-type must be application/json');
const INTERNAL_ERROR = jsonLine(ErrorCode.InternalError, 'internal error');

/** A JSON-RPC error body for a request that was not read (so its id is unknown). */
function jsonLine(code: number, message: string): Uint8Array {
  return new TextEncoder().encode(errorResponse(code, message) + '\n');
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

class HttpServer {
  private inFlight = 0;
  private idle: (() => void) | null = null;
  private listenSocket: us_listen_socket | null = null;
  private stopping: Promise<void> | null = null;
  private readonly app = App();

  constructor(
    private readonly core: Core,
    private readonly routes: ReadonlyMap<string, Route>,
    private readonly authRequired: boolean,
    private readonly release: () => Promise<void>,
    private readonly log: Logger,
  ) {
    this.app.any('/*', (res, req) => this.handle(res, req));
  }

  listen(host: string, port: number): Promise<ServerHandle> {
    return new Promise((resolve, reject) => {
      this.app.listen(host, port, (socket) => {
        if (!socket) {
          this.app.close();
          reject(new Error(`cannot listen on ${host} port ${port}: the port is taken, or the address is not one of this machine's`));
          return;
        }
        this.listenSocket = socket;
        const actual = us_socket_local_port(socket as never);
        this.log.info('listening', { host, port: actual });
        resolve({ host, port: actual, stop: () => this.stop() });
      });
    });
  }

  private handle(res: HttpResponse, req: HttpRequest): void {
    const path = req.getUrl();
    if (this.authRequired) {
      if (path !== AUTH_PATH) {
        const outcome = this.core.authorize(req.getHeader('authorization'), path, nowSeconds());
        if (outcome !== Outcome.Valid) return writeRefusal(res, outcome);
      }
    } else if (!this.core.pathAllowed(path)) {
      return writeRefusal(res, Outcome.BadPath);
    }
    const route = this.routes.get(path);
    if (route === undefined) {
      res.writeStatus('404 Not Found').writeHeader('Content-Type', 'text/plain; charset=utf-8').end(NOT_FOUND);
      return;
    }
    const method = req.getMethod();
    if (method === 'post') return this.post(res, req, route);
    if (route.body !== null && method === 'get') {
      res.writeHeader('Content-Type', 'application/json').end(route.body);
      return;
    }
    if (route.body !== null && method === 'head') {
      // uWS would send a body given to end(), even for HEAD.
      res.writeHeader('Content-Type', 'application/json').writeHeader('Content-Length', String(route.body.length)).endWithoutBody();
      return;
    }
    res.writeStatus('405 Method Not Allowed').writeHeader('Allow', route.allow).writeHeader('Content-Type', 'application/json')
      .end(jsonLine(ErrorCode.InvalidRequest, `HTTP method ${method.toUpperCase()} is not allowed on ${path} (allowed: ${route.allow})`));
  }

  private post(res: HttpResponse, req: HttpRequest, route: Route): void {
    const address = Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
    const wait = route.throttle?.retryAfter(address, Date.now()) ?? 0;
    if (wait > 0) {
      // Not even the body is read: a flood of guesses costs one header parse each.
      res.writeStatus('429 Too Many Requests').writeHeader('Content-Type', 'application/json').writeHeader('Retry-After', String(wait))
        .end(jsonLine(ServiceErrorCode.Throttled, throttled(wait).message), true);
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
    this.inFlight++;
    const exchange = { open: true };
    // Runs once: on the response written, or on the client gone first.
    const finish = (): void => {
      if (!exchange.open) return;
      exchange.open = false;
      if (--this.inFlight === 0 && this.idle !== null) this.idle();
    };
    res.onAborted(finish);
    const chunks: Buffer[] = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      if (!exchange.open) return;
      size += chunk.byteLength;
      if (size > MAX_BODY_BYTES) {
        // A chunked body that outgrew the limit: answer now and drop the rest with the connection.
        res.cork(() => res.writeStatus('413 Content Too Large').writeHeader('Content-Type', 'application/json').end(BODY_TOO_LARGE, true));
        finish();
        return;
      }
      // uWS reuses the chunk's memory once this callback returns.
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) void this.dispatch(res, route.rpc, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size), address, exchange, finish);
    });
  }

  private async dispatch(res: HttpResponse, rpc: JsonRpcEndpoint, body: Buffer, address: string, exchange: { open: boolean },
    finish: () => void): Promise<void> {
    let reply: Reply;
    try {
      reply = await rpc.handle(body, { address });
    } catch (error) {
      this.log.error('internal error', errorFields(error));
      if (exchange.open) res.cork(() => res.writeStatus('500 Internal Server Error').writeHeader('Content-Type', 'application/json').end(INTERNAL_ERROR));
      finish();
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
    finish();
  }

  private stop(): Promise<void> {
    this.stopping ??= this.drainAndClose();
    return this.stopping;
  }

  private async drainAndClose(): Promise<void> {
    if (this.listenSocket !== null) us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    if (this.inFlight > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.idle = resolve;
        timer = setTimeout(resolve, STOP_GRACE_MS);
      });
      clearTimeout(timer);
      if (this.inFlight > 0) this.log.warn('stopping with requests still in flight', { requests: this.inFlight });
    }
    // The last response may have been written inside a uWS callback that is still on the
    // stack; uWS sends it when that callback returns, and closing first would drop it.
    await new Promise((resolve) => setImmediate(resolve));
    // Closes the kept-alive connections too, which would otherwise hold the process.
    this.app.close();
    await this.release();
    this.log.info('stopped');
  }
}
