// The gateway's edges that the security review found open: CONNECT and
// answers that switch protocols leave nothing behind; forwarding headers are believed
// only from trusted proxies, and name the client that the throttle and the logs see;
// what undici refuses in a client's request is the client's own 400, not an upstream
// failure; the path and the query reach the upstream byte for byte.
import t, { type Test } from 'tap';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { request as undiciRequest } from 'undici';
import { newToken } from '../helpers/auth.js';
import { freshSource, request, rpc, type HttpResponse } from '../helpers/http.js';
import { cliLine, mountedOnApp, refusalOf } from '../helpers/library.js';
import { runCli, startServer, tempDir, type Server } from '../helpers/server.js';
import { echo, startRawUpstream, startUpstream, switchProtocols } from '../helpers/upstream.js';
import { createAuth, createLogger } from '../../build/host/index.js';

const CONNECT_ALLOW = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';
const CONNECT_MESSAGE = 'HTTP method CONNECT is not allowed: api-auth forwards requests, it opens no tunnels';

/** Counts events; `reach(n)` resolves once there have been n. */
class Tally {
  count = 0;
  private waiters: Array<{ n: number; done: () => void }> = [];

  add(): void {
    this.count++;
    this.waiters = this.waiters.filter((w) => {
      if (w.n > this.count) return true;
      w.done();
      return false;
    });
  }

  reach(n: number): Promise<void> {
    if (this.count >= n) return Promise.resolve();
    return new Promise((done) => this.waiters.push({ n, done }));
  }
}

/**
 * Resolves once `check` holds. What it watches (the process's open files, connections
 * closing on the far side of a socket) sends no event here, so it is looked at every 20 ms.
 */
async function eventually(check: () => boolean, what: () => string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`still not so after ${timeoutMs} ms: ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function openFiles(server: Server): number {
  return readdirSync(`/proc/${server.child.pid}/fd`).length;
}

function jsonError(response: HttpResponse): { code: number; message: string } {
  return (JSON.parse(response.text) as { error: { code: number; message: string } }).error;
}

function expectConnectRefused(t: Test, response: HttpResponse, name: string): void {
  t.equal(response.status, 405, `${name}: 405`);
  t.equal(response.headers.allow, CONNECT_ALLOW, `${name}: the same Allow on every path`);
  t.equal(response.headers['content-type'], 'application/json');
  t.same(
    JSON.parse(response.text),
    { jsonrpc: '2.0', error: { code: -32600, message: CONNECT_MESSAGE }, id: null },
    `${name}: the body says why`,
  );
}

const switchedClosed = new Tally();
const upstream = await startUpstream(t, (req) => (req.url === '/switch' ? switchProtocols(() => switchedClosed.add()) : echo));
const gateway = await startServer(t, {
  cheapChecks: true,
  args: ['--upstream', upstream.url, '--api-auth-public-endpoints', '/ext/health'],
});
const bearer = `Bearer ${await newToken(gateway.url, gateway.password, ['*'])}`;

t.test('CONNECT gets 405 on every path, with a token or without, with an upstream or without; nothing is forwarded', async (t) => {
  const builtin = await startServer(t, { cheapChecks: true });
  const open = await startServer(t, { auth: false, args: ['--upstream', upstream.url] });
  const before = upstream.seen.length;
  const cases: [string, string, string, [string, string][]][] = [
    ['a public path, no token', gateway.url, '/ext/health', []],
    ['a granted path, with a token', gateway.url, '/ext/info', [['Authorization', bearer]]],
    ['no token', gateway.url, '/ext/info', []],
    ['/ext/auth', gateway.url, '/ext/auth', []],
    ['a path the rules refuse', gateway.url, '/ext/../ext/info', [['Authorization', bearer]]],
    ['the built-in endpoints', builtin.url, '/ext/health', []],
    ['the built-in /ext/auth', builtin.url, '/ext/auth', []],
    ['auth off, with an upstream', open.url, '/ext/info', []],
  ];
  for (const [name, base, path, headers] of cases) {
    expectConnectRefused(t, await request(base, path, { method: 'CONNECT', headers, timeoutMs: 3000 }), name);
  }
  expectConnectRefused(
    t,
    await request(gateway.url, '/ext/info', { method: 'connect', headers: [['Authorization', bearer]], timeoutMs: 3000 }),
    'in lower case',
  );
  t.equal(upstream.seen.length, before, 'the upstream saw none of them');
});

t.test('an upstream answer that switches protocols gets 502, and its connection is closed, not pooled', async (t) => {
  const closed = switchedClosed.count;
  const response = await request(gateway.url, '/switch', { headers: [['Authorization', bearer]], timeoutMs: 3000 });
  t.equal(response.status, 502);
  t.equal(jsonError(response).code, -32044);
  await switchedClosed.reach(closed + 1);
  t.pass('the gateway closed its connection to the upstream');
  const after = await request(gateway.url, '/ext/info', { headers: [['Authorization', bearer]] });
  t.equal(after.status, 200, 'and serves on');
});

t.test('no client leaves a socket, file handle or timer behind: 300 CONNECTs and switched answers', async (t) => {
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--api-auth-public-endpoints', '/ext/health'],
  });
  const auth = [['Authorization', `Bearer ${await newToken(server.url, server.password, ['*'])}`]] as [string, string][];
  const kinds = [
    () => request(server.url, '/ext/health', { method: 'CONNECT', timeoutMs: 5000 }),
    () => request(server.url, '/ext/info', { method: 'CONNECT', headers: auth, timeoutMs: 5000 }),
    () => request(server.url, '/switch', { headers: auth, timeoutMs: 5000 }),
  ];
  // One of each first, so that what the process keeps for good (the upstream pool, the
  // hashing thread's handles) is in the count before.
  let switched = switchedClosed.count;
  for (const send of kinds) await send();
  await switchedClosed.reach(++switched);
  const openUpstream = upstream.open();
  await eventually(
    () => upstream.open() <= openUpstream,
    () => `${upstream.open()} upstream connections`,
  );
  const before = openFiles(server);

  const statuses = new Map<number, number>();
  const total = 300;
  let next = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < total) {
        const response = await kinds[next++ % kinds.length]();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      }
    }),
  );
  t.same(Object.fromEntries(statuses), { 405: 200, 502: 100 }, 'every CONNECT got 405, every switched answer 502');
  await switchedClosed.reach(switched + 100);
  t.pass('every upstream connection that switched was closed by the gateway');
  await eventually(
    () => openFiles(server) <= before + 5,
    () => `${openFiles(server)} open files, ${before} before`,
  );
  t.pass(`the open files are back to ${before} (give or take the connections of this test still closing)`);
  const exit = await server.stop();
  t.equal(exit.code, 0, 'it stops cleanly');
  t.notOk(
    server.logs.some((l) => l.msg === 'stopping with requests still in flight'),
    'with no exchange left hanging',
  );
});

const CLIENT_FORWARDING = [
  ['X-Forwarded-For', '203.0.113.7'],
  ['X-Forwarded-For', '198.51.100.1'],
  ['X-Forwarded-Host', 'evil.example'],
  ['X-Forwarded-Proto', 'https'],
  ['X-Forwarded-Port', '443'],
  ['X-Forwarded-Prefix', '/admin'],
  ['X-Forwarded-Server', 'lb'],
  ['Forwarded', 'for=203.0.113.7;proto=https'],
  ['X-Real-IP', '203.0.113.7'],
  ['True-Client-IP', '203.0.113.7'],
  ['X-Client-IP', '203.0.113.7'],
  ['CF-Connecting-IP', '203.0.113.7'],
  ['Fastly-Client-IP', '203.0.113.7'],
  ['X-Cluster-Client-IP', '203.0.113.7'],
  ['X-Original-URL', '/admin'],
  ['X-Rewrite-URL', '/admin'],
] as const;

function lastSeen() {
  return upstream.seen[upstream.seen.length - 1];
}

function count(raw: string[], name: string): number {
  return raw.filter((n, i) => i % 2 === 0 && n.toLowerCase() === name).length;
}

t.test('X-Forwarded-Host is the first Host byte for byte, bytes beyond ASCII included', async (t) => {
  // "nöde.example" with ö as the one byte 0xF6 (Latin-1), which is not UTF-8.
  const host = Buffer.from('n\u00f6de.example:9650', 'latin1');
  const response = await request(gateway.url, '/ext/info', {
    headers: [
      ['Authorization', bearer],
      ['Host', host],
    ],
  });
  t.equal(response.status, 200);
  const seen = lastSeen();
  const at = seen.rawHeaders.findIndex((n, i) => i % 2 === 0 && n.toLowerCase() === 'x-forwarded-host');
  t.equal(Buffer.from(seen.rawHeaders[at + 1], 'latin1').toString('hex'), host.toString('hex'), 'the same bytes');
  const twice = await request(gateway.url, '/ext/info', {
    headers: [
      ['Authorization', bearer],
      ['Host', 'first.example'],
      ['Host', 'second.example'],
    ],
  });
  t.equal(twice.status, 200);
  t.equal(lastSeen().headers['x-forwarded-host'], 'first.example', 'two Host lines: the first, as getHeader reads it');
});

t.test('forwarding headers from a client never reach the upstream; api-auth writes its own', async (t) => {
  const source = freshSource();
  const response = await request(gateway.url, '/ext/info', {
    localAddress: source,
    headers: [['Authorization', bearer], ['Host', 'node.example:9650'], ...CLIENT_FORWARDING, ['X-Other', 'kept']],
  });
  t.equal(response.status, 200);
  const seen = lastSeen();
  t.equal(seen.headers['x-forwarded-for'], source, "X-Forwarded-For is the client's address alone");
  t.equal(seen.headers['x-forwarded-host'], 'node.example:9650', "X-Forwarded-Host is the client's Host");
  t.equal(seen.headers['x-forwarded-proto'], 'http');
  for (const name of ['x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto']) t.equal(count(seen.rawHeaders, name), 1, `one ${name}`);
  for (const [name] of CLIENT_FORWARDING) {
    const lower = name.toLowerCase();
    if (!['x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto'].includes(lower))
      t.equal(seen.headers[lower], undefined, `no ${name}`);
  }
  t.equal(seen.headers['x-other'], 'kept', 'other headers pass');
});

t.test('from a trusted proxy, X-Forwarded-For, -Host and -Proto are kept and X-Forwarded-For is extended', async (t) => {
  const behind = await startServer(t, {
    auth: false,
    args: ['--upstream', upstream.url, '--trusted-proxies', '10.9.9.9, 2001:db8::/32,127.0.0.0/8'],
  });
  const proxy = freshSource();
  await request(behind.url, '/ext/info', {
    localAddress: proxy,
    headers: [
      ['X-Forwarded-For', '198.51.100.7'],
      ['X-Forwarded-For', '203.0.113.9, 10.0.0.1'],
      ['X-Forwarded-Host', 'node.example'],
      ['X-Forwarded-Proto', 'https'],
      ['X-Forwarded-Port', '443'],
      ['X-Real-IP', '198.51.100.7'],
      ['Forwarded', 'for=198.51.100.7'],
    ],
  });
  let seen = lastSeen();
  t.equal(
    seen.headers['x-forwarded-for'],
    `198.51.100.7, 203.0.113.9, 10.0.0.1, ${proxy}`,
    'the chain, both lines in order, then the proxy',
  );
  t.equal(seen.headers['x-forwarded-host'], 'node.example');
  t.equal(seen.headers['x-forwarded-proto'], 'https');
  for (const name of ['x-forwarded-port', 'x-real-ip', 'forwarded']) t.equal(seen.headers[name], undefined, `${name} is still dropped`);
  await request(behind.url, '/ext/info', { localAddress: proxy, headers: [['Host', 'node.example:9650']] });
  seen = lastSeen();
  t.same(
    [seen.headers['x-forwarded-for'], seen.headers['x-forwarded-host'], seen.headers['x-forwarded-proto']],
    [proxy, 'node.example:9650', 'http'],
    'a trusted proxy that sent none gets them written',
  );

  const elsewhere = await startServer(t, { auth: false, args: ['--upstream', upstream.url, '--trusted-proxies', '10.0.0.0/8'] });
  const client = freshSource();
  await request(elsewhere.url, '/ext/info', { localAddress: client, headers: [['Host', 'h'], ...CLIENT_FORWARDING] });
  seen = lastSeen();
  t.same(
    [seen.headers['x-forwarded-for'], seen.headers['x-forwarded-host'], seen.headers['x-forwarded-proto'], seen.headers['x-real-ip']],
    [client, 'h', 'http', undefined],
    'a peer outside the list is a client like any other',
  );
});

t.test(
  'underscore spellings of forwarding headers and credentials never reach the upstream, from a client or a trusted proxy',
  async (t) => {
    // A CGI or WSGI upstream reads X_Forwarded_For as X-Forwarded-For: both are HTTP_X_FORWARDED_FOR to it.
    const spellings = [
      ['X_Forwarded_For', '203.0.113.7'],
      ['X-Forwarded_For', '203.0.113.7'],
      ['X_Forwarded_Host', 'evil.example'],
      ['X_Forwarded_Proto', 'https'],
      ['X-Real_IP', '203.0.113.7'],
      ['X_Real_IP', '203.0.113.7'],
      ['True_Client_IP', '203.0.113.7'],
      ['CF_Connecting_IP', '203.0.113.7'],
      ['Forwarded_For', '203.0.113.7'],
      ['X_Original_URL', '/admin'],
      ['Proxy_Authorization', 'Basic YTpi'],
    ] as const;
    const behind = await startServer(t, { auth: false, args: ['--upstream', upstream.url, '--trusted-proxies', '127.0.0.0/8'] });
    for (const [base, who] of [
      [gateway.url, 'a client'],
      [behind.url, 'a trusted proxy'],
    ] as const) {
      const source = freshSource();
      const response = await request(base, '/ext/info', {
        localAddress: source,
        headers: [['Authorization', bearer], ...spellings, ['X_Other', 'kept']],
      });
      t.equal(response.status, 200);
      const seen = lastSeen();
      const names = seen.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
      t.same(
        names.filter((n) => n.includes('_')),
        ['x_other'],
        `from ${who}: only the header that spells nothing api-auth writes passes`,
      );
      t.equal(seen.headers['x-forwarded-for'], source, `from ${who}: X-Forwarded-For names the peer alone`);
      t.equal(count(seen.rawHeaders, 'x-forwarded-for'), 1);
    }
  },
);

t.test('on a dual-stack listener, addresses are canonical: an IPv4 client in dotted form, IPv6 as RFC 5952 writes it', async (t) => {
  const dual = await startServer(t, {
    cheapChecks: true,
    args: ['--http-host', '::', '--upstream', upstream.url, '--api-auth-public-endpoints', '/ext/health'],
  });
  const source = freshSource();
  t.equal((await request(dual.url, '/ext/health', { localAddress: source })).status, 200);
  t.equal(lastSeen().headers['x-forwarded-for'], source, 'X-Forwarded-For of an IPv4 client');
  const six = await undiciRequest(`http://[::1]:${dual.port}/ext/health`);
  await six.body.text();
  t.equal(lastSeen().headers['x-forwarded-for'], '::1', 'X-Forwarded-For of an IPv6 client');

  const guess = await request(dual.url, '/ext/auth', {
    method: 'POST',
    localAddress: source,
    headers: [
      ['Content-Type', 'application/json'],
      ['X-Forwarded-For', '198.51.100.9'],
    ],
    body: JSON.stringify(rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, 1)),
  });
  t.equal(jsonError(guess).message, 'incorrect password');
  const audit = await dual.waitForLog((l) => l.msg === 'audit' && l.outcome === 'incorrect password');
  t.equal(audit.client, source, 'the audit line names the client in dotted form; X-Forwarded-For from a client is not believed');
});

t.test('behind a trusted proxy, the throttle and the audit log take the client its X-Forwarded-For names', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ['--trusted-proxies', '127.0.0.0/8'] });
  const proxy = freshSource();
  // Every guess comes through the same proxy connection address; the chain ends with a
  // second trusted hop, which is skipped.
  const guess = (client: string) =>
    request(server.url, '/ext/auth', {
      method: 'POST',
      localAddress: proxy,
      headers: [
        ['Content-Type', 'application/json'],
        ['X-Forwarded-For', `${client}, 127.0.0.3`],
      ],
      body: JSON.stringify(rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, 1)),
    });
  let tries = 0;
  let status = 200;
  while (status !== 429 && tries < 10) {
    status = (await guess('198.51.100.1')).status;
    tries++;
  }
  t.equal(status, 429, `198.51.100.1 is made to wait (after ${tries} guesses)`);
  const other = await guess('198.51.100.2');
  t.equal(other.status, 200, 'another client behind the same proxy is not');
  t.equal(jsonError(other).message, 'incorrect password');
  // The owner writes the audit lines in order: once the last guess's is in, all are.
  await server.waitForLog((l) => l.msg === 'audit' && l.client === '198.51.100.2');
  const clients = new Set(server.logs.filter((l) => l.msg === 'audit').map((l) => l.client));
  t.same([...clients].sort(), ['198.51.100.1', '198.51.100.2'], 'the audit lines name the clients, not the proxy');
});

t.test('the library takes trustedProxies too, and refuses a bad one', async (t) => {
  const dir = tempDir(t);
  const lines: string[] = [];
  const options = { passwordFile: join(dir, 'password'), dataDir: join(dir, 'data'), log: createLogger((l) => lines.push(l)) };
  await t.rejects(createAuth({ ...options, trustedProxies: ['10.0.0.0/8', 'nope'] }), {
    code: 'API_AUTH_BAD_OPTION',
    option: 'trustedProxies',
    message: /^trustedProxies: "nope" is not an address or a CIDR range/,
  });
  const auth = await createAuth({ ...options, trustedProxies: ['127.0.0.0/8'] });
  const { base } = await mountedOnApp(t, auth);
  const response = await request(base, '/ext/auth', {
    method: 'POST',
    headers: [
      ['Content-Type', 'application/json'],
      ['X-Forwarded-For', '198.51.100.4'],
    ],
    body: JSON.stringify(rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, 1)),
  });
  t.equal(jsonError(response).message, 'incorrect password');
  const audit = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'audit');
  t.equal(audit?.client, '198.51.100.4');
});

t.test('bad --trusted-proxies values are refused at start with one line', async (t) => {
  const args = (bad: string): string[] => ['--http-port', '0', '--data-dir', '/nonexistent', '--trusted-proxies', bad];
  const LINE = /^api-auth: --trusted-proxies: "[^"]*" is not an address or a CIDR range \(such as [^\n]*\)$/;
  for (const bad of [
    '10.0.0.0/33',
    'proxy.example',
    '10.0.0.1,,10.0.0.2',
    'fe80::1%eth0',
    '2001:db8::/129',
    '10.0.0.0/',
    '300.1.1.1',
    '10.0.0.0/08',
  ]) {
    const error = await refusalOf(args(bad));
    t.match(error, { code: /^API_AUTH_BAD_(OPTION|COMMAND_LINE)$/ }, `${bad}: refused`);
    t.match(error === undefined ? '' : cliLine(error), LINE, `${bad}: one line naming the entry`);
  }
  const result = await runCli(t, args('10.0.0.0/33'));
  t.equal(result.code, 2, 'the CLI exits 2');
  t.match(result.stderr.slice(0, -1), LINE, 'with that line alone on stderr');
  t.ok(result.stderr.endsWith('\n'));
});

t.test(
  "a request undici would refuse is the client's own 400: nothing forwarded, no upstream error counted or logged, health unchanged",
  async (t) => {
    const up = await startUpstream(t);
    const server = await startServer(t, { auth: false, args: ['--upstream', up.url] });
    const cases: [string, string, Parameters<typeof request>[2]][] = [
      ['a control byte in a header value', '/ext/info', { headers: [['X-Note', 'a\x7fb']] }],
      [
        'two Content-Length',
        '/ext/info',
        {
          method: 'POST',
          headers: [
            ['Content-Length', '2'],
            ['Content-Length', '2'],
          ],
          body: '{}',
        },
      ],
      ['a method that is not a token', '/ext/info', { method: 'G@T' }],
      ['bytes that are not UTF-8 in a header value', '/ext/info', { headers: [['X-Note', Buffer.from([0x61, 0xff, 0x62])]] }],
    ];
    for (const [name, path, options] of cases) {
      const response = await request(server.url, path, options);
      t.equal(response.status, 400, `${name}: 400`);
      t.equal(response.headers['content-type'], 'application/json');
      t.equal(jsonError(response).code, -32600, `${name}: ${jsonError(response).message}`);
      t.notMatch(jsonError(response).message, /upstream/, `${name}: says nothing about the upstream`);
    }
    t.equal(up.seen.length, 0, 'none reached the upstream');
    const metrics = await request(server.url, '/ext/metrics');
    const errors = metrics.text.split('\n').filter((l) => l.startsWith('api_auth_upstream_errors_total{'));
    t.same(
      errors.map((l) => Number(l.slice(l.lastIndexOf(' ') + 1))),
      [0, 0, 0, 0],
      'no upstream error counted',
    );
    t.notOk(
      server.logs.some((l) => l.msg === 'the upstream node did not answer'),
      'none logged',
    );
    t.equal((await request(server.url, '/ext/info')).status, 200);
    t.notOk(
      server.logs.some((l) => l.msg === 'the upstream node answers again'),
      'the upstream was never taken for down',
    );
    await up.close();
    t.equal((await request(server.url, '/ext/info')).status, 502);
    await server.waitForLog((l) => l.msg === 'the upstream node did not answer' && l.level === 'warn');
    t.pass('its first real failure is still news');
  },
);

t.test("the framing headers are judged as received, before hop-by-hop removal: an ambiguous body is the client's own 400", async (t) => {
  const up = await startUpstream(t);
  const server = await startServer(t, { auth: false, args: ['--upstream', up.url] });
  const cases: [string, [string, string][]][] = [
    // Hop-by-hop removal of the first would leave one length, as if the request had one.
    [
      'Connection: content-length and two Content-Length',
      [
        ['Connection', 'content-length'],
        ['Content-Length', '2'],
        ['Content-Length', '2'],
      ],
    ],
    [
      'two Content-Length, the second named in a later Connection line',
      [
        ['Connection', 'keep-alive'],
        ['Content-Length', '2'],
        ['Connection', 'content-length'],
        ['Content-Length', '2'],
      ],
    ],
    [
      'two Transfer-Encoding',
      [
        ['Transfer-Encoding', 'chunked'],
        ['Transfer-Encoding', 'chunked'],
      ],
    ],
    ['a Transfer-Encoding that is not chunked', [['Transfer-Encoding', 'gzip, chunked']]],
    [
      'a Transfer-Encoding that is not chunked, named in Connection',
      [
        ['Connection', 'transfer-encoding'],
        ['Transfer-Encoding', 'identity'],
      ],
    ],
  ];
  for (const [name, headers] of cases) {
    const chunked = headers.some(([n]) => n === 'Transfer-Encoding');
    const response = await request(server.url, '/ext/info', { method: 'POST', headers, body: chunked ? '2\r\n{}\r\n0\r\n\r\n' : '{}' });
    t.equal(response.status, 400, `${name}: 400`);
    t.match(
      jsonError(response),
      { code: -32600, message: /^the request cannot be forwarded: it has two|^the request cannot be forwarded: its Transfer-Encoding/ },
      `${name}: ${response.text.trim()}`,
    );
  }
  t.equal(up.seen.length, 0, 'none reached the upstream');
  const plain = await request(server.url, '/ext/info', {
    method: 'POST',
    headers: [['Transfer-Encoding', 'Chunked']],
    body: '2\r\n{}\r\n0\r\n\r\n',
  });
  t.equal(plain.status, 200, 'one chunked coding, in any case, is forwarded');
  t.equal(up.seen[0].body.toString(), '{}');
});

t.test('every Connection line names fields that are not forwarded, not only the first', async (t) => {
  await request(gateway.url, '/ext/info', {
    headers: [
      ['Authorization', bearer],
      ['Connection', 'keep-alive'],
      ['X-Hop', '1'],
      ['Connection', 'x-hop, X-Other-Hop'],
      ['X-Other-Hop', '2'],
      ['X-Kept', '3'],
    ],
  });
  const seen = lastSeen();
  t.same(
    [seen.headers['x-hop'], seen.headers['x-other-hop'], seen.headers['x-kept']],
    [undefined, undefined, '3'],
    'the fields the second line names are dropped; the rest passes',
  );
});

for (const threads of ['1', '2'])
  t.test(
    `with --api-auth-query-token, access_token never reaches the upstream in a plain HTTP request (${threads} thread(s))`,
    async (t) => {
      const server = await startServer(t, {
        cheapChecks: true,
        args: [
          '--upstream',
          upstream.url,
          '--api-auth-public-endpoints',
          '/ext/health',
          '--api-auth-query-token',
          '--http-threads',
          threads,
        ],
      });
      const token = await newToken(server.url, server.password, ['*']);
      const cases: [string, string, string][] = [
        ['with a header too', `/ext/info?access_token=${token}&x=1`, '/ext/info?x=1'],
        ['between others, twice', `/ext/info?a=1&access_token=${token}&b=2&access_token=`, '/ext/info?a=1&b=2'],
        ['alone', `/ext/info?access_token=${token}`, '/ext/info'],
        ['without the credential', '/ext/info?x=access_token', '/ext/info?x=access_token'],
      ];
      for (const [name, target, forwarded] of cases) {
        t.equal((await request(server.url, target, { headers: [['Authorization', `Bearer ${token}`]] })).status, 200, name);
        t.equal(lastSeen().url, forwarded, `${name}: the upstream is asked for ${forwarded}`);
      }
      t.equal((await request(server.url, `/ext/health?access_token=${token}`)).status, 200);
      t.equal(lastSeen().url, '/ext/health', 'a public path: the token is not passed on either');
      t.notOk(
        upstream.seen.some((r) => r.url.includes(token)),
        'the upstream never saw the token in a URL',
      );
    },
  );

t.test('the path, the query and header values reach the upstream byte for byte', async (t) => {
  const raw = await startRawUpstream(t);
  const server = await startServer(t, { auth: false, args: ['--upstream', raw.url] });
  const targets = [
    Buffer.concat([
      Buffer.from('/ext/bc/X/a%41b?x='),
      Buffer.from([0xc3, 0xa9]),
      Buffer.from('&e=%C3%A9&s='),
      Buffer.from('😀€'),
      Buffer.from("&t=~!$'()*+,;=:@/?&h=a#b"),
    ]),
    Buffer.from('/ext/info?'),
    Buffer.from('/ext/info?%zz%'),
  ];
  for (const target of targets) {
    const response = await request(server.url, target);
    t.equal(response.status, 200);
    const head = raw.heads[raw.heads.length - 1];
    const line = head.subarray(0, head.indexOf('\r\n'));
    t.same(
      line,
      Buffer.concat([Buffer.from('GET '), target, Buffer.from(' HTTP/1.1')]),
      `the request line of ${JSON.stringify(target.toString('latin1'))}`,
    );
  }
  const value = Buffer.from('a€b é c', 'utf8');
  t.equal((await request(server.url, '/ext/info', { headers: [['X-Name', value]] })).status, 200);
  const head = raw.heads[raw.heads.length - 1];
  t.ok(
    head.includes(Buffer.concat([Buffer.from('\r\nx-name: '), value, Buffer.from('\r\n')])),
    'a header value beyond ASCII, as its bytes',
  );
});

t.test('a query string that is not UTF-8 is refused with 400; nothing is forwarded', async (t) => {
  const raw = await startRawUpstream(t);
  const server = await startServer(t, { auth: false, args: ['--upstream', raw.url] });
  const response = await request(server.url, Buffer.from([...Buffer.from('/ext/info?x='), 0xe9]));
  t.equal(response.status, 400);
  t.equal(
    jsonError(response).message,
    'the query string holds bytes that are not UTF-8, which api-auth cannot forward unchanged; percent-encode them',
  );
  t.equal(raw.heads.length, 0);
});
