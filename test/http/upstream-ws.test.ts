// The relay's own upstream WebSocket client (host/http/upstream-ws), on its own: its
// frame reader against ws's on the same bytes cut at every boundary, valid streams and
// hostile ones alike; its handshake and sessions against ws's server over loopback; and
// servers that break the handshake or the framing on the wire.
import t from 'tap';
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as wsModule from 'ws';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { UpstreamWsCode, type UpstreamWsError } from '../../build/host/http/upstream-ws/errors.js';
import { closeFrame, FrameReader, maxFragments, MIN_FRAGMENTS } from '../../build/host/http/upstream-ws/frames.js';
import { connectUpstream } from '../../build/host/http/upstream-ws/socket.js';
import type { HandshakeHandler, SessionHandler, UpstreamWebSocket } from '../../build/host/http/upstream-ws/socket.js';
import { PROGRAM_ENV, ROOT, tempDir, untracked } from '../helpers/server.js';
import { selfSigned } from '../helpers/certificate.js';
import { acceptFor, handshakeServer } from '../helpers/raw-ws-upstream.js';

/** ws's frame reader (lib/receiver.js), which @types/ws leaves out. */
interface WsReceiver {
  write(chunk: Buffer): boolean;
  on(event: string, listener: (...args: any[]) => void): WsReceiver;
}
const WsReceiverClass = (wsModule as unknown as { Receiver: unknown }).Receiver as new (options: {
  isServer: boolean;
  maxPayload: number;
}) => WsReceiver;
/** ws's frame writer (lib/sender.js): a server's frames, unmasked. */
const wsFrame = (wsModule as unknown as { Sender: { frame(data: Buffer, options: object): Buffer[] } }).Sender.frame;

function serverFrame(opcode: number, data: Buffer | string, fin = true): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  return Buffer.concat(wsFrame(bytes, { fin, opcode, mask: false, readOnly: true, rsv1: false }));
}

/** A frame header written by hand, for what ws's writer would not write. */
function rawFrame(first: number, payload: Buffer, lengthBytes?: Buffer): Buffer {
  const header = lengthBytes === undefined ? Buffer.from([first, payload.length]) : Buffer.concat([Buffer.from([first]), lengthBytes]);
  return Buffer.concat([header, payload]);
}

/** An event of a reader, as text, so that two readers' can be compared. */
type Event = string;

/** ws's error close code: ws keeps it under a symbol. */
function wsCloseCode(error: Error): number {
  const symbol = Object.getOwnPropertySymbols(error).find((s) => s.description === 'status-code');
  return (error as unknown as Record<symbol, number>)[symbol!];
}

/** ws's reader's events for `chunks`. ws reports a broken frame through the stream's error event, a tick later. */
async function wsEvents(chunks: Buffer[], maxPayload: number): Promise<Event[]> {
  const events: Event[] = [];
  let stopped = false;
  const receiver = new WsReceiverClass({ isServer: false, maxPayload });
  receiver.on('message', (data: Buffer, binary: boolean) => events.push(`${binary ? 'binary' : 'text'} ${data.toString('hex')}`));
  receiver.on('ping', (data: Buffer) => events.push(`ping ${data.toString('hex')}`));
  receiver.on('pong', () => events.push('pong'));
  receiver.on('conclude', (code: number, reason: Buffer) => {
    events.push(`close ${code} ${reason.toString('hex')}`);
    stopped = true;
  });
  receiver.on('error', (error: Error) => {
    if (!stopped) events.push(`fail ${wsCloseCode(error)}`);
    stopped = true;
  });
  for (const chunk of chunks) {
    if (stopped) break;
    receiver.write(chunk);
  }
  await new Promise((resolve) => setImmediate(resolve));
  return events;
}

/**
 * Our reader's events for `chunks`. Each chunk is read from one scratch buffer that is
 * overwritten after each read, as the socket's shared read buffer is: what the reader
 * keeps past a read, it must have copied.
 */
function ourEvents(chunks: Buffer[], maxMessage: number): Event[] {
  const events: Event[] = [];
  const reader = new FrameReader(maxMessage, {
    message: (data, binary) => events.push(`${binary ? 'binary' : 'text'} ${data.toString('hex')}`),
    ping: (data) => events.push(`ping ${data.toString('hex')}`),
    pong: () => events.push('pong'),
    close: (code, reason) => events.push(`close ${code} ${Buffer.from(reason).toString('hex')}`),
    fail: (error) => events.push(`fail ${error.closeCode}`),
  });
  const scratch = Buffer.alloc(chunks.reduce((most, c) => Math.max(most, c.length), 1));
  for (const chunk of chunks) {
    chunk.copy(scratch);
    reader.read(scratch, 0, chunk.length);
    scratch.fill(0xee);
  }
  return events;
}

/** `stream` cut at each of `points`. */
function cut(stream: Buffer, points: number[]): Buffer[] {
  const chunks: Buffer[] = [];
  let from = 0;
  for (const point of points) {
    if (point <= from || point >= stream.length) continue;
    chunks.push(stream.subarray(from, point));
    from = point;
  }
  chunks.push(stream.subarray(from));
  return chunks;
}

/** Both readers agree on `stream` whole, cut at each point of `points` (in two), and in pieces of one byte. */
async function agree(
  t: Test,
  label: string,
  stream: Buffer,
  maxMessage: number,
  points: Iterable<number>,
  expected?: Event[],
): Promise<void> {
  const reference = await wsEvents([stream], maxMessage);
  if (expected !== undefined) t.same(reference, expected, `${label}: ws reads it so`);
  t.same(ourEvents([stream], maxMessage), reference, `${label}: whole, the same events as ws's reader`);
  let disagreements = 0;
  let first = '';
  for (const point of points) {
    const ours = ourEvents(cut(stream, [point]), maxMessage);
    if (JSON.stringify(ours) !== JSON.stringify(reference)) {
      disagreements++;
      first ||= `cut at ${point}: ${JSON.stringify(ours)}`;
    }
  }
  t.equal(disagreements, 0, `${label}: cut in two at every point, the same events${first && ` (first: ${first})`}`);
  const bytes = Array.from(stream, (_, i) => stream.subarray(i, i + 1));
  t.same(ourEvents(bytes, maxMessage), await wsEvents(bytes, maxMessage), `${label}: one byte at a time, the same events`);
}

function everyPoint(stream: Buffer): number[] {
  return Array.from({ length: stream.length - 1 }, (_, i) => i + 1);
}

const MAX = 1 << 20;

t.test("the frame reader reads what ws's reads, the stream cut at every byte boundary", async (t) => {
  const stream = Buffer.concat([
    serverFrame(1, 'hello'),
    serverFrame(1, ''),
    serverFrame(2, Buffer.alloc(0)),
    serverFrame(2, randomBytes(1)),
    serverFrame(2, randomBytes(125)),
    serverFrame(2, randomBytes(126)),
    serverFrame(9, randomBytes(125)),
    serverFrame(10, 'pong data'),
    // A text message in three frames, a character cut between them, a ping and a pong among them.
    serverFrame(1, Buffer.from('héllo wörld €', 'utf8').subarray(0, 2), false),
    serverFrame(9, 'in between'),
    serverFrame(0, Buffer.from('héllo wörld €', 'utf8').subarray(2, 14), false),
    serverFrame(10, ''),
    serverFrame(0, Buffer.from('héllo wörld €', 'utf8').subarray(14), true),
    // A binary message in four frames, one of them empty.
    serverFrame(2, randomBytes(40), false),
    serverFrame(0, Buffer.alloc(0), false),
    serverFrame(0, randomBytes(130), false),
    serverFrame(0, randomBytes(3), true),
    serverFrame(1, '𝄞 four bytes'),
    serverFrame(8, Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from('bye, ok', 'utf8')])),
    serverFrame(1, 'after the close: never read'),
  ]);
  const reference = await wsEvents([stream], MAX);
  t.equal(reference.length, 14, 'ws reads 14 events, up to the close');
  t.equal(reference.at(-1), `close 1000 ${Buffer.from('bye, ok').toString('hex')}`);
  await agree(t, 'every kind of frame', stream, MAX, everyPoint(stream));

  // Lengths in 16 and 64 bits, and their edges; cut in their headers and around each payload's ends.
  const sizes = [65535, 65536, 70000];
  const big = Buffer.concat(sizes.map((size) => serverFrame(2, randomBytes(size))));
  const points: number[] = [];
  let at = 0;
  for (const size of sizes) {
    const header = size < 65536 ? 4 : 10;
    for (let i = 1; i <= header + 3; i++) points.push(at + i);
    for (let i = -3; i <= 3; i++) points.push(at + header + size + i);
    at += header + size;
  }
  await agree(t, '16- and 64-bit lengths', big, MAX, points);
  t.same(
    ourEvents([big], MAX).map((e) => e.length),
    sizes.map((size) => 'binary '.length + 2 * size),
    'each whole',
  );
});

t.test('the frame reader refuses what RFC 6455 forbids a server, with the close code ws gives, wherever the stream is cut', async (t) => {
  const hello = serverFrame(1, 'hello');
  const cases: [string, Buffer, number][] = [
    ['RSV1 set (no extension was negotiated)', rawFrame(0xc1, Buffer.from('x')), 1002],
    ['RSV2 set', rawFrame(0xa1, Buffer.from('x')), 1002],
    ['RSV3 set', rawFrame(0x91, Buffer.from('x')), 1002],
    ['a masked frame', Buffer.from([0x81, 0x81, 1, 2, 3, 4, 0x79]), 1002],
    ['opcode 3', rawFrame(0x83, Buffer.from('x')), 1002],
    ['opcode 11', rawFrame(0x8b, Buffer.from('x')), 1002],
    ['a continuation with nothing to continue', rawFrame(0x80, Buffer.from('x')), 1002],
    ['a new message before the last frame of one begun', Buffer.concat([serverFrame(1, 'a', false), serverFrame(2, 'b')]), 1002],
    ['a ping that is not final', rawFrame(0x09, Buffer.from('x')), 1002],
    ['a ping of 126 bytes', rawFrame(0x89, randomBytes(126), Buffer.from([126, 0, 126])), 1002],
    ['a close of 1 byte', rawFrame(0x88, Buffer.from([3])), 1002],
    ...[999, 1004, 1005, 1006, 1015, 2999, 5000].map((code): [string, Buffer, number] => [
      `close code ${code}`,
      rawFrame(0x88, Buffer.from([code >> 8, code & 0xff])),
      1002,
    ]),
    ['a close reason that is not UTF-8', rawFrame(0x88, Buffer.from([0x03, 0xe8, 0xc3, 0x28])), 1007],
    ['a text message that is not UTF-8', serverFrame(1, Buffer.from([0x61, 0xff])), 1007],
    [
      'a text message whose last character is cut off',
      Buffer.concat([serverFrame(1, Buffer.from('ok'), false), serverFrame(0, Buffer.from('€', 'utf8').subarray(0, 2), true)]),
      1007,
    ],
    ['a message over the limit in one frame', serverFrame(2, randomBytes(1001)), 1009],
    [
      'a message over the limit in two frames',
      Buffer.concat([serverFrame(2, randomBytes(600), false), serverFrame(0, randomBytes(401))]),
      1009,
    ],
    ['a 64-bit length of 2^53', rawFrame(0x82, Buffer.alloc(0), Buffer.from([127, 0, 0x20, 0, 0, 0, 0, 0, 0])), 1009],
  ];
  for (const [label, bad, code] of cases) {
    const stream = Buffer.concat([hello, bad, hello]);
    await agree(t, label, stream, 1000, everyPoint(stream), [`text ${Buffer.from('hello').toString('hex')}`, `fail ${code}`]);
  }
  for (const code of [1000, 1003, 1007, 1014, 3000, 4999]) {
    const stream = rawFrame(0x88, Buffer.from([code >> 8, code & 0xff]));
    await agree(t, `close code ${code}`, stream, 1000, everyPoint(stream), [`close ${code} `]);
  }
  // RFC 6455 §5.2: a 64-bit length's most significant bit must be 0. ws says 1009 (too
  // big); the RFC makes it a protocol error, and so does this reader.
  const msb = Buffer.concat([hello, rawFrame(0x82, Buffer.alloc(0), Buffer.from([127, 0x80, 0, 0, 0, 0, 0, 0, 1]))]);
  t.same(
    ourEvents([msb], 1000),
    [`text ${Buffer.from('hello').toString('hex')}`, 'fail 1002'],
    'a 64-bit length with its top bit set: 1002',
  );
});

t.test("a message's frames are bounded: by count, by total size, and no empty continuation right after an empty frame", async (t) => {
  t.equal(maxFragments(16 * 1024 * 1024), 32768, 'at the default 16 MiB limit, 32,768 frames: one per 512 bytes');
  t.equal(maxFragments(1000), MIN_FRAGMENTS, 'under a small limit, still 1024');
  const hello = serverFrame(1, 'hello');
  const helloEvent = `text ${Buffer.from('hello').toString('hex')}`;
  const empty = (fin: boolean) => serverFrame(0, Buffer.alloc(0), fin);
  const one = (fin: boolean) => serverFrame(0, 'a', fin);

  // The flood an attack sent: a message begun empty, then empty continuations without end.
  const flood = Buffer.concat([hello, serverFrame(1, '', false), ...Array.from({ length: 64 }, () => empty(false))]);
  t.same(ourEvents([flood], MAX), [helloEvent, 'fail 1002'], 'an empty first frame, then an empty continuation: 1002');
  t.same(ourEvents(cut(flood, [hello.length + 3]), MAX), [helloEvent, 'fail 1002'], 'the same, the stream cut between them');
  const afterBytes = Buffer.concat([serverFrame(1, 'x', false), empty(false), empty(true)]);
  t.same(ourEvents([afterBytes], MAX), ['fail 1002'], 'an empty continuation after an empty one, bytes before them: 1002');
  t.same(
    ourEvents([Buffer.concat([serverFrame(1, 'x', false), empty(false), empty(true)]).subarray(0, 5)], MAX),
    [],
    'nothing is said before the second empty frame comes',
  );

  // What a writer does send: empty frames between ones with bytes, and an empty last frame.
  const mixed = Buffer.concat([serverFrame(1, '', false), one(false), empty(false), one(false), empty(true), hello]);
  await agree(t, 'empty frames between ones with bytes', mixed, MAX, everyPoint(mixed), [
    `text ${Buffer.from('aa').toString('hex')}`,
    helloEvent,
  ]);
  const large = randomBytes(200_000);
  const gorilla = Buffer.concat([serverFrame(2, large, false), empty(true)]);
  const points = [1, 2, 5, 9, 10, 11, 64 * 1024, 100_000, gorilla.length - 3, gorilla.length - 1];
  await agree(t, 'a large frame and an empty last one, as gorilla writes', gorilla, MAX, points, [`binary ${large.toString('hex')}`]);

  // 1024 frames under a 1000-byte limit: half of them with a byte, half empty, none after another empty one.
  const frames = (count: number) =>
    Array.from({ length: count }, (_, i) => serverFrame(i === 0 ? 2 : 0, i % 2 === 0 ? 'b' : '', i === count - 1));
  const most = Buffer.concat(frames(MIN_FRAGMENTS));
  await agree(t, `${MIN_FRAGMENTS} frames`, most, 1000, [3, 1000, most.length - 2], [`binary ${'62'.repeat(MIN_FRAGMENTS / 2)}`]);
  const over = Buffer.concat([...frames(MIN_FRAGMENTS + 1), hello]);
  t.same(ourEvents([over], 1000), ['fail 1002'], `${MIN_FRAGMENTS + 1} frames: 1002, though within the size limit`);
  t.same(
    ourEvents(
      cut(
        over,
        everyPoint(over).filter((p) => p % 7 === 0),
      ),
      1000,
    ),
    ['fail 1002'],
    'and so, cut every 7 bytes',
  );

  // One-byte frames up to the size limit: the message is whole; a byte more is 1009.
  const bytes = Buffer.concat(Array.from({ length: 1000 }, (_, i) => serverFrame(i === 0 ? 1 : 0, 'c', i === 999)));
  t.same(ourEvents(cut(bytes, [1500]), 1000), [`text ${'63'.repeat(1000)}`], '1000 frames of one byte under a 1000-byte limit');
  const tooBig = Buffer.concat([bytes.subarray(0, bytes.length - 3), one(false), one(true)]);
  t.same(ourEvents([tooBig], 1000), ['fail 1009'], 'a 1001st byte: 1009');
});

t.test('a client frame is masked with a fresh key, header and payload in one buffer, and reads back as sent', async (t) => {
  const receiver = new WsReceiverClass({ isServer: true, maxPayload: 0 });
  const got: string[] = [];
  receiver.on('message', (data: Buffer, binary: boolean) => got.push(`${binary} ${data.toString('hex')}`));
  receiver.on('conclude', (code: number, reason: Buffer) => got.push(`close ${code} ${reason.toString()}`));
  const payloads = [
    Buffer.alloc(0),
    randomBytes(47),
    randomBytes(48),
    randomBytes(125),
    randomBytes(126),
    randomBytes(65535),
    randomBytes(65536),
  ];
  const { frame } = await import('../../build/host/http/upstream-ws/frames.js');
  const keys = new Set<string>();
  for (const payload of payloads) {
    const bytes = frame(2, payload);
    const header = payload.length < 126 ? 6 : payload.length < 65536 ? 8 : 14;
    t.equal(bytes.length, header + payload.length, `${payload.length} bytes: one buffer of header, key and payload`);
    keys.add(bytes.subarray(header - 4, header).toString('hex'));
    if (payload.length >= 8) t.not(bytes.subarray(header).toString('hex'), payload.toString('hex'), 'the payload is masked');
    receiver.write(bytes);
  }
  receiver.write(closeFrame(4000, 'done'));
  t.same(got, [...payloads.map((p) => `true ${p.toString('hex')}`), 'close 4000 done'], "ws's server reads each back as sent");
  t.equal(keys.size, payloads.length, 'each frame has its own key');
  t.throws(() => closeFrame(1006, ''), RangeError, '1006 is never sent');
  t.throws(() => closeFrame(1000, 'x'.repeat(124)), RangeError, 'a reason over 123 bytes is refused');
});

/** What a session heard, in order, and how it ended. */
type Recorder = Omit<HandshakeHandler, 'closed'> & Omit<SessionHandler, 'closed'> & RecorderParts;

interface RecorderParts {
  /** The handshake's closed() and the session's alike. */
  closed(code?: number, reason?: string, error?: Error | null): void;
  events: string[];
  messages: { data: Buffer; binary: boolean }[];
  /** Resolves with the upstream once opened, rejects with what happened instead. */
  opening: Promise<UpstreamWebSocket>;
  ended: Promise<{ code: number; reason: string; error: Error | null }>;
  /** Resolves once `n` messages came. */
  messageCount(n: number): Promise<void>;
}

/** `answerPings`: ping() answers with pong(), as the relay's session does; false leaves pings unanswered. */
function recorder(answerPings = true): Recorder {
  let open!: (upstream: UpstreamWebSocket) => void;
  let fail!: (error: Error) => void;
  let end!: (value: { code: number; reason: string; error: Error | null }) => void;
  let socket: UpstreamWebSocket | null = null;
  const waiting: [number, () => void][] = [];
  const r: Recorder = {
    events: [],
    messages: [],
    opening: new Promise((resolve, reject) => {
      open = resolve;
      fail = reject;
    }),
    ended: new Promise((resolve) => {
      end = resolve;
    }),
    messageCount(n) {
      return r.messages.length >= n ? Promise.resolve() : new Promise((resolve) => waiting.push([n, resolve]));
    },
    accepted(upstream) {
      r.events.push('opened');
      upstream.listen(r);
      socket = upstream;
      open(upstream);
    },
    unexpected(status, message) {
      r.events.push(`unexpected ${status} ${message}`);
      fail(Object.assign(new Error(`HTTP ${status}`), { status }));
    },
    failed(error, answered) {
      r.events.push(`failed ${answered}`);
      fail(Object.assign(error, { answered }));
    },
    closed(code?: number, reason?: string, error?: Error | null) {
      r.events.push('closed');
      end({ code: code ?? 0, reason: reason ?? '', error: error ?? null });
    },
    message(data, binary) {
      r.messages.push({ data: Buffer.from(data), binary });
      for (const [n, resolve] of waiting) if (r.messages.length >= n) resolve();
    },
    ping(data) {
      r.events.push('ping');
      if (answerPings) socket!.pong(data);
    },
    alive() {
      r.events.push('alive');
    },
  };
  return r;
}

interface WsServer {
  url: URL;
  sessions: { socket: WebSocket; headers: Record<string, string | string[] | undefined>; url: string; closed: Promise<[number, string]> }[];
  next(): Promise<WsServer['sessions'][number]>;
}

/** ws's server on a loopback port, echoing each message back, closed with the test. */
async function wsServer(t: Test, options: { protocol?: string | false; refuse?: number } = {}): Promise<WsServer> {
  const waiting: ((s: WsServer['sessions'][number]) => void)[] = [];
  const server = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    perMessageDeflate: false,
    handleProtocols: (offered) => (options.protocol === undefined ? ([...offered][0] ?? false) : options.protocol),
    verifyClient: options.refuse === undefined ? undefined : (_info, done) => done(false, options.refuse),
  });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const result: WsServer = {
    url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    sessions: [],
    next: () => new Promise((resolve) => waiting.push(resolve)),
  };
  server.on('connection', (socket, request) => {
    const closed = new Promise<[number, string]>((resolve) => socket.once('close', (code, reason) => resolve([code, reason.toString()])));
    socket.on('message', (data, binary) => {
      if (socket.readyState === socket.OPEN) socket.send(data as Buffer, { binary });
    });
    const session = { socket, headers: request.headers, url: request.url ?? '', closed };
    result.sessions.push(session);
    waiting.shift()?.(session);
  });
  t.teardown(() => {
    for (const client of server.clients) client.terminate();
    server.close();
  });
  return result;
}

function open(url: URL, r: Recorder, extra: Partial<Parameters<typeof connectUpstream>[0]> = {}): UpstreamWebSocket {
  return connectUpstream({ url, target: '/ext/bc/C/ws', protocols: [], headers: [], maxMessage: MAX, closeTimeoutMs: 2000, ...extra }, r);
}

t.test("against ws's server: the handshake, messages of every size both ways, pings, and the close handshake both ways", async (t) => {
  const server = await wsServer(t);
  const r = recorder();
  const seen = server.next();
  open(server.url, r, {
    target: "/ext/bc/C/ws?q='{x}'",
    protocols: ['graphql', 'jsonrpc'],
    headers: [
      'origin',
      'https://dapp.example',
      'x-forwarded-for',
      '127.0.0.1',
      'sec-websocket-extensions',
      'permessage-deflate',
      'host',
      'evil.example',
    ],
  });
  const upstream = await r.opening;
  const session = await seen;
  t.equal(upstream.protocol, 'graphql', 'the subprotocol the server chose');
  t.equal(session.url, "/ext/bc/C/ws?q='{x}'", 'the target goes out byte for byte, not percent-encoded');
  t.equal(session.headers.host, server.url.host, "Host is the upstream's");
  t.equal(session.headers.origin, 'https://dapp.example');
  t.equal(session.headers['x-forwarded-for'], '127.0.0.1');
  t.equal(session.headers['sec-websocket-protocol'], 'graphql,jsonrpc', 'the subprotocols, in order');
  t.equal(session.headers['sec-websocket-extensions'], undefined, 'no extension, whatever the list held');

  const sizes = [0, 1, 100, 125, 126, 10_000, 65535, 65536, 1 << 20];
  for (const size of sizes) upstream.send(randomBytes(size), true);
  upstream.send(Buffer.from('héllo, node'), false);
  await r.messageCount(sizes.length + 1);
  t.same(
    r.messages.map((m) => [m.binary, m.data.length]),
    [...sizes.map((s) => [true, s]), [false, 12]],
    'every size comes back, in order',
  );
  t.equal(r.messages.at(-1)!.data.toString(), 'héllo, node', 'text as text');

  const pong = new Promise<string>((resolve) => session.socket.once('pong', (data) => resolve(data.toString())));
  session.socket.ping('are you there');
  t.equal(await pong, 'are you there', 'a ping is answered with its payload');
  t.ok(r.events.includes('ping'), "the server's ping is heard");
  const ping = new Promise<void>((resolve) => session.socket.once('ping', () => resolve()));
  const ponged = new Promise<void>((resolve) => {
    r.alive = () => resolve();
  });
  upstream.ping();
  await ping;
  await ponged;
  t.pass('our ping reaches the server, and its pong is heard');

  session.socket.close(4001, 'the node says bye');
  t.same(
    await r.ended.then(({ code, reason, error }) => [code, reason, error]),
    [4001, 'the node says bye', null],
    "the server's close code and reason",
  );
  t.same(await session.closed, [4001, 'the node says bye'], 'answered with the same close frame');
  t.same(
    r.events.filter((e) => e !== 'alive' && e !== 'ping'),
    ['opened', 'closed'],
  );

  const second = recorder();
  const seenSecond = server.next();
  const upstream2 = open(server.url, second);
  await second.opening;
  upstream2.close(4002, 'the dapp says bye');
  t.same(await (await seenSecond).closed, [4002, 'the dapp says bye'], 'our close code and reason reach the server');
  t.same(await second.ended.then(({ code, error }) => [code, error]), [4002, null], 'and its answer ends the session');
  t.notOk(upstream2.open, 'no longer open');

  const third = recorder();
  open(server.url, third).terminate();
  t.same(third.events, [], 'a terminate while connecting tells the handshake nothing but closed()');
  await third.ended;
  t.same(third.events, ['closed']);

  const fourth = recorder();
  const seenFourth = server.next();
  const upstream4 = open(server.url, fourth);
  await fourth.opening;
  upstream4.close(1005, '');
  t.equal((await (await seenFourth).closed)[0], 1005, 'a close without a code stays without one');

  const fifth = recorder();
  const seenFifth = server.next();
  open(server.url, fifth);
  await fifth.opening;
  (await seenFifth).socket.terminate();
  t.equal((await fifth.ended).code, 1006, 'a server that cuts the connection: 1006');
});

t.test(
  "pings are the session's to answer: ping() gets the data, and only pong() sends the answer, with a callback once it is written",
  async (t) => {
    const server = await wsServer(t);
    const r = recorder(false);
    const seen = server.next();
    const upstream = open(server.url, r);
    await r.opening;
    const session = await seen;
    const pongs: string[] = [];
    session.socket.on('pong', (data) => pongs.push(data.toString()));
    const pings: string[] = [];
    r.ping = (data) => pings.push(data.toString());
    session.socket.ping('are you there');
    session.socket.send('after the ping');
    await r.messageCount(1);
    t.same(pings, ['are you there'], "the ping's data came to the session, before the message behind it");
    // Had the client answered by itself, its pong would have been written before this
    // message, and the server would have read it before echoing the message.
    upstream.send(Buffer.from('back'), false);
    await r.messageCount(2);
    t.same(pongs, [], 'nothing answered the ping but the session');

    const ponged = new Promise<string>((resolve) => session.socket.once('pong', (data) => resolve(data.toString())));
    const written = new Promise<Error | null | undefined>((resolve) => upstream.pong(Buffer.from('are you there'), resolve));
    t.notOk(await written, "pong()'s callback comes, without an error");
    t.equal(await ponged, 'are you there', "the server gets the pong with the ping's data");
    t.throws(() => upstream.pong(Buffer.alloc(126)), RangeError, 'a pong over 125 bytes is refused');

    const pingWritten = new Promise<Error | null | undefined>((resolve) => upstream.ping(resolve));
    t.notOk(await pingWritten, "ping()'s callback comes too");
  },
);

t.test(
  "send()'s callback comes once its frame has gone to the kernel: in order, each once, none while the server does not read",
  async (t) => {
    const server = await wsServer(t);
    const r = recorder();
    const seen = server.next();
    const upstream = open(server.url, r);
    await r.opening;
    const session = await seen;
    session.socket.pause();
    // 48 MiB: more than the kernel's buffers of one loopback connection hold (at most
    // net.ipv4.tcp_wmem's and tcp_rmem's largest, 4 and 32 MiB here).
    const MESSAGES = 48;
    const FRAME = MAX + 14;
    const calls: { index: number; buffered: number; error: unknown }[] = [];
    for (let i = 0; i < MESSAGES; i++) {
      upstream.send(Buffer.alloc(MAX, i), true, (error) => calls.push({ index: i, buffered: upstream.bufferedAmount, error }));
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    t.ok(upstream.bufferedAmount > 0, 'the socket holds what the kernel could not take');
    t.ok(calls.length < MESSAGES, `no callback for a frame still held: ${calls.length} of ${MESSAGES} came while the server did not read`);
    t.ok(
      calls.every((c) => c.buffered <= (MESSAGES - 1 - c.index) * FRAME),
      "each came with its frame out of the socket's buffer",
    );
    session.socket.resume();
    upstream.send(Buffer.from('last'), false, (error) => calls.push({ index: MESSAGES, buffered: upstream.bufferedAmount, error }));
    // The echo of the last message: every frame before it has gone through the kernel and back.
    await r.messageCount(MESSAGES + 1);
    await new Promise((resolve) => setImmediate(resolve));
    t.same(
      calls.map((c) => c.index),
      Array.from({ length: MESSAGES + 1 }, (_, i) => i),
      'every callback came, once, in order',
    );
    t.ok(
      calls.every((c) => !c.error),
      'without an error',
    );
    t.ok(
      calls.every((c) => c.buffered <= (MESSAGES - c.index) * FRAME),
      "each once its frame had left the socket's buffer",
    );
  },
);

t.test('after terminate() the socket is no longer open and nothing more is written, not even a close frame', async (t) => {
  const server = await wsServer(t);
  const r = recorder();
  const seen = server.next();
  const upstream = open(server.url, r);
  await r.opening;
  const session = await seen;
  const got: string[] = [];
  session.socket.on('message', (data) => got.push(data.toString()));
  upstream.terminate();
  t.notOk(upstream.open, 'not open, at once');
  let called = false;
  upstream.send(Buffer.from('after the cut'), false, () => {
    called = true;
  });
  upstream.ping(() => {
    called = true;
  });
  upstream.pong(Buffer.from('x'), () => {
    called = true;
  });
  upstream.close(1000, 'after the cut');
  t.equal((await r.ended).code, 1006, 'the session hears a close without a frame');
  t.equal((await session.closed)[0], 1006, 'the server got no close frame');
  t.same(got, [], 'and no message');
  t.notOk(called, 'no write was made, so no callback came');
});

t.test('a message over maxMessage: close 1009 to the server and the TooBig error; pause() stops reading', async (t) => {
  const server = await wsServer(t);
  const r = recorder();
  const seen = server.next();
  const upstream = open(server.url, r, { maxMessage: 1000 });
  await r.opening;
  const session = await seen;
  session.socket.send(randomBytes(1000));
  await r.messageCount(1);
  session.socket.send(randomBytes(1001));
  const ended = await r.ended;
  t.equal((ended.error as UpstreamWsError).code, UpstreamWsCode.TooBig, 'the error says too big');
  t.equal((await session.closed)[0], 1009, 'the server got 1009');
  t.notOk(upstream.open);

  const paused = recorder();
  const seenPaused = server.next();
  const slow = open(server.url, paused);
  await paused.opening;
  const pausedSession = await seenPaused;
  slow.pause();
  const chunk = randomBytes(64 * 1024);
  for (let i = 0; i < 64; i++) pausedSession.socket.send(chunk);
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(paused.messages.length, 0, 'nothing is read while paused');
  t.ok(pausedSession.socket.bufferedAmount > 0, 'and the server sees it: its own buffer holds what it could not send');
  slow.resume();
  await paused.messageCount(64);
  t.ok(
    paused.messages.every((m) => m.data.equals(chunk)),
    'once resumed, every message arrives whole',
  );
});

t.test('handshakes that fail: a status other than 101, nothing listening, requests that cannot be sent', async (t) => {
  const refusing = await wsServer(t, { refuse: 403 });
  const r = recorder();
  open(refusing.url, r);
  await t.rejects(r.opening, { message: 'HTTP 403' });
  t.same(r.events.slice(0, 1), ['unexpected 403 Forbidden'], 'the status and its reason');

  const noProtocol = await wsServer(t, { protocol: false });
  const offered = recorder();
  open(noProtocol.url, offered, { protocols: ['jsonrpc'] });
  await t.rejects(offered.opening, {
    code: UpstreamWsCode.BadHandshake,
    answered: true,
    message: 'it chose no subprotocol of those offered',
  });

  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const nothing = recorder();
  open(new URL(`http://127.0.0.1:${port}`), nothing);
  await t.rejects(nothing.opening, { code: 'ECONNREFUSED', answered: false }, 'nothing listens: ECONNREFUSED');
  await nothing.ended;

  const url = new URL('http://127.0.0.1:9');
  t.throws(() => open(url, recorder(), { protocols: ['a', 'a'] }), { code: UpstreamWsCode.BadRequest }, 'a subprotocol offered twice');
  t.throws(() => open(url, recorder(), { protocols: ['a b'] }), { code: UpstreamWsCode.BadRequest }, 'a subprotocol that is not a token');
  t.throws(
    () => open(url, recorder(), { headers: ['x-a', 'one\ntwo'] }),
    { code: UpstreamWsCode.BadRequest },
    'a header value with a control character',
  );
  t.throws(() => open(url, recorder(), { target: '/a b' }), { code: UpstreamWsCode.BadRequest }, 'a target with a space');
});

function switching(key: string, extra = ''): string {
  return `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n${extra}\r\n`;
}

t.test('a 101 that is not a valid answer, and answers that are not HTTP, fail the handshake', async (t) => {
  const cases: [string, (key: string) => string, string, boolean][] = [
    [
      'a wrong accept key',
      () =>
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n',
      UpstreamWsCode.BadHandshake,
      true,
    ],
    [
      'no accept key',
      () => 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
      UpstreamWsCode.BadHandshake,
      true,
    ],
    ['two accept keys', (key) => switching(key, `Sec-WebSocket-Accept: ${acceptFor(key)}\r\n`), UpstreamWsCode.BadHandshake, true],
    [
      'no Upgrade header',
      (key) => `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
      UpstreamWsCode.BadHandshake,
      true,
    ],
    [
      'no Connection header',
      (key) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
      UpstreamWsCode.BadHandshake,
      true,
    ],
    [
      'an extension never offered',
      (key) => switching(key, 'Sec-WebSocket-Extensions: permessage-deflate\r\n'),
      UpstreamWsCode.BadHandshake,
      true,
    ],
    ['a subprotocol never offered', (key) => switching(key, 'Sec-WebSocket-Protocol: graphql\r\n'), UpstreamWsCode.BadHandshake, true],
    ['not HTTP', () => 'SSH-2.0-OpenSSH_9.6\r\n\r\n', UpstreamWsCode.BadResponse, false],
    ['a malformed header line', (key) => switching(key, 'no colon here\r\n'), UpstreamWsCode.BadResponse, false],
    ['a head over 16 KiB', (key) => switching(key, `X-Padding: ${'a'.repeat(16 * 1024)}\r\n`), UpstreamWsCode.BadResponse, false],
  ];
  for (const [label, answer, code, answered] of cases) {
    const url = await handshakeServer(t, answer);
    const r = recorder();
    open(url, r);
    await t.rejects(r.opening, { code, answered }, label);
    await r.ended;
    t.same(r.events, [`failed ${answered}`, 'closed'], `${label}: failed, then closed, nothing else`);
  }
  const hangUp = await handshakeServer(t, () => '', { after: (socket) => socket.end() });
  const r = recorder();
  open(hangUp, r);
  await t.rejects(r.opening, { code: 'ECONNRESET', answered: false }, 'a server that hangs up before answering: ECONNRESET');
});

t.test('on the wire: a head cut anywhere with frames behind it, a broken frame answered with its close code', async (t) => {
  // The answer and three messages, in one write.
  const frames = Buffer.concat([serverFrame(1, 'one'), serverFrame(2, randomBytes(300)), serverFrame(1, 'three')]);
  const url = await handshakeServer(t, (key) =>
    Buffer.concat([Buffer.from(switching(key, 'Sec-WebSocket-Protocol: jsonrpc\r\n'), 'latin1'), frames]),
  );
  const whole = recorder();
  open(url, whole, { protocols: ['jsonrpc'] });
  t.equal((await whole.opening).protocol, 'jsonrpc');
  await whole.messageCount(3);
  t.same(
    whole.messages.map((m) => m.data.length),
    [3, 300, 5],
    'frames in the same write as the answer are read',
  );

  const byteServer = createServer((socket) => {
    socket.on('error', () => undefined);
    let head = '';
    socket.on('data', async (chunk: Buffer) => {
      if (head.includes('\r\n\r\n')) return;
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      const key = /\r\nSec-WebSocket-Key: (\S+)\r\n/i.exec(head)![1];
      const bytes = Buffer.concat([Buffer.from(switching(key), 'latin1'), frames]);
      for (let i = 0; i < bytes.length; i++) {
        socket.write(bytes.subarray(i, i + 1));
        await new Promise((resolve) => setImmediate(resolve));
      }
    });
  });
  await new Promise<void>((resolve) => byteServer.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => byteServer.close());
  const bytewise = recorder();
  const upstream = open(new URL(`http://127.0.0.1:${(byteServer.address() as AddressInfo).port}`), bytewise);
  await bytewise.opening;
  await bytewise.messageCount(3);
  t.same(
    bytewise.messages.map((m) => m.data.toString('hex')),
    whole.messages.map((m) => m.data.toString('hex')),
    'the same messages, the answer and frames written a byte at a time',
  );
  upstream.terminate();

  // A masked frame from the server: the client closes with 1002 and says why.
  let serverSaw: number | null = null;
  const hostile = await handshakeServer(
    t,
    (key) => Buffer.concat([Buffer.from(switching(key), 'latin1'), Buffer.from([0x81, 0x81, 1, 2, 3, 4, 0x79])]),
    {
      after: (socket) => {
        const receiver = new WsReceiverClass({ isServer: true, maxPayload: 0 });
        receiver.on('conclude', (code: number) => {
          serverSaw = code;
          socket.end();
        });
        socket.on('data', (chunk: Buffer) => receiver.write(chunk));
      },
    },
  );
  const broken = recorder();
  open(hostile, broken);
  await broken.opening;
  const ended = await broken.ended;
  t.equal((ended.error as UpstreamWsError).code, UpstreamWsCode.Protocol, 'the error is a protocol error');
  t.match(ended.error!.message, /MASK must be clear/);
  t.equal(serverSaw, 1002, 'the server got a close frame with 1002');
});

t.test("sessions share one read buffer: a frame cut across reads survives another session's read in between", async (t) => {
  const sockets: Socket[] = [];
  const waiting: ((s: Socket) => void)[] = [];
  const url = await handshakeServer(t, (key) => switching(key), {
    after: (socket) => {
      sockets.push(socket);
      waiting.shift()?.(socket);
    },
  });
  const nextSocket = () => new Promise<Socket>((resolve) => waiting.push(resolve));
  const a = recorder();
  const b = recorder();
  const socketA = nextSocket();
  open(url, a);
  await a.opening;
  const serverA = await socketA;
  const socketB = nextSocket();
  open(url, b);
  await b.opening;
  const serverB = await socketB;

  const long = randomBytes(5000);
  const frameA = serverFrame(2, long);
  serverA.write(frameA.subarray(0, 2500));
  // B's message arrives, read into the same buffer, before the rest of A's frame.
  await new Promise((resolve) => setTimeout(resolve, 50));
  serverB.write(serverFrame(2, randomBytes(5000)));
  await b.messageCount(1);
  serverA.write(frameA.subarray(2500));
  await a.messageCount(1);
  t.ok(a.messages[0].data.equals(long), "A's message is whole and unchanged");
  t.equal(b.messages[0].data.length, 5000);
});

/**
 * A program that opens one session to `url` with the client, sends a 100 kB binary
 * message and a text one, and prints what came back and how it ended, as JSON.
 */
const TLS_PROGRAM = `
import { connectUpstream } from ${JSON.stringify(pathToFileURL(join(ROOT, 'build/host/http/upstream-ws/socket.js')).href)};
const big = Buffer.alloc(100000, 7);
const messages = [];
connectUpstream({ url: new URL(process.argv[1]), target: '/ext/bc/C/ws', protocols: [], headers: [], maxMessage: 1 << 20, closeTimeoutMs: 2000 }, {
  accepted(upstream) {
    upstream.listen({
      message(data, binary) {
        messages.push([binary, binary ? data.equals(big) : data.toString()]);
        if (messages.length === 2) upstream.close(1000, 'done');
      },
      ping(data) { upstream.pong(data); },
      alive() {},
      closed(code, reason, error) { console.log(JSON.stringify({ messages, code, reason, error: error && error.code })); },
    });
    upstream.send(big, true);
    upstream.send(Buffer.from('over TLS'), false);
  },
  unexpected(status) { console.log(JSON.stringify({ status })); },
  failed(error) { console.log(JSON.stringify({ failed: error.code })); },
  closed() {},
});
`;

function runTlsProgram(url: string, env: NodeJS.ProcessEnv): Promise<unknown> {
  const [command, args] = untracked(process.execPath, ['--input-type=module', '-e', TLS_PROGRAM, url]);
  return new Promise((resolve, reject) => {
    execFile(command, args, { env, timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${error.message}: ${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

t.test('an https:// upstream: wss, its certificate checked against the trusted ones', async (t) => {
  const dir = tempDir(t);
  const { cert, key } = selfSigned(dir, 'upstream');
  const https = createHttpsServer({ cert: readFileSync(cert), key: readFileSync(key) });
  const server = new WebSocketServer({ server: https, perMessageDeflate: false });
  server.on('connection', (socket) => socket.on('message', (data, binary) => socket.send(data as Buffer, { binary })));
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => {
    for (const client of server.clients) client.terminate();
    https.close();
  });
  const url = `https://127.0.0.1:${(https.address() as AddressInfo).port}`;
  t.same(
    await runTlsProgram(url, { ...PROGRAM_ENV, NODE_EXTRA_CA_CERTS: cert }),
    {
      messages: [
        [true, true],
        [false, 'over TLS'],
      ],
      code: 1000,
      reason: 'done',
      error: null,
    },
    'trusted: a message of many TLS records and a text one come back whole, and the close handshake completes',
  );
  t.same(
    await runTlsProgram(url, PROGRAM_ENV),
    { failed: 'DEPTH_ZERO_SELF_SIGNED_CERT' },
    'a certificate not trusted: the handshake fails',
  );
});
