// The gate in front of every endpoint but /ext/auth: each refusal exactly as sent, the
// request-path rules (checked before any token), endpoint matching, and the built-in
// node endpoints behind it.
import t from 'tap';
import {
  REASONS,
  authUrl,
  call,
  callWithHeader,
  expectBadPath,
  expectGranted,
  expectNotFound,
  expectRefused,
  newToken,
  tamperLast,
} from '../helpers/auth.js';
import { jsonrpc, postJson, request, rpc } from '../helpers/http.js';
import { VERSION, startServer } from '../helpers/server.js';

const [server, authOff] = await Promise.all([startServer(t, { cheapChecks: true }), startServer(t, { auth: false })]);
const AUTH = authUrl(server.url);
const [star, info, bc, belowRoot, pair] = await Promise.all([
  newToken(server.url, server.password, ['*']),
  newToken(server.url, server.password, ['/ext/info']),
  newToken(server.url, server.password, ['/ext/bc/*']),
  newToken(server.url, server.password, ['/*']),
  newToken(server.url, server.password, ['/ext/info', '/ext/health']),
]);

t.test('no Authorization header: 401 "auth token not provided"', async (t) => {
  expectRefused(t, await call(server.url, '/ext/info'), REASONS.noToken, 'POST /ext/info');
  expectRefused(t, await call(server.url, '/ext/health', undefined, 'GET'), REASONS.noToken, 'GET /ext/health');
  expectRefused(t, await call(server.url, '/no/such/path'), REASONS.noToken, 'an unknown path: the gate comes before routing');
  expectRefused(t, await callWithHeader(server.url, '/ext/info', ''), REASONS.noToken, 'an empty header');
});

t.test('an Authorization header that is not "Bearer <token>": 401 couldn\'t parse', async (t) => {
  for (const header of ['Basic dXNlcjpwYXNz', 'Token abc', 'Bearer', 'Bear', `Bearer${star}`, star, `Bearer:${star}`, `JWT ${star}`]) {
    expectRefused(t, await callWithHeader(server.url, '/ext/info', header), REASONS.badHeader, JSON.stringify(header.slice(0, 20)));
  }
});

t.test('the Bearer scheme name is matched in any case (RFC 9110)', async (t) => {
  for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
    expectGranted(t, await callWithHeader(server.url, '/ext/info', `${scheme} ${info}`), '/ext/info', scheme);
  }
});

t.test('a malformed token: 401 "the provided auth token is invalid"', async (t) => {
  const raw = Buffer.from(info, 'base64url');
  raw[0] = 2;
  const retagged = raw.toString('base64url');
  const cases: [string, string][] = [
    ['a short string', 'abc'],
    ['"=" appended', `${info}=`],
    ['one character short', info.slice(0, -1)],
    ['one character long', `${info}A`],
    ['a standard-base64 character', `${info.slice(0, 10)}+${info.slice(11)}`],
    ['another token version', retagged],
    ['a JWT', 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJlbmRwb2ludHMiOlsiKiJdfQ.c2lnbmF0dXJl'],
    ['two tokens', `${info} ${star}`],
  ];
  t.not(retagged, info);
  for (const [name, token] of cases) {
    expectRefused(t, await call(server.url, '/ext/info', token), REASONS.malformed, name);
  }
});

t.test('a forged or tampered token: 401 "...invalid: signature mismatch"', async (t) => {
  // Byte offsets within the 57 decoded bytes: the expiry, the grant id, the tag.
  const flipped = (offset: number): string => {
    const raw = Buffer.from(info, 'base64url');
    raw[offset] ^= 1;
    return raw.toString('base64url');
  };
  for (const [name, token] of [
    ['the tag changed', tamperLast(info)],
    ['the expiry changed', flipped(20)],
    ['the grant changed', flipped(24)],
    ['the first tag byte changed', flipped(25)],
  ] as const) {
    t.not(token, info);
    expectRefused(t, await call(server.url, '/ext/info', token), REASONS.badSignature, name);
  }
});

t.test('a token that does not grant the path: 401 "...does not allow access to this endpoint"', async (t) => {
  expectRefused(t, await call(server.url, '/ext/health', info), REASONS.notGranted, 'POST /ext/health');
  expectRefused(t, await call(server.url, '/ext/health', info, 'GET'), REASONS.notGranted, 'GET /ext/health');
  expectRefused(t, await call(server.url, '/no/such/path', info), REASONS.notGranted, 'an unknown path');
});

const BAD_PATHS: string[] = [
  '//',
  '//ext/info',
  '/ext//info',
  '/ext/info//',
  '/ext/bc//X',
  '/.',
  '/..',
  '/./ext/info',
  '/ext/./info',
  '/ext/../ext/info',
  '/ext/bc/../info',
  '/ext/info/.',
  '/ext/info/..',
  '/ext/info/./',
  '/ext/info/../',
  '/ext%2Finfo',
  '/ext%2finfo',
  '/ext/%2E%2E/info',
  '/ext/%2e%2e/info',
  '/ext/%2E/info',
  '/ext/%2einfo',
  '/ext/%25',
  '/ext/%252Finfo',
  '/ext/info%',
  '/ext/info%2',
  '/ext/%zzinfo',
  '/ext/%g1',
  '/ext\\info',
  '/ext/info\\',
  '/ext/..\\info',
  '/ext/info#x',
];

t.test('paths with dot or empty segments, encoded "/", "." or "%", "\\" or "#" are 400 before any token check', async (t) => {
  const targets: (string | Buffer)[] = [...BAD_PATHS, Buffer.from('/ext/\u00e9', 'utf8'), Buffer.from([0x2f, 0x7f])];
  for (const target of targets) {
    const name = JSON.stringify(target.toString('latin1'));
    const [none, withStar] = await Promise.all([call(server.url, target), call(server.url, target, star)]);
    expectBadPath(t, none, `${name}, no token`);
    expectBadPath(t, withStar, `${name}, a "*" token`);
  }
});

t.test('the path rules hold with auth off too', async (t) => {
  for (const target of ['/ext/../ext/info', '/ext//info', '/ext%2finfo', '/ext/info/.']) {
    expectBadPath(t, await call(authOff.url, target), target);
  }
  expectGranted(t, await call(authOff.url, '/ext/info'), '/ext/info', '/ext/info without a token');
  expectNotFound(t, await call(authOff.url, '/foo'), '/foo');
});

t.test('paths the rules allow are passed on as they are, undecoded', async (t) => {
  for (const path of [
    '/ext/..info',
    '/ext/info..',
    '/ext/.well-known',
    '/ext/....x',
    '/ext/%41',
    '/ext/a%20b',
    '/ext/a*b',
    '/ext/info/',
    '/ext/%69nfo',
    '/EXT/INFO',
    '/ext/info;x=1',
    '/ext/~user',
    "/ext/a:b@c!$&'()+,=",
  ]) {
    expectGranted(t, await call(server.url, path, star), path, `${path} with a "*" token`);
  }
  for (const path of ['/ext/info/', '/ext/%69nfo', '/EXT/INFO', '/ext/info;x=1']) {
    expectRefused(t, await call(server.url, path, info), REASONS.notGranted, `${path} is not /ext/info`);
  }
});

t.test('the query string is not part of the path that is checked and matched', async (t) => {
  expectGranted(t, await call(server.url, '/ext/info?x=1', info), '/ext/info?x=1');
  expectGranted(
    t,
    await call(server.url, '/ext/info?a=/../b//c%2F%25', info),
    '/ext/info?a=/../b//c%2F%25',
    'the query is not held to the path rules',
  );
  expectRefused(t, await call(server.url, '/ext/info?x=1'), REASONS.noToken, 'no token, with a query');
  expectRefused(t, await call(server.url, '/foo?/ext/info', info), REASONS.notGranted, 'a query naming a granted path');
  expectGranted(t, await call(server.url, '/ext/health?probe=1', star, 'GET'), '/ext/health?probe=1', 'GET /ext/health?probe=1');
});

t.test('an exact endpoint grants that path and nothing else', async (t) => {
  expectGranted(t, await call(server.url, '/ext/info', info), '/ext/info');
  for (const path of [
    '/ext/info/',
    '/ext/info/foo',
    '/ext/infos',
    '/ext',
    '/',
    '/anything/ext/info',
    '/ext/info/ext/info',
    '/ext/health',
    '/ext/bc/X',
  ]) {
    expectRefused(t, await call(server.url, path, info), REASONS.notGranted, path);
  }
});

t.test('a token lists several endpoints: each is granted, nothing else', async (t) => {
  expectGranted(t, await call(server.url, '/ext/info', pair), '/ext/info');
  expectGranted(t, await call(server.url, '/ext/health', pair), '/ext/health');
  expectGranted(t, await call(server.url, '/ext/health', pair, 'GET'), '/ext/health', 'GET /ext/health');
  expectRefused(t, await call(server.url, '/ext/bc/X', pair), REASONS.notGranted, '/ext/bc/X');
});

t.test('"*" grants every path', async (t) => {
  expectGranted(t, await call(server.url, '/ext/info', star), '/ext/info');
  expectGranted(t, await call(server.url, '/ext/health', star), '/ext/health');
  for (const path of ['/', '/foo', '/ext/bc/X', '/ext/bc/X/events', '/ext/metrics', '/ext/info/foo']) {
    expectGranted(t, await call(server.url, path, star), path);
  }
});

t.test('"/ext/bc/*" grants the paths below /ext/bc/ and not /ext/bc, /ext/bc/ or /ext/bcd', async (t) => {
  for (const path of ['/ext/bc/X', '/ext/bc/X/events', '/ext/bc/X/', '/ext/bc/P/ws']) {
    expectGranted(t, await call(server.url, path, bc), path);
  }
  for (const path of ['/ext/bc', '/ext/bc/', '/ext/bcd', '/ext/bcd/X', '/ext/info', '/ext/BC/X', '/']) {
    expectRefused(t, await call(server.url, path, bc), REASONS.notGranted, path);
  }
});

t.test('"/*" grants every path below the root, not "/" itself', async (t) => {
  expectGranted(t, await call(server.url, '/ext/info', belowRoot), '/ext/info');
  expectGranted(t, await call(server.url, '/foo', belowRoot), '/foo');
  expectRefused(t, await call(server.url, '/', belowRoot), REASONS.notGranted, '/');
});

t.test('an invalid endpoint entry is invalid params at newToken, and no token is issued', async (t) => {
  const invalid = [
    '',
    'ext/info',
    'ext/*',
    '//',
    '//*',
    '/ext//info',
    '/ext/./info',
    '/ext/../info',
    '/ext/.',
    '/ext/info/',
    '/ext/*/x',
    '/ext/info*',
    '/ext/*x',
    '/ext/**',
    '**',
    '*/ext',
    ' /ext/info',
    '/ext/in fo',
    '/ext/info\\x',
    '/ext/info#x',
    '/ext/%2Finfo',
    '/ext/%2e',
    '/ext/%25',
    '/ext/%zz',
    '/ext/\u00efnfo',
    '/ext/info\n',
    `/${'a'.repeat(1024)}`,
  ];
  const answers = await Promise.all(
    invalid.map((entry) => jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: [entry] })),
  );
  invalid.forEach((entry, i) => {
    const name = JSON.stringify(entry.slice(0, 30));
    t.equal(answers[i].error?.code, -32602, `${name} is refused with -32602`);
    t.notOk(answers[i].result, `no token for ${name}`);
    t.match(answers[i].error?.message ?? '', /endpoint/, `the message is about the endpoint (${name})`);
  });
  const mixed = await jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: ['/ext/info', ''] });
  t.equal(mixed.error?.code, -32602, 'one bad entry refuses the whole list');
  const valid = await Promise.all(
    ['*', '/*', '/ext/bc/*', '/ext/info', '/ext/%41', '/ext/..info', `/${'a'.repeat(1023)}`].map((entry) =>
      jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: [entry] }),
    ),
  );
  for (const answer of valid) t.type(answer.result?.token, 'string', 'a valid entry is accepted');
});

t.test('a token holds 1 to 128 entries', async (t) => {
  const entries = Array.from({ length: 128 }, (_, i) => `/ext/e${i}`);
  const token = await newToken(server.url, server.password, entries);
  expectGranted(t, await call(server.url, '/ext/e0', token), '/ext/e0');
  expectGranted(t, await call(server.url, '/ext/e127', token), '/ext/e127');
  expectRefused(t, await call(server.url, '/ext/e128', token), REASONS.notGranted, '/ext/e128');
  const [over, none] = await Promise.all([
    jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: [...entries, '/ext/e128'] }),
    jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: [] }),
  ]);
  t.equal(over.error?.code, -32602, '129 entries');
  t.equal(none.error?.code, -32602, '0 entries');
});

t.test('the built-in /ext/info answers its methods through a valid token', async (t) => {
  const headers: [string, string][] = [['Authorization', `Bearer ${info}`]];
  const url = `${server.url}/ext/info`;
  const cases: [string, unknown, unknown][] = [
    ['info.getNodeVersion', undefined, { version: `api-auth/${VERSION}`, gitCommit: '', vmVersions: {} }],
    ['info.getNetworkID', {}, { networkID: '12345' }],
    ['info.getNetworkName', {}, { networkName: 'local' }],
    ['info.isBootstrapped', { chain: 'X' }, { isBootstrapped: true }],
  ];
  for (const [method, params, result] of cases) {
    t.same(await jsonrpc(url, method, params, method, headers), { jsonrpc: '2.0', result, id: method }, method);
  }
  t.equal((await jsonrpc(url, 'info.noSuchMethod', {}, 1, headers)).error?.code, -32601, 'an unknown method');
  t.equal(
    (await jsonrpc(url, 'auth.newToken', { password: server.password, endpoints: ['*'] }, 1, headers)).error?.code,
    -32601,
    'auth methods are not served here',
  );
});

t.test('the built-in /ext/health answers POST health.* and GET through a valid token', async (t) => {
  const headers: [string, string][] = [['Authorization', `Bearer ${pair}`]];
  for (const method of ['health.health', 'health.readiness', 'health.liveness']) {
    t.same(
      await jsonrpc(`${server.url}/ext/health`, method, {}, 7, headers),
      { jsonrpc: '2.0', result: { checks: {}, healthy: true }, id: 7 },
      method,
    );
  }
  const get = await request(server.url, '/ext/health', { headers });
  t.equal(get.status, 200);
  t.match(get.headers['content-type'] ?? '', /^application\/json\b/);
  t.same(JSON.parse(get.text), { checks: {}, healthy: true });
});

t.test('the built-in endpoints follow the JSON-RPC wire rules of /ext/auth', async (t) => {
  const headers: [string, string][] = [['Authorization', `Bearer ${info}`]];
  const url = `${server.url}/ext/info`;
  const batch = await postJson(
    url,
    [rpc('info.getNetworkID', {}, 1), rpc('info.getNetworkName', {}), rpc('info.getNetworkName', {}, 2)],
    headers,
  );
  t.same(
    JSON.parse(batch.text),
    [
      { jsonrpc: '2.0', result: { networkID: '12345' }, id: 1 },
      { jsonrpc: '2.0', result: { networkName: 'local' }, id: 2 },
    ],
    'a batch, the notification left out',
  );
  const notification = await postJson(url, rpc('info.getNetworkName', {}), headers);
  t.equal(notification.status, 204, 'a notification gets 204');
  const parse = await postJson(url, '{', headers);
  t.equal(JSON.parse(parse.text).error?.code, -32700, 'a parse error');
  const wrongType = await postJson(url, rpc('info.getNetworkID', {}, 1), [...headers, ['Content-Type', 'text/plain']]);
  t.equal(wrongType.status, 415, 'content-type is checked');
  const big = JSON.stringify(rpc('info.getNetworkID', {}, 1)).padEnd(65537, ' ');
  t.equal((await postJson(url, big, headers)).status, 413, 'the body limit holds');
});

t.test('only the exact path /ext/auth skips the gate', async (t) => {
  for (const path of ['/ext/auth/', '/EXT/AUTH', '/ext/auth/x', '/ext/authx', '/x/ext/auth', '/ext/auth;x', '/ext/%61uth']) {
    const response = await postJson(`${server.url}${path}`, rpc('auth.newToken', { password: server.password, endpoints: ['*'] }, 1));
    expectRefused(t, response, REASONS.noToken, path);
  }
  for (const target of ['/ext/./auth', '//ext/auth', '/ext/x/../auth', '/ext%2Fauth']) {
    const response = await request(server.url, target, {
      method: 'POST',
      headers: [['Content-Type', 'application/json']],
      body: JSON.stringify(rpc('auth.newToken', { password: server.password, endpoints: ['*'] }, 1)),
    });
    expectBadPath(t, response, target);
  }
  const query = await postJson(`${server.url}/ext/auth?x=1`, rpc('auth.noSuchMethod', {}, 1));
  t.equal(JSON.parse(query.text).error?.code, -32601, '/ext/auth with a query string is /ext/auth');
});

t.test('an unknown path with a valid "*" token is the plain 404', async (t) => {
  for (const path of ['/foo', '/ext/bc/X', '/ext/admin', '/ext/info/foo']) {
    expectNotFound(t, await call(server.url, path, star), path);
  }
  expectNotFound(t, await call(server.url, '/foo', star, 'GET'), 'GET /foo');
});
