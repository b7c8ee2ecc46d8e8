// A token's rate counts the calls a node will run, not the requests: against a node that
// reads a body as Go's json.Decoder does (go/internal/decodernode: the first JSON value,
// every call of a batch run, and whatever follows it never read), a batch with anything
// after it (a stray byte, a "]", a second batch) is refused for a token with limits,
// however often it is sent, over HTTP and over WebSocket; the node runs no call of it.
// A token with neither limits nor a scope is passed through as before, and the same
// body then runs every call of its batch at the node, which is what the rate is for.
import t from 'tap';
import type { Test } from 'tap';
import { join } from 'node:path';
import { authUrl } from '../helpers/auth.js';
import { goBuild } from '../helpers/go.js';
import { jsonrpc, request } from '../helpers/http.js';
import { launchProgram, startServer, tempDir } from '../helpers/server.js';
import { openClient, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';

const PATH = '/ext/bc/C/rpc';
const BATCH = JSON.stringify(Array.from({ length: 100 }, (_, id) => ({ jsonrpc: '2.0', id, method: 'eth_blockNumber' })));
/** Bytes after the batch that a first-value reader never reads: geth's rpc/json.go ran the batch. */
const TAILS = ['x', ']', ' []', '\n{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}'];

async function decoderNode(t: Test): Promise<{ url: string; executed(): Promise<number> }> {
  const out = tempDir(t);
  await goBuild(out, ['./internal/decodernode']);
  const run = launchProgram(t, [join(out, 'decodernode'), ['-port', '0']]);
  const listening = await run.waitForLog((l) => l.msg === 'listening', 30_000);
  const url = `http://127.0.0.1:${listening.port}`;
  return { url, executed: async () => (JSON.parse((await request(url, '/executed')).text) as { executed: number }).executed };
}

t.test(
  'a batch with bytes after it: run whole by a json.Decoder node, refused for a token with limits, never counted as one call',
  async (t) => {
    const node = await decoderNode(t);
    const server = await startServer(t, { cheapChecks: true, args: ['--upstream', node.url] });
    const issue = async (params: Record<string, unknown>): Promise<string> =>
      (await jsonrpc(authUrl(server.url), 'auth.newToken', { password: server.password, endpoints: ['*'], ...params })).result!
        .token as string;
    const post = (token: string, body: string) =>
      request(server.url, PATH, {
        method: 'POST',
        headers: [
          ['Authorization', `Bearer ${token}`],
          ['Content-Type', 'application/json'],
        ],
        body,
      });

    const plain = await issue({});
    t.equal((await post(plain, `${BATCH}x`)).status, 200, 'a token without limits: passed through as sent');
    t.equal(await node.executed(), 100, 'the node ran every call of the batch, and never read the byte after it');

    const limited = await issue({ rateLimit: '1/h', burst: 3 });
    const over = await post(limited, BATCH);
    t.equal(over.status, 429, 'the batch alone: more calls than the burst');
    for (const tail of TAILS) {
      for (const round of [1, 2]) {
        const refused = await post(limited, `${BATCH}${tail}`);
        t.equal(refused.status, 400, `the batch then ${JSON.stringify(tail)}, round ${round}: refused`);
        t.match(JSON.parse(refused.text), {
          error: {
            code: -32600,
            message:
              /has limits, so its request must be one JSON-RPC call or a batch that api-auth reads exactly: the body is not one JSON value alone/,
          },
        });
      }
    }
    t.equal(await node.executed(), 100, 'the node ran none of them');
    const calls = JSON.stringify(Array.from({ length: 3 }, (_, id) => ({ jsonrpc: '2.0', id, method: 'eth_blockNumber' })));
    t.equal((await post(limited, calls)).status, 200, 'the refused bodies spent nothing: a batch of the whole burst passes');
    t.equal(await node.executed(), 103);
    const tokens = (await jsonrpc(authUrl(server.url), 'auth.listTokens', { password: server.password })).result!.tokens as {
      requests: number;
    }[];
    t.same(
      tokens.map((token) => token.requests),
      [1, 3],
      "usage counts what reached the node: the plain token's request, the limited one's 3 calls",
    );
  },
);

t.test('over WebSocket: a message with bytes after its batch is refused for a token with limits; the session goes on', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', `http://127.0.0.1:${upstream.port}`] });
  const token = (
    await jsonrpc(authUrl(server.url), 'auth.newToken', {
      password: server.password,
      endpoints: ['/ext/bc/C/ws'],
      rateLimit: '1/h',
      burst: 5,
    })
  ).result!.token as string;
  const client = await openClient(t, wsUrl(server.url, '/ext/bc/C/ws'), { token });
  const session = await upstream.session(0);
  for (const tail of TAILS) {
    const next = client.received.length;
    client.socket.send(`${BATCH}${tail}`);
    t.match(
      JSON.parse((await client.message(next)).data.toString('utf8')),
      {
        error: { code: -32600, message: /not one JSON value alone/ },
        id: null,
      },
      `the batch then ${JSON.stringify(tail)}: refused`,
    );
  }
  t.match(await client.call('eth_chainId'), { result: '0xa86a' }, 'the session goes on, and its token still has calls left');
  t.equal(session.received.length, 1, 'only the call the token could count reached the node');
});
