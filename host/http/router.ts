// Every request, in one uWebSockets.js catch-all handler. The admission step (path rules
// and the token check, admission.ts) comes first, before routing, so a caller without a token learns nothing about which
// paths exist; then the few local routes, and everything else goes to the upstream node
// when there is one.
//
// The protected path is kept to: read the header and the URL, one core call, write. A
// token with limits or a method scope whose request has a body is let through to its
// route or the proxy with its ticket: the body is read there, and judged by the
// admission's second half (body-admission.ts) before anything acts on it.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { judged } from './access-log.js';
import type { AccessLog } from './access-log.js';
import { Decision, HTTP } from './admission.js';
import type { Admission } from './admission.js';
import { CountedResponse } from './counted-response.js';
import type { Metrics } from '../ops/metrics.js';
import type { UpstreamProxy } from './proxy.js';
import { writeNotFound } from './responses.js';
import type { LocalRoutes, Route } from './routes.js';

export class Router {
  /**
   * `admission`: CONNECT, CORS, preflights, the gate or the path rules. `proxy` null: paths
   * without a local route are not found. `access`: --access-log's, null when it is off.
   * `metrics`: where every answer is counted (counted-response.ts).
   */
  constructor(
    private readonly metrics: Metrics,
    private readonly admission: Admission,
    private readonly routes: ReadonlyMap<string, Route>,
    private readonly local: LocalRoutes,
    private readonly proxy: UpstreamProxy | null,
    private readonly access: AccessLog | null = null,
  ) {}

  handle(res: HttpResponse, req: HttpRequest): void {
    const method = req.getCaseSensitiveMethod();
    const path = req.getUrl();
    const admission = this.admission;
    res = this.access !== null ? this.access.watch(res, req, method, path) : new CountedResponse(res, this.metrics);
    const decision = admission.admit(res, req, method, path, HTTP);
    if (this.access !== null) judged(res, req, admission, decision, path);
    if (decision !== Decision.Admitted) return;
    // Read before anything else is admitted: a check (auth-check.ts) admits its original request with the same admission.
    const { allow, ticket } = admission;
    const route = this.routes.get(path);
    if (route !== undefined) return this.local.serve(res, req, path, route, allow, ticket);
    if (this.proxy !== null) return this.proxy.forward(res, req, path, method, allow, ticket);
    writeNotFound(res, req.getMethod() === 'head');
  }
}
