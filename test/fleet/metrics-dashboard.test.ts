// deploy/grafana/api-auth.json, the dashboard, over what a running gateway exports: a
// fleet gateway (etcd, so the fleet's families are there too) in front of an upstream,
// with HTTP and WebSocket traffic and refusals. Every metric an expression names is in
// its scrape, and a real Prometheus that scraped it evaluates every expression to a
// result: none names a metric, a label matcher or a function that would leave a panel empty.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { seededEtcd, startGateway } from '../helpers/etcd.js';
import { closedPort } from '../helpers/upstream.js';
import { busyGateway, parseScrape } from '../helpers/metrics.js';
import { launchProgram, ROOT, sleep, tempDir } from '../helpers/server.js';

const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'api-auth.json');

interface Panel {
  readonly title: string;
  readonly type: string;
  readonly targets?: readonly { readonly expr: string }[];
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[]; templating: { list: { query?: unknown }[] } };
/** Every expression, with its panel's title. */
const expressions = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })));

/** PromQL's words that are not metric names: aggregations, functions, keywords. */
const NOT_METRICS = new Set([
  'sum',
  'max',
  'min',
  'avg',
  'count',
  'topk',
  'bottomk',
  'by',
  'without',
  'rate',
  'increase',
  'irate',
  'histogram_quantile',
  'label_values',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
]);

/** The metric names an expression selects: its identifiers outside strings, label matchers, ranges and by-lists, but for PromQL's words. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without)\s*\([^)]*\)/g, '');
  return [...bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((word) => !NOT_METRICS.has(word));
}

/** The expression as Prometheus takes it: Grafana's variables given values that select everything. */
function concrete(expr: string): string {
  return expr.replaceAll('$__rate_interval', '30s').replaceAll('$job', '.*').replaceAll('$instance', '.*');
}

t.test('the dashboard has panels for requests, refusals, methods, upstream latency, sessions and the fleet', async (t) => {
  t.ok(expressions.length > 0, `${expressions.length} expressions`);
  const all = expressions.map((e) => e.expr).join('\n');
  for (const family of [
    'api_auth_http_responses_total',
    'api_auth_rpc_calls_total',
    'api_auth_upstream_request_duration_seconds_bucket',
    'api_auth_websocket_sessions_open',
    'api_auth_fleet_members',
    'api_auth_build_info',
  ]) {
    t.match(all, family, `an expression over ${family}`);
  }
  t.match(all, /sum by \(reason\) \(rate\(api_auth_http_responses_total\{[^}]*reason!="none"/, 'refusals by reason');
  t.match(all, /histogram_quantile\(0\.99, sum by \(le\) \(rate\(api_auth_upstream_request_duration_seconds_bucket/, 'upstream p99');
});

t.test('every expression names metrics a fleet gateway exports, and Prometheus evaluates each to a result', async (t) => {
  const { etcd, passwordFile, password } = await seededEtcd(t);
  const { server, metricsToken, text } = await busyGateway(t, async (upstream) => {
    const gateway = await startGateway(t, etcd, passwordFile, ['--upstream', upstream]);
    return { url: gateway.url, password };
  });
  const exported = new Set([...parseScrape(text).keys()].map((series) => series.replace(/\{.*$/, '')));
  for (const { panel, expr } of expressions) {
    const names = metricNames(expr);
    t.ok(names.length > 0, `${panel}: ${expr} names a metric`);
    for (const name of names) t.ok(exported.has(name), `${panel}: ${name} is exported`);
  }
  t.ok(exported.has('api_auth_fleet_members') && exported.has('api_auth_websocket_sessions_open'), 'the fleet and the sessions are there');
  t.ok((parseScrape(text).get('api_auth_http_responses_total{status="101",reason="none"}') ?? 0) >= 1, "the session's upgrade is counted");

  const promtool = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  if (promtool.error !== undefined) t.fail(`promtool cannot be run (${promtool.error.message}): install Debian's prometheus package`);
  else t.equal(promtool.status, 0, `promtool check metrics passes the fleet gateway's scrape too: ${promtool.stdout}${promtool.stderr}`);

  // A real Prometheus scrapes the gateway every second, with the scraper's token.
  const dir = tempDir(t);
  writeFileSync(join(dir, 'token'), metricsToken, { mode: 0o600 });
  const target = new URL(server.url).host;
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global: {scrape_interval: 1s, evaluation_interval: 1s}',
      'scrape_configs:',
      '  - job_name: api-auth',
      '    metrics_path: /ext/metrics',
      `    authorization: {credentials_file: ${join(dir, 'token')}}`,
      `    static_configs: [{targets: ["${target}"]}]`,
      '',
    ].join('\n'),
  );
  const port = await closedPort();
  const prometheus = launchProgram(t, [
    'prometheus',
    [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
  ]);
  const query = async (expr: string): Promise<{ status: string; data?: { result: unknown[] }; error?: string }> => {
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(expr)}`);
    return (await response.json()) as { status: string; data?: { result: unknown[] }; error?: string };
  };
  // Ready once it holds enough scrapes for a rate: every answer to the scraper is one more.
  for (;;) {
    if (prometheus.hasExited()) {
      t.fail(`prometheus exited: ${prometheus.stderr().slice(-2000)}`);
      return;
    }
    const scrapes = await query('count_over_time(up{job="api-auth"}[1m])').catch(() => undefined);
    const held = Number((scrapes?.data?.result[0] as { value?: [number, string] } | undefined)?.value?.[1] ?? 0);
    if (held >= 4) break;
    await sleep(250);
  }
  const targets = (await (await fetch(`http://127.0.0.1:${port}/api/v1/targets`)).json()) as {
    data: { activeTargets: { health: string; lastError: string }[] };
  };
  t.match(targets.data.activeTargets, [{ health: 'up', lastError: '' }], 'Prometheus scrapes the gateway');
  for (const { panel, expr } of expressions) {
    const answer = await query(concrete(expr));
    t.equal(answer.status, 'success', `${panel}: ${expr} is valid PromQL ${answer.error ?? ''}`);
    t.ok((answer.data?.result.length ?? 0) > 0, `${panel}: ${expr} has a result`);
  }
  for (const variable of dashboard.templating.list) {
    const definition = (variable.query as { query?: string } | undefined)?.query;
    if (definition === undefined) continue;
    const metric = /label_values\((\w+)/.exec(definition)?.[1];
    t.ok(metric !== undefined && exported.has(metric), `the variable's ${definition} reads an exported metric`);
  }
});
