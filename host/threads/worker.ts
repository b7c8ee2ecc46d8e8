// An HTTP thread: a reader instance of the shared core, and around it this thread's own
// request handling (http/stack.ts: the gate, the local routes, the proxy and its pool of
// upstream connections). /ext/auth and the metrics route ask the owner (owner-channel.ts);
// a client that must wait is refused here, from the throttle board.
import { systemClock } from '../clock.js';
import { Core } from '../core/core.js';
import { trustedProxies } from '../addresses.js';
import { buildStack } from '../http/stack.js';
import { openTarget } from '../ops/line-target.js';
import { LineWriter } from '../ops/line-writer.js';
import { Metrics } from '../ops/metrics.js';
import type { TokenServiceLink } from '../service/link.js';
import { fenceReader } from './fence.js';
import { runHttpThread } from './http-thread.js';
import { ThrottleBoard } from './throttle-board.js';
import { sharedHealth } from './upstream-health.js';

await runHttpThread(async ({ data, owner, log }) => {
  const { settings } = data;
  const core = new Core(data.module, { memory: data.memory, slot: data.thread });
  // This thread's counters; the process's own metrics (CPU, memory) are the owner's.
  const metrics = new Metrics({ httpThread: data.thread });
  let service: TokenServiceLink | undefined;
  if (settings.authRequired) {
    const board = new ThrottleBoard(data.board);
    service = {
      throttled: (address) => {
        const wait = board.retryAfter(address, systemClock());
        if (wait > 0) metrics.passwordsThrottled++;
        return wait;
      },
      handle: (body, context) => Promise.resolve(owner.auth.handle(body, context)),
    };
  }
  const upstream = settings.upstream;
  const access = settings.accessLog;
  const stack = await buildStack({
    core,
    metrics,
    scrape: owner.metrics,
    service,
    publicEndpoints: settings.publicEndpoints,
    metricsPath: settings.metricsPath,
    upstream: upstream && {
      url: new URL(upstream.origin),
      timeoutMs: upstream.timeoutMs,
      maxBody: upstream.maxBody,
      pipelining: upstream.pipelining,
      queryToken: settings.websocket.queryToken,
      health: sharedHealth(data.upstreamHealth),
      clientScheme: settings.tls === undefined ? 'http' : 'https',
    },
    websocket: { ...settings.websocket, sessions: data.wsSessions, refusedMessages: data.wsRefused },
    trustedProxies: trustedProxies(settings.trustedProxies),
    log,
    clock: systemClock,
    allowedOrigins: settings.allowedOrigins,
    console: settings.console,
    secure: settings.tls !== undefined,
    serving: settings.fence && fenceReader(settings.fence),
    // A descriptor of the thread's own, which it alone writes, reopens and closes.
    accessLog: access && new LineWriter(access, await openTarget(access.path), metrics, log),
  });
  const { router, inFlight, websockets } = stack;
  return {
    handle(res, req) {
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
    // Sessions last as long as their clients like: they are ended (1001), not waited for.
    drain: async (graceMs) => {
      await websockets?.shutdown();
      return inFlight.drain(graceMs);
    },
    collect: () => metrics.registry.getMetricsAsJSON(),
    close: () => stack.close(),
  };
});
