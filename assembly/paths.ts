// Request paths and endpoint grants.
//
// The node this service restores matched endpoints by suffix, so a grant of `/ext/info`
// also opened `/anything/ext/info`, and a grant of "" opened everything. Here a path is
// granted only by an equal entry, by `*`, or by a subtree entry `/a/*`. The path that was
// authorised must be the path an upstream serves, so every path that some server, proxy
// or framework could read as another one is refused: whatever could become a dot or empty
// segment, a separator, a path end or a second round of decoding under that server's
// normalisation (stripped `;` parameters, trimmed dots and spaces, `\` taken for `/`,
// a NUL ending a C string, lenient or compatibility decoding of UTF-8). The rule is
// written out in assembly/README.md, "Paths".

/** The longest endpoint entry a grant may hold. */
export const MAX_ENTRY: usize = 1024;

const SLASH: u32 = 0x2f;
const DOT: u32 = 0x2e;
const STAR: u32 = 0x2a;
const PERCENT: u32 = 0x25;
const SEMICOLON: u32 = 0x3b;
const PLUS: u32 = 0x2b;
const SPACE: u32 = 0x20;

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
 * Whether an ASCII byte may arrive percent-encoded: not a control (%00-%1F, %7F: a NUL
 * ends C strings, line breaks split logs and headers), and not a character with a meaning
 * in a path, which a server that decodes before it parses would act on: `/` and `\`
 * separate, `.` makes dot segments, `;` starts parameters, `?` and `#` end the path, `%`
 * decodes again.
 */
// @ts-ignore: decorator
@inline function escapable(b: u32): bool {
  return b - 0x20 < 0x5f && b != SLASH && b != 0x5c && b != DOT && b != PERCENT && b != SEMICOLON && b != 0x3f && b != 0x23;
}

/**
 * Code points refused even as well-formed UTF-8, as inclusive ranges: controls (Cc),
 * separators (Z: no-break and other spaces, line and paragraph separators), default
 * ignorables (zero-width characters, variation selectors, tags, which some normalisers
 * drop), and every character whose NFKC form holds `.`, `/`, `\`, `%`, `;`, `?` or `#`
 * (fullwidth `．` and `／`, `‥` for `..`, `﹨`, `℀` for `a/c`...). Derived from Unicode
 * 17.0; test/unit/core.test.ts checks it against the running Node's Unicode data.
 */
const REFUSED_CODE_POINTS = memory.data<u32>([
  0x0080, 0x00A0, 0x00AD, 0x00AD, 0x034F, 0x034F, 0x037E, 0x037E, 0x061C, 0x061C, 0x115F, 0x1160,
  0x1680, 0x1680, 0x17B4, 0x17B5, 0x180B, 0x180F, 0x2000, 0x200F, 0x2024, 0x2026, 0x2028, 0x202F,
  0x2047, 0x2049, 0x205F, 0x206F, 0x2100, 0x2101, 0x2105, 0x2106, 0x2488, 0x249B, 0x3000, 0x3000,
  0x3164, 0x3164, 0x33C2, 0x33C2, 0x33C7, 0x33C7, 0x33D8, 0x33D8, 0xFE00, 0xFE0F, 0xFE14, 0xFE14,
  0xFE16, 0xFE16, 0xFE19, 0xFE19, 0xFE30, 0xFE30, 0xFE52, 0xFE52, 0xFE54, 0xFE54, 0xFE56, 0xFE56,
  0xFE5F, 0xFE5F, 0xFE68, 0xFE68, 0xFE6A, 0xFE6A, 0xFEFF, 0xFEFF, 0xFF03, 0xFF03, 0xFF05, 0xFF05,
  0xFF0E, 0xFF0F, 0xFF1B, 0xFF1B, 0xFF1F, 0xFF1F, 0xFF3C, 0xFF3C, 0xFFA0, 0xFFA0, 0xFFF0, 0xFFF8,
  0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A, 0x1F100, 0x1F100, 0xE0000, 0xE0FFF,
]);
const REFUSED_RANGES: usize = 46;

/** Whether a code point past ASCII is in REFUSED_CODE_POINTS (sorted: stop at the first range above it). */
function refusedCodePoint(cp: u32): bool {
  for (let k: usize = 0; k < REFUSED_RANGES; k++) {
    const range = REFUSED_CODE_POINTS + (k << 3);
    if (cp < load<u32>(range)) return false;
    if (cp <= load<u32>(range, 4)) return true;
  }
  return false;
}

/** The byte that the two hex digits at `q` encode, or -1 (not hex, or past `end`). */
// @ts-ignore: decorator
@inline function escapedByte(q: usize, end: usize): i32 {
  if (q + 2 > end) return -1;
  const hi = hexValue(load<u8>(q));
  const lo = hexValue(load<u8>(q + 1));
  return (hi | lo) < 0 ? -1 : (hi << 4) | lo;
}

/**
 * Checks `/seg/seg...` at `p`, in one pass that allocates nothing. Bytes are visible
 * ASCII but `\` and `#`, or percent escapes: of ASCII that `escapable` allows, or of
 * well-formed UTF-8 (shortest form, no surrogates, at most U+10FFFF, every byte of a
 * character escaped) for a code point not refused. A segment's name, the part before
 * its first `;` (the parameters Tomcat, Spring and Jetty strip), must hold something
 * other than dots and spaces (`.`, `%20`, `+`, `%2B`): otherwise it is empty, a dot
 * segment, or one once a server strips parameters or trims trailing dots and spaces.
 * With `trailingSlash`, the last segment may be empty (`/a/` or `/`). With `star`, `*`
 * is refused (an entry may hold it only as its final `/*`).
 */
function segmentsValid(p: usize, n: usize, trailingSlash: bool, star: bool): bool {
  if (n == 0 || load<u8>(p) != SLASH) return false;
  const end = p + n;
  let q = p + 1;
  let segStart = q;
  // Nothing but dots and spaces in this segment's name so far. Once a `;` ends a name
  // that is not blank, nothing later in the segment can make it blank again.
  let blank = true;
  while (q < end) {
    const c = <u32>load<u8>(q++);
    // Letters and digits, the bulk of any path, first.
    if ((c | 0x20) - 0x61 < 26 || c - 0x30 < 10) {
      blank = false;
    } else if (c == SLASH) {
      if (blank) return false;
      segStart = q;
      blank = true;
    } else if (c == PERCENT) {
      const b = escapedByte(q, end);
      if (b < 0) return false;
      q += 2;
      if (b < 0x80) {
        if (!escapable(b)) return false;
        if (b != SPACE && b != PLUS) blank = false;
        continue;
      }
      // C0 and C1 only start overlong forms, F5 and above code points past U+10FFFF.
      if (b < 0xc2 || b > 0xf4) return false;
      blank = false;
      // The continuation bytes still due, the bits so far, and the bounds of the next
      // continuation byte (narrower after E0, ED, F0 and F4).
      let due: u32;
      let cp = <u32>b;
      let low = 0x80;
      let high = 0xbf;
      if (b < 0xe0) {
        due = 1;
        cp &= 0x1f;
      } else if (b < 0xf0) {
        due = 2;
        cp &= 0x0f;
        if (b == 0xe0) low = 0xa0; // overlong below U+0800
        else if (b == 0xed) high = 0x9f; // surrogates
      } else {
        due = 3;
        cp &= 0x07;
        if (b == 0xf0) low = 0x90; // overlong below U+10000
        else if (b == 0xf4) high = 0x8f; // past U+10FFFF
      }
      do {
        // A character cut short by a raw byte, another escape or the end.
        if (q >= end || load<u8>(q) != PERCENT) return false;
        const next = escapedByte(q + 1, end);
        if (next < low || next > high) return false;
        cp = (cp << 6) | (<u32>next & 0x3f);
        q += 3;
        low = 0x80;
        high = 0xbf;
      } while (--due != 0);
      if (refusedCodePoint(cp)) return false;
    } else if (c == SEMICOLON) {
      if (blank) return false;
    } else if (!plainByte(c) || (star && c == STAR)) {
      return false;
    } else if (c != DOT && c != PLUS) {
      blank = false;
    }
  }
  return !blank || (trailingSlash && segStart == end);
}

/** Whether a request path may be served. */
export function requestPathValid(p: usize, n: usize): bool {
  return segmentsValid(p, n, true, false);
}

/**
 * Whether a grant entry is `*`, `/`, `/*`, a path, or a path followed by `/*`. `/` is
 * the root alone, where Ethereum nodes (geth, Besu, ganache...) serve JSON-RPC: the one
 * entry whose last segment is empty, as no other entry could grant that path but `*`.
 */
export function entryValid(p: usize, n: usize): bool {
  if (n == 1) return load<u8>(p) == STAR || load<u8>(p) == SLASH;
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
