// What ends a WebSocket session ends it at once: once the answer of a
// revocation (by token or by id) or of a password change has come, or the clock has
// passed the token's expiry, no message the client sends reaches the upstream, on any
// thread, and neither does any message the gateway still held for a slow upstream.
//
// A client floods numbered messages while the test ends its token. The test notes the
// number about to be sent when the answer arrives: every message from that number on
// was sent after the answer, so none of them may reach the upstream (a real `ws`
// server in this process, recording what it receives). Which messages before that
// number arrive depends on timing and is not asserted; the verdict does not.
import t from 'tap';
import type { Test } from 'tap';
import { WebSocket } from 'ws';
import { authUrl, changePassword, REASONS, REVOKED, revokeToken } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { manualClock, serveInProcess } from '../helpers/library.js';
import { startServer } from '../helpers/server.js';
import { closesWithin, openClient, startWsUpstream, wsUrl, type Client, type UpstreamSession } from '../helpers/ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';
/** Messages the upstream must have got before the token is ended: the flood is under way. */
const UNDER_WAY = 200;

/** A token and its id, from auth.newToken. */
async function issued(base: string, password: string): Promise<{ token: string; id: string }> {
  const response = await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints: [WS_PATH] });
  const { token, id } = response.result ?? {};
  if (typeof token !== 'string' || typeof id !== 'string')
    throw new Error(`auth.newToken gave no token and id: ${JSON.stringify(response)}`);
  return { token, id };
}

interface Flood {
  /** The number the next message will carry. */
  next(): number;
  /** Stops sending; resolves with the number of messages sent. */
  stop(): Promise<number>;
}

/**
 * Sends numbered text messages ("0", "1", ...) on `client` until stopped or closed, a
 * batch a turn of the event loop (never more than 64 KiB waiting in the client), so
 * that the answers the test waits for are seen between batches.
 */
function flood(client: Client): Flood {
  let next = 0;
  let stopped = false;
  const finished = new Promise<number>((resolve) => {
    const turn = (): void => {
      const socket = client.socket;
      if (stopped || socket.readyState !== WebSocket.OPEN) return resolve(next);
      for (let i = 0; i < 64 && socket.bufferedAmount < 64 * 1024; i++) socket.send(String(next++));
      setImmediate(turn);
    };
    turn();
  });
  return {
    next: () => next,
    stop: () => {
      stopped = true;
      return finished;
    },
  };
}

/**
 * Floods every client while `end` ends their token and resolves once it has answered;
 * then asserts that no message sent after the answer reached the upstream, and that each
 * session closed within a second with 1008 and `reason`.
 */
async function endMidFlood(t: Test, clients: Client[], seen: UpstreamSession[], end: () => Promise<void>, reason: string): Promise<void> {
  const floods = clients.map(flood);
  await Promise.all(
    seen.map((s, i) =>
      Promise.race([
        s.message(UNDER_WAY),
        clients[i].closed.then((c) => Promise.reject(new Error(`session ${i + 1} closed (${c.code}) before the flood was under way`))),
      ]),
    ),
  );
  await end();
  const cuts = floods.map((f) => f.next());
  for (let i = 0; i < clients.length; i++) {
    const closed = await closesWithin(clients[i], 1000);
    const sent = await floods[i].stop();
    await seen[i].closed;
    const late = seen[i].received.filter((m) => Number(m.data.toString('latin1')) >= cuts[i]).length;
    t.equal(
      late,
      0,
      `session ${i + 1}: none of the ${sent - cuts[i]} messages sent after the answer reached the upstream ` +
        `(${seen[i].received.length - late} of the ${cuts[i]} before it did)`,
    );
    t.same([closed.code, closed.reason], [1008, reason], `session ${i + 1}: 1008 with the gate's reason, within a second`);
  }
}

/** Two sessions of one token, one on each of two threads (consecutive connections go to the threads in turn). */
async function twoThreads(
  t: Test,
): Promise<{ server: Awaited<ReturnType<typeof startServer>>; token: string; id: string; clients: Client[]; seen: UpstreamSession[] }> {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--http-threads', '2'] });
  const { token, id } = await issued(server.url, server.password);
  const clients = [await openClient(t, wsUrl(server.url, WS_PATH), { token }), await openClient(t, wsUrl(server.url, WS_PATH), { token })];
  const seen = [await upstream.session(0), await upstream.session(1)];
  return { server, token, id, clients, seen };
}

t.test('a revocation by token: no message sent after its answer reaches the upstream, on either thread', async (t) => {
  const { server, token, clients, seen } = await twoThreads(t);
  await endMidFlood(
    t,
    clients,
    seen,
    async () => {
      t.same(await revokeToken(server.url, server.password, token), REVOKED);
    },
    REASONS.revoked,
  );
});

t.test('a revocation by id: no message sent after its answer reaches the upstream, on either thread', async (t) => {
  const { server, id, clients, seen } = await twoThreads(t);
  await endMidFlood(
    t,
    clients,
    seen,
    async () => {
      const answer = await jsonrpc(authUrl(server.url), 'auth.revokeToken', { password: server.password, id });
      t.same(answer.result, REVOKED);
    },
    REASONS.revoked,
  );
});

t.test('a password change: no message sent after its answer reaches the upstream, on either thread', async (t) => {
  const { server, clients, seen } = await twoThreads(t);
  await endMidFlood(
    t,
    clients,
    seen,
    async () => {
      t.same(await changePassword(server.url, server.password, `${server.password}-new`), { success: true });
    },
    REASONS.earlierGeneration,
  );
});

t.test("the expiry: no message sent once the service's clock has passed it reaches the upstream", async (t) => {
  const upstream = await startWsUpstream(t);
  const time = manualClock();
  const server = await serveInProcess(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--api-auth-token-lifetime', '60s'],
    clock: time.clock,
  });
  const { token } = await issued(server.url, server.password);
  const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  const seen = await upstream.session(0);
  await endMidFlood(
    t,
    [client],
    [seen],
    async () => {
      time.now += 60_000;
    },
    REASONS.expired,
  );
});

t.test('messages held for an upstream that does not read are dropped at the revocation, not written after it', async (t) => {
  const upstream = await startWsUpstream(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--http-threads', '1', '--ws-max-message', '64MiB'],
  });
  const { token } = await issued(server.url, server.password);
  const client = await openClient(t, wsUrl(server.url, WS_PATH), { token });
  const seen = await upstream.session(0);
  seen.socket.pause();
  // 48 MiB, under --ws-max-message (so the session is not ended for backpressure) and more
  // than the kernel's buffers of one loopback connection hold (at most net.ipv4.tcp_wmem's
  // and tcp_rmem's largest, 4 and 32 MiB here): some of it waits in the gateway.
  const MESSAGES = 48;
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  for (let i = 0; i < MESSAGES; i++) {
    chunk.write(String(i).padStart(8, '0'));
    client.socket.send(Buffer.from(chunk), { binary: true });
  }
  await new Promise<void>((resolve) => {
    const wait = (): void => {
      if (client.socket.bufferedAmount === 0) resolve();
      else setTimeout(wait, 10);
    };
    wait();
  });

  t.same(await revokeToken(server.url, server.password, token), REVOKED);
  seen.socket.resume();
  const closed = await closesWithin(client, 1000);
  t.same([closed.code, closed.reason], [1008, REASONS.revoked], 'the client gets 1008');
  await seen.closed;
  const numbers = seen.received.map((m) => Number(m.data.subarray(0, 8).toString('latin1')));
  t.same(
    numbers,
    numbers.map((_, i) => i),
    'what reached the upstream came in order, none missing before it',
  );
  t.ok(
    numbers.length < MESSAGES,
    `the messages still waiting in the gateway were dropped: ${numbers.length} of ${MESSAGES} reached the upstream`,
  );
});
