// The reverse proxy (--upstream): an authorised request reaches a real HTTP upstream
// with its method, path, query, body and headers (hop-by-hop ones and Authorization
// removed), and the upstream's status, headers and body come back unchanged, streamed
// both ways. An upstream that is down, slow or resets gives a JSON-RPC 502/504, and the
// gateway keeps serving.
import t from 'tap';
import { connect } from 'node:net';
import { Readable } from 'node:stream';
import { request as undiciRequest } from 'undici';
import { REASONS, expectRefused, newToken } from '../helpers/auth.js';
import { exchange, request } from '../helpers/http.js';
import { cliLine, refusalOf } from '../helpers/library.js';
import { runCli, startServer, sleep, type LogLine } from '../helpers/server.js';
import { closedPort, echo, startUpstream, type UpstreamHandler } from '../helpers/upstream.js';

const BIG_CHUNK = Buffer.alloc(64 * 1024, 0x61);
const BIG_CHUNKS = 1024; // 64 MiB, far more than any socket buffers hold
let bigWritten = 0;
/** Resolves when the upstream's last /big answer is over: whole, or its connection closed. */
let bigDone: Promise<'whole' | 'cut'> = Promise.resolve('whole');
/** The gateway's most connections to the upstream (host/http/proxy.ts UPSTREAM_CONNECTIONS). */
const UPSTREAM_CONNECTIONS = 128;
let holding = false;
let held = 0;
let maxHeld = 0;
const waitingAnswers: (() => void)[] = [];
let reachedLimit = (): void => undefined;

const routes: Record<string, UpstreamHandler> = {
  '/headers': (_req, res) => {
    // Names spelled as the upstream spells them; a repeated Set-Cookie; hop-by-hop fields
    // that must not reach the client.
    res.writeHead(201, 'Created Here', [
      'X-Node-Header',
      'kept',
      'Set-Cookie',
      'a=1',
      'Set-Cookie',
      'b=2',
      'Keep-Alive',
      'timeout=5',
      'Connection',
      'keep-alive, X-Hop',
      'X-Hop',
      'dropped',
      'Content-Type',
      'text/plain; charset=utf-8',
      'Content-Length',
      '8',
    ]);
    res.end('created\n');
  },
  '/status/404': (_req, res) => {
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('upstream says no\n');
  },
  '/status/503': (_req, res) => {
    res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': '7' });
    res.end('{"busy":true}');
  },
  '/status/204': (_req, res) => {
    res.writeHead(204, { 'X-Empty': 'yes' });
    res.end();
  },
  '/head': (req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '1234' });
    if (req.method === 'HEAD') res.end();
    else res.end(Buffer.alloc(1234, 0x20));
  },
  '/chunked': (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.write('part one, ');
    setTimeout(() => res.end('part two'), 50);
  },
  '/big': (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(BIG_CHUNK.length * BIG_CHUNKS) });
    bigWritten = 0;
    bigDone = new Promise((resolve) => {
      res.on('close', () => resolve(res.writableFinished ? 'whole' : 'cut'));
      const more = (): void => {
        while (bigWritten < BIG_CHUNKS) {
          bigWritten++;
          if (!res.write(BIG_CHUNK)) {
            res.once('drain', more);
            return;
          }
        }
        res.end();
      };
      more();
    });
  },
  '/held': (_req, res) => {
    // Held until the test lets answers go; counts how many the upstream holds at once.
    held++;
    maxHeld = Math.max(maxHeld, held);
    const answer = (): void => {
      held--;
      res.end('held\n');
    };
    if (holding) waitingAnswers.push(answer);
    else answer();
    if (held === UPSTREAM_CONNECTIONS) reachedLimit();
  },
  '/slow': (_req, res) => {
    const timer = setTimeout(() => res.end('too late'), 5000);
    res.on('close', () => clearTimeout(timer));
  },
  '/reset': (req) => req.socket.destroy(),
};

const upstream = await startUpstream(t, (req) => routes[(req.url ?? '').split('?')[0]] ?? echo);
const server = await startServer(t, {
  cheapChecks: true,
  args: ['--upstream', upstream.url, '--upstream-timeout', '1s', '--upstream-max-body', '256KiB'],
});
const token = await newToken(server.url, server.password, ['*']);
const bearer = `Bearer ${token}`;

interface Echoed {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** Sends raw request bytes and returns the whole raw response (the request says Connection: close). */
function rawExchange(base: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
    socket.write(bytes);
  });
}

t.test('method, path, query, body and headers reach the upstream; Authorization and hop-by-hop headers do not', async (t) => {
  const before = upstream.seen.length;
  const response = await request(server.url, '/ext/bc/X/rpc?a=1&b=two%20words', {
    method: 'PUT',
    headers: [
      ['Authorization', bearer],
      ['Content-Type', 'application/json; charset=utf-8'],
      ['X-Custom', 'value 1'],
      ['X-Custom', 'value 2'],
      ['Connection', 'close, X-Listed'],
      ['X-Listed', 'hop'],
      ['Keep-Alive', 'timeout=5'],
      ['TE', 'trailers'],
      ['Proxy-Authorization', 'Basic c2VjcmV0'],
      ['Upgrade', 'h2c'],
      ['Proxy-Connection', 'keep-alive'],
    ],
    body: '{"jsonrpc":"2.0","id":7,"method":"avm.getBalance","params":{}}',
  });
  t.equal(response.status, 200, response.text);
  t.equal(upstream.seen.length, before + 1, 'one request reached the upstream');
  const seen = upstream.seen[upstream.seen.length - 1];
  t.equal(seen.method, 'PUT');
  t.equal(seen.url, '/ext/bc/X/rpc?a=1&b=two%20words', 'the same path and the same query');
  t.equal(seen.body.toString(), '{"jsonrpc":"2.0","id":7,"method":"avm.getBalance","params":{}}', 'the body as sent');
  t.equal(seen.headers['content-type'], 'application/json; charset=utf-8');
  t.equal(seen.headers['content-length'], String(seen.body.length));
  t.equal(seen.headers['x-custom'], 'value 1, value 2', 'a repeated header arrives with both values');
  for (const name of ['authorization', 'proxy-authorization', 'x-listed', 'keep-alive', 'te', 'upgrade', 'proxy-connection']) {
    t.equal(seen.headers[name], undefined, `${name} is not forwarded`);
  }
  t.equal(seen.headers.host, `127.0.0.1:${upstream.port}`, "Host is the upstream's own");
  t.equal(seen.headers['x-forwarded-host'], `127.0.0.1:${server.port}`, "the client's Host goes in X-Forwarded-Host");
  t.match(seen.headers['x-forwarded-for'], /^127\.\d+\.\d+\.\d+$/, "the client's address goes in X-Forwarded-For");
  t.equal(seen.headers['x-forwarded-proto'], 'http');
  const echoed = JSON.parse(response.text) as Echoed;
  t.equal(echoed.url, seen.url, "the answer is the upstream's");
});

t.test("X-Forwarded-For, -Proto and -Host from a client are replaced by api-auth's own (no --trusted-proxies)", async (t) => {
  const response = await request(server.url, '/ext/info', {
    headers: [
      ['Authorization', bearer],
      ['X-Forwarded-For', '203.0.113.7'],
      ['X-Forwarded-Proto', 'https'],
      ['X-Forwarded-Host', 'node.example'],
    ],
  });
  t.equal(response.status, 200);
  const seen = upstream.seen[upstream.seen.length - 1];
  t.match(seen.headers['x-forwarded-for'], /^127\.\d+\.\d+\.\d+$/);
  t.equal(seen.headers['x-forwarded-proto'], 'http');
  t.equal(seen.headers['x-forwarded-host'], `127.0.0.1:${server.port}`);
});

t.test("the upstream's status, reason, headers and body come back unchanged; its hop-by-hop headers do not", async (t) => {
  const raw = await rawExchange(server.url, `GET /headers HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer}\r\nConnection: close\r\n\r\n`);
  const [head, body] = raw.split('\r\n\r\n');
  const lines = head.split('\r\n');
  t.equal(lines[0], 'HTTP/1.1 201 Created Here', 'status code and reason phrase');
  t.ok(lines.includes('X-Node-Header: kept'), 'a header, spelled as the upstream spelled it');
  t.same(
    lines.filter((l) => l.startsWith('Set-Cookie:')),
    ['Set-Cookie: a=1', 'Set-Cookie: b=2'],
    'both Set-Cookie lines, in order',
  );
  t.ok(lines.includes('Content-Type: text/plain; charset=utf-8'));
  t.notOk(
    lines.some((l) => /^(keep-alive|x-hop):/i.test(l)),
    `no hop-by-hop header: ${JSON.stringify(lines)}`,
  );
  t.equal(lines.filter((l) => /^date:/i.test(l)).length, 1, 'one Date header');
  t.equal(body, 'created\n');
});

t.test('upstream errors and other statuses pass through as they are', async (t) => {
  const notFound = await request(server.url, '/status/404', { headers: [['Authorization', bearer]] });
  t.equal(notFound.status, 404);
  t.equal(notFound.text, 'upstream says no\n');
  const busy = await request(server.url, '/status/503', { headers: [['Authorization', bearer]] });
  t.equal(busy.status, 503);
  t.equal(busy.headers['retry-after'], '7');
  t.equal(busy.text, '{"busy":true}');
  const empty = await request(server.url, '/status/204', { headers: [['Authorization', bearer]] });
  t.equal(empty.status, 204);
  t.equal(empty.headers['x-empty'], 'yes');
  t.equal(empty.body.length, 0);
});

t.test("HEAD keeps the upstream's Content-Length and sends no body; a chunked answer stays chunked", async (t) => {
  const head = await request(server.url, '/head', { method: 'HEAD', headers: [['Authorization', bearer]] });
  t.equal(head.status, 200);
  t.equal(head.headers['content-length'], '1234');
  t.equal(head.body.length, 0);
  const get = await request(server.url, '/head', { headers: [['Authorization', bearer]] });
  t.equal(get.headers['content-length'], '1234');
  t.equal(get.body.length, 1234);
  const chunked = await request(server.url, '/chunked', { headers: [['Authorization', bearer]] });
  t.equal(chunked.headers['transfer-encoding'], 'chunked');
  t.equal(chunked.text, 'part one, part two');
});

t.test('a large answer is streamed: a client that does not read holds the upstream back', async (t) => {
  const response = await undiciRequest(`${server.url}/big`, { headers: { authorization: bearer }, highWaterMark: 16 * 1024 });
  t.equal(response.statusCode, 200);
  t.equal(response.headers['content-length'], String(BIG_CHUNK.length * BIG_CHUNKS));
  // Nobody reads the body for half a second, in which a proxy that buffered would take
  // all 64 MiB from the upstream: what the upstream managed to write is bounded by
  // socket buffers. (An absence has no event to wait for.)
  await sleep(500);
  const writtenWhileStalled = bigWritten;
  t.ok(writtenWhileStalled < BIG_CHUNKS / 2, `the upstream waited for the client: ${writtenWhileStalled} of ${BIG_CHUNKS} chunks written`);
  let received = 0;
  let intact = true;
  for await (const chunk of response.body) {
    received += (chunk as Buffer).length;
    if (intact && (chunk as Buffer).some((byte) => byte !== 0x61)) intact = false;
  }
  t.equal(await bigDone, 'whole');
  t.equal(received, BIG_CHUNK.length * BIG_CHUNKS, 'every byte arrived');
  t.ok(intact, "the bytes are the upstream's");
});

t.test('a request body arrives whole: in one piece, chunked, and streamed in parts', async (t) => {
  const big = Buffer.alloc(200 * 1024, 0x62);
  const one = await request(server.url, '/echo', { method: 'POST', headers: [['Authorization', bearer]], body: big });
  t.equal(one.status, 200);
  t.equal(upstream.seen[upstream.seen.length - 1].body.length, big.length, 'a 200 KiB body in one request');

  const body = undiciRequest(`${server.url}/echo`, {
    method: 'POST',
    headers: { authorization: bearer, 'content-type': 'application/octet-stream' },
    body: Readable.from(
      (async function* () {
        for (let i = 0; i < 8; i++) {
          yield Buffer.alloc(16 * 1024, 0x30 + i);
          // Apart, so that the parts go out one by one.
          await sleep(10);
        }
      })(),
    ),
  });
  const streamed = await body;
  t.equal(streamed.statusCode, 200);
  await streamed.body.text();
  const seen = upstream.seen[upstream.seen.length - 1];
  t.equal(seen.body.length, 8 * 16 * 1024, 'a chunked body of 128 KiB sent in eight parts');
  t.equal(seen.body[0], 0x30);
  t.equal(seen.body[seen.body.length - 1], 0x37, 'in order');
});

t.test('a request body over --upstream-max-body gets 413 and never reaches the upstream', async (t) => {
  const before = upstream.seen.length;
  const declared = await request(server.url, '/echo', {
    method: 'POST',
    headers: [['Authorization', bearer]],
    body: Buffer.alloc(256 * 1024 + 1),
  });
  t.equal(declared.status, 413);
  t.same(JSON.parse(declared.text), { jsonrpc: '2.0', error: { code: -32600, message: 'request body exceeds 262144 bytes' }, id: null });
  const atLimit = await request(server.url, '/echo', {
    method: 'POST',
    headers: [['Authorization', bearer]],
    body: Buffer.alloc(256 * 1024),
  });
  t.equal(atLimit.status, 200, 'exactly the limit passes');
  const chunks = [
    Buffer.from(`POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`),
    ...Array.from({ length: 5 }, () => Buffer.concat([Buffer.from('10000\r\n'), Buffer.alloc(0x10000, 0x63), Buffer.from('\r\n')])),
    Buffer.from('0\r\n\r\n'),
  ];
  const chunked = await exchange(server.url, chunks);
  t.equal(chunked.status, 413, 'a chunked body that outgrows the limit');
  t.equal(upstream.seen.length, before + 1, 'only the body at the limit reached the upstream');
});

t.test('requests the gate refuses never reach the upstream', async (t) => {
  const before = upstream.seen.length;
  expectRefused(t, await request(server.url, '/ext/info'), REASONS.noToken);
  expectRefused(t, await request(server.url, '/ext/info', { headers: [['Authorization', 'Bearer x']] }), REASONS.malformed);
  const info = await newToken(server.url, server.password, ['/ext/info']);
  expectRefused(t, await request(server.url, '/ext/health', { headers: [['Authorization', `Bearer ${info}`]] }), REASONS.notGranted);
  const badPath = await request(server.url, '/ext/../ext/info', { headers: [['Authorization', bearer]] });
  t.equal(badPath.status, 400);
  t.equal(upstream.seen.length, before, 'the upstream saw none of them');
});

t.test("/ext/auth stays the gateway's own; /ext/info and /ext/health are the upstream's", async (t) => {
  const before = upstream.seen.length;
  await newToken(server.url, server.password, ['/ext/info']);
  t.equal(upstream.seen.length, before, '/ext/auth is answered locally');
  const info = await request(server.url, '/ext/info', {
    method: 'POST',
    headers: [
      ['Authorization', bearer],
      ['Content-Type', 'application/json'],
    ],
    body: '{}',
  });
  t.equal((JSON.parse(info.text) as Echoed).url, '/ext/info', 'the upstream answered /ext/info');
  const health = await request(server.url, '/ext/health', { headers: [['Authorization', bearer]] });
  t.equal((JSON.parse(health.text) as Echoed).url, '/ext/health', 'the upstream answered /ext/health');
});

t.test('connections to the upstream are kept alive and reused', async (t) => {
  const connections = upstream.connections();
  for (let i = 0; i < 10; i++) {
    const response = await request(server.url, '/ext/info', { headers: [['Authorization', bearer]] });
    t.equal(response.status, 200);
  }
  t.ok(
    upstream.connections() - connections <= 1,
    `ten requests one after another opened ${upstream.connections() - connections} connections`,
  );
});

t.test('past the upstream connection limit, requests wait for a connection and are all answered', async (t) => {
  // The limit is per HTTP thread: one thread, so that every request meets the same limit.
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--http-threads', '1'] });
  const bearer = `Bearer ${await newToken(server.url, server.password, ['*'])}`;
  const before = upstream.connections();
  holding = true;
  const limit = new Promise<void>((resolve) => {
    reachedLimit = resolve;
  });
  const count = UPSTREAM_CONNECTIONS + 72;
  const responses = Array.from({ length: count }, () => request(server.url, '/held', { headers: [['Authorization', bearer]] }));
  await limit;
  t.equal(held, UPSTREAM_CONNECTIONS, `the upstream holds ${UPSTREAM_CONNECTIONS} requests, one per connection`);
  holding = false;
  for (const answer of waitingAnswers.splice(0)) answer();
  const answered = await Promise.all(responses);
  t.ok(
    answered.every((r) => r.status === 200 && r.text === 'held\n'),
    'every request is answered',
  );
  t.equal(maxHeld, UPSTREAM_CONNECTIONS, 'never more at once than the limit');
  t.ok(upstream.connections() - before <= UPSTREAM_CONNECTIONS, `${upstream.connections() - before} new connections to the upstream`);
});

t.test('a slow upstream gives 504, one that resets gives 502; the gateway keeps serving', async (t) => {
  const slow = await request(server.url, '/slow', { headers: [['Authorization', bearer]] });
  t.equal(slow.status, 504);
  t.equal(slow.headers['content-type'], 'application/json');
  t.same(JSON.parse(slow.text), {
    jsonrpc: '2.0',
    error: { code: -32045, message: 'the upstream node did not answer within 1 s' },
    id: null,
  });
  const reset = await request(server.url, '/reset', { headers: [['Authorization', bearer]] });
  t.equal(reset.status, 502);
  t.same(JSON.parse(reset.text), { jsonrpc: '2.0', error: { code: -32044, message: 'the upstream node closed the connection' }, id: null });
  const after = await request(server.url, '/ext/info', { headers: [['Authorization', bearer]] });
  t.equal(after.status, 200, 'the next request is served');
});

t.test('an upstream that is down gives 502 until it is back', async (t) => {
  const port = await closedPort();
  const gateway = await startServer(t, { auth: false, args: ['--upstream', `http://127.0.0.1:${port}`, '--log-level', 'debug'] });
  for (let i = 0; i < 3; i++) {
    const down = await request(gateway.url, '/ext/info', { method: 'POST', headers: [['Content-Type', 'application/json']], body: '{}' });
    t.equal(down.status, 502);
    t.same(JSON.parse(down.text), {
      jsonrpc: '2.0',
      error: { code: -32044, message: 'the upstream node refused the connection' },
      id: null,
    });
  }
  // The lines come on a pipe, after the answers: at debug, every failure has one; wait for the three.
  const failures = (): LogLine[] => gateway.logs.filter((l) => l.msg === 'the upstream node did not answer');
  await gateway.waitForLog(() => failures().length === 3);
  t.equal(failures().filter((l) => l.level === 'warn').length, 1, 'one warning while it is down, not one per request');
  const back = await startUpstream(t, () => echo, port);
  const up = await request(gateway.url, '/ext/info', { headers: [] });
  t.equal(up.status, 200, 'served again once the upstream is up');
  t.equal(back.seen.length, 1);
  await gateway.waitForLog((l) => l.msg === 'the upstream node answers again');
  const stopped = await gateway.stop();
  t.equal(stopped.code, 0, 'and it stops cleanly');
});

t.test('a client that goes away mid-answer: the upstream request is abandoned, the gateway serves on', async (t) => {
  const { hostname, port } = new URL(server.url);
  await new Promise<void>((resolve) => {
    const socket = connect(Number(port), hostname);
    socket.on('data', () => {
      socket.destroy();
      resolve();
    });
    socket.write(`GET /big HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer}\r\n\r\n`);
  });
  t.equal(await bigDone, 'cut', 'the gateway closed its request to the upstream');
  t.ok(bigWritten < BIG_CHUNKS, `the upstream stopped writing: ${bigWritten} of ${BIG_CHUNKS} chunks`);
  const after = await request(server.url, '/ext/info', { headers: [['Authorization', bearer]] });
  t.equal(after.status, 200);
});

t.test('--upstream without --api-auth-required warns once at start, naming the flag; with it, no warning', async (t) => {
  for (const threads of ['1', '2']) {
    const open = await startServer(t, { auth: false, args: ['--upstream', upstream.url, '--http-threads', threads] });
    const warnings = open.logs.filter((l) => l.level === 'warn');
    t.same(
      warnings.map((l) => l.msg),
      [
        'the upstream node is open to anyone: without --api-auth-required no token is asked for; ' +
          'add --api-auth-required (and --api-auth-password-file) to gate it',
      ],
      `${threads} thread(s): one warning`,
    );
    t.equal(warnings[0]?.upstream, new URL(upstream.url).origin, 'naming the upstream');
    t.ok(open.logs.indexOf(warnings[0]) < open.logs.findIndex((l) => l.msg === 'listening'), 'before the listening line');
  }
  const gated = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  t.same(
    gated.logs.filter((l) => l.level === 'warn'),
    [],
    'with --api-auth-required: none',
  );
});

t.test('token options without --api-auth-required warn at start, one line each; with it, none', async (t) => {
  const args = ['--api-auth-token-lifetime', '1h', '--max-token-lifetime', '2h', '--api-auth-max-tokens', '50'];
  const open = await startServer(t, { auth: false, args });
  t.same(
    open.logs.filter((l) => l.level === 'warn').map((l) => l.msg),
    [
      '--api-auth-token-lifetime means nothing without --api-auth-required: no token is issued',
      '--max-token-lifetime means nothing without --api-auth-required: no token is issued',
      '--api-auth-max-tokens means nothing without --api-auth-required: no token is issued',
    ],
    'each named once',
  );
  const gated = await startServer(t, { cheapChecks: true, args });
  t.same(
    gated.logs.filter((l) => l.level === 'warn'),
    [],
    'with --api-auth-required: none',
  );
});

t.test('bad --upstream, --upstream-timeout and --upstream-max-body values are refused at start', async (t) => {
  const cases: [string, string[], string][] = [
    ['not a URL', ['--upstream', 'localhost:9652'], '--upstream'],
    ['another scheme', ['--upstream', 'ftp://127.0.0.1:21'], '--upstream'],
    ['a path', ['--upstream', 'http://127.0.0.1:9652/ext'], '--upstream'],
    ['credentials', ['--upstream', 'http://user:pw@127.0.0.1:9652'], '--upstream'],
    ['a timeout without unit', ['--upstream-timeout', '30'], '--upstream-timeout'],
    ['a timeout of zero', ['--upstream-timeout', '0s'], '--upstream-timeout'],
    ['a body limit of zero', ['--upstream-max-body', '0'], '--upstream-max-body'],
    ['a body limit in an unknown unit', ['--upstream-max-body', '1MB'], '--upstream-max-body'],
  ];
  const base = ['--http-port', '0', '--data-dir', '/nonexistent'];
  for (const [name, args, flag] of cases) {
    const error = await refusalOf([...base, ...args]);
    t.match(error, { code: /^API_AUTH_BAD_(OPTION|COMMAND_LINE)$/ }, `${name}: refused`);
    t.match(error === undefined ? '' : cliLine(error), new RegExp(`^api-auth: ${flag}[^\\n]*$`), `${name}: one line naming ${flag}`);
  }
  const result = await runCli(t, [...base, '--upstream', 'ftp://127.0.0.1:21']);
  t.equal(result.code, 2, 'the CLI exits 2');
  t.match(result.stderr, /^api-auth: --upstream[^\n]*\n$/, 'with one line naming the flag');
});
