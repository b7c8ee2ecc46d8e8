// POST to a local JSON-RPC endpoint: the body read in its chunks up to its limit, then
// answered by the endpoint, and the answer written (or nothing, when the client went).
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { RpcCode } from '../errors.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { CallContext, Reply } from '../rpc/jsonrpc.js';
import type { InFlight, Pending } from './in-flight.js';
import { MAX_BODY_BYTES, writeBodyTooLarge, writeInternalError, writeNotJson } from './responses.js';

/** What answers a body: a JSON-RPC endpoint, or the token service's link. */
export interface RpcHandler {
  handle(body: Uint8Array, context: CallContext): Promise<Reply>;
}

const JSON_CONTENT_TYPE = /^[ \t]*application\/json[ \t]*(?:;|$)/i;

/**
 * Reads the request's body and answers it with `handler`. `address` is the client's, for
 * the call's context. Call it from the uWS handler, before returning.
 */
export function postCall(res: HttpResponse, req: HttpRequest, handler: RpcHandler, address: string, inFlight: InFlight, log: Logger): void {
  if (!JSON_CONTENT_TYPE.test(req.getHeader('content-type'))) return writeNotJson(res);
  const declared = req.getHeader('content-length');
  // The body is not read, so the connection cannot carry another request.
  if (declared !== '' && !(Number(declared) <= MAX_BODY_BYTES)) return writeBodyTooLarge(res);
  const pending = inFlight.begin(res);
  const chunks: Buffer[] = [];
  let size = 0;
  res.onData((chunk, isLast) => {
    if (!pending.open) return;
    size += chunk.byteLength;
    if (size > MAX_BODY_BYTES) {
      // A chunked body that outgrew the limit: answer now and drop the rest with the connection.
      res.cork(() => writeBodyTooLarge(res));
      pending.finish();
      return;
    }
    // uWS reuses the chunk's memory once this callback returns.
    chunks.push(Buffer.from(chunk.slice(0)));
    if (isLast) void answer(res, handler, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size), address, pending, log);
  });
}

async function answer(res: HttpResponse, handler: RpcHandler, body: Buffer, address: string, pending: Pending, log: Logger): Promise<void> {
  let reply: Reply;
  try {
    reply = await handler.handle(body, { address });
  } catch (error) {
    log.error('internal error', errorFields(error));
    if (pending.open) res.cork(() => writeInternalError(res));
    pending.finish();
    return;
  }
  if (pending.open) {
    const { text, refusal } = reply;
    res.cork(() => {
      if (text === null) {
        res.writeStatus('204 No Content').endWithoutBody();
        return;
      }
      // A lone call refused for now says so in HTTP too, so that proxies and clients back off.
      if (refusal !== undefined) {
        res.writeStatus(refusal.code === RpcCode.Throttled ? '429 Too Many Requests' : '503 Service Unavailable')
          .writeHeader('Retry-After', String(refusal.retryAfter));
      }
      res.writeHeader('Content-Type', 'application/json').end(text + '\n');
    });
  }
  pending.finish();
}
