// Experiment, not part of `npm run bench`: what answering a WebSocket upgrade outside
// res.cork() costs api-auth, and what answering it inside would. The relay completes an
// upgrade from the upstream's answer, outside any uWS callback. Uncorked (what ships),
// uWebSockets.js prints `Warning: uWS.HttpResponse writes must be made from within a
// corked callback...` on stderr, a line that is not JSON, for each session. Corked, as
// its documentation advises, this uWS (uws-pack 20.0.8) may close the socket it just
// opened (uNetworking/uWebSockets#1928, fixed by #1929 only in builds that need glibc
// 2.38): after the callback, HttpResponse::cork() tells an upgrade apart only by the
// socket's address, which the upgrade's realloc() keeps (the block shrinks, 280 bytes to
// 200), and so reads the response's state from the freed tail of that block. Those
// bytes still say "answered, keep-alive" unless something has reused them by then; when
// it has, and they read as Connection: close, cork() closes the new WebSocket.
//
// For each mode, a fresh api-auth (--api-auth-required --upstream, --http-threads 2) in
// front of the ws part's echo upstream, and `--sessions` upgrades through it, at most
// `--concurrency` waiting at once, each held open until all are done. A session counts as
// opened once its 101 came, and as working once a text message sent on it came back. A
// session that did not work is told apart by how: its 101 came and then the socket was
// cut (what #1928 does), its 101 came and no echo within 30 s, or no 101 came (the socket
// ended first, another status, or nothing within 30 s). Then the
// gateway is stopped and the lines it wrote that are not JSON are counted, stdout and
// stderr alike. At 10,000 sessions the gateway (two sockets a session) is at an
// open-file limit of 20,000, and a few dozen sessions get no 101 whatever the mode.
//
// A mode other than shipped runs a patched copy of the build, made for the run under
// bench/experiments/results/ (which git ignores). The call it patches is found from the
// sources: the one file of host/http/websocket/ whose code calls res.upgrade(), and that
// call's statement in the file built from it (corked: the statement wrapped in
// res.cork()). The product is never changed; the copy fails loudly if there is not
// exactly one such call.
//
// Measured on 2026-12-04 (2 cores, Debian 12, glibc 2.36), --sessions 5000 --threads 2,
// 10 runs each: shipped, 0 of 50,000 sessions cut and 5,000 cork warnings a run; corked,
// 15 of 50,000 cut (6, 4 and 5 in three of the runs, 0 in the others) and no warning.
//   node bench/experiments/ws-upgrade-cork.js [--sessions 5000] [--threads 2] [--concurrency 100] [--runs 1] [--modes shipped,corked]
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
const WS_PATH = '/ext/bc/C/ws';
const ANSWER_MS = 30_000;
const WARNING = 'uWS.HttpResponse writes must be made from within a corked callback';
const WEBSOCKET_DIR = join('host', 'http', 'websocket');
/** A call of uWS's res.upgrade(), in TypeScript (type arguments and all) or as built. */
const UPGRADE = /\bres\.upgrade\b(<.*>)?\(/;

/**
 * The one place in host/http/websocket/ that answers an upgrade: the source file whose
 * code calls res.upgrade(), found from the sources rather than named here (the call has
 * moved before), and that call's statement in the file built from it.
 */
function upgradeSite() {
  const code = (line) => !/^\s*(\/\/|\*|\/\*)/.test(line);
  const sources = readdirSync(join(ROOT, WEBSOCKET_DIR)).filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'));
  const calls = sources.flatMap((name) =>
    readFileSync(join(ROOT, WEBSOCKET_DIR, name), 'utf8')
      .split('\n')
      .filter((line) => code(line) && UPGRADE.test(line))
      .map((line) => ({ name, line: line.trim() })),
  );
  if (calls.length !== 1) {
    throw new Error(
      `${WEBSOCKET_DIR}: res.upgrade() is called ${calls.length} times, not once (${calls.map((c) => c.name).join(', ')}): the experiment needs updating`,
    );
  }
  const built = join(WEBSOCKET_DIR, calls[0].name.replace(/\.ts$/, '.js'));
  const statements = readFileSync(join(BUILD, built), 'utf8')
    .split('\n')
    .filter((line) => code(line) && UPGRADE.test(line));
  if (statements.length !== 1 || !/^\s*[\w.]+\.upgrade\(.*\);$/.test(statements[0])) {
    throw new Error(
      `${join(BUILD, built)}: not one res.upgrade(...); statement of its own (${statements.length} lines call it): the experiment needs updating`,
    );
  }
  return { file: built, statement: statements[0].trim(), receiver: statements[0].trim().replace(/\.upgrade\(.*$/, '') };
}

/** How each mode answers the upgrade: the statement that takes the place of the shipped one. */
const VARIANTS = {
  shipped: null,
  // The whole upgrade within res.cork(), as uWS's documentation has it.
  corked: ({ statement, receiver }) => `${receiver}.cork(() => ${statement.slice(0, -1)});`,
};

for (const mode of MODES) {
  if (!Object.hasOwn(VARIANTS, mode)) {
    process.stderr.write(`--modes lists ${Object.keys(VARIANTS).join(', ')}, not ${JSON.stringify(mode)}\n`);
    process.exit(2);
  }
}

/** The build with the upgrade answered as `mode` has it, in a folder of its own beside a copy of package.json (version.js reads it). */
function variantBuild(mode, dir) {
  const site = upgradeSite();
  const copy = join(dir, 'build');
  cpSync(BUILD, copy, { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  const file = join(copy, site.file);
  const source = readFileSync(file, 'utf8');
  writeFileSync(file, source.replace(site.statement, VARIANTS[mode](site)));
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
    socket.write(
      `GET ${WS_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${token}\r\n\r\n`,
    );
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
  const main = VARIANTS[mode] ? variantBuild(mode, join(scratch, `${mode}-${Date.now()}`)) : undefined;
  const ours = await startOurs({
    upstream: `http://127.0.0.1:${upstreamPort}`,
    threads: THREADS,
    extraArgs: wsLoadArgs(SESSIONS),
    ...(main && { main }),
  });
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
    const out = nonJson(
      ours.server.logs
        .filter((l) => l.raw !== undefined)
        .map((l) => l.raw)
        .join('\n'),
    );
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
      rows.push([
        mode,
        String(r),
        int(SESSIONS),
        int(o.working),
        int(o.cut),
        int(o.silent),
        int(o.dropped),
        int(o.nonJson),
        int(o.warnings),
        o.seconds.toFixed(1),
      ]);
      process.stderr.write(`${mode} run ${r}: ${SESSIONS - o.working} of ${SESSIONS} not working, ${o.nonJson} non-JSON lines\n`);
    }
  }
} finally {
  await upstream.stop();
  rmSync(scratch, { recursive: true, force: true });
}
process.stdout.write(`api-auth --http-threads ${THREADS}, ${SESSIONS} sessions, ${CONCURRENCY} upgrades at once, not pinned\n\n`);
process.stdout.write(
  `${table(['upgrade', 'run', 'sessions', 'working', '101, then cut', '101, no echo', 'no 101', 'non-JSON lines', 'cork warnings in them', 's'], rows)}\n`,
);
