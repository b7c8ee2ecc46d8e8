// The relay's books of one thread (host/http/websocket/relay.ts), with its peers, sessions
// and sockets given as plain objects: what a stop does to each, and what the books tell
// their peers as handshakes and sessions come and go.
import t from 'tap';
import type { WebSocket } from 'uWebSockets.js';
import type { WsClose } from '../../build/host/ops/metric-labels.js';
import type { Metrics } from '../../build/host/ops/metrics.js';
import type { UpstreamWebSocket } from '../../build/host/http/upstream-ws/socket.js';
import type { Handshake, HandshakeRefusal } from '../../build/host/http/websocket/handshake.js';
import { Relay } from '../../build/host/http/websocket/relay.js';
import type { RelayPeers } from '../../build/host/http/websocket/relay.js';
import type { Session, SessionData, SessionTerms } from '../../build/host/http/websocket/session.js';

const STOPPING: HandshakeRefusal = { reason: 'stopping', status: '503 Service Unavailable', body: new Uint8Array() };

function setUp() {
  const calls: string[] = [];
  const closes: WsClose[] = [];
  const metrics = { wsOpen: 0, wsOpened: 0, wsClose: (reason: WsClose) => closes.push(reason) } as unknown as Metrics;
  const peers: RelayPeers<SessionTerms> = {
    clock: () => 0,
    metrics,
    idleMs: 60_000,
    stopping: STOPPING,
    handshakeStarted: () => calls.push('handshake started'),
    handshakeEnded: (_opened, session) => calls.push(`handshake ended ${session}`),
    sessionClosed: () => calls.push('session closed'),
  };
  return { relay: new Relay(peers), calls, closes, metrics };
}

function fakeSession(log: string[]) {
  const session = {
    closeReason: 'client' as WsClose,
    attach: () => log.push('attached'),
    clientClosed: (code: number) => log.push(`client closed ${code}`),
    end: (reason: WsClose, code: number, text: string) => log.push(`end ${reason} ${code} ${text}`),
    stands: () => true,
    watch: () => {},
  };
  const ws = { getUserData: () => ({ session }) } as unknown as WebSocket<SessionData<SessionTerms>>;
  return { session: session as unknown as Session<SessionTerms>, ws };
}

const fakeUpstream = (log: string[]) => ({ terminate: () => log.push('terminated') }) as unknown as UpstreamWebSocket;

t.test('a session counted open and closed once, its peers told once', async (t) => {
  const { relay, calls, closes, metrics } = setUp();
  const log: string[] = [];
  const { session, ws } = fakeSession(log);
  relay.opened(ws);
  t.same([metrics.wsOpen, metrics.wsOpened], [1, 1]);
  relay.closed(session, 1000, new ArrayBuffer(0));
  relay.closed(session, 1000, new ArrayBuffer(0));
  t.same(log, ['attached', 'client closed 1000', 'client closed 1000']);
  t.same(calls, ['session closed'], 'the peers hear of the end once');
  t.same([metrics.wsOpen, closes], [0, ['client']]);
});

t.test('a stop answers each handshake with the stopping refusal, ends each session, and waits for the upstream sockets', async (t) => {
  const { relay, calls } = setUp();
  const refusals: HandshakeRefusal[] = [];
  const handshake = { opened: { standing: null }, refuse: (r: HandshakeRefusal) => refusals.push(r) } as unknown as Handshake<SessionTerms>;
  relay.started(handshake);
  const log: string[] = [];
  const { ws } = fakeSession(log);
  relay.opened(ws);
  const gone = fakeUpstream(log);
  const left = fakeUpstream(log);
  relay.tracked(gone);
  relay.tracked(left);
  const stopped = relay.shutdown();
  t.ok(relay.stopped, 'an upgrade after this is refused');
  t.same(refusals, [STOPPING]);
  t.same(log, ['attached', 'end stopping 1001 api-auth is stopping']);
  relay.untracked(gone);
  relay.untracked(left);
  await stopped;
  t.same(log.slice(2), [], 'the upstreams that closed are not cut');
  relay.ended(handshake, false);
  t.same(calls, ['handshake started', 'handshake ended false']);
});

t.test('close cuts every upstream socket still open', async (t) => {
  const { relay } = setUp();
  const log: string[] = [];
  relay.tracked(fakeUpstream(log));
  relay.tracked(fakeUpstream(log));
  relay.close();
  t.same(log, ['terminated', 'terminated']);
});
