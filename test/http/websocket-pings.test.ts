// A hostile upstream behind a WebSocket session (issue 33, item 7): after a valid 101 it
// stops reading and floods pings. Each one answered with its own pong once piled up in
// the gateway (4M pings: 560 MB). While the upstream's socket holds anything, only the
// latest ping is owed a pong, so the gateway's memory stays put over the whole flood.
import t from 'tap';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { newToken } from '../helpers/auth.js';
import { startServer } from '../helpers/server.js';
import { openClient, wsUrl } from '../helpers/ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';
/** Pings of the flood (`89 00`, two bytes each), as the issue sent them. */
const PINGS = 4 * 1024 * 1024;
const CHUNK = 32 * 1024;
/** How much the gateway's memory may grow over the flood. */
const BOUND = 64 * 1024 * 1024;

function rss(pid: number): number {
  const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (kib === null) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kib[1]) * 1024;
}

t.test('an upstream that stops reading and floods pings: the pongs owed do not pile up, the gateway\'s memory bounded', async (t) => {
  let gateway = 0;
  const sockets = new Set<Socket>();
  let flooded: Promise<number> | undefined;
  const upstream = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    let head = '';
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      // From here on, nothing the gateway writes is read.
      socket.pause();
      const key = /\r\nSec-WebSocket-Key: (\S+)\r\n/i.exec(head)![1];
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
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
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    upstream.close();
  });
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, '--http-threads', '1'],
  });
  gateway = server.child.pid!;
  const token = await newToken(server.url, server.password, [WS_PATH]);
  const baseline = rss(gateway);
  await openClient(t, wsUrl(server.url, WS_PATH), { token });
  while (flooded === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
  const grown = (await flooded) - baseline;
  t.ok(grown < BOUND, `the gateway's memory grew by ${(grown / 1048576).toFixed(1)} MiB at most over ${PINGS} pings (bound ${BOUND / 1048576} MiB)`);
});
