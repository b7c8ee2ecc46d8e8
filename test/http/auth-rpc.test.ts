// The wire rules of POST /ext/auth: JSON-RPC 2.0 requests, notifications and batches,
// id echo, the error codes, params validation, content-type, method and size limits.
import t from 'tap';
import { authUrl, call, expectGranted, expectNotFound, expectRefused, newToken, notLive, REASONS } from '../helpers/auth.js';
import { jsonrpc, parseRpc, postJson, request, rpc, type HttpResponse, type JsonRpcId, type RpcResponse } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';

const [server, authOff] = await Promise.all([startServer(t, { cheapChecks: true }), startServer(t, { auth: false })]);
const AUTH = authUrl(server.url);
const WRONG = 'not-the-password';

function json(response: HttpResponse): any {
  try {
    return JSON.parse(response.text);
  } catch {
    throw new Error(`not JSON (HTTP ${response.status}): ${JSON.stringify(response.text)}`);
  }
}

t.test('a response holds jsonrpc, then result or error, then id; errors hold only code and message', async (t) => {
  const [ok, bad] = await Promise.all([
    postJson(AUTH, rpc('auth.revokeToken', { password: server.password, token: 'not-a-token' }, 1)),
    postJson(AUTH, rpc('auth.revokeToken', { password: WRONG, token: 'not-a-token' }, 2)),
  ]);
  for (const response of [ok, bad]) {
    t.equal(response.status, 200, 'HTTP 200, errors included');
    t.match(response.headers['content-type'] ?? '', /^application\/json\b/, 'content-type application/json');
  }
  t.same(Object.keys(json(ok)), ['jsonrpc', 'result', 'id']);
  t.same(json(ok), { jsonrpc: '2.0', result: notLive('malformed'), id: 1 });
  t.same(Object.keys(json(bad)), ['jsonrpc', 'error', 'id']);
  t.same(Object.keys(json(bad).error), ['code', 'message'], 'no data member');
  t.same(json(bad), { jsonrpc: '2.0', error: { code: -32000, message: 'incorrect password' }, id: 2 });
});

t.test('the id is echoed exactly: strings, numbers, fractions, null, numbers beyond 2^53', async (t) => {
  const ids: JsonRpcId[] = ['abc', '', '\u2713 id "quoted"', 7, 0, -3, 1.5, -0.25, null];
  const answers = await Promise.all(ids.map((id) => jsonrpc(AUTH, 'auth.noSuchMethod', {}, id)));
  answers.forEach((answer, i) => t.same(answer.id, ids[i], `id ${JSON.stringify(ids[i])} on an error`));
  const success = await jsonrpc(AUTH, 'auth.revokeToken', { password: server.password, token: 'x' }, 'success-id');
  t.equal(success.id, 'success-id', 'id echoed on a result');
  t.same(success.result, notLive('malformed'));
  // JSON numbers beyond 2^53 lose digits when parsed into a double; the echo must not.
  for (const raw of ['12345678901234567890', '9007199254740993']) {
    const response = await postJson(AUTH, `{"jsonrpc":"2.0","method":"auth.noSuchMethod","params":{},"id":${raw}}`);
    t.equal(response.status, 200);
    t.match(response.text, new RegExp(`"id":${raw}}\\s*$`), `id ${raw} echoed digit for digit`);
  }
});

t.test('a request without id is a notification: it runs and gets HTTP 204 with no body', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info']);
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'before the notification');
  const revoke = await postJson(AUTH, rpc('auth.revokeToken', { password: server.password, token }));
  t.equal(revoke.status, 204, 'HTTP 204');
  t.equal(revoke.body.length, 0, 'no body');
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, 'the notification ran');
  for (const notification of [rpc('auth.noSuchMethod', {}), rpc('auth.newToken', { password: 5 })]) {
    const response = await postJson(AUTH, notification);
    t.equal(response.status, 204, `no response to the notification ${JSON.stringify(notification)}`);
    t.equal(response.body.length, 0);
  }
});

t.test('a batch is answered in request order, notifications left out', async (t) => {
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const response = await postJson(AUTH, [
    rpc('auth.noSuchMethod', {}, 1),
    rpc('auth.revokeToken', { password: server.password, token: 'junk' }, 'two'),
    rpc('auth.noSuchMethod', {}),
    5,
    { jsonrpc: '1.0', method: 'auth.noSuchMethod', id: 3 },
    rpc('auth.newToken', { password: server.password, endpoints: [] }, 4),
    rpc('auth.revokeToken', { password: server.password, token }),
    rpc('auth.revokeToken', { password: WRONG, token: 'junk' }, null),
  ]);
  t.equal(response.status, 200);
  const answers: RpcResponse[] = json(response);
  t.ok(Array.isArray(answers), 'the answer is an array');
  t.same(
    answers.map((a) => [a.id, a.error?.code ?? a.result]),
    [
      [1, -32601],
      ['two', notLive('malformed')],
      [null, -32600],
      [3, -32600],
      [4, -32602],
      [null, -32000],
    ],
  );
  for (const answer of answers) t.equal(answer.jsonrpc, '2.0');
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, 'the notification in the batch ran');
});

t.test('an empty batch is one invalid-request error, not an array', async (t) => {
  const response = await postJson(AUTH, '[]');
  t.equal(response.status, 200);
  const answer = json(response);
  t.notOk(Array.isArray(answer));
  t.equal(answer.jsonrpc, '2.0');
  t.equal(answer.error?.code, -32600);
  t.equal(answer.id, null);
});

t.test('a batch of notifications only gets HTTP 204 with no body', async (t) => {
  const response = await postJson(AUTH, [rpc('auth.noSuchMethod', {}), rpc('auth.revokeToken', { password: WRONG, token: 'x' })]);
  t.equal(response.status, 204);
  t.equal(response.body.length, 0);
});

t.test('a batch holds at most 100 requests', async (t) => {
  const hundred = Array.from({ length: 100 }, (_, i) => rpc('auth.noSuchMethod', {}, i));
  const answers: RpcResponse[] = json(await postJson(AUTH, hundred));
  t.equal(answers.length, 100, '100 requests get 100 answers');
  t.same(
    answers.map((a) => a.id),
    hundred.map((r) => r.id),
    'in request order',
  );
  const over = await postJson(AUTH, [...hundred, rpc('auth.noSuchMethod', {}, 100)]);
  t.equal(over.status, 200);
  t.same(json(over), { jsonrpc: '2.0', error: { code: -32600, message: 'batch holds more than 100 requests' }, id: null });
});

t.test('a body that is not JSON is a parse error with id null', async (t) => {
  for (const body of ['{', '', '[1,', 'nul', '{"jsonrpc":"2.0",}', "{'jsonrpc':'2.0'}", '{"id":1} x']) {
    const response = await postJson(AUTH, body);
    t.equal(response.status, 200, `HTTP 200 for ${JSON.stringify(body)}`);
    const answer = json(response);
    t.same(Object.keys(answer), ['jsonrpc', 'error', 'id']);
    t.equal(answer.error?.code, -32700, `-32700 for ${JSON.stringify(body)}`);
    t.match(answer.error?.message, /^parse error: /);
    t.same(Object.keys(answer.error ?? {}), ['code', 'message']);
    t.equal(answer.id, null);
  }
});

t.test('a body that is not a request object is an invalid request, id echoed only when valid', async (t) => {
  const cases: [string, unknown, JsonRpcId][] = [
    ['a number', 5, null],
    ['a string', 'x', null],
    ['null', null, null],
    ['true', true, null],
    ['an empty object', {}, null],
    ['jsonrpc missing', { method: 'auth.noSuchMethod', id: 1 }, 1],
    ['jsonrpc "1.0"', { jsonrpc: '1.0', method: 'auth.noSuchMethod', id: 2 }, 2],
    ['jsonrpc a number', { jsonrpc: 2, method: 'auth.noSuchMethod', id: 3 }, 3],
    ['method missing', { jsonrpc: '2.0', id: 4 }, 4],
    ['method a number', { jsonrpc: '2.0', method: 5, id: 5 }, 5],
    ['method null', { jsonrpc: '2.0', method: null, id: 6 }, 6],
    ['id an object', { jsonrpc: '2.0', method: 'auth.noSuchMethod', id: {} }, null],
    ['id an array', { jsonrpc: '2.0', method: 'auth.noSuchMethod', id: [1] }, null],
    ['id a boolean', { jsonrpc: '2.0', method: 'auth.noSuchMethod', id: true }, null],
    ['params a string', { jsonrpc: '2.0', method: 'auth.noSuchMethod', params: 'x', id: 7 }, 7],
    ['params a number', { jsonrpc: '2.0', method: 'auth.noSuchMethod', params: 5, id: 8 }, 8],
    ['params by position', { jsonrpc: '2.0', method: 'auth.newToken', params: ['pw', ['*']], id: 9 }, 9],
  ];
  const responses = await Promise.all(cases.map(([, body]) => postJson(AUTH, JSON.stringify(body))));
  cases.forEach(([name, , id], i) => {
    t.equal(responses[i].status, 200, `HTTP 200 (${name})`);
    const answer = json(responses[i]);
    t.same(answer, { jsonrpc: '2.0', error: { code: -32600, message: answer.error?.message }, id }, `-32600, id ${id} (${name})`);
    t.type(answer.error?.message, 'string');
  });
  const batch: RpcResponse[] = json(await postJson(AUTH, [1, 'x']));
  t.same(
    batch.map((a) => [a.error?.code, a.id]),
    [
      [-32600, null],
      [-32600, null],
    ],
    'each bad batch entry gets its own error',
  );
});

t.test('an unknown method is method not found, naming it', async (t) => {
  const answer = await jsonrpc(AUTH, 'auth.noSuchMethod', {}, 1);
  t.equal(answer.error?.code, -32601);
  t.match(answer.error?.message, /^method not found: /);
  t.ok(answer.error?.message.includes('auth.noSuchMethod'), `names the method: ${answer.error?.message}`);
  for (const method of ['info.getNodeVersion', 'health.health', '', 'auth.newtoken']) {
    const other = await jsonrpc(AUTH, method, {}, 2);
    t.equal(other.error?.code, -32601, `${JSON.stringify(method)} is not a method of /ext/auth`);
  }
  const long = await jsonrpc(AUTH, `auth.${'x'.repeat(1000)}`, {}, 3);
  t.equal(long.error?.code, -32601);
  t.ok(
    long.error!.message.length <= 'method not found: '.length + 64 + 8,
    `a long name is cut (message of ${long.error!.message.length} characters)`,
  );
});

t.test('missing or wrong-typed params are invalid params, checked before the password', async (t) => {
  const tooMany = Array.from({ length: 129 }, (_, i) => `/ext/e${i}`);
  const cases: [string, unknown, string][] = [
    ['auth.newToken', undefined, ''],
    ['auth.newToken', {}, ''],
    ['auth.newToken', { endpoints: ['*'] }, 'password'],
    ['auth.newToken', { password: 5, endpoints: ['*'] }, 'password'],
    ['auth.newToken', { password: null, endpoints: ['*'] }, 'password'],
    ['auth.newToken', { password: ['x'], endpoints: ['*'] }, 'password'],
    ['auth.newToken', { password: WRONG }, 'endpoints'],
    ['auth.newToken', { password: WRONG, endpoints: '*' }, 'endpoints'],
    ['auth.newToken', { password: WRONG, endpoints: { 0: '*' } }, 'endpoints'],
    ['auth.newToken', { password: WRONG, endpoints: null }, 'endpoints'],
    ['auth.newToken', { password: WRONG, endpoints: [] }, 'endpoints'],
    ['auth.newToken', { password: WRONG, endpoints: [1] }, 'endpoints'],
    ['auth.newToken', { password: WRONG, endpoints: ['*', null] }, 'endpoints'],
    ['auth.newToken', { password: WRONG, endpoints: tooMany }, 'endpoints'],
    ['auth.revokeToken', undefined, ''],
    ['auth.revokeToken', { token: 'x' }, 'password'],
    ['auth.revokeToken', { password: 1, token: 'x' }, 'password'],
    ['auth.revokeToken', { password: WRONG }, 'token'],
    ['auth.revokeToken', { password: WRONG, token: 5 }, 'token'],
    ['auth.revokeToken', { password: WRONG, token: null }, 'token'],
    ['auth.changePassword', undefined, ''],
    ['auth.changePassword', { newPassword: 'new-password' }, 'oldPassword'],
    ['auth.changePassword', { oldPassword: 5, newPassword: 'new-password' }, 'oldPassword'],
    ['auth.changePassword', { oldPassword: WRONG }, 'newPassword'],
    ['auth.changePassword', { oldPassword: WRONG, newPassword: 5 }, 'newPassword'],
    ['auth.changePassword', { oldPassword: WRONG, newPassword: '' }, 'newPassword'],
    ['auth.changePassword', { oldPassword: WRONG, newPassword: 'a'.repeat(1025) }, 'newPassword'],
    ['auth.changePassword', { oldPassword: WRONG, newPassword: '\u{1F600}'.repeat(1025) }, 'newPassword'],
  ];
  const answers = await Promise.all(cases.map(([method, params], i) => jsonrpc(AUTH, method, params, i)));
  cases.forEach(([method, params, name], i) => {
    const label = `${method} ${JSON.stringify(params)?.slice(0, 80)}`;
    t.equal(answers[i].error?.code, -32602, `-32602 for ${label}`);
    t.match(answers[i].error?.message ?? '', `invalid params: ${name}`, `the message names ${name || 'the param'} (${label})`);
    t.equal(answers[i].id, i);
  });
});

t.test('newPassword length counts code points, not UTF-16 units or bytes', async (t) => {
  const answer = await jsonrpc(AUTH, 'auth.changePassword', { oldPassword: WRONG, newPassword: '\u{1F600}'.repeat(1024) });
  t.same(
    answer.error,
    { code: -32000, message: 'incorrect password' },
    '1024 emoji (2048 UTF-16 units) pass the params check and reach the password check',
  );
});

t.test('an unknown member of params is invalid params naming it (and the likely intended one), before any password check', async (t) => {
  const endpoints = ['/ext/info'];
  const cases: [string, Record<string, unknown>, string][] = [
    [
      'auth.newToken',
      { password: server.password, endpoints, method: ['info.getNodeVersion'] },
      'invalid params: unknown param "method" (did you mean methods?); auth.newToken takes password, endpoints, methods, expiresIn, label, rateLimit, burst, quota and allowedClients',
    ],
    [
      'auth.newToken',
      { password: server.password, endpoints, expiresin: '1m' },
      'invalid params: unknown param "expiresin" (did you mean expiresIn?); auth.newToken takes password, endpoints, methods, expiresIn, label, rateLimit, burst, quota and allowedClients',
    ],
    [
      'auth.newToken',
      { password: server.password, endpoints, lifetime: 5, extra: {} },
      'invalid params: unknown param "lifetime"; auth.newToken takes password, endpoints, methods, expiresIn, label, rateLimit, burst, quota and allowedClients',
    ],
    [
      'auth.newToken',
      { password: server.password, endpoints, lable: 'x' },
      'invalid params: unknown param "lable" (did you mean label?); auth.newToken takes password, endpoints, methods, expiresIn, label, rateLimit, burst, quota and allowedClients',
    ],
    ['auth.listTokens', { password: server.password, all: true }, 'invalid params: unknown param "all"; auth.listTokens takes password'],
    [
      'auth.revokeToken',
      { password: server.password, tokenId: 't1' },
      'invalid params: unknown param "tokenId" (did you mean token?); auth.revokeToken takes password, token and id',
    ],
    [
      'auth.changePassword',
      { oldPassword: server.password, newPasword: 'another-password' },
      'invalid params: unknown param "newPasword" (did you mean newPassword?); auth.changePassword takes oldPassword and newPassword',
    ],
    [
      'auth.changePassword',
      { oldPassword: server.password, newPassword: 'another-password', password: server.password },
      'invalid params: unknown param "password"; auth.changePassword takes oldPassword and newPassword',
    ],
  ];
  const before = await jsonrpc(AUTH, 'auth.listTokens', { password: server.password });
  for (const [method, params, message] of cases) {
    const answer = await jsonrpc(AUTH, method, params);
    t.same(answer.error, { code: -32602, message }, `${method} ${Object.keys(params).join(', ')}`);
  }
  t.same(await jsonrpc(AUTH, 'auth.listTokens', { password: server.password }), before, 'no token was issued or revoked');
  const wrong = await jsonrpc(AUTH, 'auth.newToken', { password: WRONG, endpoints, extra: {} });
  t.equal(wrong.error?.code, -32602, 'refused before the password check: a wrong password with an unknown param is invalid params too');
  const long = 'x'.repeat(5000);
  const shown = await jsonrpc(AUTH, 'auth.listTokens', { password: server.password, [long]: 1 });
  t.same(
    shown.error,
    { code: -32602, message: `invalid params: unknown param "${'x'.repeat(64)}"; auth.listTokens takes password` },
    'a long name is shown cut to 64 characters',
  );
  const ok = await jsonrpc(AUTH, 'auth.newToken', {
    password: server.password,
    endpoints,
    methods: ['info.*'],
    expiresIn: '1m',
    label: 'all known',
  });
  t.type(ok.result?.token, 'string', 'every known param together still issues a token');
});

t.test('a wrong password is -32000 "incorrect password" for every method', async (t) => {
  const answers = await Promise.all([
    jsonrpc(AUTH, 'auth.newToken', { password: WRONG, endpoints: ['*'] }),
    jsonrpc(AUTH, 'auth.newToken', { password: '', endpoints: ['*'] }),
    jsonrpc(AUTH, 'auth.revokeToken', { password: WRONG, token: 'x' }),
    jsonrpc(AUTH, 'auth.changePassword', { oldPassword: WRONG, newPassword: 'another-password' }),
  ]);
  for (const answer of answers) {
    t.same(answer, { jsonrpc: '2.0', error: { code: -32000, message: 'incorrect password' }, id: 1 });
  }
});

t.test('content-type application/json is required; parameters and any case are accepted', async (t) => {
  const body = JSON.stringify(rpc('auth.noSuchMethod', {}, 1));
  for (const type of [
    'application/json',
    'application/json;charset=UTF-8',
    'application/json; charset=utf-8',
    'Application/JSON;charset=UTF-8',
    'APPLICATION/JSON',
  ]) {
    const response = await postJson(AUTH, body, [['Content-Type', type]]);
    t.equal(response.status, 200, `${type} accepted`);
    t.equal(json(response).error?.code, -32601);
  }
  const refused: [string, HttpResponse][] = [['no content-type', await request(server.url, '/ext/auth', { method: 'POST', body })]];
  for (const type of [
    'text/plain',
    'text/plain;charset=UTF-8',
    'application/jsonp',
    'application/json-patch+json',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    '',
  ]) {
    refused.push([JSON.stringify(type), await postJson(AUTH, body, [['Content-Type', type]])]);
  }
  for (const [name, response] of refused) {
    t.equal(response.status, 415, `415 for ${name}`);
    t.match(response.headers['content-type'] ?? '', /^application\/json\b/);
    const answer = json(response);
    t.equal(answer.jsonrpc, '2.0');
    t.equal(answer.error?.code, -32600, `-32600 for ${name}`);
    t.match(answer.error?.message, /application\/json/, 'the message names the expected content-type');
  }
});

t.test('any method but POST on /ext/auth is 405 with Allow: POST', async (t) => {
  for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
    const response = await request(server.url, '/ext/auth', {
      method,
      headers: [['Content-Type', 'application/json']],
      body: method === 'GET' ? undefined : JSON.stringify(rpc('auth.noSuchMethod', {}, 1)),
    });
    t.equal(response.status, 405, `${method} is 405`);
    t.equal(response.headers.allow, 'POST', `${method}: Allow: POST`);
    t.equal(json(response).error?.code, -32600, `${method}: a JSON-RPC invalid-request body`);
  }
});

t.test('a body of exactly 65536 bytes is read; one byte more is 413 and the server stays up', async (t) => {
  const request1 = JSON.stringify(rpc('auth.noSuchMethod', {}, 1));
  const exact = request1 + ' '.repeat(65536 - request1.length);
  t.equal(Buffer.byteLength(exact), 65536);
  const accepted = await postJson(AUTH, exact);
  t.equal(accepted.status, 200, '65536 bytes are accepted');
  t.equal(json(accepted).error?.code, -32601, 'and processed');

  const over = await postJson(AUTH, exact + ' ');
  t.equal(over.status, 413, '65537 bytes are refused with 413');
  t.same(json(over), { jsonrpc: '2.0', error: { code: -32600, message: 'request body exceeds 65536 bytes' }, id: null });

  const after = await jsonrpc(AUTH, 'auth.noSuchMethod', {}, 2);
  t.equal(after.error?.code, -32601, 'the server answers the next request');
});

t.test('the body limit holds for chunked bodies and for a declared length the body never reaches', async (t) => {
  const chunk = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
  const chunked = (chunks: string[]): Promise<HttpResponse> =>
    request(server.url, '/ext/auth', {
      method: 'POST',
      headers: [
        ['Content-Type', 'application/json'],
        ['Transfer-Encoding', 'chunked'],
      ],
      body: `${chunks.map(chunk).join('')}0\r\n\r\n`,
    });
  const small = JSON.stringify(rpc('auth.noSuchMethod', {}, 'chunked'));
  const accepted = await chunked([small.slice(0, 10), small.slice(10)]);
  t.equal(accepted.status, 200, 'a small chunked body is read');
  t.equal(json(accepted).id, 'chunked');
  const pad = ' '.repeat(40_000);
  const over = await chunked([small, pad, pad]);
  t.equal(over.status, 413, 'a chunked body over 65536 bytes is refused');
  t.equal(json(over).error?.code, -32600);
  const declared = await request(server.url, '/ext/auth', {
    method: 'POST',
    headers: [
      ['Content-Type', 'application/json'],
      ['Content-Length', '1000000'],
    ],
    body: small,
  });
  t.equal(declared.status, 413, 'a declared length over the limit is refused without waiting for the body');
  t.equal(json(declared).error?.code, -32600);
});

t.test('/ext/auth is 404 like any unknown path when auth is off', async (t) => {
  const off = authUrl(authOff.url);
  const post = await postJson(off, rpc('auth.newToken', { password: 'x', endpoints: ['*'] }, 1));
  expectNotFound(t, post, 'POST');
  expectNotFound(t, await request(authOff.url, '/ext/auth'), 'GET');
  expectGranted(t, await call(authOff.url, '/ext/info'), '/ext/info', 'endpoints need no token when auth is off');
});

t.test('/ext/auth needs no Authorization header and ignores one', async (t) => {
  const infoToken = await newToken(server.url, server.password, ['/ext/info']);
  const headers: [string, [string, string][]][] = [
    ['no header', []],
    ['a garbage bearer token', [['Authorization', 'Bearer garbage']]],
    ['another scheme', [['Authorization', 'Basic dXNlcjpwYXNz']]],
    ['a valid token of another endpoint', [['Authorization', `Bearer ${infoToken}`]]],
  ];
  const answers = await Promise.all(
    headers.map(([, h]) => jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: ['/ext/health'] }, 1, h)),
  );
  headers.forEach(([name], i) => t.type(answers[i].result?.token, 'string', `a token is issued with ${name}`));
});

// Last: it changes the password (twice) and so ends every token issued above.
t.test('batch entries run one after another, in order', async (t) => {
  const next = 'batch-order-password';
  const response = await postJson(AUTH, [
    rpc('auth.changePassword', { oldPassword: server.password, newPassword: next }, 1),
    rpc('auth.newToken', { password: next, endpoints: ['/ext/info'] }, 2),
    rpc('auth.changePassword', { oldPassword: next, newPassword: server.password }, 3),
  ]);
  const answers: RpcResponse[] = json(response);
  t.same(
    answers.map((a) => a.id),
    [1, 2, 3],
  );
  t.same(answers[0].result, { success: true }, 'the password changed');
  t.type(answers[1].result?.token, 'string', 'the second entry saw the new password');
  t.same(answers[2].result, { success: true }, 'the third entry changed it back');
  expectRefused(
    t,
    await call(server.url, '/ext/info', answers[1].result.token),
    REASONS.earlierGeneration,
    'the token of the middle generation',
  );
  t.ok(
    parseRpc(await postJson(AUTH, rpc('auth.newToken', { password: server.password, endpoints: ['*'] }, 4))).result?.token,
    'the first password is in force again',
  );
});
