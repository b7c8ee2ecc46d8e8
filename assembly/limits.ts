// Per-token limits: a rate (a token bucket), the clients a token may come from, and the
// calls let through.
//
// The limits are part of a grant (grants.ts): after the endpoints and the method scope,
// an empty entry and the limit entries, in this canonical order:
//
//   rate N/U     N calls (1..1,000,000) per U: s, m or h
//   burst B      the bucket's size (1..1,000,000); present exactly when rate is
//   quota N/P    N calls (1..1,000,000,000) per calendar day (P `day`) or month
//                (`month`), UTC: a window that resets at its end
//   client H/P   an address of 32 lowercase hex digits (IPv4 as ::ffff:a.b.c.d) and a
//                prefix length 0..128, the bits past the prefix zero; ascending, at
//                most 64
//
// A grant is content-addressed, so limits are durable and replicated wherever grants
// are. grantAdd parses them once into a record beside the list, which `admit` reads.
//
// The bucket is GCRA: one i64 per token, its theoretical arrival time (TAT), in Unix
// nanoseconds. A call of n at `now` passes when max(TAT, now) + n·T - now <= B·T (T the
// interval between calls, B the burst), and moves TAT there with one compare-and-swap;
// otherwise it waits for the excess. Every thread updates the same word, so N threads
// together give a token its rate, not N times it.
//
// A quota counts the calls let through in the current window: one u64 per token, the
// window's number (days or months since 1970, UTC) in the high half and the calls in the
// low half, moved with one compare-and-swap, so that a new window starts at 0 without a
// reset of its own. Beside it, what the other gateways of a fleet have let through in the
// same window, as the host last read it from them (setQuotaRemote): a call passes when
// this gateway's count, the others' and the call's together are within N. The call's
// calls are taken from the quota before the rate is asked, and given back if the rate
// refuses them.
//
// The buckets and usage counters live in a fixed table keyed by serial (open addressing,
// linear probing over at most MAX_PROBE slots). A slot is claimed by the first call of a
// token, from any thread, with the token's expiry, which the host gives with every call
// (a Limited check leaves it beside the serial): the core keeps no other record of when a
// token ends. Once the token has expired by the `now` of a later claim, its slot may be
// taken for another token. Slots are never emptied, so a probe stops at the first empty
// one.
//
// The table stays exact under threads: a token has one slot, and a slot's counts are one
// token's. Two rules hold it so:
//
// - A call pins the slot it uses (USERS + 1, then the key read again) for as long as it
//   reads or moves the slot's words; a claim that would take a slot sets its key to
//   CLAIMING first, then reads USERS, and gives the slot back if a call has it pinned.
//   Both are sequentially consistent atomics, so one of the two sees the other: no call
//   ever moves a bucket or a count that is being reset for another token, nor reads one.
// - Claims for serials of one home slot take one lock (CLAIM_LOCKS, by stripe of home
//   slots) and look again under it. Two threads whose clocks disagree on whether a slot's
//   token has expired would otherwise take two slots for one new token; under the lock,
//   the second finds the first's. Finding an existing slot, the usual case, takes no lock.
//
// Tokens without limits are counted too (`countUse`, on every check that lets one
// through), in a second table of the same shape whose bucket word stays unused: a table of
// their own, so that however many of them are in use, they never take the slot a token
// with limits needs to be admitted. A token without limits that finds no slot there is
// still served, uncounted, and the miss is counted (USAGE_MISSES). A slot there is freed
// as in the limits table, once its token has expired: the host reads usage for live
// tokens only (its snapshots and listTokens list live tokens), so nothing it would read
// is lost.
import { CLAIM_LOCKS, CLAIM_STRIPES, LIMIT_SHARE, USAGE_MISSES, state } from './layout';
import { claimShared32, readShared32, writeShared32 } from './shared';
import * as MAP from './memory-map';
import { resultBuf } from './slots';
import { ADMIT_CLIENT, ADMIT_OK, ADMIT_OVER_BURST, ADMIT_QUOTA, ADMIT_RATE, ADMIT_TABLE_FULL, GRANT_BAD_LIMIT, GRANT_TOO_MANY_CLIENTS } from './results';
import { RESULT_HERE, RESULT_LAST_USED, RESULT_OTHERS, RESULT_REFUSED_ENTRY, RESULT_REQUESTS, RESULT_RESET, RESULT_WAIT, RESULT_WINDOW } from './result-record';

/** Slots of each table (the limits', the usage one's): 65,536 of 64 bytes (4 MiB). */
export const LIMIT_SLOTS_LOG2: u32 = <u32>MAP.LIMIT_SLOTS_LOG2;
export const LIMIT_SLOT: usize = <usize>MAP.LIMIT_SLOT_BYTES;
export const LIMIT_TABLE_BYTES: usize = <usize>LIMIT_SLOT << LIMIT_SLOTS_LOG2;
/** A token's slot is one of the MAX_PROBE from its hash, or the table counts as full for it. */
const MAX_PROBE: u32 = 64;
const SLOT_MASK: u64 = (<u64>1 << LIMIT_SLOTS_LOG2) - 1;

// A slot, one cache line: the serial + 1 (0: never used; CLAIMING: being reset for a new
// serial), the bucket's TAT (ns), the calls let through, the last call's time (ns), the
// token's expiry (Unix seconds), the calls that have the slot pinned (u32), and the
// quota's window and count here and at the other gateways (window << 32 | calls).
const KEY: usize = 0;
const TAT: usize = 8;
const REQUESTS: usize = 16;
const LAST: usize = 24;
const EXPIRY: usize = 32;
const USERS: usize = 40;
const QUOTA_HERE: usize = 48;
const QUOTA_OTHERS: usize = 56;
const CLAIMING: u64 = u64.MAX_VALUE;

/** The `now` of a claim that takes no other token's slot: `restoreUse`, at start. */
const NEVER: i64 = i64.MIN_VALUE;
/** The last whole second whose nanoseconds fit in an i64 (in the year 2262). */
const MAX_EXPIRY_SECONDS: u64 = <u64>(i64.MAX_VALUE / 1000000000);

// The parsed record of a grant's limits, 8-aligned after its list.
/** u64: nanoseconds between calls (T); 0 when the grant has no rate. */
export const REC_INTERVAL: usize = 0;
/** u64: B·T, the most TAT may lead `now` by. */
export const REC_TOLERANCE: usize = 8;
/** u32: the burst B. */
export const REC_BURST: usize = 16;
/** u32: how many client ranges follow. */
export const REC_CLIENTS: usize = 20;
/** u32: bytes of the limit entries in the list. */
export const REC_TEXT: usize = 24;
/** u32: the quota's N; 0 when the grant has none. */
export const REC_QUOTA: usize = 28;
/** u32: the quota's window: QUOTA_DAY or QUOTA_MONTH. */
export const REC_QUOTA_PER: usize = 32;
/** Each client range: the address (16 bytes), then the prefix as a mask (16 bytes). */
export const REC_HEAD: usize = 40;
export const REC_CLIENT: usize = 32;

export const MAX_CLIENTS: u32 = 64;
export const MAX_RATE: u64 = 1000000;
export const MAX_BURST: u64 = 1000000;
export const MAX_QUOTA: u64 = 1000000000;
/** A quota's windows: calendar days, or calendar months, UTC. */
export const QUOTA_DAY: u32 = 1;
export const QUOTA_MONTH: u32 = 2;
const DAY_NS: i64 = 86400000000000;

/**
 * Sets the table up at `at`; called once by `init`, on a memory no call has written yet,
 * so the table is zero already: not filling it leaves its 4 MiB uncommitted until used.
 */
export function limitsInit(at: usize): void {
  state.limitTable = at;
  state.usageTable = at + LIMIT_TABLE_BYTES;
}

// @ts-ignore: decorator
@inline function load64(ptr: usize): u64 {
  if (ASC_FEATURE_THREADS) return atomic.load<u64>(ptr);
  return load<u64>(ptr);
}

// @ts-ignore: decorator
@inline function store64(ptr: usize, value: u64): void {
  if (ASC_FEATURE_THREADS) atomic.store<u64>(ptr, value);
  else store<u64>(ptr, value);
}

// @ts-ignore: decorator
@inline function cas64(ptr: usize, expected: u64, replacement: u64): bool {
  if (ASC_FEATURE_THREADS) return atomic.cmpxchg<u64>(ptr, expected, replacement) == expected;
  if (load<u64>(ptr) != expected) return false;
  store<u64>(ptr, replacement);
  return true;
}

// @ts-ignore: decorator
@inline function add64(ptr: usize, value: u64): void {
  if (ASC_FEATURE_THREADS) atomic.add<u64>(ptr, value);
  else store<u64>(ptr, load<u64>(ptr) + value);
}

// @ts-ignore: decorator
@inline function load32(ptr: usize): u32 {
  if (ASC_FEATURE_THREADS) return atomic.load<u32>(ptr);
  return load<u32>(ptr);
}

// @ts-ignore: decorator
@inline function add32(ptr: usize, value: u32): void {
  if (ASC_FEATURE_THREADS) atomic.add<u32>(ptr, value);
  else store<u32>(ptr, load<u32>(ptr) + value);
}

/** The first slot `serial` may hold in a table, as an index. */
// @ts-ignore: decorator
@inline function homeOf(serial: u64): u64 {
  return (serial * 0x9e3779b97f4a7c15) >> (64 - LIMIT_SLOTS_LOG2);
}

// @ts-ignore: decorator
@inline function slotAt(table: usize, home: u64, i: u32): usize {
  return table + <usize>((home + i) & SLOT_MASK) * LIMIT_SLOT;
}

/** The key of `slot`, once no claim is resetting it (two stores away from done). */
// @ts-ignore: decorator
@inline function keyAt(slot: usize): u64 {
  let k = load64(slot + KEY);
  while (k == CLAIMING) k = load64(slot + KEY);
  return k;
}

/** Pins `slot` if it holds `key`: then no claim takes it until `unpin`. */
function pin(slot: usize, key: u64): bool {
  add32(slot + USERS, 1);
  if (load64(slot + KEY) == key) return true;
  add32(slot + USERS, u32.MAX_VALUE);
  return false;
}

// @ts-ignore: decorator
@inline function unpin(slot: usize): void {
  add32(slot + USERS, u32.MAX_VALUE);
}

/** Whether a token of `expiry` (Unix seconds) has expired at `now` (Unix ns). */
// @ts-ignore: decorator
@inline function expiredAt(expiry: u64, now: i64): bool {
  return expiry <= MAX_EXPIRY_SECONDS && <i64>(expiry * 1000000000) <= now;
}

/** The slot `serial` holds in `table`, pinned; 0 when it holds none. */
function slotFound(table: usize, serial: u64): usize {
  const key = serial + 1;
  const home = homeOf(serial);
  let i: u32 = 0;
  while (i < MAX_PROBE) {
    const slot = slotAt(table, home, i);
    const k = keyAt(slot);
    if (k == 0) return 0;
    // Taken for another token between the two reads (this one had expired): look again.
    if (k == key && pin(slot, key)) return slot;
    if (k != key) i++;
  }
  return 0;
}

/**
 * The slot of `serial`, a token of `expiry`, in `table`, pinned, claimed for it at `now`
 * (Unix ns) if it has none; 0 when none of its MAX_PROBE slots is free.
 */
function slotOf(table: usize, serial: u64, expiry: u64, now: i64): usize {
  const found = slotFound(table, serial);
  if (found != 0) return found;
  const lock = CLAIM_LOCKS + (<usize>(homeOf(serial) & <u64>(CLAIM_STRIPES - 1)) << 2);
  while (!claimShared32(lock, 0, 1)) {}
  const slot = claim(table, serial, expiry, now);
  writeShared32(lock, 0);
  return slot;
}

/** `slotOf` under the lock of the serial's stripe: no other call claims for this serial meanwhile. */
function claim(table: usize, serial: u64, expiry: u64, now: i64): usize {
  const key = serial + 1;
  const home = homeOf(serial);
  for (;;) {
    let free: usize = 0;
    let seen: u64 = 0;
    let i: u32 = 0;
    // The whole probe, to its first empty slot: a call that held the lock before may have
    // claimed a slot past one that has freed since.
    while (i < MAX_PROBE) {
      const slot = slotAt(table, home, i);
      const k = keyAt(slot);
      if (k == key) {
        if (pin(slot, key)) return slot;
        continue;
      }
      if (k == 0) {
        if (free == 0) {
          free = slot;
          seen = 0;
        }
        break;
      }
      if (free == 0 && expiredAt(load64(slot + EXPIRY), now) && load32(slot + USERS) == 0) {
        free = slot;
        seen = k;
      }
      i++;
    }
    if (free == 0) return 0;
    // Another stripe's claim took it first: look again.
    if (!cas64(free + KEY, seen, CLAIMING)) continue;
    // A call of its token pinned it before the CAS, and still uses it: give it back.
    if (load32(free + USERS) != 0) {
      store64(free + KEY, seen);
      continue;
    }
    // Reset under CLAIMING, so that no call of the new serial reads the old one's bucket;
    // pinned before it is published, so that no claim takes it back first.
    store64(free + TAT, 0);
    store64(free + REQUESTS, 0);
    store64(free + LAST, 0);
    store64(free + QUOTA_HERE, 0);
    store64(free + QUOTA_OTHERS, 0);
    store64(free + EXPIRY, expiry);
    add32(free + USERS, 1);
    store64(free + KEY, key);
    return free;
  }
}

/**
 * Whether the 16-byte address at `addr` is in one of the `n` ranges at `ranges`. An
 * IPv4-mapped address is an IPv4 client: only a range of 96 bits or more can hold it
 * (one written as IPv4, or inside ::ffff:0:0/96), never a wider IPv6 range such as ::/0.
 */
function clientIn(ranges: usize, n: u32, addr: usize): bool {
  const a0 = load<u64>(addr);
  const a1 = load<u64>(addr, 8);
  // Bytes 0..11 are ::ffff: (bytes 10 and 11 0xff, read little-endian).
  const mapped = a0 == 0 && <u32>a1 == 0xffff0000;
  for (let i: u32 = 0; i < n; i++) {
    const r = ranges + <usize>i * REC_CLIENT;
    const m0 = load<u64>(r, 16);
    const m1 = load<u64>(r, 24);
    // A prefix of 96 bits or more: the mask's first 12 bytes all set.
    if (mapped && (m0 != u64.MAX_VALUE || <u32>m1 != u32.MAX_VALUE)) continue;
    if ((a0 & m0) == load<u64>(r) && (a1 & m1) == load<u64>(r, 8)) return true;
  }
  return false;
}

/**
 * One call of `n` (0: the client alone is checked) by token `serial`, which expires at
 * `expiry` (Unix seconds), of the grant whose limits record is at `rec`, from the address
 * at `addr`, at `now` (Unix ns): an ADMIT_ code. The wait of ADMIT_RATE goes to `out`;
 * for ADMIT_QUOTA, the wait until the window resets, then the reset's time (Unix ns).
 */
export function admitCall(rec: usize, serial: u64, expiry: u64, n: u32, now: i64, addr: usize, out: usize): i32 {
  const clients = load<u32>(rec, REC_CLIENTS);
  if (clients != 0 && !clientIn(rec + REC_HEAD, clients, addr)) return ADMIT_CLIENT;
  if (n == 0) return ADMIT_OK;
  // Shared by `share` gateways, each lets through 1/share of the rate, and of the burst
  // (rounded up, at least one call).
  let share = <u64>readShared32(LIMIT_SHARE);
  if (share == 0) share = 1;
  const interval = load<u64>(rec, REC_INTERVAL) * share;
  const burst = (<u64>load<u32>(rec, REC_BURST) + share - 1) / share;
  if (interval != 0 && <u64>n > burst) return ADMIT_OVER_BURST;
  const slot = slotOf(state.limitTable, serial, expiry, now);
  if (slot == 0) return ADMIT_TABLE_FULL;
  const quota = <u64>load<u32>(rec, REC_QUOTA);
  let window: u64 = 0;
  if (quota != 0) {
    const per = load<u32>(rec, REC_QUOTA_PER);
    window = <u64>quotaWindow(per, now);
    for (;;) {
      const word = load64(slot + QUOTA_HERE);
      const here = word >> 32 == window ? word & 0xffffffff : 0;
      const o = load64(slot + QUOTA_OTHERS);
      const others = o >> 32 == window ? o & 0xffffffff : 0;
      if (here + others + <u64>n > quota) {
        unpin(slot);
        const end = windowEnd(per, <u32>window);
        store<u64>(out + RESULT_WAIT, <u64>(end - now));
        store<u64>(out + RESULT_RESET, <u64>end);
        return ADMIT_QUOTA;
      }
      if (cas64(slot + QUOTA_HERE, word, (window << 32) | (here + <u64>n))) break;
    }
  }
  if (interval != 0) {
    const cost = <u64>n * interval;
    const tolerance = burst * interval;
    for (;;) {
      const tat = <i64>load64(slot + TAT);
      const next = (tat > now ? tat : now) + <i64>cost;
      const lead = <u64>(next - now);
      if (lead > tolerance) {
        // The quota took these calls first: give them back (unless its window has turned).
        if (quota != 0) {
          for (;;) {
            const word = load64(slot + QUOTA_HERE);
            if (word >> 32 != window || cas64(slot + QUOTA_HERE, word, word - <u64>n)) break;
          }
        }
        unpin(slot);
        store<u64>(out + RESULT_WAIT, lead - tolerance);
        return ADMIT_RATE;
      }
      if (cas64(slot + TAT, <u64>tat, <u64>next)) break;
    }
  }
  add64(slot + REQUESTS, <u64>n);
  store64(slot + LAST, <u64>now);
  unpin(slot);
  return ADMIT_OK;
}

/**
 * `n` calls let through for `serial`, a token without limits that expires at `expiry`
 * (Unix seconds), at `now` (Unix ns), counted in the usage table; a token with no slot
 * there is counted in USAGE_MISSES instead.
 */
export function countUse(serial: u64, expiry: u64, n: u32, now: i64): void {
  const slot = slotOf(state.usageTable, serial, expiry, now);
  if (slot == 0) {
    if (ASC_FEATURE_THREADS) atomic.add<u32>(USAGE_MISSES, n);
    else store<u32>(USAGE_MISSES, load<u32>(USAGE_MISSES) + n);
    return;
  }
  add64(slot + REQUESTS, <u64>n);
  store64(slot + LAST, <u64>now);
  unpin(slot);
}

/** The calls let through and the last one's time (ns) for `serial`, to `out`; false when it has no slot. */
export function usageOf(serial: u64, out: usize): bool {
  // A token is in one table only: its grant has limits or not for its whole life.
  let slot = slotFound(state.limitTable, serial);
  if (slot == 0) slot = slotFound(state.usageTable, serial);
  if (slot == 0) return false;
  store<u64>(out + RESULT_REQUESTS, load64(slot + REQUESTS));
  store<u64>(out + RESULT_LAST_USED, load64(slot + LAST));
  unpin(slot);
  return true;
}

/**
 * Adds `requests` calls, the last at `last` (ns, kept when later than the slot's), to
 * `serial`, a token that expires at `expiry` (Unix seconds), in the limits table
 * (`limited`) or the usage table: the counts a host restores at start. It takes a slot
 * never used or the token's own, no other token's. False when the table has no slot for it.
 */
export function restoreUse(serial: u64, expiry: u64, limited: bool, requests: u64, last: u64): bool {
  const slot = slotOf(limited ? state.limitTable : state.usageTable, serial, expiry, NEVER);
  if (slot == 0) return false;
  add64(slot + REQUESTS, requests);
  if (last > load64(slot + LAST)) store64(slot + LAST, last);
  unpin(slot);
  return true;
}

/**
 * The window of `now` (Unix ns) for a quota `per` day or month: whole days, or calendar
 * months, since 1970-01-01 UTC (the civil calendar of Howard Hinnant's `civil_from_days`).
 */
export function quotaWindow(per: u32, now: i64): u32 {
  const days = now <= 0 ? 0 : <u64>(now / DAY_NS);
  if (per == QUOTA_DAY) return <u32>days;
  const z = days + 719468;
  const era = z / 146097;
  const doe = z - era * 146097;
  const yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const mp = (5 * doy + 2) / 153;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return <u32>((year - 1970) * 12 + month - 1);
}

/** Unix ns at which window `w` of a quota `per` day or month ends (`days_from_civil`). */
export function windowEnd(per: u32, w: u32): i64 {
  if (per == QUOTA_DAY) return (<i64>w + 1) * DAY_NS;
  const next = <u64>w + 1;
  const month = next % 12 + 1;
  const year = 1970 + next / 12 - (month <= 2 ? 1 : 0);
  const era = year / 400;
  const yoe = year - era * 400;
  const doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5;
  const doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return <i64>(era * 146097 + doe - 719468) * DAY_NS;
}

/**
 * The quota of `serial`, of the grant whose limits record is at `rec`, at `now`: its
 * window (u32 at RESULT_WINDOW), the calls counted here (u64 at RESULT_HERE) and at the
 * other gateways (u64 at RESULT_OTHERS) in that window. False when the grant has no quota or the token no slot.
 */
export function quotaOf(rec: usize, serial: u64, now: i64, out: usize): bool {
  if (load<u32>(rec, REC_QUOTA) == 0) return false;
  const slot = slotFound(state.limitTable, serial);
  if (slot == 0) return false;
  const window = <u64>quotaWindow(load<u32>(rec, REC_QUOTA_PER), now);
  const word = load64(slot + QUOTA_HERE);
  const o = load64(slot + QUOTA_OTHERS);
  unpin(slot);
  store<u64>(out + RESULT_HERE, word >> 32 == window ? word & 0xffffffff : 0);
  store<u64>(out + RESULT_OTHERS, o >> 32 == window ? o & 0xffffffff : 0);
  store<u32>(out + RESULT_WINDOW, <u32>window);
  return true;
}

/**
 * Sets a quota count of `serial`, a token that expires at `expiry` (Unix seconds), in its
 * slot of the limits table, taking a slot never used or its own: `calls` in `window`,
 * counted here (`here`: added, as a restore at start adds what a snapshot saved; an older
 * window's count is replaced) or at the other gateways (replaced: the host gives their
 * latest sum). False when the table has no slot for it.
 */
export function setQuota(serial: u64, expiry: u64, window: u32, calls: u32, here: bool): bool {
  const slot = slotOf(state.limitTable, serial, expiry, NEVER);
  if (slot == 0) return false;
  const w = <u64>window;
  if (here) {
    for (;;) {
      const word = load64(slot + QUOTA_HERE);
      const seen = word >> 32;
      // A count of a later window than the one given stays: it is newer.
      if (seen > w) break;
      let sum = (seen == w ? word & 0xffffffff : 0) + <u64>calls;
      if (sum > 0xffffffff) sum = 0xffffffff;
      if (cas64(slot + QUOTA_HERE, word, (w << 32) | sum)) break;
    }
  } else {
    store64(slot + QUOTA_OTHERS, (w << 32) | <u64>calls);
  }
  unpin(slot);
  return true;
}

/** The calls of tokens without limits served uncounted (no slot): USAGE_MISSES. */
export function usageMisses(): u32 {
  if (ASC_FEATURE_THREADS) return atomic.load<u32>(USAGE_MISSES);
  return load<u32>(USAGE_MISSES);
}

// Parsing the limit entries (grantAdd).

/** A decimal of 1..max with no leading zero, the `n` bytes at `p`; 0 when it is not one. */
function decimal(p: usize, n: usize, max: u64): u64 {
  if (n == 0 || n > 10 || load<u8>(p) == 0x30) return 0;
  let v: u64 = 0;
  for (let i: usize = 0; i < n; i++) {
    const d = <u32>load<u8>(p + i) - 0x30;
    if (d > 9) return 0;
    v = v * 10 + d;
  }
  return v <= max ? v : 0;
}

/** Whether the `n` bytes at `p` (at most 8) are `word`'s, little-endian. */
function endsWith(p: usize, n: usize, word: u64): bool {
  let w: u64 = 0;
  for (let i: usize = 0; i < n; i++) w |= <u64>load<u8>(p + i) << (<u64>i << 3);
  return w == word;
}

function startsWith(p: usize, n: usize, word: u64, len: usize): bool {
  if (n <= len) return false;
  let w: u64 = 0;
  for (let i: usize = 0; i < len; i++) w |= <u64>load<u8>(p + i) << (<u64>i << 3);
  return w == word;
}

// "rate ", "burst ", "quota ", "client " as little-endian words; "/day" and "/month" too.
const RATE: u64 = 0x2065746172;
const QUOTA: u64 = 0x2061746f7571;
const PER_DAY: u64 = 0x7961642f;
const PER_MONTH: u64 = 0x68746e6f6d2f;
const BURST: u64 = 0x207473727562;
const CLIENT: u64 = 0x20746e65696c63;

function hexDigit(c: u32): i32 {
  if (c - 0x30 <= 9) return <i32>(c - 0x30);
  if (c - 0x61 <= 5) return <i32>(c - 0x61 + 10);
  return -1;
}

/**
 * Parses the limit entries at `p` (`n` bytes, each ending in `\n`) into the record at
 * `rec` (when not 0): the number of client ranges, or GRANT_TOO_MANY_CLIENTS, or
 * GRANT_BAD_LIMIT with the bad entry's index at RESULT_REFUSED_ENTRY.
 */
export function parseLimits(p: usize, n: usize, rec: usize): i32 {
  const parsed = parse(p, n, rec);
  if (parsed >= 0 || parsed == GRANT_TOO_MANY_CLIENTS) return parsed;
  store<u32>(resultBuf() + RESULT_REFUSED_ENTRY, <u32>(-1 - parsed));
  return GRANT_BAD_LIMIT;
}

/** `parseLimits`, a bad entry as -1 - its index. */
function parse(p: usize, n: usize, rec: usize): i32 {
  let index: i32 = 0;
  let start: usize = 0;
  let interval: u64 = 0;
  let burst: u64 = 0;
  let clients: u32 = 0;
  let quota: u64 = 0;
  let per: u32 = 0;
  let previous: usize = 0;
  let previousLen: usize = 0;
  while (start < n) {
    let end = start;
    while (load<u8>(p + end) != 0x0a) end++;
    const e = p + start;
    const len = end - start;
    if (index == 0 && startsWith(e, len, RATE, 5)) {
      const unit = load<u8>(e + len - 1);
      if (len < 8 || load<u8>(e + len - 2) != 0x2f) return -1 - index;
      const count = decimal(e + 5, len - 7, MAX_RATE);
      const per: u64 = unit == 0x73 ? 1000000000 : unit == 0x6d ? 60000000000 : unit == 0x68 ? 3600000000000 : 0;
      if (count == 0 || per == 0) return -1 - index;
      // Whole nanoseconds: at most 1,000,000 per second, T >= 1000 ns, so the rounding is
      // below one part in a thousand.
      interval = per / count;
    } else if (index == 1 && interval != 0 && startsWith(e, len, BURST, 6)) {
      burst = decimal(e + 6, len - 6, MAX_BURST);
      if (burst == 0) return -1 - index;
    } else if (quota == 0 && clients == 0 && (interval == 0 || burst != 0) && startsWith(e, len, QUOTA, 6)) {
      // "quota N/day" or "quota N/month".
      let slash = e + 6;
      while (slash < e + len && load<u8>(slash) != 0x2f) slash++;
      const tail = e + len - slash;
      if (tail == 4 && endsWith(slash, tail, PER_DAY)) per = QUOTA_DAY;
      else if (tail == 6 && endsWith(slash, tail, PER_MONTH)) per = QUOTA_MONTH;
      else return -1 - index;
      quota = decimal(e + 6, slash - e - 6, MAX_QUOTA);
      if (quota == 0) return -1 - index;
    } else if (startsWith(e, len, CLIENT, 7) && (interval == 0 || burst != 0)) {
      if (clients == MAX_CLIENTS) return GRANT_TOO_MANY_CLIENTS;
      // 32 hex digits, "/", a prefix 0..128 with no leading zero.
      if (len < 7 + 32 + 2 || len > 7 + 32 + 4 || load<u8>(e + 39) != 0x2f) return -1 - index;
      const plen = len - 40;
      let prefix: u32 = 0;
      if (plen == 1 && load<u8>(e + 40) == 0x30) {
        prefix = 0;
      } else {
        const v = decimal(e + 40, plen, 128);
        if (v == 0) return -1 - index;
        prefix = <u32>v;
      }
      // Ascending, so that equal sets are one grant.
      if (previous != 0) {
        const shorter = previousLen < len ? previousLen : len;
        const c = memory.compare(previous, e, shorter);
        if (c > 0 || (c == 0 && previousLen >= len)) return -1 - index;
      }
      previous = e;
      previousLen = len;
      const at = rec + REC_HEAD + <usize>clients * REC_CLIENT;
      for (let i: u32 = 0; i < 16; i++) {
        const hi = hexDigit(<u32>load<u8>(e + 7 + (<usize>i << 1)));
        const lo = hexDigit(<u32>load<u8>(e + 8 + (<usize>i << 1)));
        if (hi < 0 || lo < 0) return -1 - index;
        const bits: u32 = prefix >= (i + 1) * 8 ? 8 : prefix <= i * 8 ? 0 : prefix - i * 8;
        const mask = <u8>(0xff00 >> bits);
        const byte = <u8>((hi << 4) | lo);
        // Canonical: nothing set past the prefix.
        if ((byte & ~mask) != 0) return -1 - index;
        if (rec != 0) {
          store<u8>(at + i, byte);
          store<u8>(at + 16 + i, mask);
        }
      }
      clients++;
    } else {
      return -1 - index;
    }
    index++;
    start = end + 1;
  }
  if (index == 0 || (interval != 0 && burst == 0)) return -1 - index;
  if (rec != 0) {
    store<u64>(rec, interval, REC_INTERVAL);
    store<u64>(rec, interval * burst, REC_TOLERANCE);
    store<u32>(rec, <u32>burst, REC_BURST);
    store<u32>(rec, clients, REC_CLIENTS);
    store<u32>(rec, <u32>n, REC_TEXT);
    store<u32>(rec, <u32>quota, REC_QUOTA);
    store<u32>(rec, per, REC_QUOTA_PER);
  }
  return <i32>clients;
}

/** Bytes of the record of a grant with `clients` ranges. */
// @ts-ignore: decorator
@inline export function recordBytes(clients: u32): usize {
  return REC_HEAD + <usize>clients * REC_CLIENT;
}
