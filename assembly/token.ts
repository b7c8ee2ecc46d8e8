// Tokens: issue, check, revoke.
//
// A token is 57 bytes in unpadded base64url (76 characters):
//
//   0      version (1)
//   1..5   password generation, big-endian u32
//   5..13  serial, big-endian u64
//   13..21 expiry, Unix seconds, big-endian u64
//   21..25 grant id, big-endian u32
//   25..57 HMAC-SHA256 over bytes 0..25 under the node's token key
//
// The tag covers every other byte, so no byte can change undetected; 76 characters from
// the base64url alphabet are the only accepted spelling, so there is exactly one text per
// token (no padding, no trailing bits).
import { BLOCK, DIGEST, compress, digestOut, equalConstantTime } from './sha256';
import { state, KEY_INNER, KEY_OUTER, RESULT_BUF } from './layout';
import { Outcome } from './outcome';
import { grantLen, grantPtr } from './grants';
import { canIssue, isRevoked, markRevoked, sweep, takeSerial } from './revocations';
import { grants } from './paths';

export const VERSION: u8 = 1;
export const PAYLOAD: usize = 25;
export const RAW_LEN: usize = PAYLOAD + DIGEST;
export const TEXT_LEN: usize = RAW_LEN / 3 * 4;

export const ISSUE_UNKNOWN_GRANT: i32 = -1;
export const ISSUE_WINDOW_FULL: i32 = -2;
export const ISSUE_BAD_TIME: i32 = -3;
export const ISSUE_NO_KEY: i32 = -4;

const RAW: usize = memory.data(64, 16);
const TAG: usize = memory.data(32, 16);
const HASH: usize = memory.data(32, 16);
// The second block of each HMAC pass: message, then padding and length that never change
// (the key block came first, so the inner length is 64 + 25 bytes, the outer 64 + 32).
const INNER_BLOCK: usize = memory.data(64, 16);
const OUTER_BLOCK: usize = memory.data(64, 16);
const ENCODE: usize = memory.data(64);
const DECODE: usize = memory.data(256);

// Tokens whose tag was checked lately, so that a client presenting the same token again
// costs a comparison instead of two compressions. A slot is chosen by the tag's first
// byte and holds the whole token; only a token equal in every byte, compared in constant
// time, skips the HMAC, and a new key empties the cache. Generation, expiry and
// revocation are checked on every call all the same.
const CACHE_SLOTS: usize = 256;
const CACHE_SLOT: usize = 64;
const CACHE: usize = memory.data(<i32>(CACHE_SLOTS * CACHE_SLOT), 16);

/** Forgets every checked tag; called when the key changes. */
export function forgetCheckedTags(): void {
  memory.fill(CACHE, 0, CACHE_SLOTS * CACHE_SLOT);
}

/** Whether the tag of the token in RAW is right, from the cache or by computing it. */
function tagValid(): bool {
  const slot = CACHE + (<usize>load<u8>(RAW + PAYLOAD) << 6);
  if (equalConstantTime(slot, RAW, RAW_LEN)) return true;
  sign(RAW, TAG);
  if (!equalConstantTime(TAG, RAW + PAYLOAD, DIGEST)) return false;
  memory.copy(slot, RAW, RAW_LEN);
  return true;
}

/** Fills the fixed tables; called once by `init`. */
export function tokensInit(): void {
  memory.fill(INNER_BLOCK, 0, BLOCK);
  store<u8>(INNER_BLOCK + PAYLOAD, 0x80);
  store<u64>(INNER_BLOCK + BLOCK - 8, bswap<u64>(<u64>(BLOCK + PAYLOAD) << 3));
  memory.fill(OUTER_BLOCK, 0, BLOCK);
  store<u8>(OUTER_BLOCK + DIGEST, 0x80);
  store<u64>(OUTER_BLOCK + BLOCK - 8, bswap<u64>(<u64>(BLOCK + DIGEST) << 3));
  memory.fill(DECODE, 0xff, 256);
  for (let i: u32 = 0; i < 64; i++) {
    const c: u32 = i < 26 ? 0x41 + i : i < 52 ? 0x61 + i - 26 : i < 62 ? 0x30 + i - 52 : i == 62 ? 0x2d : 0x5f;
    store<u8>(ENCODE + i, <u8>c);
    store<u8>(DECODE + c, <u8>i);
  }
}

/** The tag of the payload at `payload`, written to `out`: two compressions. */
function sign(payload: usize, out: usize): void {
  memory.copy(INNER_BLOCK, payload, PAYLOAD);
  memory.copy(HASH, KEY_INNER, DIGEST);
  compress(HASH, INNER_BLOCK);
  digestOut(HASH, OUTER_BLOCK);
  memory.copy(HASH, KEY_OUTER, DIGEST);
  compress(HASH, OUTER_BLOCK);
  digestOut(HASH, out);
}

function encode(src: usize, dst: usize): void {
  for (let i: usize = 0, o: usize = 0; i < RAW_LEN; i += 3, o += 4) {
    const v = (<u32>load<u8>(src + i) << 16) | (<u32>load<u8>(src + i + 1) << 8) | <u32>load<u8>(src + i + 2);
    store<u8>(dst + o, load<u8>(ENCODE + (v >> 18)));
    store<u8>(dst + o + 1, load<u8>(ENCODE + ((v >> 12) & 63)));
    store<u8>(dst + o + 2, load<u8>(ENCODE + ((v >> 6) & 63)));
    store<u8>(dst + o + 3, load<u8>(ENCODE + (v & 63)));
  }
}

/** Decodes exactly TEXT_LEN characters; false if any is outside the alphabet. */
function decode(src: usize, dst: usize): bool {
  let bad: u32 = 0;
  for (let i: usize = 0, o: usize = 0; i < TEXT_LEN; i += 4, o += 3) {
    const a = <u32>load<u8>(DECODE + load<u8>(src + i));
    const b = <u32>load<u8>(DECODE + load<u8>(src + i + 1));
    const c = <u32>load<u8>(DECODE + load<u8>(src + i + 2));
    const d = <u32>load<u8>(DECODE + load<u8>(src + i + 3));
    bad |= a | b | c | d;
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    store<u8>(dst + o, <u8>(v >> 16));
    store<u8>(dst + o + 1, <u8>(v >> 8));
    store<u8>(dst + o + 2, <u8>v);
  }
  return (bad & 0xc0) == 0;
}

// @ts-ignore: decorator
@inline function generationOf(raw: usize): u32 { return bswap<u32>(load<u32>(raw, 1)); }
// @ts-ignore: decorator
@inline function serialOf(raw: usize): u64 { return bswap<u64>(load<u64>(raw, 5)); }
// @ts-ignore: decorator
@inline function expiryOf(raw: usize): u64 { return bswap<u64>(load<u64>(raw, 13)); }
// @ts-ignore: decorator
@inline function grantOf(raw: usize): u32 { return bswap<u32>(load<u32>(raw, 21)); }

/** Claims of the token in RAW, for the host: serial, expiry, generation, grant (little-endian). */
function writeClaims(): void {
  store<u64>(RESULT_BUF, serialOf(RAW));
  store<u64>(RESULT_BUF, expiryOf(RAW), 8);
  store<u32>(RESULT_BUF, generationOf(RAW), 16);
  store<u32>(RESULT_BUF, grantOf(RAW), 20);
}

/**
 * Everything but the path: decodes the token text into RAW and checks its tag, its
 * generation, its expiry and the revocation bitmap, in that order.
 */
function check(text: usize, len: usize, now: i64): Outcome {
  if (len != TEXT_LEN || !decode(text, RAW) || load<u8>(RAW) != VERSION) return Outcome.Malformed;
  if (!state.keySet) return Outcome.BadSignature;
  if (!tagValid()) return Outcome.BadSignature;
  if (generationOf(RAW) != state.generation) return Outcome.EarlierGeneration;
  // An expiry beyond i64 was never issued; as a negative number it counts as past.
  if (<i64>expiryOf(RAW) <= now) return Outcome.Expired;
  if (isRevoked(serialOf(RAW))) return Outcome.Revoked;
  if (grantOf(RAW) >= state.grantCount) return Outcome.Malformed;
  return Outcome.Valid;
}

/** Whether the token text at `text` grants the path at `path` at time `now`. */
export function verifyToken(text: usize, len: usize, path: usize, pathLen: usize, now: i64): Outcome {
  const outcome = check(text, len, now);
  if (outcome != Outcome.Valid) return outcome;
  const grant = grantOf(RAW);
  return grants(grantPtr(grant), grantLen(grant), path, pathLen) ? Outcome.Valid : Outcome.NotGranted;
}

/** Issues a token into `out`; returns its length or a negative ISSUE_ code. */
export function issueToken(grant: u32, now: i64, lifetime: u32, out: usize): i32 {
  if (!state.keySet) return ISSUE_NO_KEY;
  if (grant >= state.grantCount) return ISSUE_UNKNOWN_GRANT;
  if (lifetime == 0 || now < 0) return ISSUE_BAD_TIME;
  sweep(now);
  if (!canIssue()) return ISSUE_WINDOW_FULL;
  const expiry = <u64>now + <u64>lifetime;
  const serial = takeSerial(expiry);
  store<u8>(RAW, VERSION);
  store<u32>(RAW, bswap<u32>(state.generation), 1);
  store<u64>(RAW, bswap<u64>(serial), 5);
  store<u64>(RAW, bswap<u64>(expiry), 13);
  store<u32>(RAW, bswap<u32>(grant), 21);
  sign(RAW, RAW + PAYLOAD);
  encode(RAW, out);
  writeClaims();
  return <i32>TEXT_LEN;
}

/**
 * The check of `revokeToken` without the revocation: Valid or Revoked with the token's
 * claims written, so that a host can make a revocation durable before the core holds it.
 */
export function inspectToken(text: usize, len: usize, now: i64): Outcome {
  const outcome = check(text, len, now);
  if (outcome == Outcome.Valid || outcome == Outcome.Revoked) writeClaims();
  return outcome;
}

/**
 * Revokes a currently valid token: Valid when this call revoked it. The claims are
 * written for Valid and for Revoked, as `inspectToken` writes them.
 */
export function revokeToken(text: usize, len: usize, now: i64): Outcome {
  const outcome = inspectToken(text, len, now);
  if (outcome == Outcome.Valid) markRevoked(serialOf(RAW));
  return outcome;
}
