// --upstream-pipelining against the servers operators run behind api-auth: geth (Go's
// net/http), ganache, and node:http. Many clients at once, each with its own call, so
// that the gateway writes several requests on one connection in one go: every client
// gets the answer to its own call, the node runs each call once, and the requests did go
// out several to a connection (node:http shows it; for the others the connections are
// counted).
import t from 'tap';
import type { Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { keccak256 } from 'ethers';
import { startGanache, startGeth } from '../helpers/eth-node.js';
import { request } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';

t.setTimeout(300_000);

/** Clients at once, in each of ROUNDS rounds. */
const CLIENTS = 200;
const ROUNDS = 3;

/** The call of client `i`: web3_sha3 of its own bytes, whose answer only it should get. */
const data = (round: number, i: number): string => `0x${(round * 100_000 + i).toString(16).padStart(8, '0')}`;
const call = (round: number, i: number): string =>
  JSON.stringify({ jsonrpc: '2.0', method: 'web3_sha3', params: [data(round, i)], id: round * 100_000 + i });

/** The connections established from api-auth to `port` now (ss). */
function connectionsTo(port: number): number {
  const out = execFileSync('ss', ['-tnH', 'state', 'established', 'dst', `127.0.0.1:${port}`], { encoding: 'utf8' });
  return out.split('\n').filter((line) => line.trim() !== '').length;
}

async function check(t: Test, nodeUrl: string): Promise<void> {
  const gateway = await startServer(t, {
    auth: false,
    args: ['--upstream', nodeUrl, '--http-threads', '1', '--upstream-pipelining', '4'],
  });
  const port = Number(new URL(nodeUrl).port);
  let most = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const answers = await Promise.all(
      Array.from({ length: CLIENTS }, (_, i) =>
        request(gateway.url, '/', { method: 'POST', body: call(round, i), headers: [['content-type', 'application/json']] }),
      ),
    );
    most = Math.max(most, connectionsTo(port));
    const wrong = answers
      .map((answer, i) => ({ i, status: answer.status, text: answer.text }))
      .filter(({ i, status, text }) => {
        if (status !== 200) return true;
        const body = JSON.parse(text) as { id?: number; result?: string };
        return body.id !== round * 100_000 + i || body.result !== keccak256(data(round, i));
      });
    t.same(wrong.slice(0, 3), [], `round ${round + 1}: each of ${CLIENTS} clients got its own call's answer`);
  }
  t.ok(most <= 128, `the gateway kept ${most} connections to the node open, at most its limit`);
  t.comment(`${most} connections to the node for ${CLIENTS} clients at once`);
}

t.test('geth (Go net/http)', async (t) => {
  const node = await startGeth(t);
  await check(t, node.url);
});

t.test('ganache', async (t) => {
  const node = await startGanache(t);
  await check(t, node.url);
});

t.test('node:http: the requests came several to a connection, each run once', async (t) => {
  const runs = new Map<number, number>();
  const inFlight = new WeakMap<object, number>();
  let pipelined = 0;
  const upstream = await startUpstream(t, () => (req, res, body) => {
    const socket = req.socket;
    const ahead = inFlight.get(socket) ?? 0;
    if (ahead > 0) pipelined++;
    inFlight.set(socket, ahead + 1);
    const parsed = JSON.parse(body.toString()) as { id: number; params: [string] };
    runs.set(parsed.id, (runs.get(parsed.id) ?? 0) + 1);
    // Answered on a later turn, so that the requests behind it are read meanwhile.
    setImmediate(() => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ jsonrpc: '2.0', id: parsed.id, result: keccak256(parsed.params[0]) }));
      inFlight.set(socket, (inFlight.get(socket) ?? 1) - 1);
    });
  });
  await check(t, upstream.url);
  t.equal(runs.size, CLIENTS * ROUNDS, 'every call reached the node');
  t.same(
    [...runs].filter(([, n]) => n !== 1),
    [],
    'and ran once',
  );
  t.ok(pipelined > 0, `${pipelined} requests came while an earlier one on their connection was unanswered`);
});
