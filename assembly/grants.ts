// The grant table: each distinct endpoint list is stored once and named by its index,
// which tokens carry. A list is the entries' bytes, each ending in a line feed. Lists
// are never changed or removed, so a thread that reads the count reads lists whose
// bytes were written before the count was published.
import { GRANT_COUNT, memoryReaches, state } from './layout';
import { resultBuf } from './slots';
import { readShared32, writeShared32 } from './shared';
import { entryValid, MAX_ENTRY } from './paths';

export const MAX_GRANTS: u32 = 65536;
export const MAX_ENTRIES: u32 = 128;
export const MAX_GRANT_BYTES: u32 = 16 << 20;
/** Bytes of the index: a list's address and length for each grant. */
export const GRANT_INDEX_BYTES: usize = <usize>MAX_GRANTS * 8;

export const GRANT_EMPTY: i32 = -1;
export const GRANT_TOO_MANY_ENTRIES: i32 = -2;
export const GRANT_TABLE_FULL: i32 = -3;
export const GRANT_BAD_ENTRY: i32 = -4;
export const GRANT_ENTRY_TOO_LONG: i32 = -5;

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
 * Validates the list at `p` and returns its id, adding it when new. On a bad entry, its
 * index goes to the first word of the result buffer.
 */
export function grantAdd(list: usize, listLen: usize): i32 {
  let p = list;
  let n = listLen;
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
  if (star) {
    p = STAR_LIST;
    n = 2;
  }
  const grantCount = readShared32(GRANT_COUNT);
  for (let id: u32 = 0; id < grantCount; id++) {
    if (grantLen(id) == n && memory.compare(grantPtr(id), p, n) == 0) return <i32>id;
  }
  if (grantCount == MAX_GRANTS || <u64>state.grantBytes + <u64>n > <u64>MAX_GRANT_BYTES) return GRANT_TABLE_FULL;
  const copy = state.grantArea + state.grantBytes;
  if (!memoryReaches(copy + n)) return GRANT_TABLE_FULL;
  memory.copy(copy, p, n);
  const id = grantCount;
  store<u32>(state.grantIndex + (<usize>id << 3), <u32>copy);
  store<u32>(state.grantIndex + (<usize>id << 3), <u32>n, 4);
  state.grantBytes += <u32>n;
  // Last: a thread that reads the new count finds the list and its index entry.
  writeShared32(GRANT_COUNT, id + 1);
  return <i32>id;
}
