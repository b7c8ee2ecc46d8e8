// Usage over time (auth.usageHistory): per token, the requests let through in each UTC
// hour (bucket = floor(ms / 3,600,000)) of the last HISTORY_HOURS (7 days); node-wide, the
// requests of every token and the requests api-auth refused, by reason, per hour.
//
// Nothing is counted on the request path: the core already counts each token's calls
// (Core.usage, the `requests` of auth.listTokens), and the HTTP side each refusal by
// reason (api_auth_http_responses_total). The owner samples both on its clock: the rise
// of each live token's count since the last sample goes into the hour the sample is
// taken in, and so does the rise of each reason's total. A sample is taken every
// SAMPLE_MS, in each of the last HOUR_END_MS of an hour (so at most that much of an
// hour's calls is counted in the next), before each save or publish, and before each
// auth.usageHistory answer (which thus shows every call counted so far).
//
// Each series is a ring of HISTORY_HOURS slots indexed by hour % HISTORY_HOURS; the
// rings of a token are allocated on its first counted call (Uint32Array, 672 bytes), and
// freed when it is no longer live (expired, of an earlier password) or its hours have all
// passed out of the window. The backends keep it: the data folder's `usage-history` file
// and its journal of what each save found changed (state/usage-history.ts), a fleet
// gateway's published keys (cluster/usage-history.ts), all in the encodings below.
import type { Clock } from '../clock.js';
import { RESPONSE_REASONS } from '../ops/metric-labels.js';
import { MAX_USAGE_REQUESTS } from './ledger.js';
import type { ReadHistory, Usage } from './ledger.js';

/** The hours kept: 7 days. */
export const HISTORY_HOURS = 168;
export const HOUR_MS = 3_600_000;
/** How often (by the service's clock) the counts are sampled at least. */
export const SAMPLE_MS = 30_000;
/** The end of each hour in which every tick samples. */
export const HOUR_END_MS = 2000;
/** How often (real time) the owner looks whether a sample is due. */
export const SAMPLE_TICK_MS = 1000;
/** The most one token's hour may count (its slot is 32 bits); more is kept at it. */
export const MAX_HOUR_COUNT = 2 ** 32 - 1;
/** The latest hour an encoded series may name: 2200-01-01T00:00:00Z, as MAX_LAST_USED_MS. */
export const MAX_HOUR = Date.UTC(2200, 0, 1) / HOUR_MS;

/**
 * The reasons refusals are counted by: those of api_auth_http_responses_total (ops/metrics.ts,
 * RESPONSE_REASONS) but `none` (not a refusal), `scoped` (never a refusal's reason) and the
 * upstream's (`upstream refused`...: the node did not answer; api-auth refused nothing).
 */
export const REFUSAL_REASONS: readonly string[] = RESPONSE_REASONS.filter(
  (r) => r !== 'none' && r !== 'scoped' && !r.startsWith('upstream '),
);

/** The totals of refused requests by reason (REFUSAL_REASONS) since the process started: every HTTP thread's, summed. */
export type RefusalTotals = () => Promise<ReadonlyMap<string, number>>;

/**
 * One series as the backends keep it: `[firstHour, count, count, ...]`, the counts of
 * consecutive hours from firstHour, with no zero at either end; an empty series is left out.
 */
export type EncodedSeries = number[];

/** A history as the backends keep it (the file whole; a fleet key a part: the node's series, or a block of tokens). */
export interface EncodedHistory {
  /** Every token's requests, summed per hour. */
  requests?: EncodedSeries;
  /** Refusals by reason. */
  refusals?: Record<string, EncodedSeries>;
  /** `[serial, firstHour, count, ...]` per token. */
  tokens?: number[][];
}

/** One hour as auth.usageHistory answers it. */
export interface HistoryHour {
  readonly at: string;
  readonly requests: number;
  readonly refusals: Record<string, number>;
}

type Ring = Uint32Array | Float64Array;

/** Tokens encoded between two turns of the event loop. */
const ENCODE_SLICE = 1024;

export class UsageHistory {
  /** The latest hour the rings hold: their slots are the hours latest - HISTORY_HOURS + 1 .. latest. */
  private latest: number;
  private readonly tokens = new Map<number, Uint32Array>();
  private readonly requests = new Float64Array(HISTORY_HOURS);
  private readonly refusals = REFUSAL_REASONS.map(() => new Float64Array(HISTORY_HOURS));
  /** Each live token's count at the last sample. */
  private readonly seen = new Map<number, number>();
  /** Each reason's total at the last sample: the process starts at 0. */
  private readonly seenRefusals = new Float64Array(REFUSAL_REASONS.length);
  private begun = false;
  /** Counts the changes, so that a saver writes only a history that changed. */
  private changes = 0;
  /** The tokens whose series changed since takeChanged, or all of them (the window moved, a restore). */
  private changed = new Set<number>();
  private allChanged = true;
  /**
   * The hours a sample added to since takeJournal, each with the tokens it added to: kept
   * only for a backend that journals (the data folder's, once it calls takeJournal).
   */
  private touched: Map<number, Set<number>> | undefined;
  private sampling: Promise<void> = Promise.resolve();
  private lastSample: number;
  private timer: NodeJS.Timeout | undefined;
  private live: () => Iterable<{ readonly serial: number }> = () => [];

  constructor(
    private readonly core: { usage(serial: number): Usage | undefined },
    private readonly clock: Clock,
    private readonly refusalTotals?: RefusalTotals,
  ) {
    this.lastSample = clock();
    this.latest = Math.floor(this.lastSample / HOUR_MS);
  }

  /**
   * Starts counting: each of the `live` tokens' counts now (restored from the backend,
   * already in the history) is where its rise is counted from. Then samples on a timer.
   */
  begin(live: () => Iterable<{ readonly serial: number }>): void {
    this.live = live;
    for (const { serial } of live()) this.seen.set(serial, this.core.usage(serial)?.requests ?? 0);
    this.begun = true;
    this.timer = setInterval(() => {
      const now = this.clock();
      if (now - this.lastSample >= SAMPLE_MS || HOUR_MS - (now % HOUR_MS) <= HOUR_END_MS) void this.sample();
    }, SAMPLE_TICK_MS).unref();
  }

  /** Stops the timer; a last sample is the saver's (before its last save). */
  stop(): void {
    clearInterval(this.timer);
  }

  /** Adds what was counted since the last sample to the hour now; one sample at a time. */
  sample(): Promise<void> {
    return this.exclusive(() => this.sampleNow());
  }

  /** Runs `work` alone: no sample changes the rings while it reads them. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.sampling.then(work);
    this.sampling = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** How many changes the history has had: equal to an earlier reading, it holds what it held then. */
  get version(): number {
    return this.changes;
  }

  /** The serials whose series changed since the last call, or 'all' (the window moved, or the first call). */
  takeChanged(): ReadonlySet<number> | 'all' {
    const taken = this.allChanged ? 'all' : this.changed;
    this.changed = new Set();
    this.allChanged = false;
    return taken;
  }

  private async sampleNow(): Promise<void> {
    if (!this.begun) return;
    // Read first: the totals of the HTTP threads are a message away.
    const totals = this.refusalTotals === undefined ? undefined : await this.refusalTotals().catch(() => undefined);
    const now = this.clock();
    this.lastSample = now;
    const hour = Math.floor(now / HOUR_MS);
    this.advance(hour);
    // A clock set back counts into its hour while that is in the window; older, into the oldest.
    const at = Math.max(hour, this.latest - HISTORY_HOURS + 1);
    const slot = at % HISTORY_HOURS;
    const live = new Set<number>();
    const touch = (): Set<number> => {
      let serials = this.touched?.get(at);
      if (serials === undefined) {
        serials = new Set<number>();
        this.touched?.set(at, serials);
      }
      return serials;
    };
    let added = 0;
    for (const { serial } of this.live()) {
      live.add(serial);
      const requests = this.core.usage(serial)?.requests ?? 0;
      const before = this.seen.get(serial) ?? 0;
      this.seen.set(serial, requests);
      // A count that went down was counted anew (a slot reused): all of it is new.
      const delta = requests >= before ? requests - before : requests;
      if (delta === 0) continue;
      let ring = this.tokens.get(serial);
      if (ring === undefined) this.tokens.set(serial, (ring = new Uint32Array(HISTORY_HOURS)));
      ring[slot] = Math.min(ring[slot] + delta, MAX_HOUR_COUNT);
      this.changed.add(serial);
      touch().add(serial);
      added += delta;
    }
    for (const serial of this.seen.keys()) if (!live.has(serial)) this.seen.delete(serial);
    for (const serial of this.tokens.keys()) {
      if (live.has(serial)) continue;
      this.tokens.delete(serial);
      this.changed.add(serial);
      this.changes++;
    }
    if (added > 0) this.changes++;
    this.requests[slot] = Math.min(this.requests[slot] + added, MAX_USAGE_REQUESTS);
    if (totals !== undefined) {
      for (let i = 0; i < REFUSAL_REASONS.length; i++) {
        const total = totals.get(REFUSAL_REASONS[i]) ?? 0;
        // A total that went down lost a thread's counts (a stop under way): nothing new in it.
        const delta = Math.max(0, total - this.seenRefusals[i]);
        this.seenRefusals[i] = total;
        if (delta > 0) {
          this.changes++;
          touch();
        }
        this.refusals[i][slot] = Math.min(this.refusals[i][slot] + delta, MAX_USAGE_REQUESTS);
      }
    }
  }

  /**
   * What samples added since the last call, as the data folder's journal keeps it
   * (JournalHour, one JSON line per hour ending in a line feed): for each hour added to,
   * the node's counts and those of the tokens added to, each as it stands now, not the
   * rise. A count only rises, so a line read again over a later state changes nothing
   * (readJournal keeps the larger), and one lost is made up by any later save of the hour.
   */
  takeJournal(): string {
    const lines: string[] = [];
    for (const [hour, serials] of this.touched ?? []) {
      if (hour > this.latest || hour <= this.latest - HISTORY_HOURS) continue;
      const slot = hour % HISTORY_HOURS;
      const refusals: Record<string, number> = {};
      REFUSAL_REASONS.forEach((reason, i) => {
        if (this.refusals[i][slot] > 0) refusals[reason] = this.refusals[i][slot];
      });
      const tokens: number[] = [];
      for (const serial of serials) {
        const n = this.tokens.get(serial)?.[slot] ?? 0;
        if (n > 0) tokens.push(serial, n);
      }
      if (this.requests[slot] === 0 && tokens.length === 0 && Object.keys(refusals).length === 0) continue;
      lines.push(`${JSON.stringify({ hour, requests: this.requests[slot], refusals, tokens })}\n`);
    }
    // From now on: the first call starts the keeping (what came before it is in the file, whole).
    this.touched = new Map();
    return lines.join('');
  }

  /** Moves the window on to `hour`: the slots of the hours that left it are cleared, and tokens left with none freed. */
  private advance(hour: number): void {
    if (hour <= this.latest) return;
    const cleared = Math.min(hour - this.latest, HISTORY_HOURS);
    const clear = (ring: Ring): void => {
      for (let h = hour - cleared + 1; h <= hour; h++) ring[h % HISTORY_HOURS] = 0;
    };
    clear(this.requests);
    for (const ring of this.refusals) clear(ring);
    for (const [serial, ring] of this.tokens) {
      clear(ring);
      if (ring.every((n) => n === 0)) this.tokens.delete(serial);
    }
    this.latest = hour;
    this.changes++;
    this.allChanged = true;
  }

  /** The count of `ring` in `hour`, 0 outside the window. */
  private at(ring: Ring | undefined, hour: number): number {
    return ring === undefined || hour > this.latest || hour <= this.latest - HISTORY_HOURS ? 0 : ring[hour % HISTORY_HOURS];
  }

  /** Tokens holding a history (for the measure of its cost). */
  get size(): number {
    return this.tokens.size;
  }

  /**
   * The last `hours` hours to the current one, oldest first: `serial`'s requests, or
   * (undefined) every token's and the refusals by reason; `others` (a fleet's other
   * gateways' histories) added. Call `sample` first for the calls counted so far.
   */
  query(
    serial: number | undefined,
    hours: number,
    others: readonly ReadHistory[] = [],
  ): { from: number; hours: { hour: number; requests: number; refusals?: Record<string, number> }[] } {
    const now = Math.max(Math.floor(this.clock() / HOUR_MS), this.latest);
    this.advance(now);
    const from = now - hours + 1;
    const ring = serial === undefined ? this.requests : this.tokens.get(serial);
    const shown = [];
    for (let hour = from; hour <= now; hour++) {
      let requests = this.at(ring, hour);
      for (const o of others) requests += (serial === undefined ? o.requests : o.tokens.get(serial))?.get(hour) ?? 0;
      if (serial !== undefined) {
        shown.push({ hour, requests: Math.min(requests, MAX_USAGE_REQUESTS) });
        continue;
      }
      const refusals: Record<string, number> = {};
      REFUSAL_REASONS.forEach((reason, i) => {
        let n = this.at(this.refusals[i], hour);
        for (const o of others) n += o.refusals.get(reason)?.get(hour) ?? 0;
        refusals[reason] = Math.min(n, MAX_USAGE_REQUESTS);
      });
      shown.push({ hour, requests: Math.min(requests, MAX_USAGE_REQUESTS), refusals });
    }
    return { from, hours: shown };
  }

  /** The node's series (every token's requests, the refusals) encoded; tokens left out. */
  encodeNode(): EncodedHistory {
    this.advance(Math.floor(this.clock() / HOUR_MS));
    const encoded: EncodedHistory = {};
    const requests = this.encodeRing(this.requests);
    if (requests !== undefined) encoded.requests = requests;
    const refusals: Record<string, EncodedSeries> = {};
    REFUSAL_REASONS.forEach((reason, i) => {
      const series = this.encodeRing(this.refusals[i]);
      if (series !== undefined) refusals[reason] = series;
    });
    if (Object.keys(refusals).length > 0) encoded.refusals = refusals;
    return encoded;
  }

  /** The tokens of serials `first` .. `first + count - 1` encoded, by serial order: `[serial, firstHour, count, ...]`. */
  encodeBlock(first: number, count: number): number[][] {
    this.advance(Math.floor(this.clock() / HOUR_MS));
    const tokens: number[][] = [];
    for (let serial = first; serial < first + count; serial++) {
      const ring = this.tokens.get(serial);
      const series = ring && this.encodeRing(ring);
      if (series !== undefined) tokens.push([serial, ...series]);
    }
    return tokens;
  }

  /** The serials holding a history. */
  serials(): number[] {
    return [...this.tokens.keys()];
  }

  /**
   * The whole history as JSON text, `header`'s members first (the file's version): an
   * EncodedHistory with `tokens` always there. Written a slice of tokens at a time, the
   * event loop free between slices (65,536 busy tokens take seconds: docs/guides/limits.md),
   * with no sample in between.
   */
  encodeText(header: Record<string, unknown>): Promise<string> {
    return this.exclusive(async () => {
      const head = JSON.stringify({ ...header, ...this.encodeNode() });
      const pieces: string[] = [];
      const serials = [...this.tokens.keys()].sort((a, b) => a - b);
      for (let i = 0; i < serials.length; i++) {
        const series = this.encodeRing(this.tokens.get(serials[i])!);
        if (series !== undefined) pieces.push(JSON.stringify([serials[i], ...series]));
        if (i % ENCODE_SLICE === ENCODE_SLICE - 1) await new Promise((resolve) => setImmediate(resolve));
      }
      return `${head.slice(0, -1)}${head === '{}' ? '' : ','}"tokens":[${pieces.join(',')}]}`;
    });
  }

  private encodeRing(ring: Ring): EncodedSeries | undefined {
    let first = -1;
    let last = -1;
    for (let hour = this.latest - HISTORY_HOURS + 1; hour <= this.latest; hour++) {
      if (ring[hour % HISTORY_HOURS] === 0) continue;
      if (first < 0) first = hour;
      last = hour;
    }
    if (first < 0) return undefined;
    const series = [first];
    for (let hour = first; hour <= last; hour++) series.push(ring[hour % HISTORY_HOURS]);
    return series;
  }

  /**
   * Adds a saved history (the data folder's, read at start) to this one: the hours still
   * in the window, of the tokens `keep` says are live.
   */
  restore(saved: ReadHistory, keep: (serial: number) => boolean): void {
    this.advance(Math.floor(this.clock() / HOUR_MS));
    const add = (ring: Ring, series: ReadonlyMap<number, number>, max: number): void => {
      for (const [hour, n] of series) {
        if (hour > this.latest || hour <= this.latest - HISTORY_HOURS) continue;
        ring[hour % HISTORY_HOURS] = Math.min(ring[hour % HISTORY_HOURS] + n, max);
      }
    };
    this.changes++;
    this.allChanged = true;
    add(this.requests, saved.requests, MAX_USAGE_REQUESTS);
    REFUSAL_REASONS.forEach((reason, i) => add(this.refusals[i], saved.refusals.get(reason) ?? new Map(), MAX_USAGE_REQUESTS));
    for (const [serial, series] of saved.tokens) {
      if (!keep(serial)) continue;
      let ring = this.tokens.get(serial);
      if (ring === undefined) this.tokens.set(serial, (ring = new Uint32Array(HISTORY_HOURS)));
      add(ring, series, MAX_HOUR_COUNT);
      if (ring.every((n) => n === 0)) this.tokens.delete(serial);
    }
  }
}

/** `value` read back as an encoded series of counts at most `max`, or why it is not one. */
function readSeries(value: unknown, max: number, what: string, head = 0): Map<number, number> | string {
  if (
    !Array.isArray(value) ||
    value.length < head + 2 ||
    value.length > head + 1 + HISTORY_HOURS ||
    !value.every((v) => Number.isSafeInteger(v) && (v as number) >= 0)
  ) {
    return `${what} is not [${head > 0 ? 'serial, ' : ''}firstHour, count, ...] with 1 to ${HISTORY_HOURS} counts`;
  }
  const first = value[head] as number;
  if (first > MAX_HOUR) return `${what} starts after 2200-01-01`;
  const series = new Map<number, number>();
  for (let i = head + 1; i < value.length; i++) {
    const n = value[i] as number;
    if (n > max) return `${what} counts more than ${max} in an hour`;
    if (n > 0) series.set(first + i - head - 1, n);
  }
  return series;
}

/** An encoded history (parsed JSON) read back, or why it is not one: the first part that is not. */
export function readHistory(parsed: unknown): ReadHistory | string {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return 'it is not an object';
  const h = parsed as { requests?: unknown; refusals?: unknown; tokens?: unknown };
  let requests: Map<number, number> = new Map();
  if (h.requests !== undefined) {
    const read = readSeries(h.requests, MAX_USAGE_REQUESTS, 'requests');
    if (typeof read === 'string') return read;
    requests = read;
  }
  const refusals = new Map<string, Map<number, number>>();
  if (h.refusals !== undefined) {
    if (h.refusals === null || typeof h.refusals !== 'object' || Array.isArray(h.refusals)) return 'its refusals are not an object';
    for (const [reason, value] of Object.entries(h.refusals)) {
      // A reason this version does not count (a newer gateway's) is left out.
      if (!REFUSAL_REASONS.includes(reason)) continue;
      const read = readSeries(value, MAX_USAGE_REQUESTS, `refusals ${JSON.stringify(reason)}`);
      if (typeof read === 'string') return read;
      refusals.set(reason, read);
    }
  }
  const tokens = new Map<number, Map<number, number>>();
  if (h.tokens !== undefined) {
    if (!Array.isArray(h.tokens)) return 'its tokens are not a list';
    for (const entry of h.tokens as unknown[]) {
      const read = readSeries(entry, MAX_HOUR_COUNT, `token entry ${JSON.stringify(entry).slice(0, 40)}`, 1);
      if (typeof read === 'string') return read;
      const serial = (entry as number[])[0];
      if (tokens.has(serial)) return `serial ${serial} is listed twice`;
      tokens.set(serial, read);
    }
  }
  return { requests, refusals, tokens };
}

/**
 * One line of the data folder's journal (UsageHistory.takeJournal): an hour's counts as a
 * save found them, `tokens` as `[serial, count, serial, count, ...]`.
 */
export interface JournalHour {
  readonly hour: number;
  readonly requests: number;
  readonly refusals: Record<string, number>;
  readonly tokens: readonly number[];
}

/** `value` (a parsed journal line) read back, or why it is not one. */
function readJournalHour(value: unknown): JournalHour | string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'it is not an object';
  const { hour, requests, refusals, tokens } = value as Record<string, unknown>;
  const count = (n: unknown, max: number): boolean => Number.isSafeInteger(n) && (n as number) >= 0 && (n as number) <= max;
  if (!count(hour, MAX_HOUR)) return 'its hour is not a whole number of hours before 2200-01-01';
  if (!count(requests, MAX_USAGE_REQUESTS)) return `its requests are not a count from 0 to ${MAX_USAGE_REQUESTS}`;
  if (refusals === null || typeof refusals !== 'object' || Array.isArray(refusals)) return 'its refusals are not an object';
  for (const n of Object.values(refusals))
    if (!count(n, MAX_USAGE_REQUESTS)) return `its refusals are not counts from 0 to ${MAX_USAGE_REQUESTS}`;
  if (!Array.isArray(tokens) || tokens.length % 2 !== 0) return 'its tokens are not [serial, count, ...]';
  for (let i = 0; i < tokens.length; i += 2) {
    if (!count(tokens[i], Number.MAX_SAFE_INTEGER) || !count(tokens[i + 1], MAX_HOUR_COUNT)) {
      return `its tokens are not serials each with a count from 0 to ${MAX_HOUR_COUNT}`;
    }
  }
  return value as JournalHour;
}

/**
 * `history` (the file's, read) with the journal's lines over it: each count the larger of
 * the two. `text` is the journal's; a last line without its line feed is a write a crash
 * cut short, and left out. Returns the history, and why the journal was read only in part
 * (a line that is not one of it: the lines before it count), if it was.
 */
export function readJournal(history: ReadHistory, text: string): { history: ReadHistory; damage?: string } {
  const requests = new Map(history.requests);
  const refusals = new Map([...history.refusals].map(([reason, series]) => [reason, new Map(series)]));
  const tokens = new Map([...history.tokens].map(([serial, series]) => [serial, new Map(series)]));
  const raise = (series: Map<number, number>, hour: number, n: number): void => {
    if (n > (series.get(hour) ?? 0)) series.set(hour, n);
  };
  const lines = text.split('\n');
  // The piece after the last line feed: '' for a whole journal, else a torn last write.
  lines.pop();
  let damage: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(lines[i]);
    } catch {
      parsed = undefined;
    }
    const read = parsed === undefined ? 'it is not JSON' : readJournalHour(parsed);
    if (typeof read === 'string') {
      damage = `line ${i + 1}: ${read}`;
      break;
    }
    raise(requests, read.hour, read.requests);
    for (const [reason, n] of Object.entries(read.refusals)) {
      if (!REFUSAL_REASONS.includes(reason)) continue;
      let series = refusals.get(reason);
      if (series === undefined) refusals.set(reason, (series = new Map()));
      raise(series, read.hour, n);
    }
    for (let t = 0; t < read.tokens.length; t += 2) {
      let series = tokens.get(read.tokens[t]);
      if (series === undefined) tokens.set(read.tokens[t], (series = new Map()));
      raise(series, read.hour, read.tokens[t + 1]);
    }
  }
  return { history: { requests, refusals, tokens }, ...(damage === undefined ? {} : { damage }) };
}

/** The RFC 3339 time of an hour's start. */
export function hourStart(hour: number): string {
  return new Date(hour * HOUR_MS).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
