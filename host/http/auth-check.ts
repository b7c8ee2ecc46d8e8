// /ext/auth/check: the gate's verdict for a request that a proxy in front (nginx
// auth_request, Caddy forward_auth, Traefik ForwardAuth) asks about before it forwards
// it. The original request is named by one pair of headers: X-Original-URI and
// X-Original-Method (nginx), or X-Forwarded-Uri and X-Forwarded-Method (Caddy, Traefik);
// its Authorization comes as it was. The verdict is the gate's, on the original path
// (without its query, by the same raw-path rules), and the answer is what the gate itself
// would have sent: 200, or its refusal.
//
// Only the proxy may name the original request, yet each proxy passes the client's other
// headers on: nginx's proxy_set_header replaces a client's header of the same name, and
// forward_auth and ForwardAuth replace the X-Forwarded pair, but none of them drops the
// other pair. So the pair the proxy set is the only one a genuine check request carries,
// and a request with a header of both pairs is refused: one of them is the client's. Any
// method is judged alike, OPTIONS too: a preflight that the check let through would reach
// the node, body and all, with no token.
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
const MIXED_NGINX = bothPairs('X-Original-URI with X-Forwarded-Uri or X-Forwarded-Method', 'nginx',
  'proxy_set_header X-Forwarded-Uri ""; and proxy_set_header X-Forwarded-Method ""; in the check\'s location');
const MIXED_FORWARDED = bothPairs('X-Forwarded-Uri with X-Original-Method', 'Caddy', 'header_up -X-Original-Method in forward_auth');
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
    const originalUri = req.getHeader('x-original-uri');
    const forwardedUri = req.getHeader('x-forwarded-uri');
    const nginx = originalUri !== '';
    const uri = nginx ? originalUri : forwardedUri;
    if (uri === '') {
      res.writeStatus('400 Bad Request').writeHeader('Content-Type', 'application/json').end(NO_URI);
      return;
    }
    if (nginx ? forwardedUri !== '' || req.getHeader('x-forwarded-method') !== '' : req.getHeader('x-original-method') !== '') {
      res.writeStatus('400 Bad Request').writeHeader('Content-Type', 'application/json').end(nginx ? MIXED_NGINX : MIXED_FORWARDED);
      return;
    }
    const method = req.getHeader(nginx ? 'x-original-method' : 'x-forwarded-method');
    if (method.toUpperCase() === 'CONNECT') return writeConnectRefused(res);
    // The path as the gate takes it from a request line: only the query is left out. A
    // raw "#" stays, and the path rules refuse it as they do at the gate.
    const query = uri.indexOf('?');
    const path = query === -1 ? uri : uri.slice(0, query);
    const allow = this.cors === null ? '' : this.cors.allow(req.getHeader('origin'));
    const outcome = this.gate === null ? (this.core.pathAllowed(path) ? Outcome.Valid : Outcome.BadPath)
      : this.gate.check(req.getHeader('authorization'), path);
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

/** The 400 of a check request with headers of both pairs: `found` names them, `strip` is how `proxy` drops the client's. */
function bothPairs(found: string, proxy: string, strip: string): Uint8Array {
  return jsonLine(RpcCode.InvalidRequest, `/ext/auth/check got ${found}: headers of both pairs that name the original request, ` +
    'so one of them was written by the client. The proxy in front sets one pair (nginx X-Original-URI and X-Original-Method, ' +
    `Caddy and Traefik X-Forwarded-Uri and X-Forwarded-Method) and must drop the client's copies of the other (${proxy}: ${strip})`);
}
