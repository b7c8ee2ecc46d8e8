// The token inventory's file: an append-only journal in the data folder, beside the state
// file. The state file is rewritten whole for its rare changes; a record per issued token
// would make that O(inventory) per call, so issues are appended here instead. This is the
// journal open for appending; its format is journal-format.ts's, and the start reads it
// with journal-read.ts.
//
// Appends that arrive while a group is being synced wait together for the next one:
// concurrent issues share an fsync (group commit). The header is written only by a rewrite
// (a temporary file, fsynced, renamed, the folder fsynced), so it is never torn. A rewrite
// that fails before its rename leaves the old journal as it was; once renamed, the new
// file is the journal, and the group after it waits for the folder's sync.
import { systemTimer } from '../clock.js';
import { constants, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { JournalMark } from './codec.js';
import { syncFolder, unlinkIfThere } from './data-folder.js';
import { encodeGroup, header, HEADER, JOURNAL_FILE } from './journal-format.js';
import type { Identity } from './journal-format.js';
import type { JournalContents } from './journal-read.js';

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
  private constructor(
    private readonly dir: string,
    private readonly key: Uint8Array,
    private readonly epoch: Uint8Array,
    private id: Identity | undefined,
    private file: FileHandle,
    size: number,
    records: number,
    groups: number,
  ) {
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
    const bytes = encodeGroup(group.map((w) => w.bytes));
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
        this.broken = new Error(
          `the token journal ${this.path} could not be cut back after a failed write ` +
            `(${(cut as Error).message}); no token can be issued until api-auth restarts`,
        );
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

async function writeAll(file: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await file.write(bytes, done, bytes.length - done, position + done);
    done += bytesWritten;
  }
}

/**
 * The whole journal, through a temporary file: fsynced and renamed over the old one.
 * Returns the new file, still open for appending (nothing can fail between the rename and
 * its adoption), and its size. The rename is durable once the folder is synced.
 */
async function writeWhole(
  dir: string,
  key: Uint8Array,
  id: Identity,
  records: readonly Uint8Array[],
): Promise<{ file: FileHandle; size: number }> {
  const path = join(dir, JOURNAL_FILE);
  const tmp = `${path}.tmp`;
  const group = records.length > 0 ? encodeGroup(records) : Buffer.alloc(0);
  const bytes = Buffer.concat([header(key, id, HEADER + group.length), group]);
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
