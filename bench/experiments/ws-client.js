// Experiment, not part of `npm run bench`: which WebSocket client api-auth should use for
// its upstream side, `ws` or undici's WebSocket, and what a client of its own over
// `node:net` would save. Each opens the same sessions to the same bare uWebSockets.js
// echo upstream and keeps one message in flight per session for the same time; what
// counts is the client's CPU per message (the relay pays it for every message, both ways)
// and the messages per second. The upstream is pinned to a CPU of its own; the client is
// this process.
//
// The third client ("net + onread") is a bound, not a candidate: the least a client can
// do per message in Node. It reads with `onread` into one buffer kept for the socket (no
// stream, no 'data' event, no allocation per read), finds whole frames in place (a server
// does not mask), and writes each message as one masked frame (bufferutil, a random key
// per frame) in one write. It has none of what a real client needs beyond that: no ping,
// close handshake, fragments, limits or backpressure.
//
// The fourth is the client the relay now uses (host/http/upstream-ws, from the build):
// the third's way of reading and writing with all of that added.
//   node bench/experiments/ws-client.js [seconds] [sessions] [bytes]
import { randomBytes, randomFillSync } from 'node:crypto';
import { connect } from 'node:net';
import { join } from 'node:path';
import { mask as applyMask } from 'bufferutil';
import { WebSocket as Undici } from 'undici';
import { WebSocket as Ws } from 'ws';
import { connectUpstream } from '../../build/host/http/upstream-ws/socket.js';
import { ROOT, int, ms, table, usec } from '../lib/common.js';
import { placement, startServer } from '../lib/proc.js';

const seconds = Number(process.argv[2] ?? 5);
const sessions = Number(process.argv[3] ?? 64);
const bytes = Number(process.argv[4] ?? 100);
const where = placement(1);
const upstream = await startServer('ws-echo upstream', process.execPath, [join(ROOT, 'bench', 'servers', 'ws-echo.js')], {
  cpus: where.server,
});
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

/** Masking keys, drawn in blocks as ws draws them. */
const keys = Buffer.alloc(8192);
let keyAt = keys.length;

/** One masked binary frame of `data` (under 64 KiB), header and payload in one buffer. */
function frame(data) {
  const header = data.length > 125 ? 8 : 6;
  const out = Buffer.allocUnsafe(header + data.length);
  out[0] = 0x82;
  if (header === 8) {
    out[1] = 0x80 | 126;
    out.writeUInt16BE(data.length, 2);
  } else {
    out[1] = 0x80 | data.length;
  }
  if (keyAt === keys.length) {
    randomFillSync(keys);
    keyAt = 0;
  }
  const key = keys.subarray(keyAt, keyAt + 4);
  keyAt += 4;
  key.copy(out, header - 4);
  applyMask(data, key, out, header, data.length);
  return out;
}

/** A session over node:net: the upgrade by hand, then frames read in place from one buffer. */
function openNet() {
  return new Promise((resolve, reject) => {
    const buffer = Buffer.allocUnsafe(256 * 1024);
    let have = 0;
    let upgraded = false;
    const session = { onMessage: null, send: (data) => socket.write(frame(data)) };
    const socket = connect({
      host: '127.0.0.1',
      port: upstream.port,
      onread: {
        buffer,
        callback(n) {
          have += n;
          let at = 0;
          if (!upgraded) {
            const end = buffer.indexOf('\r\n\r\n', 0, 'latin1');
            if (end < 0 || end + 4 > have) return true;
            if (!buffer.toString('latin1', 0, 12).startsWith('HTTP/1.1 101')) reject(new Error('the upgrade was refused'));
            upgraded = true;
            at = end + 4;
            resolve(session);
          }
          // Whole frames, in place: a server's frames are not masked.
          for (;;) {
            if (have - at < 2) break;
            let length = buffer[at + 1] & 0x7f;
            let header = 2;
            if (length === 126) {
              if (have - at < 4) break;
              length = buffer.readUInt16BE(at + 2);
              header = 4;
            }
            if (have - at < header + length) break;
            session.onMessage(buffer.subarray(at + header, at + header + length));
            at += header + length;
          }
          buffer.copy(buffer, 0, at, have);
          have -= at;
          return true;
        },
      },
    });
    socket.setNoDelay(true);
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write(
        `GET /ext/bc/C/ws HTTP/1.1\r\nHost: 127.0.0.1:${upstream.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    });
    session.close = () => socket.destroy();
  });
}

const rows = [];
try {
  rows.push([
    'ws 8',
    ...(await measure(
      () =>
        new Promise((resolve, reject) => {
          const s = new Ws(url, { perMessageDeflate: false });
          s.once('open', () => resolve(s));
          s.once('error', reject);
        }),
      (s, handler) => s.on('message', handler),
      (s, data) => s.send(data, { binary: true }),
    )),
  ]);
  rows.push([
    'undici WebSocket',
    ...(await measure(
      () =>
        new Promise((resolve, reject) => {
          const s = new Undici(url);
          s.binaryType = 'arraybuffer';
          s.addEventListener('open', () => resolve(s), { once: true });
          s.addEventListener('error', (e) => reject(e.error ?? new Error('undici WebSocket failed')), { once: true });
        }),
      (s, handler) => s.addEventListener('message', (event) => handler(Buffer.from(event.data))),
      (s, data) => s.send(data),
    )),
  ]);
  if (bytes <= 65535) {
    rows.push([
      'net + onread, no stream (a bound)',
      ...(await measure(
        openNet,
        (s, handler) => {
          s.onMessage = handler;
        },
        (s, data) => s.send(data),
      )),
    ]);
  }
  rows.push([
    "api-auth's upstream-ws (the relay's)",
    ...(await measure(
      () =>
        new Promise((resolve, reject) => {
          const session = { onMessage: null, socket: null, close: () => session.socket.close(1000, '') };
          const request = {
            url: new URL(`http://127.0.0.1:${upstream.port}`),
            target: '/ext/bc/C/ws',
            protocols: [],
            headers: [],
            maxMessage: 16 << 20,
            closeTimeoutMs: 1000,
          };
          connectUpstream(request, {
            accepted(socket) {
              socket.listen({ message: (data) => session.onMessage(data), alive() {}, closed() {} });
              session.socket = socket;
              resolve(session);
            },
            unexpected: (status) => reject(new Error(`the upgrade was refused with HTTP ${status}`)),
            failed: reject,
            closed() {},
          });
        }),
      (s, handler) => {
        s.onMessage = handler;
      },
      (s, data) => s.socket.send(data, true),
    )),
  ]);
} finally {
  await upstream.stop();
}
process.stdout.write(
  `${sessions} sessions, one ${bytes}-byte binary message in flight each, ${seconds} s, upstream on CPU ${where.server ?? 'any'}\n\n`,
);
process.stdout.write(`${table(['client', 'echoes/s', 'p50', 'p99', 'client CPU/echo'], rows)}\n`);
