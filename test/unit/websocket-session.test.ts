// One relayed session (host/http/websocket/session.ts) with its peers and its two sockets
// given as plain objects: what it writes to the upstream and when, how it answers and
// ends, without a listener, an upstream node or the clock's real time. The end-to-end
// tests (test/http/websocket*.test.ts) pin the same behaviour on the wire.
import t from 'tap';
import { Outcome } from '../../build/host/core/abi.js';
import type { Metrics } from '../../build/host/ops/metrics.js';
import type { UpstreamWebSocket } from '../../build/host/http/upstream-ws/socket.js';
import { Session } from '../../build/host/http/websocket/session.js';
import type { SessionData, SessionPeers, SessionTerms } from '../../build/host/http/websocket/session.js';
import type { WebSocket } from 'uWebSockets.js';

/** The upstream socket: what it was handed, and the write callbacks it has not called yet. */
class Upstream {
  bufferedAmount = 0;
  open = true;
  readonly sent: Array<{ text: string; binary: boolean }> = [];
  readonly pending: Array<() => void> = [];
  readonly closes: Array<[number, string]> = [];
  readonly pongs: string[] = [];
  pings = 0;
  terminated = 0;
  paused = false;
  listen(): void {}
  send(data: Uint8Array, binary: boolean, written: () => void): void {
    this.sent.push({ text: Buffer.from(data).toString(), binary });
    this.pending.push(written);
  }
  ping(written: () => void): void {
    this.pings++;
    this.pending.push(written);
  }
  pong(data: Buffer, written: () => void): void {
    this.pongs.push(data.toString());
    this.pending.push(written);
  }
  close(code: number, text: string): void {
    this.closes.push([code, text]);
    this.open = false;
  }
  terminate(): void {
    this.terminated++;
    this.open = false;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  /** The kernel took everything: the oldest write's callback runs. */
  drained(): void {
    this.bufferedAmount = 0;
    this.pending.shift()?.();
  }
}

/** The client's socket, as uWS hands it to the session. */
class Client {
  buffered = 0;
  readonly sent: Array<{ text: string; binary: boolean }> = [];
  ended: [number, string] | null = null;
  send(data: string | Buffer, binary: boolean): void {
    this.sent.push({ text: data.toString(), binary });
  }
  end(code: number, text: string): void {
    this.ended = [code, text];
  }
  cork(run: () => void): void {
    run();
  }
  getBufferedAmount(): number {
    return this.buffered;
  }
}

interface Terms extends SessionTerms {
  readonly name: string;
}

function setUp(options: { maxMessage?: number; standing?: () => Outcome; judge?: (data: ArrayBuffer) => string | null } = {}) {
  const upstream = new Upstream();
  const client = new Client();
  let time = 1_000_000;
  const audits: Array<[string, Outcome]> = [];
  const untracked: unknown[] = [];
  const metrics = { wsMessages: [0, 0], wsBytes: [0, 0] } as unknown as Metrics;
  const peers: SessionPeers<Terms> = {
    maxMessage: options.maxMessage ?? 64,
    clientHighWater: 100,
    clientLowWater: 10,
    metrics,
    now: () => time,
    seconds: () => Math.floor(time / 1000),
    judge: (_opened, data) => options.judge?.(data) ?? null,
    endedText: (outcome) => `ended: ${outcome}`,
    audit: (opened, outcome) => audits.push([opened.name, outcome]),
    untracked: (socket) => untracked.push(socket),
  };
  const opened: Terms = { name: 'one', standing: options.standing ?? null };
  const session = new Session(peers, upstream as unknown as UpstreamWebSocket, opened);
  session.attach(client as unknown as WebSocket<SessionData<Terms>>);
  return { session, upstream, client, audits, untracked, metrics, advance: (ms: number) => (time += ms), time: () => time };
}

const bytes = (text: string): ArrayBuffer => new TextEncoder().encode(text).buffer;

t.test('a client message goes straight to an empty upstream socket; the next waits for the write before it', async (t) => {
  const { session, upstream, metrics } = setUp();
  session.fromClient(bytes('{"a":1}'), false);
  t.same(upstream.sent, [{ text: '{"a":1}', binary: false }], 'written at once');
  upstream.bufferedAmount = 7;
  const second = new Uint8Array(bytes('two'));
  session.fromClient(second.buffer, true);
  second.fill(0);
  t.equal(upstream.sent.length, 1, 'held while the socket holds the first');
  upstream.drained();
  t.same(upstream.sent[1], { text: 'two', binary: true }, 'written once the first has gone, from its own copy');
  t.same([metrics.wsMessages[0], metrics.wsBytes[0]], [2, 10], 'both counted to the upstream');
  t.same([session.messagesIn, session.bytesIn], [2, 10]);
});

t.test('a client that outruns its upstream by a whole largest message ends with 1013, the upstream cut', async (t) => {
  const { session, upstream, client } = setUp({ maxMessage: 8 });
  upstream.bufferedAmount = 5;
  session.fromClient(bytes('abcd'), false);
  t.equal(client.ended, null, 'one message waiting is within the bound');
  session.fromClient(bytes('abcd'), false);
  t.same(client.ended, [1013, 'the upstream node is not keeping up; try again later']);
  t.equal(upstream.terminated, 1, 'the upstream is cut, not closed');
  t.equal(session.closeReason, 'backpressure');
  upstream.drained();
  t.equal(upstream.sent.length, 0, 'what waited is dropped');
});

t.test('a message refused by its terms is answered on the client and not forwarded; the session goes on', async (t) => {
  const { session, upstream, client } = setUp({ judge: (data) => (Buffer.from(data).toString().includes('bad') ? '{"error":1}' : null) });
  session.fromClient(bytes('bad'), false);
  t.same(client.sent, [{ text: '{"error":1}', binary: false }]);
  t.equal(upstream.sent.length, 0);
  session.fromClient(bytes('good'), false);
  t.same(upstream.sent, [{ text: 'good', binary: false }]);
  t.equal(client.ended, null);
});

t.test('a token that stops standing ends the session with 1008 and its reason, audited once, before anything goes on', async (t) => {
  let outcome = Outcome.Valid;
  const { session, upstream, client, audits } = setUp({ standing: () => outcome });
  session.fromClient(bytes('one'), false);
  upstream.bufferedAmount = 3;
  session.fromClient(bytes('two'), false);
  outcome = Outcome.Revoked;
  upstream.drained();
  t.same(
    upstream.sent.map((m) => m.text),
    ['one'],
    'the waiting message is not written once the token has ended',
  );
  t.same(audits, [['one', Outcome.Revoked]]);
  t.same(client.ended, [1008, `ended: ${Outcome.Revoked}`]);
  t.same(upstream.closes, [[1001, "the client's token is no longer valid"]], 'an upstream holding nothing gets a close frame');
  session.fromClient(bytes('three'), false);
  t.equal(audits.length, 1, 'one end, one audit line');
});

t.test('a token that ends while the upstream holds part of a message cuts the upstream', async (t) => {
  let outcome = Outcome.Valid;
  const { session, upstream, client } = setUp({ standing: () => outcome });
  upstream.bufferedAmount = 2;
  outcome = Outcome.Expired;
  t.notOk(session.stands());
  t.same(client.ended, [1008, `ended: ${Outcome.Expired}`]);
  t.equal(upstream.terminated, 1);
  t.same(upstream.closes, []);
});

t.test("the upstream's close, relayed: codes that may be sent as they are, the others as 1011", async (t) => {
  for (const [code, reason, expected] of [
    [1000, 'bye', [1000, 'bye']],
    [4001, 'app', [4001, 'app']],
    [1005, '', [1005, '']],
    [1006, '', [1011, 'the upstream node closed the connection']],
    [1015, 'tls', [1011, 'the upstream node closed the connection']],
  ] as const) {
    const { session, client, untracked, upstream } = setUp();
    session.closed(code, reason, null);
    t.same(client.ended, expected, `upstream ${code}`);
    t.same(untracked, [upstream], 'the upstream socket leaves the books');
    t.equal(session.closeReason, 'upstream');
  }
});

t.test("the client's close, relayed to the upstream; uWS's own closes named", async (t) => {
  const cases = [
    [1000, 'done', [1000, 'done'], 'client'],
    [1006, 'WebSocket timed out from inactivity', [1001, 'the client stopped answering'], 'idle'],
    [1006, 'Received too big message', [1001, 'the client sent a message over 64 bytes'], 'too big'],
    [1006, '', [1001, 'the client went away'], 'client'],
    [1015, '', [1011, 'the client closed with a code that cannot be relayed'], 'client'],
  ] as const;
  for (const [code, text, expected, reason] of cases) {
    const { session, upstream } = setUp();
    session.clientClosed(code, bytes(text));
    t.same(upstream.closes, [expected], `client ${code} ${text}`);
    t.equal(session.closeReason, reason);
  }
});

t.test("the upstream's close frame waits for the client messages before it", async (t) => {
  const { session, upstream } = setUp();
  session.fromClient(bytes('one'), false);
  upstream.bufferedAmount = 3;
  session.fromClient(bytes('two'), false);
  session.clientClosed(1000, bytes('done'));
  t.same(upstream.closes, [], 'held');
  upstream.drained();
  t.same(
    upstream.sent.map((m) => m.text),
    ['one', 'two'],
  );
  t.same(upstream.closes, [[1000, 'done']], 'sent after the last message');
});

t.test('a quiet upstream is pinged at half the idle timeout and gone at all of it; anything heard resets it', async (t) => {
  const { session, upstream, client, advance, time } = setUp();
  advance(500);
  session.watch(time(), 1000);
  t.equal(upstream.pings, 1, 'pinged at half');
  session.watch(time(), 1000);
  t.equal(upstream.pings, 1, 'once');
  session.alive();
  advance(900);
  session.watch(time(), 1000);
  t.equal(client.ended, null, 'the pong counts as heard');
  advance(999);
  session.watch(time(), 1000);
  t.equal(client.ended, null);
  advance(1);
  session.watch(time(), 1000);
  t.same(client.ended, [1001, 'the upstream node stopped answering']);
  t.equal(session.closeReason, 'idle');
});

t.test('an upstream ping is answered at once, or only the latest once its socket is empty', async (t) => {
  const { session, upstream } = setUp();
  session.ping(Buffer.from('p1'));
  t.same(upstream.pongs, ['p1']);
  upstream.bufferedAmount = 4;
  session.ping(Buffer.from('p2'));
  session.ping(Buffer.from('p3'));
  t.same(upstream.pongs, ['p1'], 'owed while the socket holds something');
  upstream.drained();
  t.same(upstream.pongs, ['p1', 'p3'], 'the latest, once');
});

t.test('a client that reads slowly pauses the upstream, and resumes it below the low water', async (t) => {
  const { session, upstream, client, metrics } = setUp();
  client.buffered = 150;
  session.message(Buffer.from('answer'), false);
  t.same(client.sent, [{ text: 'answer', binary: false }]);
  t.ok(upstream.paused, 'paused past the high water');
  t.same([metrics.wsMessages[1], metrics.wsBytes[1], session.messagesOut, session.bytesOut], [1, 6, 1, 6]);
  client.buffered = 50;
  session.clientDrained();
  t.ok(upstream.paused, 'still paused above the low water');
  client.buffered = 5;
  session.clientDrained();
  t.notOk(upstream.paused, 'resumed');
});
