// The few routes api-auth answers itself, past the gate: its JSON-RPC endpoints, the
// token service, the metrics. Each path has one Route, and each kind of route its own
// way of answering.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { MetricsSource } from '../ops/metrics.js';
import type { TokenServiceLink } from '../service/link.js';
import type { AuthCheck } from './auth-check.js';
import { management, postAuth } from './auth-route.js';
import type { Management } from './rpc-route.js';
import type { ConsoleFiles } from './console-route.js';
import { clientAddress } from './client-address.js';
import type { TrustedProxies } from '../addresses.js';
import type { InFlight } from './in-flight.js';
import { writeCorsHeaders } from './cors.js';
import type { BodyAdmission, Ticket } from './body-admission.js';
import { writeCallRefusal } from './refusals.js';
import { endWith, writeInternalError, writeMethodNotAllowed } from './responses.js';
import type { ReadinessRoute } from './readiness.js';
import { postCall } from './rpc-route.js';
import type { RpcHandler } from './rpc-route.js';
import { Tarpit } from './tarpit.js';

/** The liveness answer: that the thread answered at all is the whole of it. */
const LIVE_BODY = new TextEncoder().encode('{"live":true}\n');

export type Route =
  /** A JSON-RPC endpoint (/ext/info, /ext/health): POST calls it; GET and HEAD get `probe`, when there is one. */
  | { readonly kind: 'rpc'; readonly endpoint: RpcHandler; readonly probe: Uint8Array | null }
  /** The token service (/ext/auth): POST, throttled before the body is read. */
  | { readonly kind: 'auth'; readonly service: TokenServiceLink }
  /** The Prometheus metrics (this thread's, or every thread's summed): GET. */
  | { readonly kind: 'metrics'; readonly metrics: MetricsSource }
  /** api-auth's own readiness (/ext/auth/health): GET and HEAD. */
  | { readonly kind: 'readiness'; readonly readiness: ReadinessRoute }
  /** api-auth's own liveness (/ext/auth/live): GET and HEAD, 200 while this thread serves. */
  | { readonly kind: 'liveness' }
  /** The gate's verdict for a proxy in front (/ext/auth/check): any method, as the proxy's subrequest comes. */
  | { readonly kind: 'check'; readonly check: AuthCheck }
  /** The operator's console (/ext/auth/console and its files): GET and HEAD; not found without --console. */
  | { readonly kind: 'console'; readonly files: ConsoleFiles };

/** Answers requests for local routes; the gate, if any, has let them through. */
export class LocalRoutes {
  private readonly tarpit = new Tarpit();
  private readonly management: Management;

  /**
   * `bodies`: where the calls of tokens with limits or a method scope are judged; null when there are no tokens.
   * `secure`: served over TLS (the console's session cookie is then Secure).
   */
  constructor(
    private readonly inFlight: InFlight,
    private readonly trusted: TrustedProxies,
    private readonly log: Logger,
    private readonly bodies: BodyAdmission | null = null,
    secure = false,
  ) {
    this.management = management(secure);
  }

  /**
   * Call it from the uWS handler, before returning. `allowOrigin`: the CORS origin the
   * answer is for (cors.ts), "" for none; the node's endpoints' answers carry it. `ticket`:
   * what a request with a body of a token with limits or a method scope still owes its
   * admission (admission.ts), null for none.
   */
  serve(res: HttpResponse, req: HttpRequest, path: string, route: Route, allowOrigin = '', ticket: Ticket | null = null): void {
    const method = req.getMethod();
    if (ticket !== null) {
      // A POST to a node endpoint has its calls judged as its body is read; any other
      // request runs no call of its body: a scope has none to allow, and the limits count one.
      if (route.kind === 'rpc' && method === 'post') {
        return postCall(res, req, route.endpoint, '', this.inFlight, this.log, allowOrigin, { bodies: this.bodies!, ticket });
      }
      const refusal = this.bodies!.withoutBody(ticket, 'http');
      if (refusal !== null) return writeCallRefusal(res, refusal, method === 'head', allowOrigin);
    }
    switch (route.kind) {
      case 'rpc':
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
          return postAuth(
            res,
            req,
            route.service,
            clientAddress(res, req, this.trusted),
            this.inFlight,
            this.tarpit,
            this.log,
            this.management,
          );
        }
        return writeMethodNotAllowed(res, method, path, 'POST');
      case 'metrics':
        if (method === 'get') return this.scrape(res, route.metrics);
        return writeMethodNotAllowed(res, method, path, 'GET');
      case 'readiness':
        if (method === 'get' || method === 'head') return route.readiness.answer(res, method === 'head');
        return writeMethodNotAllowed(res, method, path, 'GET, HEAD');
      case 'liveness':
        if (method === 'get' || method === 'head') {
          res.writeHeader('Content-Type', 'application/json').writeHeader('Cache-Control', 'no-store');
          return endWith(res, LIVE_BODY, method === 'head');
        }
        return writeMethodNotAllowed(res, method, path, 'GET, HEAD');
      case 'check':
        return route.check.answer(res, req);
      case 'console':
        return route.files.answer(res, method, path);
    }
  }

  private scrape(res: HttpResponse, metrics: MetricsSource): void {
    const pending = this.inFlight.begin(res);
    metrics.scrape().then(
      ({ contentType, text }) => {
        if (pending.open) res.cork(() => res.writeHeader('Content-Type', contentType).end(text));
        pending.finish();
      },
      (error: unknown) => {
        this.log.error('internal error', { method: 'metrics', ...errorFields(error) });
        if (pending.open) res.cork(() => writeInternalError(res));
        pending.finish();
      },
    );
  }
}
