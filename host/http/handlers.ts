// The one registration of api-auth's handlers on a uWS app, for the single listener
// (listener.ts) and for each HTTP thread (threads/http-thread.ts) alike, the TLS apps a
// reload makes included: the WebSocket route first (uWS hands it only GETs that ask for a
// WebSocket, with a Sec-WebSocket-Key, before any()), then every other request.
//
// A handler that throws still answers: 500 with a JSON-RPC internal error, then `failed`
// hears of the exception (the process stops in order). Without the answer uWS would end
// the process at once, as it does when a handler returns without responding or
// attaching onAborted.
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocketBehavior } from 'uWebSockets.js';
import { RpcCode } from '../errors.js';
import { errorResponse } from '../rpc/jsonrpc.js';

/** What an app serves: every request, and the WebSocket sessions when there are any. */
export interface Handlers<Session> {
  handle(res: HttpResponse, req: HttpRequest): void;
  readonly websocket?: WebSocketBehavior<Session> | null;
}

const INTERNAL_ERROR = new TextEncoder().encode(errorResponse(RpcCode.InternalError, 'internal error') + '\n');

/** Registers `handlers` on `app`, each guarded: an exception answers 500 and goes to `failed`. */
export function serveOn<Session>(app: TemplatedApp, handlers: Handlers<Session>, failed: (error: unknown) => void): TemplatedApp {
  const answer500 = (res: HttpResponse, error: unknown): void => {
    try {
      res.writeStatus('500 Internal Server Error').writeHeader('Content-Type', 'application/json').end(INTERNAL_ERROR, true);
    } catch {
      // Answered or aborted already.
    }
    failed(error);
  };
  const websocket = handlers.websocket;
  if (websocket) {
    const upgrade = websocket.upgrade!;
    app.ws('/*', {
      ...websocket,
      upgrade: (res, req, context) => {
        try {
          upgrade(res, req, context);
        } catch (error) {
          answer500(res, error);
        }
      },
    });
  }
  return app.any('/*', (res, req) => {
    try {
      handlers.handle(res, req);
    } catch (error) {
      answer500(res, error);
    }
  });
}
