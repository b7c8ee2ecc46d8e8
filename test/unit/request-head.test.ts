// The one writer of request header lines (host/http/upstream/request-head.ts), and the
// two heads made with it: the proxy's (host/http/proxy/head.ts) and the WebSocket
// handshake's (host/http/upstream-ws/handshake.ts), byte for byte.
import t from 'tap';
import { headerLines, isToken, UnwritableField } from '../../build/host/http/upstream/request-head.js';
import { requestHead, Unwritable, withBody } from '../../build/host/http/proxy/head.js';
import { requestHead as handshakeHead } from '../../build/host/http/upstream-ws/handshake.js';
import { UpstreamWsCode } from '../../build/host/http/upstream-ws/errors.js';

const HOST_LINES = 'HTTP/1.1\r\nhost: node:9650\r\nconnection: keep-alive\r\n';
const none = (): boolean => false;

t.test('header lines: in order, name: value and CRLF; omitted fields left out, checked or not as asked', async (t) => {
  t.equal(headerLines(['a', '1', 'b', ''], none, true), 'a: 1\r\nb: \r\n', 'every field, an empty value too');
  t.equal(headerLines([], none, true), '', 'no fields, no lines');
  t.equal(
    headerLines(['a', '1', 'drop', '2', 'c', '\t3 \x80\xff'], (name) => name === 'drop', true),
    'a: 1\r\nc: \t3 \x80\xff\r\n',
    'an omitted field is left out; HTAB and obs-text go as they are',
  );
  const badValue = headerLines(['a', '1', 'x-b', 'one\ntwo'], none, true);
  t.ok(badValue instanceof UnwritableField, 'a value with a control byte is refused');
  t.match(badValue, { name: 'x-b', part: 'value' }, 'and named');
  t.match(headerLines(['a b', '1'], none, true), { name: 'a b', part: 'name' }, 'a name that is not a token is refused');
  t.match(headerLines(['', '1'], none, true), { name: '', part: 'name' }, 'an empty name is not a token');
  t.match(
    headerLines(['drop', '\r'], (name) => name === 'drop', true),
    { name: 'drop', part: 'value' },
    'checked: an omitted field that could not be written is refused still',
  );
  t.equal(
    headerLines(['drop', '\r', 'a', '1'], (name) => name === 'drop', false),
    'a: 1\r\n',
    'unchecked: it is dropped without a look',
  );
  t.ok(isToken('eth_call') && isToken("!#$%&'*+-.^_`|~09AZaz"), 'tchar, every one');
  t.notOk(isToken('') || isToken('a b') || isToken('a:') || isToken('é'), 'nothing else, and not the empty string');
});

t.test("the proxy's head: request line, Host and keep-alive, the fields without Content-Length", async (t) => {
  const headers = [
    'content-type',
    'application/json',
    'content-length',
    '42',
    'accept-encoding',
    'gzip, br',
    'x-forwarded-for',
    '10.0.0.1',
  ];
  const head = requestHead('POST', '/ext/bc/C/rpc?a=1', HOST_LINES, headers);
  t.equal(
    head,
    'POST /ext/bc/C/rpc?a=1 HTTP/1.1\r\nhost: node:9650\r\nconnection: keep-alive\r\n' +
      'content-type: application/json\r\naccept-encoding: gzip, br\r\nx-forwarded-for: 10.0.0.1\r\n',
    "the client's Content-Length is not written",
  );
  const identity = requestHead('POST', '/ext/bc/C/rpc?a=1', HOST_LINES, [...headers, 'accept-encoding', 'deflate']);
  t.equal(
    requestHead('POST', '/ext/bc/C/rpc?a=1', HOST_LINES, [...headers, 'accept-encoding', 'deflate'], true),
    (identity as string).replace(/\r\naccept-encoding: [^\r]*/g, ''),
    "identity: every Accept-Encoding line left out, as the split batch's head was edited before",
  );
  t.equal(
    requestHead('POST', '/', HOST_LINES, ['accept-encoding-x', 'a'], true),
    `POST / ${HOST_LINES}accept-encoding-x: a\r\n`,
    'identity leaves other names be',
  );
  t.same(requestHead('PO ST', '/', HOST_LINES, []), new Unwritable('its method is not a token'), 'a method that is not a token');
  t.same(requestHead('GET', '/', HOST_LINES, ['a b', '1']), new Unwritable('a header name is not a token'), 'a name that is not a token');
  t.same(
    requestHead('GET', '/', HOST_LINES, ['content-length', '1\x01']),
    new Unwritable('the value of header content-length holds a control byte'),
    'a Content-Length it would rewrite, with a control byte: refused, as received',
  );
  t.same(
    requestHead('GET', '/', HOST_LINES, ['accept-encoding', '\x7f'], true),
    new Unwritable('the value of header accept-encoding holds a control byte'),
    'identity checks what it leaves out too',
  );
  const body = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}');
  const bytes = withBody(head as string, body);
  t.equal(
    bytes.toString('latin1'),
    `${head}content-length: ${body.length}\r\n\r\n${body.toString('latin1')}`,
    'the body behind its framing, in one buffer',
  );
});

t.test("the handshake's head: its own fields written once, the others as the proxy writes them", async (t) => {
  const key = 'dGhlIHNhbXBsZSBub25jZQ==';
  const head = handshakeHead(
    'node:9650',
    '/ext/bc/C/ws',
    ['jsonrpc', 'graphql'],
    [
      'host',
      'evil',
      'connection',
      'close',
      'upgrade',
      'h2c',
      'sec-websocket-key',
      'x',
      'sec-websocket-extensions',
      'permessage-deflate',
      'origin',
      'https://app.example',
      'x-forwarded-for',
      '10.0.0.1',
    ],
    key,
  );
  t.equal(
    head,
    'GET /ext/bc/C/ws HTTP/1.1\r\nHost: node:9650\r\norigin: https://app.example\r\nx-forwarded-for: 10.0.0.1\r\n' +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      'Sec-WebSocket-Protocol: jsonrpc,graphql\r\n\r\n',
    'byte for byte',
  );
  t.equal(handshakeHead('h', '/', [], ['sec-websocket-version', '\x00'], key).includes('\x00'), false, 'its own fields are dropped unseen');
  t.throws(
    () => handshakeHead('h', '/', [], ['bad name', 'x'], key),
    { code: UpstreamWsCode.BadRequest, message: 'the header name "bad name" is not a token' },
    'a name that is not a token',
  );
  t.throws(
    () => handshakeHead('h', '/', [], ['x-a', 'one\ntwo'], key),
    { code: UpstreamWsCode.BadRequest, message: 'the value of header x-a holds a control character' },
    'a value with a control byte',
  );
  t.throws(() => handshakeHead('h', '/', ['a', 'a'], [], key), { code: UpstreamWsCode.BadRequest }, 'a subprotocol offered twice');
});
