// /ext/auth/check: the gate's verdict for the request a proxy in front names, asked
// directly and through nginx auth_request and Caddy forward_auth run for real.
import t from 'tap';
import type { Test } from 'tap';
import {
  authUrl,
  BAD_PATH_REASON,
  expectRefused,
  INCORRECT_PASSWORD,
  newToken,
  REASONS,
  refusalBody,
  REVOKED,
  revokeToken,
} from '../helpers/auth.js';
import { startCaddy, startNginx } from '../helpers/front-proxy.js';
import type { FrontProxy } from '../helpers/front-proxy.js';
import { connect } from 'node:net';
import { encodeRequest, jsonrpc, request, rpc } from '../helpers/http.js';
import type { HttpResponse } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import type { Server } from '../helpers/server.js';
import { closedPort, echo, startRawUpstream, startUpstream } from '../helpers/upstream.js';
import type { Upstream } from '../helpers/upstream.js';

const CHECK = '/ext/auth/check';

function check(base: string, headers: ReadonlyArray<readonly [string, string]>): Promise<HttpResponse> {
  return request(base, CHECK, { method: 'GET', headers });
}

// The tests of a proxy in front use it too, each with a front, an upstream and tokens of
// its own: none looks at what the others leave (issued tokens, counts).
const server = await startServer(t, { cheapChecks: true });
const info = await newToken(server.url, server.password, ['/ext/info']);
/** A server that lets the wallet's pages read its answers, for the tests that send an Origin. */
const walletApi = await startServer(t, { cheapChecks: true, args: ['--http-allowed-origins', 'https://wallet.example'] });

t.test('needs no token, and without the original URI says which headers name it', async (t) => {
  const response = await check(server.url, []);
  t.equal(response.status, 400);
  t.equal(response.headers['content-type'], 'application/json');
  const message: string = JSON.parse(response.text).error.message;
  t.match(message, /X-Original-Request/);
  t.match(message, /X-Forwarded-Uri/);
});

t.test('a token that grants the original path: 200', async (t) => {
  for (const name of ['X-Original-URI', 'X-Forwarded-Uri']) {
    const response = await check(server.url, [
      [name, '/ext/info?verbose=1'],
      ['Authorization', `Bearer ${info}`],
    ]);
    t.equal(response.status, 200, `${name}, the query left out`);
  }
  for (const line of ['GET /ext/info?verbose=1 HTTP/1.1', 'POST /ext/info HTTP/2.0', 'GET /ext/info?a b HTTP/1.0']) {
    const response = await check(server.url, [
      ['X-Original-Request', line],
      ['Authorization', `Bearer ${info}`],
    ]);
    t.equal(response.status, 200, `X-Original-Request: ${line}`);
  }
});

t.test('an X-Original-Request that is not a request line is refused, saying what it should be', async (t) => {
  for (const line of ['GET', 'GET /ext/info', '/ext/info HTTP/1.1', 'GET  HTTP/1.1', 'GET /ext/info FTP/1.0']) {
    const response = await check(server.url, [
      ['X-Original-Request', line],
      ['Authorization', `Bearer ${info}`],
    ]);
    t.equal(response.status, 400, line);
    t.match(
      JSON.parse(response.text).error.message,
      /^X-Original-Request is not a request line \("METHOD URI HTTP\/1\.1"\): set it to nginx's \$request$/,
    );
  }
});

t.test('refused as the gate refuses: the same status, headers and body', async (t) => {
  expectRefused(t, await check(server.url, [['X-Original-URI', '/ext/bc/X']]), REASONS.noToken, 'no token');
  expectRefused(
    t,
    await check(server.url, [
      ['X-Forwarded-Uri', '/ext/bc/X'],
      ['Authorization', `Bearer ${info}`],
    ]),
    REASONS.notGranted,
    'not granted',
  );
  expectRefused(
    t,
    await check(server.url, [
      ['X-Original-URI', '/ext/info'],
      ['Authorization', 'Basic abc'],
    ]),
    REASONS.badHeader,
    'not a bearer token',
  );
  const badPath = await check(server.url, [
    ['X-Original-URI', '/ext/x/../info'],
    ['Authorization', `Bearer ${info}`],
  ]);
  t.equal(badPath.status, 400, 'a path the rules refuse: 400, whatever the token');
  t.equal(badPath.text, refusalBody(BAD_PATH_REASON));
  const token = await newToken(server.url, server.password, ['/ext/info']);
  await revokeToken(server.url, server.password, token);
  expectRefused(
    t,
    await check(server.url, [
      ['X-Original-URI', '/ext/info'],
      ['Authorization', `Bearer ${token}`],
    ]),
    REASONS.revoked,
    'revoked',
  );
});

/** The three ways a proxy names the original request, and what a client's copy of each header would ask for. */
const WAYS: [string, ReadonlyArray<readonly [string, string]>][] = [
  ["nginx's request line", [['X-Original-Request', 'GET /ext/bc/X HTTP/1.1']]],
  [
    "nginx's older pair",
    [
      ['X-Original-URI', '/ext/bc/X'],
      ['X-Original-Method', 'GET'],
    ],
  ],
  [
    "Caddy's and Traefik's pair",
    [
      ['X-Forwarded-Uri', '/ext/bc/X'],
      ['X-Forwarded-Method', 'GET'],
    ],
  ],
];
const CLIENT_COPIES: ReadonlyArray<readonly [string, string]> = [
  ['X-Original-Request', 'OPTIONS /ext/info HTTP/1.1'],
  ['X-Original-URI', '/ext/info'],
  ['X-Original-Method', 'OPTIONS'],
  ['X-Forwarded-Uri', '/ext/info'],
  ['X-Forwarded-Method', 'OPTIONS'],
];

t.test('one way names the original request: any header of another way with it is refused, in every combination', async (t) => {
  const auth = ['Authorization', `Bearer ${info}`] as const;
  for (const [way, headers] of WAYS) {
    expectRefused(t, await check(server.url, [...headers, auth]), REASONS.notGranted, `${way} alone: judged`);
    const others = CLIENT_COPIES.filter(([name]) => !headers.some(([own]) => own === name));
    for (let set = 1; set < 1 << others.length; set++) {
      const copies = others.filter((_, bit) => (set >> bit) & 1);
      const response = await check(server.url, [...headers, ...copies, auth]);
      t.equal(response.status, 400, `${way} with ${copies.map(([name]) => name).join(', ')}`);
      t.match(
        JSON.parse(response.text).error.message,
        /^\/ext\/auth\/check got X-[A-Za-z-]+ with [A-Za-z-, ]+: two ways of naming the original request, so one was written by the client/,
      );
    }
  }
  const nginx = await check(server.url, [['X-Original-URI', '/ext/bc/X'], ['X-Forwarded-Method', 'GET'], auth]);
  t.match(
    JSON.parse(nginx.text).error.message,
    /\(nginx: proxy_set_header NAME ""; in the check's location; Caddy: header_up -NAME in forward_auth\)$/,
    'how to drop them',
  );
  for (const headers of [
    [['X-Original-Request', 'CONNECT /ext/info HTTP/1.1']],
    [
      ['X-Original-URI', '/ext/info'],
      ['X-Original-Method', 'CONNECT'],
    ],
    [
      ['X-Forwarded-Uri', '/ext/info'],
      ['X-Forwarded-Method', 'connect'],
    ],
  ] as const) {
    t.equal((await check(server.url, [...headers, auth])).status, 405, `an original CONNECT is refused: ${headers[0][0]}`);
  }
});

t.test('a preflight is judged like any request: without a token it is refused', async (t) => {
  const api = walletApi;
  const ways = [
    [['X-Original-Request', 'OPTIONS /ext/bc/C/rpc HTTP/1.1']],
    [
      ['X-Original-URI', '/ext/bc/C/rpc'],
      ['X-Original-Method', 'OPTIONS'],
    ],
    [
      ['X-Forwarded-Uri', '/ext/bc/C/rpc'],
      ['X-Forwarded-Method', 'OPTIONS'],
    ],
  ] as const;
  for (const way of ways) {
    const response = await check(api.url, [...way, ['Origin', 'https://wallet.example'], ['Access-Control-Request-Method', 'POST']]);
    expectRefused(t, response, REASONS.noToken, `${way[0][0]}: OPTIONS`);
    t.equal(response.headers['access-control-allow-origin'], 'https://wallet.example', 'the refusal is readable by the page');
  }
});

t.test('the original path is taken by the gate\'s rules: only the query is left out, and a raw "#" gets the gate\'s 400', async (t) => {
  const upstream = await startUpstream(t);
  const api = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const rpc = await newToken(api.url, api.password, ['/ext/bc/C/rpc']);
  for (const target of ['/ext/bc/C/rpc#/../../X/rpc', '/ext/bc/C/rpc#x', '/ext/bc/C/rpc?a#b', '/ext/bc/C/rpc?x=1']) {
    const direct = await request(api.url, target, { headers: [['Authorization', `Bearer ${rpc}`]] });
    for (const [name, value] of [
      ['X-Original-Request', `GET ${target} HTTP/1.1`],
      ['X-Original-URI', target],
      ['X-Forwarded-Uri', target],
    ]) {
      const checked = await check(api.url, [
        [name, value],
        ['Authorization', `Bearer ${rpc}`],
      ]);
      t.equal(checked.status, direct.status, `${target} in ${name}: the gate's status (${direct.status})`);
      if (direct.status !== 200) t.equal(checked.text, direct.text, `${target} in ${name}: the gate's body`);
    }
  }
});

/** The four cases every proxy in front must get right. */
async function throughProxy(t: Test, front: FrontProxy, upstream: Upstream, api: Server, gateBody: boolean): Promise<void> {
  const granted = await newToken(api.url, api.password, ['/ext/info']);
  const revoked = await newToken(api.url, api.password, ['/ext/info']);
  // The token service itself is reached through the proxy too.
  t.same(await revokeToken(front.url, api.password, revoked), REVOKED, 'auth.revokeToken through the proxy');

  const ok = await request(front.url, '/ext/info?x=1', { headers: [['Authorization', `Bearer ${granted}`]] });
  t.equal(ok.status, 200, `granted: ${ok.text} ${front.stderr()}`);
  t.equal(upstream.seen.length, 1, 'the upstream got the granted request');
  t.equal(upstream.seen[0].url, '/ext/info?x=1');
  t.equal(upstream.seen[0].headers.authorization, undefined, 'without the token');

  const cases: [string, ReadonlyArray<readonly [string, string]>, string, string][] = [
    ['not granted', [['Authorization', `Bearer ${granted}`]], '/ext/bc/X', REASONS.notGranted],
    ['no token', [], '/ext/info', REASONS.noToken],
    ['revoked', [['Authorization', `Bearer ${revoked}`]], '/ext/info', REASONS.revoked],
  ];
  for (const [label, headers, path, reason] of cases) {
    const response = await request(front.url, path, { headers });
    t.equal(response.status, 401, `${label}: 401`);
    t.equal(response.headers['www-authenticate'], 'Bearer', `${label}: the challenge`);
    if (gateBody) t.equal(response.text, refusalBody(reason), `${label}: the gate's body`);
  }
  t.equal(upstream.seen.length, 1, 'no refused request reached the upstream');
}

t.test('nginx auth_request in front: granted, not granted, no token, revoked', async (t) => {
  const upstream = await startUpstream(t);
  const api = server;
  const nginx = await startNginx(t, api.port, upstream.port);
  // nginx answers a refusal with its own page; the status and the challenge are the gate's.
  await throughProxy(t, nginx, upstream, api, false);
});

t.test("Caddy forward_auth in front: granted, not granted, no token, revoked, with the gate's own answers", async (t) => {
  const upstream = await startUpstream(t);
  const api = server;
  const caddy = await startCaddy(t, api.port, upstream.port);
  await throughProxy(t, caddy, upstream, api, true);
});

/** Every non-empty combination of the five headers that name an original request. */
const SPELLINGS = ['X-Original-Request', 'X-Original-URI', 'X-Forwarded-Uri', 'X-Original-Method', 'X-Forwarded-Method'];
const COMBINATIONS = Array.from({ length: 31 }, (_, i) => SPELLINGS.filter((_, bit) => ((i + 1) >> bit) & 1));

/**
 * The issue's four requests, each refused through the proxy without any of the five
 * headers, then sent again with each combination of them (the URIs the client would like
 * judged, and OPTIONS): none may get further, and none may reach the node.
 */
async function clientCopies(t: Test, front: FrontProxy, upstream: Upstream, api: Server): Promise<void> {
  const infoOnly = await newToken(api.url, api.password, ['/ext/info']);
  const scoped = await jsonrpc(authUrl(api.url), 'auth.newToken', {
    password: api.password,
    endpoints: ['/ext/bc/C/rpc'],
    methods: ['eth_chainId'],
  });
  const attempts: [string, string, ReadonlyArray<readonly [string, string]>, string, number][] = [
    ['no token, the URI of /ext/auth', 'POST', [], '/ext/auth', 401],
    [
      'no token, a preflight',
      'OPTIONS',
      [
        ['Origin', 'https://wallet.example'],
        ['Access-Control-Request-Method', 'POST'],
      ],
      '/ext/bc/C/rpc',
      401,
    ],
    ['a token for /ext/info only, the URI of /ext/info', 'POST', [['Authorization', `Bearer ${infoOnly}`]], '/ext/info', 401],
    ['a token with a method scope, the URI of /ext/auth', 'POST', [['Authorization', `Bearer ${scoped.result.token}`]], '/ext/auth', 403],
  ];
  const body = '{"jsonrpc":"2.0","method":"eth_sendRawTransaction","params":["0x00"],"id":1}';
  for (const [label, method, headers, uri, status] of attempts) {
    const plain = await request(front.url, '/ext/bc/C/rpc', { method, headers: [...headers, ['Content-Type', 'application/json']], body });
    t.equal(plain.status, status, `${label}, without the headers: ${status}`);
    for (const names of COMBINATIONS) {
      const copies = names.map(
        (name) => [name, name.endsWith('Method') ? 'OPTIONS' : name.endsWith('Request') ? `OPTIONS ${uri} HTTP/1.1` : uri] as const,
      );
      const response = await request(front.url, '/ext/bc/C/rpc', {
        method,
        headers: [...headers, ...copies, ['Content-Type', 'application/json']],
        body,
      });
      t.ok(
        response.status === status || response.status === 400 || response.status === 500,
        `${label}, with ${names.join(' and ')}: refused (${response.status})`,
      );
    }
  }
  t.same(
    upstream.seen.map((seen) => `${seen.method} ${seen.url}`),
    [],
    'nothing reached the node',
  );
}

t.test("nginx in front: a client's own copies of the headers that name the original request get it no further", async (t) => {
  const upstream = await startUpstream(t);
  const api = walletApi;
  await clientCopies(t, await startNginx(t, api.port, upstream.port), upstream, api);
});

t.test("Caddy in front: a client's own copies of the headers that name the original request get it no further", async (t) => {
  const upstream = await startUpstream(t);
  const api = walletApi;
  await clientCopies(t, await startCaddy(t, api.port, upstream.port), upstream, api);
});

/** The proxies in front, as the guide shows them. */
const FRONTS = [
  ['nginx', startNginx],
  ['Caddy', startCaddy],
] as const;

/** api-auth as the guide has it behind a proxy on this machine: the proxy's address trusted. */
const TRUSTING = ['--trusted-proxies', '127.0.0.1'];

// The clients of the tests on forwarding headers: loopback addresses that are not the
// proxies' own (127.0.0.1, trusted), so that the client a proxy names can be told apart
// from the proxy itself.
const CLIENT = '127.2.0.1';
const OTHER = '127.2.0.2';

/** The ways a client can write forwarding headers that name `address`. */
function forwarding(address: string): [string, ReadonlyArray<readonly [string, string]>][] {
  return [
    ['X-Forwarded-For', [['X-Forwarded-For', address]]],
    ["X-Forwarded-For ending in the proxy's address", [['X-Forwarded-For', `${address}, 127.0.0.1`]]],
    [
      'two X-Forwarded-For lines',
      [
        ['X-Forwarded-For', address],
        ['x-forwarded-for', '127.0.0.1'],
      ],
    ],
    ['Forwarded', [['Forwarded', `for=${address}`]]],
    ['X-Real-IP', [['X-Real-IP', address]]],
    [
      'all three',
      [
        ['Forwarded', `for="${address}"`],
        ['X-Real-IP', address],
        ['X-Forwarded-For', address],
      ],
    ],
  ];
}

for (const [name, start] of FRONTS) {
  t.test(
    `${name} in front of an api-auth that trusts it: a token's allowedClients see the connection's client, whatever forwarding headers it writes`,
    async (t) => {
      const upstream = await startUpstream(t);
      const api = await startServer(t, { cheapChecks: true, args: TRUSTING });
      const front = await start(t, api.port, upstream.port);
      const issued = await jsonrpc(authUrl(api.url), 'auth.newToken', {
        password: api.password,
        endpoints: ['/ext/info'],
        allowedClients: [CLIENT],
      });
      const auth = ['Authorization', `Bearer ${issued.result.token}`] as const;
      const from = async (address: string, headers: ReadonlyArray<readonly [string, string]>): Promise<number> =>
        (await request(front.url, '/ext/info', { headers: [auth, ...headers], localAddress: address })).status;
      t.equal(await from(CLIENT, []), 200, 'from the client it allows');
      t.equal(await from(OTHER, []), 403, 'from another client');
      for (const [label, headers] of forwarding(CLIENT))
        t.equal(await from(OTHER, headers), 403, `from another client, naming the allowed one in ${label}`);
      for (const [label, headers] of forwarding(OTHER))
        t.equal(await from(CLIENT, headers), 200, `from the allowed client, naming another in ${label}`);
      t.equal(upstream.seen.length, 1 + forwarding(OTHER).length, "only the allowed client's requests reached the node");
    },
  );

  t.test(
    `${name} in front of an api-auth that trusts it: wrong passwords count against the connection's client, whatever forwarding headers they carry`,
    async (t) => {
      const upstream = await startUpstream(t);
      const api = await startServer(t, { cheapChecks: true, args: TRUSTING });
      const front = await start(t, api.port, upstream.port);
      const guess = (address: string, headers: ReadonlyArray<readonly [string, string]>): Promise<HttpResponse> =>
        request(front.url, '/ext/auth', {
          method: 'POST',
          localAddress: address,
          headers: [['Content-Type', 'application/json'], ...headers],
          body: JSON.stringify(rpc('auth.newToken', { password: `not-${api.password}`, endpoints: ['/ext/info'] }, 1)),
        });
      // Sent at once: a check counts from the moment it starts, so one client gets its burst of
      // 3 and no more however slow the machine. Each names a client of its own, in every header
      // a client can write.
      const headers = Array.from(
        { length: 6 },
        (_, i) =>
          [
            ['X-Forwarded-For', `198.51.100.${i + 1}`],
            ['Forwarded', `for=198.51.100.${i + 1}`],
            ['X-Real-IP', `198.51.100.${i + 1}`],
          ] as const,
      );
      const answers = await Promise.all(headers.map((own) => guess(CLIENT, own)));
      const checked = answers.filter((answer) => answer.status === 200);
      const throttled = answers.filter((answer) => answer.status === 429);
      t.equal(checked.length, 3, `the burst of one client: 3 checks (${answers.map((answer) => answer.status).join(', ')})`);
      for (const answer of checked) t.match(JSON.parse(answer.text), { error: INCORRECT_PASSWORD }, 'a check: incorrect password');
      t.equal(throttled.length, 3, 'and then 429');
      for (const answer of throttled) {
        t.match(answer.headers['retry-after'], /^[1-9]\d*$/, 'with Retry-After');
        t.match(JSON.parse(answer.text), { error: { code: -32005, message: /^too many failed password attempts; retry in \d+ s$/ } });
      }
      const elsewhere = await guess(OTHER, headers[0]);
      t.equal(elsewhere.status, 200, "another client, naming the first one's address, still gets its own check");
      t.match(JSON.parse(elsewhere.text), { error: INCORRECT_PASSWORD });
    },
  );
}

/** A token with a rate limit of one call an hour, for `endpoints`. */
async function oncePerHour(api: Server, endpoints: readonly string[]): Promise<string> {
  return (await jsonrpc(authUrl(api.url), 'auth.newToken', { password: api.password, endpoints, rateLimit: '1/h', burst: 1 })).result.token;
}

t.test(
  "a token past its rate through nginx and Caddy: 429 with Retry-After and -32005, and the node's own error statuses pass untouched",
  async (t) => {
    // The node's own 500 and 503 are its answers, not the check's: nginx must not map them.
    const upstream = await startUpstream(t, (req) =>
      req.url === '/ext/node/500' || req.url === '/ext/node/503'
        ? (req, res) => {
            res.writeHead(Number(req.url!.slice(-3)), { 'Content-Type': 'text/plain', 'Retry-After': '7', 'X-Node': 'own' });
            res.end("the node's own answer\n");
          }
        : echo,
    );
    const api = server;
    for (const [name, start] of FRONTS) {
      const front = await start(t, api.port, upstream.port);
      const token = await oncePerHour(api, ['/ext/info']);
      const auth = [['Authorization', `Bearer ${token}`]] as const;
      t.equal((await request(front.url, '/ext/info', { headers: auth })).status, 200, `${name}: the first call passes`);
      const limited = await request(front.url, '/ext/info', { headers: auth });
      t.equal(limited.status, 429, `${name}: the next is past the rate: 429 (${limited.status} ${limited.text})`);
      const wait = limited.headers['retry-after'];
      t.match(wait, /^[1-9]\d*$/, `${name}: Retry-After, whole seconds`);
      t.ok(Number(wait) <= 3600, `${name}: at most the hour the rate refills in (${wait})`);
      t.equal(limited.headers['content-type'], 'application/json', `${name}: JSON`);
      t.same(
        JSON.parse(limited.text),
        {
          jsonrpc: '2.0',
          error: { code: -32005, message: `the provided auth token is past its rate limit; retry in ${wait} s` },
          id: null,
        },
        `${name}: the gate's body`,
      );
      const open = [['Authorization', `Bearer ${await newToken(api.url, api.password, ['/ext/node/500', '/ext/node/503'])}`]] as const;
      for (const status of [500, 503]) {
        const own = await request(front.url, `/ext/node/${status}`, { headers: open });
        t.equal(own.status, status, `${name}: the node's ${status}`);
        t.equal(own.text, "the node's own answer\n", `${name}: with the node's body`);
        t.equal(own.headers['x-node'], 'own', `${name}: and its headers`);
        t.equal(own.headers['retry-after'], '7', `${name}: its Retry-After too`);
      }
    }
    t.same(
      upstream.seen.map((seen) => seen.url),
      ['/ext/info', '/ext/node/500', '/ext/node/503', '/ext/info', '/ext/node/500', '/ext/node/503'],
      'the calls past the rate never reached the node',
    );
  },
);

t.test("nginx in front: the check's other failures stay 500", async (t) => {
  const upstream = await startUpstream(t);
  const nginx = await startNginx(t, server.port, upstream.port);
  const auth = [['Authorization', `Bearer ${info}`]] as const;
  const badPath = await request(nginx.url, '/ext/x/../info', { headers: auth });
  t.equal(badPath.status, 500, "a path the rules refuse (the check's 400)");
  const unreachable = await startNginx(t, await closedPort(), upstream.port);
  const down = await request(unreachable.url, '/ext/info', { headers: auth });
  t.equal(down.status, 500, "api-auth not there (the check's 502)");
  t.equal(down.headers['retry-after'], undefined, 'with no Retry-After');
  t.same(upstream.seen, [], 'neither reached the node');
});

t.test('a raw "#" in the request target, through nginx and Caddy: the check answers as the gate, and the node sees nothing', async (t) => {
  const upstream = await startUpstream(t);
  const api = server;
  const infoOnly = await newToken(api.url, api.password, ['/ext/info']);
  for (const [name, front] of [
    ['nginx', await startNginx(t, api.port, upstream.port)],
    ['Caddy', await startCaddy(t, api.port, upstream.port)],
  ] as const) {
    const response = await request(front.url, '/ext/info#/../bc/C/rpc', { headers: [['Authorization', `Bearer ${infoOnly}`]] });
    t.not(response.status, 200, `${name}: refused (${response.status})`);
  }
  t.same(
    upstream.seen.map((seen) => seen.url),
    [],
    'nothing reached the node',
  );
});

t.test('bytes 0x80-0xFF at the end of the path, through nginx and Caddy: judged with them, as the gate judges them', async (t) => {
  const node = await startRawUpstream(t);
  const nodePort = Number(new URL(node.url).port);
  const api = server;
  const infoOnly = await newToken(api.url, api.password, ['/ext/info']);
  const auth = [['Authorization', `Bearer ${infoOnly}`]] as const;
  const fronts = [
    ['nginx', await startNginx(t, api.port, nodePort)],
    ['Caddy', await startCaddy(t, api.port, nodePort)],
  ] as const;
  for (const tail of ['\xc3\xa9', '\x80', '\xff', '\xa0\xa0']) {
    const target = Buffer.from(`/ext/info${tail}`, 'latin1');
    const direct = await request(api.url, target, { headers: auth });
    t.not(direct.status, 200, `the gate refuses ${JSON.stringify(tail)} (${direct.status})`);
    const line = await check(api.url, [
      ['X-Original-Request', Buffer.concat([Buffer.from('GET '), target, Buffer.from(' HTTP/1.1')]).toString('latin1')],
      ...auth,
    ]);
    t.equal(line.status, direct.status, `X-Original-Request ending in ${JSON.stringify(tail)}: the gate's status`);
    for (const [name, front] of fronts) {
      const response = await request(front.url, target, { headers: auth });
      t.not(response.status, 200, `${name}, ${JSON.stringify(tail)}: refused (${response.status})`);
    }
  }
  t.same(node.heads, [], 'nothing reached the node');
  for (const [name, front] of fronts) {
    const query = await request(front.url, Buffer.from('/ext/info?a=\xc3\xa9', 'latin1'), { headers: auth });
    t.equal(query.status, 200, `${name}: such bytes in the query are the node's business`);
  }
  t.equal(node.heads.length, 2, 'both reached the node');
});

/** Every byte the server sends for `bytes` on a connection it closes after answering. */
function rawAnswer(base: string, bytes: Buffer): Promise<Buffer> {
  const { hostname, port } = new URL(base);
  return new Promise((done, fail) => {
    const chunks: Buffer[] = [];
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(bytes));
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', fail);
    socket.on('close', () => done(Buffer.concat(chunks)));
  });
}

t.test("HEAD: the check's answer goes without its body, whatever it says", async (t) => {
  const head = async (headers: [string, string][], status: number, label: string): Promise<void> => {
    const bytes = await rawAnswer(server.url, encodeRequest(server.url, CHECK, { method: 'HEAD', headers }));
    const text = bytes.toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    t.not(end, -1, `a whole head (${label})`);
    t.match(text, new RegExp(`^HTTP/1\\.1 ${status} `), `${status} (${label})`);
    t.match(text.slice(0, end), /\r\ncontent-length: [1-9]\d*/i, `the length of the body a GET would get (${label})`);
    t.equal(text.slice(end + 4), '', `and no byte of it (${label})`);
  };
  await head(
    [
      ['Authorization', `Bearer ${info}`],
      ['X-Original-URI', '/ext/info'],
    ],
    200,
    'granted',
  );
  await head([['X-Original-URI', '/ext/info']], 401, 'refused: no token');
  await head(
    [
      ['Authorization', `Bearer ${info}`],
      ['X-Original-URI', '/ext/health'],
    ],
    401,
    'refused: not granted',
  );
  await head([['Authorization', `Bearer ${info}`]], 400, 'no original request named');
});
