// A small HTTP/1.1 client on raw TCP sockets. fetch and node:http normalise or refuse
// some request targets (`/./`, `\`, `#`, bytes above 0x7E); this one writes exactly the
// bytes it is given, so the server sees the request-target the test names.
import { connect, type Socket } from 'node:net';

export interface HttpResponse {
  status: number;
  /** Header names in lower case; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
  text: string;
  /** The request's method, when sent by `request`. */
  method?: string;
}

export interface RequestOptions {
  method?: string;
  /** Headers in the order given; Host, Content-Length and Connection are added unless present. */
  headers?: ReadonlyArray<readonly [string, string | Buffer]>;
  body?: string | Buffer;
  /**
   * Fails the request when no complete response came this long after the last byte; none
   * by default. Only a test whose verdict is "no answer" gives one: elsewhere a response
   * that is merely slow (a loaded machine) is still the response, and a hung one is caught
   * by the test's own timeout (tap's, generous).
   */
  timeoutMs?: number;
  /** The loopback address to connect from; by default every connection gets its own. */
  localAddress?: string;
}

let lastSource = 0;

/**
 * A fresh loopback source address (all of 127.0.0.0/8 is this machine). The server
 * throttles wrong passwords per client address, so tests that send wrong passwords on
 * purpose come from a new client each time; tests of the throttle pin one address.
 */
export function freshSource(): string {
  lastSource = (lastSource % 65_000) + 1;
  return `127.1.${lastSource >> 8}.${lastSource & 255}`;
}

function endpoint(base: string): { host: string; port: number } {
  const url = new URL(base);
  return { host: url.hostname, port: Number(url.port) };
}

/** Sends `METHOD target HTTP/1.1` to the server at `base` (http://host:port). */
export async function request(base: string, target: string | Buffer, options: RequestOptions = {}): Promise<HttpResponse> {
  const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
  const response = await exchange(base, encodeRequest(base, target, options), options.timeoutMs, options.localAddress, method);
  return { ...response, method };
}

/**
 * The bytes of `METHOD target HTTP/1.1` with its headers and body: Host and
 * Content-Length are added unless present, and `Connection: close` unless
 * `keepAlive` or a Connection header is given. Header names and values are written
 * as given (a Buffer value byte for byte, a string value as latin1).
 */
export function encodeRequest(base: string, target: string | Buffer, options: RequestOptions & { keepAlive?: boolean } = {}): Buffer {
  const { host, port } = endpoint(base);
  const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
  const headers: (readonly [string, string | Buffer])[] = [...(options.headers ?? [])];
  const has = (name: string): boolean => headers.some(([n]) => n.toLowerCase() === name);
  const body = options.body === undefined ? undefined : Buffer.from(options.body);
  if (!has('host')) headers.unshift(['Host', `${host}:${port}`]);
  if (body !== undefined && !has('content-length') && !has('transfer-encoding')) {
    headers.push(['Content-Length', String(body.length)]);
  }
  if (!options.keepAlive && !has('connection')) headers.push(['Connection', 'close']);
  const head = Buffer.concat([
    Buffer.from(`${method} `, 'latin1'),
    Buffer.isBuffer(target) ? target : Buffer.from(target, 'latin1'),
    Buffer.from(' HTTP/1.1\r\n', 'latin1'),
    ...headers.flatMap(([n, v]) => [
      Buffer.from(`${n}: `, 'latin1'),
      Buffer.isBuffer(v) ? v : Buffer.from(v, 'latin1'),
      Buffer.from('\r\n'),
    ]),
    Buffer.from('\r\n'),
  ]);
  return body === undefined ? head : Buffer.concat([head, body]);
}

/**
 * Writes `bytes` on a fresh connection and reads one response. Resolves as soon as the
 * response is complete (Content-Length, chunked, or end of stream), whatever the server
 * then does with the connection. `method` is the request's (a HEAD response has no body).
 */
export function exchange(
  base: string,
  bytes: Buffer | readonly Buffer[],
  timeoutMs?: number,
  localAddress = freshSource(),
  method?: string,
): Promise<HttpResponse> {
  const { host, port } = endpoint(base);
  return new Promise((done, fail) => {
    const socket = connect({ host, port, localAddress });
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (error: Error | undefined, response?: HttpResponse): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (error) fail(error);
      else done(response!);
    };
    if (timeoutMs !== undefined)
      socket.setTimeout(timeoutMs, () =>
        finish(new Error(`no complete response within ${timeoutMs} ms; got ${JSON.stringify(received.toString('latin1'))}`)),
      );
    socket.on('connect', () => {
      // A server may answer early and close (a 413); later writes then fail, which is fine.
      for (const chunk of Array.isArray(bytes) ? bytes : [bytes]) socket.write(chunk, () => undefined);
    });
    const attempt = (ended: boolean): boolean => {
      try {
        const response = parseResponse(received, ended, method);
        if (response) finish(undefined, response);
        return response !== undefined;
      } catch (error) {
        finish(error as Error);
        return true;
      }
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      attempt(false);
    });
    const atEnd = (): void => {
      if (!attempt(true)) {
        finish(new Error(`connection closed before a complete response; got ${JSON.stringify(received.toString('latin1'))}`));
      }
    };
    socket.on('end', atEnd);
    socket.on('close', atEnd);
    socket.on('error', (error) => {
      if (!attempt(true)) finish(error);
    });
  });
}

/**
 * One complete response at the start of `data`, or undefined when more bytes are needed.
 * `method` is the request's: the response to a HEAD has no body whatever its headers say.
 */
export function parseResponse(data: Buffer, ended: boolean, method?: string): HttpResponse | undefined {
  return readResponse(data, ended, method)?.response;
}

/** Like parseResponse, with the number of bytes the response took. */
export function readResponse(data: Buffer, ended: boolean, method?: string): { response: HttpResponse; length: number } | undefined {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const lines = data.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0])?.[1]);
  if (!Number.isInteger(status)) throw new Error(`not an HTTP response: ${JSON.stringify(lines[0])}`);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  const bodyStart = headEnd + 4;
  const rest = data.subarray(bodyStart);
  let body: Buffer;
  let length: number;
  if (method?.toUpperCase() === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    body = Buffer.alloc(0);
    length = bodyStart;
  } else if (/\bchunked\b/i.test(headers['transfer-encoding'] ?? '')) {
    const chunks: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n', at);
      if (lineEnd < 0) return undefined;
      const size = parseInt(rest.subarray(at, lineEnd).toString('latin1'), 16);
      if (size === 0) {
        // The last chunk, no trailers: its line and the empty line after it.
        if (rest.length < lineEnd + 4) return undefined;
        at = lineEnd + 4;
        break;
      }
      if (rest.length < lineEnd + 2 + size + 2) return undefined;
      chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
    body = Buffer.concat(chunks);
    length = bodyStart + at;
  } else if (headers['content-length'] !== undefined) {
    const contentLength = Number(headers['content-length']);
    if (rest.length < contentLength) return undefined;
    body = rest.subarray(0, contentLength);
    length = bodyStart + contentLength;
  } else {
    if (!ended) return undefined;
    body = rest;
    length = data.length;
  }
  return { response: { status, headers, body, text: body.toString('utf8') }, length };
}

export type JsonRpcId = string | number | null;

export interface RpcError {
  code: number;
  message: string;
  [member: string]: unknown;
}

export interface RpcResponse {
  jsonrpc: string;
  result?: any;
  error?: RpcError;
  id: JsonRpcId;
}

/** POSTs `body` (a string, sent as is, or a value sent as JSON) with content-type application/json. */
export function postJson(url: string, body: unknown, headers: ReadonlyArray<readonly [string, string]> = []): Promise<HttpResponse> {
  const { origin, pathname, search } = new URL(url);
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const hasType = headers.some(([n]) => n.toLowerCase() === 'content-type');
  return request(origin, pathname + search, {
    method: 'POST',
    headers: hasType ? headers : [['Content-Type', 'application/json'], ...headers],
    body: text,
  });
}

export interface PostOptions {
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** The Authorization header's whole value, as is (instead of `token`). */
  authorization?: string;
  /** More headers, after Authorization and Content-Type. */
  headers?: ReadonlyArray<readonly [string, string]>;
  /** The loopback address to connect from (`request`'s). */
  localAddress?: string;
}

/**
 * POSTs `body` to `path` on `base` (http://host:port): Authorization when given, then
 * Content-Type application/json when there is a body, then `headers`.
 */
export function post(
  base: string,
  path: string | Buffer,
  body: string | Buffer | undefined,
  options: PostOptions = {},
): Promise<HttpResponse> {
  const headers: (readonly [string, string])[] = [];
  const authorization = options.authorization ?? (options.token === undefined ? undefined : `Bearer ${options.token}`);
  if (authorization !== undefined) headers.push(['Authorization', authorization]);
  if (body !== undefined) headers.push(['Content-Type', 'application/json']);
  headers.push(...(options.headers ?? []));
  return request(base, path, { method: 'POST', headers, body, localAddress: options.localAddress });
}

/** A JSON-RPC 2.0 request object; `id` undefined makes it a notification. */
export function rpc(method: string, params?: unknown, id?: JsonRpcId): Record<string, unknown> {
  const request: Record<string, unknown> = { jsonrpc: '2.0', method };
  if (params !== undefined) request.params = params;
  if (id !== undefined) request.id = id;
  return request;
}

/**
 * Calls `method` at `url` (the full endpoint URL, such as http://127.0.0.1:N/ext/auth)
 * and returns the response object. Anything but HTTP 200 with a JSON body throws.
 */
export async function jsonrpc(
  url: string,
  method: string,
  params?: unknown,
  id: JsonRpcId = 1,
  headers: ReadonlyArray<readonly [string, string]> = [],
): Promise<RpcResponse> {
  const response = await postJson(url, rpc(method, params, id), headers);
  return parseRpc(response);
}

/** The JSON body of an HTTP 200 response; anything else throws with what came back. */
export function parseRpc(response: HttpResponse): RpcResponse {
  if (response.status !== 200) throw new Error(`expected HTTP 200, got ${response.status}: ${response.text}`);
  try {
    return JSON.parse(response.text) as RpcResponse;
  } catch {
    throw new Error(`response is not JSON: ${JSON.stringify(response.text)}`);
  }
}

/**
 * One keep-alive connection that carries requests one after another (never pipelined:
 * each request waits for the previous response). It reconnects when the server closed
 * the connection after a response; a response cut short, bytes the server sent that no
 * request asked for, or no response within the timeout reject.
 */
export class KeepAliveConnection {
  private socket: Socket | undefined;
  private received = Buffer.alloc(0);
  private ended = false;
  /** Set when the server sent bytes while no request was waiting. */
  private stray: Error | undefined;
  private waiting: ((ended: boolean) => void) | undefined;
  /** How many connections were opened so far. */
  connects = 0;

  constructor(
    readonly base: string,
    readonly timeoutMs?: number,
    readonly localAddress = freshSource(),
  ) {}

  /** `METHOD target` over this connection (see `encodeRequest`; no `Connection: close` unless given). */
  request(target: string | Buffer, options: RequestOptions = {}): Promise<HttpResponse> {
    const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
    return this.send(encodeRequest(this.base, target, { ...options, keepAlive: true }), method, options.timeoutMs);
  }

  /** Writes the bytes of one request and reads its response. */
  async send(bytes: Buffer, method: string, timeoutMs = this.timeoutMs): Promise<HttpResponse> {
    if (this.waiting) throw new Error('KeepAliveConnection: one request at a time');
    if (this.stray) {
      const error = this.stray;
      this.close();
      throw error;
    }
    if (this.socket === undefined || this.ended) await this.open();
    const socket = this.socket!;
    return new Promise<HttpResponse>((done, fail) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              this.waiting = undefined;
              this.close();
              fail(new Error(`no complete response within ${timeoutMs} ms; got ${JSON.stringify(this.preview())}`));
            }, timeoutMs);
      const attempt = (ended: boolean): void => {
        let parsed: ReturnType<typeof readResponse>;
        try {
          parsed = readResponse(this.received, ended, method);
        } catch (error) {
          settle(error as Error);
          return;
        }
        if (parsed !== undefined) {
          const extra = this.received.subarray(parsed.length);
          if (extra.length > 0) {
            settle(
              new Error(
                `${extra.length} bytes after the response to ${method}, on a connection that sent one request: ` +
                  `${JSON.stringify(extra.toString('latin1').slice(0, 300))}`,
              ),
            );
            return;
          }
          this.received = Buffer.alloc(0);
          if (/\bclose\b/i.test(parsed.response.headers.connection ?? '')) this.close();
          settle(undefined, { ...parsed.response, method });
        } else if (ended) {
          settle(new Error(`connection closed before a complete response; got ${JSON.stringify(this.preview())}`));
        }
      };
      const settle = (error: Error | undefined, response?: HttpResponse): void => {
        clearTimeout(timer);
        this.waiting = undefined;
        if (error) {
          this.close();
          fail(error);
        } else {
          done(response!);
        }
      };
      this.waiting = attempt;
      // A server may answer early and close (a 413); the rest of the write then fails, which is fine.
      socket.write(bytes, () => undefined);
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = undefined;
    this.received = Buffer.alloc(0);
    this.stray = undefined;
  }

  private preview(): string {
    return this.received.toString('latin1').slice(0, 300);
  }

  private open(): Promise<void> {
    this.close();
    const { host, port } = endpoint(this.base);
    const socket = connect({ host, port, localAddress: this.localAddress });
    this.socket = socket;
    this.ended = false;
    this.connects++;
    const atEnd = (): void => {
      if (this.socket !== socket) return;
      this.ended = true;
      this.waiting?.(true);
    };
    socket.on('data', (chunk: Buffer) => {
      if (this.socket !== socket) return;
      this.received = Buffer.concat([this.received, chunk]);
      if (this.waiting) this.waiting(false);
      else this.stray ??= new Error(`the server sent bytes no request asked for: ${JSON.stringify(this.preview())}`);
    });
    socket.on('end', atEnd);
    socket.on('close', atEnd);
    return new Promise((done, fail) => {
      socket.once('connect', () => done());
      // Before the connection is up this fails the open; after, it ends the exchange under way.
      socket.on('error', (error) => {
        fail(error);
        atEnd();
      });
    });
  }
}

/**
 * Runs `work` on every item with `connections` keep-alive connections to `base`, each
 * carrying one request at a time; results come back in the order of `items`.
 */
export async function overKeepAlive<T, R>(
  base: string,
  connections: number,
  items: readonly T[],
  work: (item: T, connection: KeepAliveConnection, index: number) => Promise<R>,
): Promise<R[]> {
  const pool = Array.from({ length: Math.min(connections, items.length) }, () => new KeepAliveConnection(base));
  const results = new Array<R>(items.length);
  let next = 0;
  try {
    await Promise.all(
      pool.map(async (connection) => {
        while (next < items.length) {
          const index = next++;
          results[index] = await work(items[index], connection, index);
        }
      }),
    );
  } finally {
    for (const connection of pool) connection.close();
  }
  return results;
}
