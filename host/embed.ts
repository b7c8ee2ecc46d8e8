// The token service embedded in a node's own server, rather than run in front of it.
//
// A node on uWebSockets.js mounts /ext/auth on its own App and wraps its handlers with
// the gate:
//
//   const auth = await createAuth({ passwordFile: './password.txt', dataDir: './auth-data' });
//   auth.mount(app);
//   app.post('/ext/info', auth.protect((res, req) => { ... }));
//
// A node on another framework asks for a verdict and writes it its own way:
//
//   const verdict = auth.authorize(request.headers.authorization ?? '', path, { client: request.ip, body });
//   if (!verdict.ok) return reply.code(verdict.status).headers(verdict.headers).send(verdict.body);
//
// Both go through the gateway's one admission step (http/admission.ts): the token, then,
// for a token with limits or a method scope, its client and the calls of its body, on the
// one reading of it. A verdict that is ok means the node may run the body it was given,
// exactly that one.
import type { Registry } from 'prom-client';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { Outcome } from './core/abi.js';
import { newCore } from './core/module.js';
import { Admission, Body, Decision, HTTP } from './http/admission.js';
import { addressBytes } from './addresses.js';
import { Gate } from './http/gate.js';
import { InFlight } from './http/in-flight.js';
import { STOP_GRACE_MS } from './http/listener.js';
import { AUTH_PATH } from './own-endpoints.js';
import { callRefusalVerdict, unreadableRefusal, VERDICTS, writeCallRefusal } from './http/refusals.js';
import type { Verdict } from './http/refusals.js';
import { LocalRoutes } from './http/routes.js';
import type { Route } from './http/routes.js';
import { createLogger } from './ops/log.js';
import { Metrics } from './ops/metrics.js';
import { resolveAuthOptions, servedPaths } from './options.js';
import type { AuthOptions } from './options.js';
import { openOwner } from './owner.js';

export type Handler = (res: HttpResponse, req: HttpRequest) => void;

export interface Auth {
  /** Mounts POST /ext/auth (auth.newToken, auth.listTokens, auth.revokeToken, auth.rotateToken, auth.usageHistory, auth.changePassword) on `app`. */
  mount(app: TemplatedApp): void;
  /**
   * `handler`, behind the gate: a request without a token that grants its path gets the
   * refusal, and `handler` never runs. A token with limits counts the request as one call
   * when it has no body; one with a body, or a token with a method scope, is refused:
   * `handler` reads the body itself, after the gate, so its calls cannot be judged here
   * (read the body, then ask `authorize` with it).
   */
  protect(handler: Handler): Handler;
  /** The verdict for a bare token (no "Bearer ") on a request path, with what the node knows of the request. */
  verify(token: string, path: string, request?: RequestFacts): Verdict;
  /** The verdict for an Authorization header value ("" when absent) on a request path, with what the node knows of the request. */
  authorize(authorization: string, path: string, request?: RequestFacts): Verdict;
  /** The service's Prometheus metrics (verifications, tokens, password checks), to merge into the host's own. */
  readonly metrics: Registry;
  /** Waits for /ext/auth calls under way (5 s at most), stops the hashing thread, releases the data folder. */
  close(): Promise<void>;
}

/** What a node knows of a request beside its token and path, for the tokens that need it. */
export interface RequestFacts {
  /**
   * The client's address (IPv4 or IPv6 text), as the node's server saw it, or as a proxy
   * the node trusts names it: what a token's allowedClients are matched against. Absent:
   * unknown, which no client range holds (a token with allowedClients is refused).
   */
  readonly client?: string;
  /**
   * The request's body, as received and as the node will run it; null when it has none.
   * Absent: not given, so a token with limits or a method scope is refused, as its calls
   * cannot be judged.
   */
  readonly body?: Uint8Array | string | null;
  /** The request's Content-Encoding, if any: a body encoded otherwise than identity is not read. */
  readonly contentEncoding?: string;
}

/**
 * Opens the token service: reads (or generates) the password file, restores the data
 * folder, starts the hashing thread. Rejects with OptionError naming the option at fault
 * (or StateError, for a data folder it cannot use).
 */
export async function createAuth(options: AuthOptions): Promise<Auth> {
  const config = resolveAuthOptions(options);
  const log = options.log ?? createLogger(undefined, undefined, config.clock);
  const core = newCore();
  servedPaths(core, 'publicEndpoints', config.publicEndpoints);
  const metrics = new Metrics();
  const opened = await openOwner(
    core,
    {
      passwordFile: config.passwordFile,
      tokenLifetime: config.tokenLifetime,
      maxTokenLifetime: config.maxTokenLifetime,
      maxTokens: config.maxTokens,
      backend: { dataDir: config.dataDir },
    },
    log,
    metrics,
    config.clock,
  );
  const gate = new Gate(core, metrics, config.clock, { publicPaths: config.publicEndpoints });
  // The gateway's admission step, without CORS or routes of its own: the node's own server has those.
  const admission = new Admission(core, gate, null, new Map(), config.trustedProxies, metrics);
  /** The verdict for a request, as the gateway's admission judges it. */
  const judge = (credential: string, bare: boolean, path: string, request: RequestFacts | undefined): Verdict => {
    const body = typeof request?.body === 'string' ? new TextEncoder().encode(request.body) : request?.body;
    const encoding = request?.contentEncoding?.trim().toLowerCase() ?? '';
    const head =
      body === undefined
        ? Body.Unseen
        : body === null || body.length === 0
          ? Body.None
          : encoding === '' || encoding === 'identity'
            ? Body.Present
            : Body.Compressed;
    const client = addressBytes(request?.client ?? '', new Uint8Array(16));
    if (admission.decide(credential, bare, path, '', HTTP, head, null, null, client) === Decision.Refused) {
      return admission.refusal === null ? VERDICTS[admission.outcome] : callRefusalVerdict(admission.outcome, admission.refusal);
    }
    const ticket = admission.ticket;
    if (ticket === null) return VERDICTS[Outcome.Valid];
    const { refusal } = admission.bodies!.judge(ticket, body!, false, 'http');
    return refusal === null ? VERDICTS[Outcome.Valid] : callRefusalVerdict(ticket.grant >= 0 ? Outcome.Scoped : Outcome.Limited, refusal);
  };
  const route: Route = { kind: 'auth', service: opened.link };
  const inFlight = new InFlight();
  const local = new LocalRoutes(inFlight, config.trustedProxies, log);
  let closing: Promise<void> | undefined;
  return {
    mount(app) {
      app.any(AUTH_PATH, (res, req) => local.serve(res, req, AUTH_PATH, route));
    },
    protect(handler) {
      return (res, req) => {
        if (admission.admit(res, req, req.getCaseSensitiveMethod(), req.getUrl(), HTTP) !== Decision.Admitted) return;
        // A body the handler will read after the gate: its calls go unjudged, so the token that needs them is refused.
        if (admission.ticket !== null) return writeCallRefusal(res, unreadableRefusal('unjudged', -1, null, admission.ticket.grant >= 0));
        handler(res, req);
      };
    },
    verify: (token, path, request) => judge(token, true, path, request),
    authorize: (authorization, path, request) => judge(authorization, false, path, request),
    metrics: metrics.registry,
    close() {
      closing ??= inFlight.drain(STOP_GRACE_MS).then(() => opened.close());
      return closing;
    },
  };
}
