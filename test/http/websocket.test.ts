// WebSocket sessions through the gate (--upstream): an upgrade is a request like any
// other (path rules, the token, the same refusals), the client gets its 101 only once
// the upstream accepted, frames go both ways unchanged with their close codes, and a
// session lives only as long as its token, on every thread. Against a real `ws`
// JSON-RPC upstream, and through ethers' WebSocketProvider as a dapp would use it.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { WebSocketProvider } from 'ethers';
import { WebSocket } from 'ws';
import { BAD_PATH_REASON, changePassword, newToken, REASONS, refusalBody, REVOKED, revokeToken, tamperLast } from '../helpers/auth.js';
import { request, type HttpResponse } from '../helpers/http.js';
import { manualClock, serveInProcess } from '../helpers/library.js';
import { runCli, startServer, tempDir } from '../helpers/server.js';
import { closedPort, startRawUpstream } from '../helpers/upstream.js';
import { CHAIN_ID, closesWithin, openClient, startWsUpstream, upgradeRefused, wsUrl } from '../helpers/ws-upstream.js';
import { scrape } from '../helpers/metrics.js';
import { rss } from '../helpers/raw-ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';

/** An upgrade request on a raw socket, byte for byte (the path is not normalised), and the HTTP answer to it. */
function rawUpgrade(base: string, target: string | Buffer, headers: [string, string][] = []): Promise<HttpResponse> {
  return request(base, target, {
    headers: [
      ['Upgrade', 'websocket'],
      ['Connection', 'Upgrade'],
      ['Sec-WebSocket-Key', randomBytes(16).toString('base64')],
      ['Sec-WebSocket-Version', '13'],
      ...headers,
    ],
  });
}

// Each test has its own server and upstream: two at a time, so the ones that wait on a
// timer (the idle timeout's pings) do not hold the whole file up.
t.jobs = 2;

function json(received: { data: Buffer }): any {
  return JSON.parse(received.data.toString('utf8'));
}

t.test("a subscription works through the gate, with the proxy's header rules and the client's subprotocols", async (t) => {
  const upstream = await startWsUpstream(t, { protocol: (offered) => (offered.has('jsonrpc') ? 'jsonrpc' : false) });
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const token = await newToken(server.url, server.password, [WS_PATH, '/ext/metrics']);

  const client = await openClient(t, wsUrl(server.url, `${WS_PATH}?chain=C`), {
    token,
    protocols: ['graphql', 'jsonrpc'],
    headers: { 'X-Forwarded-For': '203.0.113.9', Origin: 'https://dapp.example' },
  });
  t.equal(client.socket.protocol, 'jsonrpc', 'the client gets the subprotocol the upstream chose');
  const seen = await upstream.session(0);
  t.equal(seen.url, `${WS_PATH}?chain=C`, 'the upstream gets the same path and query');
  t.equal(seen.headers.authorization, undefined, 'Authorization never reaches the upstream');
  t.equal(seen.headers['sec-websocket-protocol'], 'graphql,jsonrpc', "the client's subprotocols, in its order");
  t.equal(seen.headers['x-forwarded-for'], '127.0.0.1', "X-Forwarded-For is api-auth's, not the client's");
  t.equal(seen.headers['x-forwarded-proto'], 'http');
  t.equal(seen.headers.origin, 'https://dapp.example', 'Origin is kept, for the node to check');
  t.equal(seen.headers.host, `127.0.0.1:${upstream.port}`, "Host is the upstream's own");
  t.equal(seen.headers['sec-websocket-extensions'], undefined, 'no permessage-deflate');

  t.same(await client.call('eth_chainId'), { jsonrpc: '2.0', id: 1, result: CHAIN_ID }, 'a call is answered');
  const subscribed = await client.call('eth_subscribe', ['newHeads']);
  const subscription = subscribed.result;
  t.type(subscription, 'string', 'eth_subscribe answers with a subscription id');
  const from = client.received.length;
  const blocks = [upstream.newBlock(), upstream.newBlock(), upstream.newBlock()];
  for (let i = 0; i < blocks.length; i++) {
    const note = json(await client.message(from + i));
    t.equal(note.method, 'eth_subscription');
    t.equal(note.params.subscription, subscription);
    t.equal(parseInt(note.params.result.number, 16), blocks[i], `notification ${i + 1} in order`);
  }

  // The default --ws-max-message (16 MiB) lets a large eth_getLogs answer through.
  const large = randomBytes(15 * 1024 * 1024);
  const at = client.received.length;
  client.socket.send(large);
  const echoed = await client.message(at);
  t.ok(echoed.isBinary && echoed.data.equals(large), 'a 15 MiB message goes up and comes back whole');

  // What a URL parser would percent-encode reaches the upstream as sent.
  const raw = await rawUpgrade(server.url, `${WS_PATH}?q='{x}'`, [['Authorization', `Bearer ${token}`]]);
  t.equal(raw.status, 101, 'a raw upgrade is accepted');
  t.equal((await upstream.session(1)).url, `${WS_PATH}?q='{x}'`, 'the query reaches the upstream byte for byte');

  // Raw UTF-8 too (node:http would refuse it, so a raw upstream records the head).
  const heads = await startRawUpstream(t);
  const rawServer = await startServer(t, { cheapChecks: true, args: ['--upstream', heads.url] });
  const rawToken = await newToken(rawServer.url, rawServer.password, [WS_PATH]);
  const utf8 = await rawUpgrade(rawServer.url, Buffer.from(`${WS_PATH}?name=caf\xc3\xa9`, 'latin1'), [
    ['Authorization', `Bearer ${rawToken}`],
  ]);
  t.equal(utf8.status, 502, 'an upstream that answers 200 rather than 101: 502');
  t.equal(
    heads.heads[0].subarray(0, heads.heads[0].indexOf('\r\n')).toString('latin1'),
    `GET ${WS_PATH}?name=caf\xc3\xa9 HTTP/1.1`,
    'raw UTF-8 in the query reaches the upstream byte for byte',
  );

  const metrics = await scrape(server.url, token);
  t.ok(metrics.get('api_auth_websocket_sessions_opened_total')! >= 2, 'sessions opened are counted');
  t.ok(metrics.get('api_auth_websocket_sessions_open')! >= 1, 'open sessions are counted, over every thread');
  t.equal(metrics.get('api_auth_websocket_messages_total{direction="to upstream"}'), 3, 'messages to the upstream are counted');
  t.equal(metrics.get('api_auth_websocket_messages_total{direction="to client"}'), 6, 'messages to the client are counted');
  t.ok(metrics.get('api_auth_websocket_bytes_total{direction="to upstream"}')! >= large.length, 'and their bytes');
});

t.test(
  "text stays text, binary stays binary, and a message over --ws-max-message ends the session: the client's cut, the upstream's 1009",
  async (t) => {
    const upstream = await startWsUpstream(t);
    const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--ws-max-message', '64KiB'] });
    const token = await newToken(server.url, server.password, [WS_PATH, '/ext/metrics']);
    const limit = 64 * 1024;

    const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const seen = await upstream.session(0);
    client.socket.send('héllo, node');
    client.socket.send(Buffer.from([0, 1, 2, 0xff]));
    const text = await seen.message(0);
    const binary = await seen.message(1);
    t.same([text.isBinary, text.data.toString('utf8')], [false, 'héllo, node'], 'text reaches the upstream as text');
    t.same([binary.isBinary, [...binary.data]], [true, [0, 1, 2, 0xff]], 'binary reaches the upstream as binary');
    const back = [await client.message(0), await client.message(1)];
    t.same(
      back.map((m) => m.isBinary),
      [false, true],
      'and come back as they went',
    );

    const atLimit = randomBytes(limit);
    client.socket.send(atLimit);
    t.ok((await client.message(2)).data.equals(atLimit), 'a message of exactly the limit passes both ways');

    client.socket.send(randomBytes(limit + 1));
    const closed = await closesWithin(client, 5000);
    // uWS cuts it before it is gathered (maxPayloadLength is the limit): no close frame.
    t.equal(closed.code, 1006, 'one byte over: the client is cut, with no close frame');
    t.same(await seen.closed, { code: 1001, reason: `the client sent a message over ${limit} bytes` }, 'and the upstream is closed too');
    t.equal(seen.received.length, 3, 'nothing of it reached the upstream');

    const fragmented = await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const seenFragmented = await upstream.session(1);
    fragmented.socket.send(randomBytes(limit / 2 + 1), { fin: false });
    fragmented.socket.send(randomBytes(limit / 2), { fin: true });
    t.equal((await closesWithin(fragmented, 5000)).code, 1006, 'a message over the limit in two frames under it: cut too');
    t.equal((await seenFragmented.closed).code, 1001);
    t.equal(seenFragmented.received.length, 0, 'nothing of it reached the upstream');

    const second = await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const seenSecond = await upstream.session(2);
    seenSecond.socket.send(randomBytes(limit + 1));
    t.same(
      await closesWithin(second, 5000).then(({ code, reason }) => ({ code, reason })),
      { code: 1009, reason: `the upstream node sent a message over ${limit} bytes` },
      'an upstream message over the limit: 1009 to the client',
    );
    t.equal((await seenSecond.closed).code, 1009, 'and 1009 to the upstream that sent it');

    const metrics = await scrape(server.url, token);
    t.equal(metrics.get('api_auth_websocket_sessions_closed_total{reason="too big"}'), 3, 'all three are counted as too big');
  },
);

t.test('close codes and reasons are relayed both ways', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const token = await newToken(server.url, server.password, [WS_PATH]);

  const first = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  (await upstream.session(0)).socket.close(4001, 'the node says bye');
  const fromUpstream = await closesWithin(first, 5000);
  t.same([fromUpstream.code, fromUpstream.reason], [4001, 'the node says bye'], "the upstream's code and reason reach the client");

  const second = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  second.socket.close(4002, 'the dapp says bye');
  t.same(
    await (await upstream.session(1)).closed,
    { code: 4002, reason: 'the dapp says bye' },
    "the client's code and reason reach the upstream",
  );

  const third = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  third.socket.close();
  t.equal((await (await upstream.session(2)).closed).code, 1005, 'a close without a code stays without one');

  const fourth = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  (await upstream.session(3)).socket.terminate();
  const cut = await closesWithin(fourth, 5000);
  t.same([cut.code, cut.reason], [1011, 'the upstream node closed the connection'], 'an upstream that drops the connection: 1011');
});

t.test('every refusal comes before anything reaches the upstream, with the status and body of HTTP', async (t) => {
  const upstream = await startWsUpstream(t, { refuse: { '/ext/bc/C/refusing': 403 } });
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--api-auth-public-endpoints', '/ext/bc/C/public'],
  });
  const token = await newToken(server.url, server.password, [WS_PATH, '/ext/bc/C/refusing', '/ext/metrics']);
  const other = await newToken(server.url, server.password, ['/ext/bc/X/ws']);
  const revoked = await newToken(server.url, server.password, [WS_PATH]);
  t.same(await revokeToken(server.url, server.password, revoked), REVOKED);

  const cases: [string, Parameters<typeof openClient>[2], string][] = [
    ['no token', {}, REASONS.noToken],
    ['not Bearer', { headers: { Authorization: `Basic ${token}` } }, REASONS.badHeader],
    ['a forged token', { token: tamperLast(token) }, REASONS.badSignature],
    ['a token for another path', { token: other }, REASONS.notGranted],
    ['a revoked token', { token: revoked }, REASONS.revoked],
  ];
  for (const [label, options, reason] of cases) {
    const refused = await upgradeRefused(t, wsUrl(server.url, WS_PATH), options);
    t.equal(refused.status, 401, `${label}: 401`);
    t.equal(refused.headers['www-authenticate'], 'Bearer', `${label}: WWW-Authenticate`);
    t.equal(refused.body, refusalBody(reason), `${label}: the gate's body`);
  }
  const badPath = await rawUpgrade(server.url, '/ext/bc/C/%2e%2e/ws', [['Authorization', `Bearer ${token}`]]);
  t.equal(badPath.status, 400, 'a path some server would read as another: 400, whatever the token');
  t.equal(badPath.text, refusalBody(BAD_PATH_REASON));
  t.equal(upstream.sessions.length, 0, 'nothing refused reached the upstream');

  const open = await openClient(t, wsUrl(server.url, '/ext/bc/C/public'));
  t.equal((await upstream.session(0)).url, '/ext/bc/C/public', 'a public path needs no token');
  open.socket.close();
  const spare = await newToken(server.url, server.password, [WS_PATH]);
  const publicWithToken = await openClient(t, wsUrl(server.url, '/ext/bc/C/public'), { token: spare });
  t.same(await revokeToken(server.url, server.password, spare), REVOKED);
  await new Promise((resolve) => setTimeout(resolve, 600));
  t.equal(publicWithToken.socket.readyState, WebSocket.OPEN, 'a public session is never re-checked, whatever token it carried');
  publicWithToken.socket.close();

  const refusedUpstream = await upgradeRefused(t, wsUrl(server.url, '/ext/bc/C/refusing'), { token });
  t.equal(refusedUpstream.status, 403, 'an upstream that refuses the upgrade: its status');
  t.same(JSON.parse(refusedUpstream.body).error, { code: -32044, message: 'the upstream node refused the WebSocket upgrade (HTTP 403)' });

  // An upgrade to api-auth's own routes is a request like any other, as before.
  const metricsUpgrade = await rawUpgrade(server.url, '/ext/metrics', [['Authorization', `Bearer ${token}`]]);
  t.equal(metricsUpgrade.status, 200, 'an upgrade to the metrics path gets the metrics');
  const metrics = await scrape(server.url, token);
  t.equal(metrics.get('api_auth_websocket_sessions_refused_total{reason="token"}'), 5, 'refusals by the gate are counted');
  t.equal(metrics.get('api_auth_websocket_sessions_refused_total{reason="path"}'), 1);
  t.equal(metrics.get('api_auth_websocket_sessions_refused_total{reason="upstream status"}'), 1);
});

t.test('past --ws-max-sessions an upgrade gets 503 before anything reaches the upstream', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--ws-max-sessions', '2', '--ws-max-sessions-per-token', '2', '--ws-max-sessions-per-client', '2'],
  });
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const first = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  await openClient(t, wsUrl(server.url, WS_PATH), { token });
  const refused = await upgradeRefused(t, wsUrl(server.url, WS_PATH), { token });
  t.equal(refused.status, 503, 'the third of two: 503');
  t.equal(refused.headers['retry-after'], '1');
  t.same(JSON.parse(refused.body).error, { code: -32046, message: 'too many WebSocket sessions are open (at most 2); retry later' });
  t.equal(upstream.sessions.length, 2, 'the upstream never saw it');
  first.socket.close();
  await first.closed;
  await (await upstream.session(0)).closed;
  // The count is the process's: the next session may land on either thread.
  const again = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  t.equal(again.socket.readyState, WebSocket.OPEN, 'a closed session frees its place');
});

// One that does not answer in time: websocket-timeout.test.ts, on timers the test moves.
t.test('an upstream that cannot be reached gives 502', async (t) => {
  const unreachable = await startServer(t, { cheapChecks: true, args: ['--upstream', `http://127.0.0.1:${await closedPort()}`] });
  const token = await newToken(unreachable.url, unreachable.password, [WS_PATH]);
  const refused = await upgradeRefused(t, wsUrl(unreachable.url, WS_PATH), { token });
  t.equal(refused.status, 502, 'nothing listens: 502');
  t.same(JSON.parse(refused.body).error, { code: -32044, message: 'the upstream node refused the connection' });

  const unreachableToken = await newToken(unreachable.url, unreachable.password, ['/ext/metrics']);
  const metrics = await scrape(unreachable.url, unreachableToken);
  t.equal(metrics.get('api_auth_websocket_sessions_refused_total{reason="upstream unreachable"}'), 1, 'counted as a refusal');
  t.equal(metrics.get('api_auth_upstream_errors_total{kind="refused"}'), 1, 'and as an upstream error, as the proxy counts them');
});

t.test('--api-auth-query-token: the token in access_token, for browsers; never forwarded, never logged', async (t) => {
  const upstream = await startWsUpstream(t);
  const off = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const offToken = await newToken(off.url, off.password, [WS_PATH]);
  const ignored = await upgradeRefused(t, wsUrl(off.url, `${WS_PATH}?access_token=${offToken}`));
  t.equal(ignored.status, 401, 'without the flag, a query token is not honoured');
  t.equal(ignored.body, refusalBody(REASONS.noToken));
  await openClient(t, wsUrl(off.url, `${WS_PATH}?access_token=abc&x=1`), { token: offToken });
  t.equal((await upstream.session(0)).url, `${WS_PATH}?access_token=abc&x=1`, 'and it is forwarded as any other parameter');

  const on = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--api-auth-query-token', '--log-level', 'debug'],
  });
  const token = await newToken(on.url, on.password, [WS_PATH, '/ext/metrics']);
  const client = await openClient(t, wsUrl(on.url, `${WS_PATH}?x=1&access_token=${token}&y=2`));
  t.equal((await upstream.session(1)).url, `${WS_PATH}?x=1&y=2`, 'with the flag, the token opens the session and is removed');
  await openClient(t, wsUrl(on.url, `${WS_PATH}?access_token=${token}`));
  t.equal((await upstream.session(2)).url, WS_PATH, 'a query of only the token leaves none');

  const forged = await upgradeRefused(t, wsUrl(on.url, `${WS_PATH}?access_token=${tamperLast(token)}`));
  t.equal(forged.body, refusalBody(REASONS.badSignature), "a query token is checked as a header's would be");
  const twice = await upgradeRefused(t, wsUrl(on.url, `${WS_PATH}?access_token=${token}&access_token=${token}`));
  t.equal(twice.body, refusalBody(REASONS.malformed), 'two query tokens name no one token');
  const http = await request(on.url, `${WS_PATH}?access_token=${token}`);
  t.equal(http.status, 401, 'a request that is not an upgrade takes its token from the header only');

  t.same(await revokeToken(on.url, on.password, token), REVOKED);
  const closed = await closesWithin(client, 1000);
  t.same([closed.code, closed.reason], [1008, REASONS.revoked], 'a session opened with a query token ends with it');

  const metrics = await request(on.url, '/ext/metrics', {
    headers: [['Authorization', `Bearer ${await newToken(on.url, on.password, ['/ext/metrics'])}`]],
  });
  t.notOk(metrics.text.includes(token), 'no metric holds the token');
  t.notOk(on.stdout().includes(token) || on.stdout().includes('access_token'), 'no log line holds the token or its parameter');
  t.notOk(on.stderr().includes(token));
});

t.test("a session ends within a second of its token, with 1008 and the gate's reason, on every thread", async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--http-threads', '2'] });
  const first = await newToken(server.url, server.password, [WS_PATH, '/ext/metrics']);
  const second = await newToken(server.url, server.password, [WS_PATH]);
  const before = await scrape(server.url, first);
  // Consecutive connections go to the threads in turn: each token has a session on each thread.
  const clients = [
    await openClient(t, wsUrl(server.url, WS_PATH), { token: first }),
    await openClient(t, wsUrl(server.url, WS_PATH), { token: first }),
    await openClient(t, wsUrl(server.url, WS_PATH), { token: second }),
    await openClient(t, wsUrl(server.url, WS_PATH), { token: second }),
  ];
  const after = await scrape(server.url, first);
  for (const thread of ['1', '2']) {
    const series = `api_auth_http_requests_total{thread="${thread}"}`;
    t.ok(after.get(series)! - before.get(series)! >= 2, `thread ${thread} took sessions`);
  }

  t.same(await revokeToken(server.url, server.password, first), REVOKED);
  for (const client of clients.slice(0, 2)) {
    const closed = await closesWithin(client, 1000);
    t.same([closed.code, closed.reason], [1008, REASONS.revoked], "revoked: 1008 with the gate's reason, within a second");
  }
  for (const n of [0, 1]) t.equal((await (await upstream.session(n)).closed).code, 1001, 'its upstream session is closed too');
  t.same((await clients[2].call('eth_chainId')).result, CHAIN_ID, "the other token's sessions go on");
  const audit = await server.waitForLog((l) => l.msg === 'audit' && l.method === 'websocket');
  t.match(
    audit,
    { level: 'info', outcome: 'revoked', client: '127.0.0.1', path: WS_PATH },
    "one audit line per session the token's end closed",
  );
  t.type(audit.serial, 'number', 'naming the token by its serial');

  t.same(await changePassword(server.url, server.password, `${server.password}-new`), { success: true });
  for (const client of clients.slice(2)) {
    const closed = await closesWithin(client, 1000);
    t.same([closed.code, closed.reason], [1008, REASONS.earlierGeneration], 'password changed: 1008, within a second');
  }
  // Each thread's lines reach the log through the main thread: wait for the fourth.
  const audits = (): number => server.logs.filter((l) => l.msg === 'audit' && l.method === 'websocket').length;
  await server.waitForLog(() => audits() >= 4);
  t.equal(audits(), 4, 'four audit lines');
  t.notOk(server.stdout().includes(first) || server.stdout().includes(second), 'no log line holds a token');
});

t.test("a session ends when its token expires, by the service's clock", async (t) => {
  const upstream = await startWsUpstream(t);
  const time = manualClock();
  const server = await serveInProcess(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--api-auth-token-lifetime', '60s'],
    clock: time.clock,
  });
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  time.now += 59_000;
  t.same((await client.call('eth_chainId')).result, CHAIN_ID, 'a second before expiry the session is open');
  await new Promise((resolve) => setTimeout(resolve, 600));
  t.equal(client.socket.readyState, WebSocket.OPEN, 'and stays open');
  time.now += 1000;
  const closed = await closesWithin(client, 1000);
  t.same([closed.code, closed.reason], [1008, REASONS.expired], "expired: 1008 with the gate's reason, within a second");
  t.equal((await (await upstream.session(0)).closed).code, 1001, 'the upstream session is closed too');
});

t.test(
  "a client that stops answering is gone after --ws-idle-timeout (uWS's timer); a quiet session that answers pings is not",
  async (t) => {
    const upstream = await startWsUpstream(t);
    const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--ws-idle-timeout', '8s'] });
    const token = await newToken(server.url, server.password, [WS_PATH]);

    const quiet = await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const silentClient = await openClient(t, wsUrl(server.url, WS_PATH), { token, autoPong: false });
    const start = performance.now();

    const clientGone = await upstream.session(1).then((s) => s.closed);
    t.same(clientGone, { code: 1001, reason: 'the client stopped answering' }, 'a client that answers no ping: its upstream gets 1001');
    await silentClient.closed;
    // uWS's idle timer is its own, in real time: past the timeout, by its clock.
    const waited = performance.now() - start;
    if (waited < 12_000) await new Promise((resolve) => setTimeout(resolve, 12_000 - waited));
    t.equal(quiet.socket.readyState, WebSocket.OPEN, 'a session where nothing is said but pings are answered stays open past the timeout');
    t.same((await quiet.call('eth_chainId')).result, CHAIN_ID);
  },
);

t.test(
  'an upstream that stops answering is gone after --ws-idle-timeout by the clock: pinged halfway, ended at the timeout, not before',
  async (t) => {
    const deaf = await startWsUpstream(t, { autoPong: false });
    const time = manualClock();
    // The longest timeout: real time reaches neither its half nor its end while this runs.
    const server = await serveInProcess(t, {
      cheapChecks: true,
      args: ['--upstream', deaf.url, '--ws-idle-timeout', '960s'],
      clock: time.clock,
    });
    const token = await newToken(server.url, server.password, [WS_PATH]);
    const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const seen = await deaf.session(0);
    const pinged = new Promise<void>((resolve) => seen.socket.once('ping', () => resolve()));
    let closedAt: number | undefined;
    void client.closed.then(() => {
      closedAt = time.now;
    });
    // A sweep past half the timeout pings; the one that pings does not end the session
    // (one or the other), so the ping is that sweep's word that a millisecond short of
    // the timeout the session stood.
    time.now += 959_999;
    await pinged;
    t.equal(closedAt, undefined, 'a millisecond short of the timeout: pinged, still open');
    time.now += 1;
    const closed = await client.closed;
    t.same(closed, { code: 1001, reason: 'the upstream node stopped answering' }, 'an upstream that answers no ping: its client gets 1001');
    t.equal(closedAt, time.now, 'at the timeout by the clock');
    t.equal((await seen.closed).code, 1006, 'the upstream is cut');
  },
);

t.test('a client that stops reading pauses the upstream: memory stays bounded, nothing is lost', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--http-threads', '1'] });
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  const seen = await upstream.session(0);
  let receivedBytes = 0;
  client.socket.on('message', (data: Buffer) => {
    receivedBytes += data.length;
  });
  const baseline = rss(server.child.pid!);
  client.socket.pause();

  // The upstream floods while its own buffer has room: without backpressure it would
  // keep going, its messages piling up in api-auth.
  const chunk = randomBytes(64 * 1024);
  const ROOM = 4 * 1024 * 1024;
  const CAP = 256 * 1024 * 1024;
  let sent = 0;
  let lastProgress = performance.now();
  let lastSent = 0;
  while (sent < CAP && performance.now() - lastProgress < 1500) {
    while (seen.socket.bufferedAmount < ROOM && sent < CAP) {
      seen.socket.send(chunk);
      sent += chunk.length;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
    if (sent > lastSent) {
      lastSent = sent;
      lastProgress = performance.now();
    }
  }
  t.ok(sent < 96 * 1024 * 1024, `the upstream was held back after ${Math.round(sent / 1048576)} MiB`);
  t.ok(seen.socket.bufferedAmount >= ROOM - chunk.length, 'the upstream sees the backpressure: its own buffer stays full');
  const grown = rss(server.child.pid!) - baseline;
  t.ok(grown < 48 * 1024 * 1024, `api-auth's memory stays bounded (grew ${Math.round(grown / 1048576)} MiB)`);

  client.socket.resume();
  const deadline = performance.now() + 30_000;
  while (receivedBytes < sent && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  t.equal(receivedBytes, sent, 'once the client reads again, every byte arrives');
});

t.test('an upstream that stops reading while the client floods: the session ends with 1013, memory stays bounded', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--http-threads', '1', '--ws-max-message', '1MiB'],
  });
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  const seen = await upstream.session(0);
  const baseline = rss(server.child.pid!);
  // uWebSockets.js cannot stop reading a client: what waits for a slow upstream is bounded instead.
  seen.socket.pause();

  const chunk = randomBytes(64 * 1024);
  const CAP = 256 * 1024 * 1024;
  let sent = 0;
  let maxGrowth = 0;
  // 1 MiB a turn, so that the close is seen as soon as it comes (api-auth reads on while it closes).
  while (client.socket.readyState === WebSocket.OPEN && sent < CAP) {
    for (let i = 0; i < 16 && client.socket.bufferedAmount < 1024 * 1024; i++) {
      client.socket.send(chunk);
      sent += chunk.length;
    }
    maxGrowth = Math.max(maxGrowth, rss(server.child.pid!) - baseline);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const closed = await closesWithin(client, 5000);
  t.same(
    [closed.code, closed.reason],
    [1013, 'the upstream node is not keeping up; try again later'],
    'the client gets 1013, try again later',
  );
  t.ok(sent < 96 * 1024 * 1024, `it ended after ${Math.round(sent / 1048576)} MiB, not after all ${CAP / 1048576} MiB`);
  t.ok(maxGrowth < 48 * 1024 * 1024, `api-auth's memory stayed bounded (grew ${Math.round(maxGrowth / 1048576)} MiB at most)`);
  seen.socket.resume();
  t.equal((await seen.closed).code, 1006, 'the upstream that did not read is cut');
});

t.test('SIGTERM ends the sessions with 1001 and exits 0 without waiting for them', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const url = wsUrl(server.url, WS_PATH);
  const clients = [await openClient(t, url, { token }), await openClient(t, url, { token })];
  // The clients read nothing until api-auth has exited: they never answer its close, so
  // an exit that waited for them would never come (tap's timeout would fail the test).
  for (const client of clients) client.socket.pause();
  const exit = await server.stop('SIGTERM');
  t.same(exit, { code: 0, signal: null }, 'exit code 0, with no client having answered the close: the stop does not wait for the sessions');
  for (const client of clients) client.socket.resume();
  for (const client of clients) {
    const closed = await client.closed;
    t.same([closed.code, closed.reason], [1001, 'api-auth is stopping'], 'the client gets 1001');
  }
  for (const n of [0, 1]) t.equal((await (await upstream.session(n)).closed).code, 1001, 'the upstream gets 1001');
});

t.test("ethers' WebSocketProvider subscribes to new blocks through the gate", async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--api-auth-query-token'] });
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const ways: [string, () => WebSocket][] = [
    ['an Authorization header', () => new WebSocket(wsUrl(server.url, WS_PATH), { headers: { Authorization: `Bearer ${token}` } })],
    ['the query token', () => new WebSocket(wsUrl(server.url, `${WS_PATH}?access_token=${token}`))],
  ];
  for (const [n, [way, socket]] of ways.entries()) {
    const provider = new WebSocketProvider(socket as never);
    t.teardown(() => provider.destroy());
    t.equal((await provider.getNetwork()).chainId, BigInt(CHAIN_ID), `${way}: the chain id`);
    const block = new Promise<number>((resolve) => provider.once('block', resolve));
    const session = await upstream.session(n);
    // The subscription is made once the listener is: wait for it before the block comes.
    for (let i = 0; ; i++) {
      if (json(await session.message(i)).method === 'eth_subscribe') break;
    }
    const number = upstream.newBlock();
    t.equal(await block, number, `${way}: the new block's number arrives`);
    await provider.destroy();
  }
});

t.test('bad WebSocket flags stop the start with one line', async (t) => {
  const cases: [string[], RegExp][] = [
    [['--ws-max-message', '16MB'], /^api-auth: --ws-max-message must be a size from 1 byte to 1024MiB/],
    [['--ws-idle-timeout', '5s'], /^api-auth: --ws-idle-timeout must be a duration in whole seconds from 8s to 960s/],
    [['--ws-max-sessions', '0'], /^api-auth: --ws-max-sessions must be a whole number from 1 to 1000000/],
    [['--ws-max-sessions-per-token', '0'], /^api-auth: --ws-max-sessions-per-token must be a whole number from 1 to 1000000/],
    [
      ['--upstream', 'http://127.0.0.1:9', '--ws-max-sessions', '8', '--ws-max-sessions-per-client', '9'],
      /^api-auth: --ws-max-sessions-per-client is 9, over --ws-max-sessions \(8\), which bounds every share: give at most 8/,
    ],
    [['--api-auth-query-token=enabled'], /^api-auth: --api-auth-query-token takes no value, or =true or =false/],
  ];
  for (const [args, message] of cases) {
    const result = await runCli(t, ['--http-port', '0', ...args]);
    t.equal(result.code, 2, `${args.join(' ')}: exit code 2`);
    t.match(result.stderr, message, `${args.join(' ')}: the line names the flag`);
    t.equal(result.stderr.trim().split('\n').length, 1, 'one line');
  }
  // Without --upstream these flags are refused (test/unit/option-context.test.ts).
  const pointless = await runCli(t, [
    '--http-port',
    '0',
    '--data-dir',
    `${tempDir(t)}/data`,
    '--upstream',
    'http://127.0.0.1:9',
    '--api-auth-query-token',
  ]);
  t.ok(
    pointless.logs.some(
      (l) => l.level === 'warn' && l.msg === '--api-auth-query-token means nothing without --api-auth-required: ' + 'no token is asked for',
    ),
    'a query token flag without tokens is warned of',
  );
});

t.test(
  "a burst of messages from the client reaches the upstream whole and in order, each read out of uWS's buffer before the next",
  async (t) => {
    const upstream = await startWsUpstream(t);
    const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
    const token = await newToken(server.url, server.password, [WS_PATH]);
    const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const seen = await upstream.session(0);
    // Written in one go, they arrive together: uWS hands them over one by one from the same
    // receive buffer, which its next read overwrites.
    const sent = Array.from({ length: 300 }, (_, i) => randomBytes(1 + ((i * 7919) % 30_000)));
    for (const message of sent) client.socket.send(message);
    const received = await Promise.all(sent.map((_, i) => seen.message(i)));
    const wrong = received.flatMap((m, i) => (m.isBinary && m.data.equals(sent[i]) ? [] : [i]));
    t.same(wrong, [], 'every message arrives unchanged, in the order sent');
  },
);
