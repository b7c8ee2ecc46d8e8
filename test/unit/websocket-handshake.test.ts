// An upgrade waiting for the upstream (host/http/websocket/handshake.ts), with its books, peers and
// the client's response given as plain objects: the client is answered once, whatever
// the upstream and the client do after, and the handshake's place is given back once.
import t from 'tap';
import type { HttpResponse, us_socket_context_t } from 'uWebSockets.js';
import type { UpstreamWsError } from '../../build/host/http/upstream-ws/errors.js';
import type { UpstreamWebSocket } from '../../build/host/http/upstream-ws/socket.js';
import { Handshake } from '../../build/host/http/websocket/handshake.js';
import type { HandshakeBooks, HandshakePeers, HandshakeRefusal } from '../../build/host/http/websocket/handshake.js';
import type { Session, SessionTerms } from '../../build/host/http/websocket/session.js';

/** The client's HTTP response: what was written, and the abort handler. */
class Response {
  readonly written: Array<[string, ...unknown[]]> = [];
  aborted: (() => void) | null = null;
  onAborted(handler: () => void): this {
    this.aborted = handler;
    return this;
  }
  cork(run: () => void): this {
    run();
    return this;
  }
  writeStatus(status: string): this {
    this.written.push(['status', status]);
    return this;
  }
  writeHeader(name: string, value: string): this {
    this.written.push(['header', name, value]);
    return this;
  }
  end(body: Uint8Array): this {
    this.written.push(['end', Buffer.from(body).toString()]);
    return this;
  }
  upgrade(...args: unknown[]): void {
    this.written.push(['upgrade', ...args.slice(1, 3)]);
  }
}

const refusal = (reason: HandshakeRefusal['reason'], status: string, body: string): HandshakeRefusal => ({
  reason,
  status,
  body: new TextEncoder().encode(body),
});

function setUp() {
  const res = new Response();
  const calls: string[] = [];
  const books: HandshakeBooks<SessionTerms> = {
    started: () => calls.push('started'),
    ended: (_handshake, session) => calls.push(`ended ${session}`),
    tracked: () => calls.push('tracked'),
    untracked: () => calls.push('untracked'),
  };
  const peers: HandshakePeers<SessionTerms> = {
    url: new URL('http://127.0.0.1:9'),
    maxMessage: 1024,
    timeoutMs: 60_000,
    session: () => {
      calls.push('session');
      return {} as Session<SessionTerms>;
    },
    unsendable: (_res, error: UpstreamWsError) => calls.push(`unsendable ${error.code}`),
    upstreamStatus: (_res, status) => refusal('upstream status', `${status} Upstream`, `status ${status}`),
    answeredWrongly: (error) => refusal('upstream status', '502 Bad Gateway', `wrongly: ${error.message}`),
    upstreamFailed: (error) => refusal('upstream unreachable', '502 Bad Gateway', `failed: ${error.message}`),
    upstreamAnswered: () => calls.push('answered'),
    refused: (reason) => calls.push(`refused ${reason}`),
  };
  const handshake = new Handshake(books, peers, res as unknown as HttpResponse, 'key', {} as us_socket_context_t, { standing: null });
  return { handshake, res, calls };
}

t.test('an upstream status other than 101 is answered once; what the upstream does after changes nothing', async (t) => {
  const { handshake, res, calls } = setUp();
  handshake.unexpected(403, 'Forbidden');
  handshake.failed(new Error('late'), false);
  handshake.accepted({ protocol: '' } as UpstreamWebSocket);
  t.same(res.written, [
    ['status', '403 Upstream'],
    ['header', 'Content-Type', 'application/json'],
    ['end', 'status 403'],
  ]);
  t.same(calls, ['ended false', 'refused upstream status'], 'its place given back once, no session');
});

t.test('an upstream that fails is answered with the failure its peers name; one that answered wrongly with theirs', async (t) => {
  const failed = setUp();
  failed.handshake.failed(new Error('refused'), false);
  t.same(failed.res.written.at(-1), ['end', 'failed: refused']);
  const wrongly = setUp();
  wrongly.handshake.failed(new Error('no such subprotocol'), true);
  t.same(wrongly.res.written.at(-1), ['end', 'wrongly: no such subprotocol']);
});

t.test('the upstream accepts: the session its peers make rides the 101', async (t) => {
  const { handshake, res, calls } = setUp();
  handshake.accepted({ protocol: 'graphql-ws' } as UpstreamWebSocket);
  t.same(calls, ['ended true', 'answered', 'session']);
  t.same(res.written, [['upgrade', 'key', 'graphql-ws']]);
  handshake.refuse(refusal('stopping', '503 Service Unavailable', 'stop'));
  t.equal(res.written.length, 1, 'a stop after the 101 writes nothing more');
});

t.test("a request the upstream socket cannot send is the peers' 400, with nothing connected", async (t) => {
  const { handshake, res, calls } = setUp();
  handshake.start('/ws', ['bad protocol'], []);
  t.same(calls, ['started', 'ended false', 'unsendable API_AUTH_WS_BAD_REQUEST']);
  t.same(res.written, [], 'the peers write the answer');
  res.aborted!();
  t.equal(calls.length, 3, 'a client gone after its answer changes nothing');
});
