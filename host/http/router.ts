// Every request, in one uWebSockets.js catch-all handler. Path rules and the token check
// come first, before routing, so a caller without a token learns nothing about which
// paths exist; then the few local routes, and everything else goes to the upstream node
// when there is one.
//
// The protected path is kept to: read the header and the URL, one core call, write. A
// token with a method scope (Outcome.Scoped) is let through to its route or the proxy
// with its grant, whose methods are checked there against the body (scope.ts).
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { Outcome } from '../core/core.js';
import type { Core } from '../core/core.js';
import { writePreflight } from './cors.js';
import type { Cors } from './cors.js';
import type { Gate } from './gate.js';
import type { UpstreamProxy } from './proxy.js';
import { writeRefusal } from './refusals.js';
import { writeConnectRefused, writeNotFound } from './responses.js';
import type { LocalRoutes, Route } from './routes.js';

export class Router {
  /**
   * `gate` null: no tokens needed, only the path rules apply (checked by `core`).
   * `proxy` null: paths without a local route are not found. `cors` null: no origin is allowed.
   */
  constructor(
    private readonly core: Core,
    private readonly gate: Gate | null,
    private readonly routes: ReadonlyMap<string, Route>,
    private readonly local: LocalRoutes,
    private readonly proxy: UpstreamProxy | null,
    private readonly cors: Cors | null = null,
  ) {}

  handle(res: HttpResponse, req: HttpRequest): void {
    const method = req.getCaseSensitiveMethod();
    // Any spelling: some servers take methods without regard to case.
    if (method.length === 7 && method.toUpperCase() === 'CONNECT') return writeConnectRefused(res);
    const path = req.getUrl();
    // Requests from scripts in browsers carry an Origin; most of a node's traffic does not.
    const allow = this.cors === null ? '' : this.cors.allow(req.getHeader('origin'));
    // A preflight carries no token (browsers send none): an allowed origin is answered here,
    // for the node's endpoints. api-auth's own routes answer no other site's page (the token
    // service above all: a page must not spend an operator's password attempts), so their
    // preflights go on like any request and get no CORS header.
    if (allow !== '' && method === 'OPTIONS' && req.getHeader('access-control-request-method') !== '') {
      if (!this.core.pathAllowed(path)) return writeRefusal(res, Outcome.BadPath, false, allow);
      const own = this.routes.get(path);
      if (own === undefined || own.kind === 'rpc') return writePreflight(res, allow);
    }
    const gate = this.gate;
    // The grant whose methods the body must keep to; -1: no method scope.
    let grant = -1;
    if (gate !== null) {
      const outcome = gate.check(req.getHeader('authorization'), path);
      if (outcome !== Outcome.Valid) {
        if (outcome !== Outcome.Scoped) return writeRefusal(res, outcome, req.getMethod() === 'head', allow);
        grant = this.core.scopedGrant;
      }
    } else if (!this.core.pathAllowed(path)) {
      return writeRefusal(res, Outcome.BadPath, req.getMethod() === 'head', allow);
    }
    const route = this.routes.get(path);
    if (route !== undefined) return this.local.serve(res, req, path, route, allow, grant);
    if (this.proxy !== null) return this.proxy.forward(res, req, path, method, allow, grant);
    writeNotFound(res, req.getMethod() === 'head');
  }
}
