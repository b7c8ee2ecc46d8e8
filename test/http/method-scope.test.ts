// Tokens with a method scope: auth.newToken's `methods`, and the gate's check
// of every JSON-RPC call in the body of a request made with such a token, in front of
// an upstream (--upstream), on the built-in endpoints, at /ext/auth/check, on every HTTP
// thread, and after a restart. A refused call gets its JSON-RPC error in a 200 (Ethereum
// clients read a method's error only from a 200) and reaches nothing; a body that
// is not JSON-RPC gets 403 insufficient_scope, and so does every refusal at
// /ext/auth/check; an allowed body reaches the upstream byte for byte, and of a batch only
// the allowed calls go on, their answers merged with the refusals.
import t from 'tap';
import type { Test } from 'tap';
import { authUrl, newToken } from '../helpers/auth.js';
import { type HttpResponse, jsonrpc, KeepAliveConnection, post, request } from '../helpers/http.js';
import { serveAgain, serveInProcess } from '../helpers/library.js';
import { startServer } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';

t.jobs = 2;

const RPC_PATH = '/ext/bc/C/rpc';
const INSUFFICIENT_SCOPE = 'Bearer error="insufficient_scope"';
const SCOPE_CODE = -32047;
const METHODS = ['eth_blockNumber', 'net_*'];

/** auth.newToken with `methods`: the token, or the JSON-RPC error. */
async function scopedToken(base: string, password: string, endpoints: readonly string[], methods: unknown): Promise<string> {
  const answer = await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints, methods });
  if (typeof answer.result?.token !== 'string') throw new Error(`auth.newToken gave no token: ${JSON.stringify(answer)}`);
  return answer.result.token;
}

/** The response is the scope's refusal of a body that is not JSON-RPC: 403, the challenge, and the JSON-RPC error body (returned parsed). */
function expectScopeRefusal(t: Test, response: HttpResponse, label: string): any {
  t.equal(response.status, 403, `403 (${label})`);
  t.equal(response.headers['www-authenticate'], INSUFFICIENT_SCOPE, `WWW-Authenticate insufficient_scope (${label})`);
  t.equal(response.headers['content-type'], 'application/json', `JSON (${label})`);
  return JSON.parse(response.text);
}

/** The response is the refusal of calls the scope does not allow: 200 and no challenge, the JSON-RPC errors (returned parsed). */
function expectCallRefusal(t: Test, response: HttpResponse, label: string): any {
  t.equal(response.status, 200, `200 (${label})`);
  t.equal(response.headers['www-authenticate'], undefined, `no challenge: the token is fine, the call is not (${label})`);
  t.equal(response.headers['content-type'], 'application/json', `JSON (${label})`);
  return JSON.parse(response.text);
}

function scopeError(message: string | RegExp, id: unknown): Record<string, unknown> {
  return { jsonrpc: '2.0', error: { code: SCOPE_CODE, message }, id };
}

t.test('auth.newToken: methods must be 1 to 128 patterns, and a bad one is named by its place', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true });
  const cases: [string, unknown, RegExp][] = [
    ['an empty list', [], /^invalid params: methods must be an array of 1 to 128 JSON-RPC method patterns/],
    ['a string', 'eth_*', /^invalid params: methods must be an array/],
    ['null', null, /^invalid params: methods must be an array/],
    ['129 patterns', Array.from({ length: 129 }, (_, i) => `m${i}`), /^invalid params: methods must be an array of 1 to 128/],
    ['a number among them', ['eth_call', 7], /^invalid params: methods\[1\] must be a string/],
    ['a star inside', ['eth_call', 'eth_*x'], /^methods\[1\] "eth_\*x"/],
    ['an empty pattern', [''], /^methods\[0\] ""/],
    ['a space', ['eth call'], /^methods\[0\] "eth call"/],
    ['too long', ['m'.repeat(129)], /^methods\[0\] "m+…?": longer than 128 bytes/],
  ];
  for (const [label, methods, message] of cases) {
    const answer = await jsonrpc(authUrl(server.url), 'auth.newToken', { password: server.password, endpoints: ['*'], methods });
    t.equal(answer.error?.code, -32602, `invalid params (${label})`);
    t.match(answer.error?.message, message, `the message names the field (${label}): ${answer.error?.message}`);
  }
  t.match(await scopedToken(server.url, server.password, ['*'], ['*']), /^[A-Za-z0-9_-]{76}$/, '"*" alone is a scope');
});

t.test('in front of an upstream, a scoped token passes only bodies whose every call it allows', async (t) => {
  const upstream = await startUpstream(t);
  const server = await serveInProcess(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--upstream-max-body', '4096'] });
  const token = await scopedToken(server.url, server.password, [RPC_PATH], METHODS);
  const forwarded = async (body: string | Buffer, label: string, headers: [string, string][] = []): Promise<void> => {
    const before = upstream.seen.length;
    const response = await post(server.url, RPC_PATH, body, { token, headers });
    t.equal(response.status, 200, `200 (${label}): ${response.text}`);
    t.equal(upstream.seen.length, before + 1, `the upstream got it (${label})`);
    t.same(upstream.seen.at(-1)!.body, Buffer.from(body), `byte for byte, not re-serialised (${label})`);
  };
  const refused = async (body: string | Buffer | undefined, label: string, method = 'POST', expect = expectScopeRefusal): Promise<any> => {
    const before = upstream.seen.length;
    const headers: [string, string][] = [
      ['Authorization', `Bearer ${token}`],
      ['Content-Type', 'application/json'],
    ];
    const response = await request(server.url, RPC_PATH, { method, body, headers });
    const parsed = expect(t, response, label);
    t.equal(upstream.seen.length, before, `nothing reached the upstream (${label})`);
    return parsed;
  };
  const callRefused = (body: string, label: string): Promise<any> => refused(body, label, 'POST', expectCallRefusal);

  await forwarded('{ "id" : 7,"method":"eth_blockNumber" ,"jsonrpc":"2.0", "params":[]}', 'an exact method, odd spacing');
  await forwarded('{"jsonrpc":"2.0","method":"net_version","id":"a"}', 'a prefix pattern');
  await forwarded(
    '[{"jsonrpc":"2.0","method":"net_peerCount","id":1},\n {"jsonrpc":"2.0","method":"eth_blockNumber"}]',
    'a batch, all allowed',
  );
  await forwarded('{"jsonrpc":"2.0","method":"eth_block\\u004eumber","id":2}', 'an escaped method name');

  t.same(
    await callRefused('{"jsonrpc":"2.0","method":"eth_sendRawTransaction","params":["0x00"],"id":7}', 'a method outside the scope'),
    scopeError('the provided auth token does not allow method "eth_sendRawTransaction"', 7),
  );
  t.same(
    await callRefused('{"jsonrpc":"2.0","method":"eth_blockNumberX","id":12345678901234567890}', 'an exact pattern is no prefix'),
    // biome-ignore lint/correctness/noPrecisionLoss: the id a client sent, past a double's precision, which the answer must echo as the node reads it
    scopeError('the provided auth token does not allow method "eth_blockNumberX"', 12345678901234567890),
  );
  t.same(
    await callRefused(
      '[{"jsonrpc":"2.0","method":"debug_a","id":1},{"jsonrpc":"2.0","method":"debug_b"},{"jsonrpc":"2.0","method":"debug_c","id":"c"}]',
      'a batch with every call outside',
    ),
    [
      scopeError('the provided auth token does not allow method "debug_a"', 1),
      scopeError('the provided auth token does not allow method "debug_c"', 'c'),
    ],
    'the node is not asked: an error for each call with an id, in its place',
  );
  t.same(
    await callRefused('[{"jsonrpc":"2.0","method":"debug_x"}]', 'a batch of notifications'),
    scopeError('the provided auth token does not allow method "debug_x"', null),
    'no call has an id: one error with id null',
  );
  t.match(
    await refused(undefined, 'a GET has no body', 'GET'),
    scopeError(/the request must carry a JSON-RPC call or batch in its body, and it has none$/, null),
  );
  t.match(await refused('', 'an empty POST'), scopeError(/it has none$/, null));
  t.match(
    await refused('{"method":"eth_blockNumber"', 'not JSON'),
    scopeError(/the body is not one JSON value alone \(nothing may follow it\)$/, null),
  );
  t.match(await refused(Buffer.from([0x7b, 0xff, 0x7d]), 'not UTF-8'), scopeError(/the body is not UTF-8$/, null));
  // Go's json.Decoder reads the first value and may leave the rest: what follows would be calls nobody checked.
  t.match(
    await refused('{"jsonrpc":"2.0","method":"eth_blockNumber","id":1} {"jsonrpc":"2.0","method":"debug_x","id":2}', 'two values'),
    scopeError(/not one JSON value alone/, null),
  );
  t.match(
    await refused('[{"jsonrpc":"2.0","method":"eth_blockNumber","id":1}]x', 'a byte after the batch'),
    scopeError(/not one JSON value alone/, null),
  );
  t.match(
    await refused(
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"jsonrpc":"2.0","method":"eth_blockNumber","id":1}')]),
      'a byte order mark',
    ),
    scopeError(/starts with a byte order mark/, null),
  );
  t.match(
    await refused(
      `{"jsonrpc":"2.0","method":"eth_blockNumber","id":1,"params":${'['.repeat(128)}${']'.repeat(128)}}`,
      'params nested 129 deep',
    ),
    scopeError(/nests deeper than 128$/, null),
  );
  t.match(await refused('[]', 'an empty batch'), scopeError(/the batch is empty$/, null));
  t.match(await refused('{"jsonrpc":"2.0","id":3}', 'no method'), scopeError(/the body is not a JSON-RPC call/, 3));
  t.match(await refused('{"jsonrpc":"2.0","method":1,"id":3}', 'a method that is no string'), scopeError(/is not a JSON-RPC call/, 3));
  t.match(await refused('"eth_blockNumber"', 'a string'), scopeError(/is not a JSON-RPC call/, null));
  // Go's encoding/json matches "Method" to the method field and keeps the last: an upstream in Go would run debug_x.
  t.match(
    await refused('{"jsonrpc":"2.0","method":"eth_blockNumber","Method":"debug_x","id":4}', 'the method named twice'),
    scopeError(/names its method more than once/, 4),
  );
  t.match(
    await refused('{"jsonrpc":"2.0","method":"eth_blockNumber","method":"debug_x","id":5}', 'the same member twice'),
    scopeError(/names its method more than once/, 5),
  );
  t.match(
    await refused('{"jsonrpc":"2.0","METHOD":"eth_blockNumber","id":6}', 'the method spelled otherwise'),
    scopeError(/is not a JSON-RPC call/, 6),
  );
  t.match(
    await refused('[{"jsonrpc":"2.0","method":"eth_blockNumber","id":1},5,{"method":"net_version","id":2}]', 'a batch with a non-call'),
    scopeError(/call 1 of the batch is not a JSON-RPC call/, null),
    'one error for the batch, which is not read',
  );

  // A chunked body comes in pieces: it is gathered, checked, and sent on whole.
  const chunked = '{"jsonrpc":"2.0","method":"eth_blockNumber","id":9}';
  const before = upstream.seen.length;
  const response = await request(server.url, RPC_PATH, {
    method: 'POST',
    headers: [
      ['Authorization', `Bearer ${token}`],
      ['Content-Type', 'application/json'],
      ['Transfer-Encoding', 'chunked'],
    ],
    body: `10\r\n${chunked.slice(0, 16)}\r\n${(chunked.length - 16).toString(16)}\r\n${chunked.slice(16)}\r\n0\r\n\r\n`,
  });
  t.equal(response.status, 200, 'a chunked body whose call is allowed passes');
  t.same(upstream.seen.at(-1)!.body.toString(), chunked, 'and arrives whole');
  t.equal(upstream.seen.length, before + 1);

  const tooBig = await post(server.url, RPC_PATH, `{"jsonrpc":"2.0","method":"eth_blockNumber","params":["${'0'.repeat(5000)}"],"id":1}`, {
    token,
  });
  t.equal(tooBig.status, 413, 'a body over --upstream-max-body is refused for its size, as any');

  const unscoped = await newToken(server.url, server.password, [RPC_PATH]);
  const free = await post(server.url, RPC_PATH, '{"jsonrpc":"2.0","method":"debug_traceCall","id":1}', { token: unscoped });
  t.equal(free.status, 200, 'a token without methods passes any method, as before');
});

t.test(
  "in front of an upstream, a batch with some calls allowed sends only those, and the answers come merged in the calls' order",
  async (t) => {
    // A node that answers each call of a batch with its method's name, in the reverse order
    // (as JSON-RPC 2.0 allows), and at two paths the way a node refuses a whole batch.
    const upstream = await startUpstream(t, (req) => (_req, res, body) => {
      if (req.url === '/status') {
        res.writeHead(413, { 'Content-Type': 'text/plain' }).end('batch too large\n');
        return;
      }
      res.setHeader('Content-Type', 'application/json');
      if (req.url === '/object') {
        res.end('{"jsonrpc":"2.0","error":{"code":-32600,"message":"batches are off"},"id":null}\n');
        return;
      }
      const calls = JSON.parse(body.toString('utf8')) as { id?: unknown; method: string }[];
      // net_listening's answer holds a number past a double's precision, written as text.
      const result = (c: { method: string }) =>
        c.method === 'net_listening' ? '123456789012345678901234567890' : JSON.stringify(c.method);
      res.end(
        `[${calls
          .filter((c) => c.id !== undefined)
          .map((c) => `{"jsonrpc":"2.0","id":${JSON.stringify(c.id)},"result":${result(c)}}`)
          .reverse()
          .join(',')}]`,
      );
    });
    const server = await serveInProcess(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
    const token = await scopedToken(server.url, server.password, ['/', '/status', '/object'], METHODS);
    const batch =
      '[{"jsonrpc":"2.0","method":"debug_a","id":1}, {"jsonrpc":"2.0","method":"eth_blockNumber","id":2},' +
      '{"jsonrpc":"2.0","method":"net_version"},{"jsonrpc":"2.0","method":"debug_b"},{"jsonrpc":"2.0","method":"net_listening","id":"x"},' +
      '{"jsonrpc":"2.0","method":"debug_c","id":3}]';
    const response = await post(server.url, '/', batch, { token, headers: [['Accept-Encoding', 'gzip']] });
    t.same(
      expectCallRefusal(t, response, 'a batch of allowed and refused calls'),
      [
        scopeError('the provided auth token does not allow method "debug_a"', 1),
        { jsonrpc: '2.0', id: 2, result: 'eth_blockNumber' },
        // biome-ignore lint/correctness/noPrecisionLoss: the node's answer as JSON.parse reads it
        { jsonrpc: '2.0', id: 'x', result: 123456789012345678901234567890 },
        scopeError('the provided auth token does not allow method "debug_c"', 3),
      ],
      "each answer in its call's place; no answer for a notification, allowed or not",
    );
    t.match(
      response.text,
      '{"jsonrpc":"2.0","id":"x","result":123456789012345678901234567890}',
      'an answer goes on as the node wrote it: a number past a double keeps its digits',
    );
    t.equal(upstream.seen.length, 1, 'one request upstream');
    t.equal(
      upstream.seen[0].body.toString(),
      '[{"jsonrpc":"2.0","method":"eth_blockNumber","id":2},{"jsonrpc":"2.0","method":"net_version"},' +
        '{"jsonrpc":"2.0","method":"net_listening","id":"x"}]',
      'the allowed calls only, as one batch, each as the client wrote it',
    );
    t.equal(upstream.seen[0].headers['accept-encoding'], undefined, 'asked for an answer that can be merged: not compressed');

    const status = await post(server.url, '/status', batch, { token });
    t.equal(status.status, 413, 'a node that refuses the batch with a status: its answer as it is');
    t.equal(status.text, 'batch too large\n');
    const object = await post(server.url, '/object', batch, { token });
    t.equal(object.status, 200);
    t.same(
      JSON.parse(object.text),
      { jsonrpc: '2.0', error: { code: -32600, message: 'batches are off' }, id: null },
      'a node that answers the batch with one error object: that object as it is',
    );
    t.equal(upstream.seen.length, 3);
  },
);

t.test('the built-in endpoints: a scoped token reaches them with allowed calls only, and no probe', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true });
  const token = await scopedToken(server.url, server.password, ['/ext/info', '/ext/health'], ['info.getNodeVersion', 'health.*']);
  const call = (path: string, method: string): Promise<HttpResponse> =>
    post(server.url, path, JSON.stringify({ jsonrpc: '2.0', method, id: 1 }), { token });
  const allowed = await call('/ext/info', 'info.getNodeVersion');
  t.equal(allowed.status, 200);
  t.match(JSON.parse(allowed.text).result, { version: /^api-auth\// }, 'the endpoint answered');
  t.equal((await call('/ext/health', 'health.health')).status, 200, 'a prefix pattern');
  t.same(
    expectCallRefusal(t, await call('/ext/info', 'info.getNetworkID'), 'a method outside'),
    scopeError('the provided auth token does not allow method "info.getNetworkID"', 1),
  );
  const batch = await post(
    server.url,
    '/ext/info',
    '[{"jsonrpc":"2.0","method":"info.getNetworkID","id":1},' + '{"jsonrpc":"2.0","method":"info.getNodeVersion","id":2}]',
    { token },
  );
  const answers = expectCallRefusal(t, batch, 'a batch with one call outside');
  t.same(answers[0], scopeError('the provided auth token does not allow method "info.getNetworkID"', 1), 'the refused call in its place');
  t.match(answers[1], { id: 2, result: { version: /^api-auth\// } }, 'the allowed one answered by the endpoint');
  t.equal(answers.length, 2);
  const probe = await request(server.url, '/ext/health', { headers: [['Authorization', `Bearer ${token}`]] });
  t.match(expectScopeRefusal(t, probe, 'GET /ext/health'), scopeError(/it has none$/, null), 'the GET probe has no calls to allow');
  const metricsToken = await scopedToken(server.url, server.password, ['/ext/metrics'], ['*']);
  const metrics = await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${metricsToken}`]] });
  expectScopeRefusal(t, metrics, 'the metrics are GET: a scoped token does not read them');
});

t.test('/ext/auth/check: a scoped token fails closed without a body, and is checked with one', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true });
  const token = await scopedToken(server.url, server.password, [RPC_PATH], METHODS);
  const headers: [string, string][] = [
    ['Authorization', `Bearer ${token}`],
    ['X-Original-URI', RPC_PATH],
    ['X-Original-Method', 'POST'],
  ];
  const bare = await request(server.url, '/ext/auth/check', { headers });
  t.match(
    expectScopeRefusal(t, bare, 'an auth subrequest'),
    scopeError(/this check cannot see the request's calls \(an auth subrequest carries no body\)/, 1),
  );
  const allowed = await request(server.url, '/ext/auth/check', {
    method: 'POST',
    headers,
    body: '{"jsonrpc":"2.0","method":"net_version","id":1}',
  });
  t.equal(allowed.status, 200, 'a checker that sends the body (Envoy ext_authz) gets the calls checked');
  const refused = await request(server.url, '/ext/auth/check', {
    method: 'POST',
    headers,
    body: '{"jsonrpc":"2.0","method":"eth_call","id":1}',
  });
  t.same(
    expectScopeRefusal(t, refused, 'a call outside: 403 here, where the proxy in front needs a status'),
    scopeError('the provided auth token does not allow method "eth_call"', 1),
  );
  const unscoped = await newToken(server.url, server.password, [RPC_PATH]);
  const plain = await request(server.url, '/ext/auth/check', {
    headers: [
      ['Authorization', `Bearer ${unscoped}`],
      ['X-Original-URI', RPC_PATH],
    ],
  });
  t.equal(plain.status, 200, 'a token without methods passes as before');
});

t.test('the metrics count method checks apart from the token checks', async (t) => {
  const upstream = await startUpstream(t);
  const server = await serveInProcess(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const token = await scopedToken(server.url, server.password, [RPC_PATH], METHODS);
  const metricsToken = await newToken(server.url, server.password, ['/ext/metrics']);
  const scrape = async (): Promise<Map<string, number>> => {
    const response = await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${metricsToken}`]] });
    return new Map(
      response.text
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('#'))
        .map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]),
    );
  };
  const before = await scrape();
  await post(server.url, RPC_PATH, '{"jsonrpc":"2.0","method":"eth_blockNumber","id":1}', { token });
  await post(server.url, RPC_PATH, '{"jsonrpc":"2.0","method":"eth_call","id":1}', { token });
  await post(server.url, RPC_PATH, '{"jsonrpc":"2.0","method":"eth_call","id":1}', { token });
  await post(server.url, RPC_PATH, 'nonsense', { token });
  const forwardedBefore = upstream.seen.length;
  await post(server.url, RPC_PATH, '[{"jsonrpc":"2.0","method":"eth_call","id":1},{"jsonrpc":"2.0","method":"eth_blockNumber","id":2}]', {
    token,
  });
  t.equal(upstream.seen.length, forwardedBefore + 1, 'a split batch reaches the upstream with its allowed call');
  const after = await scrape();
  const delta = (series: string): number => (after.get(series) ?? NaN) - (before.get(series) ?? 0);
  t.equal(delta('api_auth_method_checks_total{via="http",result="allowed"}'), 1);
  t.equal(delta('api_auth_method_checks_total{via="http",result="method not allowed"}'), 3, 'a split batch counts as a refusal');
  t.equal(delta('api_auth_method_checks_total{via="http",result="not json-rpc"}'), 1);
  t.equal(delta('api_auth_upstream_errors_total{kind="other"}') || 0, 0, 'and its answer, passed on, is no upstream error');
  t.equal(delta('api_auth_verifications_total{outcome="scoped"}'), 5, 'each token check of a scoped token');
  t.equal(delta('api_auth_verifications_total{outcome="valid"}'), 1, 'the scrape itself');
});

t.test('every HTTP thread checks the methods of scoped tokens', async (t) => {
  const upstream = await startUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--http-threads', '2'] });
  const token = await scopedToken(server.url, server.password, [RPC_PATH], METHODS);
  // Connections opened one after another go to the threads in turn: four cover each twice.
  for (let i = 0; i < 4; i++) {
    const connection = new KeepAliveConnection(server.url);
    t.teardown(() => connection.close());
    const send = (method: string): Promise<HttpResponse> =>
      connection.request(RPC_PATH, {
        method: 'POST',
        body: JSON.stringify({ jsonrpc: '2.0', method, id: i }),
        headers: [
          ['Authorization', `Bearer ${token}`],
          ['Content-Type', 'application/json'],
        ],
      });
    t.equal((await send('eth_blockNumber')).status, 200, `connection ${i}: an allowed call passes`);
    const refused = await send('eth_call');
    t.same(expectCallRefusal(t, refused, `connection ${i}`), scopeError('the provided auth token does not allow method "eth_call"', i));
    t.equal((await send('net_version')).status, 200, `connection ${i}: the connection goes on after a refusal`);
  }
  const threads = new Set(upstream.seen.map((s) => s.remotePort));
  t.ok(threads.size >= 2, `the upstream was reached from ${threads.size} connections`);
});

t.test('a scoped grant is kept across a restart', async (t) => {
  const upstream = await startUpstream(t);
  const first = await serveInProcess(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const token = await scopedToken(first.url, first.password, [RPC_PATH], METHODS);
  const unscoped = await newToken(first.url, first.password, [RPC_PATH]);
  await first.stop();
  const again = await serveAgain(t, first);
  t.equal(
    (await post(again.url, RPC_PATH, '{"jsonrpc":"2.0","method":"net_version","id":1}', { token })).status,
    200,
    'allowed after the restart',
  );
  expectCallRefusal(
    t,
    await post(again.url, RPC_PATH, '{"jsonrpc":"2.0","method":"eth_call","id":1}', { token }),
    'refused after the restart',
  );
  t.equal(
    (await post(again.url, RPC_PATH, '{"jsonrpc":"2.0","method":"eth_call","id":1}', { token: unscoped })).status,
    200,
    'the same endpoints without methods are another grant, unscoped still',
  );
  const same = await scopedToken(again.url, again.password, [RPC_PATH], ['net_*', 'eth_blockNumber', 'net_*']);
  expectCallRefusal(
    t,
    await post(again.url, RPC_PATH, '{"jsonrpc":"2.0","method":"eth_call","id":1}', { token: same }),
    'the same scope, written otherwise',
  );
});
