// GET /ext/auth/health: api-auth's own readiness, for a load balancer in front of it
// (/ext/health stays the node's). This route exists only once the state is loaded and
// the listener is up, so answering at all says both; with an upstream, it also says
// whether the upstream accepts connections, since api-auth serves nothing without it.
import { connect } from 'node:net';
import type { Clock } from '../clock.js';
import type { HttpResponse } from 'uWebSockets.js';
import type { InFlight } from './in-flight.js';
import type { Serving } from './gate.js';
import { endWith } from './responses.js';

/** How long the upstream gets to accept a probe's connection. */
export const PROBE_TIMEOUT_MS = 2000;

export interface Readiness {
  readonly healthy: boolean;
  readonly checks: Readonly<Record<string, { readonly healthy: boolean; readonly error?: string }>>;
}

export class ReadinessRoute {
  /** The probe under way: health requests that come meanwhile share it. */
  private probing: Promise<Readiness> | null = null;

  /**
   * `upstream` undefined: there is nothing to probe. `serving`: a fleet gateway's fence,
   * which is not ready while it is closed, so that a load balancer sends its clients to
   * the gateways that serve; `clock` tells the time it is read at, as the gate's does.
   */
  constructor(
    private readonly upstream: URL | undefined,
    private readonly inFlight: InFlight,
    private readonly clock: Clock,
    private readonly serving?: Serving,
  ) {}

  /** Call it from the uWS handler, before returning; `head`: answer with the length only. */
  answer(res: HttpResponse, head: boolean): void {
    if (this.upstream === undefined)
      return write(res, this.withFleet({ healthy: true, checks: { state: { healthy: true }, listener: { healthy: true } } }), head);
    const pending = this.inFlight.begin(res);
    this.probing ??= this.probe(this.upstream).finally(() => {
      this.probing = null;
    });
    void this.probing.then((readiness) => {
      if (pending.open) res.cork(() => write(res, this.withFleet(readiness), head));
      pending.finish();
    });
  }

  private withFleet(readiness: Readiness): Readiness {
    if (this.serving === undefined) return readiness;
    const serving = this.serving(this.clock());
    const fleet = serving
      ? { healthy: true }
      : { healthy: false, error: 'this gateway has lost touch with its fleet (etcd), or has not caught up yet' };
    return { healthy: readiness.healthy && serving, checks: { ...readiness.checks, fleet } };
  }

  private probe(upstream: URL): Promise<Readiness> {
    const port = Number(upstream.port || (upstream.protocol === 'https:' ? 443 : 80));
    const host = upstream.hostname.replace(/^\[|\]$/g, '');
    return new Promise((resolve) => {
      const socket = connect({ host, port, timeout: PROBE_TIMEOUT_MS });
      const settle = (error: string | undefined): void => {
        socket.destroy();
        const check = error === undefined ? { healthy: true } : { healthy: false, error };
        resolve({ healthy: check.healthy, checks: { state: { healthy: true }, listener: { healthy: true }, upstream: check } });
      };
      socket.once('connect', () => settle(undefined));
      socket.once('timeout', () => settle(`the upstream node did not accept a connection within ${PROBE_TIMEOUT_MS / 1000} s`));
      socket.once('error', (error: NodeJS.ErrnoException) =>
        settle(`the upstream node could not be reached (${error.code ?? error.message})`),
      );
    });
  }
}

function write(res: HttpResponse, readiness: Readiness, head: boolean): void {
  if (!readiness.healthy) res.writeStatus('503 Service Unavailable');
  res.writeHeader('Content-Type', 'application/json').writeHeader('Cache-Control', 'no-store');
  endWith(res, new TextEncoder().encode(JSON.stringify(readiness) + '\n'), head);
}
