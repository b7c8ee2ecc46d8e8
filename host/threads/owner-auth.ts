// /ext/auth as the owner answers it for the HTTP threads. On one thread, a client that
// must wait is refused from its request's head, before its body is read; an HTTP thread
// holds no throttle, so it reads the body (bounded, as always) and the owner refuses
// here, first thing, with the same 429, the same Retry-After and the same held-back
// answer, before any parsing or hashing. What the guess still costs the owner is one
// message and one lookup.
import { ServiceErrorCode, throttled } from '../auth-service.js';
import { errorResponse } from '../jsonrpc.js';
import type { Reply, RpcHandler } from '../jsonrpc.js';
import type { Metrics } from '../metrics.js';
import { Tarpit } from '../throttle.js';
import type { PasswordThrottle } from '../throttle.js';

/**
 * The owner's /ext/auth for calls that come from HTTP threads: the throttle's early
 * refusal (held back by a tarpit), then `rpc`. `clock` in ms.
 */
export function throttledAuth(rpc: RpcHandler, throttle: PasswordThrottle, metrics: Metrics | undefined, clock: () => number): RpcHandler {
  const tarpit = new Tarpit();
  const refusals = new Map<number, Reply>();
  return {
    handle(body, context) {
      const wait = throttle.retryAfter(context.address, clock());
      if (wait <= 0) return rpc.handle(body, context);
      if (metrics !== undefined) metrics.passwordsThrottled++;
      let reply = refusals.get(wait);
      if (reply === undefined) {
        // The body is not looked at, so its id is unknown: null, as on one thread.
        reply = { text: errorResponse(ServiceErrorCode.Throttled, throttled(wait).message), refusal: { code: ServiceErrorCode.Throttled, retryAfter: wait } };
        refusals.set(wait, reply);
      }
      const refused = reply;
      return new Promise((resolve) => tarpit.hold(() => resolve(refused)));
    },
  };
}
