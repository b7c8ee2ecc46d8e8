// The grant table: each distinct endpoint list is stored once and named by its index,
// which tokens carry. A list is the entries' bytes, each ending in a line feed. Lists
// are never changed or removed, so a thread that reads the count reads lists whose
// bytes were written before the count was published.
import { GRANT_COUNT, memoryReaches, state } from './layout';
import { resultBuf } from './slots';
import { readShared32, writeShared32 } from './shared';
import { entryValid, MAX_ENTRY } from './paths';
import { GRANT_BAD_ENTRY, GRANT_EMPTY, GRANT_ENTRY_TOO_LONG, GRANT_TABLE_FULL, GRANT_TOO_MANY_ENTRIES } from './results';

export const MAX_GRANTS: u32 = 65536;
export const MAX_ENTRIES: u32 = 128;
export const MAX_GRANT_BYTES: u32 = 16 << 20;
/** Bytes of the index: a list's address and length for each grant. */
export const GRANT_INDEX_BYTES: usize = <usize>MAX_GRANTS * 8;

// Every list with `*` in it grants the same: it is stored as `*` alone, once its other
// entries have been found valid too.
const STAR_LIST: usize = memory.data<u8>([0x2a, 0x0a]);

/** Sets up the table with its index at `index` and its lists from `area` on; called once by `init`. */
export function grantsInit(index: usize, area: usize): void {
  state.grantIndex = index;
  state.grantArea = area;
  state.grantBytes = 0;
  writeShared32(GRANT_COUNT, 0);
}

// @ts-ignore: decorator
@inline export function grantPtr(id: u32): usize {
  return <usize>load<u32>(state.grantIndex + (<usize>id << 3));
}

// @ts-ignore: decorator
@inline export function grantLen(id: u32): usize {
  return <usize>load<u32>(state.grantIndex + (<usize>id << 3), 4);
}

/**
 * The id the list at `p` has, or the id `grantAdd` would give it (the grant count) when
 * it is new; a negative GRANT_ code when it is refused, as `grantAdd` would. Changes
 * nothing, so a host can make a new list durable before the core holds it.
 */
export function grantFind(list: usize, listLen: usize): i32 {
  const star = validate(list, listLen);
  if (star < 0) return star;
  const p = star ? STAR_LIST : list;
  const n: usize = star ? 2 : listLen;
  const id = lookup(p, n);
  if (id >= 0) return id;
  return room(n) ? <i32>readShared32(GRANT_COUNT) : GRANT_TABLE_FULL;
}

/**
 * Validates the list at `p` and returns its id, adding it when new. On a bad entry, its
 * index goes to the first word of the result buffer.
 */
export function grantAdd(list: usize, listLen: usize): i32 {
  const star = validate(list, listLen);
  if (star < 0) return star;
  const p = star ? STAR_LIST : list;
  const n: usize = star ? 2 : listLen;
  const found = lookup(p, n);
  if (found >= 0) return found;
  if (!room(n)) return GRANT_TABLE_FULL;
  const copy = state.grantArea + state.grantBytes;
  memory.copy(copy, p, n);
  const id = readShared32(GRANT_COUNT);
  store<u32>(state.grantIndex + (<usize>id << 3), <u32>copy);
  store<u32>(state.grantIndex + (<usize>id << 3), <u32>n, 4);
  state.grantBytes += <u32>n;
  // Last: a thread that reads the new count finds the list and its index entry.
  writeShared32(GRANT_COUNT, id + 1);
  return <i32>id;
}

/**
 * 1 when the list holds `*`, 0 when it does not, or a negative GRANT_ code; on a bad
 * entry, its index goes to the first word of the result buffer.
 */
function validate(p: usize, n: usize): i32 {
  if (n == 0) return GRANT_EMPTY;
  if (load<u8>(p + n - 1) != 0x0a) {
    store<u32>(resultBuf(), 0);
    return GRANT_BAD_ENTRY;
  }
  let count: u32 = 0;
  let star = false;
  let start: usize = 0;
  while (start < n) {
    let end = start;
    while (load<u8>(p + end) != 0x0a) end++;
    if (count == MAX_ENTRIES) return GRANT_TOO_MANY_ENTRIES;
    if (end - start > MAX_ENTRY) {
      store<u32>(resultBuf(), count);
      return GRANT_ENTRY_TOO_LONG;
    }
    if (!entryValid(p + start, end - start)) {
      store<u32>(resultBuf(), count);
      return GRANT_BAD_ENTRY;
    }
    if (end - start == 1 && load<u8>(p + start) == 0x2a) star = true;
    count++;
    start = end + 1;
  }
  return star ? 1 : 0;
}

/** The id of the stored list equal to the `n` bytes at `p`, or -1. */
function lookup(p: usize, n: usize): i32 {
  const grantCount = readShared32(GRANT_COUNT);
  for (let id: u32 = 0; id < grantCount; id++) {
    if (grantLen(id) == n && memory.compare(grantPtr(id), p, n) == 0) return <i32>id;
  }
  return -1;
}

/** Whether a new list of `n` bytes fits the table (and, in the threads build, the memory). */
function room(n: usize): bool {
  return readShared32(GRANT_COUNT) < MAX_GRANTS && <u64>state.grantBytes + <u64>n <= <u64>MAX_GRANT_BYTES
    && memoryReaches(state.grantArea + state.grantBytes + n);
}
