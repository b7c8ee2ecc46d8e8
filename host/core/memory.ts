// The threads build's memory, sized by the host: a shared memory cannot grow (its buffers
// must stay valid on every thread), so the host makes it big enough, once, for the whole
// state and every instance's slot (assembly/layout.ts, "Where everything lives").
/** A Wasm page. */
export const PAGE_BYTES = 65536;
/** The revocation window's size, as the log2 of its serials: the default and the bounds `init` accepts. */
export const DEFAULT_WINDOW_LOG2 = 22;
export const MIN_WINDOW_LOG2 = 12;
export const MAX_WINDOW_LOG2 = 30;
/** Slots of the core's limits table (assembly/limits.ts): tokens with limits that have been used and not yet expired. */
export const LIMIT_SLOTS = 65536;

// The threads build's memory map (assembly/layout.ts and slots.ts): the data below the
// heap, the grant index, the revocation ring and its page expiries, the limits and usage
// tables (LIMIT_TABLE_BYTES each), room for every grant
// list, then one slot per instance beyond the owner's. test/unit/core-threads.test.ts pins it.
const HEAP_BASE = 2 * PAGE_BYTES;
const GRANT_INDEX_BYTES = 65536 * 16;
const LIMIT_TABLE_BYTES = LIMIT_SLOTS * 64;
const MAX_GRANT_BYTES = 16 * 2 ** 20;
const SLOT_BYTES = 96 * 1024;
const MAX_PAGES = 32768;

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
  const heap = HEAP_BASE + GRANT_INDEX_BYTES + 2 ** windowLog2 / 8 + 2 ** (windowLog2 - 12) * 8;
  const slots = Math.ceil(heap / 64) * 64 + 2 * LIMIT_TABLE_BYTES + MAX_GRANT_BYTES;
  const pages = Math.ceil((slots + (threads - 1) * SLOT_BYTES) / PAGE_BYTES);
  if (pages > MAX_PAGES) throw new RangeError(`${threads} threads with windowLog2 ${windowLog2} need more than the threads build's 2 GiB`);
  return pages;
}

/** A shared memory for the threads build, sized once: it never grows. */
export function sharedMemory(windowLog2 = DEFAULT_WINDOW_LOG2, threads = 1): WebAssembly.Memory {
  const pages = sharedMemoryPages(windowLog2, threads);
  return new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
}
