// /ext/auth/check: the gate's verdict for a request that a proxy in front (nginx
// auth_request, Caddy forward_auth, Traefik ForwardAuth) asks about before it forwards
// it. The original request is named by headers: its URI by X-Original-URI (nginx) or
// X-Forwarded-Uri (Caddy, Traefik), its method by X-Original-Method or
// X-Forwarded-Method; its Authorization and Origin come as they were. The verdict is the
// gate's, on the original path (without its query, by the same raw-path rules), and
// the answer is what the gate itself would have sent: 200, or its refusal.
//
// A token with a method scope passes only a request whose calls are seen and allowed.
// An auth subrequest carries no body (nginx, Caddy and Traefik send none), so such a
// token is refused here with 403 insufficient_scope: it fails closed. A checker that
// does send the original body (Envoy's ext_authz with_request_body) gets it checked,
// up to the local endpoints' body limit.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { Outcome } from '../core/core.js';
import type { Core } from '../core/core.js';
import { RpcCode } from '../errors.js';
import type { Cors } from './cors.js';
import type { Gate } from './gate.js';
import type { InFlight } from './in-flight.js';
import { REFUSALS, writeRefusal, writeScopeRefusal } from './refusals.js';
import { jsonLine, MAX_BODY_BYTES, readBody, writeBodyTooLarge, writeConnectRefused } from './responses.js';
import type { MethodScope } from './scope.js';

const NO_URI = jsonLine(RpcCode.InvalidRequest, '/ext/auth/check needs the original request\'s URI in X-Original-URI (nginx: ' +
  'proxy_set_header X-Original-URI $request_uri) or X-Forwarded-Uri (Caddy forward_auth and Traefik ForwardAuth send it)');
const GRANTED = new TextEncoder().encode('{"ok":true}\n');

export class AuthCheck {
  /**
   * `gate` null: no tokens needed, only the path rules apply (checked by `core`). `scope`:
   * where a scoped token's calls are checked (with `inFlight` while the body is read).
   */
  constructor(private readonly core: Core, private readonly gate: Gate | null, private readonly cors: Cors | null,
    private readonly scope: MethodScope | null = null, private readonly inFlight: InFlight | null = null) {}

  /** Call it from the uWS handler, before returning. */
  answer(res: HttpResponse, req: HttpRequest): void {
    const uri = req.getHeader('x-original-uri') || req.getHeader('x-forwarded-uri');
    if (uri === '') {
      res.writeStatus('400 Bad Request').writeHeader('Content-Type', 'application/json').end(NO_URI);
      return;
    }
    const method = req.getHeader('x-original-method') || req.getHeader('x-forwarded-method');
    if (method.toUpperCase() === 'CONNECT') return writeConnectRefused(res);
    // The path as the server in front received it: a query, and a fragment a client
    // should not have sent, are not part of it (uWS leaves both out of getUrl too).
    const end = uri.search(/[?#]/);
    const path = end === -1 ? uri : uri.slice(0, end);
    // A browser's preflight carries no token; its answer is the upstream's, as for any
    // request this check lets through.
    const allow = this.cors === null ? '' : this.cors.allow(req.getHeader('origin'));
    const preflight = allow !== '' && method.toUpperCase() === 'OPTIONS' && req.getHeader('access-control-request-method') !== '';
    let outcome: Outcome;
    if (preflight || this.gate === null) outcome = this.core.pathAllowed(path) ? Outcome.Valid : Outcome.BadPath;
    else outcome = this.gate.check(req.getHeader('authorization'), path);
    if (outcome === Outcome.Scoped && this.scope !== null) return this.scoped(res, req, this.scope, this.core.scopedGrant, allow);
    // A proxy that passes the refusal on (Caddy, Traefik) passes its CORS headers too.
    if (outcome !== Outcome.Valid) return writeRefusal(res, outcome, false, allow);
    res.writeHeader('Content-Type', 'application/json').end(GRANTED);
  }

  /** A scoped token: the check's own body holds the calls, or there are none to allow. */
  private scoped(res: HttpResponse, req: HttpRequest, scope: MethodScope, grant: number, allow: string): void {
    const declared = req.getHeader('content-length');
    if (req.getHeader('transfer-encoding') === '' && (declared === '' || declared === '0')) {
      return writeScopeRefusal(res, scope.noBody('http', REFUSALS[Outcome.Scoped][1]), false, allow);
    }
    if (!(Number(declared) <= MAX_BODY_BYTES)) return writeBodyTooLarge(res);
    const pending = this.inFlight!.begin(res);
    readBody(res, pending, (body) => {
      const refusal = scope.check(grant, body, 'http');
      res.cork(() => {
        if (refusal !== null) writeScopeRefusal(res, refusal, false, allow);
        else res.writeHeader('Content-Type', 'application/json').end(GRANTED);
      });
      pending.finish();
    });
  }
}
