// The state file's format: the whole state in one buffer (magic, format version, body
// length, body, SHA-256 of all before it). The file is never torn or cut short by a crash
// (data-folder.ts replaces it whole), so any file that is short, too long or fails its
// checksum is damage, and the start stops rather than guess.
//
// Format 2 adds the journal's mark at the body's end (a flag, then the epoch, the journal's
// sequence, its groups and bytes): what the token journal held when it was last compacted
// or at the last clean stop, so that a start tells a journal cut or missing from one never
// written (journal-read.ts). Format 1 is still read (with no mark); every write is format 2.
import { createHash } from 'node:crypto';
import { dirname } from 'node:path';
import { StateError } from '../errors.js';

export const FORMAT_VERSION = 2;
/** The format before the journal's mark: still read, never written. */
const FORMAT_VERSION_1 = 1;
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
  /** What the token journal held when last compacted or at the last clean stop; undefined before the first (format 1). */
  journal: JournalMark | undefined;
}

/**
 * The token journal as the state file last saw it: its epoch (a random id, written in the
 * journal's header, that a repair changes), its sequence (one more at each compaction),
 * and the groups and bytes it held then, every one of them acknowledged.
 */
export interface JournalMark {
  readonly epoch: Uint8Array;
  readonly seq: number;
  readonly groups: number;
  readonly bytes: number;
}

/** The bytes of a journal epoch. */
export const EPOCH_BYTES = 16;

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
  w.u32(s.journal === undefined ? 0 : 1);
  if (s.journal !== undefined) {
    w.bytes(s.journal.epoch);
    w.u32(s.journal.seq);
    w.u64(s.journal.groups);
    w.u64(s.journal.bytes);
  }
  const body = w.done();
  const head = Buffer.alloc(HEADER);
  MAGIC.copy(head);
  head.writeUInt32LE(FORMAT_VERSION, MAGIC.length);
  head.writeUInt32LE(body.length, MAGIC.length + 4);
  const sum = createHash('sha256').update(head).update(body).digest();
  return Buffer.concat([head, body, sum]);
}

/** The state file at `path` is damaged: the line names the repair, which keeps the damaged copy. */
export function stateDamaged(path: string, why: string): StateError {
  return new StateError(
    `state file ${path} is damaged (${why}); restore it from a backup, or run ` +
      `${repairCommand(dirname(path))} to move it aside (with the journal and usage files beside it) and start with fresh state ` +
      '(every token issued so far then stops working)',
    true,
  );
}

/** The operator's repair step for the data folder `dir` (cli/state-command.ts). */
export function repairCommand(dir: string): string {
  return `api-auth state repair --data-dir ${dir} --accept-loss`;
}

/** Parses a state file; throws StateError naming the file and the way out. */
export function decodeState(file: Buffer, path: string): PersistedState {
  if (file.length < HEADER + CHECKSUM || !file.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw stateDamaged(path, 'it is not an api-auth state file, or it is cut short');
  }
  const version = file.readUInt32LE(MAGIC.length);
  if (version !== FORMAT_VERSION && version !== FORMAT_VERSION_1) {
    throw new StateError(
      `state file ${path} has format version ${version}, which this api-auth (format ` +
        `${FORMAT_VERSION}) cannot read; run the api-auth that wrote it, or restore a backup made by this one`,
    );
  }
  const bodyLength = file.readUInt32LE(MAGIC.length + 4);
  if (file.length !== HEADER + bodyLength + CHECKSUM) {
    throw stateDamaged(path, `it holds ${file.length} bytes where its header announces ${HEADER + bodyLength + CHECKSUM}`);
  }
  const sum = createHash('sha256')
    .update(file.subarray(0, HEADER + bodyLength))
    .digest();
  if (!sum.equals(file.subarray(HEADER + bodyLength))) throw stateDamaged(path, 'its checksum does not match');
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
    let journal: JournalMark | undefined;
    if (version !== FORMAT_VERSION_1) {
      const marked = r.u32();
      if (marked > 1) throw new Error("the journal's mark has a bad flag");
      if (marked === 1) {
        const epoch = Uint8Array.from(r.bytes());
        if (epoch.length !== EPOCH_BYTES) throw new Error("the journal's epoch has a bad length");
        journal = { epoch, seq: r.u32(), groups: r.u64(), bytes: r.u64() };
      }
    }
    r.end();
    return { key, generation, password, filePassword, maxLifetime, serialCeiling, floor, grants, revocations, journal };
  } catch (e) {
    throw stateDamaged(path, (e as Error).message);
  }
}
