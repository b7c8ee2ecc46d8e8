// The params auth.newToken, auth.listTokens and auth.revokeToken took on beyond the
// original's (label, expiresIn, id), and the forms a token's inventory entry is shown in.
import { isIPv4, isIPv6 } from 'node:net';
import { NEVER, NEVER_SECONDS, parseDuration } from '../duration.js';
import { invalidParams } from '../rpc/jsonrpc.js';
import type { Params } from '../rpc/jsonrpc.js';

export const MAX_LABEL_LENGTH = 128;

/**
 * What a label may not hold: controls (C0, DEL, C1), line and paragraph separators, the
 * bidirectional controls that reorder what a table shows (Trojan Source), and lone
 * surrogates, which have no UTF-8 form.
 */
const NOT_IN_LABEL = /[\p{Cc}\p{Zl}\p{Zp}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|\p{Cs}/u;
const ONLY_SPACE = /^\p{White_Space}*$/u;

const LABEL_RULE =
  `a string of 1 to ${MAX_LABEL_LENGTH} characters (Unicode code points), not only white space, ` +
  'without control characters, line or paragraph separators, bidirectional controls or lone surrogates';

/** The optional `label`: for people, shown by listTokens and `token list`. */
export function labelParam(params: Params): string | undefined {
  const value = params.label;
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || NOT_IN_LABEL.test(value) || ONLY_SPACE.test(value)) throw invalidParams('label', LABEL_RULE);
  let length = 0;
  for (const _ of value) if (++length > MAX_LABEL_LENGTH) throw invalidParams('label', LABEL_RULE);
  return value;
}

/**
 * A lifetime param (`expiresIn`, `overlap`), in seconds: a duration as the command line
 * writes it ("90s", "15m", "1h30m") or a whole number of seconds, from `min` to
 * `ceiling`. "never" is NEVER_SECONDS, and taken only when the ceiling is never. Undefined
 * when left out.
 */
export function durationParam(params: Params, name: string, min: number, ceiling: number, why: string): number | undefined {
  const value = params[name];
  if (value === undefined) return undefined;
  if (value === NEVER && ceiling === NEVER_SECONDS) return NEVER_SECONDS;
  const seconds = typeof value === 'number' ? value : typeof value === 'string' ? parseDuration(value) : null;
  if (seconds === null || !Number.isSafeInteger(seconds) || seconds < min || seconds > ceiling || seconds === NEVER_SECONDS) {
    const range =
      ceiling === NEVER_SECONDS
        ? `of at least ${showDuration(min)}, or "${NEVER}" (${why} is never)`
        : `from ${showDuration(min)} to ${ceiling}s (${showDuration(ceiling)}, ${why})` +
          (value === NEVER ? `; "${NEVER}" is taken only when the node's --max-token-lifetime is never` : '');
    throw invalidParams(name, `a duration such as "90s", "15m" or "1h30m", or a whole number of seconds, ${range}`);
  }
  return seconds;
}

/** The optional `expiresIn`: from 1 s to the node's ceiling, --max-token-lifetime. */
export function lifetimeParam(params: Params, ceiling: number): number | undefined {
  return durationParam(params, 'expiresIn', 1, ceiling, "the node's --max-token-lifetime");
}

/** "12h", "1h30m", "90s": a whole number of seconds as a duration. */
export function showDuration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return `${h > 0 ? `${h}h` : ''}${m > 0 ? `${m}m` : ''}${s > 0 || seconds === 0 ? `${s}s` : ''}`;
}

/**
 * A token's id: "t" and its serial in decimal. Serials are never reused in a data
 * folder's life (a restart skips to the next reserved block), so neither are ids; an id
 * is far from a token's 76 characters, so it cannot pass for one.
 */
export function tokenId(serial: number): string {
  return `t${serial}`;
}

const TOKEN_ID = /^t(0|[1-9][0-9]{0,15})$/;

/** The serial an id names, or undefined when it is not an id's form. */
export function parseTokenId(id: string): number | undefined {
  const match = TOKEN_ID.exec(id);
  if (match === null) return undefined;
  const serial = Number(match[1]);
  return Number.isSafeInteger(serial) ? serial : undefined;
}

/** Unix seconds as RFC 3339, UTC, whole seconds: "2030-01-01T00:00:00Z". */
export function rfc3339(seconds: number): string {
  return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** A rate of 1 to MAX_RATE calls per second, minute or hour; a burst of 1 to MAX_BURST (assembly/limits.ts). */
export const MAX_RATE = 1_000_000;
export const MAX_BURST = 1_000_000;
/** A quota of 1 to MAX_QUOTA calls per calendar day or month, UTC (assembly/limits.ts). */
export const MAX_QUOTA = 1_000_000_000;
/** A quota's windows, as the core numbers them (assembly/limits.ts: QUOTA_DAY, QUOTA_MONTH). */
export type QuotaPeriod = 'day' | 'month';
const QUOTA_RULE = `{"requests": N, "per": "day" or "month"}: N calls (1 to ${MAX_QUOTA}) per calendar day or month, UTC`;
/** allowedClients holds 1 to MAX_ALLOWED_CLIENTS addresses or ranges (the core's MAX_CLIENTS). */
export const MAX_ALLOWED_CLIENTS = 64;

const RATE = /^([1-9][0-9]{0,6})\/([smh])$/;
const SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600 };
const RATE_RULE = `"N/s", "N/m" or "N/h", N calls (1 to ${MAX_RATE}) per second, minute or hour`;
const CLIENTS_RULE =
  `an array of 1 to ${MAX_ALLOWED_CLIENTS} IPv4 or IPv6 addresses or CIDR ranges (such as 192.0.2.7, ` + '10.0.0.0/8 or 2001:db8::/32)';
const MAPPED = '00000000000000000000ffff';

/**
 * The optional `rateLimit`, `burst`, `quota` and `allowedClients`, as the grant's limit
 * entries the core reads (assembly/limits.ts): `rate N/U`, `burst B` (the rate per second
 * rounded up, at least 1, when left out), `quota N/day` or `quota N/month`, then one
 * `client HEX/PREFIX` per range, IPv4 as IPv4-mapped, sorted and without duplicates, so
 * that equal limits make one grant. Undefined when none is given.
 */
export function limitEntries(params: Params): string[] | undefined {
  const { rateLimit, burst, quota, allowedClients } = params;
  if (rateLimit === undefined && burst === undefined && quota === undefined && allowedClients === undefined) return undefined;
  const entries: string[] = [];
  if (rateLimit !== undefined) {
    const match = typeof rateLimit === 'string' ? RATE.exec(rateLimit) : null;
    if (match === null || Number(match[1]) > MAX_RATE) throw invalidParams('rateLimit', RATE_RULE);
    const perSecond = Number(match[1]) / SECONDS[match[2]];
    if (burst !== undefined && (typeof burst !== 'number' || !Number.isInteger(burst) || burst < 1 || burst > MAX_BURST)) {
      throw invalidParams('burst', `an integer from 1 to ${MAX_BURST}: the calls the token may make at once`);
    }
    entries.push(`rate ${match[1]}/${match[2]}`, `burst ${burst ?? Math.max(1, Math.ceil(perSecond))}`);
  } else if (burst !== undefined) {
    throw invalidParams('burst', "given only with rateLimit: it is the size of the rate's bucket");
  }
  if (quota !== undefined) entries.push(quotaEntry(quota));
  if (allowedClients !== undefined) {
    if (!Array.isArray(allowedClients) || allowedClients.length === 0 || allowedClients.length > MAX_ALLOWED_CLIENTS) {
      throw invalidParams('allowedClients', CLIENTS_RULE);
    }
    const ranges = new Set<string>();
    allowedClients.forEach((client: unknown, i) => {
      const range = typeof client === 'string' ? clientRange(client) : null;
      if (range === null)
        throw invalidParams(
          `allowedClients[${i}]`,
          `an IPv4 or IPv6 address or CIDR range (such as 192.0.2.7, 10.0.0.0/8 or 2001:db8::/32) with no bits set past its prefix`,
        );
      ranges.add(`client ${range}`);
    });
    entries.push(...[...ranges].sort());
  }
  return entries;
}

/** `quota` as its limit entry, `quota N/day` or `quota N/month`; an invalid one is an error naming the field at fault. */
function quotaEntry(quota: unknown): string {
  if (quota === null || typeof quota !== 'object' || Array.isArray(quota)) throw invalidParams('quota', QUOTA_RULE);
  for (const key of Object.keys(quota)) {
    if (key !== 'requests' && key !== 'per') throw invalidParams(`quota.${key}`, `not a field of a quota, which is ${QUOTA_RULE}`);
  }
  const { requests, per } = quota as { requests?: unknown; per?: unknown };
  if (typeof requests !== 'number' || !Number.isInteger(requests) || requests < 1 || requests > MAX_QUOTA) {
    throw invalidParams('quota.requests', `an integer from 1 to ${MAX_QUOTA}: the calls the token may make per day or month`);
  }
  if (per !== 'day' && per !== 'month')
    throw invalidParams('quota.per', '"day" or "month": the calendar window, UTC, at whose end the quota resets');
  return `quota ${requests}/${per}`;
}

/** A token's quota, as auth.listTokens shows it. */
export interface ShownQuota {
  readonly requests: number;
  readonly per: QuotaPeriod;
}

/** The limits of a token, as auth.listTokens shows them: null for each it was issued without. */
export interface ShownLimits {
  readonly rateLimit: string | null;
  readonly burst: number | null;
  readonly quota: ShownQuota | null;
  readonly allowedClients: string[] | null;
}

/** A token's quota as auth.listTokens shows it: the quota, the calls counted in this window, and when the window resets. */
export interface ListedQuota extends ShownQuota {
  readonly used: number;
  /** RFC 3339, UTC: the end of the current calendar day or month. */
  readonly resetsAt: string;
}

/** Unix seconds at which the window of a quota `per` day or month that holds `now` (Unix seconds) ends: the next UTC midnight, or first of a month. */
export function quotaResetsAt(per: QuotaPeriod, now: number): number {
  const at = new Date(now * 1000);
  const end =
    per === 'day'
      ? Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1)
      : Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1);
  return end / 1000;
}

/** The quota among a grant's limit entries; null when it has none. */
export function grantQuota(entries: readonly string[] | undefined): ShownQuota | null {
  const entry = entries?.find((e) => e.startsWith('quota '));
  if (entry === undefined) return null;
  const [requests, per] = entry.slice(6).split('/');
  return { requests: Number(requests), per: per as QuotaPeriod };
}

/** The limit entries of a grant (limitEntries) as listTokens shows them; every field null without. */
export function shownLimits(entries: readonly string[] | undefined): ShownLimits {
  let rateLimit: string | null = null;
  let burst: number | null = null;
  const clients: string[] = [];
  for (const entry of entries ?? []) {
    if (entry.startsWith('rate ')) rateLimit = entry.slice(5);
    else if (entry.startsWith('burst ')) burst = Number(entry.slice(6));
    else if (entry.startsWith('client ')) clients.push(showRange(entry.slice(7)));
  }
  return { rateLimit, burst, quota: grantQuota(entries), allowedClients: clients.length === 0 ? null : clients };
}

/** `HEX/PREFIX` (32 lowercase hex digits, IPv4 as IPv4-mapped) for an address or CIDR range; null when it is neither, or has bits set past its prefix. */
export function clientRange(text: string): string | null {
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const bytes = addressBytes(address);
  if (bytes === null) return null;
  const v4 = address.includes('.') && !address.includes(':');
  const max = v4 ? 32 : 128;
  let prefix = max;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p) || Number(p) > max) return null;
    prefix = Number(p);
  }
  const bits = v4 ? prefix + 96 : prefix;
  for (let i = 0; i < 16; i++) {
    const kept = Math.max(0, Math.min(8, bits - i * 8));
    if ((bytes[i] & (0xff >> kept)) !== 0) return null;
  }
  return `${Buffer.from(bytes).toString('hex')}/${bits}`;
}

/** A range of clientRange's form as a person writes it: 10.0.0.0/8, 192.0.2.7, 2001:db8::/32. */
function showRange(range: string): string {
  const [hex, p] = range.split('/');
  const bits = Number(p);
  if (hex.startsWith(MAPPED) && bits >= 96) {
    const v4 = Buffer.from(hex.slice(24), 'hex').join('.');
    return bits === 128 ? v4 : `${v4}/${bits - 96}`;
  }
  const groups = (hex.match(/.{4}/g) ?? []).map((g) => parseInt(g, 16).toString(16));
  // RFC 5952: the longest run of two or more zero groups (the first of equals) becomes "::".
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > bestLength) [best, bestLength] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const text = best < 0 ? groups.join(':') : `${groups.slice(0, best).join(':')}::${groups.slice(best + bestLength).join(':')}`;
  return bits === 128 ? text : `${text}/${bits}`;
}

/** The 16 bytes of an IPv4 (as IPv4-mapped) or IPv6 address in text; null when it is neither. */
function addressBytes(text: string): Uint8Array | null {
  if (isIPv4(text)) return Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...text.split('.').map(Number)]);
  // A zone (fe80::1%eth0) names an interface of this host, no client's address.
  if (!isIPv6(text) || text.includes('%')) return null;
  let body = text;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(body);
  if (dotted !== null) {
    const [a, b, c, d] = dotted[1].split('.').map(Number);
    body = `${body.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = body.includes('::') ? body.split('::') : [body, undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  if (groups.length !== 8) return null;
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    const v = parseInt(g, 16);
    bytes[2 * i] = v >> 8;
    bytes[2 * i + 1] = v & 0xff;
  });
  return bytes;
}
