// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) over raw linear memory.
// Nothing here allocates: states, the message schedule and padding live in the calling
// instance's slot (slots.ts), so threads hash side by side.
import { keyBlock, padBuf, scheduleBuf, scratchDigest, scratchInner, scratchOuter } from './slots';

// Round constants: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes.
const K: usize = memory.data<u32>([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

// Initial hash value: the first 32 bits of the fractional parts of the square roots of
// the first 8 primes.
const H0: usize = memory.data<u32>([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

/** Bytes in one SHA-256 block. */
export const BLOCK: usize = 64;
/** Bytes in a digest, and in a hash state (eight 32-bit words). */
export const DIGEST: usize = 32;

// @ts-ignore: decorator
@inline function CH(x: u32, y: u32, z: u32): u32 { return (x & y) ^ (~x & z); }
// @ts-ignore: decorator
@inline function MAJ(x: u32, y: u32, z: u32): u32 { return (x & y) ^ (x & z) ^ (y & z); }
// @ts-ignore: decorator
@inline function EP0(x: u32): u32 { return rotr<u32>(x, 2) ^ rotr<u32>(x, 13) ^ rotr<u32>(x, 22); }
// @ts-ignore: decorator
@inline function EP1(x: u32): u32 { return rotr<u32>(x, 6) ^ rotr<u32>(x, 11) ^ rotr<u32>(x, 25); }
// @ts-ignore: decorator
@inline function SIG0(x: u32): u32 { return rotr<u32>(x, 7) ^ rotr<u32>(x, 18) ^ (x >>> 3); }
// @ts-ignore: decorator
@inline function SIG1(x: u32): u32 { return rotr<u32>(x, 17) ^ rotr<u32>(x, 19) ^ (x >>> 10); }

/** Sets a hash state to the initial value. */
// @ts-ignore: decorator
@inline export function reset(state: usize): void {
  memory.copy(state, H0, DIGEST);
}

/** Folds one 64-byte block into a state of eight native-endian words. */
export function compress(state: usize, block: usize): void {
  const schedule = scheduleBuf();
  for (let i: usize = 0; i < 16; i++) {
    store<u32>(schedule + (i << 2), bswap<u32>(load<u32>(block + (i << 2))));
  }
  for (let i: usize = 16; i < 64; i++) {
    const w = SIG1(load<u32>(schedule + ((i - 2) << 2))) + load<u32>(schedule + ((i - 7) << 2)) +
      SIG0(load<u32>(schedule + ((i - 15) << 2))) + load<u32>(schedule + ((i - 16) << 2));
    store<u32>(schedule + (i << 2), w);
  }
  let a = load<u32>(state, 0);
  let b = load<u32>(state, 4);
  let c = load<u32>(state, 8);
  let d = load<u32>(state, 12);
  let e = load<u32>(state, 16);
  let f = load<u32>(state, 20);
  let g = load<u32>(state, 24);
  let h = load<u32>(state, 28);
  for (let i: usize = 0; i < 64; i++) {
    const t1 = h + EP1(e) + CH(e, f, g) + load<u32>(K + (i << 2)) + load<u32>(schedule + (i << 2));
    const t2 = EP0(a) + MAJ(a, b, c);
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  store<u32>(state, load<u32>(state, 0) + a, 0);
  store<u32>(state, load<u32>(state, 4) + b, 4);
  store<u32>(state, load<u32>(state, 8) + c, 8);
  store<u32>(state, load<u32>(state, 12) + d, 12);
  store<u32>(state, load<u32>(state, 16) + e, 16);
  store<u32>(state, load<u32>(state, 20) + f, 20);
  store<u32>(state, load<u32>(state, 24) + g, 24);
  store<u32>(state, load<u32>(state, 28) + h, 28);
}

/** Writes a state out as the big-endian digest bytes. */
export function digestOut(state: usize, out: usize): void {
  for (let i: usize = 0; i < 32; i += 4) store<u32>(out + i, bswap<u32>(load<u32>(state + i)));
}

/**
 * Hashes `len` bytes at `data` into `state` and pads, given that `before` bytes were
 * already folded into it (a whole number of blocks). The state then holds the digest.
 */
export function finish(state: usize, data: usize, len: usize, before: u64): void {
  let off: usize = 0;
  while (len - off >= BLOCK) {
    compress(state, data + off);
    off += BLOCK;
  }
  const rest = len - off;
  const pad = padBuf();
  memory.fill(pad, 0, 2 * BLOCK);
  memory.copy(pad, data + off, rest);
  store<u8>(pad + rest, 0x80);
  const padded: usize = rest + 9 > BLOCK ? 2 * BLOCK : BLOCK;
  store<u64>(pad + padded - 8, bswap<u64>((before + <u64>len) << 3));
  compress(state, pad);
  if (padded > BLOCK) compress(state, pad + BLOCK);
}

/** SHA-256 of `len` bytes at `data`; the 32-byte digest goes to `out`. */
export function sha256(data: usize, len: usize, out: usize): void {
  const state = scratchInner();
  reset(state);
  finish(state, data, len, 0);
  digestOut(state, out);
}

/**
 * Derives the HMAC inner and outer states for a key: each is the hash state after the
 * key block XOR ipad (resp. opad), so a MAC of a short message costs two compressions.
 */
export function hmacStates(key: usize, keyLen: usize, inner: usize, outer: usize): void {
  const block = keyBlock();
  memory.fill(block, 0, BLOCK);
  if (keyLen > BLOCK) sha256(key, keyLen, block);
  else memory.copy(block, key, keyLen);
  for (let i: usize = 0; i < BLOCK; i++) store<u8>(block + i, load<u8>(block + i) ^ 0x36);
  reset(inner);
  compress(inner, block);
  for (let i: usize = 0; i < BLOCK; i++) store<u8>(block + i, load<u8>(block + i) ^ (0x36 ^ 0x5c));
  reset(outer);
  compress(outer, block);
  memory.fill(block, 0, BLOCK);
}

/** HMAC-SHA256 of any key and message; the 32-byte tag goes to `out`. */
export function hmacSha256(key: usize, keyLen: usize, msg: usize, msgLen: usize, out: usize): void {
  const inner = scratchInner();
  const outer = scratchOuter();
  const digest = scratchDigest();
  hmacStates(key, keyLen, inner, outer);
  finish(inner, msg, msgLen, BLOCK);
  digestOut(inner, digest);
  finish(outer, digest, DIGEST, BLOCK);
  digestOut(outer, out);
}

/** Compares `len` bytes in time that depends only on `len`. */
export function equalConstantTime(a: usize, b: usize, len: usize): bool {
  let diff: u64 = 0;
  let i: usize = 0;
  for (; i + 8 <= len; i += 8) diff |= load<u64>(a + i) ^ load<u64>(b + i);
  for (; i < len; i++) diff |= <u64>(load<u8>(a + i) ^ load<u8>(b + i));
  return diff == 0;
}
