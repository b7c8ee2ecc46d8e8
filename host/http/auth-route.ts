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
import type { Management } from './rpc-route.js';
import { CSRF_HEADER, sameOrigin, sessionCookie } from '../service/console-session.js';
import type { SessionCredentials } from '../rpc/jsonrpc.js';
import type { Tarpit } from './tarpit.js';

/** Call it from the uWS handler, before returning; `address` is the client's. */
export function postAuth(
  res: HttpResponse,
  req: HttpRequest,
  service: TokenServiceLink,
  address: string,
  inFlight: InFlight,
  tarpit: Tarpit,
  log: Logger,
  management: Management,
): void {
  const wait = service.throttled(address);
  if (wait === 0) return postCall(res, req, service, address, inFlight, log, '', null, management);
  const pending = inFlight.begin(res);
  tarpit.hold(() => {
    if (pending.open) res.cork(() => writeThrottled(res, wait));
    pending.finish();
  });
}

/** The console session a request to /ext/auth presents: its cookie, its CSRF header, and whether its Origin, if any, is the server's. */
function readSession(req: HttpRequest): SessionCredentials {
  return {
    token: sessionCookie(req.getHeader('cookie')),
    csrf: req.getHeader(CSRF_HEADER),
    sameOrigin: sameOrigin(req.getHeader('origin'), req.getHeader('host')),
  };
}

/** /ext/auth's Management: plain HTTP or TLS (`secure`: the cookie is Secure). */
export function management(secure: boolean): Management {
  return { read: readSession, secure };
}
