// Where everything lives in linear memory.
//
// The exchange buffers are how the host passes bytes in and reads them out: it writes
// into them, calls an export with lengths, and reads the result, so the hot path neither
// allocates nor copies twice. All mutable state of the core sits in memory too (never in
// Wasm globals), so that instances on several threads can later share one memory.

/** The `Authorization` header value or token text, in and out. */
export const TOKEN_CAP: usize = 512;
export const TOKEN_BUF: usize = memory.data(<i32>TOKEN_CAP, 16);

/** The request path. */
export const PATH_CAP: usize = 8192;
export const PATH_BUF: usize = memory.data(<i32>PATH_CAP, 16);

/** Larger inputs: keys, endpoint lists, entropy, hash inputs. */
export const IO_CAP: usize = 65536;
export const IO_BUF: usize = memory.data(<i32>IO_CAP, 16);

/** Results: a digest, the claims of a token, the index of a refused entry. */
export const RESULT_CAP: usize = 64;
export const RESULT_BUF: usize = memory.data(<i32>RESULT_CAP, 16);

/** The core's durable-in-spirit state: what the host restores after a restart. */
@unmanaged export class State {
  initialized: u32;
  keySet: u32;
  generation: u32;
  windowLog2: u32;
  grantCount: u32;
  grantBytes: u32;
  grantIndex: usize;
  bitmap: usize;
  pageExpiry: usize;
  nextSerial: u64;
  floor: u64;
}

export const state = changetype<State>(memory.data(64, 16));

/** HMAC inner and outer states of the token key. */
export const KEY_INNER: usize = memory.data(32, 16);
export const KEY_OUTER: usize = memory.data(32, 16);
