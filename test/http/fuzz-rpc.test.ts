// Generated input on POST /ext/auth (fast-check): arbitrary JSON, near-valid JSON-RPC
// with wrong types, random bytes, mutated JSON, batches, deep and huge values within
// 64 KiB, other content-types, other HTTP methods, chunked bodies. Every answer must be
// what the wire rules say, computed by a model of them (helpers/fuzz.ts): never a 5xx,
// never a hang, never a malformed reply, and the server still answers a health probe
// after every run of cases. The cases go out over keep-alive connections, a few at a
// time, so a reply that leaves a connection out of step fails too.
//
// Wrong passwords are never sent (they would trip the per-client throttle): a generated
// request that would check one, or would change the password, is discarded.
import fc from 'fast-check';
import t from 'tap';
import { authUrl, newToken } from '../helpers/auth.js';
import { encodeRequest, jsonrpc, overKeepAlive, request, type HttpResponse } from '../helpers/http.js';
import { BUSY, MAX_BODY, bodyProblem, checkProperty, expectBody, type BodyExpectation, type GrantVerdict } from '../helpers/fuzz.js';
import { startServer } from '../helpers/server.js';

const server = await startServer(t, { cheapChecks: true });
const PASSWORD = server.password;
const [healthToken, victim] = await Promise.all([
  newToken(server.url, PASSWORD, ['/ext/health']),
  newToken(server.url, PASSWORD, ['/ext/info']),
]);

const CONNECTIONS = 6;
const RUNS = 100;
const CASES_PER_RUN = 20;

// ---------------------------------------------------------------------------------
// Endpoint lists whose fate the model knows (the core's own tests pin the rules).

const VALID_ENDPOINTS = [
  '*',
  '/*',
  '/ext/info',
  '/ext/health',
  '/ext/bc/X',
  '/ext/bc/*',
  '/a/b/c/d',
  '/ext/%41',
  '/ext/..info',
  `/${'a'.repeat(1023)}`,
];
const INVALID_ENDPOINTS = [
  '',
  'ext/info',
  'ext/*',
  '/',
  '//',
  '/ext//info',
  '/ext/./info',
  '/ext/../info',
  '/ext/info/',
  '/ext/*/x',
  '/ext/info*',
  '/ext/**',
  '**',
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
  '/ext/\u{1F600}',
];
const validSet = new Set(VALID_ENDPOINTS);
const invalidSet = new Set(INVALID_ENDPOINTS);

function grantVerdict(endpoints: string[]): GrantVerdict {
  // "*" beside an invalid entry is pinned by its own test below, not here.
  if (endpoints.includes('*') && endpoints.some((e) => !validSet.has(e))) return 'unknown';
  if (endpoints.every((e) => validSet.has(e))) return 'valid';
  return endpoints.some((e) => invalidSet.has(e)) ? 'invalid' : 'unknown';
}

// ---------------------------------------------------------------------------------
// Generators. Member values are JSON source text, so ids like 1e400 or 1.0 keep their
// spelling on the wire.

const raw = (value: unknown): string => JSON.stringify(value);
const deepArray = fc.integer({ min: 1, max: 4000 }).map((n) => '['.repeat(n) + ']'.repeat(n));
const deepObject = fc.integer({ min: 1, max: 2000 }).map((n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n));

/** Any JSON value but a string. */
const notAString = fc.oneof(
  fc.constantFrom('null', 'true', 'false', '0', '-1', '1.5', '1e400', '[]', '{}', '["x"]', '{"a":1}', '[null]'),
  deepArray,
  deepObject,
  fc
    .jsonValue({ maxDepth: 3 })
    .filter((v) => typeof v !== 'string')
    .map(raw),
);

/** A string that is not the password (only sent where something else fails first). */
const wrongPassword = fc
  .oneof(fc.constantFrom('', 'wrong', PASSWORD.toUpperCase(), ` ${PASSWORD}`, `${PASSWORD}\n`), fc.string())
  .filter((s) => s !== PASSWORD)
  .map(raw);

const passwordValue = fc.oneof(
  { arbitrary: fc.constant(raw(PASSWORD)), weight: 3 },
  { arbitrary: notAString, weight: 4 },
  { arbitrary: wrongPassword, weight: 3 },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

const endpointList = (pool: readonly string[], min = 1, max = 4) => fc.array(fc.constantFrom(...pool), { minLength: min, maxLength: max });
const endpointsValue = fc.oneof(
  { arbitrary: endpointList(VALID_ENDPOINTS).map(raw), weight: 5 },
  { arbitrary: endpointList(INVALID_ENDPOINTS).map(raw), weight: 2 },
  { arbitrary: fc.tuple(endpointList(VALID_ENDPOINTS), endpointList(INVALID_ENDPOINTS)).map(([a, b]) => raw([...a, ...b])), weight: 2 },
  {
    arbitrary: fc.constantFrom(
      '[]',
      raw(Array(129).fill('/a')),
      raw(Array(10_000).fill('/a')),
      '"*"',
      '{"0":"*"}',
      'null',
      '["*",null]',
      '[1]',
      '[["*"]]',
      raw(Array(128).fill('/ext/info')),
    ),
    weight: 3,
  },
  { arbitrary: fc.array(fc.string({ maxLength: 12 }), { maxLength: 5 }).map(raw), weight: 1 },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

const tokenValue = fc.oneof(
  fc.constantFrom(raw(victim), raw(''), raw('x'), raw(`${victim}=`), raw(victim.slice(0, -1)), raw('A'.repeat(76))),
  fc.string({ maxLength: 100 }).map(raw),
  fc.stringMatching(/^[A-Za-z0-9_-]{76}$/).map(raw),
  notAString,
  fc.constant(undefined),
);

const newPasswordValue = fc.oneof(
  fc.constantFrom(
    raw(PASSWORD),
    raw(''),
    raw('a'.repeat(1025)),
    raw('\u{1F600}'.repeat(1025)),
    raw('\u{1F600}'.repeat(1024)),
    raw('new-password'),
  ),
  fc.string({ maxLength: 40 }).map(raw),
  notAString,
  fc.constant(undefined),
);

type Members = [string, string | undefined][];

const extraMembers: fc.Arbitrary<Members> = fc.array(
  fc.tuple(
    fc.constantFrom('extra', '__proto__', 'constructor', 'toString', 'Password', 'password ', 'endpoints2', 'token'),
    fc.jsonValue({ maxDepth: 2 }).map(raw),
  ),
  { maxLength: 2 },
);

const paramsFor: Record<string, fc.Arbitrary<Members>> = {
  'auth.newToken': fc.tuple(passwordValue, endpointsValue).map(([password, endpoints]) => [
    ['password', password],
    ['endpoints', endpoints],
  ]),
  'auth.revokeToken': fc.tuple(passwordValue, tokenValue).map(([password, token]) => [
    ['password', password],
    ['token', token],
  ]),
  'auth.changePassword': fc.tuple(passwordValue, newPasswordValue).map(([oldPassword, newPassword]) => [
    ['oldPassword', oldPassword],
    ['newPassword', newPassword],
  ]),
};

const methodValue = fc.oneof(
  { arbitrary: fc.constantFrom(raw('auth.newToken'), raw('auth.revokeToken'), raw('auth.changePassword')), weight: 12 },
  {
    arbitrary: fc.constantFrom(
      raw('auth.newtoken'),
      raw('AUTH.NEWTOKEN'),
      raw('auth.newToken '),
      raw('auth'),
      raw(''),
      raw('info.getNodeVersion'),
      raw('rpc.discover'),
      raw('__proto__'),
      raw('constructor'),
      raw('toString'),
      raw('hasOwnProperty'),
      raw('x'.repeat(5000)),
      raw('\u{1F600}'.repeat(70)),
      raw('auth.newToken\u0000'),
      '5',
      'null',
      '["auth.newToken"]',
      '{}',
    ),
    weight: 3,
  },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 80 }).map(raw), weight: 1 },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

const jsonrpcValue = fc.oneof(
  { arbitrary: fc.constant(raw('2.0')), weight: 16 },
  { arbitrary: fc.constantFrom(raw('1.0'), raw('2'), '2.0', '2', 'null', raw('2.0 '), raw(' 2.0'), raw('\uFF12.0'), '["2.0"]'), weight: 2 },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

/** Ids as written: undefined (a notification), valid ones and ones of a wrong type. */
const idValue = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 3 },
  { arbitrary: fc.integer().map(raw), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).map(raw), weight: 3 },
  { arbitrary: fc.constant('null'), weight: 1 },
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }).map(raw), weight: 1 },
  {
    arbitrary: fc.constantFrom(
      '1e400',
      '-1e400',
      '12345678901234567890',
      '-0',
      '1.0',
      '1E2',
      '0.1e1',
      '-1.5e-300',
      '9007199254740993',
      '1.00000000000000000001',
      `1${'0'.repeat(400)}`,
      '4.0e0',
    ),
    weight: 2,
  },
  { arbitrary: fc.constantFrom('true', 'false', '{}', '[]', '[1]', '{"id":1}'), weight: 1 },
);

interface Request {
  text: string;
  /** The id's source text, when it is a number (the server must echo the digits). */
  rawId?: string;
}

const whitespace = fc.constantFrom('', ' ', '\n', '\t', '\r\n  ');

function objectText(members: Members, space: string, order: number): string {
  const present = members.filter((m): m is [string, string] => m[1] !== undefined);
  // A fixed shuffle from `order`, so member order varies too.
  for (let i = present.length - 1; i > 0; i--) {
    const j = (order >> (i * 2)) % (i + 1);
    [present[i], present[j]] = [present[j], present[i]];
  }
  return `{${space}${present.map(([k, v]) => `${raw(k)}${space}:${space}${v}`).join(`,${space}`)}${space}}`;
}

/** A request object close to a valid one: each member right most of the time. */
const nearValidRequest: fc.Arbitrary<Request> = fc
  .record({
    jsonrpc: jsonrpcValue,
    method: methodValue,
    id: idValue,
    duplicateId: fc.option(
      idValue.filter((v) => v !== undefined),
      { freq: 12 },
    ),
    paramsKind: fc.oneof(
      { arbitrary: fc.constant('object' as const), weight: 14 },
      { arbitrary: fc.constantFrom('[]', '["pw",["*"]]', 'null', '"x"', '1', 'true'), weight: 1 },
      { arbitrary: fc.constant(undefined), weight: 1 },
    ),
    params: fc.record(paramsFor),
    extra: extraMembers,
    space: whitespace,
    order: fc.nat(),
  })
  .map(({ jsonrpc: version, method, id, duplicateId, paramsKind, params, extra, space, order }) => {
    // The params usually belong to the method named, sometimes to another one.
    const names = Object.keys(paramsFor);
    const named = names.find((name) => raw(name) === method);
    const members = params[named !== undefined && order % 5 !== 0 ? named : names[order % names.length]];
    let paramsText: string | undefined;
    if (paramsKind === 'object') paramsText = objectText([...members, ...extra], space, order >> 3);
    else paramsText = paramsKind;
    const top: Members = [
      ['jsonrpc', version],
      ['method', method],
      ['params', paramsText],
      ['id', id],
    ];
    let text = objectText(top, space, order);
    let lastId = id;
    if (duplicateId !== null && id !== undefined) {
      // A repeated member: JSON.parse keeps the last one, and so must the id echo.
      text = `${text.slice(0, -1)},"id":${duplicateId}}`;
      lastId = duplicateId;
    }
    const numeric = lastId !== undefined && typeof JSON.parse(lastId) === 'number';
    return { text, rawId: numeric ? lastId : undefined };
  });

/** Objects with the right member names and values of any type. */
const wrongTypes: fc.Arbitrary<Request> = fc
  .dictionary(
    fc.constantFrom('jsonrpc', 'method', 'params', 'id'),
    fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constantFrom('2.0', 'auth.newToken', 'auth.revokeToken')),
  )
  .map((o) => ({ text: raw(o) }));

const singleRequest = fc.oneof(
  { arbitrary: nearValidRequest, weight: 8 },
  { arbitrary: wrongTypes, weight: 2 },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => ({ text: raw(v) })), weight: 1 },
);

const batch = fc.array(singleRequest, { minLength: 0, maxLength: 10 }).map((entries) => `[${entries.map((e) => e.text).join(',')}]`);

/** 100 entries is the most a batch holds; past it, one error. */
const bigBatch = fc
  .tuple(
    fc.constantFrom(99, 100, 101, 150, 1000),
    fc.constantFrom(
      raw({ jsonrpc: '2.0', method: 'auth.nope', id: 1 }),
      raw({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: 1 }, id: 'x' }),
      raw({ jsonrpc: '2.0', method: 'auth.newToken', params: {} }),
      '1',
      '[]',
      'null',
    ),
  )
  .map(([n, entry]) => `[${Array(n).fill(entry).join(',')}]`);

/** Valid requests with a few bytes changed, inserted or deleted. */
const mutatedJson = fc
  .tuple(
    nearValidRequest,
    fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom('set', 'insert', 'delete')), {
      minLength: 1,
      maxLength: 3,
    }),
  )
  .map(([request, edits]) => {
    const bytes = [...Buffer.from(request.text)];
    for (const [at, byte, how] of edits) {
      const i = at % (bytes.length + 1);
      if (how === 'insert') bytes.splice(i, 0, byte);
      else if (how === 'delete') bytes.splice(i, 1);
      else bytes[Math.min(i, bytes.length - 1)] = byte;
    }
    return Buffer.from(bytes);
  });

/** Deep and huge values, all within 64 KiB, and bodies around the limit. */
const hugeOrDeep = fc.oneof(
  fc.integer({ min: 1, max: 32_000 }).map((n) => '['.repeat(n) + ']'.repeat(n)),
  fc.integer({ min: 1, max: 10_000 }).map((n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)),
  fc
    .integer({ min: 1, max: 20_000 })
    .map(
      (n) => `{"jsonrpc":"2.0","method":"auth.newToken","params":{"password":${'['.repeat(n)}${']'.repeat(n)},"endpoints":["*"]},"id":1}`,
    ),
  fc.integer({ min: 1, max: 60_000 }).map((n) => raw({ jsonrpc: '2.0', method: 'm'.repeat(n), id: 2 })),
  fc.integer({ min: 1, max: 60_000 }).map((n) => raw({ jsonrpc: '2.0', method: 'auth.x', id: 'i'.repeat(n) })),
  fc.integer({ min: 1, max: 60_000 }).map((n) => `{"jsonrpc":"2.0","method":"auth.x","id":${'9'.repeat(n)}}`),
  fc.integer({ min: 1, max: 60_000 }).map((n) => `{"jsonrpc":"2.0","method":"auth.x","id":0.${'1'.repeat(n)}}`),
  fc.constant(raw({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: PASSWORD, endpoints: Array(10_000).fill('/a') }, id: 3 })),
  fc.integer({ min: MAX_BODY - 40, max: MAX_BODY + 40 }).map((n) => {
    const request = raw({ jsonrpc: '2.0', method: 'auth.x', id: 4 });
    return request + ' '.repeat(Math.max(0, n - request.length));
  }),
  fc.integer({ min: 1, max: 1000 }).map((n) => raw({ jsonrpc: '2.0', method: 'auth.x', params: { s: '\u{1F600}'.repeat(n * 16) }, id: 5 })),
);

const bodyArb: fc.Arbitrary<{ body: Buffer; rawId?: string; kind: string }> = fc.oneof(
  { arbitrary: nearValidRequest.map((r) => ({ body: Buffer.from(r.text), rawId: r.rawId, kind: 'near-valid request' })), weight: 40 },
  { arbitrary: batch.map((b) => ({ body: Buffer.from(b), kind: 'batch' })), weight: 14 },
  { arbitrary: bigBatch.map((b) => ({ body: Buffer.from(b), kind: 'big batch' })), weight: 2 },
  { arbitrary: wrongTypes.map((r) => ({ body: Buffer.from(r.text), kind: 'wrong types' })), weight: 6 },
  { arbitrary: fc.jsonValue().map((v) => ({ body: Buffer.from(raw(v)), kind: 'any JSON' })), weight: 8 },
  { arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => ({ body: Buffer.from(b), kind: 'random bytes' })), weight: 6 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 200 }).map((s) => ({ body: Buffer.from(s), kind: 'random text' })), weight: 3 },
  { arbitrary: mutatedJson.map((b) => ({ body: b, kind: 'mutated JSON' })), weight: 8 },
  { arbitrary: hugeOrDeep.map((b) => ({ body: Buffer.from(b), kind: 'huge or deep' })), weight: 5 },
);

const JSON_TYPES = [
  'application/json',
  'Application/JSON',
  'application/json; charset=utf-8',
  'APPLICATION/JSON;charset=UTF-8',
  'application/json ;x=y',
  '\tapplication/json',
];
const OTHER_TYPES = [
  '',
  'text/plain',
  'application/jsonx',
  'application/json-rpc',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'json',
  'application/',
  'text/json',
  'application/json,text/plain',
  'application/ json',
];
const contentType = fc.oneof(
  { arbitrary: fc.constant('application/json' as string | undefined), weight: 30 },
  { arbitrary: fc.constantFrom(...JSON_TYPES), weight: 3 },
  { arbitrary: fc.constantFrom(...OTHER_TYPES, undefined), weight: 2 },
  // Visible ASCII, space and tab: uWS gives no answer at all to a header with other control bytes (limits.test.ts).
  {
    arbitrary: fc
      .string({ unit: fc.constantFrom(...'\t !"#$%&\'()*+,-./0123456789:;<=>?@AZaz[\\]^_`{|}~jsonapplication'), maxLength: 40 })
      .map((s) => s.trim()),
    weight: 1,
  },
);
const httpMethod = fc.oneof(
  { arbitrary: fc.constant('POST'), weight: 30 },
  { arbitrary: fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'FOO', 'M-SEARCH', 'PROPFIND'), weight: 2 },
);

interface Case {
  kind: string;
  method: string;
  contentType: string | undefined;
  /** Chunk sizes when the body goes chunked; undefined for Content-Length. */
  chunks: number[] | undefined;
  body: Buffer;
  rawId?: string;
  /** What the body must get (when it is read at all). */
  expect: BodyExpectation;
}

const JSON_CONTENT_TYPE = /^[ \t]*application\/json[ \t]*(?:;|$)/i;

const readsBody = (c: Pick<Case, 'method' | 'contentType' | 'body'>): boolean =>
  c.method === 'POST' && JSON_CONTENT_TYPE.test(c.contentType ?? '') && c.body.length <= MAX_BODY;

const caseArb: fc.Arbitrary<Case> = fc
  .record({
    body: bodyArb,
    method: httpMethod,
    contentType,
    chunks: fc.option(fc.array(fc.integer({ min: 1, max: 20_000 }), { minLength: 1, maxLength: 6 }), { freq: 10 }),
  })
  .map(({ body, method, contentType: type, chunks }) => ({
    kind: body.kind,
    method,
    contentType: type,
    chunks: chunks ?? undefined,
    body: body.body,
    rawId: body.rawId,
    expect: expectBody(body.body, PASSWORD, grantVerdict),
  }))
  .filter((c) => {
    if (!readsBody(c)) return true;
    // Never a wrong password nor a password change, and a few password checks at most.
    const entries = c.expect.entries;
    return !entries.some((e) => e.wrongPassword || e.changesPassword) && entries.filter((e) => e.checksPassword).length <= 2;
  });

function encode(c: Case): Buffer {
  const headers: [string, string][] = [];
  if (c.contentType !== undefined) headers.push(['Content-Type', c.contentType]);
  if (c.chunks === undefined) return encodeRequest(server.url, '/ext/auth', { method: c.method, headers, body: c.body, keepAlive: true });
  headers.push(['Transfer-Encoding', 'chunked']);
  const parts: Buffer[] = [];
  let at = 0;
  for (let i = 0; at < c.body.length; i++) {
    const size = Math.min(c.chunks[i % c.chunks.length], c.body.length - at);
    parts.push(Buffer.from(`${size.toString(16)}\r\n`), c.body.subarray(at, at + size), Buffer.from('\r\n'));
    at += size;
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat([encodeRequest(server.url, '/ext/auth', { method: c.method, headers, keepAlive: true }), ...parts]);
}

const BODY_TOO_LARGE = '{"jsonrpc":"2.0","error":{"code":-32600,"message":"request body exceeds 65536 bytes"},"id":null}\n';

function jsonError(response: HttpResponse): { code?: unknown; message?: unknown; id?: unknown } | undefined {
  try {
    const body = JSON.parse(response.text);
    return { ...body.error, id: body.id };
  } catch {
    return undefined;
  }
}

/** What is wrong with the answer to a case; undefined when it is right. */
function problemOf(c: Case, response: HttpResponse): string | undefined {
  if (response.status >= 500 && response.status !== 503) return `a server error: HTTP ${response.status}`;
  if (c.method !== 'POST') {
    const error = jsonError(response);
    if (response.status !== 405) return `HTTP ${response.status}, expected 405`;
    if (response.headers.allow !== 'POST') return `Allow: ${response.headers.allow}, expected POST`;
    return error?.code === -32600 && error.id === null ? undefined : `405 body ${JSON.stringify(response.text)}`;
  }
  if (!JSON_CONTENT_TYPE.test(c.contentType ?? '')) {
    const error = jsonError(response);
    if (response.status !== 415) return `HTTP ${response.status}, expected 415`;
    return error?.code === -32600 && error.id === null && /application\/json/.test(String(error.message))
      ? undefined
      : `415 body ${JSON.stringify(response.text)}`;
  }
  if (c.body.length > MAX_BODY) {
    if (response.status !== 413) return `HTTP ${response.status}, expected 413`;
    return response.text === BODY_TOO_LARGE ? undefined : `413 body ${JSON.stringify(response.text)}`;
  }
  if (response.status === 429 || response.status === 503) {
    // A lone request refused for now: 503 when too many checks wait. No wrong password is
    // ever sent, so a 429 (a throttled client) is wrong too, but it is shown as such.
    if (response.status === 429) return 'HTTP 429 (throttled) though no wrong password was sent';
    if (!(c.expect.kind === 'single' && c.expect.entries[0].checksPassword)) return 'HTTP 503 for a request that checks no password';
    const error = jsonError(response);
    if (!/^[1-9]\d*$/.test(response.headers['retry-after'] ?? '')) return `HTTP ${response.status} without a Retry-After in seconds`;
    return error?.code === BUSY ? undefined : `HTTP 503 body ${JSON.stringify(response.text)}`;
  }
  return bodyProblem(response, c.expect, c.expect.kind === 'single' ? c.rawId : undefined);
}

function describe(c: Case, problem: string, response?: HttpResponse): string {
  const body = c.body.toString('latin1');
  const shown = body.length > 300 ? `${JSON.stringify(body.slice(0, 300))}... (${c.body.length} bytes)` : JSON.stringify(body);
  const got = response === undefined ? '' : `\n  got: HTTP ${response.status} ${JSON.stringify(response.text.slice(0, 400))}`;
  return (
    `${c.kind}: ${c.method} /ext/auth, content-type ${JSON.stringify(c.contentType)}${c.chunks ? ', chunked' : ''}\n` +
    `  body: ${shown}\n  problem: ${problem}${got}`
  );
}

async function probeHealth(): Promise<string | undefined> {
  if (server.hasExited()) return `the server exited: ${server.stderr()}`;
  try {
    const response = await request(server.url, '/ext/health', { headers: [['Authorization', `Bearer ${healthToken}`]] });
    return response.status === 200 && response.text === '{"checks":{},"healthy":true}\n'
      ? undefined
      : `health probe: HTTP ${response.status} ${JSON.stringify(response.text)}`;
  } catch (error) {
    return `health probe: ${(error as Error).message}`;
  }
}

const stats = { requests: 0, checks: 0, kinds: new Map<string, number>(), statuses: new Map<number, number>() };

t.test('every body, content-type and method on /ext/auth gets the answer the wire rules give, and the server stays up', async (t) => {
  const started = Date.now();
  await checkProperty(
    t,
    'answers follow the wire rules',
    fc.asyncProperty(fc.array(caseArb, { minLength: CASES_PER_RUN / 2, maxLength: CASES_PER_RUN }), async (cases) => {
      const problems: string[] = [];
      await overKeepAlive(server.url, CONNECTIONS, cases, async (c, connection) => {
        stats.requests++;
        stats.kinds.set(c.kind, (stats.kinds.get(c.kind) ?? 0) + 1);
        if (readsBody(c)) stats.checks += c.expect.entries.filter((e) => e.checksPassword).length;
        let response: HttpResponse;
        try {
          // No deadline: password checks queue up, and on a loaded machine an answer may be
          // late but is still the answer; a hang is caught by the test's own timeout.
          response = await connection.send(encode(c), c.method);
        } catch (error) {
          problems.push(describe(c, `no well-formed answer: ${(error as Error).message}`));
          return;
        }
        stats.statuses.set(response.status, (stats.statuses.get(response.status) ?? 0) + 1);
        const problem = problemOf(c, response);
        if (problem !== undefined) problems.push(describe(c, problem, response));
      });
      const down = await probeHealth();
      if (down !== undefined) problems.push(down);
      if (problems.length > 0) throw new Error(problems.join('\n'));
    }),
    { numRuns: RUNS },
  );
  t.comment(
    `${stats.requests} requests in ${((Date.now() - started) / 1000).toFixed(1)} s over ${CONNECTIONS} keep-alive connections; ` +
      `${stats.checks} password checks`,
  );
  t.comment(`kinds: ${[...stats.kinds].map(([k, n]) => `${k} ${n}`).join(', ')}`);
  t.comment(
    `statuses: ${[...stats.statuses]
      .sort()
      .map(([s, n]) => `${s}: ${n}`)
      .join(', ')}`,
  );
  t.notOk(server.hasExited(), 'the server is still running');
});

t.test('an invalid endpoint beside "*" is still invalid params: "*" does not excuse the other entries', async (t) => {
  for (const entry of ['/ext/./info', '', 'ext/info', '/ext//info']) {
    const answer = await jsonrpc(authUrl(server.url), 'auth.newToken', { password: PASSWORD, endpoints: ['*', entry] });
    t.equal(answer.error?.code, -32602, `["*", ${JSON.stringify(entry)}] is -32602, like [${JSON.stringify(entry)}] alone`);
    t.notOk(answer.result, `no token for ["*", ${JSON.stringify(entry)}]`);
  }
});

t.test('the model agrees with the server on hand-picked bodies (a check of the checker)', async (t) => {
  const bodies: [string, number | 'token' | 'success' | 'revocation' | null][] = [
    [raw({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: PASSWORD, endpoints: ['/ext/info'] }, id: 1 }), 'token'],
    [raw({ jsonrpc: '2.0', method: 'auth.revokeToken', params: { password: PASSWORD, token: 'x' }, id: 1 }), 'revocation'],
    [raw({ jsonrpc: '2.0', method: 'auth.changePassword', params: { oldPassword: PASSWORD, newPassword: PASSWORD }, id: 1 }), -32602],
    [raw({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: 1 }, id: 1 }), -32602],
    [
      raw({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: PASSWORD, endpoints: ['/ext/info'], method: ['a'] }, id: 1 }),
      -32602,
    ],
    [`{"jsonrpc":"2.0","method":"auth.revokeToken","params":{"password":${raw(PASSWORD)},"token":"x","__proto__":1},"id":1}`, -32602],
    [raw({ jsonrpc: '2.0', method: 'nope', id: 1 }), -32601],
    ['{', -32700],
    ['[]', -32600],
    [raw({ jsonrpc: '2.0', method: 'nope' }), null],
  ];
  for (const [body, want] of bodies) {
    const expectation = expectBody(Buffer.from(body), PASSWORD, grantVerdict);
    const entry = expectation.entries[0];
    if (want === null) t.ok(entry.none, `${body}: no answer due`);
    else if (typeof want === 'number') t.equal(entry.codes[0], want, `${body}: code ${want}`);
    else t.equal(entry.result, want, `${body}: a ${want} result`);
    const response = await request(server.url, '/ext/auth', { method: 'POST', headers: [['Content-Type', 'application/json']], body });
    t.equal(bodyProblem(response, expectation), undefined, `the server answers ${body.slice(0, 60)} as modelled`);
  }
});
