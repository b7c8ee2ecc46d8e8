// Usage across a fleet (listTokens' requests and lastUsedAt): each gateway counts the
// calls it lets through in its own core, and publishes its counts of the live tokens it
// has seen every USAGE_PUBLISH_MS, and once more at a clean stop, under
// `/<cluster-name>.usage/<id>`, an id it draws at start. The key is bound to no lease: a
// gateway that stops or dies leaves its last published counts, which keep counting (a
// kill -9 loses at most its last USAGE_PUBLISH_MS), and the fleet's clean-up (tidy.ts)
// drops the entries of tokens gone and the keys left empty. listTokens reads the other gateways' keys at once (one range read per call, none
// per request) and adds them to this gateway's own counts: the sum of requests, the
// latest lastUsedAt. The keys lie outside the fleet's state prefix, so that publishing
// them is no state change: no member republishes `applied`, no barrier waits, and
// go/fleet, which reads the state prefix, never sees them (docs/fleet-keys.md).
import { randomBytes } from 'node:crypto';
import type { Core } from '../core/core.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { Clock } from '../clock.js';
import { MAX_USAGE_REQUESTS, quotaCounts, readQuotaCounts, readUsageCounts, usageCounts } from '../service/ledger.js';
import type { InventoryEntry, QuotaCount, Usage, UsageCount } from '../service/ledger.js';
import type { EtcdConnection } from './etcd.js';
import { etcdRefusal } from './refusals.js';
import { deleteKeyCommand } from './keys.js';
import type { FleetKeys } from './keys.js';

/** How often a gateway publishes its counts: what the others' lag behind it by, at most (plus one put). */
export const USAGE_PUBLISH_MS = 5000;

/**
 * The counts a usage key holds; undefined for a value that is not
 * `{"tokens": [[serial, requests, lastUsedMs], ...], "quota": [[serial, window, calls], ...]}`
 * (`quota` absent: none, as a gateway from before quotas writes it).
 */
export function decodeFleetUsage(value: string): { tokens: UsageCount[]; quota: QuotaCount[] } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  const tokens = readUsageCounts((parsed as { tokens?: unknown } | null)?.tokens);
  const quota = readQuotaCounts((parsed as { quota?: unknown } | null)?.quota);
  return typeof tokens === 'string' || typeof quota === 'string' ? undefined : { tokens, quota };
}

/** The other gateways' quota counts of one token: the latest window any of them counted in, and their calls in it. */
interface QuotaSum {
  window: number;
  calls: number;
}

export class FleetUsage {
  /** What was last published, so that an idle gateway puts nothing (a gateway that counted nothing, not even a key). */
  private published = '{"tokens":[]}';
  /**
   * This gateway's usage key, by an id drawn at start rather than its lease: its counts
   * start at 0 at start, so a key of its own per start never double-counts, and no lease
   * renewal or rejoin moves them.
   */
  private readonly key: string;
  /** The id drawn at start: this gateway's usage history keys have it too (usage-history.ts). */
  readonly id = randomBytes(8).toString('hex');
  /** The other gateways' keys that held no usage counts at the last read: left out, each reported once. */
  damaged = new Set<string>();

  constructor(
    private readonly etcd: EtcdConnection,
    private readonly keys: FleetKeys,
    private readonly core: Core,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {
    this.key = keys.usage(this.id);
  }

  /** Why a call on the usage keys failed, for the warning: etcd's refusal of the user's role, or an outage. */
  private why(error: unknown): string {
    const { kind } = etcdRefusal((error as { cause?: unknown }).cause ?? error);
    if (kind === 'permission-denied') return `the etcd user's role needs readwrite on ${this.keys.usagePrefix}`;
    if (kind === 'unreachable')
      return "the fleet's etcd did not answer (an outage, or this gateway is cut off from it); the next round tries again";
    return `etcd refused this gateway (${kind}); the next round tries again`;
  }

  /** Publishes this gateway's counts of `live` tokens, when they changed. */
  async publish(live: readonly InventoryEntry[]): Promise<void> {
    const tokens = usageCounts(live, this.core);
    const quota = quotaCounts(live, this.core, this.clock());
    const value = JSON.stringify(quota.length === 0 ? { tokens } : { tokens, quota });
    if (value === this.published) return;
    try {
      await this.etcd.call((client) => client.put(this.key).value(value).exec());
      this.published = value;
    } catch (error) {
      // The next round tries again; meanwhile the others show this gateway's older counts.
      this.log.warn(`cannot publish this gateway's usage counts to the fleet; ${this.why(error)}`, errorFields(error));
    }
  }

  /**
   * The other gateways' published counts, those of stopped gateways included, summed by
   * serial (the latest last use); this gateway's own key left out. When they cannot be read, none: listTokens then
   * shows this gateway's own counts rather than fail, and the warning says why.
   */
  async others(): Promise<Map<number, Usage>> {
    return (await this.read("listTokens shows this gateway's alone"))?.usage ?? new Map();
  }

  /**
   * Gives the core the other gateways' quota counts of the `live` tokens with a quota, as
   * they last published them: each gateway then refuses a call once its own count, the
   * others' and the call's pass the quota. Unread (an outage), the core keeps the counts
   * it was last given, and the warning says why.
   */
  async refreshQuota(live: readonly InventoryEntry[]): Promise<void> {
    const quota = (await this.read("the quotas count this gateway's calls and the others' last read counts"))?.quota;
    if (quota === undefined) return;
    for (const e of live) {
      const sum = quota.get(e.serial);
      if (sum !== undefined) this.core.setQuota(e.serial, e.expiry, sum.window, sum.calls, false);
    }
  }

  /** The other gateways' usage and quota counts, or undefined (with a warning that ends with `meanwhile`) when etcd cannot be read. */
  private async read(meanwhile: string): Promise<{ usage: Map<number, Usage>; quota: Map<number, QuotaSum> } | undefined> {
    let all: Record<string, string>;
    try {
      all = await this.etcd.call((client) => client.getAll().prefix(this.keys.usagePrefix).strings());
    } catch (error) {
      this.log.warn(`cannot read the other gateways' usage counts, so ${meanwhile}; ${this.why(error)}`, errorFields(error));
      return undefined;
    }
    const merged = new Map<number, Usage>();
    const quota = new Map<number, QuotaSum>();
    const damaged = new Set<string>();
    for (const [key, value] of Object.entries(all)) {
      if (key === this.key) continue;
      const counted = decodeFleetUsage(value);
      if (counted === undefined) {
        damaged.add(key);
        if (!this.damaged.has(key)) {
          this.log.warn(
            `the fleet ${this.keys.name} holds a damaged usage key ${key} (it holds no usage counts); it is left out of ` +
              `listTokens, and no gateway needs it to verify tokens: delete it with ${deleteKeyCommand(key)}`,
            { cluster: this.keys.name, key },
          );
        }
        continue;
      }
      for (const [serial, requests, lastUsedMs] of counted.tokens) {
        const seen = merged.get(serial);
        merged.set(
          serial,
          seen === undefined
            ? { requests, lastUsedMs }
            : { requests: Math.min(seen.requests + requests, MAX_USAGE_REQUESTS), lastUsedMs: Math.max(seen.lastUsedMs, lastUsedMs) },
        );
      }
      // The calls of one window are summed; a count of an earlier window than another
      // gateway's has ended, and counts nothing.
      for (const [serial, window, calls] of counted.quota) {
        const seen = quota.get(serial);
        if (seen === undefined || window > seen.window) quota.set(serial, { window, calls });
        else if (window === seen.window) seen.calls = Math.min(seen.calls + calls, 2 ** 32 - 1);
      }
    }
    this.damaged = damaged;
    return { usage: merged, quota };
  }
}
