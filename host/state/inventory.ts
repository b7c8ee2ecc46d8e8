// The token inventory: what auth.listTokens shows and auth.revokeToken finds by id, for
// every token of the current password generation that has not expired. Each entry is
// durable before the issue that made it answers; what it lists as revoked is the state
// store's word (its revocations are what the core is restored from), so after any restart
// the list and the gate agree.
//
// It implements the service's Inventory (service/ledger.ts), which the fleet's inventory
// (cluster/inventory.ts) implements too.
import { join } from 'node:path';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { Inventory, InventoryEntry } from '../service/ledger.js';
import type { RotationEnds } from '../service/rotation-ends.js';
import type { JournalMark } from './codec.js';
import { Journal } from './journal.js';
import { JOURNAL_FILE, journalDamaged } from './journal-format.js';
import { readJournal } from './journal-read.js';
import type { JournalContents } from './journal-read.js';
import { newEpoch } from './store.js';

/** What is live: a test of an entry, for the time and generation now. */
export type Liveness = (entry: InventoryEntry) => boolean;

const ISSUE_RECORD = 1;
/** The new token of a rotation: an issue record with the old token's serial, end and usage (rotation-ends.ts). */
const ROTATION_RECORD = 2;
/** Below this many records, the journal is never compacted while running. */
const COMPACT_MIN_RECORDS = 1024;
/** Appends between two looks at what is dead. */
const PRUNE_EVERY = 1024;

/** The journal of a data folder, read and held to its state before anything is written (readInventory). */
export interface InventoryRead {
  readonly contents: JournalContents | undefined;
  /** Every entry, decoded and checked against the state. */
  readonly entries: readonly InventoryEntry[];
}

/**
 * Reads the journal of `dir` (bound to the token key `key`, and held to the state file's
 * `mark`), and decodes its entries. `valid` says whether an entry can belong to the state
 * beside it (its grant exists, its serial was reserved); one that cannot is damage.
 * Throws StateError for a journal the start must refuse; writes nothing.
 */
export async function readInventory(
  dir: string,
  key: Uint8Array,
  mark: JournalMark | undefined,
  valid: (entry: InventoryEntry) => string | undefined,
): Promise<InventoryRead> {
  const contents = await readJournal(dir, key, mark);
  const path = join(dir, JOURNAL_FILE);
  const entries = (contents?.records ?? []).map((bytes) => {
    let entry: InventoryEntry;
    try {
      entry = decodeEntry(bytes);
    } catch (e) {
      throw journalDamaged(path, (e as Error).message);
    }
    const problem = valid(entry);
    if (problem !== undefined) throw journalDamaged(path, `the entry of serial ${entry.serial} ${problem}`);
    return entry;
  });
  return { contents, entries };
}

/**
 * The records of `salvaged` (salvageJournal) that decode and that `valid` accepts: what a
 * repair keeps.
 */
export function keepable(salvaged: readonly Buffer[], valid: (entry: InventoryEntry) => string | undefined): Buffer[] {
  return salvaged.filter((bytes) => {
    try {
      return valid(decodeEntry(bytes)) === undefined;
    } catch {
      return false;
    }
  });
}

/** The inventory kept in memory, made durable by the journal of the data folder. */
export class JournalInventory implements Inventory {
  private readonly entries = new Map<number, InventoryEntry>();
  private pending = 0;
  private sincePrune = 0;
  /** Whether the state file holds the journal's current compaction: until it does, none follows (readJournal allows one more). */
  private markRecorded = false;
  private compacting = false;

  private constructor(
    private readonly journal: Journal,
    private readonly live: Liveness,
    private readonly recordMark: (mark: JournalMark) => Promise<void>,
    private readonly log: Logger,
    entries: readonly InventoryEntry[],
    private readonly ends: RotationEnds,
  ) {
    for (const e of entries) {
      this.entries.set(e.serial, e);
      ends.add(e);
    }
  }

  /**
   * Keeps the live entries of `read` and writes them back as a fresh journal, the next
   * compaction after the journal read and the state's `mark`: a start compacts. When it
   * cannot (a full disk), the journal read is kept as it is, and the start goes on.
   * `recordMark` writes what the journal holds to the state file. The ends that
   * rotations' entries carry go to `ends`: one already due is applied as it is read.
   */
  static async open(
    dir: string,
    key: Uint8Array,
    read: InventoryRead,
    mark: JournalMark | undefined,
    live: Liveness,
    recordMark: (mark: JournalMark) => Promise<void>,
    log: Logger,
    ends: RotationEnds,
  ): Promise<JournalInventory> {
    const { contents } = read;
    const path = join(dir, JOURNAL_FILE);
    const kept = read.entries.filter(live);
    if (contents !== undefined && contents.tornBytes > 0) {
      log.warn('the token journal ended in a write cut short by a crash; its unanswered issues are dropped', {
        path,
        bytes: contents.tornBytes,
      });
    }
    const epoch = contents?.id?.epoch ?? mark?.epoch ?? newEpoch();
    let journal: Journal;
    try {
      journal = await Journal.create(dir, key, epoch, Math.max(contents?.id?.seq ?? 0, mark?.seq ?? 0) + 1, kept.map(encodeEntry));
    } catch (error) {
      // A full disk must not keep the node from serving: the journal read is whole (but
      // for a torn tail, cut off) and takes the next issues as it is. Without one, there
      // is nothing to go on with.
      if (contents === undefined) throw error;
      journal = await Journal.reopen(dir, key, contents, epoch);
      log.warn(
        `the token journal could not be compacted at start; it is kept as it was, and compaction is tried again after ${PRUNE_EVERY} ` +
          'issues or at the next start (free space in the data folder if it is full)',
        { path: journal.path, ...errorFields(error) },
      );
    }
    const inventory = new JournalInventory(journal, live, recordMark, log, kept, ends);
    await inventory.markJournal();
    return inventory;
  }

  /** The journal's write statistics (groups, records, time in write and fdatasync). */
  get stats(): Journal['stats'] {
    return this.journal.stats;
  }

  list(): InventoryEntry[] {
    const listed: InventoryEntry[] = [];
    for (const e of this.entries.values()) if (this.live(e)) listed.push(e);
    return listed;
  }

  get(serial: number): InventoryEntry | undefined {
    const e = this.entries.get(serial);
    return e !== undefined && this.live(e) ? e : undefined;
  }

  successor(serial: number): { readonly to: number; readonly endsAt: number } | undefined {
    return this.ends.successor(serial);
  }

  hasRoom(max: number): boolean {
    // The map holds dead entries too until pruned; pruning is O(inventory), so it waits
    // for the limit to seem reached.
    if (this.entries.size + this.pending < max) return true;
    this.prune();
    return this.entries.size + this.pending < max;
  }

  async append(entry: InventoryEntry): Promise<void> {
    this.pending++;
    try {
      await this.journal.append(encodeEntry(entry));
    } finally {
      this.pending--;
    }
    this.entries.set(entry.serial, entry);
    this.ends.add(entry);
    if (++this.sincePrune >= PRUNE_EVERY) {
      this.sincePrune = 0;
      this.prune();
      // Not awaited: the issue is durable already, and its answer need not wait for a rewrite.
      void this.compactIfDead();
    }
  }

  /** Writes what is waiting, closes the journal, and records what it holds in the state file (a clean stop). */
  async close(): Promise<void> {
    this.ends.close();
    await this.journal.close();
    await this.markJournal();
  }

  /**
   * Records the journal's mark in the state file. One that fails leaves the state's
   * older mark, which the journal still satisfies; no compaction follows until one is
   * recorded.
   */
  private async markJournal(): Promise<void> {
    const mark = this.journal.mark;
    if (mark === undefined) {
      this.markRecorded = true;
      return;
    }
    try {
      await this.recordMark(mark);
      this.markRecorded = true;
    } catch (error) {
      this.markRecorded = false;
      this.log.warn(
        'the state file could not record what the token journal holds; the journal is not compacted until it can ' +
          '(free space in the data folder if it is full)',
        { path: this.journal.path, ...errorFields(error) },
      );
    }
  }

  /** Forgets the entries that are no longer live. */
  private prune(): void {
    for (const [serial, e] of this.entries) {
      if (this.live(e)) continue;
      this.entries.delete(serial);
      this.ends.forget(serial);
    }
  }

  /**
   * Rewrites the journal once the records no longer listed outnumber the live ones:
   * the file then stays within twice the live inventory (or the minimum). A compaction that
   * fails leaves the journal as it was: the issue that set it off is durable all the same.
   */
  private async compactIfDead(): Promise<void> {
    const records = this.journal.records;
    if (this.compacting || records < COMPACT_MIN_RECORDS || records <= 2 * this.entries.size) return;
    this.compacting = true;
    try {
      if (!this.markRecorded) await this.markJournal();
      if (!this.markRecorded) return;
      // From the rename on, the state's mark is of the compaction before.
      this.markRecorded = false;
      const kept = await this.journal.rewrite(() => {
        this.prune();
        return [...this.entries.values()].map(encodeEntry);
      });
      this.log.info('compacted the token journal', { path: this.journal.path, records, kept });
      await this.markJournal();
    } catch (error) {
      // The old journal stands, whole, and takes the next issues; the next look tries again.
      this.log.warn(
        `the token journal could not be compacted; it is kept as it was, and compaction is tried again after ${PRUNE_EVERY} ` +
          'more issues (free space in the data folder if it is full)',
        { path: this.journal.path, ...errorFields(error) },
      );
    } finally {
      this.compacting = false;
    }
  }
}

// An issue record: type (1), serial (u64), generation (u32), grant (u32), issued at (u64),
// expiry (u64), then the label's UTF-8 bytes to the record's end, with a flag byte before
// them (0 no label, 1 a label) so that an absent label and any label differ. A rotation
// record (2) puts the rotation between the expiry and the flag: the old token's serial,
// its end, its expiry, its requests and its last use (ms), each a u64.
const FIXED = 33;
const ROTATION_BYTES = 40;

function encodeEntry(e: InventoryEntry): Buffer {
  const label = e.label === undefined ? undefined : Buffer.from(e.label, 'utf8');
  const r = e.rotation;
  const at = r === undefined ? FIXED : FIXED + ROTATION_BYTES;
  const bytes = Buffer.alloc(at + 1 + (label?.length ?? 0));
  bytes.writeUInt8(r === undefined ? ISSUE_RECORD : ROTATION_RECORD, 0);
  bytes.writeBigUInt64LE(BigInt(e.serial), 1);
  bytes.writeUInt32LE(e.generation, 9);
  bytes.writeUInt32LE(e.grant, 13);
  bytes.writeBigUInt64LE(BigInt(e.issuedAt), 17);
  bytes.writeBigUInt64LE(BigInt(e.expiry), 25);
  if (r !== undefined) {
    [r.from, r.endsAt, r.fromExpiry, r.requests, r.lastUsedMs].forEach((v, i) => bytes.writeBigUInt64LE(BigInt(v), FIXED + 8 * i));
  }
  bytes.writeUInt8(label === undefined ? 0 : 1, at);
  label?.copy(bytes, at + 1);
  return bytes;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeEntry(bytes: Buffer): InventoryEntry {
  const type = bytes[0];
  const at = type === ROTATION_RECORD ? FIXED + ROTATION_BYTES : FIXED;
  if (bytes.length < at + 1 || (type !== ISSUE_RECORD && type !== ROTATION_RECORD))
    throw new Error(`a record is of unknown type ${bytes[0]} or cut short`);
  const u64 = (at: number): number => {
    const v = bytes.readBigUInt64LE(at);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('a number is out of range');
    return Number(v);
  };
  const flag = bytes[at];
  if (flag > 1 || (flag === 0 && bytes.length !== at + 1)) throw new Error("a record's label is malformed");
  const entry = {
    serial: u64(1),
    generation: bytes.readUInt32LE(9),
    grant: bytes.readUInt32LE(13),
    issuedAt: u64(17),
    expiry: u64(25),
    label: flag === 0 ? undefined : utf8.decode(bytes.subarray(at + 1)),
  };
  if (type === ISSUE_RECORD) return entry;
  const [from, endsAt, fromExpiry, requests, lastUsedMs] = [0, 1, 2, 3, 4].map((i) => u64(FIXED + 8 * i));
  return { ...entry, rotation: { from, endsAt, fromExpiry, requests, lastUsedMs } };
}
