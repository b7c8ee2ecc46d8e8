// The assembly of the standalone service: the core, the state owner (when tokens are
// required) and the HTTP side, wired together and listening.
import { App } from 'uWebSockets.js';
import type { Clock } from './clock.js';
import { newCore } from './core/module.js';
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
import { AUTH_PATH, resolveClock, resolveServerOptions, servedPaths } from './options.js';
import type { ServerOptions } from './options.js';
import { loggedEndpoint } from './rpc/jsonrpc.js';
import { openAuth } from './service/open.js';
import type { OpenedAuth } from './service/open.js';
import { VERSION } from './version.js';

export type { ServerHandle } from './http/listener.js';

/** What startServer runs with beside its options. */
export interface ServerServices {
  /** Where log lines go; default JSON lines on stdout, from the options' logLevel up. */
  readonly log?: Logger;
  readonly metrics?: Metrics;
  /**
   * The time, in ms since the Unix epoch: what tokens expire by, the throttle counts by,
   * and the state forgets expired revocations by. Default the system's clock.
   */
  readonly clock?: Clock;
}

/**
 * Starts the service: validates `options` (options.ts has the defaults and limits),
 * then the core, the state of the data folder (created on the first start), the password
 * (from its file, generated when missing) and the HTTP listener. Throws OptionError for
 * a bad option or password file, StateError for a data folder it cannot use,
 * ListenError when it cannot listen; each names the option at fault.
 */
export async function startServer(options: ServerOptions = {}, services: ServerServices = {}): Promise<ServerHandle> {
  const config = resolveServerOptions(options);
  const clock = resolveClock(services.clock);
  const log = services.log ?? createLogger(undefined, config.logLevel, clock);
  const metrics = services.metrics ?? new Metrics({ processMetrics: true });
  const core = newCore();
  servedPaths(core, 'publicEndpoints', config.publicEndpoints);
  servedPaths(core, 'metricsPath', [config.metricsPath]);
  const routes = new Map<string, Route>([[config.metricsPath, { kind: 'metrics', metrics }]]);
  if (config.upstream === undefined) {
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
    if (config.authRequired && config.passwordFile !== undefined) {
      auth = await openAuth(core, { passwordFile: config.passwordFile, dataDir: config.dataDir, tokenLifetime: config.tokenLifetime }, log, metrics, clock);
      routes.set(AUTH_PATH, { kind: 'auth', service: auth.link });
      gate = new Gate(core, metrics, clock, { publicPaths: config.publicEndpoints, authPath: AUTH_PATH });
    } else {
      if (config.passwordFile !== undefined) {
        log.warn('the password file is not used without --api-auth-required', { path: config.passwordFile });
      }
      if (config.publicEndpoints.length > 0) {
        log.warn('public endpoints mean nothing without --api-auth-required: every endpoint is public', { paths: config.publicEndpoints });
      }
    }
    if (config.upstream !== undefined) {
      proxy = new UpstreamProxy({ url: config.upstream, timeoutMs: config.upstreamTimeoutMs, maxBody: config.upstreamMaxBody },
        config.trustedProxies, inFlight, metrics, log);
    }
    const router = new Router(core, gate, routes, new LocalRoutes(inFlight, config.trustedProxies, log), proxy);
    return await new HttpServer(App(), router, inFlight, release, log).listen(config.host, config.port);
  } catch (error) {
    await release();
    throw error;
  }
}
