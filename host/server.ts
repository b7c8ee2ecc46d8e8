// The assembly of the standalone service: the core, the state owner (when tokens are
// required) and the HTTP side, wired together and listening.
import { App } from 'uWebSockets.js';
import { UsageError } from './cli/flags.js';
import type { Options } from './cli/flags.js';
import type { Core } from './core/core.js';
import { newCore } from './core/module.js';
import { AUTH_PATH } from './http/auth-route.js';
import { Gate } from './http/gate.js';
import { InFlight } from './http/in-flight.js';
import { HttpServer } from './http/listener.js';
import type { ServerHandle } from './http/listener.js';
import { HEALTH_BODY, healthMethods, infoMethods } from './http/node-endpoints.js';
import { UpstreamProxy } from './http/proxy.js';
import { Router } from './http/router.js';
import { LocalRoutes } from './http/routes.js';
import type { Route } from './http/routes.js';
import { createLogger } from './ops/log.js';
import type { Logger } from './ops/log.js';
import { Metrics } from './ops/metrics.js';
import { loggedEndpoint } from './rpc/jsonrpc.js';
import { openAuth } from './service/open.js';
import type { OpenedAuth } from './service/open.js';
import { VERSION } from './version.js';

export type { ServerHandle } from './http/listener.js';

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
  const metrics = services.metrics ?? new Metrics({ processMetrics: true });
  const core = newCore();
  checkPaths(core, options.apiAuthPublicEndpoints, '--api-auth-public-endpoints');
  checkPaths(core, [options.metricsPath], '--metrics-path');
  if (options.metricsPath === AUTH_PATH) throw new UsageError(`--metrics-path must not be ${AUTH_PATH}`);
  const routes = new Map<string, Route>([[options.metricsPath, { kind: 'metrics', metrics }]]);
  if (options.upstream === undefined) {
    routes.set('/ext/info', { kind: 'rpc', endpoint: loggedEndpoint(infoMethods(VERSION), log), probe: null });
    routes.set('/ext/health', { kind: 'rpc', endpoint: loggedEndpoint(healthMethods(), log), probe: new TextEncoder().encode(HEALTH_BODY + '\n') });
  }
  const inFlight = new InFlight();
  let auth: OpenedAuth | undefined;
  let proxy: UpstreamProxy | null = null;
  // What stop() releases once the last request is answered.
  const release = async (): Promise<void> => {
    await proxy?.close();
    await auth?.close();
  };
  try {
    let gate: Gate | null = null;
    if (options.apiAuthRequired) {
      const passwordFile = options.apiAuthPasswordFile;
      if (passwordFile === undefined) throw new Error('options.apiAuthRequired needs options.apiAuthPasswordFile');
      auth = await openAuth(core, { passwordFile, dataDir: options.dataDir, tokenLifetime: options.apiAuthTokenLifetime }, log, metrics);
      routes.set(AUTH_PATH, { kind: 'auth', service: auth.link });
      gate = new Gate(core, metrics, { publicPaths: options.apiAuthPublicEndpoints, authPath: AUTH_PATH });
    } else {
      if (options.apiAuthPasswordFile !== undefined) {
        log.warn('the password file is not used without --api-auth-required', { path: options.apiAuthPasswordFile });
      }
      if (options.apiAuthPublicEndpoints.length > 0) {
        log.warn('public endpoints mean nothing without --api-auth-required: every endpoint is public', { paths: options.apiAuthPublicEndpoints });
      }
    }
    if (options.upstream !== undefined) {
      proxy = new UpstreamProxy({ url: options.upstream, timeoutMs: options.upstreamTimeout, maxBody: options.upstreamMaxBody },
        options.trustedProxies, inFlight, metrics, log);
    }
    const router = new Router(core, gate, routes, new LocalRoutes(inFlight, options.trustedProxies, log), proxy);
    return await new HttpServer(App(), router, inFlight, release, log).listen(options.httpHost, options.httpPort);
  } catch (error) {
    await release();
    throw error;
  }
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
