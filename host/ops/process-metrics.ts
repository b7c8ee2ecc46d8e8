// The process's own metrics (process_* and nodejs_*), where they are asked for.
//
// prom-client's default metrics (collectDefaultMetrics), each from its own module, in its
// order and with its configuration; but the CPU counters, whose module loads OpenTelemetry
// (fifty-odd files, a tenth of the owner's start) only for exemplars, which no metric here
// has. They are made here as that module makes them.
import { createRequire } from 'node:module';
import type * as Prometheus from 'prom-client';
import { Counter } from './prometheus.js';

const require = createRequire(import.meta.url);

const DEFAULT_METRICS = [
  'processStartTime',
  'osMemoryHeap',
  'processOpenFileDescriptors',
  'processMaxFileDescriptors',
  'eventLoopLag',
  ...(typeof process.getActiveResourcesInfo === 'function' ? ['processResources'] : []),
  'processHandles',
  'processRequests',
  'heapSizeAndUsed',
  'heapSpacesSizeAndUsed',
  'version',
  'gc',
];

type DefaultMetric = (
  registry: Prometheus.Registry,
  config: Prometheus.DefaultMetricsCollectorConfiguration<'text/plain; version=0.0.4; charset=utf-8'>,
) => void;

/** The process's own metrics (process_* and nodejs_*), in `registry`. */
export function processMetrics(registry: Prometheus.Registry): void {
  const registers = [registry];
  let last = process.cpuUsage();
  // One collect sets the three, from one reading.
  const user: Counter = new Counter({
    name: 'process_cpu_user_seconds_total',
    help: 'Total user CPU time spent in seconds.',
    registers,
    collect() {
      const now = process.cpuUsage();
      const userMicros = now.user - last.user;
      const systemMicros = now.system - last.system;
      last = now;
      user.inc(userMicros / 1e6);
      system.inc(systemMicros / 1e6);
      total.inc((userMicros + systemMicros) / 1e6);
    },
  });
  const system = new Counter({ name: 'process_cpu_system_seconds_total', help: 'Total system CPU time spent in seconds.', registers });
  const total = new Counter({ name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', registers });
  const config = { eventLoopMonitoringPrecision: 10, register: registry };
  for (const name of DEFAULT_METRICS) (require(`prom-client/lib/metrics/${name}`) as DefaultMetric)(registry, config);
  // Gauges named as counters, which `promtool check metrics` refuses (a name ending in
  // _total is a counter's); each is the sum of its by-type gauge, which stays:
  // sum(nodejs_active_handles) is nodejs_active_handles_total.
  for (const name of MISNAMED_GAUGES) registry.removeSingleMetric(name);
}

/** prom-client's gauges whose names end in _total (nodejs_active_resources_total only where Node has getActiveResourcesInfo). */
const MISNAMED_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];
