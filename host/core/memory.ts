// The threads build's memory, sized by the host: a shared memory cannot grow (its buffers
// must stay valid on every thread), so the host makes it big enough, once, for the whole
// state and every instance's slot. The numbers are the core's own (assembly/memory-map.ts,
// compiled for the host too); go/core/memory_map.go is generated from the same file.
import {
  EXPIRY_BYTES,
  EXPIRY_PAGE_LOG2,
  GRANT_INDEX_ENTRY_BYTES,
  HEAP_BASE,
  LIMIT_SLOT_BYTES,
  LIMIT_SLOTS_LOG2,
  MAX_GRANT_BYTES,
  MAX_GRANTS,
  MAX_PAGES,
  MAX_WINDOW_LOG2,
  MIN_WINDOW_LOG2,
  PAGE_BYTES,
  RING_BYTE_LOG2,
  SLOT_BYTES,
  TABLE_ALIGN,
} from '../../assembly/memory-map.js';

/** The revocation window api-auth runs with: 2^22 serials. */
export const DEFAULT_WINDOW_LOG2 = 22;
/** Slots of the core's limits table (assembly/limits.ts): tokens with limits that have been used and not yet expired. */
export const LIMIT_SLOTS = 2 ** LIMIT_SLOTS_LOG2;

/**
 * The bytes of the state `init` lays out for a window of 2^windowLog2 serials, from the
 * memory's start to the end of the grant area, where the threads build's slots of
 * attached instances begin (assembly/index.ts, `init`).
 */
function stateBytes(windowLog2: number): number {
  const ring = 2 ** (windowLog2 - RING_BYTE_LOG2);
  const expiries = EXPIRY_BYTES * 2 ** (windowLog2 - EXPIRY_PAGE_LOG2);
  const tables = Math.ceil((HEAP_BASE + MAX_GRANTS * GRANT_INDEX_ENTRY_BYTES + ring + expiries) / TABLE_ALIGN) * TABLE_ALIGN;
  return tables + 2 * LIMIT_SLOTS * LIMIT_SLOT_BYTES + MAX_GRANT_BYTES;
}

/**
 * The pages of a shared memory for the threads build: the state of a revocation window
 * of 2^windowLog2 serials, and a slot for each of `threads` instances (the owner's
 * included). About 25.7 MiB for the default window, plus 96 KiB per thread beyond the first.
 */
export function sharedMemoryPages(windowLog2 = DEFAULT_WINDOW_LOG2, threads = 1): number {
  if (!Number.isInteger(windowLog2) || windowLog2 < MIN_WINDOW_LOG2 || windowLog2 > MAX_WINDOW_LOG2) {
    throw new RangeError(`windowLog2 must be an integer from ${MIN_WINDOW_LOG2} to ${MAX_WINDOW_LOG2}`);
  }
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError('threads must be an integer of at least 1');
  const pages = Math.ceil((stateBytes(windowLog2) + (threads - 1) * SLOT_BYTES) / PAGE_BYTES);
  if (pages > MAX_PAGES) throw new RangeError(`${threads} threads with windowLog2 ${windowLog2} need more than the threads build's 2 GiB`);
  return pages;
}

/** A shared memory for the threads build, sized once: it never grows. */
export function sharedMemory(windowLog2 = DEFAULT_WINDOW_LOG2, threads = 1): WebAssembly.Memory {
  const pages = sharedMemoryPages(windowLog2, threads);
  return new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
}
