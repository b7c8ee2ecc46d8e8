// Access to the state that every thread reads while the owner writes it.
//
// In the threads build (core-threads.wasm) these are Wasm atomics, which are sequentially
// consistent: all of them, on every thread, fall in one order that each thread's program
// order respects. The publication rules of the core rest on that order (README.md beside
// this file, "Memory ordering"). In the plain build (core.wasm) they are plain loads and
// stores of the same addresses, so one source serves both builds.
//
// Shared fields are only ever touched through these helpers; everything else in memory is
// either per-thread (a slot) or written once by `init` before any other thread attaches.

// @ts-ignore: decorator
@inline export function readShared8(ptr: usize): u32 {
  if (ASC_FEATURE_THREADS) return <u32>atomic.load<u8>(ptr);
  return <u32>load<u8>(ptr);
}

// @ts-ignore: decorator
@inline export function orShared8(ptr: usize, bits: u8): void {
  if (ASC_FEATURE_THREADS) atomic.or<u8>(ptr, bits);
  else store<u8>(ptr, load<u8>(ptr) | bits);
}

// @ts-ignore: decorator
@inline export function readShared32(ptr: usize): u32 {
  if (ASC_FEATURE_THREADS) return atomic.load<u32>(ptr);
  return load<u32>(ptr);
}

// @ts-ignore: decorator
@inline export function writeShared32(ptr: usize, value: u32): void {
  if (ASC_FEATURE_THREADS) atomic.store<u32>(ptr, value);
  else store<u32>(ptr, value);
}

/** Sets `ptr` from `expected` to `replacement` if it holds `expected`; whether it did. */
// @ts-ignore: decorator
@inline export function claimShared32(ptr: usize, expected: u32, replacement: u32): bool {
  if (ASC_FEATURE_THREADS) return atomic.cmpxchg<u32>(ptr, expected, replacement) == expected;
  if (load<u32>(ptr) != expected) return false;
  store<u32>(ptr, replacement);
  return true;
}

// @ts-ignore: decorator
@inline export function readShared64(ptr: usize): u64 {
  if (ASC_FEATURE_THREADS) return atomic.load<u64>(ptr);
  return load<u64>(ptr);
}

// @ts-ignore: decorator
@inline export function writeShared64(ptr: usize, value: u64): void {
  if (ASC_FEATURE_THREADS) atomic.store<u64>(ptr, value);
  else store<u64>(ptr, value);
}

/** Copies `len` (a multiple of 8) shared bytes at `src`, 8-aligned, to private memory at `dst`. */
export function readSharedBytes(dst: usize, src: usize, len: usize): void {
  if (ASC_FEATURE_THREADS) {
    for (let i: usize = 0; i < len; i += 8) store<u64>(dst + i, atomic.load<u64>(src + i));
  } else {
    memory.copy(dst, src, len);
  }
}

/** Copies `len` (a multiple of 8) private bytes at `src` to shared memory at `dst`, 8-aligned. */
export function writeSharedBytes(dst: usize, src: usize, len: usize): void {
  if (ASC_FEATURE_THREADS) {
    for (let i: usize = 0; i < len; i += 8) atomic.store<u64>(dst + i, load<u64>(src + i));
  } else {
    memory.copy(dst, src, len);
  }
}

/** Zeroes `len` (a multiple of 8) shared bytes at `ptr`, 8-aligned. */
export function clearShared(ptr: usize, len: usize): void {
  if (ASC_FEATURE_THREADS) {
    for (let i: usize = 0; i < len; i += 8) atomic.store<u64>(ptr + i, 0);
  } else {
    memory.fill(ptr, 0, len);
  }
}
