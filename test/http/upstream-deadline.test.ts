// Every request the proxy holds has a deadline: its answer must start within
// --upstream-timeout of its coming, whether it waits for a connection or behind another
// answer on one. Clients that ask for large answers and never read them hold their
// connections to the upstream (the answer is paused, not late: the upstream is not at
// fault); a request behind them gets 504 once its deadline passes, rather than waiting
// for as long as they like. The verdict is the status, not a time.
import t, { type Test } from 'tap';
import { connect, type Socket } from 'node:net';
import { request, type HttpResponse } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import { answer, startScriptedUpstream } from '../helpers/scripted-upstream.js';
import { startUpstream } from '../helpers/upstream.js';
import { UPSTREAM_CONNECTIONS } from '../../build/host/http/proxy.js';

/** More than every buffer between the gateway and a client that does not read can hold. */
const LARGE = 64 * 1024 * 1024;
const PIECE = Buffer.alloc(64 * 1024, 0x61);

/**
 * An upstream that answers /large/* with LARGE bytes, written as its connection takes
 * them (as a node streams a large answer), and anything else with its own path.
 */
async function upstreamOfLargeAnswers(t: Test) {
  return startUpstream(t, (req) => (_, res) => {
    if (!req.url?.startsWith('/large/')) {
      res.end(`{"path":"${req.url}"}`);
      return;
    }
    res.setHeader('Content-Length', LARGE);
    let left = LARGE;
    const more = (): void => {
      while (left > 0) {
        left -= PIECE.length;
        if (!res.write(PIECE)) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  });
}

/**
 * Asks `base` for `path` on a raw socket that stops reading once its answer has started;
 * resolves with what it read by then. Destroyed when the test ends.
 */
function slowReader(t: Test, base: string, path: string): Promise<{ socket: Socket; start: string }> {
  const { hostname, port } = new URL(base);
  const socket = connect(Number(port), hostname, () => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
  socket.on('error', () => undefined);
  t.teardown(() => socket.destroy());
  return new Promise((resolve) =>
    socket.once('data', (chunk: Buffer) => {
      socket.pause();
      resolve({ socket, start: chunk.toString('latin1', 0, 12) });
    }),
  );
}

function expectTimedOut(t: Test, response: HttpResponse, what: string): void {
  t.equal(response.status, 504, `${what}: 504`);
  t.equal((JSON.parse(response.text) as { error: { code: number } }).error.code, -32045, `${what}: the upstream timeout's code`);
}

t.test(`a request waiting for a connection, all ${UPSTREAM_CONNECTIONS} held by slow clients, gets 504 at its deadline`, async (t) => {
  const upstream = await upstreamOfLargeAnswers(t);
  let started = 0;
  upstream.server.on('request', () => started++);
  const gateway = await startServer(t, {
    auth: false,
    args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-timeout', '1s'],
  });
  // One reader that does not read, and uploads that stop halfway: neither kind is the
  // upstream's lateness, so neither connection times out. (Uploads hold the others: a
  // slow reader costs the gateway its socket buffers, 4 MiB here, before it holds still.)
  const reader = await slowReader(t, gateway.url, '/large/0');
  t.equal(reader.start, 'HTTP/1.1 200', "the slow reader's answer has started");
  const { hostname, port } = new URL(gateway.url);
  for (let i = 1; i < UPSTREAM_CONNECTIONS; i++) {
    const upload = connect(Number(port), hostname, () =>
      upload.write(`POST /upload/${i} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n`),
    );
    upload.on('error', () => undefined);
    t.teardown(() => upload.destroy());
  }
  while (started < UPSTREAM_CONNECTIONS) await new Promise((resolve) => setTimeout(resolve, 20));
  t.equal(upstream.connections(), UPSTREAM_CONNECTIONS, 'every connection the thread may open is taken');
  // Without a deadline it would wait as long as they hold on: the request's own timeout only turns that into a failure.
  expectTimedOut(t, await request(gateway.url, '/small', { timeoutMs: 60_000 }), 'one more client');
  t.notOk(
    upstream.seen.some((r) => r.url === '/small'),
    'it never reached the upstream',
  );
  const line = await gateway.waitForLog((l) => l.msg === 'the upstream node did not answer');
  t.equal(line.error, 'no connection to the upstream node came free within 1 s', 'the log says why');
  reader.socket.destroy();
  t.equal((await request(gateway.url, '/small')).text, '{"path":"/small"}', 'once a connection is free, requests are answered again');
});

t.test('a request pipelined behind a slow reader gets 504 at its deadline', async (t) => {
  // An upstream that reads every request as it comes, as Go's net/http does, and answers in order.
  const largeAnswer = Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${LARGE}\r\n\r\n`), Buffer.alloc(LARGE, 0x61)]);
  const upstream = await startScriptedUpstream(t, (r) => (r.path.startsWith('/large/') ? largeAnswer : answer(`{"path":"${r.path}"}`)));
  const gateway = await startServer(t, {
    auth: false,
    args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-timeout', '1s', '--upstream-pipelining', '4'],
  });
  // Each slow reader and the request sent beside it: the second goes behind the first when
  // the gateway takes both in one turn, or on a connection of its own.
  const pairs = await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      void slowReader(t, gateway.url, `/large/${i}`);
      const response = await request(gateway.url, `/small/${i}`, { timeoutMs: 60_000 });
      return { i, response };
    }),
  );
  const seen = (path: string) => upstream.requests.find((r) => r.path === path)!;
  const behind = pairs.filter(({ i }) => seen(`/small/${i}`).connection === seen(`/large/${i}`).connection);
  const apart = pairs.filter((pair) => !behind.includes(pair));
  t.ok(behind.length > 0, `${behind.length} of ${pairs.length} went behind their slow reader`);
  for (const { i, response } of behind) expectTimedOut(t, response, `/small/${i}, behind /large/${i}`);
  for (const { i, response } of apart)
    t.equal(response.text, `{"path":"/small/${i}"}`, `/small/${i}, on a connection of its own: its answer`);
});
