// A raw WebSocket upstream, for the tests of hostile ones: it answers each upgrade with a
// valid 101 and then hands the socket over, to write whatever frames the test needs
// (which the `ws` library would refuse to send). And the gateway's memory, read from /proc.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import type { Test } from 'tap';

/** A process's resident memory, in bytes. */
export function rss(pid: number): number {
  const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (kib === null) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kib[1]) * 1024;
}

/** The Sec-WebSocket-Accept that answers `key` (RFC 6455 §4.2.2). */
export function acceptFor(key: string): string {
  return createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
}

export interface HandshakeServerOptions {
  /** Writes the answer a byte a write, each on a turn of its own, rather than in one write. */
  readonly bytewise?: boolean;
  /** Gets the socket and the request's head once the answer is written; nothing more is read for it. */
  readonly after?: (socket: Socket, head: string) => void;
}

/**
 * Listens on a loopback port and answers each upgrade request's head with what `answer`
 * makes of its Sec-WebSocket-Key ('' when it has none), written as it is: the hostile and
 * malformed answers the `ws` library would never send. Every socket and the listener
 * close at the test's end. Resolves to the upstream's URL.
 */
export async function handshakeServer(
  t: Test,
  answer: (key: string) => string | Buffer,
  options: HandshakeServerOptions = {},
): Promise<URL> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    let head = '';
    const onData = async (chunk: Buffer): Promise<void> => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      const made = answer(/\r\nSec-WebSocket-Key: (\S+)\r\n/i.exec(head)?.[1] ?? '');
      const bytes = typeof made === 'string' ? Buffer.from(made, 'latin1') : made;
      if (options.bytewise !== true) {
        socket.write(bytes);
      } else {
        for (let i = 0; i < bytes.length && !socket.destroyed; i++) {
          socket.write(bytes.subarray(i, i + 1));
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      options.after?.(socket, head);
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
}

/**
 * Listens on a loopback port and answers each upgrade request with a valid 101; `upgraded`
 * gets the socket and the request's head, and nothing more is read for it. Resolves to the
 * upstream's URL, for --upstream.
 */
export async function rawWsUpstream(t: Test, upgraded: (socket: Socket, head: string) => void): Promise<string> {
  const url = await handshakeServer(
    t,
    (key) =>
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
    { after: upgraded },
  );
  return url.origin;
}

/**
 * The TCP connections to `port` on loopback that are established, as the kernel lists
 * them (/proc/net/tcp): the ones whose remote end is that port, one per connection a
 * client holds to it, whether or not the listener reads.
 */
export function connectionsTo(port: number): number {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  let count = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // rem_address is ADDRESS:PORT in hex; st 01 is ESTABLISHED.
      if (fields.length > 3 && fields[2].endsWith(`:${hex}`) && fields[3] === '01') count++;
    }
  }
  return count;
}
