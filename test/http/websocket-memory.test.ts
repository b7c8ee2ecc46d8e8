// What WebSocket sessions may hold, bounded for the whole process: ten
// raw sessions each announced a 32 MiB - 1 frame and stopped 1 byte short, and RSS went
// from 93 to 414 MiB, as uWS gathered up to twice --ws-max-message per client. uWS now
// cuts a frame over the limit at its header, each session holds at most
// 6 x --ws-max-message + 2 MiB (host/session-memory.ts), and --ws-memory-budget bounds
// the sessions by it: a start that asks for more sessions than the budget holds stops.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { Test } from 'tap';
import { newToken } from '../helpers/auth.js';
import { runCli, sleep, startServer, tempDir } from '../helpers/server.js';
import { acceptFor, rss } from '../helpers/raw-ws-upstream.js';
import { openClient, Refused, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';
const MIB = 1024 * 1024;
const MAX_MESSAGE = 8 * MIB;
/** What session-memory.ts states one session may hold at MAX_MESSAGE. */
const SESSION_BYTES = 6 * MAX_MESSAGE + 2 * MIB;
const SESSIONS = 10;

/** A raw client: the upgrade written by hand, so that it can send a frame header and stop where it likes. */
async function rawSession(t: Test, port: number, token: string): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  const key = randomBytes(16).toString('base64');
  socket.write(
    `GET ${WS_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${token}\r\n\r\n`,
  );
  let head = '';
  while (!head.includes('\r\n\r\n')) head += ((await once(socket, 'data'))[0] as Buffer).toString('latin1');
  if (!head.startsWith('HTTP/1.1 101') || !head.includes(acceptFor(key)))
    throw new Error(`the upgrade was not accepted: ${head.split('\r\n')[0]}`);
  return socket;
}

/** A masked binary frame's header announcing `length` bytes (the mask all zero: the payload goes as it is). */
function header(length: number): Buffer {
  const bytes = Buffer.alloc(14);
  bytes[0] = 0x82;
  bytes[1] = 0x80 | 127;
  bytes.writeUInt32BE(Math.floor(length / 0x100000000), 2);
  bytes.writeUInt32BE(length >>> 0, 6);
  return bytes;
}

function write(socket: Socket, data: Buffer): Promise<void> {
  return new Promise((resolve) => socket.write(data, () => resolve()));
}

t.test(
  'sessions each announcing a largest frame and stopping 1 byte short hold no more than the budget states; one over the limit is cut at its header',
  async (t) => {
    const upstream = await startWsUpstream(t);
    const server = await startServer(t, {
      cheapChecks: true,
      args: [
        '--upstream',
        upstream.url,
        '--http-threads',
        '1',
        '--ws-max-message',
        `${MAX_MESSAGE / MIB}MiB`,
        '--ws-memory-budget',
        `${(SESSIONS * SESSION_BYTES) / MIB}MiB`,
        '--ws-max-sessions',
        String(SESSIONS),
        '--ws-max-sessions-per-token',
        String(SESSIONS),
        '--ws-max-sessions-per-client',
        String(SESSIONS),
      ],
    });
    const gateway = server.child.pid!;
    const token = await newToken(server.url, server.password, [WS_PATH]);
    const baseline = rss(gateway);

    // As the issue sent them at its limit: twice the message limit, less one. uWS once gathered these.
    const over = [];
    for (let i = 0; i < SESSIONS; i++) over.push(await rawSession(t, server.port, token));
    for (const socket of over) {
      // The gateway cuts the session at the header: the bytes written after it may meet a
      // reset, which `once` would take for a failure, so the close is waited for as such.
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') t.fail(`the cut session's socket: ${error.message}`);
      });
      await write(socket, header(2 * MAX_MESSAGE - 1));
      socket.write(Buffer.alloc(64 * 1024));
      await closed;
    }
    t.pass(`${SESSIONS} frames announced at ${2 * MAX_MESSAGE - 1} bytes: each session cut at the header`);
    while (upstream.sessions.filter((s) => s.socket.readyState === s.socket.OPEN).length > 0) await sleep(50);

    const payload = Buffer.alloc(MAX_MESSAGE - 1, 0x61);
    const held = [];
    let peak = rss(gateway);
    for (let i = 0; i < SESSIONS; i++) {
      const socket = await rawSession(t, server.port, token);
      held.push(socket);
      await write(socket, header(MAX_MESSAGE));
      await write(socket, payload);
      peak = Math.max(peak, rss(gateway));
    }
    for (let i = 0; i < 10; i++) {
      await sleep(100);
      peak = Math.max(peak, rss(gateway));
    }
    t.ok(
      held.every((socket) => !socket.destroyed),
      `${SESSIONS} frames of the limit, 1 byte short: the sessions wait for their last byte`,
    );
    const grown = peak - baseline;
    const budget = SESSIONS * SESSION_BYTES;
    t.ok(
      grown <= budget,
      `the gateway grew by ${(grown / MIB).toFixed(1)} MiB, within the budget of ${budget / MIB} MiB ` +
        `(${SESSIONS} x ${SESSION_BYTES / MIB} MiB)`,
    );
    t.ok(
      grown <= SESSIONS * 2 * MAX_MESSAGE,
      `and within ${SESSIONS} x twice the limit, what uWS may gather for a message, allocator and all`,
    );
  },
);

t.test(
  '--ws-memory-budget bounds the sessions: more than it holds stops the start; left out, --ws-max-sessions is what it holds',
  async (t) => {
    const dataDir = `${tempDir(t)}/data`;
    const over = await runCli(t, [
      '--http-port',
      '0',
      '--data-dir',
      dataDir,
      '--upstream',
      'http://127.0.0.1:9',
      '--ws-max-sessions',
      '42',
    ]);
    t.equal(over.code, 2, '42 sessions at 16MiB (98MiB each) in the default 4096MiB: exit 2');
    t.equal(
      over.stderr.trim(),
      'api-auth: --ws-max-sessions is 42, and at --ws-max-message 16MiB each session may hold 98MiB ' +
        '(6 x the message + 2MiB): 42 would hold up to 4116MiB, over --ws-memory-budget (4096MiB). Give at most 41, lower --ws-max-message, ' +
        'or raise --ws-memory-budget',
      'one line: the numbers and the three ways out',
    );
    const none = await runCli(t, [
      '--http-port',
      '0',
      '--data-dir',
      dataDir,
      '--upstream',
      'http://127.0.0.1:9',
      '--ws-memory-budget',
      '64MiB',
    ]);
    t.equal(none.code, 2);
    t.match(
      none.stderr,
      /^api-auth: --ws-memory-budget is 64MiB, and at --ws-max-message 16MiB each session may hold 98MiB .*: not one session fits/,
    );

    const upstream = await startWsUpstream(t);
    const server = await startServer(t, {
      cheapChecks: true,
      args: [
        '--upstream',
        upstream.url,
        '--ws-memory-budget',
        '300MiB',
        '--ws-max-sessions-per-token',
        '3',
        '--ws-max-sessions-per-client',
        '3',
      ],
    });
    const token = await newToken(server.url, server.password, [WS_PATH]);
    for (let i = 0; i < 3; i++) await openClient(t, wsUrl(server.url, WS_PATH), { token });
    const refused = await openClient(t, wsUrl(server.url, WS_PATH), { token }).then(
      () => null,
      (error: unknown) => error,
    );
    t.ok(refused instanceof Refused && refused.status === 503, '300MiB holds 3 sessions of 98MiB: the fourth gets 503');
    t.same(JSON.parse((refused as Refused).body).error, {
      code: -32046,
      message: 'too many WebSocket sessions are open (at most 3); retry later',
    });
  },
);
