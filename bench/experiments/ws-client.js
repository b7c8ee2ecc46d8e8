// Experiment, not part of `npm run bench`: which WebSocket client api-auth should use for
// its upstream side, `ws` or undici's WebSocket. Each opens the same sessions to the same
// bare uWebSockets.js echo upstream and keeps one message in flight per session for the
// same time; what counts is the client's CPU per message (the relay pays it for every
// message, both ways) and the messages per second. The upstream is pinned to a CPU of
// its own; the client is this process.
//   node bench/experiments/ws-client.js [seconds] [sessions] [bytes]
import { join } from 'node:path';
import { WebSocket as Undici } from 'undici';
import { WebSocket as Ws } from 'ws';
import { ROOT, int, ms, table, usec } from '../lib/common.js';
import { placement, startServer } from '../lib/proc.js';

const seconds = Number(process.argv[2] ?? 5);
const sessions = Number(process.argv[3] ?? 64);
const bytes = Number(process.argv[4] ?? 100);
const where = placement(1);
const upstream = await startServer('ws-echo upstream', process.execPath, [join(ROOT, 'bench', 'servers', 'ws-echo.js')], { cpus: where.server });
const url = `ws://127.0.0.1:${upstream.port}/ext/bc/C/ws`;
const payload = Buffer.alloc(Math.max(8, bytes), 0x61);

/** The same closed loop for both: `on(socket, handler)` adapts each library's message event. */
async function measure(open, on, send) {
  const sockets = await Promise.all(Array.from({ length: sessions }, open));
  const samples = [];
  let counting = false;
  let stop = false;
  for (const socket of sockets) {
    on(socket, (data) => {
      if (counting) samples.push(performance.now() - data.readDoubleLE(0));
      if (!stop) {
        payload.writeDoubleLE(performance.now(), 0);
        send(socket, payload);
      }
    });
    payload.writeDoubleLE(performance.now(), 0);
    send(socket, payload);
  }
  await new Promise((resolve) => setTimeout(resolve, 1000));
  counting = true;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  counting = false;
  const wall = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  stop = true;
  for (const socket of sockets) socket.close();
  samples.sort((a, b) => a - b);
  const n = samples.length;
  return [int(n / wall), ms(samples[n >> 1]), ms(samples[Math.floor(n * 0.99)]), usec((cpu.user + cpu.system) / n)];
}

const rows = [];
try {
  rows.push(['ws 8', ...await measure(
    () => new Promise((resolve, reject) => {
      const s = new Ws(url, { perMessageDeflate: false });
      s.once('open', () => resolve(s));
      s.once('error', reject);
    }),
    (s, handler) => s.on('message', handler),
    (s, data) => s.send(data, { binary: true }),
  )]);
  rows.push(['undici WebSocket', ...await measure(
    () => new Promise((resolve, reject) => {
      const s = new Undici(url);
      s.binaryType = 'arraybuffer';
      s.addEventListener('open', () => resolve(s), { once: true });
      s.addEventListener('error', (e) => reject(e.error ?? new Error('undici WebSocket failed')), { once: true });
    }),
    (s, handler) => s.addEventListener('message', (event) => handler(Buffer.from(event.data))),
    (s, data) => s.send(data),
  )]);
} finally {
  await upstream.stop();
}
process.stdout.write(`${sessions} sessions, one ${bytes}-byte binary message in flight each, ${seconds} s, upstream on CPU ${where.server ?? 'any'}\n\n`);
process.stdout.write(`${table(['client', 'echoes/s', 'p50', 'p99', 'client CPU/echo'], rows)}\n`);
