// Password hashing: argon2id with OWASP's minimum parameters. The rest of the host sees
// only the async PasswordVerifier interface, so hashing can move off the request thread
// without touching its callers.
import { timingSafeEqual, webcrypto } from 'node:crypto';
import { argon2id } from 'hash-wasm';

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

/** Hashes on the calling thread with hash-wasm. */
export class Argon2idVerifier implements PasswordVerifier {
  async hash(password: string): Promise<PasswordRecord> {
    const { memorySize, iterations, parallelism, hashLength, saltLength } = ARGON2ID_PARAMETERS;
    const salt = webcrypto.getRandomValues(new Uint8Array(saltLength));
    const hash = await argon2id({ password, salt, memorySize, iterations, parallelism, hashLength, outputType: 'binary' });
    return { algorithm: 'argon2id', memorySize, iterations, parallelism, salt, hash };
  }

  // The record's own parameters, not today's defaults, so that a record written before
  // a parameter change still verifies.
  async verify(password: string, record: PasswordRecord): Promise<boolean> {
    // hash-wasm refuses to hash an empty password, so no record is of one.
    if (password === '') return false;
    const candidate = await argon2id({
      password,
      salt: record.salt,
      memorySize: record.memorySize,
      iterations: record.iterations,
      parallelism: record.parallelism,
      hashLength: record.hash.length,
      outputType: 'binary',
    });
    return timingSafeEqual(candidate, record.hash);
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
