// The usage history (service/usage-history.ts) of the data folder, kept across restarts
// in two files. `usage-history` holds it whole: written (through `usage-history.tmp`) as
// the `usage` file is (usage.ts), at the first save after a start, at a clean stop, and
// whenever the journal has grown as large as it. Every other save appends to
// `usage-history.journal` only what it found changed (UsageHistory.takeJournal: the
// counts of the hours added to, of the node and of the tokens added to), and fsyncs it:
// a busy token costs a dozen bytes a save, not its whole series. A kill -9 loses what was
// counted since the last save, at most USAGE_SAVE_MS plus one tick, as for `requests`.
//
// The file holds `{"version":1,"requests":[firstHour, count, ...],"refusals":{"<reason>":
// [firstHour, count, ...], ...},"tokens":[[serial, firstHour, count, ...], ...]}`
// (readHistory); the journal, one JSON line per hour a save added to (readJournal), each
// count as it stood, so a line read over a later file changes nothing: a crash between a
// compaction's rename and the journal's reset loses nothing and counts nothing twice. A
// file that cannot be read as that, or is not a regular file, is dropped with a warning:
// the history starts empty (or from the file alone, for a journal), and the next save
// replaces it. The journal is never appended to as it was found: the first save writes the
// file whole and a fresh, empty journal (created exclusively, as writeDataFile does, so no
// link is followed), which is then opened for appending and checked to be a regular file
// of this user's, for no other user to read.
import { constants, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../ops/log.js';
import { errorFields } from '../ops/log.js';
import { readHistory, readJournal } from '../service/usage-history.js';
import type { UsageHistory } from '../service/usage-history.js';
import type { ReadHistory } from '../service/ledger.js';
import { writeDataFile } from './data-folder.js';
import { readUsageFile } from './usage.js';
import type { HistorySaver } from './usage.js';

/** The history file's name in the data folder. */
export const HISTORY_FILE = 'usage-history';
/** The journal's name: the saves between two writes of the file whole. */
export const HISTORY_JOURNAL = 'usage-history.journal';
const HISTORY_VERSION = 1;

/** Reads the saved history into `history` (the tokens `keep` says are live), and saves it when asked. */
export class HistoryFile implements HistorySaver {
  /** The history's version the files hold, so that an idle service does not write them again. */
  private written = -1;
  /** The journal open for appending, once a save has written the file whole; undefined until then, and after a failed write. */
  private journal: FileHandle | undefined;
  /** The bytes of the file, and of the journal since: past the file's, the next save writes the file whole. */
  private fileBytes = 0;
  private journalBytes = 0;

  constructor(
    private readonly dir: string,
    private readonly history: UsageHistory,
    private readonly log: Logger,
  ) {}

  async restore(keep: (serial: number) => boolean): Promise<void> {
    const path = join(this.dir, HISTORY_FILE);
    const bytes = await readUsageFile(path, 'usage history file');
    // What the files hold (nothing, or the history restored) needs no write until something changes.
    this.written = this.history.version;
    let saved: ReadHistory | undefined;
    if (bytes !== undefined) {
      const read = typeof bytes === 'string' ? bytes : readFile(bytes);
      if (typeof read === 'string') {
        this.written = -1;
        this.log.warn(
          'the usage history file is damaged, so the usage history (auth.usageHistory) starts empty; it is replaced at the next save',
          { path, reason: read },
        );
      } else {
        saved = read;
      }
    }
    const journalPath = join(this.dir, HISTORY_JOURNAL);
    // Over a damaged file, the journal's hours alone would be a history with holes: both are dropped.
    const journal = this.written === -1 ? undefined : await readUsageFile(journalPath, 'usage history journal');
    if (journal !== undefined) {
      // What a crash left in it goes into the file at the first save, changed or not.
      if (journal.length > 0) this.written = -1;
      const read =
        typeof journal === 'string'
          ? { history: saved, damage: journal }
          : readJournal(saved ?? { requests: new Map(), refusals: new Map(), tokens: new Map() }, journal.toString('utf8'));
      saved = read.history;
      if (read.damage !== undefined) {
        this.written = -1;
        this.log.warn(
          'the usage history journal is damaged, so the usage history (auth.usageHistory) holds only what was saved before the damage; ' +
            'it is replaced at the next save',
          { path: journalPath, reason: read.damage },
        );
      }
    }
    if (saved === undefined) return;
    this.history.restore(saved, keep);
    if (this.written !== -1) this.written = this.history.version;
  }

  /**
   * Samples, then saves the history when it changed: what changed appended to the journal,
   * or (the first save, a clean stop's `last`, or a journal as large as the file) the file
   * written whole and the journal emptied. A failure is logged, and the next save writes
   * the file whole.
   */
  async save(last = false): Promise<void> {
    await this.history.sample();
    const version = this.history.version;
    if (version === this.written && !(last && this.journalBytes > 0)) return;
    try {
      if (last || this.journal === undefined || this.journalBytes >= this.fileBytes) {
        await this.compact();
      } else {
        const bytes = Buffer.from(this.history.takeJournal(), 'utf8');
        // A failure may leave part of it behind: the next save writes the file whole, and a fresh journal.
        const journal = this.journal;
        this.journal = undefined;
        try {
          await journal.writeFile(bytes);
          await journal.datasync();
        } catch (error) {
          await journal.close().catch(() => undefined);
          throw error;
        }
        this.journal = journal;
        this.journalBytes += bytes.length;
      }
      this.written = version;
    } catch (error) {
      this.log.error('cannot write the usage history file; the history since the last save would be lost by a crash', {
        path: join(this.dir, HISTORY_FILE),
        ...errorFields(error),
      });
    }
  }

  /** Closes the journal; the last save is the saver's (save(true)). */
  async close(): Promise<void> {
    await this.journal?.close();
    this.journal = undefined;
  }

  /**
   * The history written whole, then a fresh, empty journal opened for appending. What
   * changed before is in the file: the journal kept so far is dropped first (and from then
   * on kept, for a journal's first save).
   */
  private async compact(): Promise<void> {
    this.history.takeJournal();
    const old = this.journal;
    this.journal = undefined;
    await old?.close();
    const text = await this.history.encodeText({ version: HISTORY_VERSION });
    const bytes = Buffer.from(text, 'utf8');
    await writeDataFile(this.dir, HISTORY_FILE, bytes);
    this.fileBytes = bytes.length;
    // Once the file is renamed, the old journal's counts are in it: replacing the journal next is safe whenever it is cut short.
    await writeDataFile(this.dir, HISTORY_JOURNAL, new Uint8Array(0));
    this.journal = await openJournal(join(this.dir, HISTORY_JOURNAL));
    this.journalBytes = 0;
  }
}

/** The history file's bytes read back, or why they are not a history of this version. */
function readFile(bytes: Buffer): ReadHistory | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return 'it is not JSON';
  }
  const version = (parsed as { version?: unknown } | null | undefined)?.version;
  return version !== HISTORY_VERSION ? `it is not a usage history file of version ${HISTORY_VERSION}` : readHistory(parsed);
}

/**
 * The fresh journal at `path` opened for appending: never through a link, and only a
 * regular file of this user's that no other user can read or write (writeDataFile made it
 * 0600; anything else is not the file it made).
 */
async function openJournal(path: string): Promise<FileHandle> {
  const file = await fs.open(path, constants.O_WRONLY | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stat = await file.stat();
    const user = process.geteuid?.();
    if (!stat.isFile() || (user !== undefined && stat.uid !== user) || (stat.mode & 0o077) !== 0) {
      throw new Error(`${path} is not the journal just written: not a regular file of this user's, mode 0600`);
    }
    return file;
  } catch (error) {
    await file.close();
    throw error;
  }
}
