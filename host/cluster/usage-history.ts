// Usage history across a fleet (auth.usageHistory): each gateway publishes its own
// hourly counts (service/usage-history.ts) under `/<cluster-name>.usage-history/<id>/`, the
// id its usage key has (usage.ts), on the usage publish cadence (USAGE_PUBLISH_MS) and at a
// clean stop, bound to no lease: a stopped gateway's counts stay, and keep counting in the
// fleet's sums. auth.usageHistory reads the other gateways' keys at once (one range read
// per call, none per request) and adds them to this gateway's own.
//
// Etcd takes a request of at most 1.5 MiB by default, so the counts are split: `node`
// holds the node's series (every token's requests, refusals by reason; at most about
// 51 KB: 18 series of 168 counts of at most 16 digits), and `t<first>` (first a multiple
// of BLOCK_SERIALS, zero-padded) the tokens of serials first .. first + BLOCK_SERIALS - 1:
// at most BLOCK_SERIALS x (16 + 1 + 7 + 168 x 11 + 3) bytes, under 1 MB. A part left
// with nothing is deleted. Only the parts whose value changed are put, each by itself: a
// reader between two puts sees some parts newer than others, never a count twice.
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
  /** Each part's last published value, by key. */
  private published = new Map<string, string>();
  private readonly own: string;
  /** The other gateways' parts that held no history at the last read: left out, each reported once. */
  damaged = new Set<string>();

  constructor(private readonly etcd: EtcdConnection, private readonly keys: FleetKeys, private readonly history: UsageHistory,
    private readonly id: string, private readonly log: Logger) {
    this.own = keys.history(id, '');
  }

  private why(error: unknown): string {
    const { kind } = etcdRefusal((error as { cause?: unknown }).cause ?? error);
    if (kind === 'permission-denied') return `the etcd user's role needs readwrite on ${this.keys.historyPrefix}`;
    if (kind === 'unreachable') return 'the fleet\'s etcd did not answer; the next round tries again';
    return `etcd refused this gateway (${kind}); the next round tries again`;
  }

  /** Samples, then puts the parts that changed and deletes those left empty. */
  async publish(): Promise<void> {
    await this.history.sample();
    const parts = new Map<string, string>();
    const node = this.history.encodeNode();
    if (Object.keys(node).length > 0) parts.set(this.keys.history(this.id, 'node'), JSON.stringify(node));
    const blocks = new Map<number, number[][]>();
    for (const entry of this.history.encodeTokens()) {
      const block = entry[0] - (entry[0] % BLOCK_SERIALS);
      let list = blocks.get(block);
      if (list === undefined) blocks.set(block, list = []);
      list.push(entry);
    }
    for (const [block, tokens] of blocks) {
      const value = JSON.stringify({ tokens } satisfies EncodedHistory);
      // Cannot happen with counts of 32 bits (the header says why); kept from etcd all the same.
      if (value.length > MAX_PART_BYTES) {
        this.log.error('a usage history part is too large to publish; it is left out', { block, bytes: value.length });
        continue;
      }
      parts.set(this.keys.history(this.id, `t${pad(block, 16)}`), value);
    }
    try {
      for (const [key, value] of parts) {
        if (this.published.get(key) === value) continue;
        await this.etcd.call((client) => client.put(key).value(value).exec());
        this.published.set(key, value);
      }
      for (const key of [...this.published.keys()]) {
        if (parts.has(key)) continue;
        await this.etcd.call((client) => client.delete().key(key).exec());
        this.published.delete(key);
      }
    } catch (error) {
      this.log.warn(`cannot publish this gateway's usage history to the fleet; ${this.why(error)}`, errorFields(error));
    }
  }

  /** The other gateways' published histories (stopped ones' included); none when etcd cannot be read, with a warning. */
  async others(): Promise<ReadHistory[]> {
    let all: Record<string, string>;
    try {
      all = await this.etcd.call((client) => client.getAll().prefix(this.keys.historyPrefix).strings());
    } catch (error) {
      this.log.warn(`cannot read the other gateways' usage history, so auth.usageHistory shows this gateway's alone; ${this.why(error)}`,
        errorFields(error));
      return [];
    }
    const read: ReadHistory[] = [];
    const damaged = new Set<string>();
    for (const [key, value] of Object.entries(all)) {
      if (key.startsWith(this.own)) continue;
      const history = decodeFleetHistory(value);
      if (history === undefined) {
        damaged.add(key);
        if (!this.damaged.has(key)) {
          this.log.warn(`the fleet ${this.keys.name} holds a damaged usage history key ${key}; it is left out of auth.usageHistory, ` +
            'and no gateway needs it to verify tokens: delete it (etcdctl del)', { cluster: this.keys.name, key });
        }
        continue;
      }
      read.push(history);
    }
    this.damaged = damaged;
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
