// The load of the WebSocket part, in a process of its own (pinned with the upstream):
// `connections` sessions to `url`, each keeping `depth` messages of `bytes` bytes in
// flight, every message sent again as soon as its echo comes back. Each message carries
// the time it was sent, so each echo is one latency sample. After `warmupS` seconds
// unmeasured, `durationS` seconds are measured; one JSON line on stdout:
// {messages, perSecond, p50Ms, p99Ms, errors}.
//   node bench/lib/ws-load.js '{"url":"ws://...","headers":{},"connections":64,"depth":1,"bytes":100,"durationS":5,"warmupS":1}'
import { WebSocket } from 'ws';

const o = JSON.parse(process.argv[2]);
const payload = Buffer.alloc(Math.max(8, o.bytes), 0x61);
const samples = [];
let measuring = false;
let messages = 0;
let errors = 0;
let stopped = false;

function open() {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(o.url, { headers: o.headers ?? {}, perMessageDeflate: false });
    socket.once('open', () => resolve(socket));
    socket.once('unexpected-response', (_req, res) => reject(new Error(`the upgrade got HTTP ${res.statusCode}`)));
    socket.once('error', reject);
  });
}

function send(socket) {
  // The send time rides in the first 8 bytes; the rest is the payload's filler.
  payload.writeDoubleLE(performance.now(), 0);
  socket.send(payload, { binary: true });
}

const sockets = await Promise.all(Array.from({ length: o.connections }, open));
for (const socket of sockets) {
  socket.on('message', (data) => {
    if (measuring) {
      samples.push(performance.now() - data.readDoubleLE(0));
      messages++;
    }
    if (!stopped) send(socket);
  });
  socket.on('error', () => {
    errors++;
  });
  socket.on('close', () => {
    if (!stopped) errors++;
  });
  for (let i = 0; i < o.depth; i++) send(socket);
}
await new Promise((resolve) => setTimeout(resolve, o.warmupS * 1000));
measuring = true;
// The parent meters the gateway's CPU from this line on.
process.stdout.write('{"msg":"measuring"}\n');
const start = performance.now();
await new Promise((resolve) => setTimeout(resolve, o.durationS * 1000));
measuring = false;
const elapsed = (performance.now() - start) / 1000;
stopped = true;
for (const socket of sockets) socket.terminate();
samples.sort((a, b) => a - b);
const at = (q) => (samples.length === 0 ? null : samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]);
process.stdout.write(`${JSON.stringify({ messages, perSecond: messages / elapsed, p50Ms: at(0.5), p99Ms: at(0.99), errors })}\n`);
