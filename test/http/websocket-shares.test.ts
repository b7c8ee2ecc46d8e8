// No one token and no one client address can take every WebSocket session. Before
// shares, with --ws-max-sessions 5, a `1/h` token opened all 5 and every other token got
// 503. Each has a share of the sessions (--ws-max-sessions-per-token and -per-client, a
// quarter of --ws-max-sessions by default), counted across every HTTP thread in the
// process's one ledger; past it, its upgrade gets the global cap's 503 with its own message.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jsonrpc } from '../helpers/http.js';
import { authUrl, newToken } from '../helpers/auth.js';
import { startServer, tempDir } from '../helpers/server.js';
import { openClient, startWsUpstream, upgradeRefused, wsUrl } from '../helpers/ws-upstream.js';
import type { ClientOptions } from '../helpers/ws-upstream.js';
import { scrape } from '../helpers/metrics.js';

const WS_PATH = '/ext/bc/C/ws';

t.test(
  "the issue's case: with --ws-max-sessions 5, a 1/h token holds 2 (a quarter, rounded up) and another token still gets in",
  async (t) => {
    const upstream = await startWsUpstream(t);
    const server = await startServer(t, {
      cheapChecks: true,
      args: ['--upstream', upstream.url, '--ws-max-sessions', '5', '--http-threads', '2'],
    });
    const issued = await jsonrpc(authUrl(server.url), 'auth.newToken', {
      password: server.password,
      endpoints: [WS_PATH],
      rateLimit: '1/h',
      burst: 5,
    });
    const slow = issued.result!.token as string;
    await openClient(t, wsUrl(server.url, WS_PATH), { token: slow });
    await openClient(t, wsUrl(server.url, WS_PATH), { token: slow });
    const third = await upgradeRefused(t, wsUrl(server.url, WS_PATH), { token: slow });
    t.equal(third.status, 503, "the token's third session: 503");
    t.equal(third.headers['retry-after'], '1', 'with Retry-After, as the global cap');
    t.same(JSON.parse(third.body).error, {
      code: -32046,
      message: 'too many WebSocket sessions are open with this token (at most 2); close one, or retry later',
    });
    // From another address: this machine's 127.0.0.1 holds 2 already, its own share.
    const other = await newToken(server.url, server.password, [WS_PATH]);
    const opened = await openClient(t, wsUrl(server.url, WS_PATH), { token: other, localAddress: '127.0.0.2' });
    t.equal(opened.socket.readyState, opened.socket.OPEN, 'another token opens a session');
    t.equal(upstream.sessions.length, 3, 'the refused upgrade never reached the upstream');
  },
);

t.test("a token's share holds across threads, and a closed session gives its place back", async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--ws-max-sessions', '12', '--ws-max-sessions-per-client', '12', '--http-threads', '2'],
  });
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const held = [];
  for (let i = 0; i < 3; i++) held.push(await openClient(t, wsUrl(server.url, WS_PATH), { token }));
  // Each thread's own count would let a thread that holds fewer than 3 take one more.
  for (let i = 0; i < 6; i++) {
    const refused = await upgradeRefused(t, wsUrl(server.url, WS_PATH), { token });
    t.equal(refused.status, 503, `upgrade ${i + 4} of a token whose share is 3: 503`);
    t.match(JSON.parse(refused.body).error.message, /with this token \(at most 3\)/);
  }
  const other = await newToken(server.url, server.password, [WS_PATH]);
  for (let i = 0; i < 3; i++) await openClient(t, wsUrl(server.url, WS_PATH), { token: other });
  held[0].socket.close();
  await held[0].closed;
  await (await upstream.session(0)).closed;
  const again = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  t.equal(again.socket.readyState, again.socket.OPEN, 'its session closed, the token opens one again');
  const metrics = await scrape(server.url, await newToken(server.url, server.password, ['/ext/metrics']));
  t.equal(metrics.get('api_auth_websocket_sessions_refused_total{reason="token limit"}'), 6, 'the refusals are counted by their bound');
});

t.test("a client address's share, whatever the token: an IPv4 address, an IPv6 address's /64, as a trusted proxy names it", async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: [
      '--upstream',
      upstream.url,
      '--ws-max-sessions',
      '12',
      '--ws-max-sessions-per-token',
      '12',
      '--ws-max-sessions-per-client',
      '2',
      '--trusted-proxies',
      '127.0.0.1',
      '--http-threads',
      '2',
    ],
  });
  const tokens = await Promise.all([0, 1, 2].map(() => newToken(server.url, server.password, [WS_PATH])));
  await openClient(t, wsUrl(server.url, WS_PATH), { token: tokens[0], localAddress: '127.0.0.2' });
  await openClient(t, wsUrl(server.url, WS_PATH), { token: tokens[1], localAddress: '127.0.0.2' });
  const third = await upgradeRefused(t, wsUrl(server.url, WS_PATH), { token: tokens[2], localAddress: '127.0.0.2' });
  t.equal(third.status, 503, "the address's third session, with a third token: 503");
  t.equal(third.headers['retry-after'], '1');
  t.same(JSON.parse(third.body).error, {
    code: -32046,
    message: 'too many WebSocket sessions are open from this client address (at most 2); close one, or retry later',
  });
  await openClient(t, wsUrl(server.url, WS_PATH), { token: tokens[2], localAddress: '127.0.0.3' });

  // Through the trusted proxy (127.0.0.1): the client it names, an IPv6 /64 counted as one.
  const via = (address: string): ClientOptions => ({ token: tokens[0], headers: { 'X-Forwarded-For': address } });
  await openClient(t, wsUrl(server.url, WS_PATH), via('2001:db8:0:7::1'));
  await openClient(t, wsUrl(server.url, WS_PATH), via('2001:db8:0:7::2'));
  const stepped = await upgradeRefused(t, wsUrl(server.url, WS_PATH), via('2001:db8:0:7:ffff::3'));
  t.equal(stepped.status, 503, 'a third address of the same /64: 503');
  t.match(JSON.parse(stepped.body).error.message, /from this client address \(at most 2\)/);
  await openClient(t, wsUrl(server.url, WS_PATH), via('2001:db8:0:8::1'));
  await openClient(t, wsUrl(server.url, WS_PATH), via('198.51.100.7'));
  t.equal(upstream.sessions.length, 7, 'the refused upgrades never reached the upstream');
});

t.test(
  'upgrade and close, again and again: each upgrade of a rate-limited token spends one call, so a 1/h token of burst 3 gets 3',
  async (t) => {
    const upstream = await startWsUpstream(t);
    const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
    const issued = await jsonrpc(authUrl(server.url), 'auth.newToken', {
      password: server.password,
      endpoints: [WS_PATH],
      rateLimit: '1/h',
      burst: 3,
    });
    const token = issued.result!.token as string;
    for (let i = 0; i < 3; i++) {
      const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
      client.socket.close();
      await client.closed;
    }
    const fourth = await upgradeRefused(t, wsUrl(server.url, WS_PATH), { token });
    t.equal(fourth.status, 429, 'the fourth upgrade, with no session open: 429');
    t.match(JSON.parse(fourth.body).error, { code: -32005, message: /past its rate limit/ });
    t.equal(upstream.sessions.length, 3, 'the upstream saw 3 handshakes, not 4');
  },
);

t.test('the shares come from the environment and a config file as from the flags', async (t) => {
  const upstream = await startWsUpstream(t);
  const dir = tempDir(t);
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ 'ws-max-sessions-per-client': 1 }), { mode: 0o600 });
  const fromEnv = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url],
    node: { env: { API_AUTH_WS_MAX_SESSIONS_PER_TOKEN: '1' } },
  });
  const fromFile = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--config-file', config] });
  for (const [server, message] of [
    [fromEnv, /with this token \(at most 1\)/],
    [fromFile, /from this client address \(at most 1\)/],
  ] as const) {
    const token = await newToken(server.url, server.password, [WS_PATH]);
    await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const second = await upgradeRefused(t, wsUrl(server.url, WS_PATH), { token });
    t.equal(second.status, 503);
    t.match(JSON.parse(second.body).error.message, message);
  }
});
