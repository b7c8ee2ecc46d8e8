// The answers an upstream may give a WebSocket upgrade, read over loopback by api-auth's
// client (host/http/upstream-ws/socket.ts, whose head is read by the proxy's reader,
// host/http/upstream/response-head.ts) and by ws's (whose head is read by llhttp, through
// node:http). Each case says what each client makes of the answer; where they part, the
// case says why api-auth holds to its reading (the decisions of response-head.ts).
import t from 'tap';
import { WebSocket } from 'ws';
import { UpstreamWsCode } from '../../build/host/http/upstream-ws/errors.js';
import { connectUpstream } from '../../build/host/http/upstream-ws/socket.js';
import { acceptFor, handshakeServer } from '../helpers/raw-ws-upstream.js';

/** What a client made of an answer: `open`, `unexpected <status>`, or `failed` (with ours, the error's code). */
type Outcome = string;

interface Case {
  name: string;
  /** The answer's bytes, given the request's key. */
  answer: (key: string) => string;
  ours: Outcome;
  ws: Outcome;
  /** Where the two part: why api-auth reads it as it does. */
  why?: string;
}

const fields = (key: string): string => `Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n`;
const switching = (key: string, extra = ''): string => `HTTP/1.1 101 Switching Protocols\r\n${fields(key)}${extra}\r\n`;

const BAD_RESPONSE = `failed ${UpstreamWsCode.BadResponse}`;
const BAD_HANDSHAKE = `failed ${UpstreamWsCode.BadHandshake}`;

const CASES: Case[] = [
  { name: 'a plain 101', answer: (key) => switching(key), ours: 'open', ws: 'open' },
  { name: 'a 101 without a reason', answer: (key) => `HTTP/1.1 101\r\n${fields(key)}\r\n`, ours: 'open', ws: 'open' },
  { name: 'a value beyond ASCII (obs-text)', answer: (key) => switching(key, 'X-Name: caf\xe9\r\n'), ours: 'open', ws: 'open' },
  {
    name: 'values padded with tabs',
    answer: (key) =>
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade:\twebsocket\t\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
    ours: 'open',
    ws: 'open',
  },
  { name: 'a 101 with a Content-Length', answer: (key) => switching(key, 'Content-Length: 5\r\n'), ours: 'open', ws: 'open' },
  {
    name: 'a 101 with two Content-Length',
    answer: (key) => switching(key, 'Content-Length: 2\r\nContent-Length: 5\r\n'),
    ours: 'open',
    ws: 'failed',
    why: 'RFC 9112 §6.3: a 1xx ends at its empty line whatever its fields say, so no length can mislead a reader of the frames after it',
  },
  {
    name: 'a 101 with Content-Length and Transfer-Encoding',
    answer: (key) => switching(key, 'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n'),
    ours: 'open',
    ws: 'failed',
    why: 'RFC 9112 §6.3: a 1xx has no body, so its framing fields frame nothing',
  },
  {
    name: '103 Early Hints, then the 101',
    answer: (key) => `HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n${switching(key)}`,
    ours: 'open',
    ws: 'open',
  },
  { name: '100 Continue, then the 101', answer: (key) => `HTTP/1.1 100 Continue\r\n\r\n${switching(key)}`, ours: 'open', ws: 'open' },
  {
    name: '100 Continue, then a 403',
    answer: () => 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 Forbidden\r\n\r\n',
    ours: 'unexpected 403',
    ws: 'unexpected 403',
  },
  { name: 'a status from 600 to 999', answer: () => 'HTTP/1.1 600 Odd\r\n\r\n', ours: 'unexpected 600', ws: 'unexpected 600' },
  {
    name: 'a status below 100',
    answer: () => 'HTTP/1.1 099 Odd\r\n\r\n',
    ours: BAD_RESPONSE,
    ws: 'unexpected 99',
    why: 'RFC 9110 §15: status codes run from 100; the one reader of both clients refuses it',
  },
  {
    name: 'a NUL in the reason phrase',
    answer: (key) => `HTTP/1.1 101 Switching\x00Protocols\r\n${fields(key)}\r\n`,
    ours: BAD_RESPONSE,
    ws: 'open',
    why: 'RFC 9112 §4: a reason phrase holds HTAB, SP, VCHAR and obs-text; an error status relays it to the client',
  },
  {
    name: 'HTTP/2.0',
    answer: (key) => `HTTP/2.0 101 Switching Protocols\r\n${fields(key)}\r\n`,
    ours: BAD_RESPONSE,
    ws: 'open',
    why: 'RFC 9113 §8.6: HTTP/2 has no 101, and the client speaks HTTP/1.1 only',
  },
  { name: 'a control byte in a value', answer: (key) => switching(key, 'X-A: a\x01b\r\n'), ours: BAD_RESPONSE, ws: 'failed' },
  { name: 'DEL in a value', answer: (key) => switching(key, 'X-A: a\x7fb\r\n'), ours: BAD_RESPONSE, ws: 'failed' },
  { name: 'a field line ending in a bare LF', answer: (key) => switching(key, 'X-A: a\nX-B: b\r\n'), ours: BAD_RESPONSE, ws: 'failed' },
  { name: 'a folded field line', answer: (key) => switching(key, 'X-A: a\r\n  b\r\n'), ours: BAD_RESPONSE, ws: 'failed' },
  { name: "a space before a field's colon", answer: (key) => switching(key, 'X-A : a\r\n'), ours: BAD_RESPONSE, ws: 'failed' },
  {
    name: 'Upgrade: websocket and a Latin-1 no-break space',
    answer: (key) =>
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\xa0\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
    ours: BAD_HANDSHAKE,
    ws: 'failed',
  },
];

function ours(url: URL): Promise<Outcome> {
  return new Promise((resolve) => {
    connectUpstream(
      { url, target: '/', protocols: [], headers: [], maxMessage: 1024, closeTimeoutMs: 2000 },
      {
        accepted(upstream) {
          upstream.listen({ message() {}, ping() {}, alive() {}, closed() {} });
          upstream.terminate();
          resolve('open');
        },
        unexpected: (status) => resolve(`unexpected ${status}`),
        failed: (error) => resolve(`failed ${(error as { code?: string }).code}`),
        closed() {},
      },
    );
  });
}

function theirs(url: URL): Promise<Outcome> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url.href.replace('http:', 'ws:'), { perMessageDeflate: false });
    ws.on('open', () => {
      ws.terminate();
      resolve('open');
    });
    ws.on('unexpected-response', (request, response) => {
      request.destroy();
      resolve(`unexpected ${response.statusCode}`);
    });
    ws.on('error', () => resolve('failed'));
  });
}

const verdicts: string[] = [];

for (const c of CASES) {
  t.test(c.name, async (t) => {
    const url = await handshakeServer(t, c.answer);
    const mine = await ours(url);
    t.equal(mine, c.ours, `api-auth's client: ${c.ours}`);
    t.equal(await ours(await handshakeServer(t, c.answer, { bytewise: true })), mine, 'the same with the answer written a byte at a time');
    const reference = await theirs(url);
    t.equal(reference, c.ws, `ws's client: ${c.ws}`);
    if ((mine === 'open') === (reference === 'open') && mine.split(' ')[0] === reference.split(' ')[0]) {
      t.equal(c.why, undefined, 'a case where the clients agree gives no reason');
      verdicts.push(`agree: ${c.name} (${mine})`);
    } else {
      t.type(c.why, 'string', 'a case where the clients part says why');
      verdicts.push(`api-auth ${mine}, ws ${reference}: ${c.name}, because ${c.why}`);
    }
  });
}

t.teardown(() => {
  for (const verdict of verdicts) console.error(`# ${verdict}`);
});
