// One thread's request handling, assembled: the routes it answers itself, the gate, the
// proxy with its own pool of upstream connections, and the router over them. The server
// on one thread builds it once (server.ts); with several, each HTTP thread builds its
// own (threads/worker.ts), around a reader of the shared core.
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { LineWriter } from '../ops/line-writer.js';
import type { Logger } from '../ops/log.js';
import type { Metrics, MetricsSource } from '../ops/metrics.js';
import { AUTH_PATH, CHECK_PATH, CONSOLE_PATHS, HEALTH_PATH, LIVE_PATH } from '../own-endpoints.js';
import { ConsoleFiles } from './console-route.js';
import { loggedEndpoint } from '../rpc/jsonrpc.js';
import type { TokenServiceLink } from '../service/link.js';
import { VERSION } from '../version.js';
import { AccessLog } from './access-log.js';
import { Admission } from './admission.js';
import { AuthCheck } from './auth-check.js';
import type { TrustedProxies } from '../addresses.js';
import { Cors } from './cors.js';
import type { AllowedOrigins } from '../origins.js';
import { Gate } from './gate.js';
import type { Serving } from './gate.js';
import { InFlight } from './in-flight.js';
import { HEALTH_BODY, healthMethods, infoMethods } from './node-endpoints.js';
import type { UpstreamOptions, UpstreamProxy } from './proxy.js';
import { Router } from './router.js';
import { ReadinessRoute } from './readiness.js';
import { LocalRoutes } from './routes.js';
import type { Route } from './routes.js';
import type { WebSocketRelay, WebSocketSettings } from './websocket.js';

export interface StackParts {
  readonly core: Core;
  /** This thread's counters. */
  readonly metrics: Metrics;
  /** What the metrics route serves: `metrics`, or every thread's summed. */
  readonly scrape: MetricsSource;
  /** The token service; undefined when tokens are not required (no gate, no /ext/auth). */
  readonly service: TokenServiceLink | undefined;
  /** Checked against the core's path rules already. */
  readonly publicEndpoints: readonly string[];
  readonly metricsPath: string;
  /** The node to protect; undefined serves the built-in node endpoints. */
  readonly upstream: UpstreamOptions | undefined;
  /** How WebSocket sessions to the upstream are relayed and bounded. */
  readonly websocket: WebSocketSettings;
  readonly trustedProxies: TrustedProxies;
  readonly log: Logger;
  readonly clock: Clock;
  /** Origins whose pages may call (CORS); undefined allows none. */
  readonly allowedOrigins?: AllowedOrigins;
  /** A fleet gateway's fence (threads/fence.ts): protected requests get 503 while it is closed. */
  readonly serving?: Serving;
  /** Where --access-log's lines go, this thread's writer; none: no access log. Closed with the stack. */
  readonly accessLog?: LineWriter;
  /** --console: the operator's console is served (with a token service only). */
  readonly console?: boolean;
  /** Served over TLS: the console's session cookie is Secure. */
  readonly secure?: boolean;
}

export interface Stack {
  readonly router: Router;
  /** The WebSocket relay to the upstream; null without one (an upgrade is then a request like any other). */
  readonly websockets: WebSocketRelay | null;
  /** The requests under way, for a stop to wait for. */
  readonly inFlight: InFlight;
  /** Closes the upstream's connections; requests still under way fail. */
  close(): Promise<void>;
}

/** Builds the request handling of one thread. The proxy and the WebSocket relay (ws) are loaded only when there is an upstream. */
export async function buildStack(parts: StackParts): Promise<Stack> {
  const { core, metrics, service, log } = parts;
  const routes = new Map<string, Route>([[parts.metricsPath, { kind: 'metrics', metrics: parts.scrape }]]);
  if (parts.upstream === undefined) {
    routes.set('/ext/info', { kind: 'rpc', endpoint: loggedEndpoint(infoMethods(VERSION), log), probe: null });
    routes.set('/ext/health', {
      kind: 'rpc',
      endpoint: loggedEndpoint(healthMethods(), log),
      probe: new TextEncoder().encode(HEALTH_BODY + '\n'),
    });
  }
  let gate: Gate | null = null;
  if (service !== undefined) {
    routes.set(AUTH_PATH, { kind: 'auth', service });
    gate = new Gate(core, metrics, parts.clock, {
      publicPaths: parts.publicEndpoints,
      authPath: AUTH_PATH,
      ownPaths: [HEALTH_PATH, LIVE_PATH, CHECK_PATH, ...CONSOLE_PATHS],
      serving: parts.serving,
    });
  }
  // Console or not, its paths are api-auth's own: a console session's endpoint never reaches the node.
  const consoleFiles = new ConsoleFiles(service !== undefined && parts.console === true);
  for (const path of CONSOLE_PATHS) routes.set(path, { kind: 'console', files: consoleFiles });
  const inFlight = new InFlight();
  const cors = parts.allowedOrigins && new Cors(parts.allowedOrigins);
  routes.set(LIVE_PATH, { kind: 'liveness' });
  routes.set(HEALTH_PATH, { kind: 'readiness', readiness: new ReadinessRoute(parts.upstream?.url, inFlight, parts.clock, parts.serving) });
  // One admission for the router, the check and the relay: routes is read per request, so the check's own is in it too.
  const admission = new Admission(core, gate, cors ?? null, routes, parts.trustedProxies, metrics, inFlight);
  // Where the calls of tokens with limits or a method scope are judged; only tokens make one.
  const bodies = admission.bodies;
  routes.set(CHECK_PATH, { kind: 'check', check: new AuthCheck(admission, inFlight) });
  let proxy: UpstreamProxy | null = null;
  if (parts.upstream !== undefined) {
    const { UpstreamProxy } = await import('./proxy.js');
    proxy = new UpstreamProxy(parts.upstream, parts.trustedProxies, inFlight, metrics, log, bodies, parts.clock);
  }
  const gated = gate;
  const access =
    parts.accessLog === undefined
      ? null
      : new AccessLog(parts.accessLog, parts.trustedProxies, parts.clock, gated === null ? null : (path) => gated.open(path), metrics);
  const router = new Router(
    metrics,
    admission,
    routes,
    new LocalRoutes(inFlight, parts.trustedProxies, log, bodies, parts.secure === true),
    proxy,
    access,
  );
  let websockets: WebSocketRelay | null = null;
  if (parts.upstream !== undefined) {
    const { WebSocketRelay } = await import('./websocket.js');
    websockets = new WebSocketRelay({
      core,
      admission,
      router,
      routes,
      upstream: parts.upstream,
      trusted: parts.trustedProxies,
      inFlight,
      metrics,
      log,
      clock: parts.clock,
      settings: parts.websocket,
      access,
    });
  }
  return {
    router,
    websockets,
    inFlight,
    close: async () => {
      websockets?.close();
      await proxy?.close();
      // Last: the sessions' lines are written as they close.
      await parts.accessLog?.close();
    },
  };
}
