// An HTTP thread: a reader instance of the shared core, and around it the per-request
// stack of one thread (gate, local routes, its own upstream pool). /ext/auth and the
// metrics route ask the owner (owner-channel.ts); everything else is answered here.
import { trustedProxies } from '../client-address.js';
import { Core } from '../core.js';
import { Metrics } from '../metrics.js';
import { AUTH_PATH, Gateway, localRoutes } from '../server.js';
import { Gate } from '../token-gate.js';
import { runHttpThread } from './http-thread.js';
import { ThrottleBoard } from './throttle-board.js';
import { sharedHealth } from './upstream-health.js';

runHttpThread(({ data, owner, log }) => {
  const { settings } = data;
  const core = new Core(data.module, { memory: data.memory, slot: data.thread });
  // This thread's counters; the process's own metrics (CPU, memory) are the owner's.
  const metrics = new Metrics({ httpThread: data.thread });
  const routes = localRoutes(settings.metricsPath, owner.metrics, settings.upstream === undefined, log);
  let gate: Gate | null = null;
  if (settings.authRequired) {
    // Who must wait is refused here, from the request's head; the owner refuses the rest of them.
    routes.set(AUTH_PATH, { rpc: owner.auth, allow: 'POST', body: null, throttle: new ThrottleBoard(data.board), metrics });
    gate = new Gate(core, metrics, settings.publicEndpoints);
  }
  const upstream = settings.upstream === undefined
    ? undefined
    : {
      url: new URL(settings.upstream.origin), timeoutMs: settings.upstream.timeoutMs, maxBody: settings.upstream.maxBody,
      health: sharedHealth(data.upstreamHealth),
    };
  const gateway = new Gateway(core, gate, routes, log, metrics, trustedProxies(settings.trustedProxies), upstream);
  return {
    handle(res, req) {
      metrics.requests++;
      gateway.handle(res, req);
    },
    drain: (graceMs) => gateway.drain(graceMs),
    collect: () => metrics.registry.getMetricsAsJSON(),
    close: async () => {
      await gateway.proxy?.close();
    },
  };
});
