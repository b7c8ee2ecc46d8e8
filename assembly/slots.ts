// Slots: the memory one instance calls its own.
//
// A slot holds an instance's exchange buffers (the host writes a token or path there
// and reads results) and its scratch (SHA-256 schedule, HMAC blocks, the cache of
// checked tags). Two instances must never share one, or one's call would read the
// other's half-written input. Slot 0 sits in the data; the instance that calls `init`
// uses it. In the threads build, every other instance over the same memory calls
// `attach(slot)` for a slot of its own above the heap, and until then has none: its slot
// address is UNBOUND, past any memory, so its first buffer access traps instead of
// touching another thread's bytes.
import { INITIALIZED, READY, state } from './layout';
import { readShared32 } from './shared';
import { ATTACH_BAD_SLOT, ATTACH_NOT_READY, ATTACH_TAKEN } from './results';
import * as MAP from './memory-map';
import { RESULT_BYTES } from './result-record';

/** The `Authorization` header value or token text, in and out. */
export const TOKEN_CAP: usize = 512;
/** The request path. */
export const PATH_CAP: usize = 8192;
/** Larger inputs: keys, endpoint lists, entropy, hash inputs. */
export const IO_CAP: usize = 65536;
/** Results: the result record (result-record.ts), every call's fields apart. */
export const RESULT_CAP: usize = RESULT_BYTES;

// Tokens whose tag was checked lately: 256 lines of 64 bytes (see token.ts).
export const CACHE_LINES: usize = 256;
export const CACHE_LINE: usize = 64;

// Offsets in a slot. The first word is the slot's claim (threads build).
const TOKEN_AT: usize = 16;
const RESULT_AT: usize = TOKEN_AT + TOKEN_CAP;
const RAW_AT: usize = RESULT_AT + RESULT_CAP;
const TAG_AT: usize = RAW_AT + 64;
const HASH_AT: usize = TAG_AT + 32;
const INNER_BLOCK_AT: usize = HASH_AT + 32;
const OUTER_BLOCK_AT: usize = INNER_BLOCK_AT + 64;
const SCHEDULE_AT: usize = OUTER_BLOCK_AT + 64;
const PAD_AT: usize = SCHEDULE_AT + 64 * 4;
const KEY_BLOCK_AT: usize = PAD_AT + 2 * 64;
const SCRATCH_INNER_AT: usize = KEY_BLOCK_AT + 64;
const SCRATCH_OUTER_AT: usize = SCRATCH_INNER_AT + 32;
const SCRATCH_DIGEST_AT: usize = SCRATCH_OUTER_AT + 32;
const CACHE_AT: usize = SCRATCH_DIGEST_AT + 32;
const PATH_AT: usize = CACHE_AT + CACHE_LINES * CACHE_LINE;
const IO_AT: usize = PATH_AT + PATH_CAP;

/** Bytes of one slot (91,568 used, rounded up to 96 KiB). */
export const SLOT_BYTES: usize = <usize>MAP.SLOT_BYTES;

const SLOT_0: usize = memory.data(<i32>SLOT_BYTES, 16);

// Past any memory this build can have (its maximum is 2 GiB), so that every slot offset
// from it is out of bounds.
const UNBOUND: usize = 0x80000000;

// The slot of this instance: a Wasm global, so each instance has its own.
// @ts-ignore: decorator
@lazy let slotBase: usize = UNBOUND;

// @ts-ignore: decorator
@inline function slot(): usize {
  if (ASC_FEATURE_THREADS) return slotBase;
  return SLOT_0;
}

// @ts-ignore: decorator
@inline export function tokenBuf(): usize { return slot() + TOKEN_AT; }
// @ts-ignore: decorator
@inline export function pathBuf(): usize { return slot() + PATH_AT; }
// @ts-ignore: decorator
@inline export function ioBuf(): usize { return slot() + IO_AT; }
// @ts-ignore: decorator
@inline export function resultBuf(): usize { return slot() + RESULT_AT; }
/** The 57 bytes of the token being checked or issued (64 reserved). */
// @ts-ignore: decorator
@inline export function rawBuf(): usize { return slot() + RAW_AT; }
// @ts-ignore: decorator
@inline export function tagBuf(): usize { return slot() + TAG_AT; }
// @ts-ignore: decorator
@inline export function hashBuf(): usize { return slot() + HASH_AT; }
// @ts-ignore: decorator
@inline export function innerBlock(): usize { return slot() + INNER_BLOCK_AT; }
// @ts-ignore: decorator
@inline export function outerBlock(): usize { return slot() + OUTER_BLOCK_AT; }
// @ts-ignore: decorator
@inline export function scheduleBuf(): usize { return slot() + SCHEDULE_AT; }
// @ts-ignore: decorator
@inline export function padBuf(): usize { return slot() + PAD_AT; }
// @ts-ignore: decorator
@inline export function keyBlock(): usize { return slot() + KEY_BLOCK_AT; }
// @ts-ignore: decorator
@inline export function scratchInner(): usize { return slot() + SCRATCH_INNER_AT; }
// @ts-ignore: decorator
@inline export function scratchOuter(): usize { return slot() + SCRATCH_OUTER_AT; }
// @ts-ignore: decorator
@inline export function scratchDigest(): usize { return slot() + SCRATCH_DIGEST_AT; }
// @ts-ignore: decorator
@inline export function cacheBuf(): usize { return slot() + CACHE_AT; }

/** `init` binds its instance, the owner, to slot 0. */
export function bindOwner(): void {
  if (ASC_FEATURE_THREADS) slotBase = SLOT_0;
}

/**
 * The calls that change the state run on the owner alone (one writer): in the threads
 * build, any other instance that makes one aborts, as on a broken invariant.
 */
// @ts-ignore: decorator
@inline export function ownerOnly(): void {
  if (ASC_FEATURE_THREADS) {
    if (slotBase != SLOT_0) abort('only the instance that called init changes the state');
  }
}

/** How many slots the memory holds, slot 0 included; 0 before `init` has finished. */
export function slotCount(): u32 {
  if (readShared32(INITIALIZED) != READY) return 0;
  const end = <u64>memory.size() << 16;
  const start = <u64>state.slots;
  return end <= start ? 1 : <u32>(1 + (end - start) / <u64>SLOT_BYTES);
}

/**
 * Threads build: takes `slot` (1 .. slotCount() - 1) for this instance. 0, or
 * ATTACH_NOT_READY (no `init` has finished on this memory, or this instance already has a
 * slot), ATTACH_BAD_SLOT, ATTACH_TAKEN (another instance holds it).
 */
export function attachSlot(slot: u32): i32 {
  // Reading READY orders everything `init` wrote before this instance's first read.
  if (readShared32(INITIALIZED) != READY || slotBase != UNBOUND) return ATTACH_NOT_READY;
  if (slot == 0 || slot >= slotCount()) return ATTACH_BAD_SLOT;
  const base = state.slots + (<usize>(slot - 1)) * SLOT_BYTES;
  if (atomic.cmpxchg<u32>(base, 0, 1) != 0) return ATTACH_TAKEN;
  slotBase = base;
  return 0;
}

/** Threads build: gives this instance's slot back, wiped. 0, or -1 when it holds none it may give back. */
export function detachSlot(): i32 {
  if (slotBase == UNBOUND || slotBase == SLOT_0) return -1;
  const base = slotBase;
  memory.fill(base + TOKEN_AT, 0, SLOT_BYTES - TOKEN_AT);
  slotBase = UNBOUND;
  atomic.store<u32>(base, 0);
  return 0;
}
