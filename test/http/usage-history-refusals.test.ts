// The usage history's refusals that are no HTTP answer of their own, or that a thread held
// when it ended: a WebSocket message refused inside its session (outside the token's
// method scope, past its rate) is counted by its reason; and with several HTTP threads, a
// clean stop keeps what they refused since the last sample, as the data folder's file
// shows once the node is back.
import t from 'tap';
import { authUrl, call } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { manualClock, serveInProcess } from '../helpers/library.js';
import { restartServer, startServer } from '../helpers/server.js';
import { openClient, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';
const SCOPE_CODE = -32047;
const RATE_CODE = -32005;

async function issue(base: string, password: string, extra: Record<string, unknown>): Promise<string> {
  const answer = await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints: [WS_PATH], ...extra });
  if (typeof answer.result?.token !== 'string') throw new Error(`auth.newToken gave no token: ${JSON.stringify(answer)}`);
  return answer.result.token;
}

/** The node's refusals of the last `hours` hours, summed by reason (those above 0). */
async function refusals(base: string, password: string, hours: number): Promise<Record<string, number>> {
  const answer = await jsonrpc(authUrl(base), 'auth.usageHistory', { password, hours });
  if (answer.result === undefined) throw new Error(`auth.usageHistory failed: ${JSON.stringify(answer.error)}`);
  const sum: Record<string, number> = {};
  for (const hour of answer.result.hours as { refusals: Record<string, number> }[]) {
    for (const [reason, n] of Object.entries(hour.refusals)) if (n > 0) sum[reason] = (sum[reason] ?? 0) + n;
  }
  return sum;
}

t.test('a message refused inside a WebSocket session is counted by its reason', async (t) => {
  const upstream = await startWsUpstream(t);
  const time = manualClock();
  const server = await serveInProcess(t, {
    cheapChecks: true,
    clock: time.clock,
    args: ['--upstream', `http://127.0.0.1:${upstream.port}`],
  });
  const scoped = await issue(server.url, server.password, { methods: ['eth_chainId'] });
  const limited = await issue(server.url, server.password, { rateLimit: '1/h', burst: 2 });
  const a = await openClient(t, wsUrl(server.url, WS_PATH), { token: scoped });
  t.match(await a.call('eth_chainId'), { result: '0xa86a' }, 'an allowed call goes through');
  for (let i = 0; i < 2; i++) {
    t.match(await a.call('eth_sendRawTransaction', ['0x00']), { error: { code: SCOPE_CODE } }, 'a method outside the scope is refused');
  }
  // The upgrade is one call of the rate; the first message the second.
  const b = await openClient(t, wsUrl(server.url, WS_PATH), { token: limited });
  t.match(await b.call('eth_chainId'), { result: '0xa86a' }, 'within the rate');
  t.match(await b.call('eth_chainId'), { error: { code: RATE_CODE } }, 'past the rate, refused');
  t.same(
    await refusals(server.url, server.password, 1),
    { 'method not allowed': 2, rate: 1 },
    "the hour's refusals hold the session's messages",
  );
});

t.test('with several HTTP threads, a clean stop keeps what they refused since the last sample', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--http-threads', '2', '--upstream', `http://127.0.0.1:${upstream.port}`],
  });
  const scoped = await issue(server.url, server.password, { methods: ['eth_chainId'] });
  // Enough connections that both threads answer some: the acceptor spreads them.
  for (let i = 0; i < 6; i++) t.equal((await call(server.url, WS_PATH)).status, 401, 'no token');
  const client = await openClient(t, wsUrl(server.url, WS_PATH), { token: scoped });
  for (let i = 0; i < 3; i++) t.match(await client.call('debug_traceCall'), { error: { code: SCOPE_CODE } }, 'refused in the session');
  client.socket.close();
  await client.closed;
  // No auth.usageHistory before the stop: its sample would take the counts while the threads run.
  t.equal((await server.stop('SIGTERM')).code, 0, 'a clean stop');
  const again = await restartServer(t, server);
  t.same(
    await refusals(again.url, again.password, 2),
    { 'no token': 6, 'method not allowed': 3 },
    "the stop's last save holds every refusal, the threads' and their sessions'",
  );
});
