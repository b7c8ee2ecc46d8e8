// The upstream pool (host/http/upstream/pool.ts, connection.ts) on its own, against a real TCP server:
// with pipelining, the requests of one turn go out as one batch on one connection; a
// request never written (still in the batch's cork) when its connection fails is sent
// again on another; and requests past WAITING_MAX waiting for a connection fail at once.
import t from 'tap';
import type { Test } from 'tap';
import { createServer, type Socket } from 'node:net';
import { once } from 'node:events';
import { systemClock } from '../../build/host/clock.js';
import type { Connection, UpstreamRequest } from '../../build/host/http/upstream/connection.js';
import { UpstreamPool, WAITING_MAX } from '../../build/host/http/upstream/pool.js';
import { BATCH_REQUEST_MAX } from '../../build/host/http/upstream/connection.js';

/** A server that answers each request line `POST /<name>` with a 200 whose body is the name, once `hold` resolves. */
async function startServer(t: Test, hold: Promise<void> = Promise.resolve()) {
  const seen: { name: string; connection: number }[] = [];
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    const connection = sockets.push(socket) - 1;
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', async (chunk: string) => {
      data += chunk;
      for (;;) {
        const end = data.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/.exec(data.slice(0, end))![1]);
        if (data.length < end + 4 + length) return;
        const name = /^POST \/(\S+)/.exec(data)![1];
        data = data.slice(end + 4 + length);
        seen.push({ name, connection });
        await hold;
        socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${name.length}\r\n\r\n${name}`);
      }
    });
    socket.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  const port = (server.address() as { port: number }).port;
  return { url: new URL(`http://127.0.0.1:${port}`), seen, sockets };
}

interface Outcome {
  name: string;
  body?: string;
  error?: Error;
  connection?: Connection;
}

/** A request for `/name`, and the promise of what came of it. */
function requestFor(
  name: string,
  sent?: (connection: Connection) => void,
  bodyBytes = 0,
): { request: UpstreamRequest; done: Promise<Outcome> } {
  let settle = (_: Outcome): void => undefined;
  const done = new Promise<Outcome>((resolve) => {
    settle = resolve;
  });
  const outcome: Outcome = { name };
  let body = '';
  const request: UpstreamRequest = {
    bytes: Buffer.from(`POST /${name} HTTP/1.1\r\nhost: x\r\ncontent-length: ${bodyBytes}\r\n\r\n${'x'.repeat(bodyBytes)}`, 'latin1'),
    streaming: false,
    head: false,
    idempotent: false,
    onSent(connection) {
      outcome.connection = connection;
      sent?.(connection);
    },
    onError(error) {
      settle({ ...outcome, error });
    },
    onReadEnd() {},
    onHead() {},
    onBody(bytes, start, end) {
      body += bytes.toString('latin1', start, end);
    },
    onEnd() {
      settle({ ...outcome, body });
    },
  };
  return { request, done };
}

const poolFor = (url: URL, pipelining: number, maxConnections = 8) =>
  new UpstreamPool({ url, timeoutMs: 30_000, connectTimeoutMs: 10_000, maxConnections, pipelining, clock: systemClock });

t.test('the requests of one turn go out on one connection, up to the pipelining depth', async (t) => {
  const server = await startServer(t);
  const pool = poolFor(server.url, 4);
  t.teardown(() => pool.close());
  const requests = Array.from({ length: 6 }, (_, i) => requestFor(`r${i}`));
  for (const { request } of requests) pool.dispatch(request);
  const outcomes = await Promise.all(requests.map((r) => r.done));
  t.same(
    outcomes.map((o) => o.body),
    outcomes.map((o) => o.name),
    'each got its own answer',
  );
  const byConnection = new Map<number, string[]>();
  for (const { name, connection } of server.seen) byConnection.set(connection, [...(byConnection.get(connection) ?? []), name]);
  t.same(
    [...byConnection.values()],
    [
      ['r0', 'r1', 'r2', 'r3'],
      ['r4', 'r5'],
    ],
    'four on the first connection, the rest on a second',
  );
});

t.test('a request over BATCH_REQUEST_MAX goes on a connection alone, and nothing joins it', async (t) => {
  const server = await startServer(t);
  const pool = poolFor(server.url, 4);
  t.teardown(() => pool.close());
  const requests = [requestFor('s0'), requestFor('large', undefined, BATCH_REQUEST_MAX), requestFor('s1'), requestFor('s2')];
  for (const { request } of requests) pool.dispatch(request);
  const outcomes = await Promise.all(requests.map((r) => r.done));
  t.same(
    outcomes.map((o) => o.body),
    ['s0', 'large', 's1', 's2'],
  );
  const connectionOf = (name: string) => server.seen.find((s) => s.name === name)!.connection;
  t.ok(
    server.seen.every((s) => s.name === 'large' || s.connection !== connectionOf('large')),
    'nothing else on the large request’s connection',
  );
  t.equal(connectionOf('s1'), connectionOf('s0'), 'the small ones batched together');
  t.equal(connectionOf('s2'), connectionOf('s0'));
});

t.test('a request not yet written when its connection fails is sent again on another', async (t) => {
  const server = await startServer(t);
  const pool = poolFor(server.url, 4);
  t.teardown(() => pool.close());
  // A first request leaves a connection idle and warm.
  const first = requestFor('warm');
  pool.dispatch(first.request);
  await first.done;
  // The next two join one batch on it; the connection fails before the turn ends, with
  // both still in its cork, as when the upstream's close is read in the same turn.
  const second = requestFor('b1');
  let failed = false;
  const third = requestFor('b2', (connection) => {
    if (failed) return;
    failed = true;
    connection.fail(new Error('closed by the test'));
  });
  pool.dispatch(second.request);
  pool.dispatch(third.request);
  const [b1, b2] = await Promise.all([second.done, third.done]);
  t.equal(b1.error, undefined, 'the first of the batch did not fail');
  t.equal(b1.body, 'b1');
  t.equal(b2.body, 'b2');
  t.same(
    server.seen.map((s) => s.name),
    ['warm', 'b1', 'b2'],
    'each reached the upstream once',
  );
  t.not(server.seen[1].connection, server.seen[0].connection, 'on a new connection');
});

t.test('past WAITING_MAX requests waiting for a connection, one more fails at once', async (t) => {
  let release = (): void => undefined;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const server = await startServer(t, held);
  const pool = poolFor(server.url, 1, 1);
  t.teardown(() => pool.close());
  const busy = requestFor('busy');
  pool.dispatch(busy.request);
  const waiting = Array.from({ length: WAITING_MAX }, (_, i) => requestFor(`w${i}`));
  for (const { request } of waiting) pool.dispatch(request);
  const over = requestFor('over');
  pool.dispatch(over.request);
  const refused = await over.done;
  t.match(refused.error, {
    kind: 'timeout',
    httpStatus: 504,
    message: `${WAITING_MAX} requests are waiting for a connection to the upstream node already`,
  });
  release();
  const outcomes = await Promise.all([busy, ...waiting].map((r) => r.done));
  t.equal(outcomes.filter((o) => o.body === o.name).length, WAITING_MAX + 1, 'those that waited are answered');
  t.notOk(
    server.seen.some((s) => s.name === 'over'),
    'the one refused never reached the upstream',
  );
});
