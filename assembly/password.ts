// Random passwords from entropy the host hands in.
//
// Letters and digits only, so a generated password survives shells, YAML and copy-paste.
// Each character takes one entropy byte by rejection sampling: bytes of 248 and above
// (248 = 4 * 62) are skipped so that every character is equally likely.
import { PASSWORD_NEEDS_ENTROPY } from './results';

const ALPHABET: usize = memory.data<u8>([
  0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b, 0x4c, 0x4d,
  0x4e, 0x4f, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a,
  0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d,
  0x6e, 0x6f, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a,
  0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
]);
const ALPHABET_SIZE: u32 = 62;
const ACCEPT_BELOW: u32 = 248;

/**
 * Writes `length` characters to `out` drawn from `entropyLen` bytes at `entropy`.
 * Returns `length`, or PASSWORD_NEEDS_ENTROPY when the bytes ran out first (call again
 * with fresh, longer entropy).
 */
export function generate(entropy: usize, entropyLen: usize, length: usize, out: usize): i32 {
  let written: usize = 0;
  for (let i: usize = 0; i < entropyLen && written < length; i++) {
    const b = <u32>load<u8>(entropy + i);
    if (b < ACCEPT_BELOW) {
      store<u8>(out + written, load<u8>(ALPHABET + b % ALPHABET_SIZE));
      written++;
    }
  }
  return written == length ? <i32>length : PASSWORD_NEEDS_ENTROPY;
}
