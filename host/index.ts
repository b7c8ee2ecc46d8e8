// The library entry, for nodes that embed the token service instead of running it in
// front of themselves.
//
// A node on uWebSockets.js mounts /ext/auth on its own App and wraps its handlers with
// the gate:
//
//   const auth = await createAuth({ passwordFile: './password.txt', dataDir: './auth-data' });
//   auth.mount(app);
//   app.post('/ext/info', auth.protect((res, req) => { ... }));
//
// A node on another framework asks for a verdict and writes it its own way:
//
//   const verdict = auth.authorize(request.headers.authorization ?? '', path);
//   if (!verdict.ok) return reply.code(verdict.status).headers(verdict.headers).send(verdict.body);
import { resolve } from 'node:path';
import type { Registry } from 'prom-client';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { parseDuration } from './cli/flags.js';
import { Outcome } from './core/core.js';
import { newCore } from './core/module.js';
import { AUTH_PATH } from './http/auth-route.js';
import { NO_TRUSTED_PROXIES, trustedProxies } from './http/client-address.js';
import type { TrustedProxies } from './http/client-address.js';
import { Gate } from './http/gate.js';
import { InFlight } from './http/in-flight.js';
import { VERDICTS, writeRefusal } from './http/refusals.js';
import type { Verdict } from './http/refusals.js';
import { LocalRoutes } from './http/routes.js';
import type { Route } from './http/routes.js';
import { createLogger } from './ops/log.js';
import type { Logger } from './ops/log.js';
import { Metrics } from './ops/metrics.js';
import { openAuth } from './service/open.js';

export { Outcome, OUTCOME_NAMES } from './core/core.js';
export { createLogger, LEVELS } from './ops/log.js';
export type { Fields, Level, Logger } from './ops/log.js';
export { startServer } from './server.js';
export type { ServerHandle, ServerServices } from './server.js';
export { parseArgs } from './cli/flags.js';
export type { Options } from './cli/flags.js';
export { REFUSALS, VERDICTS } from './http/refusals.js';
export type { Verdict } from './http/refusals.js';

export interface AuthOptions {
  /** The service password's file; a strong password is generated into it when it is missing (its folder must exist). */
  readonly passwordFile: string;
  /** Where durable state lives (tokens' key, revocations, password changes); created 0700 when missing, locked while open. */
  readonly dataDir: string;
  /** Lifetime of new tokens: seconds, or a duration such as "90s", "15m", "12h". Default 12h. */
  readonly tokenLifetime?: number | string;
  /** Exact paths that need no token, such as /ext/health. */
  readonly publicEndpoints?: readonly string[];
  /**
   * Addresses and CIDR ranges (such as "10.0.0.0/8") of the proxies in front of the node,
   * whose X-Forwarded-For names the client that /ext/auth throttles and logs. Default
   * none: the client is the connection's far end.
   */
  readonly trustedProxies?: readonly string[];
  /** Where log lines go (audit lines included); default JSON lines on stdout, info and above. */
  readonly log?: Logger;
}

export type Handler = (res: HttpResponse, req: HttpRequest) => void;

export interface Auth {
  /** Mounts POST /ext/auth (auth.newToken, auth.revokeToken, auth.changePassword) on `app`. */
  mount(app: TemplatedApp): void;
  /** `handler`, behind the gate: a request without a token that grants its path gets the refusal, and `handler` never runs. */
  protect(handler: Handler): Handler;
  /** The verdict for a bare token (no "Bearer ") on a request path. */
  verify(token: string, path: string): Verdict;
  /** The verdict for an Authorization header value ("" when absent) on a request path. */
  authorize(authorization: string, path: string): Verdict;
  /** The service's Prometheus metrics (verifications, tokens, password checks), to merge into the host's own. */
  readonly metrics: Registry;
  /** Waits for /ext/auth calls under way (5 s at most), stops the hashing thread, releases the data folder. */
  close(): Promise<void>;
}

const DEFAULT_LIFETIME = 12 * 3600;
const MAX_LIFETIME = 8760 * 3600;
const CLOSE_GRACE_MS = 5000;

/**
 * Opens the token service: reads (or generates) the password file, restores the data
 * folder, starts the hashing thread. Rejects with an Error naming the bad option.
 */
export async function createAuth(options: AuthOptions): Promise<Auth> {
  const tokenLifetime = lifetime(options.tokenLifetime);
  const log = options.log ?? createLogger();
  const core = newCore();
  const publicEndpoints = [...(options.publicEndpoints ?? [])];
  for (const path of publicEndpoints) {
    if (typeof path !== 'string' || !path.startsWith('/') || path.includes('*') || path.includes('?') || !core.pathAllowed(path)) {
      throw new TypeError(`publicEndpoints: ${JSON.stringify(path)} is not an exact request path the gate serves, such as /ext/health`);
    }
  }
  const trusted = trustedProxyOption(options.trustedProxies);
  const metrics = new Metrics();
  const opened = await openAuth(core, { passwordFile: resolve(options.passwordFile), dataDir: resolve(options.dataDir), tokenLifetime }, log, metrics);
  const gate = new Gate(core, metrics, { publicPaths: publicEndpoints });
  const route: Route = { kind: 'auth', service: opened.link };
  const inFlight = new InFlight();
  const local = new LocalRoutes(inFlight, trusted, log);
  let closing: Promise<void> | undefined;
  return {
    mount(app) {
      app.any(AUTH_PATH, (res, req) => local.serve(res, req, AUTH_PATH, route));
    },
    protect(handler) {
      return (res, req) => {
        const outcome = gate.check(req.getHeader('authorization'), req.getUrl());
        if (outcome !== Outcome.Valid) return writeRefusal(res, outcome);
        handler(res, req);
      };
    },
    verify: (token, path) => VERDICTS[gate.checkToken(token, path)],
    authorize: (authorization, path) => VERDICTS[gate.check(authorization, path)],
    metrics: metrics.registry,
    close() {
      closing ??= inFlight.drain(CLOSE_GRACE_MS).then(() => opened.close());
      return closing;
    },
  };
}

function trustedProxyOption(list: readonly string[] | undefined): TrustedProxies {
  if (list === undefined) return NO_TRUSTED_PROXIES;
  if (!Array.isArray(list)) throw new TypeError('trustedProxies must be an array of addresses and CIDR ranges, such as ["10.0.0.0/8"]');
  try {
    return trustedProxies(list);
  } catch (error) {
    throw new RangeError(`trustedProxies: ${(error as Error).message}`);
  }
}

function lifetime(value: number | string | undefined): number {
  if (value === undefined) return DEFAULT_LIFETIME;
  const seconds = typeof value === 'string' ? parseDuration(value) : value;
  if (seconds === null || !Number.isInteger(seconds) || seconds < 1 || seconds > MAX_LIFETIME) {
    throw new RangeError(`tokenLifetime must be whole seconds from 1 to ${MAX_LIFETIME} (or a duration such as "12h"), not ${JSON.stringify(value)}`);
  }
  return seconds;
}
