// A WebSocket upgrade whose upstream accepts the connection and never answers: 504 at
// --upstream-timeout, not before, not later. The handshake's deadline is a timer: the
// service runs in this process, on one thread, with setTimeout on a time the test moves
// (timers.ts), so the verdict is the timer's and never the machine's speed. Alone in its
// file: mocked timers are the whole process's.
import t from 'tap';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { newToken } from '../helpers/auth.js';
import { serveInProcess } from '../helpers/library.js';
import { manualTimers, settle } from '../helpers/timers.js';
import { upgradeRefused, wsUrl } from '../helpers/ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';

t.test('an upstream that does not answer the upgrade in time: 504 at --upstream-timeout', async (t) => {
  // Accepts connections, never answers; keeps what it was sent.
  const sockets = new Set<Socket>();
  let received = '';
  const silent = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
  const slow = await serveInProcess(t, {
    cheapChecks: true,
    args: ['--upstream', `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, '--upstream-timeout', '1s', '--http-threads', '1'],
  });
  const slowToken = await newToken(slow.url, slow.password, [WS_PATH]);
  const timers = manualTimers(t);
  let answered = false;
  const refusal = upgradeRefused(t, wsUrl(slow.url, WS_PATH), { token: slowToken }).finally(() => {
    answered = true;
  });
  await timers.set(1000);
  timers.tick(999);
  await settle();
  t.notOk(answered, 'a millisecond short of --upstream-timeout: no answer yet');
  timers.tick(1);
  const timedOut = await refusal;
  t.equal(timedOut.status, 504, 'no answer within --upstream-timeout: 504');
  t.same(JSON.parse(timedOut.body).error, { code: -32045, message: 'the upstream node did not answer within 1 s' });
  t.match(received, /\r\nupgrade: websocket\r\n/i, 'what timed out was a WebSocket handshake');
  t.match(received, /\r\nsec-websocket-key: [A-Za-z0-9+/]{22}==\r\n/i, 'with its Sec-WebSocket-Key');
});
