// --access-log: one JSON line per request the gate decided, in a file of its
// own, with the fields an operator asks "who uses my node, and how" with: forwarded,
// refused (401, 403 for a method scope, 400 for a path), /ext/auth, /ext/auth/check and a
// WebSocket session each with their fields; the client a trusted proxy names; no line for
// the health paths; two HTTP threads under concurrent load writing whole lines only, and
// none lost by a clean stop.
import t from 'tap';
import type { Test } from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { issueToken, revokeToken, tamperLast } from '../helpers/auth.js';
import { overKeepAlive, post, request } from '../helpers/http.js';
import { sleep, startServer, tempDir } from '../helpers/server.js';
import { echo, startUpstream } from '../helpers/upstream.js';
import { openClient, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';

interface Line {
  time: string;
  client: string;
  token: string | null;
  method: string;
  path: string;
  rpc: (string | null)[] | null;
  calls: number | null;
  status: number;
  upstreamStatus: number | null;
  durationUs: number;
  bytesIn: number;
  bytesOut: number;
  messagesIn?: number;
  messagesOut?: number;
}

const FIELDS = [
  'time',
  'client',
  'token',
  'method',
  'path',
  'rpc',
  'calls',
  'status',
  'upstreamStatus',
  'durationUs',
  'bytesIn',
  'bytesOut',
];

/** Every line of the file, each parsed as JSON (a line that is not fails the test); none when the file is not there yet. */
function linesOf(file: string): Line[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  if (text === '') return [];
  if (!text.endsWith('\n')) throw new Error(`the access log ends in a cut line: ${JSON.stringify(text.slice(-200))}`);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as Line);
}

/** The lines matching, once there are `count` of them (lines are written a fraction of a second after their answer). */
async function waitForLines(file: string, match: (line: Line) => boolean, count = 1): Promise<Line[]> {
  for (;;) {
    const found = linesOf(file).filter(match);
    if (found.length >= count) return found;
    await sleep(50);
  }
}

function rpcBody(method: string, id = 1): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, params: [] });
}

/** The line's shape: every field, in order, and a time in RFC 3339 with milliseconds. */
function checkShape(t: Test, line: Line): void {
  t.same(Object.keys(line).slice(0, FIELDS.length), FIELDS, 'the fields, in their order');
  t.match(line.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'time: RFC 3339 with ms');
  t.ok(Number.isInteger(line.durationUs) && line.durationUs >= 0, 'durationUs: whole microseconds');
}

const upstream = await startUpstream(t, (req) =>
  req.url === '/ext/bc/missing'
    ? (_req, res) => {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('no such chain\n');
      }
    : echo,
);
const dir = tempDir(t);
const file = join(dir, 'access.log');
const server = await startServer(t, {
  args: ['--upstream', upstream.url, '--access-log', file, '--http-threads', '1', '--trusted-proxies', '127.0.0.5'],
});
const chain = await issueToken(server.url, server.password, { endpoints: ['/ext/bc/*'] });

t.test(
  "a forwarded request: its client, token id, method, path, JSON-RPC method, status, the upstream's status, duration and bytes",
  async (t) => {
    const body = rpcBody('eth_blockNumber');
    const response = await post(server.url, '/ext/bc/C/rpc?access_token=in-the-query&x=1', body, {
      token: chain.token,
      localAddress: '127.0.0.9',
    });
    t.equal(response.status, 200);
    const [line] = await waitForLines(file, (l) => l.path === '/ext/bc/C/rpc' && l.client === '127.0.0.9');
    checkShape(t, line);
    t.match(line, {
      client: '127.0.0.9',
      token: chain.id,
      method: 'POST',
      path: '/ext/bc/C/rpc',
      rpc: ['eth_blockNumber'],
      calls: 1,
      status: 200,
      upstreamStatus: 200,
      bytesIn: Buffer.byteLength(body),
      bytesOut: response.body.length,
    });
    t.notOk(readFileSync(file, 'utf8').includes(chain.token), 'never the token');
    t.notOk(readFileSync(file, 'utf8').includes('in-the-query'), 'never the query');

    const missing = await post(server.url, '/ext/bc/missing', body, { token: chain.token, localAddress: '127.0.0.10' });
    t.equal(missing.status, 404);
    const [relayed] = await waitForLines(file, (l) => l.path === '/ext/bc/missing');
    t.match(relayed, { status: 404, upstreamStatus: 404, token: chain.id, bytesOut: missing.body.length }, "the upstream's own 404");
  },
);

t.test('a batch: its methods, at most 16, and how many calls it holds', async (t) => {
  const batch = JSON.stringify(Array.from({ length: 20 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: `eth_m${i}` })));
  t.equal((await post(server.url, '/ext/bc/C/batch', batch, { token: chain.token })).status, 200);
  const [line] = await waitForLines(file, (l) => l.path === '/ext/bc/C/batch');
  t.equal(line.calls, 20);
  t.same(
    line.rpc,
    Array.from({ length: 16 }, (_, i) => `eth_m${i}`),
    'the first 16 methods',
  );
  // The one reading of a body (host/rpc/reading.ts): a batch with a call that has no method string is not read.
  const unread = JSON.stringify(Array.from({ length: 4 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: i === 3 ? 7 : `eth_m${i}` })));
  t.equal((await post(server.url, '/ext/bc/C/unread', unread, { token: chain.token })).status, 200);
  t.match(
    (await waitForLines(file, (l) => l.path === '/ext/bc/C/unread'))[0],
    { rpc: null, calls: null },
    'a batch the reading cannot read: no methods, no count',
  );
  const trailing = `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_m0' })} x`;
  t.equal((await post(server.url, '/ext/bc/C/trailing', trailing, { token: chain.token })).status, 200);
  t.match(
    (await waitForLines(file, (l) => l.path === '/ext/bc/C/trailing'))[0],
    { rpc: null, calls: null },
    'a call with a byte after it: not read, as the gate would not read it',
  );
  const notJson = await post(server.url, '/ext/bc/C/text', 'not json', { token: chain.token });
  t.equal(notJson.status, 200);
  t.match(
    (await waitForLines(file, (l) => l.path === '/ext/bc/C/text'))[0],
    { rpc: null, calls: null, bytesIn: 8 },
    'no JSON-RPC: no methods',
  );
});

t.test('refused by the gate: 401 without a token, with a forged one and a revoked one, 400 for a path; never forwarded', async (t) => {
  const seen = upstream.seen.length;
  const revoked = await issueToken(server.url, server.password, { endpoints: ['/ext/bc/*'] });
  await revokeToken(server.url, server.password, revoked.token);
  const cases: [string, string | null, string | null][] = [
    ['/ext/bc/C/none', null, null],
    ['/ext/bc/C/forged', tamperLast(chain.token), null],
    ['/ext/bc/C/revoked', revoked.token, revoked.id],
  ];
  for (const [path, token, id] of cases) {
    const response = await post(server.url, path, rpcBody('eth_chainId'), { token: token ?? undefined });
    t.equal(response.status, 401, path);
    const [line] = await waitForLines(file, (l) => l.path === path);
    checkShape(t, line);
    t.match(
      line,
      { token: id, status: 401, upstreamStatus: null, bytesOut: response.body.length },
      `${path}: the token id only of a genuine token`,
    );
  }
  // A raw request line: the path as sent, which a JSON string must escape.
  const raw = '/ext/bc/C/../"quoted"';
  const bad = await request(server.url, raw, { headers: [['Authorization', `Bearer ${chain.token}`]] });
  t.equal(bad.status, 400);
  const [line] = await waitForLines(file, (l) => l.path === raw);
  t.match(line, { method: 'GET', token: null, status: 400, upstreamStatus: null, rpc: null, bytesIn: 0 }, 'the path as received, escaped');
  t.equal(upstream.seen.length, seen, 'the upstream saw none of them');
});

t.test("a method scope's refusal: 200 with its error, the token id and the method refused", async (t) => {
  const scoped = await issueToken(server.url, server.password, { endpoints: ['/ext/bc/*'], methods: ['eth_blockNumber'] });
  const response = await post(server.url, '/ext/bc/C/scoped', rpcBody('eth_sendRawTransaction'), { token: scoped.token });
  // A refused call of a JSON-RPC body is its error in a 200 (docs/reference/errors.md), never forwarded.
  t.equal(response.status, 200);
  const [line] = await waitForLines(file, (l) => l.path === '/ext/bc/C/scoped');
  t.match(line, { token: scoped.id, rpc: ['eth_sendRawTransaction'], calls: 1, status: 200, upstreamStatus: null });
});

t.test('an /ext/auth call: its method, never its password', async (t) => {
  const before = linesOf(file).filter((l) => l.path === '/ext/auth').length;
  const response = await post(
    server.url,
    '/ext/auth',
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'auth.listTokens', params: { password: server.password } }),
  );
  t.equal(response.status, 200);
  const lines = await waitForLines(file, (l) => l.path === '/ext/auth', before + 1);
  t.match(lines.at(-1), {
    token: null,
    method: 'POST',
    rpc: ['auth.listTokens'],
    calls: 1,
    status: 200,
    upstreamStatus: null,
    bytesOut: response.body.length,
  });
  t.notOk(readFileSync(file, 'utf8').includes(server.password), 'never the password');
});

t.test("/ext/auth/check: the original request's token, the check's answer", async (t) => {
  const granted = await request(server.url, '/ext/auth/check', {
    headers: [
      ['X-Original-Request', 'POST /ext/bc/C/rpc HTTP/1.1'],
      ['Authorization', `Bearer ${chain.token}`],
    ],
    localAddress: '127.0.0.11',
  });
  t.equal(granted.status, 200);
  const refused = await request(server.url, '/ext/auth/check', {
    headers: [['X-Original-Request', 'POST /ext/bc/C/rpc HTTP/1.1']],
    localAddress: '127.0.0.12',
  });
  t.equal(refused.status, 401);
  const [yes] = await waitForLines(file, (l) => l.path === '/ext/auth/check' && l.client === '127.0.0.11');
  const [no] = await waitForLines(file, (l) => l.path === '/ext/auth/check' && l.client === '127.0.0.12');
  t.match(yes, { token: chain.id, method: 'GET', status: 200, upstreamStatus: null });
  t.match(no, { token: null, status: 401 });
});

t.test('behind a trusted proxy, the client it names; from anyone else, the peer', async (t) => {
  const forwarded: [string, string][] = [['X-Forwarded-For', '203.0.113.7']];
  t.equal(
    (
      await post(server.url, '/ext/bc/C/proxied', rpcBody('eth_chainId'), {
        token: chain.token,
        headers: forwarded,
        localAddress: '127.0.0.5',
      })
    ).status,
    200,
  );
  t.equal(
    (
      await post(server.url, '/ext/bc/C/spoofed', rpcBody('eth_chainId'), {
        token: chain.token,
        headers: forwarded,
        localAddress: '127.0.0.6',
      })
    ).status,
    200,
  );
  t.equal((await waitForLines(file, (l) => l.path === '/ext/bc/C/proxied'))[0].client, '203.0.113.7');
  t.equal((await waitForLines(file, (l) => l.path === '/ext/bc/C/spoofed'))[0].client, '127.0.0.6');
});

t.test('no line for /ext/health, /ext/auth/health and /ext/auth/live', async (t) => {
  await request(server.url, '/ext/health', { headers: [['Authorization', `Bearer ${chain.token}`]] });
  await request(server.url, '/ext/auth/health');
  t.equal((await request(server.url, '/ext/auth/live')).status, 200);
  // Lines are written in the order their requests ended: once this one is there, the others would be.
  t.equal((await request(server.url, '/ext/bc/C/after-health', { headers: [['Authorization', `Bearer ${chain.token}`]] })).status, 200);
  await waitForLines(file, (l) => l.path === '/ext/bc/C/after-health');
  t.same(
    linesOf(file).filter((l) => l.path === '/ext/health' || l.path === '/ext/auth/health' || l.path === '/ext/auth/live'),
    [],
  );
});

t.test('a WebSocket session: one line at its end, with its messages and their bytes each way; a refused upgrade, its own', async (t) => {
  const ws = await startWsUpstream(t);
  const wsFile = join(tempDir(t), 'ws.log');
  const gateway = await startServer(t, { args: ['--upstream', ws.url, '--access-log', wsFile, '--http-threads', '1'] });
  const token = await issueToken(gateway.url, gateway.password, { endpoints: ['/ext/bc/C/ws'] });
  const client = await openClient(t, wsUrl(gateway.url, '/ext/bc/C/ws'), { token: token.token });
  const answers = [await client.call('eth_chainId'), await client.call('eth_blockNumber')];
  t.ok(answers.every((answer) => answer.result !== undefined));
  await sleep(300);
  t.same(
    linesOf(wsFile).filter((l) => l.path === '/ext/bc/C/ws'),
    [],
    'no line while the session is open',
  );
  client.socket.close(1000);
  await client.closed;
  const [line] = await waitForLines(wsFile, (l) => l.path === '/ext/bc/C/ws' && l.status === 101);
  checkShape(t, line);
  const session = await ws.session(0);
  const sent = session.received.reduce((sum, message) => sum + message.data.length, 0);
  const received = client.received.reduce((sum, message) => sum + message.data.length, 0);
  t.match(line, {
    token: token.id,
    method: 'GET',
    status: 101,
    upstreamStatus: 101,
    messagesIn: 2,
    messagesOut: client.received.length,
    bytesIn: sent,
    bytesOut: received,
  });
  t.ok(line.durationUs >= 300_000, "timed from the upgrade to the session's end");

  const refused = await request(gateway.url, '/ext/bc/C/ws', {
    headers: [
      ['Upgrade', 'websocket'],
      ['Connection', 'Upgrade'],
      ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='],
      ['Sec-WebSocket-Version', '13'],
    ],
  });
  t.equal(refused.status, 401);
  const lines = await waitForLines(wsFile, (l) => l.path === '/ext/bc/C/ws' && l.status === 401);
  t.match(lines[0], { token: null, upstreamStatus: null, bytesOut: refused.body.length });
  t.notOk('messagesIn' in lines[0], 'an answered upgrade has no messages');

  // A clean stop ends the sessions still open, and writes their lines before the process exits.
  const open = await openClient(t, wsUrl(gateway.url, '/ext/bc/C/ws?open=1'), { token: token.token });
  await open.call('eth_chainId');
  t.equal((await gateway.stop('SIGTERM')).code, 0);
  t.match(
    linesOf(wsFile).filter((l) => l.status === 101),
    [{ messagesIn: 2 }, { messagesIn: 1, messagesOut: 1, token: token.id }],
    'the session open at the stop has its line',
  );
});

t.test('two HTTP threads under concurrent load: every line whole, none lost by a clean stop', async (t) => {
  const loadFile = join(tempDir(t), 'load.log');
  const loaded = await startServer(t, { args: ['--upstream', upstream.url, '--access-log', loadFile, '--http-threads', '2'] });
  const token = await issueToken(loaded.url, loaded.password, { endpoints: ['/ext/bc/*'] });
  const requests = 3000;
  const statuses = await overKeepAlive(
    loaded.url,
    16,
    Array.from({ length: requests }, (_, i) => i),
    async (i, connection) => {
      // Long paths, so that the threads' writes are many and large.
      const path = `/ext/bc/C/${i}/${'x'.repeat(200)}`;
      return (
        await connection.request(path, {
          method: 'POST',
          body: rpcBody('eth_call', i),
          headers: [
            ['Authorization', `Bearer ${token.token}`],
            ['Content-Type', 'application/json'],
          ],
        })
      ).status;
    },
  );
  t.ok(statuses.every((status) => status === 200));
  t.equal((await loaded.stop('SIGTERM')).code, 0);
  const lines = linesOf(loadFile).filter((l) => l.path.startsWith('/ext/bc/C/'));
  t.equal(lines.length, requests, 'one line for each request, each parsed whole');
  t.equal(new Set(lines.map((l) => l.path)).size, requests, 'each request once');
  t.ok(lines.every((l) => l.status === 200 && l.token === token.id && l.rpc?.[0] === 'eth_call'));
});
