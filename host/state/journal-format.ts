// The token journal's format (journal.ts appends to it, journal-read.ts reads it at
// start): the bytes on disk, how a read tells a torn tail from damage, and the errors
// that name either.
//
// Layout: a header (magic, format version, the fingerprint of the token key the journal
// belongs to, its epoch, its compaction and the bytes that compaction wrote), then groups.
// A group is what one write and one fdatasync put on disk: its payload's length, the
// CRC-32 of that length, the payload's CRC-32, and the payload, a run of records (each its
// length and its bytes); numbers are little-endian u32. A journal of format 1 has no
// epoch, compaction or base in its header.
//
// A crash can tear only the last group: the next is not written before the previous one
// is synced. As etcd's WAL decides (wal/decoder.go, isTornEntry), a torn tail is a group
// cut short (its head, or its payload, runs past the end of the file), or one whose bytes
// did not all land: only zeros to the end of the file, as a file that grew but whose data
// never came reads, or a whole disk sector of zeros inside the group. Those are dropped
// and logged. A group that is all there and fails its checksum all the same was written,
// synced and acknowledged before it went bad: that is damage, as is a failing group with
// other data after it, and the start stops with the step that repairs it.
import { createHash } from 'node:crypto';
import { dirname } from 'node:path';
import { crc32 } from 'node:zlib';
import { StateError } from '../errors.js';
import { EPOCH_BYTES, repairCommand } from './codec.js';
import type { JournalMark } from './codec.js';

export const JOURNAL_FILE = 'tokens';
export const JOURNAL_VERSION = 2;
/** The format before the epoch: still read, and replaced by the first compaction. */
const JOURNAL_VERSION_1 = 1;
const MAGIC = Buffer.from('api-auth tokens\n', 'latin1');
const FINGERPRINT = 8;
/** Bytes of a header of format 1: where its first group starts. */
export const HEADER_1 = MAGIC.length + 4 + FINGERPRINT;
const EPOCH_AT = HEADER_1;
const SEQ_AT = EPOCH_AT + EPOCH_BYTES;
const BASE_AT = SEQ_AT + 4;
/** Bytes of a header of format 2: where its first group starts. */
export const HEADER = BASE_AT + 8;
const GROUP_HEAD = 12;
const RECORD_HEAD = 4;

/** Who a journal file is: its epoch, and its sequence (its compaction) within the epoch. */
export interface Identity {
  readonly epoch: Uint8Array;
  readonly seq: number;
}

/**
 * The journal's first bytes for the token key `key`: a journal is read only with the state
 * it belongs to, and only with the epoch and sequence the state file records (or one compaction on).
 */
export function header(key: Uint8Array, id: Identity, base: number): Buffer {
  const head = Buffer.alloc(HEADER);
  MAGIC.copy(head);
  head.writeUInt32LE(JOURNAL_VERSION, MAGIC.length);
  keyFingerprint(key).copy(head, MAGIC.length + 4);
  head.set(id.epoch, EPOCH_AT);
  head.writeUInt32LE(id.seq, SEQ_AT);
  head.writeBigUInt64LE(BigInt(base), BASE_AT);
  return head;
}

/** Not the key, and no help in finding it: a hash of it under a label of its own, cut to 8 bytes. */
function keyFingerprint(key: Uint8Array): Buffer {
  return createHash('sha256').update('api-auth tokens journal\n').update(key).digest().subarray(0, FINGERPRINT);
}

/** One group holding `records`: its head (the payload's length, the CRC-32 of those 4 bytes, the payload's CRC-32) and its payload. */
export function encodeGroup(records: readonly Uint8Array[]): Buffer {
  let length = 0;
  for (const r of records) length += RECORD_HEAD + r.length;
  const bytes = Buffer.alloc(GROUP_HEAD + length);
  let at = GROUP_HEAD;
  for (const r of records) {
    bytes.writeUInt32LE(r.length, at);
    bytes.set(r, at + RECORD_HEAD);
    at += RECORD_HEAD + r.length;
  }
  bytes.writeUInt32LE(length, 0);
  bytes.writeUInt32LE(crc32(bytes.subarray(0, 4)), 4);
  bytes.writeUInt32LE(crc32(bytes.subarray(GROUP_HEAD)), 8);
  return bytes;
}

/** What the tokens the journal lists become when it is set aside. */
const UNLISTED =
  'stay valid until they expire but are not listed, and revokeToken cannot reach them by id ' +
  '(revoke them by the token, or change the password to end them all)';

/**
 * The journal is damaged. With `at`, the byte where the damage starts, the repair keeps
 * what comes before it: the groups before were read whole.
 */
export function journalDamaged(path: string, why: string, at?: number): StateError {
  const keep = at === undefined ? 'none of its tokens' : `the tokens written whole before byte ${at}`;
  return new StateError(
    `token journal ${path} is damaged (${why}); restore the data folder from a backup, or run ` +
      `${repairCommand(dirname(path))}: it copies the journal aside to ${path}.damaged-<time> and keeps ${keep}; ` +
      `the others ${UNLISTED}`,
    true,
  );
}

/** The journal is gone, though the state file records groups written to it. */
export function journalMissing(path: string, mark: JournalMark): StateError {
  return new StateError(
    `token journal ${path} is missing, but the state file beside it records ${mark.groups} groups ` +
      `(${mark.bytes} bytes) written to it and acknowledged; put it back from a backup of the data folder, or run ` +
      `${repairCommand(dirname(path))} to start without it: the tokens it listed ${UNLISTED}`,
    true,
  );
}

/** The bytes of a disk sector: a write lands a sector whole, or not at all. */
const SECTOR = 512;

/**
 * Whether part of the bytes from `from` to `to` never landed: one of the disk sectors
 * they span, cut to the span, holds only zeros (etcd's isTornEntry). A group as written
 * has none: no record holds 512 zero bytes in a row (its numbers take a few bytes each,
 * and a label holds no NUL).
 */
function hasZeroSector(file: Buffer, from: number, to: number): boolean {
  for (let start = from; start < to; ) {
    const end = Math.min(to, (Math.floor(start / SECTOR) + 1) * SECTOR);
    if (file.subarray(start, end).every((b) => b === 0)) return true;
    start = end;
  }
  return false;
}

/** A journal file read group by group, up to its end, a torn tail, or the first damage. */
export interface Scan {
  /** Undefined for a journal of format 1, which has no epoch. */
  readonly id: Identity | undefined;
  /** The bytes its rewrite wrote: no crash can leave fewer. */
  readonly base: number;
  /** Where each whole group ends, and its records. */
  readonly groups: { readonly end: number; readonly records: Buffer[] }[];
  /** Bytes of a torn tail after the whole groups. */
  readonly tornBytes: number;
  /** The records written whole in a group cut short (its head is sound), unchecked: for a repair alone. */
  readonly cutRecords: Buffer[];
  /** The first damage: what it is and the byte it starts at. */
  readonly damage: { readonly why: string; readonly at: number } | undefined;
}

/**
 * Reads the header and the groups of the journal `file`. Throws StateError for a file
 * that is not a journal, of an unknown version, or of another token key: there is
 * nothing in it to keep.
 */
export function scan(file: Buffer, path: string, key: Uint8Array): Scan {
  if (file.length < HEADER_1 || !file.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw journalDamaged(path, 'it is not an api-auth token journal, or it is cut short');
  }
  const version = file.readUInt32LE(MAGIC.length);
  if (version !== JOURNAL_VERSION && version !== JOURNAL_VERSION_1) {
    throw new StateError(
      `token journal ${path} has format version ${version}, which this api-auth (format ${JOURNAL_VERSION}) ` +
        'cannot read; run the api-auth that wrote it, or restore a backup made by this one',
    );
  }
  if (version === JOURNAL_VERSION && file.length < HEADER)
    throw journalDamaged(path, 'it is not an api-auth token journal, or it is cut short');
  if (!file.subarray(MAGIC.length + 4, HEADER_1).equals(keyFingerprint(key))) {
    throw new StateError(
      `token journal ${path} belongs to another state file (its token key differs); put back the state ` +
        `file it belongs to, or run ${repairCommand(dirname(path))} to move it aside (auth.listTokens then lists no token issued before)`,
      true,
    );
  }
  const id =
    version === JOURNAL_VERSION_1 ? undefined : { epoch: Uint8Array.from(file.subarray(EPOCH_AT, SEQ_AT)), seq: file.readUInt32LE(SEQ_AT) };
  const first = version === JOURNAL_VERSION_1 ? HEADER_1 : HEADER;
  const base = version === JOURNAL_VERSION_1 ? HEADER_1 : Number(file.readBigUInt64LE(BASE_AT));
  const groups: { end: number; records: Buffer[] }[] = [];
  let at = first;
  const ended = (tornBytes: number, damage?: { why: string; at: number }, cutRecords: Buffer[] = []): Scan => ({
    id,
    base,
    groups,
    tornBytes,
    damage,
    cutRecords,
  });
  const damaged = (why: string): Scan => ended(0, { why, at });
  while (at < file.length) {
    // Zeros to the end: the file grew, and the data of its last group never landed.
    if (file.length - at < GROUP_HEAD || file.subarray(at).every((b) => b === 0)) return ended(file.length - at);
    const length = file.readUInt32LE(at);
    if (crc32(file.subarray(at, at + 4)) !== file.readUInt32LE(at + 4)) {
      // A head cut short by the crash has only zeros after it.
      if (file.subarray(at + GROUP_HEAD).every((b) => b === 0)) return ended(file.length - at);
      return damaged(`the group at byte ${at} has a damaged length, and data follows it`);
    }
    const end = at + GROUP_HEAD + length;
    if (end > file.length) return ended(file.length - at, undefined, records(file.subarray(at + GROUP_HEAD)).found);
    const payload = file.subarray(at + GROUP_HEAD, end);
    if (crc32(payload) !== file.readUInt32LE(at + 8)) {
      const last = file.subarray(end).every((b) => b === 0);
      if (last && hasZeroSector(file, at, end)) return ended(file.length - at);
      return damaged(
        last
          ? `the last group, at byte ${at}, is whole (${end - at} bytes) but fails its checksum: it was written and synced, ` +
              'so this is not a write cut short by a crash'
          : `the group at byte ${at} fails its checksum, and other groups follow it`,
      );
    }
    const read = records(payload);
    if (!read.whole) return damaged(`a record of the group at byte ${at} runs past its end`);
    groups.push({ end, records: read.found });
    at = end;
  }
  return ended(0);
}

/**
 * The records `payload` holds whole, in order, and whether they fill it: one that runs
 * past its end is damage in a whole group, and where the cut is in a cut one.
 */
function records(payload: Buffer): { found: Buffer[]; whole: boolean } {
  const found: Buffer[] = [];
  for (let r = 0; r < payload.length; ) {
    const size = payload.length - r < RECORD_HEAD ? -1 : payload.readUInt32LE(r);
    if (size < 0 || r + RECORD_HEAD + size > payload.length) return { found, whole: false };
    found.push(payload.subarray(r + RECORD_HEAD, r + RECORD_HEAD + size));
    r += RECORD_HEAD + size;
  }
  return { found, whole: true };
}
