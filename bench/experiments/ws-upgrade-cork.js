// Experiment, not part of `npm run bench`: what answering a WebSocket upgrade outside
// res.cork() costs api-auth, and what answering it inside would. The relay completes an
// upgrade from the upstream's answer, outside any uWS callback. Uncorked (what ships),
// uWebSockets.js prints `Warning: uWS.HttpResponse writes must be made from within a
// corked callback...` on stderr, a line that is not JSON, for each session. Corked, as
// its documentation advises, this uWS (uws-pack 20.0.8, uWebSockets.js ~v20.49) may read
// the new WebSocket's memory as the response's and close the socket it just opened
// (uNetworking/uWebSockets.js#1928, fixed by #1929 only in builds that need glibc 2.38).
//
// For each mode, a fresh api-auth (--api-auth-required --upstream, --http-threads 2) in
// front of the ws part's echo upstream, and `--sessions` upgrades through it, at most
// `--concurrency` waiting at once, each held open until all are done. A session counts as
// opened once its 101 came, and as working once a text message sent on it came back. A
// session that did not work is told apart by how: its 101 came and then the socket was
// cut (what #1928 does), its 101 came and no echo within 30 s, or no 101 came (the socket
// ended first, another status, or nothing within 30 s). Then the
// gateway is stopped and the lines it wrote that are not JSON are counted, stdout and
// stderr alike.
//
// The corked mode runs a patched copy of the build, made for the run under
// bench/experiments/results/ (which git ignores): websocket.js's one res.upgrade() call
// wrapped in res.cork(). The product is never changed; the copy fails loudly if that
// call is not found exactly once.
//   node bench/experiments/ws-upgrade-cork.js [--sessions 5000] [--threads 2] [--concurrency 100] [--runs 1] [--modes shipped,corked]
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BUILD, ROOT, int, table } from '../lib/common.js';
import { newToken, startOurs, wsLoadArgs } from '../lib/api-auth.js';
import { startServer } from '../lib/proc.js';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '5000' },
    threads: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '100' },
    runs: { type: 'string', default: '1' },
    modes: { type: 'string', default: 'shipped,corked' },
  },
});
const positive = (name) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) {
    process.stderr.write(`--${name} must be a whole number of at least 1, not ${JSON.stringify(values[name])}\n`);
    process.exit(2);
  }
  return n;
};
const SESSIONS = positive('sessions');
const THREADS = positive('threads');
const CONCURRENCY = positive('concurrency');
const RUNS = positive('runs');
const MODES = values.modes.split(',');
for (const mode of MODES) {
  if (mode !== 'shipped' && mode !== 'corked') {
    process.stderr.write(`--modes lists shipped and corked, not ${JSON.stringify(mode)}\n`);
    process.exit(2);
  }
}
const WS_PATH = '/ext/bc/C/ws';
const ANSWER_MS = 30_000;
const WARNING = 'uWS.HttpResponse writes must be made from within a corked callback';
const UPGRADE_CALL = "this.res.upgrade({ session }, this.key, upstream.protocol, '', this.context);";

/** The build with the upgrade corked, in a folder of its own beside a copy of package.json (version.js reads it). */
function corkedBuild(dir) {
  const copy = join(dir, 'build');
  cpSync(BUILD, copy, { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  const file = join(copy, 'host', 'http', 'websocket.js');
  const source = readFileSync(file, 'utf8');
  const found = source.split(UPGRADE_CALL).length - 1;
  if (found !== 1) throw new Error(`${file}: the upgrade call is there ${found} times, not once: the experiment needs updating`);
  writeFileSync(file, source.replace(UPGRADE_CALL, `this.res.cork(() => ${UPGRADE_CALL.slice(0, -1)});`));
  return join(copy, 'host', 'main.js');
}

/** One masked text frame of `text` (a client must mask). */
function clientFrame(text) {
  const payload = Buffer.from(text);
  const key = randomBytes(4);
  const out = Buffer.alloc(6 + payload.length);
  out[0] = 0x81;
  out[1] = 0x80 | payload.length;
  key.copy(out, 2);
  for (let i = 0; i < payload.length; i++) out[6 + i] = payload[i] ^ key[i & 3];
  return out;
}

const ECHO = 'are you there';
const ECHO_FRAME = Buffer.concat([Buffer.from([0x81, ECHO.length]), Buffer.from(ECHO)]);

/**
 * One session on a raw socket: the upgrade, then one message. Resolves with 'working'
 * (101 and the echo), 'cut' (101, then the socket ended before the echo), 'silent' (101,
 * no echo in time, the socket open), or 'dropped' (no 101: the socket ended first,
 * another status came, or nothing in time); the socket stays open for the caller to end.
 */
function session(port, token, sockets) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    let got = Buffer.alloc(0);
    let opened = false;
    let done = false;
    const finish = (outcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const timer = setTimeout(() => finish(opened ? 'silent' : 'dropped'), ANSWER_MS);
    socket.on('error', () => undefined);
    socket.on('close', () => finish(opened ? 'cut' : 'dropped'));
    socket.on('data', (chunk) => {
      got = Buffer.concat([got, chunk]);
      if (!opened) {
        const end = got.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!got.subarray(0, 13).equals(Buffer.from('HTTP/1.1 101 '))) return finish('dropped');
        opened = true;
        got = got.subarray(end + 4);
        socket.write(clientFrame(ECHO));
      }
      if (got.length >= ECHO_FRAME.length) finish(got.subarray(0, ECHO_FRAME.length).equals(ECHO_FRAME) ? 'working' : 'silent');
    });
    socket.write(`GET ${WS_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`
      + `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  });
}

/**
 * The lines of `text` that are not JSON, and how many times uWS's cork warning is in
 * them: two threads' warnings written at once can share a line.
 */
function nonJson(text) {
  const lines = text.split('\n').filter((line) => line !== '');
  const bad = lines.filter((line) => {
    try {
      JSON.parse(line);
      return false;
    } catch {
      return true;
    }
  });
  return { lines: bad.length, warnings: bad.reduce((n, line) => n + line.split(WARNING).length - 1, 0) };
}

async function run(mode, upstreamPort, scratch) {
  const main = mode === 'corked' ? corkedBuild(join(scratch, `corked-${Date.now()}`)) : undefined;
  const ours = await startOurs({ upstream: `http://127.0.0.1:${upstreamPort}`, threads: THREADS, extraArgs: wsLoadArgs(SESSIONS), ...(main && { main }) });
  const sockets = [];
  const outcomes = { working: 0, cut: 0, silent: 0, dropped: 0 };
  const started = performance.now();
  try {
    const token = await newToken(ours.server.port, ours.password, [WS_PATH]);
    let next = 0;
    const worker = async () => {
      while (next < SESSIONS) {
        next++;
        outcomes[await session(ours.server.port, token, sockets)]++;
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, SESSIONS) }, worker));
  } finally {
    const seconds = (performance.now() - started) / 1000;
    for (const socket of sockets) socket.destroy();
    await ours.cleanup();
    // startServer reads every stdout line into logs, a line that is not JSON as { raw }.
    const out = nonJson(ours.server.logs.filter((l) => l.raw !== undefined).map((l) => l.raw).join('\n'));
    const err = nonJson(ours.server.stderr());
    outcomes.seconds = seconds;
    outcomes.nonJson = out.lines + err.lines;
    outcomes.warnings = out.warnings + err.warnings;
  }
  return outcomes;
}

const scratch = join(ROOT, 'bench', 'experiments', 'results', `${new Date().toISOString().replace(/[:.]/g, '-')}-ws-upgrade-cork`);
mkdirSync(scratch, { recursive: true });
const upstream = await startServer('ws-echo upstream', process.execPath, [join(ROOT, 'bench', 'servers', 'ws-echo.js')]);
const rows = [];
try {
  for (let r = 1; r <= RUNS; r++) {
    for (const mode of MODES) {
      const o = await run(mode, upstream.port, scratch);
      rows.push([mode, String(r), int(SESSIONS), int(o.working), int(o.cut), int(o.silent), int(o.dropped), int(o.nonJson), int(o.warnings), o.seconds.toFixed(1)]);
      process.stderr.write(`${mode} run ${r}: ${SESSIONS - o.working} of ${SESSIONS} not working, ${o.nonJson} non-JSON lines\n`);
    }
  }
} finally {
  await upstream.stop();
  rmSync(scratch, { recursive: true, force: true });
}
process.stdout.write(`api-auth --http-threads ${THREADS}, ${SESSIONS} sessions, ${CONCURRENCY} upgrades at once, not pinned\n\n`);
process.stdout.write(`${table(['upgrade', 'run', 'sessions', 'working', '101, then cut', '101, no echo', 'no 101', 'non-JSON lines', 'cork warnings in them', 's'], rows)}\n`);
