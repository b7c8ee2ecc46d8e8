// The token inventory's file: an append-only journal in the data folder, beside the state
// file. The state file is rewritten whole for its rare changes; a record per issued token
// would make that O(inventory) per call, so issues are appended here instead.
//
// Layout: a header (magic, format version, the fingerprint of the token key the journal
// belongs to, its epoch, its compaction and the bytes that compaction wrote), then groups. A group is what one write and one fdatasync put on disk: its
// payload's length, the CRC-32 of that length, the payload's CRC-32, and the payload, a
// run of records (each its length and its bytes); numbers are little-endian u32. Appends that arrive while a group is being synced wait together
// for the next one: concurrent issues share an fsync (group commit).
//
// A crash can tear only the last group: the next is not written before the previous one
// is synced. As etcd's WAL decides (wal/decoder.go, isTornEntry), a torn tail is a group
// cut short (its head, or its payload, runs past the end of the file), or one whose bytes
// did not all land: only zeros to the end of the file, as a file that grew but whose data
// never came reads, or a whole disk sector of zeros inside the group. Those are dropped
// and logged. A group that is all there and fails its checksum all the same was written,
// synced and acknowledged before it went bad: that is damage, as is a failing group with
// other data after it, and the start stops with the step that repairs it. The header is written only by a rewrite (a temporary
// file, fsynced, renamed, the folder fsynced), so it is never torn. A rewrite that fails
// before its rename leaves the old journal as it was; once renamed, the new file is the
// journal, and the group after it waits for the folder's sync.
//
// A cut or a loss must not pass for a crash: after each compaction and at a clean stop,
// the state file records the journal's mark (codec.ts: epoch, compaction, groups and
// bytes, every one acknowledged). A start refuses a journal that holds less, is missing
// while the mark records groups, is of another epoch (another folder's, or one a repair
// set aside) or of another compaction than the mark's or the one after it (a crash between
// a compaction's rename and its mark). Only a torn tail past the mark is dropped. A journal
// of format 1 (no epoch) is read beside a state without a mark, and rewritten as format 2.
import { systemTimer } from '../clock.js';
import { createHash } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { crc32 } from 'node:zlib';
import { StateError } from '../errors.js';
import { EPOCH_BYTES, repairCommand } from './codec.js';
import type { JournalMark } from './codec.js';
import { readDataFile, syncFolder, unlinkIfThere } from './data-folder.js';

export const JOURNAL_FILE = 'tokens';
export const JOURNAL_VERSION = 2;
/** The format before the epoch: still read, and replaced by the first compaction. */
const JOURNAL_VERSION_1 = 1;
const MAGIC = Buffer.from('api-auth tokens\n', 'latin1');
const FINGERPRINT = 8;
const HEADER_1 = MAGIC.length + 4 + FINGERPRINT;
const EPOCH_AT = HEADER_1;
const SEQ_AT = EPOCH_AT + EPOCH_BYTES;
const BASE_AT = SEQ_AT + 4;
const HEADER = BASE_AT + 8;
const GROUP_HEAD = 12;
const RECORD_HEAD = 4;

/** Who a journal file is: its epoch, and its sequence (its compaction) within the epoch. */
interface Identity {
  readonly epoch: Uint8Array;
  readonly seq: number;
}

/**
 * The journal's first bytes for the token key `key`: a journal is read only with the state
 * it belongs to, and only with the epoch and sequence the state file records (or one compaction on).
 */
function header(key: Uint8Array, id: Identity, base: number): Buffer {
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

/** What the tokens the journal lists become when it is set aside. */
const UNLISTED = 'stay valid until they expire but are not listed, and revokeToken cannot reach them by id ' +
  '(revoke them by the token, or change the password to end them all)';

/**
 * The journal is damaged. With `at`, the byte where the damage starts, the repair keeps
 * what comes before it: the groups before were read whole.
 */
export function journalDamaged(path: string, why: string, at?: number): StateError {
  const keep = at === undefined ? 'none of its tokens' : `the tokens written whole before byte ${at}`;
  return new StateError(`token journal ${path} is damaged (${why}); restore the data folder from a backup, or run ` +
    `${repairCommand(dirname(path))}: it copies the journal aside to ${path}.damaged-<time> and keeps ${keep}; ` +
    `the others ${UNLISTED}`, true);
}

/** The journal is gone, though the state file records groups written to it. */
function journalMissing(path: string, mark: JournalMark): StateError {
  return new StateError(`token journal ${path} is missing, but the state file beside it records ${mark.groups} groups ` +
    `(${mark.bytes} bytes) written to it and acknowledged; put it back from a backup of the data folder, or run ` +
    `${repairCommand(dirname(path))} to start without it: the tokens it listed ${UNLISTED}`, true);
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
  for (let start = from; start < to;) {
    const end = Math.min(to, (Math.floor(start / SECTOR) + 1) * SECTOR);
    if (file.subarray(start, end).every((b) => b === 0)) return true;
    start = end;
  }
  return false;
}

/** A journal file read group by group, up to its end, a torn tail, or the first damage. */
interface Scan {
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
function scan(file: Buffer, path: string, key: Uint8Array): Scan {
  if (file.length < HEADER_1 || !file.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw journalDamaged(path, 'it is not an api-auth token journal, or it is cut short');
  }
  const version = file.readUInt32LE(MAGIC.length);
  if (version !== JOURNAL_VERSION && version !== JOURNAL_VERSION_1) {
    throw new StateError(`token journal ${path} has format version ${version}, which this api-auth (format ${JOURNAL_VERSION}) ` +
      'cannot read; run the api-auth that wrote it, or restore a backup made by this one');
  }
  if (version === JOURNAL_VERSION && file.length < HEADER) throw journalDamaged(path, 'it is not an api-auth token journal, or it is cut short');
  if (!file.subarray(MAGIC.length + 4, HEADER_1).equals(keyFingerprint(key))) {
    throw new StateError(`token journal ${path} belongs to another state file (its token key differs); put back the state ` +
      `file it belongs to, or run ${repairCommand(dirname(path))} to move it aside (auth.listTokens then lists no token issued before)`, true);
  }
  const id = version === JOURNAL_VERSION_1 ? undefined
    : { epoch: Uint8Array.from(file.subarray(EPOCH_AT, SEQ_AT)), seq: file.readUInt32LE(SEQ_AT) };
  const first = version === JOURNAL_VERSION_1 ? HEADER_1 : HEADER;
  const base = version === JOURNAL_VERSION_1 ? HEADER_1 : Number(file.readBigUInt64LE(BASE_AT));
  const groups: { end: number; records: Buffer[] }[] = [];
  let at = first;
  const ended = (tornBytes: number, damage?: { why: string; at: number }, cutRecords: Buffer[] = []): Scan =>
    ({ id, base, groups, tornBytes, damage, cutRecords });
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
      return damaged(last
        ? `the last group, at byte ${at}, is whole (${end - at} bytes) but fails its checksum: it was written and synced, ` +
          'so this is not a write cut short by a crash'
        : `the group at byte ${at} fails its checksum, and other groups follow it`);
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
  for (let r = 0; r < payload.length;) {
    const size = payload.length - r < RECORD_HEAD ? -1 : payload.readUInt32LE(r);
    if (size < 0 || r + RECORD_HEAD + size > payload.length) return { found, whole: false };
    found.push(payload.subarray(r + RECORD_HEAD, r + RECORD_HEAD + size));
    r += RECORD_HEAD + size;
  }
  return { found, whole: true };
}

/** What a read found: the records, in order, how many bytes of torn tail were dropped, and the bytes before them. */
export interface JournalContents {
  readonly records: Buffer[];
  readonly tornBytes: number;
  /** The header and the whole groups: where the next group goes if the file is kept. */
  readonly wholeBytes: number;
  /** The whole groups. */
  readonly groups: number;
  /** Its epoch and sequence; undefined for a journal of format 1. */
  readonly id: Identity | undefined;
}

/**
 * Reads the journal of `dir` against `mark`, the state file's word on what it held:
 * undefined when there is none and the state records none written. Throws StateError, and
 * changes nothing, for a journal that is damaged, holds less than was acknowledged (cut,
 * or missing), is of another epoch (another data folder's, or one set aside by a repair),
 * or of another state. Only a torn tail past what was acknowledged is dropped: the last
 * group, cut short by a crash during its own write.
 */
export async function readJournal(dir: string, key: Uint8Array, mark: JournalMark | undefined): Promise<JournalContents | undefined> {
  const path = join(dir, JOURNAL_FILE);
  const file = await readDataFile(path, 'token journal');
  if (file === undefined) {
    if (mark !== undefined && mark.groups > 0) throw journalMissing(path, mark);
    return undefined;
  }
  const read = scan(file, path, key);
  if (read.damage !== undefined) throw journalDamaged(path, read.damage.why, read.damage.at);
  const wholeBytes = read.groups.at(-1)?.end ?? (read.id === undefined ? HEADER_1 : HEADER);
  // What a crash cannot have cut: the rewrite's own bytes, and what the state file records.
  let acknowledged = { bytes: read.base, groups: read.base > HEADER ? 1 : 0 };
  if (mark !== undefined) {
    const { id } = read;
    if (id === undefined) throw journalDamaged(path, 'it is of format 1, older than the state file beside it, which records a journal of format 2');
    if (!Buffer.from(id.epoch).equals(mark.epoch)) {
      throw journalDamaged(path, 'it is of another epoch than the state file records: another data folder\'s journal, ' +
        'or one a repair set aside');
    }
    if (id.seq === mark.seq) acknowledged = { bytes: mark.bytes, groups: mark.groups };
    else if (id.seq !== mark.seq + 1) {
      // One more is a compaction whose mark a crash kept from the state file; anything else is another copy.
      throw journalDamaged(path, `it is compaction ${id.seq}, where the state file records compaction ${mark.seq}: an older or ` +
        'newer copy of the journal than the state file beside it');
    }
  }
  if (wholeBytes < acknowledged.bytes) {
    throw journalDamaged(path, `its whole groups end at byte ${wholeBytes}, but ${acknowledged.bytes} bytes were written to it and ` +
      `acknowledged: it was cut after a clean write, not torn by a crash during one`, file.length);
  }
  const atMark = read.groups.findIndex((g) => g.end === acknowledged.bytes) + 1;
  if (acknowledged.groups > 0 && atMark !== acknowledged.groups) {
    throw journalDamaged(path, `its groups do not end at byte ${acknowledged.bytes} as the ${acknowledged.groups} acknowledged ` +
      'groups did', wholeBytes);
  }
  return { records: read.groups.flatMap((g) => g.records), tornBytes: read.tornBytes, wholeBytes, groups: read.groups.length, id: read.id };
}

/**
 * What a repair can keep of the journal of `dir`, whatever the state file records: the
 * records of its whole groups before the first damage, and those written whole in a
 * last group cut short (a cut loses the bytes after it, and changes none before; the
 * repair checks each against the state); none of a journal that is not one, or of
 * another token key. Undefined when there is none.
 */
export async function salvageJournal(dir: string, key: Uint8Array): Promise<Buffer[] | undefined> {
  const path = join(dir, JOURNAL_FILE);
  const file = await readDataFile(path, 'token journal');
  if (file === undefined) return undefined;
  try {
    const read = scan(file, path, key);
    return [...read.groups.flatMap((g) => g.records), ...read.cutRecords];
  } catch (e) {
    if (e instanceof StateError) return [];
    throw e;
  }
}

interface Waiting {
  readonly bytes: Uint8Array;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * The journal open for appending. Appends are written in groups, in call order, one
 * fdatasync each; a rewrite replaces the whole file between two groups, as the next
 * compaction of the epoch.
 */
export class Journal {
  private waiting: Waiting[] = [];
  private scheduled = false;
  private queue: Promise<unknown> = Promise.resolve();
  /** Bytes of the file known to be on disk; a group that fails is cut back to it. */
  private size: number;
  /** Set when a failed group could not be cut back off: nothing more is appended after bytes of unknown state. */
  private broken: Error | undefined;
  /** Records in the file (the live ones and those no longer listed), for the compaction's rule. */
  private recordsInFile: number;
  /** Whole groups in the file, for the state file's mark. */
  private groupsInFile: number;
  /**
   * Whether the folder has been synced since the last rename: until it is, a power cut
   * could bring the old file back, so no group is written (and acknowledged) before.
   */
  private renameSynced = true;
  /** fdatasyncs and the records they made durable, and the time spent in them, for the issuing bench. */
  readonly stats = { groups: 0, records: 0, writeNs: 0n };

  /** `epoch`: the rewrites' (a journal of format 1 takes it at its first). */
  private constructor(private readonly dir: string, private readonly key: Uint8Array, private readonly epoch: Uint8Array,
    private id: Identity | undefined, private file: FileHandle, size: number, records: number, groups: number) {
    this.size = size;
    this.recordsInFile = records;
    this.groupsInFile = groups;
  }

  /**
   * Writes a fresh journal holding `records` (the start's compaction), as compaction `seq`
   * of `epoch`, and opens it for appending. Throws only while nothing has changed: the old
   * journal, if any, stands.
   */
  static async create(dir: string, key: Uint8Array, epoch: Uint8Array, seq: number, records: readonly Uint8Array[]): Promise<Journal> {
    const id = { epoch, seq };
    const { file, size } = await writeWhole(dir, key, id, records);
    const journal = new Journal(dir, key, epoch, id, file, size, records.length, records.length > 0 ? 1 : 0);
    await journal.syncRenameOrDefer();
    return journal;
  }

  /**
   * Opens the journal read as `read` for appending, after its whole groups (a torn tail
   * beyond them is cut off: the next group must not be followed by its rest), the file
   * synced as a whole: its groups may have been written but not synced by a process that
   * was killed, and the state file's mark must name only bytes on disk. For a start that
   * cannot write a fresh journal; cutting needs no room on the disk. The first rewrite
   * is compaction `epoch`'s next (it gives a journal of format 1 an epoch).
   */
  static async reopen(dir: string, key: Uint8Array, read: JournalContents, epoch: Uint8Array): Promise<Journal> {
    const file = await fs.open(join(dir, JOURNAL_FILE), constants.O_WRONLY | constants.O_NOFOLLOW);
    try {
      await file.truncate(read.wholeBytes);
      await file.sync();
    } catch (e) {
      await file.close();
      throw e;
    }
    return new Journal(dir, key, epoch, read.id, file, read.wholeBytes, read.records.length, read.groups);
  }

  /**
   * What the file holds now, every group of it synced: for the state file, which a start
   * holds the journal to. Undefined for a journal of format 1, which has no epoch.
   */
  get mark(): JournalMark | undefined {
    return this.id === undefined ? undefined : { epoch: this.id.epoch, seq: this.id.seq, groups: this.groupsInFile, bytes: this.size };
  }

  get path(): string {
    return join(this.dir, JOURNAL_FILE);
  }

  /** How many records the file holds. */
  get records(): number {
    return this.recordsInFile;
  }

  /** Resolves once `record` is on disk; rejects when its group's write fails, and then the file is as before the group. */
  append(record: Uint8Array): Promise<void> {
    if (this.broken !== undefined) return Promise.reject(this.broken);
    const done = new Promise<void>((resolve, reject) => this.waiting.push({ bytes: record, resolve, reject }));
    if (!this.scheduled) {
      this.scheduled = true;
      this.queue = this.queue.then(() => this.flush());
    }
    return done;
  }

  /**
   * Replaces the file by one that holds `records()` alone (taken once the groups before
   * have been written), atomically: a crash leaves the old journal or the new one.
   * Resolves with the number of records kept.
   */
  rewrite(records: () => readonly Uint8Array[]): Promise<number> {
    const run = this.queue.then(async () => {
      if (this.broken !== undefined) throw this.broken;
      const kept = records();
      const id = { epoch: this.epoch, seq: (this.id?.seq ?? 0) + 1 };
      const { file, size } = await writeWhole(this.dir, this.key, id, kept);
      // Renamed: from here the journal is the new file, whatever fails next. Appending to
      // the old one's handle would write where no start reads.
      const old = this.file;
      this.file = file;
      this.id = id;
      this.size = size;
      this.recordsInFile = kept.length;
      this.groupsInFile = kept.length > 0 ? 1 : 0;
      await this.syncRenameOrDefer();
      // Its groups were synced when written: a close that fails loses nothing.
      await old.close().catch(() => undefined);
      return kept.length;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Writes what is waiting, then closes the file. */
  async close(): Promise<void> {
    await this.queue;
    await this.file.close();
  }

  /** One group: every append waiting now, one write, one fdatasync. */
  private async flush(): Promise<void> {
    this.scheduled = false;
    const group = this.waiting;
    this.waiting = [];
    if (this.broken !== undefined) {
      for (const w of group) w.reject(this.broken);
      return;
    }
    let length = 0;
    for (const w of group) length += RECORD_HEAD + w.bytes.length;
    const bytes = Buffer.alloc(GROUP_HEAD + length);
    let at = GROUP_HEAD;
    for (const w of group) {
      bytes.writeUInt32LE(w.bytes.length, at);
      bytes.set(w.bytes, at + RECORD_HEAD);
      at += RECORD_HEAD + w.bytes.length;
    }
    groupHead(bytes, length, bytes.subarray(GROUP_HEAD));
    const started = systemTimer();
    try {
      await this.syncRename();
      await writeAll(this.file, bytes, this.size);
      await this.file.datasync();
    } catch (error) {
      // Whatever part of the group reached the file must not stay in front of the next one.
      try {
        await this.file.truncate(this.size);
        await this.file.datasync();
      } catch (cut) {
        this.broken = new Error(`the token journal ${this.path} could not be cut back after a failed write ` +
          `(${(cut as Error).message}); no token can be issued until api-auth restarts`);
      }
      for (const w of group) w.reject(error);
      return;
    }
    this.stats.writeNs += BigInt(Math.round((systemTimer() - started) * 1e6));
    this.stats.groups++;
    this.stats.records += group.length;
    this.size += bytes.length;
    this.recordsInFile += group.length;
    this.groupsInFile++;
    for (const w of group) w.resolve();
  }

  private async syncRename(): Promise<void> {
    if (this.renameSynced) return;
    await syncFolder(this.dir);
    this.renameSynced = true;
  }

  /** Syncs the folder after a rename; if that fails, the next group tries again first, and fails while it cannot. */
  private async syncRenameOrDefer(): Promise<void> {
    this.renameSynced = false;
    await this.syncRename().catch(() => undefined);
  }
}

/** A group's head: the payload's length, the CRC-32 of those 4 bytes, the CRC-32 of the payload. */
function groupHead(into: Buffer, length: number, payload: Uint8Array): void {
  into.writeUInt32LE(length, 0);
  into.writeUInt32LE(crc32(into.subarray(0, 4)), 4);
  into.writeUInt32LE(crc32(payload), 8);
}

async function writeAll(file: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < bytes.length;) {
    const { bytesWritten } = await file.write(bytes, done, bytes.length - done, position + done);
    done += bytesWritten;
  }
}

/**
 * The whole journal, through a temporary file: fsynced and renamed over the old one.
 * Returns the new file, still open for appending (nothing can fail between the rename and
 * its adoption), and its size. The rename is durable once the folder is synced.
 */
async function writeWhole(dir: string, key: Uint8Array, id: Identity, records: readonly Uint8Array[]): Promise<{ file: FileHandle; size: number }> {
  const path = join(dir, JOURNAL_FILE);
  const tmp = `${path}.tmp`;
  const parts: Uint8Array[] = [];
  if (records.length > 0) {
    let length = 0;
    for (const r of records) length += RECORD_HEAD + r.length;
    const payload = Buffer.alloc(length);
    let at = 0;
    for (const r of records) {
      payload.writeUInt32LE(r.length, at);
      payload.set(r, at + RECORD_HEAD);
      at += RECORD_HEAD + r.length;
    }
    const head = Buffer.alloc(GROUP_HEAD);
    groupHead(head, length, payload);
    parts.push(head, payload);
  }
  const base = HEADER + parts.reduce((n, p) => n + p.length, 0);
  const bytes = Buffer.concat([header(key, id, base), ...parts]);
  await unlinkIfThere(tmp);
  const file = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    await writeAll(file, bytes, 0);
    await file.sync();
    await fs.rename(tmp, path);
  } catch (e) {
    await file.close().catch(() => undefined);
    await unlinkIfThere(tmp).catch(() => undefined);
    throw e;
  }
  return { file, size: bytes.length };
}
