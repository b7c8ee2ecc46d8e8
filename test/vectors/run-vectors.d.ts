// Types of run-vectors.js, for the TypeScript tests.
export interface VectorResult {
  total: number;
  passed: number;
  failed: number;
  failures: { name: string; problems: string[] }[];
}
export function runVectors(wasm: WebAssembly.Module | BufferSource, vectors: { cases: unknown[] }): Promise<VectorResult>;
export function fixedEntropy(draws: Uint8Array[]): ((into: Uint8Array) => void) & { unused(): number };
export function fromHex(hex: string): Uint8Array;
export function toHex(bytes: Uint8Array): string;
