// A token as auth.listTokens shows it: its grant's entries split into endpoints, methods
// and limits (its quota with the calls counted in the window), and its usage: what this
// gateway's core counted, what the other gateways of a fleet counted, and for a rotation's
// new token what the old one had counted. Never the token itself.
import type { Core } from '../core/core.js';
import { splitGrantEntries } from '../core/grants.js';
import { MAX_USAGE_REQUESTS } from './ledger.js';
import type { InventoryEntry, Usage } from './ledger.js';
import { quotaResetsAt, rfc3339, shownLimits, tokenId } from './token-params.js';
import type { ListedQuota } from './token-params.js';

/** One token as auth.listTokens shows it: never the token itself. */
export interface ListedToken {
  readonly id: string;
  /** null when the token was issued without one. */
  readonly label: string | null;
  readonly endpoints: string[];
  /** The JSON-RPC method patterns it is limited to; null for every method. */
  readonly methods: string[] | null;
  /** "N/s", "N/m" or "N/h"; null without a rate. */
  readonly rateLimit: string | null;
  /** The bucket's size; null without a rate. */
  readonly burst: number | null;
  /** The calls it may make per calendar day or month (UTC), those counted in the current one, and when it resets; null without a quota. */
  readonly quota: ListedQuota | null;
  /** The addresses and ranges it works from, in canonical form and order; null from anywhere. */
  readonly allowedClients: string[] | null;
  /** The last call the gate let through, RFC 3339 (UTC, whole seconds); null when none was counted. */
  readonly lastUsedAt: string | null;
  /** Calls the gate let through since issue (docs/guides/limits.md, Usage, says what may be lost). */
  readonly requests: number;
  /** RFC 3339, UTC, whole seconds. */
  readonly issuedAt: string;
  readonly expiresAt: string;
  /** Revoked, or rotated and past its overlap. */
  readonly revoked: boolean;
  /** The id of the token this one replaced by a rotation; null when it was issued by auth.newToken. */
  readonly rotatedFrom: string | null;
  /** The id of the token that replaced this one by a rotation; null when none did. */
  readonly rotatedTo: string | null;
}

/**
 * An entry as listTokens shows it, its grant's stored entries split into endpoints,
 * methods and limits, with the usage the core counted for it, and in a fleet what the
 * other gateways counted (`others`): the calls summed, the latest last use.
 */
export function listed(
  e: InventoryEntry,
  entries: readonly string[],
  revoked: boolean,
  core: Core,
  others: Usage | undefined,
  rotatedTo: number | undefined,
  now: number,
): ListedToken {
  const { endpoints, methods, limits } = splitGrantEntries(entries);
  const usage = usageOf(e, core, others);
  const shown = shownLimits(limits);
  let quota: ListedQuota | null = null;
  if (shown.quota !== null) {
    const counted = core.quota(e.serial, e.grant, now * 1000);
    quota = {
      ...shown.quota,
      used: counted === undefined ? 0 : counted.here + counted.others,
      resetsAt: rfc3339(quotaResetsAt(shown.quota.per, now)),
    };
  }
  return {
    id: tokenId(e.serial),
    label: e.label ?? null,
    endpoints,
    methods: methods ?? null,
    ...shown,
    quota,
    lastUsedAt: usage.lastUsedMs === 0 && usage.requests === 0 ? null : rfc3339(Math.floor(usage.lastUsedMs / 1000)),
    requests: usage.requests,
    issuedAt: rfc3339(e.issuedAt),
    expiresAt: rfc3339(e.expiry),
    revoked,
    rotatedFrom: e.rotation === undefined ? null : tokenId(e.rotation.from),
    rotatedTo: rotatedTo === undefined ? null : tokenId(rotatedTo),
  };
}

/**
 * A token's usage: what the core counted for it, what the other gateways of a fleet
 * counted (`others`), and for a rotation's new token what the old one had counted when
 * it was rotated. The calls summed (capped as the usage entries are), the latest last use.
 */
export function usageOf(e: InventoryEntry, core: Core, others: Usage | undefined): Usage {
  let requests = 0;
  let lastUsedMs = 0;
  const carried = e.rotation === undefined ? undefined : { requests: e.rotation.requests, lastUsedMs: e.rotation.lastUsedMs };
  for (const u of [core.usage(e.serial), others, carried]) {
    if (u === undefined) continue;
    requests += u.requests;
    lastUsedMs = Math.max(lastUsedMs, u.lastUsedMs);
  }
  return { requests: Math.min(requests, MAX_USAGE_REQUESTS), lastUsedMs };
}
