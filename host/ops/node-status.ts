// What auth.nodeStatus tells the console of the node now, from the metrics every serving
// thread keeps (the same series /ext/metrics exposes, summed over the threads): the
// WebSocket sessions open, and the upstream's answers with their latency, read from
// api_auth_upstream_request_duration_seconds as Prometheus's histogram_quantile reads a
// histogram (linear within the bucket that holds the rank).
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/** One thread's metrics, as prom-client's `registry.getMetricsAsJSON()` gives them. */
export type ThreadMetrics = readonly MetricObjectWithValues<MetricValue<string>>[];

export interface NodeStatus {
  /** WebSocket sessions open now, in every thread. */
  readonly websocketSessions: number;
  /** The upstream's answers since the start, and their latency's median and 99th percentile (ms); null before the first. */
  readonly upstream: { readonly answers: number; readonly p50Ms: number | null; readonly p99Ms: number | null };
}

const SESSIONS = 'api_auth_websocket_sessions_open';
const LATENCY = 'api_auth_upstream_request_duration_seconds';

/** The node's status from the metrics of each of its threads (and the owner's, which serves none). */
export function nodeStatusOf(threads: readonly ThreadMetrics[]): NodeStatus {
  let sessions = 0;
  const buckets = new Map<number, number>();
  let answers = 0;
  for (const metrics of threads) {
    for (const metric of metrics) {
      if (metric.name === SESSIONS) {
        for (const { value } of metric.values) sessions += value;
      } else if (metric.name === LATENCY) {
        for (const { value, labels, metricName } of metric.values as readonly (MetricValue<string> & { metricName?: string })[]) {
          if (metricName === `${LATENCY}_count`) answers += value;
          if (metricName !== `${LATENCY}_bucket`) continue;
          const le = labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(labels.le);
          buckets.set(le, (buckets.get(le) ?? 0) + value);
        }
      }
    }
  }
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  const quantile = (q: number): number | null => {
    if (answers === 0) return null;
    const rank = q * answers;
    let below = 0;
    let lower = 0;
    for (const bound of bounds) {
      const count = buckets.get(bound)!;
      if (count >= rank) {
        // Past the last finite bound, the last finite bound: as histogram_quantile answers.
        if (bound === Number.POSITIVE_INFINITY) return lower * 1000;
        return (lower + ((bound - lower) * (rank - below)) / Math.max(count - below, 1)) * 1000;
      }
      below = count;
      lower = bound;
    }
    return lower * 1000;
  };
  return { websocketSessions: sessions, upstream: { answers, p50Ms: quantile(0.5), p99Ms: quantile(0.99) } };
}
