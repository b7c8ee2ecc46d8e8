// GET /ext/metrics: Prometheus text, protected like any endpoint. Verifications by
// outcome, a sampled latency histogram, tokens issued and revoked, password checks and
// throttles, upstream errors, and the process's own metrics.
import t from 'tap';
import { ALREADY_REVOKED, call, newToken, REVOKED, revokeToken, tamperLast } from '../helpers/auth.js';
import { jsonrpc, postJson, request, rpc } from '../helpers/http.js';
import { cliLine, refusalOf } from '../helpers/library.js';
import { runCli, startServer, VERSION } from '../helpers/server.js';
import { closedPort, startUpstream } from '../helpers/upstream.js';
import { scrape } from '../helpers/metrics.js';

const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const server = await startServer(t, { cheapChecks: true });
const metricsToken = await newToken(server.url, server.password, ['/ext/metrics']);

const outcome = (name: string): string => `api_auth_verifications_total{outcome="${name}"}`;

t.test('the metrics are protected like any endpoint, and served as Prometheus text', async (t) => {
  const refused = await request(server.url, '/ext/metrics');
  t.equal(refused.status, 401, 'no token, no metrics');
  const response = await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${metricsToken}`]] });
  t.equal(response.status, 200);
  t.equal(response.headers['content-type'], CONTENT_TYPE);
  for (const family of [
    'api_auth_verifications_total',
    'api_auth_verification_duration_seconds',
    'api_auth_tokens_issued_total',
    'api_auth_tokens_revoked_total',
    'api_auth_password_checks_total',
    'api_auth_password_throttled_total',
    'api_auth_password_busy_total',
    'api_auth_upstream_errors_total',
    'process_cpu_user_seconds_total',
    'nodejs_eventloop_lag_seconds',
  ]) {
    t.match(response.text, new RegExp(`^# TYPE ${family} `, 'm'), `${family} is there`);
  }
  const post = await postJson(`${server.url}/ext/metrics`, rpc('x', undefined, 1), [['Authorization', `Bearer ${metricsToken}`]]);
  t.equal(post.status, 405);
  t.equal(post.headers.allow, 'GET');
});

t.test('verifications are counted by outcome', async (t) => {
  const info = await newToken(server.url, server.password, ['/ext/info']);
  const before = await scrape(server.url, metricsToken);
  for (let i = 0; i < 5; i++) await call(server.url, '/ext/info', info);
  await call(server.url, '/ext/info');
  await call(server.url, '/ext/info');
  await call(server.url, '/ext/info', 'not-a-token');
  await call(server.url, '/ext/info', tamperLast(info));
  await call(server.url, '/ext/health', info);
  await request(server.url, '/ext/./info', { headers: [['Authorization', `Bearer ${info}`]] });
  const after = await scrape(server.url, metricsToken);
  const delta = (name: string): number => (after.get(outcome(name)) ?? NaN) - (before.get(outcome(name)) ?? NaN);
  t.equal(delta('valid'), 6, 'five calls and the scrape itself');
  t.equal(delta('no token'), 2);
  t.equal(delta('malformed'), 1);
  t.equal(delta('bad signature'), 1);
  t.equal(delta('not granted'), 1);
  t.equal(delta('bad path'), 1);
  t.equal(delta('expired'), 0);
});

t.test('one verification in 64 is timed', async (t) => {
  const before = await scrape(server.url, metricsToken);
  for (let i = 0; i < 130; i++) await call(server.url, '/ext/info');
  const after = await scrape(server.url, metricsToken);
  const count = after.get('api_auth_verification_duration_seconds_count')! - before.get('api_auth_verification_duration_seconds_count')!;
  t.ok(count >= 2 && count <= 3, `131 verifications, ${count} timed`);
  t.ok(after.get('api_auth_verification_duration_seconds_sum')! > 0, 'the sum is positive');
  t.equal(after.get('api_auth_verification_duration_seconds_bucket{le="+Inf"}'), after.get('api_auth_verification_duration_seconds_count'));
});

t.test('tokens issued and revoked, password checks and throttles are counted', async (t) => {
  const before = await scrape(server.url, metricsToken);
  const token = await newToken(server.url, server.password, ['*']);
  await newToken(server.url, server.password, ['/ext/info']);
  t.same(await revokeToken(server.url, server.password, token), REVOKED);
  t.same(await revokeToken(server.url, server.password, token), ALREADY_REVOKED, 'revoking it again revokes nothing');
  // One client fails three times, its burst; its next call is refused before any check.
  const address = '127.3.0.1';
  const wrong = JSON.stringify(rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, 1));
  for (let i = 0; i < 3; i++) {
    const response = await request(server.url, '/ext/auth', {
      headers: [['Content-Type', 'application/json']],
      body: wrong,
      localAddress: address,
    });
    t.equal(JSON.parse(response.text).error.code, -32000, `wrong password ${i + 1}`);
  }
  const throttled = await request(server.url, '/ext/auth', {
    headers: [['Content-Type', 'application/json']],
    body: wrong,
    localAddress: address,
  });
  t.equal(throttled.status, 429);
  const after = await scrape(server.url, metricsToken);
  const delta = (series: string): number => after.get(series)! - before.get(series)!;
  t.equal(delta('api_auth_tokens_issued_total'), 2);
  t.equal(delta('api_auth_tokens_revoked_total'), 1);
  t.equal(delta('api_auth_password_checks_total{result="accepted"}'), 4);
  t.equal(delta('api_auth_password_checks_total{result="refused"}'), 3);
  t.equal(delta('api_auth_password_throttled_total'), 1);
});

t.test('upstream errors are counted by kind; the metrics stay local behind the proxy', async (t) => {
  const port = await closedPort();
  const gateway = await startServer(t, { auth: false, args: ['--upstream', `http://127.0.0.1:${port}`] });
  for (let i = 0; i < 2; i++) t.equal((await request(gateway.url, '/ext/info')).status, 502);
  const samples = await scrape(gateway.url);
  t.equal(samples.get('api_auth_upstream_errors_total{kind="refused"}'), 2);
  t.equal(samples.get('api_auth_upstream_errors_total{kind="timeout"}'), 0);
  const upstream = await startUpstream(t);
  const proxied = await startServer(t, { auth: false, args: ['--upstream', upstream.url] });
  await scrape(proxied.url);
  t.equal(upstream.seen.length, 0, '/ext/metrics is answered by the gateway, not the upstream');
});

t.test('--metrics-path moves the metrics; a bad one is refused at start', async (t) => {
  const moved = await startServer(t, { auth: false, args: ['--metrics-path', '/ext/gateway/metrics'] });
  t.ok((await scrape(moved.url, undefined, '/ext/gateway/metrics')).has('api_auth_tokens_issued_total'));
  t.equal((await request(moved.url, '/ext/metrics')).status, 404);
  const args = (bad: string): string[] => ['--http-port', '0', '--data-dir', '/nonexistent', '--metrics-path', bad];
  for (const bad of ['/ext/auth', 'metrics', '/ext/../metrics', '/ext/*']) {
    const error = await refusalOf(args(bad));
    t.match(error, { code: /^API_AUTH_BAD_(OPTION|COMMAND_LINE)$/ }, `${bad}: refused`);
    t.match(error === undefined ? '' : cliLine(error), /^api-auth: --metrics-path[^\n]*$/, `${bad}: one line naming the flag`);
  }
  const result = await runCli(t, args('/ext/../metrics'));
  t.equal(result.code, 2, 'the CLI exits 2');
  t.match(result.stderr, /^api-auth: --metrics-path[^\n]*\n$/, 'with that line alone on stderr');
});

/** A token for `endpoints` with the extra parameters of auth.newToken (methods, rateLimit). */
async function tokenWith(base: string, password: string, endpoints: string[], extra: Record<string, unknown>): Promise<string> {
  const answer = await jsonrpc(`${base}/ext/auth`, 'auth.newToken', { password, endpoints, ...extra });
  if (typeof answer.result?.token !== 'string') throw new Error(`auth.newToken gave no token: ${JSON.stringify(answer)}`);
  return answer.result.token;
}

const answers = (status: number, reason: string): string => `api_auth_http_responses_total{status="${status}",reason="${reason}"}`;

t.test('answers are counted by status and, for a refusal, its reason', async (t) => {
  const info = await newToken(server.url, server.password, ['/ext/info']);
  const scoped = await tokenWith(server.url, server.password, ['/ext/info'], { methods: ['info.getNodeVersion'] });
  const limited = await tokenWith(server.url, server.password, ['/ext/info'], { rateLimit: '1/h' });
  const before = await scrape(server.url, metricsToken);
  const bearer = (token: string): [string, string][] => [['Authorization', `Bearer ${token}`]];
  const version = rpc('info.getNodeVersion', undefined, 1);
  t.equal((await postJson(`${server.url}/ext/info`, version, bearer(info))).status, 200);
  t.equal((await postJson(`${server.url}/ext/info`, version, bearer(scoped))).status, 200);
  const refusedCall = await postJson(`${server.url}/ext/info`, rpc('info.getNetworkID', undefined, 2), bearer(scoped));
  t.equal(refusedCall.status, 200, 'a call the scope refuses is a JSON-RPC error in a 200');
  t.equal((await postJson(`${server.url}/ext/info`, version, bearer(limited))).status, 200);
  t.equal((await postJson(`${server.url}/ext/info`, version, bearer(limited))).status, 429);
  t.equal((await postJson(`${server.url}/ext/info`, version)).status, 401);
  t.equal((await call(server.url, '/ext/info', tamperLast(info))).status, 401);
  t.equal((await request(server.url, '/ext/./info', { headers: bearer(info) })).status, 400);
  t.equal((await request(server.url, '/ext/info', { method: 'DELETE', headers: bearer(info) })).status, 405);
  const after = await scrape(server.url, metricsToken);
  const delta = (series: string): number => (after.get(series) ?? 0) - (before.get(series) ?? 0);
  // The scrape before is counted by the one after: one more 200 of none.
  t.equal(delta(answers(200, 'none')), 4, 'the three answered calls and the scrape');
  t.equal(delta(answers(200, 'method not allowed')), 1);
  t.equal(delta(answers(429, 'rate')), 1);
  t.equal(delta(answers(401, 'no token')), 1);
  t.equal(delta(answers(401, 'bad signature')), 1);
  t.equal(delta(answers(400, 'bad path')), 1);
  t.equal(delta(answers(405, 'none')), 1, 'an answer that is not a refusal of the admission keeps its status, reason none');
  for (const [series] of after) {
    const reason = /^api_auth_http_responses_total\{status="\d{3}",reason="([^"]*)"\}$/.exec(series)?.[1];
    if (series.startsWith('api_auth_http_responses_total') && reason === undefined) t.fail(`an unexpected series: ${series}`);
  }
});

t.test('calls are counted by method, the label bounded to known names, namespaces and other', async (t) => {
  const scoped = await tokenWith(server.url, server.password, ['/ext/info'], { methods: ['*'] });
  const before = await scrape(server.url, metricsToken);
  const batch = [
    'eth_chainId',
    'eth_getBalance',
    'eth_madeUpMethod',
    'debug_traceCall',
    'info.getNodeVersion',
    'platform.getHeight',
    'avax.getAtomicTx',
    'nonsense',
    'x'.repeat(300),
  ].map((method, i) => ({ jsonrpc: '2.0', id: i, method }));
  const answer = await postJson(`${server.url}/ext/info`, batch, [['Authorization', `Bearer ${scoped}`]]);
  t.equal(answer.status, 200);
  const after = await scrape(server.url, metricsToken);
  const delta = (method: string): number =>
    (after.get(`api_auth_rpc_calls_total{method="${method}"}`) ?? NaN) -
    (before.get(`api_auth_rpc_calls_total{method="${method}"}`) ?? NaN);
  t.equal(delta('eth_chainId'), 1, 'a method of the named sets by its name');
  t.equal(delta('eth_getBalance'), 1);
  t.equal(delta('eth_*'), 1, 'any other Ethereum method by its namespace');
  t.equal(delta('debug_*'), 1);
  t.equal(delta('info.*'), 1, 'an Avalanche method by its namespace');
  t.equal(delta('platform.*'), 1);
  t.equal(delta('avax.*'), 1);
  t.equal(delta('other'), 2, 'the rest as other');
  const methods = [...after.keys()].filter((series) => series.startsWith('api_auth_rpc_calls_total{'));
  t.ok(methods.length < 100, `${methods.length} series, whatever the clients send`);
  t.notOk(
    methods.some((series) => series.includes('xxxx') || series.includes('nonsense')),
    'no method a client made up is a label',
  );
});

t.test('the build and the verification sampling rate are exported', async (t) => {
  const samples = await scrape(server.url, metricsToken);
  t.equal(samples.get(`api_auth_build_info{version="${VERSION}",nodejs="${process.versions.node}"}`), 1);
  t.equal(samples.get('api_auth_verification_sampling_ratio'), 1 / 64, 'one verification in 64 is timed');
});

t.test("the upstream's answers are timed; one it did not give is counted by why", async (t) => {
  const upstream = await startUpstream(t);
  const gateway = await startServer(t, { auth: false, args: ['--upstream', upstream.url] });
  const before = await scrape(gateway.url);
  for (let i = 0; i < 3; i++) t.equal((await request(gateway.url, '/ext/bc/C/rpc', { method: 'POST', body: '{}' })).status, 200);
  const after = await scrape(gateway.url);
  const count = 'api_auth_upstream_request_duration_seconds_count';
  t.equal(after.get(count)! - before.get(count)!, 3, 'each proxied request');
  t.equal(after.get('api_auth_upstream_request_duration_seconds_bucket{le="+Inf"}'), after.get(count));
  t.ok(after.get('api_auth_upstream_request_duration_seconds_sum')! > 0);
  t.equal(after.get(answers(200, 'none'))! - (before.get(answers(200, 'none')) ?? 0), 4, 'the three answers and the scrape');
  const port = await closedPort();
  const down = await startServer(t, { auth: false, args: ['--upstream', `http://127.0.0.1:${port}`] });
  t.equal((await request(down.url, '/ext/info')).status, 502);
  const failed = await scrape(down.url);
  t.equal(failed.get(answers(502, 'upstream refused')), 1);
  t.equal(failed.get(count), 0, 'a request the upstream did not answer is not timed');
});
