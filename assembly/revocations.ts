// Serial numbers and the revocation bitmap.
//
// Serials are handed out in order. The bitmap is a ring of 2^windowLog2 bits over the
// serials [floor, floor + 2^windowLog2): bit `serial mod size` says whether that token was
// revoked. Serials are grouped in pages; each page remembers the latest expiry of the
// tokens issued in it, and once a page is full and all its tokens have expired, the floor
// moves past it and its bits are cleared for reuse. So memory is fixed, and a revocation
// costs nothing once its token would have expired anyway.
//
// Every thread reads the bits and the counters while the owner changes them (shared.ts):
// a revocation is one atomic OR, done before `revoke` returns.
import { FLOOR, NEXT_SERIAL, state } from './layout';
import { RESERVE_EXPIRED, RESERVE_OUT_OF_WINDOW, REVOKE_EXPIRED, REVOKE_MARKED, REVOKE_NEVER_ISSUED } from './results';
import { clearShared, orShared8, readShared64, readShared8, writeShared64 } from './shared';
import * as MAP from './memory-map';

export const PAGE_LOG2: u32 = <u32>MAP.EXPIRY_PAGE_LOG2;
export const PAGE: u64 = 1 << PAGE_LOG2;
export const MIN_WINDOW_LOG2: u32 = <u32>MAP.MIN_WINDOW_LOG2;
export const MAX_WINDOW_LOG2: u32 = <u32>MAP.MAX_WINDOW_LOG2;

// @ts-ignore: decorator
@inline function windowSize(): u64 {
  return <u64>1 << state.windowLog2;
}

// @ts-ignore: decorator
@inline function pageSlot(serial: u64): usize {
  return <usize>((serial >> PAGE_LOG2) & ((windowSize() >> PAGE_LOG2) - 1));
}

// @ts-ignore: decorator
@inline function bitAddress(serial: u64): usize {
  return state.bitmap + <usize>((serial & (windowSize() - 1)) >> 3);
}

/** Bytes of the ring for 2^windowLog2 serials. */
export function ringBytes(windowLog2: u32): usize {
  return <usize>1 << (windowLog2 - <u32>MAP.RING_BYTE_LOG2);
}

/** Bytes of the page expiries for 2^windowLog2 serials. */
export function pageExpiryBytes(windowLog2: u32): usize {
  return <usize>MAP.EXPIRY_BYTES << (windowLog2 - PAGE_LOG2);
}

/** Sets up the ring at `bitmap` and the page expiries at `pageExpiry`; called once by `init`. */
export function revocationsInit(windowLog2: u32, bitmap: usize, pageExpiry: usize): void {
  state.windowLog2 = windowLog2;
  state.bitmap = bitmap;
  memory.fill(bitmap, 0, ringBytes(windowLog2));
  state.pageExpiry = pageExpiry;
  memory.fill(pageExpiry, 0, pageExpiryBytes(windowLog2));
  writeShared64(FLOOR, 0);
  writeShared64(NEXT_SERIAL, 0);
}

/** Whether the next serial still fits in the window. */
// @ts-ignore: decorator
@inline export function canIssue(): bool {
  return readShared64(NEXT_SERIAL) - readShared64(FLOOR) < windowSize();
}

/** Takes the next serial for a token that expires at `expiry`. Call `canIssue` first. */
export function takeSerial(expiry: u64): u64 {
  const serial = readShared64(NEXT_SERIAL);
  const slot = state.pageExpiry + (pageSlot(serial) << 3);
  // The first serial of a page starts the page afresh: its slot may have served an
  // earlier, swept page.
  if ((serial & (PAGE - 1)) == 0 || load<u64>(slot) < expiry) store<u64>(slot, expiry);
  writeShared64(NEXT_SERIAL, serial + 1);
  return serial;
}

/**
 * Whether a token of this serial must be refused as revoked. Serials outside
 * [floor, nextSerial) cannot belong to a live token; refusing them fails closed.
 */
export function isRevoked(serial: u64): bool {
  // The bit before the bounds: `sweep` raises the floor before it clears a page, so a
  // thread that finds a bit already cleared finds the serial below the floor.
  const bit = readShared8(bitAddress(serial)) & (1 << <u32>(serial & 7));
  if (serial < readShared64(FLOOR) || serial >= readShared64(NEXT_SERIAL)) return true;
  return bit != 0;
}

/** Marks a serial revoked. 0: marked; 1: below the floor (expired, nothing to keep); -1: never issued. */
export function markRevoked(serial: u64): i32 {
  if (serial < readShared64(FLOOR)) return REVOKE_EXPIRED;
  if (serial >= readShared64(NEXT_SERIAL)) return REVOKE_NEVER_ISSUED;
  orShared8(bitAddress(serial), <u8>(1 << <u8>(serial & 7)));
  return REVOKE_MARKED;
}

/** Moves the floor past every full page whose tokens have all expired at `now`. */
export function sweep(now: i64): void {
  const next = readShared64(NEXT_SERIAL);
  let floor = readShared64(FLOOR);
  while (floor + PAGE <= next && <i64>load<u64>(state.pageExpiry + (pageSlot(floor) << 3)) <= now) {
    const bits = bitAddress(floor);
    floor += PAGE;
    writeShared64(FLOOR, floor);
    clearShared(bits, <usize>(PAGE >> 3));
  }
}

/**
 * Restores the counters after a restart: every serial below `nextSerial` was issued, and
 * its token expires by `expiryBound` at the latest. `floor` is rounded down to a page.
 * Part of starting up: no other thread serves yet.
 */
export function restoreSerials(floor: u64, nextSerial: u64, expiryBound: u64): i32 {
  const base = floor & ~(PAGE - 1);
  if (nextSerial < base || nextSerial - base > windowSize()) return -1;
  clearShared(state.bitmap, ringBytes(state.windowLog2));
  memory.fill(state.pageExpiry, 0, pageExpiryBytes(state.windowLog2));
  writeShared64(FLOOR, base);
  writeShared64(NEXT_SERIAL, nextSerial);
  for (let s = base; s < nextSerial; s += PAGE) store<u64>(state.pageExpiry + (pageSlot(s) << 3), expiryBound);
  return 0;
}

/**
 * Serials [start, end) of a block some issuer reserved (a gateway of a fleet, this one
 * included): checks treat them as issued, and their tokens expire by `expiryBound`. The
 * ceiling rises to `end` (never falls); each page of the block, and of any gap below it
 * that no block covers, keeps the larger of its bound and `expiryBound`, a page above
 * the old ceiling starting afresh (its slot may have served a swept page). 0;
 * RESERVE_EXPIRED when the whole block is below the floor; RESERVE_OUT_OF_WINDOW when
 * the range is empty or its end is past the window.
 */
export function reserveSerials(start: u64, end: u64, expiryBound: u64): i32 {
  if (end <= start) return RESERVE_OUT_OF_WINDOW;
  const floor = readShared64(FLOOR);
  if (end <= floor) return RESERVE_EXPIRED;
  if (end - floor > windowSize()) return RESERVE_OUT_OF_WINDOW;
  const next = readShared64(NEXT_SERIAL);
  let from = start < next ? start : next;
  if (from < floor) from = floor;
  for (let page = from & ~(PAGE - 1); page < end; page += PAGE) {
    const slot = state.pageExpiry + (pageSlot(page) << 3);
    if (page >= next || load<u64>(slot) < expiryBound) store<u64>(slot, expiryBound);
  }
  // Last: a reader that sees the new ceiling sees pages whose bits are clear.
  if (end > next) writeShared64(NEXT_SERIAL, end);
  return 0;
}

/** Whether a token of `serial` expiring at `expiry` may be issued: reserved, not revoked, within its page's bound. */
export function serialIssuable(serial: u64, expiry: u64): bool {
  if (serial < readShared64(FLOOR) || serial >= readShared64(NEXT_SERIAL)) return false;
  if ((readShared8(bitAddress(serial)) & (1 << <u32>(serial & 7))) != 0) return false;
  return load<u64>(state.pageExpiry + (pageSlot(serial) << 3)) >= expiry;
}
