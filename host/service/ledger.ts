// Where the token service keeps what outlives a call: the password, the grants, the
// serials, the revocations (the ledger), and the issued tokens (the inventory). The
// service owns these interfaces; the data folder (state/) and the fleet (cluster/)
// implement them, and the composition root (host/owner.ts) hands the service one of
// each, so that the service never asks which backend it has.
//
// Every change resolves only once it holds where the backend keeps it (on disk; in etcd
// and on every live gateway) and the core holds it too; a change that fails changes
// nothing. A backend that cannot be reached throws FleetError (errors.ts).
import type { Claims } from '../core/abi.js';
import type { PasswordRecord } from '../password/hash.js';

export interface Ledger {
  /** The current password's record. */
  readonly password: PasswordRecord;
  /**
   * A password check about to run, counted against an allowance shared beyond this
   * node's own throttle (a fleet's, whatever the gateway the guesser uses). Resolves to
   * the whole seconds to wait when the allowance is spent (nothing counted), else to the
   * check: `succeeded()` or `abandoned()` takes it back; a failure leaves it counted.
   */
  beginPasswordCheck(nowMs: number): Promise<number | SharedCheck>;
  /**
   * Issues a token for the endpoint list and method patterns whose grant id the core
   * gives (or would give) as `grant`: the grant and the serial are recorded before the
   * core holds the token, so a restart or another gateway knows them. Throws IssueError
   * (core.ts) when no token can be made.
   */
  issue(grant: GrantRequest, now: number, lifetime: number): Promise<{ token: string; claims: Claims }>;
  /** Records a revocation (kept until `expiry`), then the core refuses the token. */
  revoke(serial: number, expiry: number): Promise<void>;
  /** Whether `serial` is revoked, and not yet expired. */
  isRevoked(serial: number): boolean;
  /** The entry list of grant `id` (endpoints, a scope's methods after an empty entry, then limits after another). */
  grantList(id: number): readonly string[] | undefined;
  /**
   * Replaces the password, if it is still `checked`, and starts the next generation, in
   * which every earlier token stops working. Returns the new generation.
   */
  changePassword(checked: PasswordRecord, record: PasswordRecord): Promise<number>;
}

/** What a token is issued for: the id the core gives (or would give) the list, and the list. */
export interface GrantRequest {
  readonly id: number;
  readonly endpoints: readonly string[];
  readonly methods: readonly string[] | undefined;
  /** The limit entries (limitEntries in token-params.ts); undefined for a token without limits. */
  readonly limits?: readonly string[];
}

/** A password check counted against a shared allowance (Ledger.beginPasswordCheck). */
export interface SharedCheck {
  succeeded(): void;
  abandoned(): void;
}

/** One issued token, as the inventory keeps it: never the token itself. */
export interface InventoryEntry {
  readonly serial: number;
  readonly generation: number;
  /** The grant id: its entries are the ledger's grant list of that id. */
  readonly grant: number;
  /** Unix seconds. */
  readonly issuedAt: number;
  /** Unix seconds. */
  readonly expiry: number;
  readonly label: string | undefined;
  /** For the new token of a rotation (auth.rotateToken): the token it replaced, and when that one ends. */
  readonly rotation?: RotationOf;
}

/** What a rotation's new token keeps of the token it replaced. */
export interface RotationOf {
  /** The old token's serial. */
  readonly from: number;
  /** Unix seconds at which the old token ends, as if revoked: the rotation's time plus its overlap. */
  readonly endsAt: number;
  /** Unix seconds: the old token's expiry, until which its end is kept as a revocation. */
  readonly fromExpiry: number;
  /** The old token's usage when it was rotated, carried over to the new one. */
  readonly requests: number;
  readonly lastUsedMs: number;
}

/** A token's usage: the calls let through, and the last one's time (ms since the Unix epoch). */
export interface Usage {
  readonly requests: number;
  readonly lastUsedMs: number;
}

/** One token's usage as both backends keep it: the data folder's usage file, and a fleet gateway's usage key. */
export type UsageCount = [serial: number, requests: number, lastUsedMs: number];

/** The usage `counter` (the core) has of each of `tokens`: those it counted. */
export function usageCounts(
  tokens: Iterable<{ readonly serial: number }>,
  counter: { usage(serial: number): Usage | undefined },
): UsageCount[] {
  const counts: UsageCount[] = [];
  for (const { serial } of tokens) {
    const usage = counter.usage(serial);
    if (usage !== undefined) counts.push([serial, usage.requests, usage.lastUsedMs]);
  }
  return counts;
}

/** `tokens` read back as usage counts, or why they are not: the first entry that is not one. */
export function readUsageCounts(tokens: unknown): UsageCount[] | string {
  if (!Array.isArray(tokens)) return 'its tokens are not a list';
  const seen = new Set<number>();
  for (const e of tokens as unknown[]) {
    if (!Array.isArray(e) || e.length !== 3 || !e.every((v) => Number.isSafeInteger(v) && (v as number) >= 0)) {
      return `entry ${JSON.stringify(e)} is not [serial, requests, lastUsedMs]`;
    }
    const [serial, requests, lastUsedMs] = e as UsageCount;
    if (requests > MAX_USAGE_REQUESTS) return `entry ${JSON.stringify(e)} counts more than ${MAX_USAGE_REQUESTS} requests`;
    if (lastUsedMs > MAX_LAST_USED_MS)
      return `entry ${JSON.stringify(e)} has a lastUsedMs after ${new Date(MAX_LAST_USED_MS).toISOString()}`;
    if (seen.has(serial)) return `serial ${serial} is listed twice`;
    seen.add(serial);
  }
  return tokens as UsageCount[];
}

/** One token's quota count as both backends keep it: the calls this gateway let through in the quota's window (as the core numbers it). */
export type QuotaCount = [serial: number, window: number, calls: number];

/** The quota count `core` has, at `nowMs`, of each of `tokens` whose grant has a quota and that it has counted in the current window. */
export function quotaCounts(
  tokens: Iterable<{ readonly serial: number; readonly grant: number }>,
  core: { quota(serial: number, grant: number, nowMs: number): { here: number; window: number } | undefined },
  nowMs: number,
): QuotaCount[] {
  const counts: QuotaCount[] = [];
  for (const { serial, grant } of tokens) {
    const quota = core.quota(serial, grant, nowMs);
    if (quota !== undefined && quota.here > 0) counts.push([serial, quota.window, quota.here]);
  }
  return counts;
}

/** `list` read back as quota counts (absent: none), or why it is not: the first entry that is not one. */
export function readQuotaCounts(list: unknown): QuotaCount[] | string {
  if (list === undefined) return [];
  if (!Array.isArray(list)) return 'its quota counts are not a list';
  const seen = new Set<number>();
  for (const e of list as unknown[]) {
    if (!Array.isArray(e) || e.length !== 3 || !e.every((v) => Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) < 2 ** 32)) {
      return `quota entry ${JSON.stringify(e)} is not [serial, window, calls]`;
    }
    if (seen.has(e[0] as number)) return `serial ${e[0] as number} has two quota entries`;
    seen.add(e[0] as number);
  }
  return list as QuotaCount[];
}

/** The most requests a usage entry may count (a file's, or a fleet usage key's); a sum of several is capped at it. */
export const MAX_USAGE_REQUESTS = 1e15;
/** The latest lastUsedMs a usage entry may hold: 2200-01-01T00:00:00Z (its nanoseconds fit the core's 64 bits). */
export const MAX_LAST_USED_MS = Date.UTC(2200, 0, 1);

/** What the inventory may be asked, by the token service. */
export interface Inventory {
  /** Entries listed now (live ones: not expired, of the current generation), in issue order. */
  list(): InventoryEntry[];
  /** The live entry of `serial`, if any. */
  get(serial: number): InventoryEntry | undefined;
  /** The token that replaced `serial` by a rotation, and when `serial` ends (Unix seconds), while the new token is held. */
  successor(serial: number): { readonly to: number; readonly endsAt: number } | undefined;
  /** Whether fewer than `max` entries are live or being appended: the limit's test. */
  hasRoom(max: number): boolean;
  /**
   * Resolves once `entry` is durable; it is listed from then on, and the end a rotation's
   * entry carries is held by every member (rotation-ends.ts). Rejects when the write fails,
   * and then nothing changed.
   */
  append(entry: InventoryEntry): Promise<void>;
  /** Writes what is waiting and closes. */
  close(): Promise<void>;
  /** A fleet's: the usage the other gateways published, by serial, to add to this one's core's counts. */
  othersUsage?(): Promise<ReadonlyMap<number, Usage>>;
  /** A fleet's: the hourly counts the other gateways published (usage-history.ts), to add to this one's: node-wide, or of `serial`. */
  othersHistory?(serial?: number): Promise<readonly ReadHistory[]>;
}

/** A usage history read back (usage-history.ts): each series as hour (floor(ms / 3,600,000)) -> count. */
export interface ReadHistory {
  /** Every token's requests, summed. */
  readonly requests: ReadonlyMap<number, number>;
  /** Refusals, by reason. */
  readonly refusals: ReadonlyMap<string, ReadonlyMap<number, number>>;
  /** Each token's requests, by serial. */
  readonly tokens: ReadonlyMap<number, ReadonlyMap<number, number>>;
}

/** A backend, opened: its ledger and inventory, and how to release both (the data folder's lock; the fleet's lease). */
export interface Backend {
  readonly ledger: Ledger;
  readonly inventory: Inventory;
  close(): Promise<void>;
}
