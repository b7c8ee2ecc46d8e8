// The upstream latency histogram is counted outside prom-client and handed to it when
// read (host/ops/metrics.ts, CountedHistogram): what a scrape shows, and what the threads'
// sum reads (getMetricsAsJSON), must be what prom-client's own observe() gives for the
// same observations, bucket edges, +Inf and sum included.
import t from 'tap';
import { createRequire } from 'node:module';
import type * as Prometheus from 'prom-client';
import { Metrics } from '../../build/host/ops/metrics.js';

const require = createRequire(import.meta.url);
const { Histogram, Registry } = require('prom-client') as typeof Prometheus;

const NAME = 'api_auth_upstream_request_duration_seconds';
// Milliseconds: below the first bucket, on edges, between them, past the last (30 s).
const OBSERVED = [0.1, 0.5, 0.7, 1, 2.5, 3, 10, 99, 250, 1000, 2500, 29_999, 30_000, 30_001, 86_400_000];

/** The lines of one metric in an exposition. */
const linesOf = (text: string): string[] => text.split('\n').filter((line) => line.startsWith(`${NAME}_`));

t.test("the histogram reads as prom-client's own would", async (t) => {
  const metrics = new Metrics();
  const reference = new Registry();
  const buckets = (await metrics.registry.getSingleMetric(NAME)!.get()).values
    .filter((v) => (v as { metricName?: string }).metricName === `${NAME}_bucket` && v.labels.le !== '+Inf')
    .map((v) => Number(v.labels.le));
  t.ok(buckets.length > 5, `${buckets.length} buckets`);
  const plain = new Histogram({ name: NAME, help: 'the same', buckets, registers: [reference] });
  t.same(linesOf((await metrics.scrape()).text), linesOf(await reference.metrics()), 'nothing observed: the same');
  for (const ms of OBSERVED) {
    metrics.observeUpstream(ms);
    plain.observe(ms / 1000);
  }
  const ours = linesOf((await metrics.scrape()).text);
  t.same(ours, linesOf(await reference.metrics()), 'after every observation: the same lines');
  t.ok(
    ours.some((line) => line === `${NAME}_count ${OBSERVED.length}`),
    'each observation counted',
  );
  // Read twice, the counts are not added twice.
  t.same(linesOf((await metrics.scrape()).text), ours, 'a second scrape reads the same');
  const json = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === NAME)!;
  const plainJson = (await reference.getMetricsAsJSON()).find((m) => m.name === NAME)!;
  t.same(json.values, plainJson.values, "what the threads' sum reads is the same too");
});
