// POST /ext/auth: the token service's route. A client the throttle makes wait is refused
// before its body is read (uWS then skips it), on a connection that stays open, with the
// refusal held back a moment: a flood of guesses costs one header parse each, and its
// connections idle rather than spin. Any other call is read like every local JSON-RPC
// call and handed to the token service through its link.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { TokenServiceLink } from '../service/link.js';
import type { Logger } from '../ops/log.js';
import type { InFlight } from './in-flight.js';
import { writeThrottled } from './responses.js';
import { postCall } from './rpc-route.js';
import type { Tarpit } from './tarpit.js';

/** Call it from the uWS handler, before returning; `address` is the client's. */
export function postAuth(res: HttpResponse, req: HttpRequest, service: TokenServiceLink, address: string, inFlight: InFlight,
  tarpit: Tarpit, log: Logger): void {
  const wait = service.throttled(address);
  if (wait === 0) return postCall(res, req, service, address, inFlight, log);
  const pending = inFlight.begin(res);
  tarpit.hold(() => {
    if (pending.open) res.cork(() => writeThrottled(res, wait));
    pending.finish();
  });
}
