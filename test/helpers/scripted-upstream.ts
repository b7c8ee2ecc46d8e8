// Upstreams on raw TCP that answer as the test scripts them, for what node:http would
// not send: the pipelining of Go's net/http (requests read one after another from a
// connection, answered in order, several in flight at once), a server that closes after
// each answer, and a hostile one whose answers lie about their length. Each request is
// parsed (its head, and a body by Content-Length or chunks) and recorded.
import { createServer, type AddressInfo, type Socket } from 'node:net';
import type { Test } from 'tap';

export interface ScriptedRequest {
  method: string;
  path: string;
  /** Lower-cased names. */
  headers: Record<string, string>;
  body: Buffer;
  /** Which connection it came on, counted from 1. */
  connection: number;
  /** Requests read on its connection before it and not yet answered when it was read: 0 when it was not pipelined. */
  ahead: number;
}

/** The bytes to answer a request with (a promise to hold the answer), in one write. */
export type Script = (request: ScriptedRequest) => Buffer | string | Promise<Buffer | string>;

export interface ScriptedUpstream {
  url: string;
  requests: ScriptedRequest[];
  /** Connections accepted so far. */
  connections(): number;
}

/** An answer of `status` with `body` and Content-Length, as Go's net/http writes it. */
export function answer(body: string, status = '200 OK', headers = ''): string {
  return `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/**
 * Starts an upstream on 127.0.0.1 that answers each request with what `script` gives, in
 * the order the requests came. `closeAfterEach`: the connection closes after each
 * answer, whatever was sent behind it (as a server that says Connection: close does).
 */
export async function startScriptedUpstream(
  t: Test,
  script: Script,
  options: { closeAfterEach?: boolean } = {},
): Promise<ScriptedUpstream> {
  const requests: ScriptedRequest[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    const connection = ++connections;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let pending = Buffer.alloc(0);
    let unanswered = 0;
    let closed = false;
    // Answers leave in the order their requests came, whenever each is ready.
    let last: Promise<void> = Promise.resolve();
    let taken = false;
    socket.on('data', (chunk: Buffer) => {
      // Closing after its answer, it reads no request past the first.
      if (taken) return;
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const parsed = parseRequest(pending);
        if (parsed === null) return;
        pending = pending.subarray(parsed.length);
        const request: ScriptedRequest = { ...parsed.request, connection, ahead: unanswered };
        requests.push(request);
        unanswered++;
        const bytes = Promise.resolve(script(request));
        last = last.then(async () => {
          const out = await bytes;
          if (closed) return;
          unanswered--;
          socket.write(out);
          if (options.closeAfterEach) {
            closed = true;
            socket.end();
          }
        });
        if (options.closeAfterEach) {
          taken = true;
          return;
        }
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
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, connections: () => connections };
}

/** One request from the start of `bytes`, with its length; null while it is not all there. */
function parseRequest(bytes: Buffer): { request: Omit<ScriptedRequest, 'connection' | 'ahead'>; length: number } | null {
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const [method, path] = lines[0].split(' ');
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  let at = end + 4;
  let body: Buffer;
  if (headers['transfer-encoding'] === 'chunked') {
    const parts: Buffer[] = [];
    for (;;) {
      const lineEnd = bytes.indexOf('\r\n', at);
      if (lineEnd < 0) return null;
      const size = parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
      if (bytes.length < lineEnd + 2 + size + 2) return null;
      parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
      if (size === 0) break;
    }
    body = Buffer.concat(parts);
  } else {
    const length = Number(headers['content-length'] ?? 0);
    if (bytes.length < at + length) return null;
    body = Buffer.from(bytes.subarray(at, at + length));
    at += length;
  }
  return { request: { method, path, headers, body }, length: at };
}
