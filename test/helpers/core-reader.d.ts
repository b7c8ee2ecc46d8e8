// Types of core-reader.js, for the TypeScript tests.
export const STAGE: number;
export const STOP: number;
export const REVOKED: number;
export const BUMPED: number;
export const PUBLISHED: number;
export const CHANGING: number;
export const PROGRESS: number;
export const CONTROL_WORDS: number;
export const TOKEN_BYTES: number;
export const PATH: string;

export interface ReaderData {
  mode: 'revocations' | 'keys' | 'sweeps';
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  control: SharedArrayBuffer;
  /** Tokens the owner publishes while the readers run, TOKEN_BYTES each. */
  published: SharedArrayBuffer;
  slot: number;
  now: number;
  /** revocations: revoked one by one; then a token never revoked, one for another path, one forged. */
  revocable?: string[];
  kept?: string;
  elsewhere?: string;
  forged?: string;
  /** keys: a token under key A and one under key B; stage 0 has key B, odd stages key A. */
  underA?: string;
  underB?: string;
  /** sweeps: Float64 clocks, the issue time of each published token's page. */
  clocks?: SharedArrayBuffer;
}

export interface ReaderReport {
  passes: number;
  counts: Record<string, number>;
  violations: string[];
}
