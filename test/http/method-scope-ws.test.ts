// WebSocket sessions opened with a token that has a method scope: each client
// message is checked as an HTTP body is; a refused one never reaches the upstream, the
// client gets a JSON-RPC error for its id, and the session goes on, past the token
// re-checks, on every thread.
import t from 'tap';
import { authUrl, newToken } from '../helpers/auth.js';
import { jsonrpc, request } from '../helpers/http.js';
import { serveInProcess } from '../helpers/library.js';
import { sleep, startServer } from '../helpers/server.js';
import { openClient, startWsUpstream, wsUrl, type Client } from '../helpers/ws-upstream.js';

t.jobs = 2;

const WS_PATH = '/ext/bc/C/ws';
const SCOPE_CODE = -32047;
/** host/http/websocket.ts RECHECK_MS: how often a thread re-checks its sessions' tokens. */
const RECHECK_MS = 250;

async function scopedToken(base: string, password: string, methods: string[]): Promise<string> {
  const answer = await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints: [WS_PATH, '/ext/metrics'], methods });
  if (typeof answer.result?.token !== 'string') throw new Error(`auth.newToken gave no token: ${JSON.stringify(answer)}`);
  return answer.result.token;
}

/** Sends `text` and resolves with the next message the client gets. */
async function exchangeText(client: Client, text: string): Promise<any> {
  const next = client.received.length;
  client.socket.send(text);
  return JSON.parse((await client.message(next)).data.toString('utf8'));
}

t.test('a scoped session forwards allowed calls, answers refused ones itself, and goes on', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await serveInProcess(t, { cheapChecks: true, args: ['--upstream', `http://127.0.0.1:${upstream.port}`] });
  const token = await scopedToken(server.url, server.password, ['eth_chainId', 'eth_block*']);
  const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  const session = await upstream.session(0);

  t.match(await client.call('eth_chainId'), { result: '0xa86a' }, 'an allowed call is answered by the upstream');
  const refused = await client.call('eth_sendRawTransaction', ['0x00']);
  t.same(
    refused.error,
    { code: SCOPE_CODE, message: 'the provided auth token does not allow method "eth_sendRawTransaction"' },
    'a refused call gets the error for its id',
  );
  t.match(await client.call('eth_blockNumber'), { result: /^0x/ }, 'the session goes on');

  const batch = await exchangeText(
    client,
    JSON.stringify([
      { jsonrpc: '2.0', id: 'a', method: 'eth_chainId' },
      { jsonrpc: '2.0', id: 'b', method: 'debug_traceCall' },
    ]),
  );
  t.same(
    batch,
    [
      {
        jsonrpc: '2.0',
        error: {
          code: SCOPE_CODE,
          message: 'not forwarded: this batch also calls "debug_traceCall", which the provided auth token does not allow',
        },
        id: 'a',
      },
      { jsonrpc: '2.0', error: { code: SCOPE_CODE, message: 'the provided auth token does not allow method "debug_traceCall"' }, id: 'b' },
    ],
    'a batch with one call outside: an error for each call',
  );
  t.match(
    await exchangeText(client, 'not json'),
    { error: { code: SCOPE_CODE, message: /not one JSON value alone/ }, id: null },
    'not JSON',
  );
  t.match(
    await exchangeText(client, '{"jsonrpc":"2.0","id":9,"method":"eth_chainId"} {"jsonrpc":"2.0","id":10,"method":"debug_traceCall"}'),
    { error: { code: SCOPE_CODE, message: /not one JSON value alone/ }, id: null },
    'two values in one message',
  );

  const sent = session.received.map((r) => JSON.parse(r.data.toString('utf8')).method);
  t.same(sent, ['eth_chainId', 'eth_blockNumber'], 'only the allowed calls reached the upstream');

  // The sweep re-checks the token every RECHECK_MS; a scoped token must stay valid there.
  // Nothing happens to wait for: the session must still be open after a few sweeps.
  await sleep(3 * RECHECK_MS);
  t.match(await client.call('eth_chainId'), { result: '0xa86a' }, 'still open after the token re-checks');

  const metricsToken = await newToken(server.url, server.password, ['/ext/metrics']);
  const metrics = await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${metricsToken}`]] });
  t.match(metrics.text, /^api_auth_method_checks_total\{via="websocket",result="allowed"\} 3$/m, 'allowed messages counted');
  t.match(metrics.text, /^api_auth_method_checks_total\{via="websocket",result="method not allowed"\} 2$/m, 'refused messages counted');
  t.match(metrics.text, /^api_auth_method_checks_total\{via="websocket",result="not json-rpc"\} 2$/m);
});

t.test('every thread checks the messages of scoped sessions', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', `http://127.0.0.1:${upstream.port}`, '--http-threads', '2'],
  });
  const token = await scopedToken(server.url, server.password, ['eth_chainId']);
  // Connections go to the threads in turn: four sessions cover each thread twice.
  for (let i = 0; i < 4; i++) {
    const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
    t.match(await client.call('eth_chainId'), { result: '0xa86a' }, `session ${i}: allowed`);
    t.match(await client.call('eth_call'), { error: { code: SCOPE_CODE } }, `session ${i}: refused`);
    client.socket.close();
  }
  const methods = upstream.sessions.flatMap((s) => s.received.map((r) => JSON.parse(r.data.toString('utf8')).method));
  t.same(methods, ['eth_chainId', 'eth_chainId', 'eth_chainId', 'eth_chainId'], 'no refused call reached the upstream');
});
