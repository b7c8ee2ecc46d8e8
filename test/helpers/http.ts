// A small HTTP/1.1 client on raw TCP sockets. fetch and node:http normalise or refuse
// some request targets (`/./`, `\`, `#`, bytes above 0x7E); this one writes exactly the
// bytes it is given, so the server sees the request-target the test names.
import { connect } from 'node:net';

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
  headers?: ReadonlyArray<readonly [string, string]>;
  body?: string | Buffer;
  timeoutMs?: number;
}

const REQUEST_TIMEOUT_MS = 10_000;

function endpoint(base: string): { host: string; port: number } {
  const url = new URL(base);
  return { host: url.hostname, port: Number(url.port) };
}

/** Sends `METHOD target HTTP/1.1` to the server at `base` (http://host:port). */
export async function request(base: string, target: string | Buffer, options: RequestOptions = {}): Promise<HttpResponse> {
  const { host, port } = endpoint(base);
  const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
  const headers = [...(options.headers ?? [])];
  const has = (name: string): boolean => headers.some(([n]) => n.toLowerCase() === name);
  const body = options.body === undefined ? undefined : Buffer.from(options.body);
  if (!has('host')) headers.unshift(['Host', `${host}:${port}`]);
  if (body !== undefined && !has('content-length') && !has('transfer-encoding')) {
    headers.push(['Content-Length', String(body.length)]);
  }
  if (!has('connection')) headers.push(['Connection', 'close']);
  const head = Buffer.concat([
    Buffer.from(`${method} `, 'latin1'),
    Buffer.isBuffer(target) ? target : Buffer.from(target, 'latin1'),
    Buffer.from(` HTTP/1.1\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`, 'latin1'),
  ]);
  const response = await exchange(base, body === undefined ? head : Buffer.concat([head, body]), options.timeoutMs);
  return { ...response, method };
}

/**
 * Writes `bytes` on a fresh connection and reads one response. Resolves as soon as the
 * response is complete (Content-Length, chunked, or end of stream), whatever the server
 * then does with the connection.
 */
export function exchange(base: string, bytes: Buffer | readonly Buffer[], timeoutMs = REQUEST_TIMEOUT_MS): Promise<HttpResponse> {
  const { host, port } = endpoint(base);
  return new Promise((done, fail) => {
    const socket = connect({ host, port });
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (error: Error | undefined, response?: HttpResponse): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (error) fail(error);
      else done(response!);
    };
    socket.setTimeout(timeoutMs, () => finish(new Error(`no complete response within ${timeoutMs} ms; got ${JSON.stringify(received.toString('latin1'))}`)));
    socket.on('connect', () => {
      // A server may answer early and close (a 413); later writes then fail, which is fine.
      for (const chunk of Array.isArray(bytes) ? bytes : [bytes]) socket.write(chunk, () => undefined);
    });
    const attempt = (ended: boolean): boolean => {
      try {
        const response = parseResponse(received, ended);
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

/** One complete response at the start of `data`, or undefined when more bytes are needed. */
export function parseResponse(data: Buffer, ended: boolean): HttpResponse | undefined {
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
  const rest = data.subarray(headEnd + 4);
  let body: Buffer;
  if (status === 204 || status === 304 || (status >= 100 && status < 200)) {
    body = Buffer.alloc(0);
  } else if (/\bchunked\b/i.test(headers['transfer-encoding'] ?? '')) {
    const chunks: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n', at);
      if (lineEnd < 0) return undefined;
      const size = parseInt(rest.subarray(at, lineEnd).toString('latin1'), 16);
      if (size === 0) break;
      if (rest.length < lineEnd + 2 + size + 2) return undefined;
      chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
    body = Buffer.concat(chunks);
  } else if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length']);
    if (rest.length < length) return undefined;
    body = rest.subarray(0, length);
  } else {
    if (!ended) return undefined;
    body = rest;
  }
  return { status, headers, body, text: body.toString('utf8') };
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
export async function jsonrpc(url: string, method: string, params?: unknown, id: JsonRpcId = 1,
  headers: ReadonlyArray<readonly [string, string]> = []): Promise<RpcResponse> {
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
