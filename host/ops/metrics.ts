// What the service counts, for Prometheus. The request path only bumps plain numbers
// (a typed array indexed by outcome, a few fields); prom-client reads them when scraped,
// through each metric's collect() callback, so a scrape costs the gate nothing and the
// gate costs the registry nothing.
import { OUTCOME_NAMES } from '../core/abi.js';
import { VERSION } from '../version.js';
import {
  LIMIT_REFUSALS,
  METHOD_LABELS,
  RESPONSE_REASONS,
  SCOPE_RESULTS,
  SCOPE_VIAS,
  UPSTREAM_ERROR_KINDS,
  WS_CLOSES,
  WS_DIRECTIONS,
  WS_REFUSALS,
} from './metric-labels.js';
import type { ResponseReason, ScopeResult, ScopeVia, UpstreamErrorKind, WsClose, WsRefusal } from './metric-labels.js';
import { processMetrics } from './process-metrics.js';
import { Counter, Gauge, Histogram, Registry } from './prometheus.js';

// The labels service/usage-history.ts and http/admission.ts take from here, with Metrics.

/**
 * One verification in this many is timed. Timing every one would cost two clock reads
 * per request; a sample of one in 64 gives the same distribution at a sixty-fourth of
 * the cost.
 */
export const LATENCY_SAMPLE_EVERY = 64;

/** Seconds. A verification takes about a microsecond; the top buckets catch stalls. */
const LATENCY_BUCKETS = [0.5e-6, 1e-6, 2e-6, 5e-6, 10e-6, 25e-6, 100e-6, 1e-3, 10e-3];

/** Seconds, from a node on the same machine (a fraction of a millisecond) to one past --upstream-timeout's default (30 s). */
const UPSTREAM_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface MetricsOptions {
  /** Also export the process's own metrics (CPU, memory, event loop, GC): process_* and nodejs_*. */
  readonly processMetrics?: boolean;
  /** The HTTP thread (1 to --http-threads) whose requests `requests` counts; without it they are not exported. */
  readonly httpThread?: number;
}

/** A metrics exposition, ready to send. */
export interface Scrape {
  readonly contentType: string;
  readonly text: string;
}

/** What the metrics route serves: these metrics, or every thread's summed. */
export interface MetricsSource {
  scrape(): Promise<Scrape>;
}

export class Metrics implements MetricsSource {
  readonly registry = new Registry();
  /** Verifications by outcome, indexed by Outcome. */
  readonly verifications = new Float64Array(OUTCOME_NAMES.length);
  /** Counts down to the next timed verification. */
  untilSample = LATENCY_SAMPLE_EVERY;
  tokensIssued = 0;
  tokensRevoked = 0;
  passwordsAccepted = 0;
  passwordsRefused = 0;
  /** Password checks refused because the client (or everyone) failed too often of late. */
  passwordsThrottled = 0;
  /** Password checks refused because too many were waiting. */
  passwordsBusy = 0;
  readonly upstreamErrors = new Float64Array(UPSTREAM_ERROR_KINDS.length);
  /** Method checks of scoped tokens, indexed by via * SCOPE_RESULTS.length + result. */
  readonly scopeChecks = new Float64Array(SCOPE_VIAS.length * SCOPE_RESULTS.length);
  /** Requests and WebSocket messages of tokens with limits refused, by LIMIT_REFUSALS. */
  readonly limitRefusals = new Float64Array(LIMIT_REFUSALS.length);
  /** Requests this HTTP thread received. */
  requests = 0;
  /** Answers this HTTP thread wrote, keyed by status * RESPONSE_REASONS.length + reason. */
  private readonly responses = new Map<number, number>();
  /** Calls the admission read (HTTP bodies and WebSocket messages of tokens with limits or a scope), by METHOD_LABELS. */
  readonly rpcCalls = new Float64Array(METHOD_LABELS.length);
  /** WebSocket sessions open now on this thread, opened so far, refused by WS_REFUSALS, closed by WS_CLOSES. */
  wsOpen = 0;
  wsOpened = 0;
  readonly wsRefused = new Float64Array(WS_REFUSALS.length);
  readonly wsClosed = new Float64Array(WS_CLOSES.length);
  /** WebSocket messages and their bytes, by WS_DIRECTIONS. */
  readonly wsMessages = new Float64Array(WS_DIRECTIONS.length);
  readonly wsBytes = new Float64Array(WS_DIRECTIONS.length);
  /** --access-log's lines lost (a write failed, or too much waited), and its writes that failed. */
  accessLinesLost = 0;
  accessWriteErrors = 0;
  /**
   * The core's count of calls of tokens without limits served uncounted (Core.usageMisses),
   * set by the owner alone: the count lives in memory every thread shares, so a thread
   * that reported it too would multiply it when the threads' metrics are summed.
   */
  usageMisses: (() => number) | null = null;
  private readonly latency: Histogram;
  private readonly upstreamLatency: CountedHistogram;

  constructor(options: MetricsOptions = {}) {
    const registers = [this.registry];
    const counter = (name: string, help: string, read: (self: Counter) => void, labelNames: string[] = []): void => {
      // A scrape rebuilds each counter from the plain numbers.
      new Counter({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          read(this);
        },
      });
    };
    counter(
      'api_auth_verifications_total',
      'Token verifications by the gate, by outcome.',
      (c) => {
        for (let i = 0; i < OUTCOME_NAMES.length; i++) c.inc({ outcome: OUTCOME_NAMES[i] }, this.verifications[i]);
      },
      ['outcome'],
    );
    counter('api_auth_tokens_issued_total', 'Tokens issued by auth.newToken and auth.rotateToken.', (c) => c.inc(this.tokensIssued));
    counter('api_auth_tokens_revoked_total', 'Valid tokens revoked by auth.revokeToken.', (c) => c.inc(this.tokensRevoked));
    counter(
      'api_auth_password_checks_total',
      'Password checks by result.',
      (c) => {
        c.inc({ result: 'accepted' }, this.passwordsAccepted);
        c.inc({ result: 'refused' }, this.passwordsRefused);
      },
      ['result'],
    );
    counter(
      'api_auth_password_throttled_total',
      'Calls refused before any password check because of earlier failures (HTTP 429, -32005).',
      (c) => c.inc(this.passwordsThrottled),
    );
    counter('api_auth_password_busy_total', 'Calls refused because too many password checks were waiting (HTTP 503, -32043).', (c) =>
      c.inc(this.passwordsBusy),
    );
    counter(
      'api_auth_upstream_errors_total',
      'Proxied requests the upstream did not answer, by kind.',
      (c) => {
        for (let i = 0; i < UPSTREAM_ERROR_KINDS.length; i++) c.inc({ kind: UPSTREAM_ERROR_KINDS[i] }, this.upstreamErrors[i]);
      },
      ['kind'],
    );
    counter(
      'api_auth_method_checks_total',
      'Method checks of tokens with a method scope, by where the calls came ' +
        '(an HTTP body, a WebSocket message) and result; a refused call is answered with its JSON-RPC error (a 403 for a body ' +
        'that is not JSON-RPC), and a batch whose allowed calls went on counts as a refusal.',
      (c) => {
        for (let v = 0; v < SCOPE_VIAS.length; v++) {
          for (let r = 0; r < SCOPE_RESULTS.length; r++) {
            c.inc({ via: SCOPE_VIAS[v], result: SCOPE_RESULTS[r] }, this.scopeChecks[v * SCOPE_RESULTS.length + r]);
          }
        }
      },
      ['via', 'result'],
    );
    counter(
      'api_auth_access_log_lines_lost_total',
      'Access log lines lost: their write failed (a full disk), or too many waited for one.',
      (c) => c.inc(this.accessLinesLost),
    );
    counter('api_auth_access_log_write_errors_total', 'Writes to the access log, and reopens of it, that failed.', (c) =>
      c.inc(this.accessWriteErrors),
    );
    // By reason only: a label per token would let anyone who issues tokens grow the series without bound.
    counter(
      'api_auth_limit_refusals_total',
      'Requests and WebSocket messages of tokens with limits refused, by reason: past the rate ' +
        '(HTTP 429, -32005), from a client the token does not allow (HTTP 403), or no room in the limits table (HTTP 503).',
      (c) => labelled(c, 'reason', LIMIT_REFUSALS, this.limitRefusals),
      ['reason'],
    );
    counter(
      'api_auth_usage_uncounted_total',
      'Calls of tokens without limits let through but not counted in their usage ' +
        "(lastUsedAt, requests): the core's usage table had no slot for them.",
      (c) => c.inc(this.usageMisses?.() ?? 0),
    );
    this.latency = new Histogram({
      name: 'api_auth_verification_duration_seconds',
      help: `Time the gate spends verifying a token (one verification in ${LATENCY_SAMPLE_EVERY} is timed).`,
      buckets: LATENCY_BUCKETS,
      registers,
    });
    counter(
      'api_auth_rpc_calls_total',
      'JSON-RPC calls read by the admission (the bodies and WebSocket messages of tokens with limits ' +
        'or a method scope), by method: its name for the methods of the named sets, else its namespace (eth_*, platform.*), else other.',
      (c) => labelled(c, 'method', METHOD_LABELS, this.rpcCalls),
      ['method'],
    );
    this.upstreamLatency = new CountedHistogram(
      UPSTREAM_BUCKETS,
      (collect) =>
        new Histogram({
          name: 'api_auth_upstream_request_duration_seconds',
          help:
            "Time from a proxied request's dispatch to the upstream (a wait for a free connection included) to the head of its answer; " +
            'every answered request is timed.',
          buckets: UPSTREAM_BUCKETS,
          registers,
          collect,
        }),
    );
    // The same in every thread: the threads' sum keeps the first, not the sum.
    const build = new Gauge({
      name: 'api_auth_build_info',
      help: 'The running api-auth: its version, and the Node.js it runs on; always 1.',
      labelNames: ['version', 'nodejs'],
      registers,
      aggregator: 'first',
    });
    build.set({ version: VERSION, nodejs: process.versions.node }, 1);
    const ratio = new Gauge({
      name: 'api_auth_verification_sampling_ratio',
      help: 'The share of token verifications that ' + `api_auth_verification_duration_seconds times (one in ${LATENCY_SAMPLE_EVERY}).`,
      registers,
      aggregator: 'first',
    });
    ratio.set(1 / LATENCY_SAMPLE_EVERY);
    const thread = options.httpThread;
    if (thread !== undefined) {
      const responses = this.responses;
      counter(
        'api_auth_http_responses_total',
        'Answers written, by HTTP status and, for a request api-auth refused, why (none for ' +
          "any other answer): the gate's outcome, the token's limits or scope, a closed fleet fence, an upstream that did not answer.",
        (c) => {
          for (const [key, value] of responses) {
            c.inc(
              { status: String(Math.floor(key / RESPONSE_REASONS.length)), reason: RESPONSE_REASONS[key % RESPONSE_REASONS.length] },
              value,
            );
          }
        },
        ['status', 'reason'],
      );
      // Apart by thread when the threads' metrics are summed: it shows how the acceptor spreads the connections.
      counter(
        'api_auth_http_requests_total',
        'Requests received, by the HTTP thread that served them (1 to --http-threads).',
        (c) => {
          c.inc({ thread: String(thread) }, this.requests);
        },
        ['thread'],
      );
      // A serving thread's: summed over the threads like the rest, the gauge too.
      const open = (): number => this.wsOpen;
      new Gauge({
        name: 'api_auth_websocket_sessions_open',
        help: 'WebSocket sessions open now.',
        registers,
        collect() {
          this.set(open());
        },
      });
      counter('api_auth_websocket_sessions_opened_total', 'WebSocket sessions opened (upgrades the upstream accepted).', (c) =>
        c.inc(this.wsOpened),
      );
      counter(
        'api_auth_websocket_sessions_refused_total',
        'WebSocket upgrades answered with an HTTP error rather than a session, by reason.',
        (c) => labelled(c, 'reason', WS_REFUSALS, this.wsRefused),
        ['reason'],
      );
      counter(
        'api_auth_websocket_sessions_closed_total',
        'WebSocket sessions closed, by what ended them.',
        (c) => labelled(c, 'reason', WS_CLOSES, this.wsClosed),
        ['reason'],
      );
      counter(
        'api_auth_websocket_messages_total',
        'WebSocket messages relayed, by direction.',
        (c) => labelled(c, 'direction', WS_DIRECTIONS, this.wsMessages),
        ['direction'],
      );
      counter(
        'api_auth_websocket_bytes_total',
        'Bytes of WebSocket messages relayed (payloads), by direction.',
        (c) => labelled(c, 'direction', WS_DIRECTIONS, this.wsBytes),
        ['direction'],
      );
    }
    if (options.processMetrics) processMetrics(this.registry);
  }

  /** An answer written with `status` (100 to 999, as uWS writes them), refused for `reason` or not. */
  response(status: number, reason: ResponseReason): void {
    const key = status * RESPONSE_REASONS.length + reason;
    this.responses.set(key, (this.responses.get(key) ?? 0) + 1);
  }

  /** The answers written so far by reason (RESPONSE_REASONS), every status summed: the usage history's refusals (service/usage-history.ts). */
  responsesByReason(): Map<string, number> {
    const totals = new Map<string, number>();
    for (const [key, value] of this.responses) {
      const reason = RESPONSE_REASONS[key % RESPONSE_REASONS.length];
      totals.set(reason, (totals.get(reason) ?? 0) + value);
    }
    return totals;
  }

  /** The upstream answered a proxied request `milliseconds` after it was dispatched (clock.ts, systemTimer). */
  observeUpstream(milliseconds: number): void {
    this.upstreamLatency.observe(milliseconds / 1000);
  }

  /** Records a timed verification, in milliseconds (clock.ts, systemTimer). */
  observeVerification(milliseconds: number): void {
    this.latency.observe(milliseconds / 1000);
  }

  wsRefusal(reason: WsRefusal): void {
    this.wsRefused[WS_REFUSALS.indexOf(reason)]++;
  }

  wsClose(reason: WsClose): void {
    this.wsClosed[WS_CLOSES.indexOf(reason)]++;
  }

  scopeCheck(via: ScopeVia, result: ScopeResult): void {
    this.scopeChecks[SCOPE_VIAS.indexOf(via) * SCOPE_RESULTS.length + SCOPE_RESULTS.indexOf(result)]++;
  }

  upstreamError(kind: UpstreamErrorKind): void {
    this.upstreamErrors[UPSTREAM_ERROR_KINDS.indexOf(kind)]++;
  }

  /** The exposition text and its content type. */
  async scrape(): Promise<Scrape> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}

/**
 * responsesByReason of several threads, from their metrics as `registry.getMetricsAsJSON()`
 * gives them (the api_auth_http_responses_total series by reason, every status summed).
 */
export function responsesByReasonOf(
  threads: readonly (readonly {
    name: string;
    values?: readonly { value: number; labels: Partial<Record<string, string | number>> }[];
  }[])[],
): Map<string, number> {
  const totals = new Map<string, number>();
  for (const metrics of threads) {
    for (const metric of metrics) {
      if (metric.name !== 'api_auth_http_responses_total') continue;
      for (const { value, labels } of metric.values ?? []) {
        const reason = String(labels.reason);
        totals.set(reason, (totals.get(reason) ?? 0) + value);
      }
    }
  }
  return totals;
}

/** `values[i]` as the series of `names[i]`. */
function labelled(counter: Counter, label: string, names: readonly string[], values: Float64Array): void {
  for (let i = 0; i < names.length; i++) counter.inc({ [label]: names[i] }, values[i]);
}

/** prom-client 15's state of a histogram's series: its buckets' counts (not cumulative), sum and count. */
interface SeriesState {
  bucketValues: Record<string, number>;
  sum: number;
  count: number;
}

/**
 * A histogram of one series (no labels) counted here, a Float64Array slot a bucket, and
 * handed to prom-client's Histogram only when it is read (its collect(), before every
 * scrape and getMetricsAsJSON): prom-client's observe() makes a labels object, a
 * closure and a hash per call, about 2% of the gateway's CPU at one observation a proxied
 * request. The series is written in place, as prom-client 15 keeps it for a histogram
 * without labels (its hashMap's '' entry); that is checked once, and should it not hold,
 * every observation goes through prom-client's observe() instead. Nothing resets it.
 */
class CountedHistogram {
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;
  private readonly histogram: Histogram;
  /** Whether prom-client keeps the series where it is written; otherwise observe() is prom-client's. */
  private readonly inPlace: boolean;

  constructor(
    private readonly bounds: readonly number[],
    make: (collect: () => void) => Histogram,
  ) {
    this.counts = new Float64Array(bounds.length);
    this.histogram = make(() => this.collect());
    const state = this.series();
    this.inPlace =
      state !== undefined &&
      typeof state.sum === 'number' &&
      typeof state.count === 'number' &&
      bounds.every((bound) => typeof state.bucketValues?.[bound] === 'number');
  }

  observe(value: number): void {
    if (!this.inPlace) {
      this.histogram.observe(value);
      return;
    }
    this.sum += value;
    this.count++;
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]) {
        this.counts[i]++;
        return;
      }
    }
  }

  private series(): SeriesState | undefined {
    return (this.histogram as unknown as { hashMap?: Record<string, SeriesState> }).hashMap?.[''];
  }

  private collect(): void {
    const series = this.inPlace ? this.series() : undefined;
    if (series === undefined) return;
    for (let i = 0; i < this.bounds.length; i++) series.bucketValues[this.bounds[i]] = this.counts[i];
    series.sum = this.sum;
    series.count = this.count;
  }
}
