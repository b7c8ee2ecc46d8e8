// Addresses as text and as bytes, and the ranges of them an operator names: parsed once,
// at start (--trusted-proxies, by the options' parsers) and matched per request (the HTTP
// layer). Addresses leave this module in one canonical text form, so that the throttle
// and the logs see one spelling per client: dotted IPv4 (also for an IPv4 client of a
// dual-stack listener, which uWS reports as the IPv4-mapped `0000:…:ffff:7f00:0001`),
// and RFC 5952 IPv6 (`2001:db8::1`).
import { isIPv4, isIPv6 } from 'node:net';

/** An address or a range of them: 16 bytes (IPv4 as IPv4-mapped IPv6), and how many leading bits count. */
interface Range {
  readonly bytes: Uint8Array;
  readonly bits: number;
  readonly v4: boolean;
}

const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/** The proxies whose forwarding headers are believed. */
export interface TrustedProxies {
  /** Whether `address` (canonical, as this module writes it) is a trusted proxy. */
  has(address: string): boolean;
  /** The addresses and ranges as given, to make the same matcher on another thread. */
  readonly entries: readonly string[];
}

/**
 * Parses addresses and CIDR ranges (`192.0.2.7`, `10.0.0.0/8`, `2001:db8::/32`) once, at
 * start, into a matcher that compares a few byte arrays per call. An IPv4 entry (also one
 * written inside ::ffff:0:0/96) matches IPv4 peers (also on a dual-stack listener), any
 * other IPv6 entry IPv6 peers alone: the rule of a token's allowedClients in the core
 * (clientIn, assembly/limits.ts), both pinned by test/vectors/client-ranges.js. Throws
 * RangeError naming the first entry that is neither.
 */
export function trustedProxies(entries: readonly string[]): TrustedProxies {
  if (entries.length === 0) return NO_TRUSTED_PROXIES;
  const ranges: Range[] = [];
  for (const entry of entries) {
    const range = typeof entry === 'string' ? parseRange(entry.trim()) : null;
    if (range === null) {
      throw new RangeError(`${JSON.stringify(entry)} is not an address or a CIDR range (such as 192.0.2.7, 10.0.0.0/8 or 2001:db8::/32)`);
    }
    ranges.push(range);
  }
  return {
    entries: Object.freeze([...entries]),
    has(address) {
      const bytes = parseAddress(address, SCRATCH);
      if (bytes === null) return false;
      const v4 = isMapped(bytes);
      for (const range of ranges) {
        if (range.v4 === v4 && prefixEqual(range.bytes, bytes, range.bits)) return true;
      }
      return false;
    },
  };
}

/** Believes nobody: forwarding headers from clients are never taken. */
export const NO_TRUSTED_PROXIES: TrustedProxies = Object.freeze({ has: () => false, entries: Object.freeze([]) });

// Where addresses are parsed to be matched, one at a time: matching allocates nothing for them.
const SCRATCH = new Uint8Array(16);

function parseRange(text: string): Range | null {
  const slash = text.indexOf('/');
  const bytes = parseAddress(slash < 0 ? text : text.slice(0, slash), new Uint8Array(16));
  if (bytes === null) return null;
  const v4 = isMapped(bytes);
  let bits = 128;
  if (slash >= 0) {
    const prefix = text.slice(slash + 1);
    // The prefix is written for the family the address was written in: /8 of 10.0.0.0 is /104 of ::ffff:10.0.0.0.
    const max = isIPv4(text.slice(0, slash)) ? 32 : 128;
    if (!/^(?:0|[1-9]\d{0,2})$/.test(prefix) || Number(prefix) > max) return null;
    bits = Number(prefix) + 128 - max;
    // ::ffff:0:0/90 reaches beyond the IPv4-mapped block: it is an IPv6 range.
    if (v4 && bits < 96) return { bytes, bits, v4: false };
  }
  return { bytes, bits, v4 };
}

/** Whether the first `bits` bits of `a` and `b` agree. */
function prefixEqual(a: Uint8Array, b: Uint8Array, bits: number): boolean {
  const whole = bits >> 3;
  for (let i = 0; i < whole; i++) if (a[i] !== b[i]) return false;
  const rest = bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (a[whole] & mask) === (b[whole] & mask);
}

function isMapped(bytes: Uint8Array): boolean {
  for (let i = 0; i < 12; i++) if (bytes[i] !== MAPPED_PREFIX[i]) return false;
  return true;
}

/**
 * The 16 bytes of a canonical address (as clientAddress writes it), IPv4 as IPv4-mapped,
 * into `out`, for the core's client ranges; all zero when it is not an address.
 */
export function addressBytes(address: string, out: Uint8Array): Uint8Array {
  if (parseAddress(address, out) === null) out.fill(0);
  return out;
}

/**
 * Parses a textual IPv4 or IPv6 address (no zone, no brackets) into `out` as 16 bytes,
 * IPv4 as IPv4-mapped; null when it is not one.
 */
export function parseAddress(text: string, out: Uint8Array): Uint8Array | null {
  if (isIPv4(text)) {
    out.set(MAPPED_PREFIX);
    writeIPv4(text, out, 12);
    return out;
  }
  if (!isIPv6(text) || text.includes('%')) return null;
  let groups = text;
  let end = 16;
  // A trailing dotted IPv4 (::ffff:192.0.2.7) is the last four bytes; the groups before it fill twelve.
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    writeIPv4(text.slice(lastColon + 1), out, 12);
    groups = text.endsWith('::', lastColon + 1) ? text.slice(0, lastColon + 1) : text.slice(0, lastColon);
    end = 12;
  }
  out.fill(0, 0, end);
  const gap = groups.indexOf('::');
  writeGroups(gap < 0 ? groups : groups.slice(0, gap), out, 0, false);
  if (gap >= 0) writeGroups(groups.slice(gap + 2), out, end, true);
  return out;
}

/** Writes colon-separated hex groups into `out` from `at` on, or (fromEnd) so that they end at `at`. */
function writeGroups(text: string, out: Uint8Array, at: number, fromEnd: boolean): void {
  if (text === '') return;
  const parts = text.split(':');
  let i = fromEnd ? at - parts.length * 2 : at;
  for (const part of parts) {
    const value = parseInt(part, 16);
    out[i++] = value >> 8;
    out[i++] = value & 0xff;
  }
}

/** Writes a dotted IPv4 address (already validated) into `out` at `at`. */
function writeIPv4(text: string, out: Uint8Array, at: number): void {
  let value = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2e) {
      out[at++] = value;
      value = 0;
    } else {
      value = value * 10 + c - 0x30;
    }
  }
  out[at] = value;
}

/**
 * The canonical text of a binary address: 4 bytes, or 16 of which an IPv4-mapped one is
 * written as its IPv4 address; IPv6 as RFC 5952 has it (lower case, no leading zeros, the
 * longest run of two or more zero groups, the first of equals, as `::`).
 */
export function formatAddress(bytes: Uint8Array): string {
  if (bytes.length === 4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  if (isMapped(bytes)) return `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (bytes[2 * i] !== 0 || bytes[2 * i + 1] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && bytes[2 * j] === 0 && bytes[2 * j + 1] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  let text = '';
  for (let i = 0; i < 8; i++) {
    if (i === bestStart) {
      text += '::';
      i += bestLength - 1;
      continue;
    }
    if (text !== '' && !text.endsWith(':')) text += ':';
    text += ((bytes[2 * i] << 8) | bytes[2 * i + 1]).toString(16);
  }
  return text;
}
