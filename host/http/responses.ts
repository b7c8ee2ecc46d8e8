// The fixed responses of the HTTP side, encoded once so that writing one costs no string
// work: 404, 405, 413, 415, 429, 500, and the writers that send them.
import { STATUS_CODES } from 'node:http';
import type { HttpResponse } from 'uWebSockets.js';
import type { Pending } from './in-flight.js';
import { RPC_ERRORS, RpcCode, throttledMessage } from '../errors.js';
import { MAX_BODY_BYTES } from '../own-endpoints.js';
import { errorResponse } from '../rpc/jsonrpc.js';

/** A JSON-RPC error body for a request that was not read (so its id is unknown). */
export function jsonLine(code: number, message: string): Uint8Array {
  return new TextEncoder().encode(errorResponse(code, message) + '\n');
}

// Status lines by status, made once each.
const STATUS_LINES: string[] = [];

/** The status line of a status of the error table, as uWS writes it: "429 Too Many Requests". */
export function tableStatus(status: number): string {
  return (STATUS_LINES[status] ??= `${status} ${STATUS_CODES[status] ?? ''}`);
}

/** Ends a response with `body`, or for a HEAD request with its length only (uWS would send a body given to end()). */
export function endWith(res: HttpResponse, body: Uint8Array, head: boolean): void {
  if (head) res.writeHeader('Content-Length', String(body.length)).endWithoutBody();
  else res.end(body);
}

const NOT_FOUND = new TextEncoder().encode('404 page not found\n');
const BODY_TOO_LARGE = jsonLine(RpcCode.InvalidRequest, `request body exceeds ${MAX_BODY_BYTES} bytes`);
const NOT_JSON = jsonLine(RpcCode.InvalidRequest, 'content-type must be application/json');
const INTERNAL_ERROR = jsonLine(RpcCode.InternalError, 'internal error');
// The same answer on every path, before the gate: it reveals nothing about a path, and
// nothing of a CONNECT reaches a handler that might forward it.
const CONNECT_ALLOW = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';
const CONNECT_REFUSED = jsonLine(
  RpcCode.InvalidRequest,
  'HTTP method CONNECT is not allowed: api-auth forwards requests, it opens no tunnels',
);

export function writeNotFound(res: HttpResponse, head: boolean): void {
  res.writeStatus('404 Not Found').writeHeader('Content-Type', 'text/plain; charset=utf-8');
  endWith(res, NOT_FOUND, head);
}

export function writeConnectRefused(res: HttpResponse): void {
  res
    .writeStatus('405 Method Not Allowed')
    .writeHeader('Allow', CONNECT_ALLOW)
    .writeHeader('Content-Type', 'application/json')
    .end(CONNECT_REFUSED, true);
}

const FOREIGN_ORIGIN = jsonLine(
  RpcCode.InvalidRequest,
  'a WebSocket session may not be opened from this page: its Origin is not in ' + "the gateway's --http-allowed-origins",
);

/**
 * 403 for a WebSocket upgrade whose Origin is not allowed (admission.ts, Way.origin),
 * as geth answers one outside its --ws.origins. Browsers do not hold WebSocket to CORS.
 */
export function writeForeignOrigin(res: HttpResponse, head: boolean): void {
  res.writeStatus('403 Forbidden').writeHeader('Content-Type', 'application/json');
  endWith(res, FOREIGN_ORIGIN, head);
}

/** 405 for a local route; `method` in lower case, as uWS gives it. */
export function writeMethodNotAllowed(res: HttpResponse, method: string, path: string, allow: string): void {
  res.writeStatus('405 Method Not Allowed').writeHeader('Allow', allow).writeHeader('Content-Type', 'application/json');
  endWith(
    res,
    jsonLine(RpcCode.InvalidRequest, `HTTP method ${method.toUpperCase()} is not allowed on ${path} (allowed: ${allow})`),
    method === 'head',
  );
}

export function writeNotJson(res: HttpResponse): void {
  res.writeStatus('415 Unsupported Media Type').writeHeader('Content-Type', 'application/json').end(NOT_JSON);
}

/**
 * 413, and the connection closes: the rest of the body is not read. `body` names the
 * limit: api-auth's own endpoints' by default, --upstream-max-body's for the proxy.
 */
export function writeBodyTooLarge(res: HttpResponse, body: Uint8Array = BODY_TOO_LARGE): void {
  res.writeStatus('413 Content Too Large').writeHeader('Content-Type', 'application/json').end(body, true);
}

/**
 * Reads the request's body, up to MAX_BODY_BYTES, and hands it to `use` inside uWS's last
 * data callback: a body in one piece without a copy (`use` must be done with it when it
 * returns). One that outgrows the limit goes to `tooLarge`: by default it is answered 413
 * and the rest dropped with the connection. Nothing happens once `pending` is closed (the
 * client went away).
 */
export function readBody(
  res: HttpResponse,
  pending: Pending,
  use: (body: Uint8Array) => void,
  tooLarge: () => void = () => {
    res.cork(() => writeBodyTooLarge(res));
    pending.finish();
  },
): void {
  let chunks: Buffer[] | null = null;
  let size = 0;
  res.onData((chunk, isLast) => {
    if (!pending.open) return;
    size += chunk.byteLength;
    if (size > MAX_BODY_BYTES) {
      tooLarge();
      return;
    }
    if (isLast && chunks === null) {
      use(new Uint8Array(chunk));
      return;
    }
    // uWS reuses the chunk's memory once this callback returns.
    (chunks ??= []).push(Buffer.from(chunk.slice(0)));
    if (isLast) use(Buffer.concat(chunks, size));
  });
}

export function writeInternalError(res: HttpResponse): void {
  res.writeStatus('500 Internal Server Error').writeHeader('Content-Type', 'application/json').end(INTERNAL_ERROR);
}

// The 429 bodies by wait, made once each: refusing a guess allocates nothing.
const THROTTLED_BODIES = new Map<number, Uint8Array>();

/** 429 with Retry-After: the client must wait `wait` seconds before its next password check. */
export function writeThrottled(res: HttpResponse, wait: number): void {
  let body = THROTTLED_BODIES.get(wait);
  if (body === undefined) {
    body = jsonLine(RpcCode.Throttled, throttledMessage(wait));
    THROTTLED_BODIES.set(wait, body);
  }
  res
    .writeStatus(tableStatus(RPC_ERRORS[RpcCode.Throttled].httpStatus))
    .writeHeader('Content-Type', 'application/json')
    .writeHeader('Retry-After', String(wait))
    .writeHeader('Cache-Control', 'no-store')
    .end(body);
}
