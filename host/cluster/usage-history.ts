// Usage history across a fleet (auth.usageHistory): each gateway publishes its own
// hourly counts (service/usage-history.ts) under `/<cluster-name>.usage-history/<id>/`, the
// id its usage key has (usage.ts), on the usage publish cadence (USAGE_PUBLISH_MS) and at a
// clean stop, bound to no lease: a stopped gateway's counts stay, and keep counting in the
// fleet's sums. auth.usageHistory lists the other gateways' keys (one range read of keys
// alone per call, none per request), reads the parts it needs (their node parts, or the
// block of the token asked for) and adds them to this gateway's own.
//
// Etcd takes a request of at most 1.5 MiB by default, so the counts are split: `node`
// holds the node's series (every token's requests, refusals by reason; at most about
// 51 KB: 18 series of 168 counts of at most 16 digits), and `t<first>` (first a multiple
// of BLOCK_SERIALS, zero-padded) the tokens of serials first .. first + BLOCK_SERIALS - 1:
// at most BLOCK_SERIALS x (16 + 1 + 7 + 168 x 11 + 3) bytes, under 1 MB. A part left
// with nothing is deleted. Only the parts with a token whose series changed since the last
// round are put (all of them once an hour, as the window moves), each by itself: a reader
// between two puts sees some parts newer than others, never a count twice.
import type { Logger } from '../ops/log.js';
import { errorFields } from '../ops/log.js';
import { readHistory } from '../service/usage-history.js';
import { HISTORY_HOURS } from '../service/usage-history.js';
import type { EncodedHistory, UsageHistory } from '../service/usage-history.js';
import type { ReadHistory } from '../service/ledger.js';
import type { EtcdConnection } from './etcd.js';
import type { FleetKeys } from './keys.js';
import { pad } from './keys.js';
import { etcdRefusal } from './refusals.js';

/** Serials per token part: 512 x 1,875 bytes at most, under 1 MB, below etcd's 1.5 MiB. */
export const BLOCK_SERIALS = 512;
/** The most bytes a part's value holds (checked as it is published). */
export const MAX_PART_BYTES = 1024 * 1024;

/** The first serial of a token part's key (`.../t<first>`). */
function blockOf(key: string): number {
  return Number(key.slice(key.lastIndexOf('/t') + 2));
}

/** A published part read back; undefined for one that is not. */
export function decodeFleetHistory(value: string): ReadHistory | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  const read = readHistory(parsed);
  return typeof read === 'string' ? undefined : read;
}

export class FleetHistory {
  /** The token parts published (their values are not kept: up to 128 MB at the bound), and the node part's value. */
  private readonly published = new Set<string>();
  private publishedNode: string | null = null;
  /** The blocks (their first serial) with a change not yet published, or all of them. */
  private readonly pending = new Set<number>();
  private pendingAll = true;
  private readonly own: string;
  /** The other gateways' parts that held no history at the last read: left out, each reported once. */
  damaged = new Set<string>();

  constructor(
    private readonly etcd: EtcdConnection,
    private readonly keys: FleetKeys,
    private readonly history: UsageHistory,
    private readonly id: string,
    private readonly log: Logger,
  ) {
    this.own = keys.history(id, '');
  }

  private why(error: unknown): string {
    const { kind } = etcdRefusal((error as { cause?: unknown }).cause ?? error);
    if (kind === 'permission-denied') return `the etcd user's role needs readwrite on ${this.keys.historyPrefix}`;
    if (kind === 'unreachable') return "the fleet's etcd did not answer; the next round tries again";
    return `etcd refused this gateway (${kind}); the next round tries again`;
  }

  /** Samples, then puts the parts that changed and deletes those left empty. */
  async publish(): Promise<void> {
    await this.history.sample();
    const changed = this.history.takeChanged();
    if (changed === 'all') this.pendingAll = true;
    else for (const serial of changed) this.pending.add(serial - (serial % BLOCK_SERIALS));
    const encoded = this.history.encodeNode();
    const node = Object.keys(encoded).length > 0 ? JSON.stringify(encoded) : null;
    // Only the blocks with a token whose series changed: every 5 s, the busy ones; all of them once an hour, as the window moves.
    const blocks = new Set(this.pendingAll ? this.history.serials().map((serial) => serial - (serial % BLOCK_SERIALS)) : this.pending);
    if (this.pendingAll) for (const key of this.published) blocks.add(blockOf(key));
    const retryAll = this.pendingAll;
    this.pendingAll = false;
    this.pending.clear();
    try {
      const nodeKey = this.keys.history(this.id, 'node');
      if (node !== this.publishedNode) {
        if (node === null) await this.etcd.call((client) => client.delete().key(nodeKey).exec());
        else await this.etcd.call((client) => client.put(nodeKey).value(node).exec());
        this.publishedNode = node;
      }
      // A block at a time, encoded then put, the event loop free between two: all of them (the hour turned) is up to 128 parts of 1 MB.
      for (const block of blocks) {
        const tokens = this.history.encodeBlock(block, BLOCK_SERIALS);
        const value = tokens.length === 0 ? null : JSON.stringify({ tokens } satisfies EncodedHistory);
        // Cannot happen with counts of 32 bits (the header says why); kept from etcd all the same.
        if (value !== null && value.length > MAX_PART_BYTES) {
          this.log.error('a usage history part is too large to publish; it is left out', { block, bytes: value.length });
          continue;
        }
        const key = this.keys.history(this.id, `t${pad(block, 16)}`);
        await new Promise((resolve) => setImmediate(resolve));
        if (value === null && !this.published.has(key)) continue;
        if (value === null) await this.etcd.call((client) => client.delete().key(key).exec());
        else await this.etcd.call((client) => client.put(key).value(value).exec());
        if (value === null) this.published.delete(key);
        else this.published.add(key);
      }
    } catch (error) {
      // Tried again at the next round.
      this.pendingAll ||= retryAll;
      for (const block of blocks) this.pending.add(block);
      this.log.warn(`cannot publish this gateway's usage history to the fleet; ${this.why(error)}`, errorFields(error));
    }
  }

  /**
   * The other gateways' published histories (stopped ones' included): their node parts, or
   * for `serial` the part of its block alone; none when etcd cannot be read, with a warning.
   * The keys are listed (no values), then only those parts read.
   */
  async others(serial?: number): Promise<ReadHistory[]> {
    const part = serial === undefined ? '/node' : `/t${pad(serial - (serial % BLOCK_SERIALS), 16)}`;
    let all: Record<string, string>;
    try {
      const keys = await this.etcd.call((client) => client.getAll().prefix(this.keys.historyPrefix).keys());
      const wanted = keys.filter((key) => !key.startsWith(this.own) && key.endsWith(part));
      const values = await Promise.all(wanted.map((key) => this.etcd.call((client) => client.get(key).string())));
      all = Object.fromEntries(wanted.flatMap((key, i) => (values[i] === null ? [] : [[key, values[i]!]])));
    } catch (error) {
      this.log.warn(
        `cannot read the other gateways' usage history, so auth.usageHistory shows this gateway's alone; ${this.why(error)}`,
        errorFields(error),
      );
      return [];
    }
    const read: ReadHistory[] = [];
    for (const [key, value] of Object.entries(all)) {
      const history = decodeFleetHistory(value);
      if (history === undefined) {
        if (!this.damaged.has(key)) {
          this.damaged.add(key);
          this.log.warn(
            `the fleet ${this.keys.name} holds a damaged usage history key ${key}; it is left out of auth.usageHistory, ` +
              'and no gateway needs it to verify tokens: delete it (etcdctl del)',
            { cluster: this.keys.name, key },
          );
        }
        continue;
      }
      this.damaged.delete(key);
      read.push(history);
    }
    return read;
  }
}

/**
 * A part's value after the fleet's clean-up (tidy.ts) at `hour` (floor(ms / 3,600,000)):
 * the entries of tokens not `listed` dropped, and the series whose hours have all left
 * the window; undefined when nothing changes (a damaged value included: left to the
 * operator), null when nothing is left and the key is to be deleted.
 */
export function tidyHistoryValue(value: string, listed: ReadonlySet<number>, hour: number): string | null | undefined {
  let parsed: EncodedHistory;
  try {
    parsed = JSON.parse(value) as EncodedHistory;
  } catch {
    return undefined;
  }
  if (typeof readHistory(parsed) === 'string') return undefined;
  // A series [firstHour, count, ...] ends at firstHour + its counts - 1.
  const current = (series: number[]): boolean => series[0] + series.length - 2 > hour - HISTORY_HOURS;
  const kept: EncodedHistory = {};
  let changed = false;
  if (parsed.requests !== undefined) {
    if (current(parsed.requests)) kept.requests = parsed.requests;
    else changed = true;
  }
  if (parsed.refusals !== undefined) {
    const refusals = Object.fromEntries(Object.entries(parsed.refusals).filter(([, series]) => current(series)));
    if (Object.keys(refusals).length !== Object.keys(parsed.refusals).length) changed = true;
    if (Object.keys(refusals).length > 0) kept.refusals = refusals;
  }
  if (parsed.tokens !== undefined) {
    // A token's series is [serial, firstHour, count, ...].
    const tokens = parsed.tokens.filter((e) => listed.has(e[0]) && current(e.slice(1)));
    if (tokens.length !== parsed.tokens.length) changed = true;
    if (tokens.length > 0) kept.tokens = tokens;
  }
  if (!changed) return undefined;
  return Object.keys(kept).length === 0 ? null : JSON.stringify(kept);
}
