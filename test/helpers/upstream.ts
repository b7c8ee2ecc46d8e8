// A real HTTP upstream node for the proxy tests: node:http on a free loopback port, in
// the test's own process. It records every request it gets (method, URL, headers as
// sent, body) and answers through a handler the test chooses; the default echoes the
// request back as JSON. A CONNECT is recorded too, and answered as a forward proxy
// would: 200, then the connection stays open as a tunnel. Closed when the test ends.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import type { Test } from 'tap';

export interface SeenRequest {
  method: string;
  url: string;
  /** Lower-cased names; repeated headers as node:http joins them. */
  headers: IncomingMessage['headers'];
  /** Names and values as sent, in order. */
  rawHeaders: string[];
  body: Buffer;
  /** The client port of the connection it came on (one per kept-alive connection). */
  remotePort: number;
}

export type UpstreamHandler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

export interface Upstream {
  url: string;
  port: number;
  server: Server;
  seen: SeenRequest[];
  /** Connections accepted so far. */
  connections(): number;
  /** Connections open now. */
  open(): number;
  /** Closes the listener and every connection. */
  close(): Promise<void>;
}

/** The default answer: 200 JSON {method, url, headers, body} of the request. */
export const echo: UpstreamHandler = (req, res, body) => {
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: body.toString('utf8') }));
};

/**
 * Answers 101 Switching Protocols and leaves the connection open, as a server that
 * switched would; `closed` (if given) learns when the other side closes it.
 */
export function switchProtocols(closed?: (socket: Socket) => void): UpstreamHandler {
  return (req) => {
    if (closed) req.socket.once('close', () => closed(req.socket));
    req.socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tunnel\r\n\r\n');
  };
}

/**
 * Starts an upstream on 127.0.0.1. `route` picks the handler for a request (by its URL,
 * say); the default echoes. Requests are recorded once their body is read.
 */
export async function startUpstream(t: Test, route: (req: IncomingMessage) => UpstreamHandler = () => echo, port = 0): Promise<Upstream> {
  const seen: SeenRequest[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body,
        remotePort: req.socket.remotePort ?? 0,
      });
      route(req)(req, res, body);
    });
  });
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    seen.push({
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: Buffer.alloc(0),
      remotePort: socket.remotePort ?? 0,
    });
    socket.on('error', () => undefined);
    // A tunnel ends when its client does (node:http leaves the socket half open).
    socket.on('end', () => socket.end());
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  });
  server.on('connection', (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const actual = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    });
    return closed;
  };
  t.teardown(close);
  return { url: `http://127.0.0.1:${actual}`, port: actual, server, seen, connections: () => connections, open: () => sockets.size, close };
}

export interface RawUpstream {
  url: string;
  /** The head (request line and header lines, without the empty line) of each request, as received. */
  heads: Buffer[];
}

/**
 * An upstream on raw TCP that records the bytes of each request head as they came, for
 * what node:http would refuse or decode (bytes above 0x7E in the request line). It
 * answers 200 "ok" to each; requests must carry no body.
 */
export async function startRawUpstream(t: Test): Promise<RawUpstream> {
  const heads: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      let end: number;
      while ((end = pending.indexOf('\r\n\r\n')) >= 0) {
        heads.push(pending.subarray(0, end));
        pending = pending.subarray(end + 4);
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, heads };
}

export interface RecordedRequest {
  /** The method and target of the request line, as received. */
  method: string;
  target: string;
  /** The body, its chunked framing (if any) taken off. */
  body: Buffer;
}

export interface RecordingUpstream {
  url: string;
  requests: RecordedRequest[];
}

/**
 * An upstream on raw TCP that records the request line and the body of each request (by
 * Content-Length, or chunked), whatever node:http would refuse (a method in lower case,
 * say), and answers each with 200 and a JSON-RPC result. It reads what api-auth writes,
 * which is well framed; a request it cannot frame ends the connection.
 */
export async function startRecordingUpstream(t: Test): Promise<RecordingUpstream> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const answer = '{"jsonrpc":"2.0","result":"0x1","id":1}';
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const framed = frameRequest(pending);
        if (framed === undefined) return;
        if (framed === null) {
          socket.destroy();
          return;
        }
        requests.push(framed.request);
        pending = pending.subarray(framed.length);
        socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${answer.length}\r\n\r\n${answer}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

/** One whole request at the start of `data` and its length; undefined for more bytes; null for one that cannot be framed. */
function frameRequest(data: Buffer): { request: RecordedRequest; length: number } | undefined | null {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  const [method, target] = lines[0].split(' ');
  const header = (name: string): string | undefined =>
    lines
      .slice(1)
      .find((line) => line.toLowerCase().startsWith(`${name}:`))
      ?.slice(name.length + 1)
      .trim();
  let at = end + 4;
  if (header('transfer-encoding')?.toLowerCase() === 'chunked') {
    const chunks: Buffer[] = [];
    for (;;) {
      const lineEnd = data.indexOf('\r\n', at);
      if (lineEnd < 0) return undefined;
      const size = Number.parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
      if (!Number.isInteger(size)) return null;
      if (data.length < lineEnd + 2 + size + 2) return undefined;
      chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
      if (size === 0) return { request: { method, target, body: Buffer.concat(chunks) }, length: at };
    }
  }
  const length = Number(header('content-length') ?? '0');
  if (!Number.isInteger(length)) return null;
  if (data.length < at + length) return undefined;
  return { request: { method, target, body: Buffer.from(data.subarray(at, at + length)) }, length: at + length };
}

/**
 * A loopback port nothing listens on (bound, then released): one a connection is refused
 * on, or one to start a server on by name.
 */
export async function closedPort(): Promise<number> {
  return (await closedPorts(1))[0];
}

/**
 * `count` ports, each free a moment ago and all of them distinct: their listeners are open
 * at once before any closes, so the kernel cannot hand out the same port twice (it may
 * when one port is closed before the next is asked for).
 */
export async function closedPorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))));
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  return ports;
}
