// The grant table: each distinct grant is stored once and named by its index, which
// tokens carry. A grant is a list of entries, each ending in a line feed: its endpoints,
// then, for a grant with a method scope, one empty entry and its method patterns, then,
// for a grant with limits (limits.ts), one more empty entry and its limit entries (a grant
// with limits and no scope has the two empty entries in a row). Grants
// are never changed or removed, so a thread that reads the count reads grants whose
// bytes were written before the count was published.
import { GRANT_COUNT, memoryReaches, state } from './layout';
import { resultBuf } from './slots';
import { readShared32, writeShared32 } from './shared';
import * as MAP from './memory-map';
import { entryValid, MAX_ENTRY } from './paths';
import { REC_TEXT, parseLimits, recordBytes } from './limits';
import {
  GRANT_BAD_ENTRY, GRANT_BAD_METHOD, GRANT_EMPTY, GRANT_ENTRY_TOO_LONG, GRANT_METHOD_TOO_LONG, GRANT_NO_METHODS,
  GRANT_TABLE_FULL, GRANT_TOO_MANY_ENTRIES, GRANT_TOO_MANY_METHODS,
} from './results';
import { RESULT_REFUSED_ENTRY } from './result-record';

export const MAX_GRANTS: u32 = <u32>MAP.MAX_GRANTS;
export const MAX_ENTRIES: u32 = 128;
export const MAX_METHODS: u32 = 128;
/** The longest method pattern: JSON-RPC method names in use are far shorter. */
export const MAX_METHOD: usize = 128;
export const MAX_GRANT_BYTES: u32 = <u32>MAP.MAX_GRANT_BYTES;
// An index entry: the list's address, the bytes of its endpoint entries, the bytes of its
// method patterns after the empty entry (0 when it has no scope), and the address of its
// limits record (0 when it has no limits). The last two are one u64 that is 0 for a grant
// with neither, which the check of a token reads in one load.
const INDEX_ENTRY: usize = <usize>MAP.GRANT_INDEX_ENTRY_BYTES;
/** Bytes of the index. */
export const GRANT_INDEX_BYTES: usize = <usize>MAX_GRANTS * INDEX_ENTRY;

const NEWLINE: u8 = 0x0a;
const STAR: u8 = 0x2a;

// Every endpoint list with `*` in it grants the same, and so does every method scope with
// `*` in it: each is stored as `*` alone, once its other entries have been found valid too.
const STAR_LIST: usize = memory.data<u8>([STAR, NEWLINE]);

// What `validate` found beside the code it returns: flags, and where the scope starts.
const ENDPOINTS_STAR: i32 = 1;
const METHODS_STAR: i32 = 2;

/** Sets up the table with its index at `index` and its lists from `area` on; called once by `init`. */
export function grantsInit(index: usize, area: usize): void {
  state.grantIndex = index;
  state.grantArea = area;
  state.grantBytes = 0;
  writeShared32(GRANT_COUNT, 0);
}

// @ts-ignore: decorator
@inline function indexOf(id: u32): usize {
  return state.grantIndex + <usize>id * INDEX_ENTRY;
}

// @ts-ignore: decorator
@inline export function grantPtr(id: u32): usize {
  return <usize>load<u32>(indexOf(id));
}

/** Bytes of the grant's endpoint entries: its whole list when it has no method scope. */
// @ts-ignore: decorator
@inline export function grantEndpointsLen(id: u32): usize {
  return <usize>load<u32>(indexOf(id), 4);
}

/** Bytes of the grant's method patterns, after the empty entry; 0 when it has no method scope. */
// @ts-ignore: decorator
@inline export function grantMethodsLen(id: u32): usize {
  return <usize>load<u32>(indexOf(id), 8);
}

/** The address of the grant's limits record (limits.ts); 0 when it has no limits. */
// @ts-ignore: decorator
@inline export function grantLimits(id: u32): usize {
  return <usize>load<u32>(indexOf(id), 12);
}

/** Neither a method scope nor limits: the token's check ends at Valid. */
// @ts-ignore: decorator
@inline export function grantPlain(id: u32): bool {
  return load<u64>(indexOf(id), 8) == 0;
}

// The parts of the list `identify` read last: its endpoints, its methods (none: no
// scope), its limit entries (none: no limits) and how many client ranges they hold.
// Globals, so that reading a list allocates nothing; each instance has its own.
let eP: usize = 0;
let eN: usize = 0;
let mP: usize = 0;
let mN: usize = 0;
let lP: usize = 0;
let lN: usize = 0;
let clients: u32 = 0;

/**
 * Validates the list at `list` and splits it into the parts above: returns its id, or the
 * grant count when it is new, or a negative GRANT_ code (a bad entry's index goes to the
 * first word of the result buffer).
 */
function identify(list: usize, listLen: usize): i32 {
  const flags = validate(list, listLen);
  if (flags < 0) return flags;
  const sep = sectionEnd(list, 0, listLen);
  const scopeEnd = sep == listLen ? listLen : sectionEnd(list, sep + 1, listLen);
  eP = flags & ENDPOINTS_STAR ? STAR_LIST : list;
  eN = flags & ENDPOINTS_STAR ? 2 : sep;
  mP = flags & METHODS_STAR ? STAR_LIST : list + sep + 1;
  mN = sep == listLen ? 0 : flags & METHODS_STAR ? 2 : scopeEnd - sep - 1;
  lP = scopeEnd == listLen ? 0 : list + scopeEnd + 1;
  lN = scopeEnd == listLen ? 0 : listLen - scopeEnd - 1;
  clients = flags >>> 8;
  const id = lookup(eP, eN, mP, mN, lP, lN);
  return id >= 0 ? id : <i32>readShared32(GRANT_COUNT);
}

/**
 * The id the list at `p` has, or the id `grantAdd` would give it (the grant count) when
 * it is new; a negative GRANT_ code when it is refused, as `grantAdd` would. Changes
 * nothing, so a host can make a new grant durable before the core holds it.
 */
export function grantFind(list: usize, listLen: usize): i32 {
  const id = identify(list, listLen);
  if (id < 0 || <u32>id < readShared32(GRANT_COUNT)) return id;
  return room(stored(eN, mN, lN, clients)) ? id : GRANT_TABLE_FULL;
}

/**
 * Validates the list at `p` and returns its id, adding it when new. On a bad entry or
 * pattern, its index goes to the first word of the result buffer.
 */
export function grantAdd(list: usize, listLen: usize): i32 {
  const id = identify(list, listLen);
  if (id < 0 || <u32>id < readShared32(GRANT_COUNT)) return id;
  const n = stored(eN, mN, lN, clients);
  if (!room(n)) return GRANT_TABLE_FULL;
  const copy = state.grantArea + state.grantBytes;
  memory.copy(copy, eP, eN);
  let at = copy + eN;
  if (mN != 0 || lN != 0) {
    store<u8>(at, NEWLINE);
    memory.copy(at + 1, mP, mN);
    at += 1 + mN;
  }
  let record: usize = 0;
  if (lN != 0) {
    store<u8>(at, NEWLINE);
    memory.copy(at + 1, lP, lN);
    record = (at + 1 + lN + 7) & ~7;
    parseLimits(lP, lN, record);
  }
  const index = indexOf(<u32>id);
  store<u32>(index, <u32>copy);
  store<u32>(index, <u32>eN, 4);
  store<u32>(index, <u32>mN, 8);
  store<u32>(index, <u32>record, 12);
  state.grantBytes += <u32>n;
  // Last: a thread that reads the new count finds the list and its index entry.
  writeShared32(GRANT_COUNT, <u32>id + 1);
  return id;
}

/**
 * Whether one of the method patterns of grant `id` lets through the `n` bytes of a method
 * name at `name`: 1 when one does or the grant has no scope, 0 when none does, -1 when
 * there is no such grant. Only a pattern's length of the name is read, so a name longer
 * than its buffer (of which what fits was written) can still match `*` or a prefix.
 */
export function methodAllowed(id: u32, name: usize, n: usize): i32 {
  if (id >= readShared32(GRANT_COUNT)) return -1;
  const mN = grantMethodsLen(id);
  if (mN == 0) return 1;
  const m = grantPtr(id) + grantEndpointsLen(id) + 1;
  let start: usize = 0;
  while (start < mN) {
    let end = start;
    while (load<u8>(m + end) != NEWLINE) end++;
    const pattern = m + start;
    const len = end - start;
    if (load<u8>(pattern + len - 1) == STAR) {
      // `x*` lets through every name that starts with x, x itself included; `*`, every name.
      const prefix = len - 1;
      if (n >= prefix && memory.compare(pattern, name, prefix) == 0) return 1;
    } else if (len == n && memory.compare(pattern, name, n) == 0) {
      return 1;
    }
    start = end + 1;
  }
  return 0;
}

/**
 * How many bytes a grant of `eN` endpoint bytes, `mN` method bytes and `lN` limit bytes
 * with `clients` ranges takes stored: its list, then, with limits, the record, 8-aligned
 * (7 bytes of room for the alignment, so that the size does not depend on the address).
 */
// @ts-ignore: decorator
@inline function stored(eN: usize, mN: usize, lN: usize, clients: u32): usize {
  if (lN != 0) return eN + 1 + mN + 1 + lN + 7 + recordBytes(clients);
  return mN == 0 ? eN : eN + 1 + mN;
}

/** Where the first empty entry at or after `from` of a valid list is, or `n` when there is none. */
function sectionEnd(p: usize, from: usize, n: usize): usize {
  let start = from;
  while (start < n) {
    let end = start;
    while (load<u8>(p + end) != NEWLINE) end++;
    if (end == start) return start;
    start = end + 1;
  }
  return n;
}

/**
 * ENDPOINTS_STAR and METHODS_STAR when the endpoints or the method patterns hold `*`,
 * and the number of client ranges shifted left by 8; or a negative GRANT_ code; on a bad
 * entry, pattern or limit, its index goes to the first word of the result buffer. An
 * empty first entry is a bad entry, as it always was; an empty entry after endpoints
 * starts the method scope, and one after it (or right after the first) the limits.
 */
function validate(p: usize, n: usize): i32 {
  if (n == 0) return GRANT_EMPTY;
  if (load<u8>(p + n - 1) != NEWLINE) {
    store<u32>(resultBuf() + RESULT_REFUSED_ENTRY, 0);
    return GRANT_BAD_ENTRY;
  }
  let count: u32 = 0;
  let flags: i32 = 0;
  let start: usize = 0;
  while (start < n) {
    let end = start;
    while (load<u8>(p + end) != NEWLINE) end++;
    if (end == start && count > 0) return validateMethods(p + end + 1, n - end - 1, flags);
    if (count == MAX_ENTRIES) return GRANT_TOO_MANY_ENTRIES;
    if (end - start > MAX_ENTRY) {
      store<u32>(resultBuf() + RESULT_REFUSED_ENTRY, count);
      return GRANT_ENTRY_TOO_LONG;
    }
    if (!entryValid(p + start, end - start)) {
      store<u32>(resultBuf() + RESULT_REFUSED_ENTRY, count);
      return GRANT_BAD_ENTRY;
    }
    if (end - start == 1 && load<u8>(p + start) == STAR) flags |= ENDPOINTS_STAR;
    count++;
    start = end + 1;
  }
  return flags;
}

/** `validate` for the method patterns at `p`, `n` bytes after the empty entry. */
function validateMethods(p: usize, n: usize, flags: i32): i32 {
  if (n == 0) return GRANT_NO_METHODS;
  let count: u32 = 0;
  let start: usize = 0;
  while (start < n) {
    let end = start;
    while (load<u8>(p + end) != NEWLINE) end++;
    if (end == start) return validateLimits(p + end + 1, n - end - 1, flags);
    if (count == MAX_METHODS) return GRANT_TOO_MANY_METHODS;
    if (end - start > MAX_METHOD) {
      store<u32>(resultBuf() + RESULT_REFUSED_ENTRY, count);
      return GRANT_METHOD_TOO_LONG;
    }
    if (!patternValid(p + start, end - start)) {
      store<u32>(resultBuf() + RESULT_REFUSED_ENTRY, count);
      return GRANT_BAD_METHOD;
    }
    if (end - start == 1) {
      if (load<u8>(p + start) == STAR) flags |= METHODS_STAR;
    }
    count++;
    start = end + 1;
  }
  return flags;
}

/** `validate` for the limit entries at `p`, `n` bytes after their empty entry. */
function validateLimits(p: usize, n: usize, flags: i32): i32 {
  const parsed = parseLimits(p, n, 0);
  return parsed < 0 ? parsed : flags | (parsed << 8);
}

/** A method pattern: 1 or more visible ASCII bytes (0x21-0x7E), `*` only as the last. */
function patternValid(p: usize, n: usize): bool {
  if (n == 0) return false;
  for (let i: usize = 0; i < n; i++) {
    const c = <u32>load<u8>(p + i);
    if (c - 0x21 >= 0x5e) return false;
    if (c == STAR && i != n - 1) return false;
  }
  return true;
}

/**
 * The id of the stored grant whose endpoint entries are the `eN` bytes at `eP`, whose
 * method patterns are the `mN` bytes at `mP` (none when 0) and whose limit entries are
 * the `lN` bytes at `lP` (none when 0), or -1.
 */
function lookup(eP: usize, eN: usize, mP: usize, mN: usize, lP: usize, lN: usize): i32 {
  const grantCount = readShared32(GRANT_COUNT);
  for (let id: u32 = 0; id < grantCount; id++) {
    if (grantEndpointsLen(id) != eN || grantMethodsLen(id) != mN) continue;
    const record = grantLimits(id);
    if ((record == 0 ? 0 : <usize>load<u32>(record, REC_TEXT)) != lN) continue;
    const g = grantPtr(id);
    if (memory.compare(g, eP, eN) != 0 || (mN != 0 && memory.compare(g + eN + 1, mP, mN) != 0)) continue;
    if (lN == 0 || memory.compare(g + eN + 1 + mN + 1, lP, lN) == 0) return <i32>id;
  }
  return -1;
}

/** Whether a new list of `n` bytes fits the table (and, in the threads build, the memory). */
function room(n: usize): bool {
  return readShared32(GRANT_COUNT) < MAX_GRANTS && <u64>state.grantBytes + <u64>n <= <u64>MAX_GRANT_BYTES
    && memoryReaches(state.grantArea + state.grantBytes + n);
}
