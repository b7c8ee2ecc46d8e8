// Where everything lives in linear memory.
//
//   0 .. HEAP_BASE        data: constant tables, the state below, the key states, and
//                         slot 0 (the exchange buffers and scratch of the instance that
//                         called `init`; see slots.ts)
//   HEAP_BASE ..          the heap, laid out by `init`: the grant index (MAX_GRANTS * 16),
//                         the revocation ring (2^windowLog2 / 8), the page expiries
//                         (2^windowLog2 / 4096 * 8), the limits table (limits.ts,
//                         LIMIT_TABLE_BYTES), the usage table of tokens without
//                         limits (the same size), then the grant lists (up to
//                         MAX_GRANT_BYTES), which fill upwards as grants are added
//   slots ..              threads build: slots 1, 2, ... (SLOT_BYTES each) up to the end
//                         of the memory, one per attached instance
//
// The plain build grows its memory as grants are added. The threads build imports a
// shared memory that never grows (its buffers must stay valid on every thread), so the
// host sizes it at start for the whole grant area and its threads, and `init` refuses a
// memory that is too small.
//
// All mutable state sits in memory, never in Wasm globals, so that instances on several
// threads see one state. The only globals are per instance: which slot it uses.
//
// The sizes are memory-map.ts's, which the hosts read too.
import * as MAP from './memory-map';

/** Where the heap starts in both builds: the data (slot 0 included) fits below. */
export const HEAP_BASE: usize = <usize>MAP.HEAP_BASE;

/** What only `init` and the owner write: fixed once `init` returns, or private to the owner. */
@unmanaged export class State {
  windowLog2: u32;
  grantBytes: u32;
  grantIndex: usize;
  bitmap: usize;
  pageExpiry: usize;
  grantArea: usize;
  slots: usize;
  limitTable: usize;
  usageTable: usize;
}

export const state = changetype<State>(memory.data(48, 16));

// The fields every thread reads while the owner changes them: through shared.ts only.
const SHARED: usize = memory.data(32, 16);
/** u64: the serial the next token gets. */
export const NEXT_SERIAL: usize = SHARED;
/** u64: the lowest serial the revocation ring still tracks. */
export const FLOOR: usize = SHARED + 8;
/** u32: 0 before the first key; odd while a key is being set; even (2, 4, ...) once set. */
export const KEY_EPOCH: usize = SHARED + 16;
/** u32: the password generation. */
export const GENERATION: usize = SHARED + 20;
/** u32: how many grants are published. */
export const GRANT_COUNT: usize = SHARED + 24;
/** u32: NOT_INITIALIZED, INITIALIZING or READY. */
export const INITIALIZED: usize = SHARED + 28;

export const NOT_INITIALIZED: u32 = 0;
export const INITIALIZING: u32 = 1;
export const READY: u32 = 2;

/**
 * u32: how many gateways share each token's rate (limits.ts); 0 and 1 both mean this one
 * alone. Written by the owner, read by every thread's `admit`.
 */
export const LIMIT_SHARE: usize = memory.data(8, 8);

/**
 * u32: the admitted calls of tokens without limits that found no slot in the usage table
 * (limits.ts), so were served uncounted. Added to by every thread, read by the host's metrics.
 */
export const USAGE_MISSES: usize = memory.data(8, 8);

/**
 * u32 each: the locks under which a slot of the limits or usage table is claimed
 * (limits.ts), CLAIM_STRIPES (64) of them, chosen by the home slot of the serial. 0
 * free, 1 held.
 */
export const CLAIM_STRIPES: u32 = 64;
export const CLAIM_LOCKS: usize = memory.data(256, 8);

/** HMAC inner and outer states of the token key, written under KEY_EPOCH. */
export const KEY_INNER: usize = memory.data(32, 16);
export const KEY_OUTER: usize = memory.data(32, 16);

/**
 * Whether the memory reaches `end`: the plain build grows it when it does not (doubling,
 * so that adding grants one by one grows it rarely); the threads build never grows it.
 */
export function memoryReaches(end: usize): bool {
  const pages = memory.size();
  const have = <usize>pages << 16;
  if (end <= have) return true;
  if (ASC_FEATURE_THREADS) return false;
  const needed = <i32>((end - have + 0xffff) >>> 16);
  return memory.grow(max(pages, needed)) >= 0 || memory.grow(needed) >= 0;
}
