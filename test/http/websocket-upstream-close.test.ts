// A client that leaves while its messages still wait for an upstream that does not read.
// Before, the session held its close frame back behind them, and an upstream
// that never drained kept the connection, and the messages queued for it, for good
// (10 sessions: about 150 MB and 10 fds after their clients were gone). The held close
// now waits as long as a close handshake would, then the upstream is cut.
import t from 'tap';
import { newToken } from '../helpers/auth.js';
import { startServer, sleep } from '../helpers/server.js';
import { connectionsTo, rawWsUpstream } from '../helpers/raw-ws-upstream.js';
import { openClient, wsUrl } from '../helpers/ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';
const SESSIONS = 4;
/** Each client sends this many messages of MESSAGE bytes: more than the kernel's buffers take, less than --ws-max-message in all. */
const MESSAGES = 32;
const MESSAGE = 1024 * 1024;
/** Long past the gateway's bound (2 s), on any machine: the old code never let go. */
const PATIENCE_MS = 30_000;

t.test('clients that leave with messages queued for an upstream that stops reading: the upstream connections are cut', async (t) => {
  let upgraded = 0;
  const upstream = await rawWsUpstream(t, (socket) => {
    // From here on, nothing the gateway writes is read.
    socket.pause();
    upgraded++;
  });
  const port = Number(new URL(upstream).port);
  const server = await startServer(t, {
    cheapChecks: true,
    args: [
      '--upstream',
      upstream,
      '--http-threads',
      '1',
      '--ws-max-message',
      '64MiB',
      '--ws-max-sessions',
      String(SESSIONS),
      '--ws-max-sessions-per-token',
      String(SESSIONS),
      '--ws-max-sessions-per-client',
      String(SESSIONS),
    ],
  });
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const clients = [];
  for (let i = 0; i < SESSIONS; i++) clients.push(await openClient(t, wsUrl(server.url, WS_PATH), { token }));
  t.equal(upgraded, SESSIONS, 'every session reached the upstream');
  t.equal(connectionsTo(port), SESSIONS, 'one upstream connection per session');
  const payload = Buffer.alloc(MESSAGE, 0x61);
  await Promise.all(
    clients.map(async (client) => {
      for (let i = 0; i < MESSAGES; i++) {
        await new Promise<void>((resolve, reject) =>
          client.socket.send(payload, { binary: false }, (error) => (error ? reject(error) : resolve())),
        );
      }
      client.socket.close(1000, 'done');
      await client.closed;
    }),
  );
  const start = Date.now();
  while (connectionsTo(port) > 0 && Date.now() - start < PATIENCE_MS) await sleep(100);
  t.equal(connectionsTo(port), 0, 'then every upstream connection is cut');
  t.equal(server.hasExited(), false, 'the gateway runs on');
});
