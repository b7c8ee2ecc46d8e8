// Writes requests.json: request-level vectors that the gateway (test/http/gate-vectors.test.ts,
// raw sockets to api-auth in front of a recording upstream) and the Go gate
// (go/gate/requests_test.go, raw sockets to net/http in front of a recording handler) both
// run, so that the two gates judge the same bytes the same way. Run
// `node test/vectors/generate-requests.js` after changing a case here or
// test/vectors/rpc-bodies.json; test/unit/request-vectors.test.ts fails while the
// checked-in file differs from what this writes.
//
// A case is one request, sent on a fresh connection: its head lines (Latin-1: each
// character is one byte, so that bytes that are not UTF-8 can be written; "{token}" is the
// token of the case's kind, issued fresh for the case), joined by CRLF and ended by an
// empty line, then its body (text, or bytes in hex), with a Content-Length line added when
// the head frames no body itself; or, for the cases about framing, the whole request as
// `raw`. `before` identical requests go first, each of which must be forwarded. The
// verdict is what must happen: forwarded (the node got exactly that method, target and
// body, and nothing else), refused (the status, and the JSON-RPC code of api-auth's
// answer; Retry-After when `retryAfter` says so), or no answer at all (the connection ends).
//
// Where the two HTTP servers themselves (uWebSockets.js under the gateway, net/http under
// the Go gate) read the bytes differently before any gate sees them, the case says so:
// `layer` names the layer, `why` says what each server does, and `verdicts` holds each
// side's verdict instead of one. Those cases are not agreement, and do not pretend to be.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { grantEntries } from '../../build/host/core/grants.js';
import { limitEntries } from '../../build/host/service/token-params.js';

const RPC = '/ext/bc/C/rpc';
const FILE = fileURLToPath(new URL('./requests.json', import.meta.url));
const BODIES = fileURLToPath(new URL('./rpc-bodies.json', import.meta.url));

/** The kinds of token a case can carry, as auth.newToken's params. */
const TOKENS = {
  plain: { endpoints: [RPC] },
  scoped: { endpoints: [RPC], methods: ['eth_blockNumber', 'eth_get*'] },
  anyMethod: { endpoints: [RPC], methods: ['*'] },
  limited: { endpoints: [RPC], rateLimit: '1/h', burst: 3 },
  limitedScoped: { endpoints: [RPC], methods: ['eth_blockNumber', 'eth_get*'], rateLimit: '1/h', burst: 3 },
  elsewhere: { endpoints: [RPC], allowedClients: ['192.0.2.0/24'] },
};

const CALL = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const AUTH = 'Authorization: Bearer {token}';
const HOST = 'Host: node';

/** A POST of `body` to the RPC path with the case's token and `extra` head lines. */
function post(body, extra = [], target = RPC) {
  return { head: [`POST ${target} HTTP/1.1`, HOST, AUTH, 'Content-Type: application/json', ...extra], body };
}

const forwarded = (body, method = 'POST', target = RPC) => ({ forwarded: { method, target, body } });
const refused = (status, code, more = {}) => ({ status, code, ...more });
const SCOPE = -32047;
const INVALID = -32600;
const RATE = -32005;

function handCases() {
  const deep = (n) => `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":${'['.repeat(n)}${']'.repeat(n)}}`;
  const batch = (n, method = 'eth_blockNumber') =>
    `[${Array.from({ length: n }, (_, k) => `{"jsonrpc":"2.0","id":${k + 1},"method":"${method}"}`).join(',')}]`;
  return [
    // The seven ways the gates and the nodes behind them were found to read one request
    // differently, and each one's verdict.
    {
      name: 'byte 0xFF after the Authorization value',
      issue: 'Low 13',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: Bearer {token}\xff', 'Content-Type: application/json'],
      body: CALL,
      verdict: forwarded(CALL),
    },
    {
      name: 'byte 0xFF before the Authorization value',
      issue: 'Low 13',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: \xffBearer {token}', 'Content-Type: application/json'],
      body: CALL,
      verdict: forwarded(CALL),
    },
    {
      name: 'bytes 0x80 to 0xFF and tabs around the Authorization value',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: \x80\t\xa0Bearer {token}\xc3\t\xff', 'Content-Type: application/json'],
      body: CALL,
      verdict: forwarded(CALL),
    },
    {
      name: 'byte 0xFF inside the Authorization value',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: Bearer\xff{token}', 'Content-Type: application/json'],
      body: CALL,
      verdict: refused(401, INVALID),
    },
    {
      name: 'a folded Authorization header',
      issue: 'Low 13',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: Bearer', ' {token}', 'Content-Type: application/json'],
      body: CALL,
      layer: 'http server',
      why:
        'uWebSockets.js refuses obs-fold (RFC 9112 §5.2) by closing the connection unanswered; net/http replaces the fold with a ' +
        'space, so the Go gate sees "Bearer <token>", a valid credential, and cannot tell it was folded',
      verdicts: { gateway: { answer: 'none' }, go: forwarded(CALL) },
    },
    {
      name: 'a folded header that is not the credential',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, AUTH, 'X-Note: a', ' b', 'Content-Type: application/json'],
      body: CALL,
      layer: 'http server',
      why: 'as for a folded Authorization header: uWebSockets.js closes the connection, net/http unfolds it',
      verdicts: { gateway: { answer: 'none' }, go: forwarded(CALL) },
    },
    {
      name: 'a lowercase get',
      issue: 'Low 13',
      token: 'plain',
      head: ['get /ext/bc/C/rpc HTTP/1.1', HOST, AUTH],
      verdict: forwarded('', 'get'),
    },
    {
      name: 'params nested 10,050 deep, with a method scope',
      issue: 'Low 13',
      token: 'anyMethod',
      ...post(deep(10_050)),
      verdict: refused(403, SCOPE),
    },
    { name: 'params nested 10,050 deep, with limits', token: 'limited', ...post(deep(10_050)), verdict: refused(400, INVALID) },
    { name: 'params nested 10,050 deep, with neither', token: 'plain', ...post(deep(10_050)), verdict: forwarded(deep(10_050)) },
    { name: 'a token with limits is served', issue: 'Low 13', token: 'limited', ...post(CALL), verdict: forwarded(CALL) },
    {
      name: 'a lowercase connect',
      issue: 'Low 13',
      token: 'plain',
      head: ['connect /ext/bc/C/rpc HTTP/1.1', HOST, AUTH],
      verdict: refused(405, INVALID),
    },
    { name: 'CONNECT to a path', token: 'plain', head: ['CONNECT /ext/bc/C/rpc HTTP/1.1', HOST, AUTH], verdict: refused(405, INVALID) },

    // The credential.
    {
      name: 'no token',
      token: 'none',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Content-Type: application/json'],
      body: CALL,
      verdict: refused(401, INVALID),
    },
    {
      name: 'the scheme in lower case',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'authorization: bearer {token}'],
      body: CALL,
      verdict: forwarded(CALL),
    },
    {
      name: 'two spaces after Bearer',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: Bearer  {token}'],
      body: CALL,
      verdict: refused(401, INVALID),
    },
    {
      name: 'a second Authorization header after a valid one',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, AUTH, 'Authorization: Bearer abc'],
      body: CALL,
      verdict: forwarded(CALL),
    },
    {
      name: 'a valid Authorization header after another',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: Bearer abc', AUTH],
      body: CALL,
      verdict: refused(401, INVALID),
    },
    {
      name: 'byte 0x7F after the Authorization value',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: Bearer {token}\x7f'],
      body: CALL,
      layer: 'http server',
      why:
        'uWebSockets.js hands the value on with its DEL, which no token holds (401); net/http refuses a ' +
        'header value with a control byte (400)',
      verdicts: { gateway: refused(401, INVALID), go: { status: 400 } },
    },
    {
      name: 'a control byte after the Authorization value',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization: Bearer {token}\x01'],
      body: CALL,
      layer: 'http server',
      why: 'uWebSockets.js closes the connection on a control byte in a header value; net/http answers 400',
      verdicts: { gateway: { answer: 'none' }, go: { status: 400 } },
    },
    {
      name: 'a space before the colon of Authorization',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.1', HOST, 'Authorization : Bearer {token}'],
      body: CALL,
      layer: 'http server',
      why:
        'a header name with a space after it (RFC 9112 §5.1): uWebSockets.js closes the connection ' + 'unanswered, net/http answers 400',
      verdicts: { gateway: { answer: 'none' }, go: { status: 400 } },
    },
    {
      name: 'the token in the query',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc?access_token={token} HTTP/1.1', HOST],
      body: CALL,
      verdict: refused(401, INVALID),
    },

    // The target.
    {
      name: 'a query goes on as sent',
      token: 'plain',
      ...post(CALL, [], `${RPC}?a=1&b=%2F`),
      verdict: forwarded(CALL, 'POST', `${RPC}?a=1&b=%2F`),
    },
    { name: 'an encoded slash in the path', token: 'plain', ...post(CALL, [], '/ext/bc%2FC/rpc'), verdict: refused(400, INVALID) },
    { name: 'a dot segment', token: 'plain', ...post(CALL, [], '/ext/bc/C/../C/rpc'), verdict: refused(400, INVALID) },
    { name: 'a path not granted', token: 'plain', ...post(CALL, [], '/ext/info'), verdict: refused(401, INVALID) },
    {
      name: 'an absolute-form target',
      token: 'plain',
      ...post(CALL, [], `http://node${RPC}`),
      layer: 'http server',
      why:
        'uWebSockets.js takes only an origin-form target and answers anything else 505; net/http hands the ' +
        'Go gate the absolute form as the target, whose path the core refuses (400)',
      verdicts: { gateway: { status: 505 }, go: refused(400, INVALID) },
    },
    {
      name: 'the asterisk target',
      token: 'plain',
      head: ['OPTIONS * HTTP/1.1', HOST, AUTH],
      layer: 'http server',
      why:
        'uWebSockets.js answers 505, as to any target not in origin form; net/http answers OPTIONS * itself ' +
        '(200, no body) and calls no handler, so neither gate sees it and nothing reaches the node',
      verdicts: { gateway: { status: 505 }, go: { status: 200 } },
    },

    // Framing.
    { name: 'HTTP/1.1 without Host', token: 'plain', head: ['POST /ext/bc/C/rpc HTTP/1.1', AUTH], body: CALL, verdict: { status: 400 } },
    {
      name: 'HTTP/1.0',
      token: 'plain',
      head: ['POST /ext/bc/C/rpc HTTP/1.0', HOST, AUTH],
      body: CALL,
      layer: 'http server',
      why: 'uWebSockets.js serves HTTP/1.1 only and answers 505; net/http serves HTTP/1.0, and the Go gate judges it ' + 'as any request',
      verdicts: { gateway: { status: 505 }, go: forwarded(CALL) },
    },
    {
      name: 'a chunked body, with a method scope',
      token: 'scoped',
      raw: `POST ${RPC} HTTP/1.1\r\n${HOST}\r\n${AUTH}\r\nTransfer-Encoding: chunked\r\n\r\n${CALL.length.toString(16)}\r\n${CALL}\r\n0\r\n\r\n`,
      verdict: forwarded(CALL),
    },
    {
      name: 'a chunked body of no bytes, with a method scope',
      token: 'scoped',
      raw: `POST ${RPC} HTTP/1.1\r\n${HOST}\r\n${AUTH}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      verdict: refused(403, SCOPE),
    },
    {
      name: 'Content-Length and Transfer-Encoding both',
      token: 'scoped',
      raw: `POST ${RPC} HTTP/1.1\r\n${HOST}\r\n${AUTH}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n${CALL.length.toString(16)}\r\n${CALL}\r\n0\r\n\r\n`,
      layer: 'http server',
      why:
        'RFC 9112 §6.1 lets a server refuse such a request or read it by Transfer-Encoding alone: ' +
        'uWebSockets.js refuses it (400), net/http reads the chunks, and the Go gate judges the body the handler then gets',
      verdicts: { gateway: { status: 400 }, go: forwarded(CALL) },
    },
    {
      name: 'two Content-Length headers that differ',
      token: 'scoped',
      raw: `POST ${RPC} HTTP/1.1\r\n${HOST}\r\n${AUTH}\r\nContent-Length: ${CALL.length}\r\nContent-Length: ${CALL.length + 1}\r\n\r\n${CALL} `,
      verdict: { status: 400 },
    },
    {
      name: 'a chunked body cut short, with a method scope',
      token: 'scoped',
      raw: `POST ${RPC} HTTP/1.1\r\n${HOST}\r\n${AUTH}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n${CALL}\r\n0\r\n\r\n`,
      verdict: { status: 400 },
    },
    {
      name: 'bare line feeds',
      token: 'plain',
      raw: `POST ${RPC} HTTP/1.1\n${HOST}\n${AUTH}\nContent-Length: ${CALL.length}\n\n${CALL}`,
      layer: 'http server',
      why:
        'uWebSockets.js reads a request line ended by a bare LF as no HTTP/1.1 and answers 505; net/http takes ' +
        'bare line feeds (RFC 9112 §2.2 allows it), and the Go gate judges the request as any',
      verdicts: { gateway: { status: 505 }, go: forwarded(CALL) },
    },
    { name: 'Expect: 100-continue', token: 'scoped', ...post(CALL, ['Expect: 100-continue']), verdict: forwarded(CALL) },

    // The body, for a token with a method scope or limits.
    {
      name: 'a compressed body, with a method scope',
      token: 'scoped',
      ...post(CALL, ['Content-Encoding: gzip']),
      verdict: refused(403, SCOPE),
    },
    { name: 'a compressed body, with limits', token: 'limited', ...post(CALL, ['Content-Encoding: gzip']), verdict: refused(400, INVALID) },
    { name: 'Content-Encoding: identity', token: 'limited', ...post(CALL, ['Content-Encoding: identity']), verdict: forwarded(CALL) },
    {
      name: 'Content-Encoding: identity with 0xFF after it',
      token: 'limited',
      ...post(CALL, ['Content-Encoding: identity\xff']),
      verdict: forwarded(CALL),
    },
    { name: 'a compressed body, with neither', token: 'plain', ...post(CALL, ['Content-Encoding: gzip']), verdict: forwarded(CALL) },
    { name: 'a batch with a byte after it, with limits', token: 'limited', ...post(`${batch(20)}x`), verdict: refused(400, INVALID) },
    { name: 'a batch with "]" after it, with limits', token: 'limited', ...post(`${batch(20)}]`), verdict: refused(400, INVALID) },
    { name: 'a batch with " []" after it, with limits', token: 'limited', ...post(`${batch(20)} []`), verdict: refused(400, INVALID) },
    { name: 'a batch with a byte after it, with neither', token: 'plain', ...post(`${batch(20)}x`), verdict: forwarded(`${batch(20)}x`) },
    { name: 'a batch of the burst, with limits', token: 'limited', ...post(batch(3)), verdict: forwarded(batch(3)) },
    { name: 'a batch of one more than the burst', token: 'limited', ...post(batch(4)), verdict: refused(429, RATE, { retryAfter: false }) },
    { name: 'past the rate', token: 'limited', ...post(CALL), before: 3, verdict: refused(429, RATE, { retryAfter: true }) },
    {
      name: 'a request without a body, with limits',
      token: 'limited',
      head: [`GET ${RPC} HTTP/1.1`, HOST, AUTH],
      verdict: forwarded('', 'GET'),
    },
    {
      name: 'a request without a body, with a method scope',
      token: 'scoped',
      head: [`GET ${RPC} HTTP/1.1`, HOST, AUTH],
      verdict: refused(403, SCOPE),
    },
    // The answer to a HEAD has no body, so no code to compare.
    { name: 'HEAD, with a method scope', token: 'scoped', head: [`HEAD ${RPC} HTTP/1.1`, HOST, AUTH], verdict: { status: 403 } },
    { name: 'a client the token does not allow', token: 'elsewhere', ...post(CALL), verdict: refused(403, -32048) },
    { name: 'a method the scope allows', token: 'scoped', ...post(CALL), verdict: forwarded(CALL) },
    {
      name: 'a method the scope does not allow',
      token: 'scoped',
      ...post('{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction"}'),
      verdict: refused(200, SCOPE),
    },
    {
      name: 'a batch split by the scope, with limits',
      token: 'limitedScoped',
      ...post(
        '[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"debug_traceBlock"},{"jsonrpc":"2.0","id":3,"method":"eth_getCode"}]',
      ),
      verdict: forwarded('[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":3,"method":"eth_getCode"}]'),
    },
    {
      name: 'a split batch counts only the calls forwarded',
      token: 'limitedScoped',
      before: 1,
      ...post('[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"debug_traceBlock"}]'),
      verdict: forwarded('[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}]'),
    },
    {
      name: 'Method spelled otherwise, with a method scope',
      token: 'scoped',
      ...post('{"jsonrpc":"2.0","id":1,"Method":"eth_blockNumber"}'),
      verdict: refused(403, SCOPE),
    },
  ];
}

/** Each case of rpc-bodies.json as a request: with a scope that allows every method, and with limits. */
function bodyCases() {
  const { cases } = JSON.parse(readFileSync(BODIES, 'utf8'));
  const out = [];
  for (const c of cases) {
    const body = c.bodyHex !== undefined ? { bodyHex: c.bodyHex } : { body: c.body };
    const read = c.read !== undefined;
    const none = c.unreadable === 'none';
    const sent = { method: 'POST', target: RPC, ...body };
    const head = [`POST ${RPC} HTTP/1.1`, HOST, AUTH, 'Content-Type: application/json'];
    out.push({
      name: `rpc-bodies, with a scope of every method: ${c.name}`,
      token: 'anyMethod',
      head,
      ...body,
      verdict: read ? { forwarded: sent } : refused(403, SCOPE),
    });
    // A request without a body counts one call against a token's limits.
    out.push({
      name: `rpc-bodies, with limits: ${c.name}`,
      token: 'limited',
      head,
      ...body,
      verdict: read || none ? { forwarded: sent } : refused(400, INVALID),
    });
  }
  return out;
}

/** The text of requests.json. */
export function generateRequests() {
  const tokens = {};
  for (const [kind, params] of Object.entries(TOKENS)) {
    tokens[kind] = { params, entries: grantEntries(params.endpoints, params.methods, limitEntries(params)) };
  }
  const cases = [...handCases(), ...bodyCases()];
  const names = new Set();
  for (const c of cases) {
    if (names.has(c.name)) throw new Error(`two cases are named ${c.name}`);
    names.add(c.name);
  }
  return `${JSON.stringify(
    {
      about:
        'Request-level vectors of the gate, run on the gateway (test/http/gate-vectors.test.ts) and on the Go gate ' +
        '(go/gate/requests_test.go); written by test/vectors/generate-requests.js, whose header says what a case holds.',
      path: RPC,
      tokens,
      cases,
    },
    null,
    1,
  )}\n`;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) writeFileSync(FILE, generateRequests());
