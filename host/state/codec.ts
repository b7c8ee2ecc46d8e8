// The state file's format: the whole state in one buffer (magic, format version, body
// length, body, SHA-256 of all before it). The file is never torn or cut short by a crash
// (data-folder.ts replaces it whole), so any file that is short, too long or fails its
// checksum is damage, and the start stops rather than guess.
import { createHash } from 'node:crypto';
import { StateError } from '../errors.js';

export const FORMAT_VERSION = 1;
const MAGIC = Buffer.from('api-auth', 'latin1');
const HEADER = MAGIC.length + 4 + 4;
const CHECKSUM = 32;

/** Everything that must survive a restart. Secrets here are the token key and password hashes. */
export interface PersistedState {
  /** The HMAC key tokens are signed with. */
  key: Uint8Array;
  /** The password generation; only grows. */
  generation: number;
  /** argon2id record of the current service password. */
  password: string;
  /** argon2id record of the password file's content when it was last adopted. */
  filePassword: string;
  /** The longest token lifetime ever used, to bound the expiry of tokens issued before a restart. */
  maxLifetime: number;
  /** No token was issued with a serial at or above this. */
  serialCeiling: number;
  /** Serials below this belong to tokens that have all expired. */
  floor: number;
  /** Endpoint lists by grant id. */
  grants: string[][];
  /** Revoked serials of tokens not yet expired, with their expiry. */
  revocations: Map<number, number>;
}

class Writer {
  private buf = Buffer.alloc(4096);
  private at = 0;

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const bigger = Buffer.alloc(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(bigger, 0, 0, this.at);
    this.buf = bigger;
  }

  u32(v: number): void {
    this.room(4);
    this.buf.writeUInt32LE(v, this.at);
    this.at += 4;
  }

  u64(v: number): void {
    this.room(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.at);
    this.at += 8;
  }

  bytes(b: Uint8Array): void {
    this.u32(b.length);
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }

  text(s: string): void {
    this.bytes(Buffer.from(s, 'utf8'));
  }

  done(): Buffer {
    return this.buf.subarray(0, this.at);
  }
}

class Reader {
  private at = 0;
  constructor(private readonly buf: Buffer) {}

  private need(n: number): void {
    if (this.at + n > this.buf.length) throw new Error('a record runs past the end');
  }

  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.at);
    this.at += 4;
    return v;
  }

  u64(): number {
    this.need(8);
    const v = this.buf.readBigUInt64LE(this.at);
    this.at += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('a number is out of range');
    return Number(v);
  }

  bytes(): Buffer {
    const n = this.u32();
    this.need(n);
    const b = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return b;
  }

  text(): string {
    return this.bytes().toString('utf8');
  }

  end(): void {
    if (this.at !== this.buf.length) throw new Error('there are bytes after the last record');
  }
}

/** The file's bytes: magic, format version, body length, body, SHA-256 of all before it. */
export function encodeState(s: PersistedState): Buffer {
  const w = new Writer();
  w.bytes(s.key);
  w.u32(s.generation);
  w.u32(s.maxLifetime);
  w.u64(s.serialCeiling);
  w.u64(s.floor);
  w.text(s.password);
  w.text(s.filePassword);
  w.u32(s.grants.length);
  for (const g of s.grants) w.text(g.join('\n'));
  w.u32(s.revocations.size);
  for (const [serial, expiry] of s.revocations) {
    w.u64(serial);
    w.u64(expiry);
  }
  const body = w.done();
  const head = Buffer.alloc(HEADER);
  MAGIC.copy(head);
  head.writeUInt32LE(FORMAT_VERSION, MAGIC.length);
  head.writeUInt32LE(body.length, MAGIC.length + 4);
  const sum = createHash('sha256').update(head).update(body).digest();
  return Buffer.concat([head, body, sum]);
}

function damaged(path: string, why: string): StateError {
  return new StateError(`state file ${path} is damaged (${why}); restore it from a backup, ` +
    'or move it aside to start with fresh state (every token issued so far then stops working)');
}

/** Parses a state file; throws StateError naming the file and the way out. */
export function decodeState(file: Buffer, path: string): PersistedState {
  if (file.length < HEADER + CHECKSUM || !file.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw damaged(path, 'it is not an api-auth state file, or it is cut short');
  }
  const version = file.readUInt32LE(MAGIC.length);
  if (version !== FORMAT_VERSION) {
    throw new StateError(`state file ${path} has format version ${version}, which this api-auth (format ` +
      `${FORMAT_VERSION}) cannot read; run the api-auth that wrote it, or restore a backup made by this one`);
  }
  const bodyLength = file.readUInt32LE(MAGIC.length + 4);
  if (file.length !== HEADER + bodyLength + CHECKSUM) {
    throw damaged(path, `it holds ${file.length} bytes where its header announces ${HEADER + bodyLength + CHECKSUM}`);
  }
  const sum = createHash('sha256').update(file.subarray(0, HEADER + bodyLength)).digest();
  if (!sum.equals(file.subarray(HEADER + bodyLength))) throw damaged(path, 'its checksum does not match');
  try {
    const r = new Reader(file.subarray(HEADER, HEADER + bodyLength));
    const key = Uint8Array.from(r.bytes());
    const generation = r.u32();
    const maxLifetime = r.u32();
    const serialCeiling = r.u64();
    const floor = r.u64();
    const password = r.text();
    const filePassword = r.text();
    const grants: string[][] = [];
    for (let n = r.u32(); n > 0; n--) grants.push(r.text().split('\n'));
    const revocations = new Map<number, number>();
    for (let n = r.u32(); n > 0; n--) {
      const serial = r.u64();
      revocations.set(serial, r.u64());
    }
    r.end();
    return { key, generation, password, filePassword, maxLifetime, serialCeiling, floor, grants, revocations };
  } catch (e) {
    throw damaged(path, (e as Error).message);
  }
}
