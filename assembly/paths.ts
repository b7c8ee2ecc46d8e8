// Request paths and endpoint grants.
//
// The node this service restores matched endpoints by suffix, so a grant of `/ext/info`
// also opened `/anything/ext/info`, and a grant of "" opened everything. Here a path is
// granted only by an equal entry, by `*`, or by a subtree entry `/a/*`. To make sure the
// path that was authorised is the path an upstream serves, paths that a server or proxy
// might rewrite (dot segments, empty segments, encoded `/`, `.` or `%`) are refused.

/** The longest endpoint entry a grant may hold. */
export const MAX_ENTRY: usize = 1024;

const SLASH: u8 = 0x2f;
const DOT: u8 = 0x2e;
const STAR: u8 = 0x2a;
const PERCENT: u8 = 0x25;

// @ts-ignore: decorator
@inline function hexValue(c: u32): i32 {
  if (c - 0x30 < 10) return <i32>(c - 0x30);
  const lower = c | 0x20;
  if (lower - 0x61 < 6) return <i32>(lower - 0x61 + 10);
  return -1;
}

/** Visible ASCII but `\` and `#`, which some servers rewrite or cut. */
// @ts-ignore: decorator
@inline function plainByte(c: u32): bool {
  return c - 0x21 < 0x5e && c != 0x5c && c != 0x23;
}

/**
 * Checks `/seg/seg...` at `p`. Segments are non-empty, not `.` or `..`, made of plain
 * bytes and well-formed percent escapes that do not encode `/`, `.` or `%`. With
 * `trailingSlash`, the last segment may be empty (`/a/` or `/`). With `star`, `*` is
 * refused (an entry may hold it only as its final `/*`).
 */
function segmentsValid(p: usize, n: usize, trailingSlash: bool, star: bool): bool {
  if (n == 0 || load<u8>(p) != SLASH) return false;
  let segStart: usize = 1;
  for (let i: usize = 1; i <= n; i++) {
    const c: u32 = i < n ? <u32>load<u8>(p + i) : SLASH;
    if (c == SLASH) {
      const len = i - segStart;
      if (len == 0) {
        if (!(trailingSlash && i == n)) return false;
      } else if (load<u8>(p + segStart) == DOT && (len == 1 || (len == 2 && load<u8>(p + segStart + 1) == DOT))) {
        return false;
      }
      segStart = i + 1;
    } else if (c == PERCENT) {
      if (i + 2 >= n) return false;
      const hi = hexValue(load<u8>(p + i + 1));
      const lo = hexValue(load<u8>(p + i + 2));
      if (hi < 0 || lo < 0) return false;
      const decoded = (hi << 4) | lo;
      if (decoded == SLASH || decoded == DOT || decoded == PERCENT) return false;
      i += 2;
    } else if (!plainByte(c) || (star && c == STAR)) {
      return false;
    }
  }
  return true;
}

/** Whether a request path may be served. */
export function requestPathValid(p: usize, n: usize): bool {
  return segmentsValid(p, n, true, false);
}

/** Whether a grant entry is `*`, `/*`, a path, or a path followed by `/*`. */
export function entryValid(p: usize, n: usize): bool {
  if (n == 1) return load<u8>(p) == STAR;
  if (n >= 2 && load<u8>(p + n - 1) == STAR && load<u8>(p + n - 2) == SLASH) {
    return n == 2 || segmentsValid(p, n - 2, false, true);
  }
  return segmentsValid(p, n, false, true);
}

/**
 * Whether one of the newline-terminated entries at `g` grants the path at `p`. Entries
 * were validated when the grant was made.
 */
export function grants(g: usize, gLen: usize, p: usize, n: usize): bool {
  let start: usize = 0;
  while (start < gLen) {
    let end = start;
    while (load<u8>(g + end) != 0x0a) end++;
    const e = g + start;
    const eLen = end - start;
    if (load<u8>(e + eLen - 1) == STAR) {
      // `*` alone, or a subtree `/a/*` whose prefix keeps its slash: `/a/`.
      const prefix = eLen - 1;
      if (prefix == 0) return true;
      if (n > prefix && memory.compare(e, p, prefix) == 0) return true;
    } else if (eLen == n && memory.compare(e, p, n) == 0) {
      return true;
    }
    start = end + 1;
  }
  return false;
}
