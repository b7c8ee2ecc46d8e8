// A gateway whose every metric family exists: an upstream that answers HTTP and
// WebSocket, requests of tokens with and without a method scope or limits, refusals, a
// WebSocket session with messages both ways. Then its /ext/metrics, as text and by series.
import type { Test } from 'tap';
import { WebSocketServer } from 'ws';
import { newToken } from './auth.js';
import { jsonrpc, postJson, request, rpc } from './http.js';
import { startServer } from './server.js';
import { startUpstream } from './upstream.js';
import { openClient, wsUrl } from './ws-upstream.js';

/** Samples by their exact series text (`name{labels}`). */
export function parseScrape(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** The exposition text of `path` on `base`, with `token` if given; throws unless 200. */
export async function scrapeText(base: string, token?: string, path = '/ext/metrics'): Promise<string> {
  const response = await request(base, path, { headers: token === undefined ? [] : [['Authorization', `Bearer ${token}`]] });
  if (response.status !== 200) throw new Error(`metrics: HTTP ${response.status}: ${response.text}`);
  return response.text;
}

/** The samples of `path` on `base` (parseScrape of scrapeText); throws unless 200. */
export async function scrape(base: string, token?: string, path = '/ext/metrics'): Promise<Map<string, number>> {
  return parseScrape(await scrapeText(base, token, path));
}

export interface BusyGateway {
  readonly server: { readonly url: string; readonly password: string };
  readonly metricsToken: string;
  /** The scrape after the traffic. */
  readonly text: string;
}

const WS_PATH = '/ext/bc/C/ws';
const RPC_PATH = '/ext/bc/C/rpc';

/** A gateway started in front of `upstream` (its URL): where it listens, and its service password. */
export type StartGateway = (upstream: string) => Promise<{ readonly url: string; readonly password: string }>;

/**
 * Starts an upstream and a gateway in front of it (by `start`; by default one on a data
 * folder), sends it every kind of traffic, and scrapes it.
 */
export async function busyGateway(t: Test, start?: StartGateway): Promise<BusyGateway> {
  const upstream = await startUpstream(t, () => (_req, res, body) => {
    res.setHeader('Content-Type', 'application/json');
    const call = JSON.parse(body.toString('utf8') || '{}') as { id?: unknown };
    res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id ?? null, result: '0xa86a' }));
  });
  const sockets = new WebSocketServer({ server: upstream.server });
  sockets.on('connection', (socket) =>
    socket.on('message', (data) => {
      const call = JSON.parse(data.toString()) as { id: unknown };
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: '0xa86a' }));
    }),
  );
  t.teardown(() => sockets.close());
  const server = await (start ?? ((url) => startServer(t, { cheapChecks: true, args: ['--upstream', url] })))(upstream.url);
  const metricsToken = await newToken(server.url, server.password, ['/ext/metrics']);
  const plain = await newToken(server.url, server.password, [RPC_PATH, WS_PATH]);
  const scoped = await jsonrpc(`${server.url}/ext/auth`, 'auth.newToken', {
    password: server.password,
    endpoints: [RPC_PATH],
    methods: ['eth_chainId', 'avax.*'],
  });
  const limited = await jsonrpc(`${server.url}/ext/auth`, 'auth.newToken', {
    password: server.password,
    endpoints: [RPC_PATH],
    rateLimit: '1/h',
  });
  const bearer = (token: string): [string, string][] => [['Authorization', `Bearer ${token}`]];
  const scopedToken = String(scoped.result?.token);
  const limitedToken = String(limited.result?.token);
  const answers = [
    await postJson(`${server.url}${RPC_PATH}`, rpc('eth_blockNumber', [], 1), bearer(plain)),
    await postJson(`${server.url}${RPC_PATH}`, rpc('eth_chainId', [], 2), bearer(scopedToken)),
    await postJson(`${server.url}${RPC_PATH}`, rpc('avax.getAtomicTx', [], 3), bearer(scopedToken)),
    await postJson(`${server.url}${RPC_PATH}`, rpc('debug_traceCall', [], 4), bearer(scopedToken)),
    await postJson(`${server.url}${RPC_PATH}`, rpc('eth_chainId', [], 5), bearer(limitedToken)),
    await postJson(`${server.url}${RPC_PATH}`, rpc('eth_chainId', [], 6), bearer(limitedToken)),
    await postJson(`${server.url}${RPC_PATH}`, rpc('eth_chainId', [], 7)),
  ];
  const statuses = answers.map((a) => a.status);
  if (statuses.join() !== '200,200,200,200,200,429,401') throw new Error(`busyGateway: unexpected statuses ${statuses.join()}`);
  const client = await openClient(t, wsUrl(server.url, WS_PATH), { token: plain });
  await client.call('eth_chainId');
  client.socket.close();
  await client.closed;
  const text = await scrapeText(server.url, metricsToken);
  return { server, metricsToken, text };
}
