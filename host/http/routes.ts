// The few routes api-auth answers itself, past the gate: its JSON-RPC endpoints, the
// token service, the metrics. Each path has one Route, and each kind of route its own
// way of answering.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { MetricsSource } from '../ops/metrics.js';
import type { TokenServiceLink } from '../service/link.js';
import type { AuthCheck } from './auth-check.js';
import { postAuth } from './auth-route.js';
import { clientAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import type { InFlight } from './in-flight.js';
import { writeCorsHeaders } from './cors.js';
import { writeScopeRefusal } from './refusals.js';
import { endWith, writeInternalError, writeMethodNotAllowed } from './responses.js';
import type { ReadinessRoute } from './readiness.js';
import { postCall } from './rpc-route.js';
import type { RpcHandler } from './rpc-route.js';
import type { MethodScope } from './scope.js';
import { Tarpit } from './tarpit.js';

export type Route =
  /** A JSON-RPC endpoint (/ext/info, /ext/health): POST calls it; GET and HEAD get `probe`, when there is one. */
  | { readonly kind: 'rpc'; readonly endpoint: RpcHandler; readonly probe: Uint8Array | null }
  /** The token service (/ext/auth): POST, throttled before the body is read. */
  | { readonly kind: 'auth'; readonly service: TokenServiceLink }
  /** The Prometheus metrics (this thread's, or every thread's summed): GET. */
  | { readonly kind: 'metrics'; readonly metrics: MetricsSource }
  /** api-auth's own readiness (/ext/auth/health): GET and HEAD. */
  | { readonly kind: 'readiness'; readonly readiness: ReadinessRoute }
  /** The gate's verdict for a proxy in front (/ext/auth/check): any method, as the proxy's subrequest comes. */
  | { readonly kind: 'check'; readonly check: AuthCheck };

/** Answers requests for local routes; the gate, if any, has let them through. */
export class LocalRoutes {
  private readonly tarpit = new Tarpit();

  /** `scope`: where the methods of scoped tokens are checked; null when there are no tokens. */
  constructor(private readonly inFlight: InFlight, private readonly trusted: TrustedProxies, private readonly log: Logger,
    private readonly scope: MethodScope | null = null) {}

  /**
   * Call it from the uWS handler, before returning. `allowOrigin`: the CORS origin the
   * answer is for (cors.ts), "" for none; the node's endpoints' answers carry it. `grant`:
   * the grant of a token with a method scope, -1 for none.
   */
  serve(res: HttpResponse, req: HttpRequest, path: string, route: Route, allowOrigin = '', grant = -1): void {
    const method = req.getMethod();
    // A scoped token reaches a node endpoint with a POSTed body whose every call it
    // allows, and nothing else: no probe, no metrics (a GET has no calls to check).
    if (grant >= 0 && (route.kind !== 'rpc' || method !== 'post')) {
      return writeScopeRefusal(res, this.scope!.noBody('http'), method === 'head', allowOrigin);
    }
    switch (route.kind) {
      case 'rpc':
        if (grant >= 0) return postCall(res, req, route.endpoint, '', this.inFlight, this.log, allowOrigin, { scope: this.scope!, grant });
        // The built-in endpoints' methods never read the client's address: it is not looked
        // up for them (a getpeername(2) and a string); only /ext/auth's methods get it.
        if (method === 'post') return postCall(res, req, route.endpoint, '', this.inFlight, this.log, allowOrigin);
        if (route.probe !== null && (method === 'get' || method === 'head')) {
          if (allowOrigin !== '') writeCorsHeaders(res, allowOrigin);
          res.writeHeader('Content-Type', 'application/json');
          return endWith(res, route.probe, method === 'head');
        }
        return writeMethodNotAllowed(res, method, path, route.probe === null ? 'POST' : 'GET, HEAD, POST');
      case 'auth':
        if (method === 'post') {
          return postAuth(res, req, route.service, clientAddress(res, req, this.trusted), this.inFlight, this.tarpit, this.log);
        }
        return writeMethodNotAllowed(res, method, path, 'POST');
      case 'metrics':
        if (method === 'get') return this.scrape(res, route.metrics);
        return writeMethodNotAllowed(res, method, path, 'GET');
      case 'readiness':
        if (method === 'get' || method === 'head') return route.readiness.answer(res, method === 'head');
        return writeMethodNotAllowed(res, method, path, 'GET, HEAD');
      case 'check':
        return route.check.answer(res, req);
    }
  }

  private scrape(res: HttpResponse, metrics: MetricsSource): void {
    const pending = this.inFlight.begin(res);
    metrics.scrape().then(({ contentType, text }) => {
      if (pending.open) res.cork(() => res.writeHeader('Content-Type', contentType).end(text));
      pending.finish();
    }, (error: unknown) => {
      this.log.error('internal error', { method: 'metrics', ...errorFields(error) });
      if (pending.open) res.cork(() => writeInternalError(res));
      pending.finish();
    });
  }
}
