// bufferutil ships no types: the one function the frame writer uses.
declare module 'bufferutil' {
  /** Writes `source[0, length)` XOR the 4-byte `mask` into `output` from `offset`. */
  export function mask(source: Uint8Array, mask: Uint8Array, output: Uint8Array, offset: number, length: number): void;
  const bufferutil: { mask: typeof mask };
  export default bufferutil;
}
