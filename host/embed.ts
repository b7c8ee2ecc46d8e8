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
//   const verdict = auth.authorize(request.headers.authorization ?? '', path);
//   if (!verdict.ok) return reply.code(verdict.status).headers(verdict.headers).send(verdict.body);
import type { Registry } from 'prom-client';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { ADMIT_CLIENT, ADMIT_OK, ADMIT_RATE, Outcome } from './core/core.js';
import { newCore } from './core/module.js';
import { addressBytes, clientAddress } from './http/client-address.js';
import { Gate } from './http/gate.js';
import { InFlight } from './http/in-flight.js';
import { STOP_GRACE_MS } from './http/listener.js';
import { AUTH_PATH } from './http/paths.js';
import { VERDICTS, writeLimitsFull, writeRateLimited, writeRefusal } from './http/refusals.js';
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
  /** Mounts POST /ext/auth (auth.newToken, auth.revokeToken, auth.changePassword) on `app`. */
  mount(app: TemplatedApp): void;
  /** `handler`, behind the gate: a request without a token that grants its path gets the refusal, and `handler` never runs. */
  protect(handler: Handler): Handler;
  /** The verdict for a bare token (no "Bearer ") on a request path. */
  verify(token: string, path: string): Verdict;
  /** The verdict for an Authorization header value ("" when absent) on a request path. */
  authorize(authorization: string, path: string): Verdict;
  /** The service's Prometheus metrics (verifications, tokens, password checks), to merge into the host's own. */
  readonly metrics: Registry;
  /** Waits for /ext/auth calls under way (5 s at most), stops the hashing thread, releases the data folder. */
  close(): Promise<void>;
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
  const opened = await openOwner(core, { passwordFile: config.passwordFile, tokenLifetime: config.tokenLifetime, maxTokens: config.maxTokens,
    backend: { dataDir: config.dataDir } }, log, metrics, config.clock);
  const gate = new Gate(core, metrics, config.clock, { publicPaths: config.publicEndpoints });
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
        const outcome = gate.check(req.getHeader('authorization'), req.getUrl());
        if (outcome === Outcome.Limited) {
          // A token with limits: its client and one call against its rate, as the gate's admission does.
          const result = gate.admitLimited(1, addressBytes(clientAddress(res, req, config.trustedProxies), new Uint8Array(16)));
          if (result === ADMIT_CLIENT) return writeRefusal(res, outcome);
          if (result === ADMIT_RATE) return writeRateLimited(res, core.admitWait, 'null');
          if (result !== ADMIT_OK) return writeLimitsFull(res);
        } else if (outcome !== Outcome.Valid) {
          return writeRefusal(res, outcome);
        }
        handler(res, req);
      };
    },
    verify: (token, path) => VERDICTS[gate.check(token, path, true)],
    authorize: (authorization, path) => VERDICTS[gate.check(authorization, path)],
    metrics: metrics.registry,
    close() {
      closing ??= inFlight.drain(STOP_GRACE_MS).then(() => opened.close());
      return closing;
    },
  };
}
