// Per-token limits at the gate: auth.newToken's rateLimit, burst and
// allowedClients, checked and listed; a request past the rate gets 429 with Retry-After
// and -32005, one from a client the token does not allow 403 naming neither; the client is
// the one --trusted-proxies names; two HTTP threads share one bucket; the limits survive a
// restart and kill -9 with the token.
import t from 'tap';
import { askToken, call, listTokens } from '../helpers/auth.js';
import { request, type HttpResponse } from '../helpers/http.js';
import { manualClock, serveAgain, serveInProcess } from '../helpers/library.js';
import { restartServer, startServer } from '../helpers/server.js';
import { openClient, Refused, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';
import { startUpstream } from '../helpers/upstream.js';

const INFO = '/ext/info';
const WS_PATH = '/ext/bc/C/ws';
const INFO_BODY = JSON.stringify({ jsonrpc: '2.0', method: 'info.getNodeVersion', id: 7 });

async function issue(
  base: string,
  password: string,
  extra: Record<string, unknown>,
): Promise<{ token?: string; error?: { code: number; message: string } }> {
  const response = await askToken(base, password, extra);
  return { token: response.result?.token as string | undefined, error: response.error as { code: number; message: string } | undefined };
}

/** A call of /ext/info with the token, and an X-Forwarded-For when given. */
function callFrom(base: string, token: string, forwardedFor?: string): Promise<HttpResponse> {
  const headers: [string, string][] = [
    ['Authorization', `Bearer ${token}`],
    ['Content-Type', 'application/json'],
  ];
  if (forwardedFor !== undefined) headers.push(['X-Forwarded-For', forwardedFor]);
  return request(base, INFO, { method: 'POST', headers, body: INFO_BODY });
}

t.test('newToken checks rateLimit, burst and allowedClients, names the field, and issues nothing for a bad one', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true });
  const bad: Array<[Record<string, unknown>, string]> = [
    [{ rateLimit: '0/s' }, 'rateLimit'],
    [{ rateLimit: '1000001/s' }, 'rateLimit'],
    [{ rateLimit: '5/d' }, 'rateLimit'],
    [{ rateLimit: 5 }, 'rateLimit'],
    [{ rateLimit: '05/s' }, 'rateLimit'],
    [{ rateLimit: '5/s', burst: 0 }, 'burst'],
    [{ rateLimit: '5/s', burst: 1.5 }, 'burst'],
    [{ rateLimit: '5/s', burst: '5' }, 'burst'],
    [{ burst: 5 }, 'burst'],
    [{ allowedClients: [] }, 'allowedClients'],
    [{ allowedClients: '10.0.0.0/8' }, 'allowedClients'],
    [{ allowedClients: Array.from({ length: 65 }, (_, i) => `10.0.0.${i}`) }, 'allowedClients'],
    [{ allowedClients: ['10.0.0.1/8'] }, 'allowedClients[0]'],
    [{ allowedClients: ['127.0.0.1', 'localhost'] }, 'allowedClients[1]'],
    [{ allowedClients: ['fe80::1%eth0'] }, 'allowedClients[0]'],
    [{ allowedClients: ['10.0.0.0/33'] }, 'allowedClients[0]'],
    [{ allowedClients: [7] }, 'allowedClients[0]'],
  ];
  for (const [params, field] of bad) {
    const { token, error } = await issue(server.url, server.password, params);
    t.equal(token, undefined, JSON.stringify(params));
    t.equal(error?.code, -32602, `${JSON.stringify(params)}: invalid params`);
    t.match(error?.message, new RegExp(`^invalid params: ${field.replace(/[[\]]/g, '\\$&')} `), `names ${field}`);
  }
  t.same(await listTokens(server.url, server.password), [], 'nothing was issued');
});

t.test('listTokens shows the limits as issued (canonical), null without', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true });
  await issue(server.url, server.password, {});
  await issue(server.url, server.password, { rateLimit: '90/m' });
  await issue(server.url, server.password, {
    rateLimit: '10/s',
    burst: 30,
    allowedClients: ['2001:db8:0:0::/32', '192.0.2.7', '10.0.0.0/8', '::ffff:192.0.2.7'],
  });
  await issue(server.url, server.password, { rateLimit: '1/h' });
  const tokens = await listTokens(server.url, server.password);
  t.match(tokens[0], { rateLimit: null, burst: null, allowedClients: null });
  t.match(tokens[1], { rateLimit: '90/m', burst: 2, allowedClients: null }, 'the default burst: the rate per second, rounded up');
  t.match(
    tokens[2],
    { rateLimit: '10/s', burst: 30, allowedClients: ['10.0.0.0/8', '192.0.2.7', '2001:db8::/32'] },
    'ranges in canonical form and order, duplicates (an IPv4-mapped spelling too) once',
  );
  t.match(tokens[3], { rateLimit: '1/h', burst: 1 }, 'a burst of at least 1');
});

t.test('past the rate: 429, Retry-After in whole seconds, -32005; never forwarded; refilled by the clock', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const { token } = await issue(server.url, server.password, { rateLimit: '2/s', burst: 2 });
  const { token: plain } = await issue(server.url, server.password, {});
  for (let i = 0; i < 2; i++) t.equal((await call(server.url, INFO, token)).status, 200, `call ${i + 1} of the burst`);
  const refused = await call(server.url, INFO, token);
  t.equal(refused.status, 429);
  t.equal(refused.headers['retry-after'], '1', '500 ms to wait: 1 s');
  t.same(
    JSON.parse(refused.text),
    {
      jsonrpc: '2.0',
      error: { code: -32005, message: 'the provided auth token is past its rate limit; retry in 1 s' },
      id: 1,
    },
    "the lone call's id echoed",
  );
  t.equal((await call(server.url, INFO, plain)).status, 200, 'another token is not limited by it');
  time.now += 499;
  t.equal((await call(server.url, INFO, token)).status, 429, 'not yet');
  time.now += 1;
  t.equal((await call(server.url, INFO, token)).status, 200, 'refilled by one after 500 ms');
  t.equal((await call(server.url, INFO, token)).status, 429);
  const slow = await issue(server.url, server.password, { rateLimit: '1/h' });
  t.equal((await call(server.url, INFO, slow.token)).status, 200);
  const hour = await call(server.url, INFO, slow.token);
  t.equal(hour.headers['retry-after'], '3600', 'a rate per hour waits the hour');
});

t.test('allowedClients: 403 from elsewhere, naming neither the list nor the address; the client a trusted proxy names', async (t) => {
  const direct = await serveInProcess(t, { cheapChecks: true });
  // The test's requests come from addresses of 127.0.0.0/8 (not always 127.0.0.1).
  const { token: here } = await issue(direct.url, direct.password, { allowedClients: ['127.0.0.0/8'] });
  const { token: elsewhere } = await issue(direct.url, direct.password, { allowedClients: ['10.0.0.0/8', '2001:db8::/32'] });
  t.equal((await callFrom(direct.url, here!)).status, 200, 'from an allowed address');
  const refused = await callFrom(direct.url, elsewhere!);
  t.equal(refused.status, 403);
  // The refusal answers the request's one call, so it carries that call's id (7), not the original node's fixed 1.
  t.same(JSON.parse(refused.text), {
    jsonrpc: '2.0',
    error: { code: -32048, message: 'the provided auth token may not be used from this client' },
    id: 7,
  });
  t.notMatch(refused.text, /10\.0\.0\.0|2001|127\.0\.0\.1/, 'nothing of the list or the address');
  t.equal((await callFrom(direct.url, elsewhere!, '10.1.2.3')).status, 403, 'X-Forwarded-For from a peer no one trusts counts for nothing');

  const behind = await serveInProcess(t, { cheapChecks: true, args: ['--trusted-proxies', '127.0.0.0/8'] });
  const { token } = await issue(behind.url, behind.password, { allowedClients: ['10.0.0.0/8'] });
  t.equal((await callFrom(behind.url, token!, '10.1.2.3')).status, 200, 'the client the trusted proxy names is allowed');
  t.equal((await callFrom(behind.url, token!, '11.0.0.1')).status, 403, 'another is not');
  t.equal((await callFrom(behind.url, token!, '10.1.2.3, 11.0.0.1')).status, 403, 'the right-most untrusted entry is the client');
  t.equal((await callFrom(behind.url, token!)).status, 403, 'the proxy itself is not the client');
});

t.test('two HTTP threads share one bucket: the burst in all, not a burst per thread; refusals counted by reason', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ['--http-threads', '2'] });
  // 1 call per hour: nothing refills while the test runs, so the count is exact.
  const { token } = await issue(server.url, server.password, { rateLimit: '1/h', burst: 10 });
  const { token: reader } = await issue(server.url, server.password, { endpoints: ['*'] });
  const statuses: number[] = [];
  // Each on a fresh connection: the acceptor hands connections to the threads in turn.
  for (let i = 0; i < 30; i++) statuses.push((await call(server.url, INFO, token)).status);
  t.equal(statuses.filter((s) => s === 200).length, 10, 'exactly the burst was let through');
  t.equal(statuses.filter((s) => s === 429).length, 20, 'and the rest refused');
  const metrics = (await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${reader}`]] })).text;
  t.match(metrics, /api_auth_limit_refusals_total\{reason="rate"\} 20\n/, 'counted as rate refusals');
  t.notMatch(metrics, /limit_refusals_total\{[^}]*(serial|token)/, 'with no label per token');
});

t.test('the limits are durable with the token: after a restart and after kill -9', async (t) => {
  const time = manualClock();
  const first = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const { token } = await issue(first.url, first.password, { rateLimit: '1/h', burst: 1, allowedClients: ['127.0.0.0/8'] });
  await first.stop();
  const second = await serveAgain(t, first, time.clock);
  t.match((await listTokens(second.url, second.password))[0], { rateLimit: '1/h', burst: 1, allowedClients: ['127.0.0.0/8'] });
  t.equal((await call(second.url, INFO, token)).status, 200);
  t.equal((await call(second.url, INFO, token)).status, 429, 'still limited');

  const killed = await startServer(t, { cheapChecks: true });
  const { token: kept } = await issue(killed.url, killed.password, { rateLimit: '1/h', burst: 1 });
  killed.child.kill('SIGKILL');
  await killed.exited;
  const after = await restartServer(t, killed);
  t.match((await listTokens(after.url, after.password))[0], { rateLimit: '1/h', burst: 1 }, 'on disk before newToken answered');
  t.equal((await call(after.url, INFO, kept)).status, 200);
  t.equal((await call(after.url, INFO, kept)).status, 429, 'and enforced');
});

t.test(
  'WebSocket: the client is checked at the upgrade, which counts one call; each message counts, a batch its calls; one past the rate gets -32005 for its id, the session goes on',
  async (t) => {
    const time = manualClock();
    const upstream = await startWsUpstream(t);
    const server = await serveInProcess(t, {
      cheapChecks: true,
      clock: time.clock,
      args: ['--upstream', `http://127.0.0.1:${upstream.port}`],
    });
    const limited = async (extra: Record<string, unknown>) =>
      (await issue(server.url, server.password, { endpoints: [WS_PATH], ...extra })).token!;
    const token = await limited({ rateLimit: '1/s', burst: 4 });
    const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const session = await upstream.session(0);
    t.match(
      await client.call('eth_chainId'),
      { result: '0xa86a' },
      'the upgrade counted one: the first call passes, the second of the burst',
    );
    const batch = JSON.stringify([
      { jsonrpc: '2.0', id: 'a', method: 'eth_chainId' },
      { jsonrpc: '2.0', id: 'b', method: 'eth_chainId' },
    ]);
    let next = client.received.length;
    client.socket.send(batch);
    t.equal(JSON.parse((await client.message(next)).data.toString('utf8')).length, 2, 'a batch of 2 within the burst is forwarded');
    const refused = await client.call('eth_blockNumber');
    // call() resolves on the answer with its own id: the refusal carries it.
    t.same(
      refused.error,
      { code: -32005, message: 'the provided auth token is past its rate limit; retry in 1 s' },
      'past the rate: -32005 for its id',
    );
    next = client.received.length;
    client.socket.send(JSON.stringify([1, 2, 3, 4, 5].map((id) => ({ jsonrpc: '2.0', id, method: 'eth_chainId' }))));
    t.match(
      JSON.parse((await client.message(next)).data.toString('utf8')),
      { error: { code: -32005, message: /smaller than these 5 calls/ }, id: null },
      'a batch over the burst never passes',
    );
    time.now += 1000;
    t.match(await client.call('eth_chainId'), { result: '0xa86a' }, 'refilled: the session went on');
    t.equal(session.received.length, 3, 'nothing refused reached the upstream');
    time.now += 4000;
    const upgrades = await limited({ rateLimit: '1/h', burst: 2 });
    await openClient(t, wsUrl(server.url, WS_PATH), { token: upgrades });
    await openClient(t, wsUrl(server.url, WS_PATH), { token: upgrades });
    const third = await openClient(t, wsUrl(server.url, WS_PATH), { token: upgrades }).then(
      () => null,
      (error: unknown) => error,
    );
    t.ok(third instanceof Refused && third.status === 429, 'a third upgrade of a burst of 2: 429, it opens no session');
    t.match((third as Refused).body, /past its rate limit/);

    const elsewhere = await limited({ allowedClients: ['10.0.0.0/8'] });
    const upgrade = await openClient(t, wsUrl(server.url, WS_PATH), { token: elsewhere }).then(
      () => null,
      (error: unknown) => error,
    );
    t.ok(upgrade instanceof Refused && upgrade.status === 403, 'an upgrade from a client not allowed: 403');
    t.match((upgrade as Refused).body, /may not be used from this client/);
  },
);

t.test('through the proxy, an HTTP batch counts as its calls: within the burst it is forwarded, past it 429, over it never', async (t) => {
  const upstream = await startUpstream(t);
  const server = await serveInProcess(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const token = (await issue(server.url, server.password, { endpoints: ['/ext/bc/C/rpc'], rateLimit: '1/h', burst: 3 })).token!;
  const post = (body: string) =>
    request(server.url, '/ext/bc/C/rpc', {
      method: 'POST',
      headers: [
        ['Authorization', `Bearer ${token}`],
        ['Content-Type', 'application/json'],
      ],
      body,
    });
  const batch = (n: number) => JSON.stringify(Array.from({ length: n }, (_, id) => ({ jsonrpc: '2.0', id, method: 'eth_chainId' })));
  t.equal((await post(batch(2))).status, 200, 'a batch of 2 of a burst of 3');
  const past = await post(batch(2));
  t.equal(past.status, 429, 'one call left: a batch of 2 is past the rate');
  t.match(JSON.parse(past.text), { error: { code: -32005 } });
  t.equal(
    (await post('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}')).status,
    200,
    'the refused batch spent nothing: the last call of the burst passes',
  );
  t.equal((await post('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}')).status, 429, 'then nothing is left');
  const fresh = (await issue(server.url, server.password, { endpoints: ['/ext/bc/C/rpc'], rateLimit: '1/h', burst: 3 })).token!;
  const over = await request(server.url, '/ext/bc/C/rpc', {
    method: 'POST',
    headers: [
      ['Authorization', `Bearer ${fresh}`],
      ['Content-Type', 'application/json'],
    ],
    body: batch(5),
  });
  t.equal(over.status, 429);
  t.equal(over.headers['retry-after'], undefined, 'no wait helps a batch over the burst');
  t.match(JSON.parse(over.text), { error: { code: -32005, message: /smaller than these 5 calls/ } });
  const justOver = await request(server.url, '/ext/bc/C/rpc', {
    method: 'POST',
    headers: [
      ['Authorization', `Bearer ${fresh}`],
      ['Content-Type', 'application/json'],
    ],
    body: batch(4),
  });
  t.equal(justOver.status, 429, 'a batch of burst + 1');
  t.equal(justOver.headers['retry-after'], undefined, 'burst + 1: the over-burst refusal, without Retry-After');
  t.match(JSON.parse(justOver.text), { error: { code: -32005, message: /smaller than these 4 calls/ } });
  t.equal((await post(batch(1))).status, 429, 'the first token is still spent');
  const whole = await request(server.url, '/ext/bc/C/rpc', {
    method: 'POST',
    headers: [
      ['Authorization', `Bearer ${fresh}`],
      ['Content-Type', 'application/json'],
    ],
    body: batch(3),
  });
  t.equal(whole.status, 200, 'the refused batches spent nothing: the whole burst is left');
  t.equal(upstream.seen.length, 3, 'only the batches within the burst reached the node');
});
