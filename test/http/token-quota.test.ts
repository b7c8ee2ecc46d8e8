// Quotas at the gate: auth.newToken's `quota` ({"requests": N, "per": "day" | "month"}),
// checked and listed with the calls counted in the current window and when it resets; a
// call past it gets 429 with Retry-After and the reset's time (`data.resetsAt`), never
// reaches the node, and the next UTC day or month counts from 0. The counts outlive a
// restart and carry over to a rotation's new token. The clock is the test's.
import t from 'tap';
import { Readable } from 'node:stream';
import { runOperatorCommand } from '../../build/host/cli/operator/index.js';
import { askToken, authUrl, listTokens } from '../helpers/auth.js';
import { jsonrpc, post, request, type HttpResponse } from '../helpers/http.js';
import { CLOCK_START, manualClock, serveAgain, serveInProcess } from '../helpers/library.js';
import { startUpstream } from '../helpers/upstream.js';
import { openClient, Refused, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';

const RPC = '/ext/bc/C/rpc';
const HOUR_MS = 3_600_000;

/** auth.newToken for the RPC path (and `extra`): its token and id, or its error. */
async function issue(
  base: string,
  password: string,
  extra: Record<string, unknown>,
): Promise<{ token?: string; id?: string; error?: { code: number; message: string } }> {
  const answer = await askToken(base, password, { endpoints: [RPC], ...extra });
  const result = answer.result as { token?: string; id?: string } | undefined;
  return { token: result?.token, id: result?.id, error: answer.error as { code: number; message: string } | undefined };
}

const listed = (base: string, password: string) => listTokens(base, password);
const rpcPost = (base: string, token: string, body: string): Promise<HttpResponse> => post(base, RPC, body, { token });

const one = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_chainId' });
const batch = (n: number) => JSON.stringify(Array.from({ length: n }, (_, id) => ({ jsonrpc: '2.0', id, method: 'eth_chainId' })));

t.test('newToken checks quota, names the field at fault, and issues nothing for a bad one', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true });
  const bad: Array<[unknown, string]> = [
    [5, 'quota'],
    ['5/day', 'quota'],
    [null, 'quota'],
    [[5, 'day'], 'quota'],
    [{}, 'quota.requests'],
    [{ per: 'day' }, 'quota.requests'],
    [{ requests: 0, per: 'day' }, 'quota.requests'],
    [{ requests: 1_000_000_001, per: 'day' }, 'quota.requests'],
    [{ requests: 1.5, per: 'day' }, 'quota.requests'],
    [{ requests: '5', per: 'day' }, 'quota.requests'],
    [{ requests: 5 }, 'quota.per'],
    [{ requests: 5, per: 'week' }, 'quota.per'],
    [{ requests: 5, per: 'Day' }, 'quota.per'],
    [{ requests: 5, per: 'day', burst: 2 }, 'quota.burst'],
  ];
  for (const [quota, field] of bad) {
    const { token, error } = await issue(server.url, server.password, { quota });
    t.equal(token, undefined, JSON.stringify(quota));
    t.equal(error?.code, -32602, `${JSON.stringify(quota)}: invalid params`);
    t.match(error?.message, new RegExp(`^invalid params: ${field.replace('.', '\\.')} `), `names ${field}`);
  }
  t.same(await listed(server.url, server.password), [], 'nothing was issued');
});

t.test(
  "past the quota: 429, Retry-After to the reset, data.resetsAt, the caller's id; never forwarded; the next day counts from 0",
  async (t) => {
    // 2030-01-01T23:59:58Z: two seconds before the day's quota resets.
    const time = manualClock(CLOCK_START + 24 * HOUR_MS - 2000);
    const upstream = await startUpstream(t);
    const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock, args: ['--upstream', upstream.url] });
    const { token } = await issue(server.url, server.password, { quota: { requests: 3, per: 'day' } });
    const { token: plain } = await issue(server.url, server.password, { endpoints: ['*'] });
    t.match((await listed(server.url, server.password))[0], {
      rateLimit: null,
      quota: { requests: 3, per: 'day', used: 0, resetsAt: '2030-01-02T00:00:00Z' },
    });

    t.equal((await rpcPost(server.url, token!, batch(2))).status, 200, 'a batch of 2 of 3');
    const past = await rpcPost(server.url, token!, batch(2));
    t.equal(past.status, 429, 'a batch of 2 with 1 left: refused whole');
    t.equal(past.headers['retry-after'], '2', 'the seconds to the reset');
    t.same(JSON.parse(past.text), {
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32005,
        message: "the provided auth token's quota for this period is spent; it resets at 2030-01-02T00:00:00Z",
        data: { resetsAt: '2030-01-02T00:00:00Z' },
      },
    });
    t.equal((await rpcPost(server.url, token!, one(41))).status, 200, 'the refused batch spent nothing: the last call passes');
    const spent = await rpcPost(server.url, token!, one(42));
    t.equal(spent.status, 429);
    t.match(
      JSON.parse(spent.text),
      { id: 42, error: { code: -32005, data: { resetsAt: '2030-01-02T00:00:00Z' } } },
      "a lone call's id echoed",
    );
    t.match((await listed(server.url, server.password))[0], { requests: 3, quota: { used: 3, resetsAt: '2030-01-02T00:00:00Z' } });
    t.equal(upstream.seen.length, 2, 'only the calls within the quota reached the node');

    time.now += 1000;
    t.equal((await rpcPost(server.url, token!, one(43))).status, 429, 'one second before midnight, still spent');
    time.now += 1000;
    t.equal((await rpcPost(server.url, token!, batch(3))).status, 200, 'at midnight UTC the whole quota again');
    t.match((await listed(server.url, server.password))[0], { requests: 6, quota: { used: 3, resetsAt: '2030-01-03T00:00:00Z' } });
    const metrics = (await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${plain}`]] })).text;
    t.match(metrics, /api_auth_limit_refusals_total\{reason="quota"\} 3\n/, 'counted as quota refusals');
  },
);

t.test(
  'WebSocket: the upgrade counts one call of the quota, each message its calls; past it -32005 with data.resetsAt for its id; no new session',
  async (t) => {
    const time = manualClock(CLOCK_START + 23 * HOUR_MS);
    const upstream = await startWsUpstream(t);
    const server = await serveInProcess(t, {
      cheapChecks: true,
      clock: time.clock,
      args: ['--upstream', `http://127.0.0.1:${upstream.port}`],
    });
    const path = '/ext/bc/C/ws';
    const { token } = await issue(server.url, server.password, { endpoints: [path], quota: { requests: 2, per: 'day' } });
    const client = await openClient(t, wsUrl(server.url, path), { token: token! });
    const session = await upstream.session(0);
    t.match(await client.call('eth_chainId'), { result: '0xa86a' }, 'the upgrade and one call: the quota of 2');
    const refused = await client.call('eth_blockNumber');
    t.same(
      refused.error,
      {
        code: -32005,
        message: "the provided auth token's quota for this period is spent; it resets at 2030-01-02T00:00:00Z",
        data: { resetsAt: '2030-01-02T00:00:00Z' },
      },
      'past the quota: the error for its id',
    );
    t.equal(session.received.length, 1, 'the refused call never reached the node');
    const again = await openClient(t, wsUrl(server.url, path), { token: token! }).then(
      () => null,
      (error: unknown) => error,
    );
    t.ok(again instanceof Refused && again.status === 429, 'a new upgrade: 429');
    t.match((again as Refused).body, /quota for this period is spent/);
    time.now += HOUR_MS;
    t.match(await client.call('eth_chainId'), { result: '0xa86a' }, 'at midnight UTC, the same session goes on');
  },
);

t.test("a month's quota resets on the first of the next month, UTC, and lists so", async (t) => {
  // 2030-02-28T12:00:00Z (2030 is no leap year).
  const time = manualClock(Date.parse('2030-02-28T12:00:00Z'));
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const { token } = await issue(server.url, server.password, {
    endpoints: ['/ext/info'],
    quota: { requests: 1, per: 'month' },
    rateLimit: '10/s',
  });
  const info = (id: number) =>
    request(server.url, '/ext/info', {
      method: 'POST',
      headers: [
        ['Authorization', `Bearer ${token!}`],
        ['Content-Type', 'application/json'],
      ],
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'info.getNodeVersion' }),
    });
  t.equal((await info(1)).status, 200);
  const spent = await info(2);
  t.equal(spent.status, 429);
  t.equal(spent.headers['retry-after'], String(12 * 3600));
  t.match((await listed(server.url, server.password))[0], {
    rateLimit: '10/s',
    quota: { requests: 1, per: 'month', used: 1, resetsAt: '2030-03-01T00:00:00Z' },
  });
});

t.test("the counts outlive a restart, and a rotation's new token carries the old one's: no fresh quota either way", async (t) => {
  const time = manualClock();
  const upstream = await startUpstream(t);
  const first = await serveInProcess(t, { cheapChecks: true, clock: time.clock, args: ['--upstream', upstream.url] });
  const { token, id } = await issue(first.url, first.password, { quota: { requests: 5, per: 'day' } });
  t.equal((await rpcPost(first.url, token!, batch(3))).status, 200);
  await first.stop();
  const second = await serveAgain(t, first, time.clock);
  t.match((await listed(second.url, second.password))[0], { quota: { used: 3 } }, 'the usage file kept the count');
  t.equal((await rpcPost(second.url, token!, batch(3))).status, 429, '2 left after the restart');
  t.equal((await rpcPost(second.url, token!, one(1))).status, 200);

  const rotated = await jsonrpc(authUrl(second.url), 'auth.rotateToken', { password: second.password, id, overlap: '0s' });
  const fresh = (rotated.result as { token: string }).token;
  const tokens = await listed(second.url, second.password);
  t.match(tokens[1], { rotatedFrom: id, quota: { requests: 5, per: 'day', used: 4 } }, "the new token lists the old one's count");
  t.equal((await rpcPost(second.url, fresh, one(2))).status, 200, 'one call left');
  t.equal((await rpcPost(second.url, fresh, one(3))).status, 429, 'then spent');
});

t.test('token new --quota N/day issues a quota, and token list shows it as used/requests per window', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true });
  const run = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    let stdout = '';
    let stderr = '';
    const code = await runOperatorCommand([...args, '--uri', server.url, '--password-file', server.passwordFile], {
      stdout: (text) => {
        stdout += text;
      },
      stderr: (text) => {
        stderr += text;
      },
      stdin: Readable.from([]) as unknown as NodeJS.ReadStream,
    });
    return { code, stdout, stderr };
  };
  t.equal((await run('token', 'new', '--endpoints', '/ext/info', '--quota', '1000/month', '--json')).code, 0);
  const list = await run('token', 'list');
  t.match(list.stdout, /^ID +LABEL +ENDPOINTS +METHODS +RATE +QUOTA +CLIENTS/);
  t.match(list.stdout.split('\n')[1], / 0\/1000 per month /);
  const bad = await run('token', 'new', '--endpoints', '/ext/info', '--quota', '1000/week');
  t.equal(bad.code, 2, 'a bad --quota is a usage error');
  t.match(bad.stderr, /--quota must be N\/day or N\/month/);
  const over = await run('token', 'new', '--endpoints', '/ext/info', '--quota', '1000000001/day');
  t.not(over.code, 0, "past the node's bound");
  t.match(over.stderr, /quota\.requests/);
});
