// The gate in front of every endpoint: the paths that need no token (the public ones,
// and the token service's own), then the token check, one core call at the time of the
// clock it is given. It allocates nothing on the way.
import { systemTimer } from '../clock.js';
import type { Clock } from '../clock.js';
import { ADMIT_CLIENT, ADMIT_OK, ADMIT_OVER_BURST, ADMIT_QUOTA, ADMIT_RATE, clearCheckRecord, Outcome } from '../core/abi.js';
import type { AdmitRecord, CheckRecord } from '../core/abi.js';
import type { Core } from '../core/core.js';
import { LIMIT_REFUSALS } from '../ops/metric-labels.js';
import { LATENCY_SAMPLE_EVERY } from '../ops/metrics.js';
import { UNAVAILABLE } from './refusals.js';
import type { Metrics } from '../ops/metrics.js';

/** The index of a quota's refusal in the metrics' LIMIT_REFUSALS. */
const QUOTA_REFUSAL = LIMIT_REFUSALS.indexOf('quota');

/**
 * Whether a fleet gateway may serve at `nowMs` (ms since the Unix epoch): its fence, a
 * word the threads share (threads/fence.ts), read by whoever assembles the gate. Allocates nothing.
 */
export type Serving = (nowMs: number) => boolean;

export interface GateOptions {
  /** Exact paths anyone may request; each must have passed `core.pathAllowed`, so that it obeys the path rules too. */
  readonly publicPaths?: readonly string[];
  /** The token service's path (/ext/auth), which never needs a token: it is how one gets a token. */
  readonly authPath?: string;
  /** api-auth's own paths under authPath (/ext/auth/health, /ext/auth/check), which answer without a token too. */
  readonly ownPaths?: readonly string[];
  /** A fleet gateway's fence: while it is closed, every protected request is UNAVAILABLE. */
  readonly serving?: Serving;
}

/**
 * The check in front of every protected endpoint: the open paths pass, anything else
 * needs a token that grants it. Each outcome of a token check is counted, and one check
 * in LATENCY_SAMPLE_EVERY is timed.
 */
export class Gate {
  private readonly publicPaths: ReadonlySet<string> | null;
  private readonly authPath: string | null;
  private readonly ownPaths: readonly string[];
  private readonly serving: Serving | null;

  constructor(
    private readonly core: Core,
    private readonly metrics: Metrics,
    private readonly clock: Clock,
    options: GateOptions = {},
  ) {
    const publicPaths = options.publicPaths ?? [];
    this.publicPaths = publicPaths.length === 0 ? null : new Set(publicPaths);
    this.authPath = options.authPath ?? null;
    this.ownPaths = options.ownPaths ?? [];
    this.serving = options.serving ?? null;
  }

  /**
   * Whether `path` needs no token. The token service's paths first: a comparison of
   * lengths, or of the first bytes, most of the time.
   */
  open(path: string): boolean {
    const authPath = this.authPath;
    if (authPath !== null && path.startsWith(authPath) && (path === authPath || this.ownPaths.includes(path))) return true;
    return this.publicPaths?.has(path) === true;
  }

  /**
   * The outcome for a request on `path`. `credential` is its raw Authorization header
   * (empty when absent), or, `bare`, a token without `Bearer ` (a WebSocket upgrade's
   * access_token, an embedder's verify): one check either way, counted and sampled alike.
   * What a Scoped or Limited token needs next (its grant, serial, expiry, scope) goes to
   * `out`, which the caller owns, filled on every answer (emptied for an open path or a closed fence).
   */
  check(credential: string, path: string, bare: boolean, out: CheckRecord): Outcome {
    if (this.open(path)) {
      clearCheckRecord(out);
      return Outcome.Valid;
    }
    const ms = this.clock();
    // Before the token: a fleet gateway that cannot vouch for its revocations answers none.
    if (this.serving !== null && !this.serving(ms)) {
      clearCheckRecord(out);
      return UNAVAILABLE;
    }
    const now = Math.floor(ms / 1000);
    const metrics = this.metrics;
    let outcome: Outcome;
    if (--metrics.untilSample !== 0) {
      outcome = bare ? this.core.verify(credential, path, now, out) : this.core.authorize(credential, path, now, out);
    } else {
      metrics.untilSample = LATENCY_SAMPLE_EVERY;
      const start = systemTimer();
      outcome = bare ? this.core.verify(credential, path, now, out) : this.core.authorize(credential, path, now, out);
      metrics.observeVerification(systemTimer() - start);
    }
    metrics.verifications[outcome]++;
    return outcome;
  }

  /**
   * `calls` calls (0: only the client is checked) of a token that `check` answered Limited
   * for (its serial, expiry and grant, from its CheckRecord), from `client` (16 bytes:
   * addressBytes), now: at its request's head, for more calls of one request, or for a
   * message. An ADMIT_ code; a refusal is counted by reason, and `out` (the caller's) says
   * how long to wait and when a quota resets.
   */
  admitCalls(serial: number, expiry: number, grant: number, calls: number, client: Uint8Array, out: AdmitRecord): number {
    const result = this.core.admit(serial, expiry, grant, calls, client, this.clock(), out);
    if (result !== ADMIT_OK) {
      this.metrics.limitRefusals[
        result === ADMIT_RATE || result === ADMIT_OVER_BURST ? 0 : result === ADMIT_CLIENT ? 1 : result === ADMIT_QUOTA ? QUOTA_REFUSAL : 2
      ]++;
    }
    return result;
  }
}
