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
import { BLOCK, DIGEST, compress, digestOut, equalConstantTime, hmacStates } from './sha256';
import { GENERATION, GRANT_COUNT, KEY_EPOCH, KEY_INNER, KEY_OUTER } from './layout';
import { CACHE_LINE, cacheBuf, hashBuf, innerBlock, outerBlock, rawBuf, resultBuf, tagBuf } from './slots';
import { readShared32, readSharedBytes, writeShared32, writeSharedBytes } from './shared';
import { Outcome } from './outcome';
import { grantEndpointsLen, grantLimits, grantMethodsLen, grantPlain, grantPtr } from './grants';
import { canIssue, isRevoked, markRevoked, serialIssuable, sweep, takeSerial } from './revocations';
import { grants } from './paths';
import { countUse } from './limits';
import { ISSUE_BAD_SERIAL, ISSUE_BAD_TIME, ISSUE_NO_KEY, ISSUE_UNKNOWN_GRANT, ISSUE_WINDOW_FULL } from './results';
import { RESULT_EXPIRY, RESULT_GENERATION, RESULT_GRANT, RESULT_SCOPED, RESULT_SERIAL } from './result-record';

export const VERSION: u8 = 1;
export const PAYLOAD: usize = 25;
export const RAW_LEN: usize = PAYLOAD + DIGEST;
export const TEXT_LEN: usize = RAW_LEN / 3 * 4;

// Base64url, both ways: shared tables, filled by `init` and read-only after.
const ENCODE: usize = memory.data(64);
const DECODE: usize = memory.data(256);

// Tokens whose tag was checked lately, so that a client presenting the same token again
// costs a comparison instead of two compressions. Each instance keeps its own cache in
// its slot. A line is chosen by the tag's first byte and holds the whole token and the
// key epoch it was checked under; only a token equal in every byte, compared in constant
// time, under the key of that same epoch, skips the HMAC. So a new key, set on whichever
// thread, voids every thread's cache at once. Generation, expiry and revocation are
// checked on every call all the same.
const CACHE_EPOCH: usize = 60;

/**
 * Whether the tag of the token at `raw` is right under the key of `epoch`, from the cache
 * or by computing it.
 */
function tagValid(raw: usize, epoch: u32): bool {
  const line = cacheBuf() + <usize>load<u8>(raw + PAYLOAD) * CACHE_LINE;
  if (load<u32>(line, CACHE_EPOCH) == epoch && equalConstantTime(line, raw, RAW_LEN)) return true;
  const tag = tagBuf();
  sign(raw, tag);
  // A key set while this thread read the key states may have mixed two keys: refuse.
  if (readShared32(KEY_EPOCH) != epoch || !equalConstantTime(tag, raw + PAYLOAD, DIGEST)) return false;
  memory.copy(line, raw, RAW_LEN);
  store<u32>(line, epoch, CACHE_EPOCH);
  return true;
}

/** Fills the shared base64url tables; called once by `init`. */
export function tokenTablesInit(): void {
  memory.fill(DECODE, 0xff, 256);
  for (let i: u32 = 0; i < 64; i++) {
    const c: u32 = i < 26 ? 0x41 + i : i < 52 ? 0x61 + i - 26 : i < 62 ? 0x30 + i - 52 : i == 62 ? 0x2d : 0x5f;
    store<u8>(ENCODE + i, <u8>c);
    store<u8>(DECODE + c, <u8>i);
  }
}

/**
 * Prepares the HMAC blocks of this instance's slot; called by `init` and `attach`. The
 * second block of each HMAC pass is the message, then padding and length that never
 * change (the key block came first, so the inner length is 64 + 25 bytes, the outer
 * 64 + 32).
 */
export function tokenScratchInit(): void {
  const inner = innerBlock();
  memory.fill(inner, 0, BLOCK);
  store<u8>(inner + PAYLOAD, 0x80);
  store<u64>(inner + BLOCK - 8, bswap<u64>(<u64>(BLOCK + PAYLOAD) << 3));
  const outer = outerBlock();
  memory.fill(outer, 0, BLOCK);
  store<u8>(outer + DIGEST, 0x80);
  store<u64>(outer + BLOCK - 8, bswap<u64>(<u64>(BLOCK + DIGEST) << 3));
}

/**
 * Sets the token key (`len` bytes at `key`): its HMAC states are derived in this slot,
 * then published between two epoch steps, so that a thread reading them meanwhile sees
 * an odd epoch or a changed one and refuses rather than sign with half of each key.
 */
export function setTokenKey(key: usize, len: usize): void {
  const inner = hashBuf();
  const outer = tagBuf();
  hmacStates(key, len, inner, outer);
  const epoch = readShared32(KEY_EPOCH);
  if (epoch > u32.MAX_VALUE - 3) abort('the token key was set too many times');
  writeShared32(KEY_EPOCH, epoch + 1);
  writeSharedBytes(KEY_INNER, inner, DIGEST);
  writeSharedBytes(KEY_OUTER, outer, DIGEST);
  writeShared32(KEY_EPOCH, epoch + 2);
}

/** The tag of the payload at `payload`, written to `out`: two compressions. */
function sign(payload: usize, out: usize): void {
  const hash = hashBuf();
  const inner = innerBlock();
  const outer = outerBlock();
  memory.copy(inner, payload, PAYLOAD);
  readSharedBytes(hash, KEY_INNER, DIGEST);
  compress(hash, inner);
  digestOut(hash, outer);
  readSharedBytes(hash, KEY_OUTER, DIGEST);
  compress(hash, outer);
  digestOut(hash, out);
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

/** Claims of the token at `raw`, for the host: serial, expiry, generation, grant (little-endian). */
function writeClaims(raw: usize): void {
  const result = resultBuf();
  store<u64>(result + RESULT_SERIAL, serialOf(raw));
  store<u64>(result + RESULT_EXPIRY, expiryOf(raw));
  store<u32>(result + RESULT_GENERATION, generationOf(raw));
  store<u32>(result + RESULT_GRANT, grantOf(raw));
}

/**
 * Everything but the path: decodes the token text into `raw` and checks its tag, its
 * generation, its expiry and the revocation bitmap, in that order. Each shared field is
 * read once, atomically in the threads build: a check that starts after a change by the
 * owner returned sees that change.
 */
function check(text: usize, len: usize, raw: usize, now: i64): Outcome {
  if (len != TEXT_LEN || !decode(text, raw) || load<u8>(raw) != VERSION) return Outcome.Malformed;
  // No key yet (0), or one being set (odd): nothing verifies.
  const epoch = readShared32(KEY_EPOCH);
  if (epoch == 0 || (epoch & 1) != 0) return Outcome.BadSignature;
  if (!tagValid(raw, epoch)) return Outcome.BadSignature;
  const standing = claimsStanding(serialOf(raw), generationOf(raw), expiryOf(raw), now);
  if (standing != Outcome.Valid) return standing;
  if (grantOf(raw) >= readShared32(GRANT_COUNT)) return Outcome.Malformed;
  return Outcome.Valid;
}

/**
 * What can end a genuine token after it was issued, checked on its claims: the password
 * generation, the expiry and the revocation bitmap, in that order.
 */
// @ts-ignore: decorator
@inline export function claimsStanding(serial: u64, generation: u32, expiry: u64, now: i64): Outcome {
  if (generation != readShared32(GENERATION)) return Outcome.EarlierGeneration;
  // An expiry beyond i64 was never issued; as a negative number it counts as past.
  if (<i64>expiry <= now) return Outcome.Expired;
  if (isRevoked(serial)) return Outcome.Revoked;
  return Outcome.Valid;
}

/**
 * Whether the token text at `text` grants the path at `path` at time `now`: Valid, or
 * Scoped with the grant id at RESULT_GRANT (and 1 at RESULT_SCOPED) when its grant has a
 * method scope, or Limited with the serial at RESULT_SERIAL, the expiry at RESULT_EXPIRY,
 * the grant id at RESULT_GRANT and the scope flag at RESULT_SCOPED when it has limits
 * (result-record.ts). Any other answer writes nothing there.
 */
export function verifyToken(text: usize, len: usize, path: usize, pathLen: usize, now: i64): Outcome {
  const raw = rawBuf();
  const outcome = check(text, len, raw, now);
  if (outcome != Outcome.Valid) return outcome;
  const grant = grantOf(raw);
  if (!grants(grantPtr(grant), grantEndpointsLen(grant), path, pathLen)) return Outcome.NotGranted;
  // One load for a grant with neither scope nor limits, as the scope alone took before.
  if (grantPlain(grant)) {
    countUse(serialOf(raw), expiryOf(raw), 1, now * 1000000000);
    return Outcome.Valid;
  }
  const result = resultBuf();
  store<u32>(result + RESULT_GRANT, grant);
  if (grantLimits(grant) == 0) {
    store<u32>(result + RESULT_SCOPED, 1);
    countUse(serialOf(raw), expiryOf(raw), 1, now * 1000000000);
    return Outcome.Scoped;
  }
  store<u64>(result + RESULT_SERIAL, serialOf(raw));
  store<u64>(result + RESULT_EXPIRY, expiryOf(raw));
  store<u32>(result + RESULT_SCOPED, grantMethodsLen(grant) != 0 ? 1 : 0);
  return Outcome.Limited;
}

/** Issues a token into `out`; returns its length or a negative ISSUE_ code. */
export function issueToken(grant: u32, now: i64, lifetime: u32, out: usize): i32 {
  if (readShared32(KEY_EPOCH) == 0) return ISSUE_NO_KEY;
  if (grant >= readShared32(GRANT_COUNT)) return ISSUE_UNKNOWN_GRANT;
  if (lifetime == 0 || now < 0) return ISSUE_BAD_TIME;
  sweep(now);
  if (!canIssue()) return ISSUE_WINDOW_FULL;
  const expiry = <u64>now + <u64>lifetime;
  return seal(takeSerial(expiry), expiry, grant, out);
}

/**
 * Issues a token under a serial the host gives (one of a block it reserved): the serial
 * must be reserved (`reserveSerials`), not revoked, and its page's expiry bound must
 * cover the token's expiry. Returns the token's length or a negative ISSUE_ code.
 */
export function issueTokenAt(serial: u64, grant: u32, now: i64, lifetime: u32, out: usize): i32 {
  if (readShared32(KEY_EPOCH) == 0) return ISSUE_NO_KEY;
  if (grant >= readShared32(GRANT_COUNT)) return ISSUE_UNKNOWN_GRANT;
  if (lifetime == 0 || now < 0) return ISSUE_BAD_TIME;
  sweep(now);
  const expiry = <u64>now + <u64>lifetime;
  if (!serialIssuable(serial, expiry)) return ISSUE_BAD_SERIAL;
  return seal(serial, expiry, grant, out);
}

/** Writes, signs and encodes the token of these claims into `out`, and its claims to the result buffer. */
function seal(serial: u64, expiry: u64, grant: u32, out: usize): i32 {
  const raw = rawBuf();
  store<u8>(raw, VERSION);
  store<u32>(raw, bswap<u32>(readShared32(GENERATION)), 1);
  store<u64>(raw, bswap<u64>(serial), 5);
  store<u64>(raw, bswap<u64>(expiry), 13);
  store<u32>(raw, bswap<u32>(grant), 21);
  sign(raw, raw + PAYLOAD);
  encode(raw, out);
  writeClaims(raw);
  return <i32>TEXT_LEN;
}

/**
 * The check of `revokeToken` without the revocation: Valid or Revoked with the token's
 * claims written, so that a host can make a revocation durable before the core holds it.
 */
export function inspectToken(text: usize, len: usize, now: i64): Outcome {
  const raw = rawBuf();
  const outcome = check(text, len, raw, now);
  if (outcome == Outcome.Valid || outcome == Outcome.Revoked) writeClaims(raw);
  return outcome;
}

/**
 * Revokes a currently valid token: Valid when this call revoked it. The claims are
 * written for Valid and for Revoked, as `inspectToken` writes them.
 */
export function revokeToken(text: usize, len: usize, now: i64): Outcome {
  const outcome = inspectToken(text, len, now);
  if (outcome == Outcome.Valid) markRevoked(serialOf(rawBuf()));
  return outcome;
}
