// The thread that runs argon2id, so that hashing (tens of milliseconds per password)
// never holds up the thread that serves requests. It hashes what it is sent, one job at
// a time, and knows nothing else.
import { parentPort } from 'node:worker_threads';
import { argon2id } from 'hash-wasm';
import { InvariantError } from '../api-auth-error.js';

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
