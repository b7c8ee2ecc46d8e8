// The params auth.newToken, auth.listTokens and auth.revokeToken took on beyond the
// original's (label, expiresIn, id), and the forms a token's inventory entry is shown in.
import { parseDuration } from '../duration.js';
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

const LABEL_RULE = `a string of 1 to ${MAX_LABEL_LENGTH} characters (Unicode code points), not only white space, ` +
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
 * The optional `expiresIn`, in seconds: a duration as the command line writes it ("90s",
 * "15m", "1h30m") or a whole number of seconds, from 1 s to `ceiling` (the configured
 * lifetime, which is also the default).
 */
export function lifetimeParam(params: Params, ceiling: number): number | undefined {
  const value = params.expiresIn;
  if (value === undefined) return undefined;
  const seconds = typeof value === 'number' ? value : typeof value === 'string' ? parseDuration(value) : null;
  if (seconds === null || !Number.isSafeInteger(seconds) || seconds < 1 || seconds > ceiling) {
    throw invalidParams('expiresIn', `a duration such as "90s", "15m" or "1h30m", or a whole number of seconds, from 1s to ` +
      `${ceiling}s (${showDuration(ceiling)}, the node's token lifetime)`);
  }
  return seconds;
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
