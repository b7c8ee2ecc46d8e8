// The token journal read at start (readJournal), held to the state file's mark, and
// what a repair can keep of one (salvageJournal). The format and its torn tails are
// journal-format.ts's.
//
// A cut or a loss must not pass for a crash: after each compaction and at a clean stop,
// the state file records the journal's mark (codec.ts: epoch, compaction, groups and
// bytes, every one acknowledged). A start refuses a journal that holds less, is missing
// while the mark records groups, is of another epoch (another folder's, or one a repair
// set aside) or of another compaction than the mark's or the one after it (a crash between
// a compaction's rename and its mark). Only a torn tail past the mark is dropped. A journal
// of format 1 (no epoch) is read beside a state without a mark, and rewritten as format 2.
import { join } from 'node:path';
import { StateError } from '../errors.js';
import type { JournalMark } from './codec.js';
import { readDataFile } from './data-folder.js';
import { HEADER, HEADER_1, JOURNAL_FILE, journalDamaged, journalMissing, scan } from './journal-format.js';
import type { Identity } from './journal-format.js';

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
    if (id === undefined)
      throw journalDamaged(path, 'it is of format 1, older than the state file beside it, which records a journal of format 2');
    if (!Buffer.from(id.epoch).equals(mark.epoch)) {
      throw journalDamaged(
        path,
        "it is of another epoch than the state file records: another data folder's journal, " + 'or one a repair set aside',
      );
    }
    if (id.seq === mark.seq) acknowledged = { bytes: mark.bytes, groups: mark.groups };
    else if (id.seq !== mark.seq + 1) {
      // One more is a compaction whose mark a crash kept from the state file; anything else is another copy.
      throw journalDamaged(
        path,
        `it is compaction ${id.seq}, where the state file records compaction ${mark.seq}: an older or ` +
          'newer copy of the journal than the state file beside it',
      );
    }
  }
  if (wholeBytes < acknowledged.bytes) {
    throw journalDamaged(
      path,
      `its whole groups end at byte ${wholeBytes}, but ${acknowledged.bytes} bytes were written to it and ` +
        `acknowledged: it was cut after a clean write, not torn by a crash during one`,
      file.length,
    );
  }
  const atMark = read.groups.findIndex((g) => g.end === acknowledged.bytes) + 1;
  if (acknowledged.groups > 0 && atMark !== acknowledged.groups) {
    throw journalDamaged(
      path,
      `its groups do not end at byte ${acknowledged.bytes} as the ${acknowledged.groups} acknowledged ` + 'groups did',
      wholeBytes,
    );
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
