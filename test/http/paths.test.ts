// Request targets and methods a lenient server would normalise or mis-route: dot
// segments, "//", percent-encoded "/", "." and "%" in any case, backslashes, overlong
// targets, odd and unknown methods, HEAD. A token scoped to /ext/info reaches
// /ext/info and nothing else, however the path is written (a generated property). In
// front of an upstream, no path that a backend could read as one outside a subtree
// grant ("..;", "%5c", overlong UTF-8, "%00", look-alikes...) reaches it.
import fc from 'fast-check';
import t from 'tap';
import type { Test } from 'tap';
import {
  BAD_PATH_REASON,
  REASONS,
  call,
  expectBadPath,
  expectGranted,
  expectNotFound,
  expectRefused,
  newToken,
  refusalBody,
} from '../helpers/auth.js';
import { badPath, checkProperty } from '../helpers/fuzz.js';
import { KeepAliveConnection, exchange, overKeepAlive, request, type HttpResponse } from '../helpers/http.js';
import { VERSION, startServer } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';

const upstream = await startUpstream(t);
const [server, authOff, proxy] = await Promise.all([
  startServer(t),
  startServer(t, { auth: false }),
  startServer(t, { args: ['--upstream', upstream.url] }),
]);
const [info, star, subtree, proxyStar] = await Promise.all([
  newToken(server.url, server.password, ['/ext/info']),
  newToken(server.url, server.password, ['*']),
  newToken(proxy.url, proxy.password, ['/ext/bc/X/*']),
  newToken(proxy.url, proxy.password, ['*']),
]);

const INFO_ANSWER = JSON.stringify({ version: `api-auth/${VERSION}`, gitCommit: '', vmVersions: {} });
const HEALTH_ANSWER = JSON.stringify({ checks: {}, healthy: true });

async function stillServing(t: Test): Promise<void> {
  t.notOk(server.hasExited(), 'the server is running');
  const response = await call(server.url, '/ext/health', star, 'GET');
  t.equal(response.status, 200, 'and answers GET /ext/health');
}

/** Every spelling of `%XX` for a byte: %2f, %2F. */
function percentSpellings(byte: number): string[] {
  const hex = byte.toString(16).padStart(2, '0');
  return [
    ...new Set([
      `%${hex.toLowerCase()}`,
      `%${hex.toUpperCase()}`,
      `%${hex[0].toUpperCase()}${hex[1].toLowerCase()}`,
      `%${hex[0].toLowerCase()}${hex[1].toUpperCase()}`,
    ]),
  ];
}

const ENCODED = ['/', '.', '%'].flatMap((c) => percentSpellings(c.charCodeAt(0)));

const REFUSED_TARGETS: string[] = [
  // Dot segments, anywhere.
  '/.',
  '/..',
  '/./ext/info',
  '/../ext/info',
  '/ext/./info',
  '/ext/../ext/info',
  '/ext/info/.',
  '/ext/info/..',
  '/ext/info/./',
  '/ext/info/../info',
  '/ext/health/../info',
  '/x/../../ext/info',
  // Empty segments.
  '//',
  '//ext/info',
  '/ext//info',
  '/ext/info//',
  '///ext/info',
  // Encoded "/", "." and "%", every case, in every place.
  ...ENCODED.flatMap((e) => [`/ext${e}info`, `/ext/${e}`, `/${e}ext/info`, `/ext/info${e}`, `/ext/${e}${e}/info`]),
  '/ext/%252e%252e/info',
  '/ext/%%32%66info',
  // A "%" without two hex digits, backslashes, fragments.
  '/ext/info%',
  '/ext/info%2',
  '/ext/%g0info',
  '/ext/%zzinfo',
  '/ext\\info',
  '/ext/info\\',
  '/ext/..\\info',
  '/ext/info#',
  '/ext/info#x',
];

t.test('dot segments, "//", encoded "/", "." or "%" in any case, "\\" and "#": 400 before any token, with auth on or off', async (t) => {
  const problems: string[] = [];
  await overKeepAlive(server.url, 4, REFUSED_TARGETS, async (target, connection) => {
    for (const token of [undefined, info, star]) {
      const headers: [string, string][] = [['Content-Type', 'application/json']];
      if (token !== undefined) headers.push(['Authorization', `Bearer ${token}`]);
      const response = await connection.request(target, {
        method: 'POST',
        headers,
        body: '{"jsonrpc":"2.0","method":"info.getNodeVersion","id":1}',
      });
      if (response.status !== 400 || response.text !== refusalBody(BAD_PATH_REASON)) {
        problems.push(
          `${JSON.stringify(target)} ${token === undefined ? 'no token' : token === info ? 'the /ext/info token' : 'a "*" token'}: ` +
            `HTTP ${response.status} ${JSON.stringify(response.text)}`,
        );
      }
    }
  });
  t.comment(`${REFUSED_TARGETS.length} targets, each with no token, a /ext/info token and a "*" token`);
  t.same(problems, [], 'every one is the 400 of a bad path');
  for (const target of REFUSED_TARGETS) t.ok(badPath(target.split('?')[0]), `the model refuses ${JSON.stringify(target)} too`);
  for (const target of ['/ext/./info', '/ext%2Finfo', '/ext%2finfo', '/ext/info%2e', '//ext/info', '/ext\\info']) {
    expectBadPath(t, await call(authOff.url, target), `${target} with auth off`);
  }
});

// Before path checks of their own, with a grant of /ext/bc/X/*, these reached the upstream. Tomcat and
// Spring read "..;" as "..", Windows servers "\" as "/", lenient decoders %c0%ae as ".",
// and C code ends a string at NUL.
const REPORTED = [
  '/ext/bc/X/..;/..;/admin',
  '/ext/bc/X/..%5c..%5cadmin',
  '/ext/bc/X/..%5C..%5Cadmin',
  '/ext/bc/X/%c0%ae%c0%ae/admin',
  '/ext/bc/X/..%00/admin',
];

/** Other ways out of /ext/bc/X/ for a backend that normalises one way or another. */
const READ_AS_ANOTHER_PATH = [
  // A name of dots once ";" parameters go (Tomcat, Spring, Jetty) or trailing dots and spaces do (Windows).
  '/ext/bc/X/..;x=1/admin',
  '/ext/bc/X/.;/..;/admin',
  '/ext/bc/X/..;',
  '/ext/bc/X/;/../admin',
  '/ext/bc/X/a/;/admin',
  '/ext/bc/X/.../admin',
  '/ext/bc/X/..%20/admin',
  '/ext/bc/X/..%20',
  '/ext/bc/X/..+/admin',
  '/ext/bc/X/..%2B/admin',
  // "\" raw or encoded; encoded ";", "?" and "#", which a server that decodes first acts on.
  '/ext/bc/X/..\\admin',
  '/ext/bc/X/%5c..%5c..%5cadmin',
  '/ext/bc/X/..%3b/admin',
  '/ext/bc/X/..%3B',
  '/ext/bc/X/..%3F',
  '/ext/bc/X/..%3f/x',
  '/ext/bc/X/..%23',
  '/ext/bc/X/..%23/x',
  // Encoded controls.
  '/ext/bc/X/..%00',
  '/ext/bc/X/..%0a/admin',
  '/ext/bc/X/..%0D%0A/admin',
  '/ext/bc/X/..%09/admin',
  '/ext/bc/X/..%1F/admin',
  '/ext/bc/X/..%7f/admin',
  // Malformed UTF-8: overlong "." "/" "\", surrogates, F5-FF, stray and cut sequences.
  '/ext/bc/X/%C0%AE%C0%AE/admin',
  '/ext/bc/X/%e0%80%ae%e0%80%ae/admin',
  '/ext/bc/X/%f0%80%80%ae%f0%80%80%ae/admin',
  '/ext/bc/X/..%c0%af..%c0%afadmin',
  '/ext/bc/X/..%c1%9c..%c1%9cadmin',
  '/ext/bc/X/..%ed%a0%80/admin',
  '/ext/bc/X/..%f5%80%80%80/admin',
  '/ext/bc/X/..%ff/admin',
  '/ext/bc/X/..%80/admin',
  '/ext/bc/X/..%c3/admin',
  '/ext/bc/X/..%e2%80/admin',
  '/ext/bc/X/..%c3x/admin',
  // Look-alikes that NFKC folds into "..", "." "/" "\", and invisible characters some servers drop.
  '/ext/bc/X/%E2%80%A5/admin',
  '/ext/bc/X/%EF%B8%B0/admin',
  '/ext/bc/X/%EF%BC%8E%EF%BC%8E/admin',
  '/ext/bc/X/..%EF%BC%8F..%EF%BC%8Fadmin',
  '/ext/bc/X/..%EF%BC%BC..%EF%BC%BCadmin',
  '/ext/bc/X/..%EF%B9%A8admin',
  '/ext/bc/X/.%E2%80%8B./admin',
  '/ext/bc/X/..%C2%A0/admin',
  '/ext/bc/X/..%C2%85/admin',
  '/ext/bc/X/..%EF%BB%BF/admin',
  '/ext/bc/X/..%E3%80%80/admin',
];

/** Paths of a node that must reach it, byte for byte. */
const NODE_PATHS = [
  '/ext/bc/X/rpc',
  '/ext/bc/X/ws',
  '/ext/bc/X/events',
  '/ext/bc/X/caf%C3%A9',
  '/ext/bc/X/%e6%97%a5%e6%9c%ac',
  '/ext/bc/X/%F0%9F%98%80',
  '/ext/bc/X/a:b@c~d-e_f',
  '/ext/bc/X/.well-known/x',
  '/ext/bc/X/..x/x..',
  '/ext/bc/X/a;v=1',
  '/ext/bc/X/a%20b+c',
  '/ext/bc/X/%2A',
  '/ext/bc/X/x/',
];

t.test('with --upstream and a /ext/bc/X/* grant: paths a backend could read as another are the 400, and never reach it', async (t) => {
  const targets = [...REPORTED, ...READ_AS_ANOTHER_PATH];
  const problems: string[] = [];
  await overKeepAlive(proxy.url, 4, targets, async (target, connection) => {
    for (const token of [subtree, proxyStar, undefined]) {
      const headers: [string, string][] = [['Content-Type', 'application/json']];
      if (token !== undefined) headers.push(['Authorization', `Bearer ${token}`]);
      for (const method of ['GET', 'POST']) {
        const response = await connection.request(target, method === 'GET' ? { headers } : { method, headers, body: '{}' });
        if (response.status !== 400 || response.text !== refusalBody(BAD_PATH_REASON)) {
          problems.push(
            `${method} ${JSON.stringify(target)} ${token === subtree ? 'the subtree token' : token === undefined ? 'no token' : 'a "*" token'}: ` +
              `HTTP ${response.status} ${JSON.stringify(response.text.slice(0, 200))}`,
          );
        }
      }
    }
  });
  t.comment(`${targets.length} targets, each by GET and POST with the /ext/bc/X/* token, a "*" token and none`);
  t.same(problems, [], 'every one is the 400 of a bad path');
  t.same(
    upstream.seen.map((r) => r.url),
    [],
    'the upstream saw none of them',
  );
  for (const target of targets) t.ok(badPath(target), `the model refuses ${JSON.stringify(target)} too`);

  const { seen } = upstream;
  for (const target of NODE_PATHS) {
    const response = await request(proxy.url, target, { headers: [['Authorization', `Bearer ${subtree}`]] });
    t.equal(response.status, 200, `${target} is served`);
    t.equal(seen.at(-1)?.url, target, `${target} reaches the upstream byte for byte`);
  }
  t.equal(seen.length, NODE_PATHS.length, 'one upstream request for each');
  const outside = await request(proxy.url, '/ext/bc/Y/rpc', { headers: [['Authorization', `Bearer ${subtree}`]] });
  expectRefused(t, outside, REASONS.notGranted, 'a sibling of the subtree');
});

t.test('paths a lenient server would map to /ext/info are other paths here: the /ext/info token is refused', async (t) => {
  for (const target of [
    '/ext/%69nfo',
    '/ext/%69%6E%66%6F',
    '/%65xt/info',
    '/EXT/INFO',
    '/ext/Info',
    '/ext/info/',
    '/ext/info;',
    '/ext/info;x=1',
    '/ext/info%20',
    '/ext/info%00',
    '/ext/info.',
    '/ext/info~',
    '/ext/info*',
    '/ext/info:',
    '/ext/info!',
    '/ext/info$',
    '/ext/info%3F',
    '/ext/info%23x',
    '/ext/inf%6f',
  ]) {
    const response = await call(server.url, target, info);
    if (badPath(target)) expectBadPath(t, response, target);
    else expectRefused(t, response, REASONS.notGranted, target);
  }
  expectGranted(t, await call(server.url, '/ext/info?/../health', info), '/ext/info', 'a query is not part of the path');
  expectGranted(t, await call(server.url, '/ext/info?', info), '/ext/info', 'an empty query');
});

t.test('overlong request targets get a clear refusal and the server keeps serving', async (t) => {
  // uWS reads at most 4 KiB of request head: a longer request line is its own 431 with
  // Connection: close, before the gate (so the core's 8 KiB path limit is never reached).
  for (const size of [10_000, 100_000]) {
    const target = `/ext/${'a'.repeat(size)}`;
    for (const token of [undefined, star]) {
      const response = await call(server.url, target, token);
      t.equal(response.status, 431, `a ${size}-byte path: 431 Request Header Fields Too Large`);
      t.equal(response.headers.connection, 'close', 'and the connection is closed');
    }
  }
  const within = `/ext/${'a'.repeat(3800)}`;
  expectNotFound(t, await call(server.url, within, star), 'a 3805-byte path with a "*" token');
  expectRefused(t, await call(server.url, within, info), REASONS.notGranted, 'a 3805-byte path with the /ext/info token');
  expectBadPath(t, await call(server.url, `${within}/..`, star), 'a 3808-byte path ending in ".."');
  await stillServing(t);
});

/** A request with an arbitrary method token on a fresh connection. */
function withMethod(method: string, target: string, token?: string): Promise<HttpResponse> {
  const headers: [string, string][] = token === undefined ? [] : [['Authorization', `Bearer ${token}`]];
  return request(server.url, target, { method, headers });
}

const ODD_METHODS = ['PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'FOO', 'M-SEARCH', 'PROPFIND', 'GETS', 'POSTX', 'G', 'X'.repeat(200)];

t.test('odd and unknown methods: 405 with Allow on the endpoints, after the gate; 404 elsewhere', async (t) => {
  for (const method of ODD_METHODS) {
    const name = method.slice(0, 20);
    expectRefused(t, await withMethod(method, '/ext/info'), REASONS.noToken, `${name} /ext/info without a token: the gate comes first`);
    expectRefused(t, await withMethod(method, '/ext/health', info), REASONS.notGranted, `${name} /ext/health with the /ext/info token`);
    for (const [target, token, allow] of [
      ['/ext/info', info, 'POST'],
      ['/ext/health', star, 'GET, HEAD, POST'],
      ['/ext/auth', undefined, 'POST'],
    ] as const) {
      const response = await withMethod(method, target, token);
      t.equal(response.status, 405, `${name} ${target}: 405`);
      t.equal(response.headers.allow, allow, `${name} ${target}: Allow: ${allow}`);
      t.match(JSON.parse(response.text), { jsonrpc: '2.0', error: { code: -32600 }, id: null }, `${name} ${target}: a JSON-RPC error body`);
    }
    expectNotFound(t, await withMethod(method, '/nope', star), `${name} /nope with a "*" token`);
  }
});

t.test('lower-case methods never get past the gate without a token', async (t) => {
  // uWS hands methods over in lower case (getMethod), so "post" is served as POST; the
  // gate does not depend on the method at all.
  for (const method of ['get', 'post', 'patch', 'Post', 'pOST']) {
    expectRefused(t, await withMethod(method, '/ext/info'), REASONS.noToken, `${method} /ext/info without a token`);
    expectRefused(t, await withMethod(method, '/ext/health', info), REASONS.notGranted, `${method} /ext/health with the /ext/info token`);
  }
  const lower = await request(server.url, '/ext/info', {
    method: 'post',
    headers: [
      ['Authorization', `Bearer ${info}`],
      ['Content-Type', 'application/json'],
    ],
    body: '{"jsonrpc":"2.0","method":"info.getNodeVersion","id":1}',
  });
  t.comment(`"post /ext/info" with the /ext/info token: HTTP ${lower.status} (uWS matches methods without case)`);
  t.ok(lower.status === 200 || lower.status === 405, '"post" is served as POST or refused as another method, nothing else');
});

t.test('request targets that are not a path (absolute-form, authority-form, "*"): refused, never routed', async (t) => {
  const targets: [string, string][] = [
    ['GET', `${server.url}/ext/info`],
    ['POST', `${server.url}/ext/info`],
    ['CONNECT', `127.0.0.1:${server.port}`],
    ['OPTIONS', '*'],
    ['GET', 'ext/info'],
    ['GET', '?/ext/info'],
  ];
  for (const [method, target] of targets) {
    const response = await request(server.url, target, { method, headers: [['Authorization', `Bearer ${star}`]] });
    // uWS itself answers these with 505 and closes (it takes a target that does not start
    // with "/" for an old HTTP version); one that reaches the gate is a bad path.
    t.ok(
      response.status === 505 || (response.status === 400 && response.text === refusalBody(BAD_PATH_REASON)),
      `${method} ${target}: refused (HTTP ${response.status})`,
    );
  }
  await stillServing(t);
});

t.test('a HEAD answer has no body, so a keep-alive connection stays in step', async (t) => {
  const cases: [string, string | undefined, number][] = [
    ['/ext/health', star, 200],
    ['/ext/auth', undefined, 405],
    ['/ext/info', info, 405],
    ['/ext/info', undefined, 401],
    ['/nope', star, 404],
    ['/ext/./info', star, 400],
  ];
  for (const [target, token, status] of cases) {
    const connection = new KeepAliveConnection(server.url);
    const headers: [string, string][] = token === undefined ? [] : [['Authorization', `Bearer ${token}`]];
    try {
      const head = await connection.request(target, { method: 'HEAD', headers });
      t.equal(head.status, status, `HEAD ${target}: ${status}`);
      const next = await connection.request('/ext/health', { headers: [['Authorization', `Bearer ${star}`]] });
      t.equal(next.text, `${HEALTH_ANSWER}\n`, `HEAD ${target}, then GET /ext/health on the same connection: the health answer`);
    } catch (error) {
      t.fail(`HEAD ${target} (${status}): ${(error as Error).message}`);
    } finally {
      connection.close();
    }
  }
});

// ---------------------------------------------------------------------------------
// The property: a token for /ext/info never reaches another endpoint.

/** One way to write a character of a path: itself, or percent-encoded in either case. */
const spelled = (c: string): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: fc.constant(c), weight: 6 },
    { arbitrary: fc.constantFrom(...percentSpellings(c.charCodeAt(0))), weight: 1 },
    { arbitrary: fc.constant(c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()), weight: 1 },
  );

/** Path pieces a normalising server would drop or fold. */
const noise = fc.constantFrom(
  '/.',
  '/..',
  '/./',
  '/x/..',
  '//',
  '/',
  '\\',
  '%2f',
  '%2e',
  '%25',
  '%00',
  '%20',
  ';',
  ';x=1',
  '~',
  '.',
  '#',
  '#x',
  '\u00e9',
  '\uff0f',
  '\u2215',
  '%c0%af',
  '%e2%80%8b',
  '*',
  ':',
  '@',
  '!',
  '/..;',
  '/.;x',
  '..',
  '+',
  '%5c',
  '%5C',
  '%3b',
  '%3F',
  '%c0%ae',
  '%C3',
  '%C3%A9',
  '%E2%80%A5',
  '%EF%BC%8F',
  '%ED%A0%80',
  '%0a',
  '%7f',
);

const pathVariant: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom('/ext/info', '/ext/health', '/ext/auth', '/ext/bc/X', '/', '/ext'),
    fc.array(fc.tuple(fc.nat(), noise), { maxLength: 2 }),
    fc.option(fc.constantFrom('?', '?x=1', '?/../ext/health', '?a#b', '??'), { freq: 4 }),
    // The leading "/" stays as it is: a target that does not start with one never reaches
    // the gate (uWS answers 505; see the test of such targets above).
  )
  .chain(([base, inserts, query]) =>
    fc.tuple(...[...base.slice(1)].map(spelled)).map((chars) => {
      let path = chars.join('');
      for (const [at, piece] of inserts) {
        const i = at % (path.length + 1);
        path = path.slice(0, i) + piece + path.slice(i);
      }
      return `/${path}${query ?? ''}`;
    }),
  );

/** What a request with `token` to `target` must get, by the rules (team brief). */
function expectedFor(target: string, token: 'info' | 'star' | 'none', authOn: boolean): 'bad-path' | 'refused' | 'auth' | 'routed' {
  const path = Buffer.from(target, 'utf8').toString('latin1').split('?')[0];
  if (authOn && path === '/ext/auth') return 'auth';
  if (badPath(path)) return 'bad-path';
  if (!authOn || token === 'star') return 'routed';
  return token === 'info' && path === '/ext/info' ? 'routed' : 'refused';
}

function routedProblem(response: HttpResponse, path: string, method: string): string | undefined {
  if (path === '/ext/info' || path === '/ext/health') {
    if (method === 'GET' && path === '/ext/info') return response.status === 405 ? undefined : `HTTP ${response.status}, expected 405`;
    let answer: string;
    try {
      const body = JSON.parse(response.text);
      answer = JSON.stringify(method === 'GET' ? body : body.result);
    } catch {
      return `HTTP ${response.status}, not JSON: ${JSON.stringify(response.text)}`;
    }
    return response.status === 200 && answer === (path === '/ext/info' ? INFO_ANSWER : HEALTH_ANSWER)
      ? undefined
      : `HTTP ${response.status} ${response.text}`;
  }
  return response.status === 404 ? undefined : `HTTP ${response.status}, expected the 404 of an unknown path`;
}

t.test('a token for /ext/info reaches /ext/info and nothing else, however the path is written', async (t) => {
  let requests = 0;
  const outcomes = new Map<string, number>();
  const caseArb = fc.record({
    target: pathVariant,
    token: fc.constantFrom<'info' | 'star' | 'none'>('info', 'info', 'info', 'star', 'none'),
    method: fc.constantFrom('POST', 'POST', 'GET'),
  });
  await checkProperty(
    t,
    'only /ext/info is granted',
    fc.asyncProperty(
      fc.array(fc.tuple(caseArb, fc.constantFrom(false, false, false, true)), { minLength: 10, maxLength: 20 }),
      async (cases) => {
        const problems: string[] = [];
        await overKeepAlive(server.url, 4, cases, async ([c, viaAuthOff], connection) => {
          const authOn = !viaAuthOff;
          const token = c.token === 'info' ? info : c.token === 'star' ? star : undefined;
          const headers: [string, string][] = token === undefined ? [] : [['Authorization', `Bearer ${token}`]];
          const path = Buffer.from(c.target, 'utf8').toString('latin1').split('?')[0];
          const rpcMethod = path === '/ext/health' ? 'health.health' : 'info.getNodeVersion';
          let response: HttpResponse;
          requests++;
          const options =
            c.method === 'GET'
              ? { headers }
              : {
                  method: 'POST',
                  headers: [...headers, ['Content-Type', 'application/json']] as [string, string][],
                  body: JSON.stringify({ jsonrpc: '2.0', method: rpcMethod, id: 1 }),
                };
          const target = Buffer.from(c.target, 'utf8');
          try {
            // The auth-on server over this worker's keep-alive connection, the auth-off one on a fresh one.
            response = authOn ? await connection.request(target, options) : await request(authOff.url, target, options);
          } catch (error) {
            problems.push(`${c.method} ${JSON.stringify(c.target)}: no answer: ${(error as Error).message}`);
            return;
          }
          const expected = expectedFor(c.target, authOn ? c.token : 'none', authOn);
          outcomes.set(expected, (outcomes.get(expected) ?? 0) + 1);
          const what = `${c.method} ${JSON.stringify(c.target)} with ${authOn ? `auth on, token ${c.token}` : 'auth off'}`;
          let problem: string | undefined;
          if (expected === 'bad-path') {
            problem =
              response.status === 400 && response.text === refusalBody(BAD_PATH_REASON)
                ? undefined
                : `HTTP ${response.status}, expected 400`;
          } else if (expected === 'refused') {
            const reason = token === undefined ? REASONS.noToken : REASONS.notGranted;
            problem =
              response.status === 401 && response.text === refusalBody(reason)
                ? undefined
                : `HTTP ${response.status} ${JSON.stringify(response.text.slice(0, 200))}, expected 401 "${reason}"`;
          } else if (expected === 'auth') {
            problem = response.status === (c.method === 'GET' ? 405 : 200) ? undefined : `HTTP ${response.status} from /ext/auth`;
          } else {
            problem = routedProblem(response, path, c.method);
          }
          if (
            response.status >= 200 &&
            response.status < 300 &&
            expected !== 'auth' &&
            authOn &&
            c.token === 'info' &&
            path !== '/ext/info'
          ) {
            problem = `a 2xx for ${JSON.stringify(path)} with a token for /ext/info only`;
          }
          if (problem !== undefined) problems.push(`${what}: ${problem}`);
        });
        if (server.hasExited() || authOff.hasExited()) problems.push('a server exited');
        if (problems.length > 0) throw new Error(problems.join('\n'));
      },
    ),
    { numRuns: 120 },
  );
  t.comment(`${requests} requests; outcomes: ${[...outcomes].map(([k, n]) => `${k} ${n}`).join(', ')}`);
  await stillServing(t);
});

t.test('the raw client sends the target byte for byte (a check of the test)', async (t) => {
  const response = await exchange(server.url, Buffer.from(`GET /ext/%2e%2e/info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
  expectBadPath(t, response, 'the encoded dots arrive encoded');
});
