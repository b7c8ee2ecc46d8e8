// Resource limits under hostile clients: bodies over 64 KiB, too many and too long
// headers, malformed header lines, slow senders (slowloris) while a normal client keeps
// being served with bounded memory, deep JSON nesting, huge params.
import { connect, type Socket } from 'node:net';
import t from 'tap';
import { authUrl, call, newToken } from '../helpers/auth.js';
import { KeepAliveConnection, exchange, postJson, readResponse, request, type HttpResponse } from '../helpers/http.js';
import { sleep, startServer } from '../helpers/server.js';
import { rss } from '../helpers/raw-ws-upstream.js';

const server = await startServer(t);
const AUTH = authUrl(server.url);
const star = await newToken(server.url, server.password, ['*']);

const BODY_TOO_LARGE = '{"jsonrpc":"2.0","error":{"code":-32600,"message":"request body exceeds 65536 bytes"},"id":null}\n';

/** The server's resident memory in bytes (Linux). */
const serverRss = (): number => rss(server.child.pid!);

async function healthy(): Promise<HttpResponse> {
  return call(server.url, '/ext/health', star, 'GET');
}

/** One connection: writes `bytes` and reports the first response and whether the server closed it (within `waitMs`). */
function probe(bytes: Buffer | Buffer[], waitMs = 1500): Promise<{ response?: HttpResponse; closed: boolean; error?: string }> {
  const { hostname, port } = new URL(server.url);
  return new Promise((done) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let received = Buffer.alloc(0);
    let closed = false;
    let error: string | undefined;
    const finish = (): void => {
      clearTimeout(timer);
      let response: HttpResponse | undefined;
      try {
        response = readResponse(received, closed)?.response;
      } catch (e) {
        error = (e as Error).message;
      }
      socket.destroy();
      done({ response, closed, error });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
    });
    socket.on('error', (e) => {
      error = e.message;
    });
    socket.on('close', () => {
      closed = true;
      finish();
    });
    for (const chunk of Array.isArray(bytes) ? bytes : [bytes]) socket.write(chunk, () => undefined);
  });
}

function jsonBody(response: HttpResponse): any {
  return JSON.parse(response.text);
}

t.test('a body over 64 KiB is 413 with the documented body, and the connection is closed', async (t) => {
  const justOver = JSON.stringify({ jsonrpc: '2.0', method: 'auth.x', id: 1, pad: 'a'.repeat(65_537) });
  for (const [name, body] of [
    ['65,537+ bytes', justOver],
    ['1 MB', 'x'.repeat(1 << 20)],
    [
      '1 MB string in a request',
      JSON.stringify({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: 'x'.repeat(1 << 20), endpoints: ['*'] }, id: 1 }),
    ],
  ] as const) {
    const bytes = Buffer.concat([
      Buffer.from(
        `POST /ext/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` + `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
      ),
      Buffer.from(body),
    ]);
    const { response, closed } = await probe(bytes);
    t.equal(response?.status, 413, `${name}: 413`);
    t.equal(response?.text, BODY_TOO_LARGE, `${name}: "request body exceeds 65536 bytes"`);
    t.equal(response?.headers.connection, 'close', `${name}: Connection: close`);
    t.ok(closed, `${name}: the server closed the connection`);
  }
  // Chunked: the limit holds while the body streams in.
  const chunk = 'a'.repeat(16_384);
  const chunked = [
    Buffer.from('POST /ext/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n'),
    ...Array.from({ length: 64 }, () => Buffer.from(`4000\r\n${chunk}\r\n`)),
    Buffer.from('0\r\n\r\n'),
  ];
  const { response, closed } = await probe(chunked);
  t.equal(response?.status, 413, 'a 1 MB chunked body: 413');
  t.equal(response?.text, BODY_TOO_LARGE, 'a 1 MB chunked body: the documented body');
  t.ok(closed, 'a 1 MB chunked body: the connection is closed');
  t.equal((await healthy()).status, 200, 'the server keeps serving');
});

t.test('a body of exactly 64 KiB is read, and the connection stays usable', async (t) => {
  const request = JSON.stringify({ jsonrpc: '2.0', method: 'auth.x', id: 7 });
  const body = request + ' '.repeat(65_536 - request.length);
  const connection = new KeepAliveConnection(server.url);
  try {
    const first = await connection.request('/ext/auth', { method: 'POST', headers: [['Content-Type', 'application/json']], body });
    t.same(jsonBody(first), { jsonrpc: '2.0', error: { code: -32601, message: 'method not found: auth.x' }, id: 7 });
    const second = await connection.request('/ext/health', { headers: [['Authorization', `Bearer ${star}`]] });
    t.equal(second.status, 200, 'the next request on the same connection is served');
    t.equal(connection.connects, 1, 'over the same connection');
  } finally {
    connection.close();
  }
});

t.test("too many headers, or one too long: uWS's own 431 and a close; the server keeps serving", async (t) => {
  // uWS reads at most 4 KiB of request head and a bounded number of header lines.
  const many = Array.from({ length: 200 }, (_, i) => `X-Header-${i}: ${i}\r\n`).join('');
  const cases: [string, string][] = [
    ['200 headers', `GET /ext/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${star}\r\n${many}\r\n`],
    ['one 64 KiB header', `GET /ext/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${star}\r\nX-Big: ${'b'.repeat(65_536)}\r\n\r\n`],
    ['a 64 KiB Authorization header', `GET /ext/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'b'.repeat(65_536)}\r\n\r\n`],
    [
      '200 headers on /ext/auth',
      `POST /ext/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${many}Content-Length: 2\r\n\r\n{}`,
    ],
  ];
  for (const [name, text] of cases) {
    const { response, closed } = await probe(Buffer.from(text));
    t.equal(response?.status, 431, `${name}: 431 Request Header Fields Too Large`);
    t.ok(closed, `${name}: the connection is closed`);
  }
  const within = await request(server.url, '/ext/health', {
    headers: [['Authorization', `Bearer ${star}`], ...Array.from({ length: 40 }, (_, i) => [`X-H${i}`, 'v'] as [string, string])],
  });
  t.equal(within.status, 200, '40 headers are fine');
  t.equal((await healthy()).status, 200, 'the server keeps serving');
});

t.test('malformed header lines are never served (uWS gives no answer), and the server keeps serving', async (t) => {
  // uWS answers none of these: it stops reading and drops the connection when its idle
  // timeout (10 s) runs out (the slow-sender test below waits for that).
  const cases: [string, Buffer][] = [
    ['a NUL in a value', Buffer.from(`GET /ext/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${star}\x00\r\n\r\n`, 'latin1')],
    [
      'a control byte in a value',
      Buffer.from(`GET /ext/health HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\nAuthorization: Bearer ${star}\r\n\r\n`, 'latin1'),
    ],
    ['a space in a name', Buffer.from(`GET /ext/health HTTP/1.1\r\nHost: x\r\nBad Name: y\r\nAuthorization: Bearer ${star}\r\n\r\n`)],
    ['no Host', Buffer.from(`GET /ext/health HTTP/1.1\r\nAuthorization: Bearer ${star}\r\n\r\n`)],
    ['a folded line', Buffer.from(`GET /ext/health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\nAuthorization: Bearer ${star}\r\n\r\n`)],
  ];
  for (const [name, bytes] of cases) {
    const { response } = await probe(bytes, 500);
    t.ok(
      response === undefined || (response.status >= 400 && response.status < 500),
      `${name}: not served (got ${response?.status ?? 'no answer'})`,
    );
  }
  t.equal((await healthy()).status, 200, 'the server keeps serving');
});

t.test('conflicting or odd framing headers are refused, not guessed at', async (t) => {
  const cases: [string, string][] = [
    ['Content-Length and Transfer-Encoding', 'Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'],
    ['a negative Content-Length', 'Content-Length: -1\r\n\r\n{}'],
    ['a hexadecimal Content-Length', 'Content-Length: 0x2\r\n\r\n{}'],
  ];
  for (const [name, tail] of cases) {
    const { response } = await probe(Buffer.from(`POST /ext/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${tail}`), 500);
    t.equal(response?.status, 400, `${name}: 400 from uWS`);
  }
  // Two different lengths: uWS takes the first and reads on; the request is still answered
  // by the wire rules, whatever the rest of the bytes.
  const { response } = await probe(
    Buffer.from(
      'POST /ext/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' + 'Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}',
    ),
    500,
  );
  t.comment(`two different Content-Length headers: HTTP ${response?.status ?? 'no answer'}`);
  t.ok(
    response === undefined || response.status === 200 || response.status === 400,
    'two Content-Length headers: refused or read by the first',
  );
  t.equal((await healthy()).status, 200, 'the server keeps serving');
});

t.test('pipelined requests answered at once come back in order', async (t) => {
  const requests = [
    `GET /ext/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${star}\r\n\r\n`,
    'GET /ext/health HTTP/1.1\r\nHost: x\r\n\r\n',
    `GET /nope HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${star}\r\n\r\n`,
    'GET /ext/./info HTTP/1.1\r\nHost: x\r\n\r\n',
    `GET /ext/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${star}\r\nConnection: close\r\n\r\n`,
  ];
  const { hostname, port } = new URL(server.url);
  const received = await new Promise<Buffer>((done) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let data = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
    });
    socket.on('close', () => done(data));
    setTimeout(() => socket.destroy(), 3000);
    socket.write(requests.join(''));
  });
  const statuses: number[] = [];
  let rest = received;
  for (;;) {
    const parsed = readResponse(rest, true);
    if (parsed === undefined || parsed.length === 0) break;
    statuses.push(parsed.response.status);
    rest = rest.subarray(parsed.length);
    if (rest.length === 0) break;
  }
  t.same(statuses, [200, 401, 404, 400, 200], 'five answers, in request order');
});

/** A connection that sends its head one byte every `everyMs`, as a slowloris does. */
class SlowSender {
  readonly opened = Date.now();
  closedAfterMs: number | undefined;
  answered = false;
  sent = 0;
  private readonly socket: Socket;
  private readonly timer: NodeJS.Timeout;

  constructor(head: string, trickle: string, everyMs: number) {
    const { hostname, port } = new URL(server.url);
    this.socket = connect({ host: hostname, port: Number(port) });
    // The request line goes in one piece: uWS answers 505 to a request line split across
    // reads (uNetworking/uWebSockets#1776), which would end the attack at once.
    this.socket.write(head);
    this.timer = setInterval(() => {
      if (this.closedAfterMs === undefined) this.socket.write(trickle[this.sent++ % trickle.length], () => undefined);
    }, everyMs);
    this.socket.on('data', () => {
      this.answered = true;
    });
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => {
      this.closedAfterMs ??= Date.now() - this.opened;
      clearInterval(this.timer);
    });
  }

  stop(): void {
    clearInterval(this.timer);
    this.socket.destroy();
  }
}

t.test('slow senders: 50 trickling heads and 10 trickling bodies do not starve a normal client, and memory stays bounded', async (t) => {
  const before = serverRss();
  const slow = [
    ...Array.from(
      { length: 50 },
      () => new SlowSender('GET /ext/health HTTP/1.1\r\nHost: x\r\n', 'X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaa', 200),
    ),
    ...Array.from(
      { length: 10 },
      () =>
        new SlowSender(
          'POST /ext/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' + 'Content-Length: 4000\r\n\r\n',
          '{"jsonrpc":"2.0"                                 ',
          200,
        ),
    ),
  ];
  // A malformed head too: uWS does not answer it, and must drop it like the slow ones.
  const silent = new SlowSender(`GET /ext/health HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n`, ' ', 1_000_000);
  t.teardown(() => [...slow, silent].forEach((s) => s.stop()));

  const slowest: number[] = [];
  const failures: string[] = [];
  let peak = before;
  let rounds = 0;
  /** Rounds wholly answered while every slow sender still held its connection. */
  let servedAmongSlow = 0;
  const started = Date.now();
  // Until the server has dropped every slow sender and the malformed head (uWS's timer,
  // in real time, which no clock of the test's moves): an event, not a time. That it
  // drops them all is this loop's end: one it never drops holds the test up until tap's
  // timeout, which fails it.
  const open = (): boolean => [...slow, silent].some((s) => s.closedAfterMs === undefined);
  while (open()) {
    rounds++;
    const calls: [string, () => Promise<HttpResponse>, (r: HttpResponse) => boolean][] = [
      ['GET /ext/health', () => call(server.url, '/ext/health', star, 'GET'), (r) => r.status === 200],
      ['POST /ext/info', () => call(server.url, '/ext/info', star), (r) => r.status === 200 && jsonBody(r).result?.version !== undefined],
      [
        'POST /ext/auth (no password check)',
        () => postJson(AUTH, { jsonrpc: '2.0', method: 'auth.x', id: 1 }),
        (r) => jsonBody(r).error?.code === -32601,
      ],
    ];
    if (rounds % 20 === 1) {
      calls.push([
        'POST /ext/auth auth.newToken',
        () =>
          postJson(AUTH, {
            jsonrpc: '2.0',
            method: 'auth.newToken',
            params: { password: server.password, endpoints: ['/ext/info'] },
            id: 1,
          }),
        (r) => typeof jsonBody(r).result?.token === 'string',
      ]);
    }
    for (const [name, send, ok] of calls) {
      const t0 = Date.now();
      try {
        const response = await send();
        if (!ok(response)) failures.push(`${name}: HTTP ${response.status} ${response.text.slice(0, 200)}`);
      } catch (error) {
        failures.push(`${name}: ${(error as Error).message}`);
      }
      slowest.push(Date.now() - t0);
    }
    if (slow.every((s) => s.closedAfterMs === undefined)) servedAmongSlow++;
    peak = Math.max(peak, serverRss());
    // The normal client's pace: a round every 100 ms while the slow senders trickle.
    await sleep(100);
  }
  const after = serverRss();
  const worst = Math.max(...slowest);
  t.comment(`${slowest.length} normal requests in ${((Date.now() - started) / 1000).toFixed(1)} s; slowest ${worst} ms`);
  t.comment(
    `RSS before ${(before / 2 ** 20).toFixed(1)} MiB, peak ${(peak / 2 ** 20).toFixed(1)} MiB, after ${(after / 2 ** 20).toFixed(1)} MiB`,
  );
  const closedAt = slow.map((s) => s.closedAfterMs).filter((ms): ms is number => ms !== undefined);
  t.comment(
    `slow connections closed by the server: ${closedAt.length} of ${slow.length}, after ${Math.min(...closedAt)}..${Math.max(...closedAt)} ms`,
  );
  t.same(failures, [], 'every normal request got its answer');
  // Starved, the normal client would wait for the slow senders to be dropped (10 s, uWS's
  // timer): an order of events, which no machine's speed changes.
  t.ok(
    servedAmongSlow > 0,
    `normal requests were answered while all ${slow.length} slow senders held their connections ` +
      `(${servedAmongSlow} of ${rounds} rounds; slowest request ${worst} ms)`,
  );
  t.ok(peak - before < 50 * 2 ** 20, `RSS grew by less than 50 MiB (${((peak - before) / 2 ** 20).toFixed(1)} MiB)`);
  t.notOk(
    slow.some((s) => s.answered),
    'no slow sender got an answer before the server dropped it',
  );
  t.notOk(silent.answered, 'the malformed head was dropped too, unanswered');
  t.notOk(server.hasExited(), 'the server is running');
});

t.test('deep nesting and huge params within 64 KiB: clear JSON-RPC errors', async (t) => {
  const depth = 10_000;
  const nestedArrays = await postJson(AUTH, '['.repeat(depth) + ']'.repeat(depth));
  t.same(
    jsonBody(nestedArrays),
    [{ jsonrpc: '2.0', error: { code: -32600, message: 'invalid request: expected a JSON-RPC 2.0 request object' }, id: null }],
    `${depth} levels of [[[...]]]: a batch of one entry that is not a request`,
  );
  const deepest = 32_000;
  const widest = await postJson(AUTH, '['.repeat(deepest) + ']'.repeat(deepest));
  t.equal(jsonBody(widest)[0]?.error?.code, -32600, `${deepest} levels (64,000 bytes): the same`);
  const nestedParams = await postJson(
    AUTH,
    `{"jsonrpc":"2.0","method":"auth.newToken","params":{"password":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)},` +
      '"endpoints":["*"]},"id":1}',
  );
  t.same(
    jsonBody(nestedParams).error,
    { code: -32602, message: 'invalid params: password must be a string' },
    `a password ${depth} objects deep: -32602`,
  );
  const manyEndpoints = await postJson(AUTH, {
    jsonrpc: '2.0',
    method: 'auth.newToken',
    params: { password: server.password, endpoints: Array(10_000).fill('/a') },
    id: 2,
  });
  t.same(
    jsonBody(manyEndpoints),
    { jsonrpc: '2.0', error: { code: -32602, message: 'invalid params: endpoints must be an array of 1 to 128 strings' }, id: 2 },
    '10,000 endpoints: -32602 naming the limit',
  );
  const longMethod = await postJson(AUTH, { jsonrpc: '2.0', method: 'm'.repeat(60_000), id: 3 });
  t.same(
    jsonBody(longMethod).error,
    { code: -32601, message: `method not found: ${'m'.repeat(64)}` },
    'a 60,000-character method: named in 64 characters',
  );
  const bigId = await postJson(AUTH, `{"jsonrpc":"2.0","method":"x","id":${'9'.repeat(60_000)}}`);
  t.ok(bigId.text.endsWith(`"id":${'9'.repeat(60_000)}}\n`), 'a 60,000-digit id is echoed digit for digit');
  const megabyte = await exchange(
    server.url,
    Buffer.from(
      `POST /ext/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${(1 << 20) + 2}\r\nConnection: close\r\n\r\n"${'s'.repeat(1 << 20)}"`,
    ),
  );
  t.equal(megabyte.status, 413, 'a 1 MB JSON string: 413');
  t.equal((await healthy()).status, 200, 'the server keeps serving');
  t.notOk(server.hasExited(), 'the server is running');
});
