// A hostile upstream behind a WebSocket session: after a valid 101 it
// cuts one message into ever more frames, empty or of one byte, which api-auth's client
// once kept one object each of, without a bound on their number (8 MB of empty frames
// took the gateway from 93 to 887 MiB). The session must end, and the gateway's memory
// stay put, while the flood goes on; a message of the whole limit in the finest frames
// the bound allows still gets through.
import t from 'tap';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { newToken } from '../helpers/auth.js';
import { startServer } from '../helpers/server.js';
import { rawWsUpstream, rss } from '../helpers/raw-ws-upstream.js';
import { closesWithin, openClient, wsUrl } from '../helpers/ws-upstream.js';

const WS_PATH = '/ext/bc/C/ws';
/** Wire bytes of each flood: what took the gateway past 800 MiB before the bound. */
const FLOOD = 8 * 1024 * 1024;
/** How much the gateway's memory may grow over a flood. */
const BOUND = 32 * 1024 * 1024;
/** --ws-max-message's default, and the frames of 512 bytes that maxFragments() allows at it. */
const MAX_MESSAGE = 16 * 1024 * 1024;
const FINEST = 512;

/** A server's unmasked frame, of at most 65535 bytes. */
function frame(opcode: number, payload: Buffer, fin: boolean): Buffer {
  const head =
    payload.length < 126
      ? Buffer.from([opcode | (fin ? 0x80 : 0), payload.length])
      : Buffer.from([opcode | (fin ? 0x80 : 0), 126, payload.length >> 8, payload.length & 0xff]);
  return Buffer.concat([head, payload]);
}

/** `count` copies of `unit` in one buffer. */
function repeat(unit: Buffer, count: number): Buffer {
  return Buffer.concat(Array.from({ length: count }, () => unit));
}

interface Flood {
  /** What starts the message. */
  first: Buffer;
  /** A chunk of continuation frames, written `chunks` times. */
  chunk: Buffer;
  chunks: number;
  /** What ends it, once the flood is through. */
  last: Buffer;
}

const FLOODS: Record<string, Flood> = {
  // `01 00`, then 4 Mi times `00 00`.
  empty: {
    first: frame(1, Buffer.alloc(0), false),
    chunk: repeat(Buffer.from([0x00, 0x00]), 32 * 1024),
    chunks: FLOOD / (64 * 1024),
    last: Buffer.from([0x80, 0x00]),
  },
  // `01 01 61`, then 2.8 M times `00 01 61`.
  'one-byte': {
    first: frame(1, Buffer.from('a'), false),
    chunk: repeat(frame(0, Buffer.from('a'), false), 16 * 1024),
    chunks: Math.ceil(FLOOD / (48 * 1024)),
    last: frame(0, Buffer.from('a'), true),
  },
  finest: {
    first: frame(2, Buffer.alloc(FINEST, 1), false),
    chunk: repeat(frame(0, Buffer.alloc(FINEST, 1), false), 2),
    chunks: (MAX_MESSAGE / FINEST - 2) / 2,
    last: frame(0, Buffer.alloc(FINEST, 1), true),
  },
};

interface Sample {
  /** The gateway's largest RSS while the flood was written. */
  peak: number;
  /** Wire bytes written before the gateway's close frame came or the connection ended. */
  written: number;
}

t.test(
  "an upstream that cuts a message into endless empty or one-byte frames ends its session, the gateway's memory bounded",
  async (t) => {
    let gateway = 0;
    const samples = new Map<string, Promise<Sample>>();
    // A raw upstream: a valid 101, then the flood the request's query names, written as
    // fast as the gateway reads it, until the gateway says something (its close frame).
    const upstream = await rawWsUpstream(t, (socket, head) => {
      const name = /^GET \S*\?flood=([a-z-]+) /.exec(head)![1];
      samples.set(name, flood(socket, FLOODS[name], name !== 'finest'));
    });
    async function flood(socket: Socket, { first, chunk, chunks, last }: Flood, hostile: boolean): Promise<Sample> {
      let told = false;
      if (hostile) {
        socket.once('data', () => {
          told = true;
          socket.end();
        });
      }
      socket.write(first);
      let written = first.length;
      let peak = rss(gateway);
      for (let i = 0; i < chunks && !told && !socket.destroyed; i++) {
        if (!socket.write(chunk)) await Promise.race([once(socket, 'drain'), once(socket, 'close')]);
        written += chunk.length;
        if (!hostile) continue;
        peak = Math.max(peak, rss(gateway));
        // The loopback's buffers take megabytes without a pause: a turn of the loop each
        // chunk lets the gateway's close frame be heard while the flood goes on.
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (!told && !socket.destroyed) socket.write(last);
      return { peak: Math.max(peak, rss(gateway)), written };
    }
    const server = await startServer(t, {
      cheapChecks: true,
      args: ['--upstream', upstream, '--http-threads', '1'],
    });
    gateway = server.child.pid!;
    const token = await newToken(server.url, server.password, [WS_PATH]);

    for (const name of ['empty', 'one-byte']) {
      const baseline = rss(gateway);
      const client = await openClient(t, wsUrl(server.url, `${WS_PATH}?flood=${name}`), { token });
      // Generous: on a loaded machine the flood takes its time; before the bound, it never closed.
      const closed = await closesWithin(client, 30_000).catch((error: Error) => ({ code: 0, reason: error.message, after: 0 }));
      t.same(
        [closed.code, closed.reason],
        [1011, 'the upstream node closed the connection'],
        `${name} frames: the client gets 1011, as for any upstream that breaks the framing`,
      );
      t.same(client.received.length, 0, `${name} frames: no message reached the client`);
      const { peak, written } = await samples.get(name)!;
      const grown = peak - baseline;
      t.ok(
        grown < BOUND,
        `${name} frames: the gateway's memory grew by ${(grown / 1048576).toFixed(1)} MiB at most over ${written} bytes of them` +
          ` (bound ${BOUND / 1048576} MiB)`,
      );
    }

    // 16 MiB in 32,768 frames of 512 bytes: the finest any message of the default limit may be cut.
    const client = await openClient(t, wsUrl(server.url, `${WS_PATH}?flood=finest`), { token });
    const whole = await client.message(0);
    const { written } = await samples.get('finest')!;
    t.equal(written + FLOODS.finest.last.length, (MAX_MESSAGE / FINEST) * (FINEST + 4), 'the upstream wrote 32,768 frames of 512 bytes');
    t.ok(
      whole.isBinary && whole.data.length === MAX_MESSAGE && whole.data.every((b) => b === 1),
      'the client gets the 16 MiB message whole',
    );
  },
);
