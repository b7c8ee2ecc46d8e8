// /ext/auth as the owner answers it for the HTTP threads. An HTTP thread refuses a client
// that must wait from its request's head, as the throttle board shows it; the board may
// know less than the throttle (a wait that began a moment ago, a client that did not fit
// on it), so the owner asks the throttle first thing, before any parsing or hashing, and
// refuses those the same way: 429, Retry-After, the answer held back by a tarpit.
import { RpcCode, throttledMessage } from '../errors.js';
import type { RpcHandler } from '../http/rpc-route.js';
import { Tarpit } from '../http/tarpit.js';
import { errorResponse } from '../rpc/jsonrpc.js';
import type { Reply } from '../rpc/jsonrpc.js';
import type { TokenServiceLink } from '../service/link.js';

/** The token service's link, as HTTP threads' calls reach it: the throttle's refusal (held back), then the call. */
export function throttledAuth(service: TokenServiceLink): RpcHandler {
  const tarpit = new Tarpit();
  const refusals = new Map<number, Reply>();
  return {
    handle(body, context) {
      const wait = service.throttled(context.address);
      if (wait === 0) return service.handle(body, context);
      let reply = refusals.get(wait);
      if (reply === undefined) {
        // The body is not looked at, so its id is unknown: null, as for a refusal from the head.
        reply = { text: errorResponse(RpcCode.Throttled, throttledMessage(wait)), refusal: { code: RpcCode.Throttled, retryAfter: wait } };
        refusals.set(wait, reply);
      }
      const refused = reply;
      return new Promise((resolve) => tarpit.hold(() => resolve(refused)));
    },
  };
}
