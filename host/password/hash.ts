// Password hashing: argon2id with OWASP's minimum parameters, on a worker thread. The
// rest of the host sees only the async PasswordVerifier interface.
import { timingSafeEqual, webcrypto } from 'node:crypto';
import type { Worker } from 'node:worker_threads';
import { BusyError } from '../errors.js';
import { ownThread } from '../own-thread.js';
import { isWellFormed } from './file.js';
import type { HashJob, HashResult } from './worker.js';

/** An argon2id hash with everything needed to check a candidate against it. */
export interface PasswordRecord {
  readonly algorithm: 'argon2id';
  /** Memory cost in KiB. */
  readonly memorySize: number;
  readonly iterations: number;
  readonly parallelism: number;
  readonly salt: Uint8Array;
  readonly hash: Uint8Array;
}

export interface PasswordVerifier {
  /** A new record for `password`, with a fresh random salt. */
  hash(password: string): Promise<PasswordRecord>;
  /** Whether `password` is the one `record` was made from. */
  verify(password: string, record: PasswordRecord): Promise<boolean>;
}

export const ARGON2ID_PARAMETERS = {
  memorySize: 19456,
  iterations: 2,
  parallelism: 1,
  hashLength: 32,
  saltLength: 16,
} as const;

/** Checks waiting or running at once; past it, calls are refused at once (BusyError). */
export const MAX_PENDING_CHECKS = 32;

/**
 * Hashes with hash-wasm on a worker thread, one job at a time, with a bounded queue:
 * argon2id costs tens of milliseconds, and none of them may be spent on the thread that
 * serves requests.
 */
export class Argon2idVerifier implements PasswordVerifier {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, { resolve(hash: Uint8Array): void; reject(error: Error): void }>();
  private nextId = 0;

  constructor(private readonly maxPending = MAX_PENDING_CHECKS) {}

  async hash(password: string): Promise<PasswordRecord> {
    // hash-wasm encodes a lone surrogate as U+FFFD, which would make several passwords one.
    if (!isWellFormed(password)) throw new TypeError('a password must be valid Unicode (no lone surrogates)');
    const { memorySize, iterations, parallelism, hashLength, saltLength } = ARGON2ID_PARAMETERS;
    const salt = webcrypto.getRandomValues(new Uint8Array(saltLength));
    const hash = await this.run({ password, salt, memorySize, iterations, parallelism, hashLength });
    return { algorithm: 'argon2id', memorySize, iterations, parallelism, salt, hash };
  }

  // The record's own parameters, not today's defaults, so that a record written before
  // a parameter change still verifies.
  async verify(password: string, record: PasswordRecord): Promise<boolean> {
    // hash-wasm refuses to hash an empty password, and hash() one with a lone surrogate,
    // so no record is of either.
    if (password === '' || !isWellFormed(password)) return false;
    const { salt, memorySize, iterations, parallelism } = record;
    const candidate = await this.run({ password, salt, memorySize, iterations, parallelism, hashLength: record.hash.length });
    return timingSafeEqual(candidate, record.hash);
  }

  /** Stops the worker; checks still waiting fail. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private run(job: Omit<HashJob, 'id'>): Promise<Uint8Array> {
    if (this.pending.size >= this.maxPending) return Promise.reject(new BusyError());
    const id = this.nextId++;
    return new Promise<Uint8Array>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.thread().postMessage({ id, ...job } satisfies HashJob);
    });
  }

  private thread(): Worker {
    if (this.worker !== undefined) return this.worker;
    // Without the embedding process's loaders and preloads (own-thread.ts).
    const worker = ownThread(new URL('./worker.js', import.meta.url));
    // Idle, it must not keep the process alive.
    worker.unref();
    worker.on('message', (result: HashResult) => {
      const waiter = this.pending.get(result.id);
      if (waiter === undefined) return;
      this.pending.delete(result.id);
      if ('error' in result) waiter.reject(new Error(`argon2id failed: ${result.error}`));
      else waiter.resolve(result.hash);
    });
    // A dead worker fails what it held; the next check starts a new one.
    const lost = (error: Error): void => {
      if (this.worker === worker) this.worker = undefined;
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`the password worker stopped (exit code ${code})`)));
    this.worker = worker;
    return worker;
  }
}

const PHC = /^\$argon2id\$v=19\$m=(\d{1,10}),t=(\d{1,10}),p=(\d{1,3})\$([A-Za-z0-9+/]{16,})\$([A-Za-z0-9+/]{16,})$/;

/** A record in the PHC string format that argon2 tools share: `$argon2id$v=19$m=..,t=..,p=..$salt$hash`. */
export function encodeRecord(record: PasswordRecord): string {
  const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64').replace(/=+$/, '');
  return `$argon2id$v=19$m=${record.memorySize},t=${record.iterations},p=${record.parallelism}$${b64(record.salt)}$${b64(record.hash)}`;
}

/** Parses a PHC string made by `encodeRecord`; undefined when it is not one. */
export function decodeRecord(text: string): PasswordRecord | undefined {
  const m = PHC.exec(text);
  if (m === null) return undefined;
  const [memorySize, iterations, parallelism] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (memorySize < 8 * parallelism || iterations < 1 || parallelism < 1) return undefined;
  const salt = Uint8Array.from(Buffer.from(m[4], 'base64'));
  const hash = Uint8Array.from(Buffer.from(m[5], 'base64'));
  if (salt.length < 8 || hash.length < 16) return undefined;
  return { algorithm: 'argon2id', memorySize, iterations, parallelism, salt, hash };
}
