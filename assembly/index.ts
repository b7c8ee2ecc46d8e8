// The core's whole public ABI. Every export takes and returns plain integers; bytes go
// through the exchange buffers whose addresses the first exports give. See README.md
// beside this file for the contract, the call order and the outcome codes. The threads
// build (threads.ts) exports all of this too, plus the calls that attach an instance.
import {
  GENERATION, GRANT_COUNT, FLOOR, HEAP_BASE, INITIALIZED, INITIALIZING, LIMIT_SHARE, NEXT_SERIAL, NOT_INITIALIZED, READY,
  memoryReaches, state,
} from './layout';
import { IO_CAP, PATH_CAP, TOKEN_CAP, bindOwner, ioBuf, ownerOnly, pathBuf, resultBuf, tokenBuf } from './slots';
import { claimShared32, readShared32, readShared64, writeShared32 } from './shared';
import { hmacSha256 as hmac, sha256 as hash } from './sha256';
import { Outcome } from './outcome';
import { requestPathValid } from './paths';
import {
  GRANT_INDEX_BYTES, MAX_GRANT_BYTES, grantAdd as addGrant, grantFind as findGrant, grantsInit, methodAllowed as allowed,
} from './grants';
import { claimsStanding, inspectToken, issueToken, issueTokenAt, revokeToken, setTokenKey, tokenScratchInit, tokenTablesInit, verifyToken } from './token';
import {
  MAX_WINDOW_LOG2, MIN_WINDOW_LOG2, markRevoked, pageExpiryBytes, reserveSerials as reserve, restoreSerials as restore,
  revocationsInit, ringBytes, sweep as sweepWindow,
} from './revocations';
import { generate } from './password';
import { ADMIT_OK, ADMIT_UNKNOWN_GRANT, PASSWORD_BAD_LENGTH } from './results';
import { LIMIT_TABLE_BYTES, admitCall, countUse, limitsInit, quotaOf, restoreUse, setQuota as putQuota, usageMisses as misses, usageOf } from './limits';
import { grantLimits } from './grants';
import { TABLE_ALIGN as ALIGN } from './memory-map';
import { RESULT_DIGEST, RESULT_RESET, RESULT_WAIT } from './result-record';

const TABLE_ALIGN: usize = <usize>ALIGN;

const ABI_VERSION: u32 = 6;
const BEARER_LEN: usize = 7;

/** The ABI version; a host refuses a core whose version it does not speak. */
export function abiVersion(): u32 {
  return ABI_VERSION;
}

/**
 * Sets the core up, once, before any other call but the buffer and hash exports: a ring
 * of 2^windowLog2 (12..30) revocation bits. 0 on success; -1 if the size is out of range,
 * the core was already set up, or (threads build) the shared memory is too small.
 */
export function init(windowLog2: u32): i32 {
  if (windowLog2 < MIN_WINDOW_LOG2 || windowLog2 > MAX_WINDOW_LOG2) return -1;
  // One instance sets a memory up, even when several try at once.
  if (!claimShared32(INITIALIZED, NOT_INITIALIZED, INITIALIZING)) return -1;
  // A build whose data reaches into the heap is broken.
  if (__heap_base > HEAP_BASE) unreachable();
  const bitmap = HEAP_BASE + GRANT_INDEX_BYTES;
  const pageExpiry = bitmap + ringBytes(windowLog2);
  const limitTable = (pageExpiry + pageExpiryBytes(windowLog2) + TABLE_ALIGN - 1) & ~(TABLE_ALIGN - 1);
  const grantArea = limitTable + 2 * LIMIT_TABLE_BYTES;
  const heapEnd = grantArea + MAX_GRANT_BYTES;
  // The plain build grows as grants are added; the threads build cannot grow, so its
  // memory must hold the whole grant area from the start.
  if (!memoryReaches(ASC_FEATURE_THREADS ? heapEnd : grantArea)) {
    writeShared32(INITIALIZED, NOT_INITIALIZED);
    return -1;
  }
  state.slots = heapEnd;
  grantsInit(HEAP_BASE, grantArea);
  revocationsInit(windowLog2, bitmap, pageExpiry);
  limitsInit(limitTable);
  tokenTablesInit();
  bindOwner();
  tokenScratchInit();
  // Last: an instance that attaches after reading READY sees all of the above.
  writeShared32(INITIALIZED, READY);
  return 0;
}

export function tokenBuffer(): usize { return tokenBuf(); }
export function tokenCapacity(): usize { return TOKEN_CAP; }
export function pathBuffer(): usize { return pathBuf(); }
export function pathCapacity(): usize { return PATH_CAP; }
export function ioBuffer(): usize { return ioBuf(); }
export function ioCapacity(): usize { return IO_CAP; }
export function resultBuffer(): usize { return resultBuf(); }

/** SHA-256 of the first `len` bytes of the io buffer, into the result buffer at RESULT_DIGEST. 0; -1 if `len` exceeds the buffer. */
export function sha256(len: usize): i32 {
  if (len > IO_CAP) return -1;
  hash(ioBuf(), len, resultBuf() + RESULT_DIGEST);
  return 0;
}

/**
 * HMAC-SHA256 with the key and then the message in the io buffer, into the result
 * buffer at RESULT_DIGEST. 0; -1 if they exceed the buffer.
 */
export function hmacSha256(keyLen: usize, msgLen: usize): i32 {
  if (keyLen > IO_CAP || msgLen > IO_CAP - keyLen) return -1;
  const io = ioBuf();
  hmac(io, keyLen, io + keyLen, msgLen, resultBuf() + RESULT_DIGEST);
  return 0;
}

/** Takes the token key (1..64 bytes) from the io buffer. 0 on success, -1 on a bad length. */
export function setKey(len: usize): i32 {
  ownerOnly();
  if (len == 0 || len > 64) return -1;
  setTokenKey(ioBuf(), len);
  return 0;
}

/** The password generation: tokens verify only in the generation they were issued in. */
export function generation(): u32 { return readShared32(GENERATION); }

/** Restores the generation at start. */
export function setGeneration(generation: u32): void {
  ownerOnly();
  writeShared32(GENERATION, generation);
}

/** Starts a new generation (a password change); returns it. */
export function bumpGeneration(): u32 {
  ownerOnly();
  const generation = readShared32(GENERATION);
  if (generation == u32.MAX_VALUE) abort('the password generation is at its maximum');
  writeShared32(GENERATION, generation + 1);
  return generation + 1;
}

/**
 * Interns the grant in the io buffer: its endpoint entries, each ending in `\n`, and for a
 * method scope, an empty entry (`\n`) and 1..128 method patterns, each ending in `\n`.
 * Returns the grant id, or -1 empty, -2 over 128 entries, -3 table full, -4 bad entry,
 * -5 entry over 1024 bytes, -6 bad method pattern, -7 pattern over 128 bytes, -8 over
 * 128 patterns, -9 no pattern after the empty entry; for -4, -5, -6 and -7 the entry's
 * (or pattern's) index is the first u32 of the result buffer.
 */
export function grantAdd(len: usize): i32 {
  ownerOnly();
  return addGrant(ioBuf(), min(len, IO_CAP));
}

/**
 * The id the grant in the io buffer has, or the one `grantAdd` would give it
 * (`grantCount()`) when it is new, with `grantAdd`'s negative codes; adds nothing. A
 * host that records new lists durably calls this first, and `grantAdd` once the list is
 * recorded, so a failed write leaves the core as it was.
 */
export function grantFind(len: usize): i32 {
  return findGrant(ioBuf(), min(len, IO_CAP));
}

export function grantCount(): u32 { return readShared32(GRANT_COUNT); }

/**
 * Whether grant `grant` lets through the JSON-RPC method whose name (the decoded bytes
 * of its JSON string) is in the path buffer: 1 when one of its patterns matches (equal
 * bytes; for `x*`, a name starting with x; `*`, any name) or it has no method scope, 0
 * when none does, -1 unknown grant. A name longer than the buffer is passed with its true
 * length and as much of it written as fits. Allocates nothing.
 */
export function methodAllowed(grant: u32, len: usize): i32 {
  return allowed(grant, pathBuf(), len);
}
export function nextSerial(): u64 { return readShared64(NEXT_SERIAL); }
export function floor(): u64 { return readShared64(FLOOR); }

/**
 * After a restart: serials below `floor` are known expired, serials below `nextSerial`
 * were issued and expire by `expiryBound`. 0, or -1 when that does not fit the window.
 */
export function restoreSerials(floor: u64, nextSerial: u64, expiryBound: u64): i32 {
  ownerOnly();
  return restore(floor, nextSerial, expiryBound);
}

/**
 * Issues a token for a grant, valid for `lifetime` seconds from `now`, into the token
 * buffer; its claims go to the result buffer. Returns the token's length (76), or -1
 * unknown grant, -2 too many live tokens, -3 bad time or lifetime, -4 no key set.
 */
export function issue(grant: u32, now: i64, lifetime: u32): i32 {
  ownerOnly();
  return issueToken(grant, now, lifetime, tokenBuf());
}

/**
 * Checks the token text in the token buffer against the path in the path buffer: the
 * path rules, then the token. Scoped (a valid token whose grant has a method scope)
 * leaves the grant id at RESULT_GRANT. A length past a buffer's capacity means the input did not
 * fit (BadPath, or Malformed for the token); nothing is read beyond the buffer.
 */
export function verify(tokenLen: usize, pathLen: usize, now: i64): Outcome {
  const path = pathBuf();
  if (pathLen > PATH_CAP || !requestPathValid(path, pathLen)) return Outcome.BadPath;
  if (tokenLen > TOKEN_CAP) return Outcome.Malformed;
  return verifyToken(tokenBuf(), tokenLen, path, pathLen, now);
}

/**
 * The gate: the path in the path buffer, and the raw `Authorization` header value in
 * the token buffer (length 0 when the request had none). Checks the path rules, then
 * the `Bearer ` scheme (any case), then the token. A header longer than the buffer is
 * passed with its true length and as much of it written as fits: its scheme is still
 * read, and its token is Malformed.
 */
export function authorize(headerLen: usize, pathLen: usize, now: i64): Outcome {
  const path = pathBuf();
  if (pathLen > PATH_CAP || !requestPathValid(path, pathLen)) return Outcome.BadPath;
  if (headerLen == 0) return Outcome.NoToken;
  if (headerLen < BEARER_LEN) return Outcome.BadHeader;
  // "bearer" in lower case, little-endian, plus a space: the scheme is case-insensitive.
  const header = tokenBuf();
  const scheme = (load<u32>(header) | 0x20202020) == 0x72616562 && (load<u16>(header, 4) | 0x2020) == 0x7265;
  if (!scheme || load<u8>(header, 6) != 0x20) return Outcome.BadHeader;
  if (headerLen > TOKEN_CAP) return Outcome.Malformed;
  return verifyToken(header + BEARER_LEN, headerLen - BEARER_LEN, path, pathLen, now);
}

/** Valid when the path in the path buffer may be served, BadPath otherwise. */
export function checkPath(pathLen: usize): Outcome {
  return pathLen <= PATH_CAP && requestPathValid(pathBuf(), pathLen) ? Outcome.Valid : Outcome.BadPath;
}

/**
 * Revokes the token in the token buffer if it is valid now (for any path). Valid means
 * this call revoked it; Revoked, that it already was; both leave its claims in the
 * result buffer. Any other outcome changed nothing.
 */
export function revoke(tokenLen: usize, now: i64): Outcome {
  ownerOnly();
  if (tokenLen > TOKEN_CAP) return Outcome.Malformed;
  return revokeToken(tokenBuf(), tokenLen, now);
}

/**
 * The check of `revoke`, revoking nothing: Valid (the token could be revoked now) or
 * Revoked, both with its claims in the result buffer; any other outcome, no claims. A
 * host that records revocations durably calls this first, and `revokeSerial` once the
 * revocation is recorded.
 */
export function inspect(tokenLen: usize, now: i64): Outcome {
  if (tokenLen > TOKEN_CAP) return Outcome.Malformed;
  return inspectToken(tokenBuf(), tokenLen, now);
}

/**
 * Whether a token checked earlier still stands at `now`, from the claims that check
 * gave: Valid, or EarlierGeneration, Expired or Revoked as `verify` would find it now (in
 * that order). No tag to compute and no buffer to fill: a host that keeps a session open
 * on a token re-checks it with this on every message, so that a revocation, a password
 * change or the expiry holds from the moment it is made.
 */
export function standing(serial: u64, generation: u32, expiry: u64, now: i64): Outcome {
  return claimsStanding(serial, generation, expiry, now);
}

/**
 * Marks a serial revoked: each stored revocation at start, and a revocation once the host
 * has recorded it (after `inspect`). 0 marked, 1 already expired (dropped), -1 never issued.
 */
export function revokeSerial(serial: u64): i32 {
  ownerOnly();
  return markRevoked(serial);
}

/** Forgets revocations of tokens that have all expired by `now`. */
export function sweep(now: i64): void {
  ownerOnly();
  sweepWindow(now);
}

/**
 * A random password of `length` (1..512) letters and digits, into the token buffer,
 * from `entropyLen` bytes in the io buffer. Returns `length`; -1 when the entropy ran out
 * (call again with more), -2 on a bad length.
 */
export function generatePassword(entropyLen: usize, length: usize): i32 {
  if (length == 0 || length > TOKEN_CAP || entropyLen > IO_CAP) return PASSWORD_BAD_LENGTH;
  return generate(ioBuf(), entropyLen, length, tokenBuf());
}

// Several issuers over one serial space (a fleet of gateways): each issues from blocks
// it reserved, and every one verifies the blocks all have reserved. `issue` takes the
// next serial itself and so suits a lone issuer only; a host uses one way or the other.

/**
 * Serials [start, end) are a block an issuer reserved; their tokens expire by
 * `expiryBound`. Raises the ceiling that checks accept to `end`. 0; 1 when the block is
 * all below the floor (expired, nothing to do); -1 when empty or past the window.
 */
export function reserveSerials(start: u64, end: u64, expiryBound: u64): i32 {
  ownerOnly();
  return reserve(start, end, expiryBound);
}

/**
 * `issue` under the serial the host gives, from a block it reserved and has not issued
 * from before: the same results, and -5 when the serial is not reserved, is revoked, or
 * the token would outlive its block's expiry bound.
 */
export function issueSerial(serial: u64, grant: u32, now: i64, lifetime: u32): i32 {
  ownerOnly();
  return issueTokenAt(serial, grant, now, lifetime, tokenBuf());
}

// Per-token limits (limits.ts): a Limited token's calls, admitted from any thread.

/**
 * One call of `n` (0: only the client is checked, nothing is counted) by the token of
 * `serial`, `expiry` and `grant` (as a Limited check left them at RESULT_SERIAL,
 * RESULT_EXPIRY and RESULT_GRANT), from the client address in the first 16 bytes of the
 * io buffer (IPv4 as ::ffff:a.b.c.d), at `now`, Unix nanoseconds. 0 let through and
 * counted; 1 the client is not allowed; 2 past the rate, the wait in nanoseconds at
 * RESULT_WAIT (u64); 3 more calls than the burst; 4 past the quota of the window (day or
 * month, UTC), the nanoseconds until it resets at RESULT_WAIT (u64) and the reset's time
 * (Unix ns) at RESULT_RESET (u64); -1 the limits table has no slot for the token; -2 no
 * such grant. Every answer writes both fields (0 where it has no wait or reset) and no
 * other: the check's record stays as it was. A grant without limits lets everything
 * through and counts nothing. Allocates nothing.
 */
export function admit(serial: u64, expiry: u64, grant: u32, n: u32, now: i64): i32 {
  const out = resultBuf();
  store<u64>(out + RESULT_WAIT, 0);
  store<u64>(out + RESULT_RESET, 0);
  if (grant >= readShared32(GRANT_COUNT)) return ADMIT_UNKNOWN_GRANT;
  const record = grantLimits(grant);
  if (record == 0) return ADMIT_OK;
  return admitCall(record, serial, expiry, n, now, ioBuf(), out);
}

/**
 * The quota of `serial`, a token of `grant`, in the window of `now` (Unix ns): 1, with the
 * calls counted here at RESULT_HERE (u64), those the host last gave as the other gateways'
 * (`setQuota`) at RESULT_OTHERS (u64) and the window's number at RESULT_WINDOW (u32: days or
 * months since 1970, UTC); 0 when the grant has no quota or the token no slot; -2 no such
 * grant. Allocates nothing.
 */
export function quota(serial: u64, grant: u32, now: i64): i32 {
  if (grant >= readShared32(GRANT_COUNT)) return ADMIT_UNKNOWN_GRANT;
  const record = grantLimits(grant);
  if (record == 0) return 0;
  return quotaOf(record, serial, now, resultBuf()) ? 1 : 0;
}

/**
 * Sets a quota count of `serial`, a token that expires at `expiry` (Unix s): `calls` in
 * window `window` (as `quota` numbers them), counted here (`here` 1: added to this
 * window's count, as a restore at start does; an older window's is replaced) or by the
 * other gateways of a fleet (`here` 0: replaces their sum). 0; -1 when the limits table
 * has no slot for the token. Owner only.
 */
export function setQuota(serial: u64, expiry: u64, window: u32, calls: u32, here: u32): i32 {
  ownerOnly();
  return putQuota(serial, expiry, window, calls, here != 0) ? 0 : -1;
}

/**
 * How many gateways share each token's rate (a fleet's live members that enforce limits;
 * 0 or 1: this one alone): from the next `admit` on, each lets through rate / members
 * and burst / members (rounded up, at least 1). 0.
 */
export function setLimitShare(members: u32): i32 {
  ownerOnly();
  writeShared32(LIMIT_SHARE, members);
  return 0;
}

/**
 * The calls let through for `serial` (u64 at RESULT_REQUESTS) and the time of the last (Unix ns,
 * u64 at RESULT_LAST_USED): 1; 0 when the token has no slot (no call yet, or it expired and its
 * slot went to another). A token with limits counts what `admit` let through; one
 * without, each `verify` or `authorize` that answered Valid or Scoped (the time in whole
 * seconds).
 */
export function usage(serial: u64): i32 {
  return usageOf(serial, resultBuf()) ? 1 : 0;
}

/**
 * Restores usage at start: adds `requests` calls, the last at `last` (Unix ns, kept when
 * later than the one counted), to `serial`, a token of `grant` that expires at `expiry`.
 * It takes a slot never used or the token's own. 0; -1 when its table has no slot for it;
 * -2 no such grant.
 */
export function restoreUsage(serial: u64, expiry: u64, grant: u32, requests: u64, last: u64): i32 {
  ownerOnly();
  if (grant >= readShared32(GRANT_COUNT)) return ADMIT_UNKNOWN_GRANT;
  return restoreUse(serial, expiry, grantLimits(grant) != 0, requests, last) ? 0 : -1;
}

/**
 * `n` calls of `serial`, a token of `grant` that expires at `expiry`, let through without a
 * check of their own, at `now` (Unix ns): the messages of a WebSocket session, whose token
 * was checked at the upgrade. A grant without limits counts them in the usage table
 * (misses in `usageMisses`); one with limits counts nothing, its calls being `admit`'s.
 * 0; -2 no such grant. Allocates nothing.
 */
export function countUsage(serial: u64, expiry: u64, grant: u32, n: u32, now: i64): i32 {
  if (grant >= readShared32(GRANT_COUNT)) return ADMIT_UNKNOWN_GRANT;
  if (grantLimits(grant) == 0) countUse(serial, expiry, n, now);
  return 0;
}

/** The calls of tokens without limits let through uncounted, their table having no slot for them (a u32 that wraps). */
export function usageMisses(): u32 {
  return misses();
}
