// The grant table: each distinct endpoint list is stored once and named by its index,
// which tokens carry. A list is the entries' bytes, each ending in a line feed.
import { state, RESULT_BUF } from './layout';
import { entryValid, MAX_ENTRY } from './paths';

export const MAX_GRANTS: u32 = 65536;
export const MAX_ENTRIES: u32 = 128;
export const MAX_GRANT_BYTES: u32 = 16 << 20;

export const GRANT_EMPTY: i32 = -1;
export const GRANT_TOO_MANY_ENTRIES: i32 = -2;
export const GRANT_TABLE_FULL: i32 = -3;
export const GRANT_BAD_ENTRY: i32 = -4;
export const GRANT_ENTRY_TOO_LONG: i32 = -5;

// Every list with `*` in it grants the same: it is stored as `*` alone, once its other
// entries have been found valid too.
const STAR_LIST: usize = memory.data<u8>([0x2a, 0x0a]);

/** Reserves the index of the table; called once by `init`. */
export function grantsInit(): void {
  state.grantIndex = heap.alloc(<usize>MAX_GRANTS * 8);
  state.grantCount = 0;
  state.grantBytes = 0;
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
    store<u32>(RESULT_BUF, 0);
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
      store<u32>(RESULT_BUF, count);
      return GRANT_ENTRY_TOO_LONG;
    }
    if (!entryValid(p + start, end - start)) {
      store<u32>(RESULT_BUF, count);
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
  for (let id: u32 = 0; id < state.grantCount; id++) {
    if (grantLen(id) == n && memory.compare(grantPtr(id), p, n) == 0) return <i32>id;
  }
  if (state.grantCount == MAX_GRANTS || <u64>state.grantBytes + <u64>n > <u64>MAX_GRANT_BYTES) return GRANT_TABLE_FULL;
  const copy = heap.alloc(n);
  memory.copy(copy, p, n);
  const id = state.grantCount;
  store<u32>(state.grantIndex + (<usize>id << 3), <u32>copy);
  store<u32>(state.grantIndex + (<usize>id << 3), <u32>n, 4);
  state.grantBytes += <u32>n;
  state.grantCount = id + 1;
  return <i32>id;
}
