// A hostile upstream behind a WebSocket session: after a valid 101 it
// stops reading and floods pings. Each one answered with its own pong once piled up in
// the gateway (4M pings: 560 MB). While the upstream's socket holds anything, only the
// latest ping is owed a pong, so the gateway's memory stays put over the whole flood.
import t from 'tap';
import { once } from 'node:events';
import { newToken } from '../helpers/auth.js';
import { startServer } from '../helpers/server.js';
import { rawWsUpstream, rss } from '../helpers/raw-ws-upstream.js';
import { openClient, wsUrl } from '../helpers/ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';
/** Pings of the flood (`89 00`, two bytes each), as the issue sent them. */
const PINGS = 4 * 1024 * 1024;
const CHUNK = 32 * 1024;
/** How much the gateway's memory may grow over the flood. */
const BOUND = 64 * 1024 * 1024;

t.test("an upstream that stops reading and floods pings: the pongs owed do not pile up, the gateway's memory bounded", async (t) => {
  let gateway = 0;
  let flooded: Promise<number> | undefined;
  const upstream = await rawWsUpstream(t, (socket) => {
    // From here on, nothing the gateway writes is read.
    socket.pause();
    flooded = (async () => {
      const chunk = Buffer.alloc(CHUNK * 2);
      for (let i = 0; i < CHUNK; i++) chunk[2 * i] = 0x89;
      let peak = rss(gateway);
      for (let i = 0; i < PINGS / CHUNK && !socket.destroyed; i++) {
        if (!socket.write(chunk)) await Promise.race([once(socket, 'drain'), once(socket, 'close')]);
        peak = Math.max(peak, rss(gateway));
      }
      return peak;
    })();
  });
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream, '--http-threads', '1'],
  });
  gateway = server.child.pid!;
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const baseline = rss(gateway);
  await openClient(t, wsUrl(server.url, WS_PATH), { token });
  while (flooded === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
  const grown = (await flooded) - baseline;
  t.ok(
    grown < BOUND,
    `the gateway's memory grew by ${(grown / 1048576).toFixed(1)} MiB at most over ${PINGS} pings (bound ${BOUND / 1048576} MiB)`,
  );
});
