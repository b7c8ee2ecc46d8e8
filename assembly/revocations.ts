// Serial numbers and the revocation bitmap.
//
// Serials are handed out in order. The bitmap is a ring of 2^windowLog2 bits over the
// serials [floor, floor + 2^windowLog2): bit `serial mod size` says whether that token was
// revoked. Serials are grouped in pages; each page remembers the latest expiry of the
// tokens issued in it, and once a page is full and all its tokens have expired, the floor
// moves past it and its bits are cleared for reuse. So memory is fixed, and a revocation
// costs nothing once its token would have expired anyway.
import { state } from './layout';

export const PAGE_LOG2: u32 = 12;
export const PAGE: u64 = 1 << PAGE_LOG2;
export const MIN_WINDOW_LOG2: u32 = 12;
export const MAX_WINDOW_LOG2: u32 = 30;

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

/** Allocates the ring for 2^windowLog2 serials; called once by `init`. */
export function revocationsInit(windowLog2: u32): void {
  state.windowLog2 = windowLog2;
  const bytes = <usize>(windowSize() >> 3);
  state.bitmap = heap.alloc(bytes);
  memory.fill(state.bitmap, 0, bytes);
  const pages = <usize>(windowSize() >> PAGE_LOG2);
  state.pageExpiry = heap.alloc(pages << 3);
  memory.fill(state.pageExpiry, 0, pages << 3);
  state.floor = 0;
  state.nextSerial = 0;
}

/** Whether the next serial still fits in the window. */
// @ts-ignore: decorator
@inline export function canIssue(): bool {
  return state.nextSerial - state.floor < windowSize();
}

/** Takes the next serial for a token that expires at `expiry`. Call `canIssue` first. */
export function takeSerial(expiry: u64): u64 {
  const serial = state.nextSerial;
  const slot = state.pageExpiry + (pageSlot(serial) << 3);
  // The first serial of a page starts the page afresh: its slot may have served an
  // earlier, swept page.
  if ((serial & (PAGE - 1)) == 0 || load<u64>(slot) < expiry) store<u64>(slot, expiry);
  state.nextSerial = serial + 1;
  return serial;
}

/**
 * Whether a token of this serial must be refused as revoked. Serials outside
 * [floor, nextSerial) cannot belong to a live token; refusing them fails closed.
 */
export function isRevoked(serial: u64): bool {
  if (serial < state.floor || serial >= state.nextSerial) return true;
  return (load<u8>(bitAddress(serial)) & (1 << <u8>(serial & 7))) != 0;
}

/** Marks a serial revoked. 0: marked; 1: below the floor (expired, nothing to keep); -1: never issued. */
export function markRevoked(serial: u64): i32 {
  if (serial < state.floor) return 1;
  if (serial >= state.nextSerial) return -1;
  const at = bitAddress(serial);
  store<u8>(at, load<u8>(at) | (1 << <u8>(serial & 7)));
  return 0;
}

/** Moves the floor past every full page whose tokens have all expired at `now`. */
export function sweep(now: i64): void {
  const pageBytes = <usize>(PAGE >> 3);
  while (state.floor + PAGE <= state.nextSerial && <i64>load<u64>(state.pageExpiry + (pageSlot(state.floor) << 3)) <= now) {
    memory.fill(bitAddress(state.floor), 0, pageBytes);
    state.floor += PAGE;
  }
}

/**
 * Restores the counters after a restart: every serial below `nextSerial` was issued, and
 * its token expires by `expiryBound` at the latest. `floor` is rounded down to a page.
 */
export function restoreSerials(floor: u64, nextSerial: u64, expiryBound: u64): i32 {
  const base = floor & ~(PAGE - 1);
  if (nextSerial < base || nextSerial - base > windowSize()) return -1;
  memory.fill(state.bitmap, 0, <usize>(windowSize() >> 3));
  memory.fill(state.pageExpiry, 0, <usize>(windowSize() >> PAGE_LOG2) << 3);
  state.floor = base;
  state.nextSerial = nextSerial;
  for (let s = base; s < nextSerial; s += PAGE) store<u64>(state.pageExpiry + (pageSlot(s) << 3), expiryBound);
  return 0;
}
