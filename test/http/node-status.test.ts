// auth.nodeStatus: what the console's node page shows of the node now, from the metrics of
// every serving thread summed: the WebSocket sessions open, and the upstream's answers with
// their latency's median and 99th percentile. A password (or a console session) is asked,
// as for every management method.
import t from 'tap';
import { authUrl, newToken } from '../helpers/auth.js';
import { jsonrpc, post } from '../helpers/http.js';
import { startServer, sleep } from '../helpers/server.js';
import { openClient, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';

interface Status {
  websocketSessions: number;
  upstream: { answers: number; p50Ms: number | null; p99Ms: number | null };
}

t.test("the sessions open and the upstream's answers and latency, summed over two HTTP threads", async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--http-threads', '2', '--upstream', `http://127.0.0.1:${upstream.port}`],
  });
  const status = async (): Promise<Status> => {
    const answer = await jsonrpc(authUrl(server.url), 'auth.nodeStatus', { password: server.password });
    if (answer.result === undefined) throw new Error(`auth.nodeStatus failed: ${JSON.stringify(answer.error)}`);
    return answer.result as Status;
  };
  t.same(await status(), { websocketSessions: 0, upstream: { answers: 0, p50Ms: null, p99Ms: null } }, 'nothing yet');

  const token = await newToken(server.url, server.password, ['/ext/bc/C/rpc', '/ext/bc/C/ws']);
  // Each on a fresh connection: the acceptor hands connections to the threads in turn.
  for (let i = 0; i < 4; i++) await post(server.url, '/ext/bc/C/rpc', '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}', { token });
  const client = await openClient(t, wsUrl(server.url, '/ext/bc/C/ws'), { token });
  await upstream.session(0);
  const now = await status();
  t.equal(now.websocketSessions, 1, 'the session open');
  t.equal(now.upstream.answers, 4, 'the four answers, from both threads');
  t.ok(now.upstream.p50Ms !== null && now.upstream.p50Ms > 0, `a median (${now.upstream.p50Ms} ms)`);
  t.ok(now.upstream.p99Ms !== null && now.upstream.p99Ms >= now.upstream.p50Ms!, `a 99th percentile no lower (${now.upstream.p99Ms} ms)`);

  client.socket.close();
  while ((await status()).websocketSessions !== 0) await sleep(50);
  t.pass('the session closed, none open');

  const refused = await jsonrpc(authUrl(server.url), 'auth.nodeStatus', { password: 'wrong' });
  t.equal(refused.error?.code, -32000, 'a wrong password is refused');
  const unknown = await jsonrpc(authUrl(server.url), 'auth.nodeStatus', { password: server.password, verbose: true });
  t.equal(unknown.error?.code, -32602, 'an unknown param is invalid params');
});
