// The thread that runs argon2id, so that hashing (tens of milliseconds per password)
// never holds up the thread that serves requests. It hashes what it is sent, one job at
// a time, and knows nothing else.
import { createRequire } from 'node:module';
import { parentPort } from 'node:worker_threads';
import type * as HashWasm from 'hash-wasm';
import { InvariantError } from '../api-auth-error.js';

// hash-wasm's entry is one bundle of every algorithm it has: parsed, and scanned by
// Node for its exports when imported, it costs the thread more CPU at its start than
// the Wasm it runs. Its Argon2 bundle (the version is pinned) is the same code for
// argon2id alone, and required, it is not scanned.
const { argon2id } = createRequire(import.meta.url)('hash-wasm/dist/argon2.umd.min.js') as Pick<typeof HashWasm, 'argon2id'>;

export interface HashJob {
  readonly id: number;
  readonly password: string;
  readonly salt: Uint8Array;
  readonly memorySize: number;
  readonly iterations: number;
  readonly parallelism: number;
  readonly hashLength: number;
}

export type HashResult = { readonly id: number; readonly hash: Uint8Array } | { readonly id: number; readonly error: string };

const port = parentPort;
if (port === null) throw new InvariantError('password/worker.js runs as a worker thread');
port.on('message', (job: HashJob) => {
  const { id, password, salt, memorySize, iterations, parallelism, hashLength } = job;
  argon2id({ password, salt, memorySize, iterations, parallelism, hashLength, outputType: 'binary' }).then(
    (hash) => port.postMessage({ id, hash } satisfies HashResult),
    (error: Error) => port.postMessage({ id, error: error.message } satisfies HashResult),
  );
});
