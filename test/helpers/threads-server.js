// `node threads-server.js [threads]`: the acceptor (build/host/threads/acceptor.js) with
// HTTP threads that run failing-thread.js, and the exit policy of the api-auth command:
// exit 0 after SIGTERM, exit 1 once the server has stopped because a thread failed.
import { coreThreadsModule, newThreadsCore } from '../../build/host/core/module.js';
import { createLogger } from '../../build/host/ops/log.js';
import { Metrics } from '../../build/host/ops/metrics.js';
import { startThreads } from '../../build/host/threads/acceptor.js';
import { boardMemory } from '../../build/host/threads/throttle-board.js';

const threads = Number(process.argv[2] ?? '2');
const core = newThreadsCore({ threads: threads + 1 });
const server = await startThreads({
  threads,
  host: '127.0.0.1',
  port: 0,
  module: coreThreadsModule(),
  memory: core.memory,
  settings: {
    authRequired: false,
    publicEndpoints: [],
    metricsPath: '/ext/metrics',
    upstream: undefined,
    trustedProxies: [],
    logLevel: 'info',
    graceMs: 1000,
    websocket: { maxMessage: 1024, idleTimeout: 120, maxSessions: 1, maxSessionsPerToken: 1, maxSessionsPerClient: 1, queryToken: false },
  },
  board: boardMemory(),
  metrics: new Metrics(),
  log: createLogger(),
  script: new URL('./failing-thread.js', import.meta.url),
  whyNotListening: async (host, port) => new Error(`cannot listen on ${host}:${port}`),
}).listen({ auth: undefined, release: async () => undefined });
server.closed.then(
  () => process.exit(0),
  () => process.exit(1),
);
process.on('SIGTERM', () => void server.stop());
