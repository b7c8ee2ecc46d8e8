// The token journal's three parts on their own: the format (host/state/journal-format.ts:
// the bytes, and a scan that tells a torn tail from damage), the appender (journal.ts:
// group commit and rewrites) and the start's read (journal-read.ts: held to the state
// file's mark). The data folder as a whole, crashes and repairs are test/cli's.
import t, { type Test } from 'tap';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeGroup, header, HEADER, JOURNAL_FILE, scan } from '../../build/host/state/journal-format.js';
import { Journal } from '../../build/host/state/journal.js';
import { readJournal, salvageJournal } from '../../build/host/state/journal-read.js';

const KEY = new Uint8Array(32).fill(7);
const EPOCH = new Uint8Array(16).fill(3);
const ID = { epoch: EPOCH, seq: 1 };
const record = (text: string) => Buffer.from(text);
const texts = (records: Uint8Array[]) => records.map((r) => Buffer.from(r).toString());

function folder(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-journal-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A journal file of the given groups, as its bytes. */
function journalBytes(...groups: string[][]): Buffer {
  return Buffer.concat([header(KEY, ID, HEADER), ...groups.map((g) => encodeGroup(g.map(record)))]);
}

t.test('a group is its head (length, its CRC, the payload CRC) and its records, each with its length', async (t) => {
  const group = encodeGroup([record('ab'), record('')]);
  t.equal(group.length, 12 + 4 + 2 + 4);
  t.equal(group.readUInt32LE(0), 10);
  t.same([...group.subarray(12)], [2, 0, 0, 0, 0x61, 0x62, 0, 0, 0, 0]);
  const read = scan(journalBytes(['a', 'b'], ['c']), 'j', KEY);
  t.same(
    read.groups.map((g) => texts(g.records)),
    [['a', 'b'], ['c']],
  );
  t.same([read.tornBytes, read.damage, read.id?.seq], [0, undefined, 1]);
});

t.test('a torn last group is dropped; a whole one that fails its checksum, or damage before others, is not', async (t) => {
  const file = journalBytes(['a'], ['bb']);
  const cut = scan(file.subarray(0, file.length - 1), 'j', KEY);
  t.same([cut.groups.length, cut.tornBytes, cut.damage], [1, file.length - 1 - (HEADER + 17), undefined], 'cut short: torn');
  const zeros = Buffer.concat([file, Buffer.alloc(700)]);
  t.same([scan(zeros, 'j', KEY).groups.length, scan(zeros, 'j', KEY).tornBytes], [2, 700], 'zeros to the end: the file grew, no data came');
  const flippedLast = Buffer.from(file);
  flippedLast[flippedLast.length - 1] ^= 1;
  t.match(scan(flippedLast, 'j', KEY).damage, { why: /last group.*whole.*fails its checksum/, at: HEADER + 17 });
  const flippedFirst = Buffer.from(file);
  flippedFirst[HEADER + 16] ^= 1;
  t.match(scan(flippedFirst, 'j', KEY).damage, { why: /fails its checksum, and other groups follow it/, at: HEADER });
  t.throws(() => scan(file, 'j', new Uint8Array(32)), /belongs to another state file/, 'another token key');
  const later = Buffer.from(file);
  later.writeUInt32LE(9, 16);
  t.throws(() => scan(later, 'j', KEY), /format version 9/);
});

t.test('appends share groups, and the start reads them back against the mark', async (t) => {
  const dir = folder(t);
  const journal = await Journal.create(dir, KEY, EPOCH, 1, [record('kept')]);
  await Promise.all([journal.append(record('a')), journal.append(record('b'))]);
  await journal.append(record('c'));
  const mark = journal.mark!;
  t.same([mark.seq, mark.groups, journal.records], [1, 3, 4], "the rewrite's group, then one per wait");
  await journal.close();
  const read = await readJournal(dir, KEY, mark);
  t.same(texts(read!.records), ['kept', 'a', 'b', 'c']);
  t.same([read!.groups, read!.wholeBytes, read!.tornBytes], [3, mark.bytes, 0]);
  t.same(readFileSync(join(dir, JOURNAL_FILE)).subarray(0, HEADER), header(KEY, { epoch: EPOCH, seq: 1 }, HEADER + 12 + 8));
});

t.test('the read refuses less than the mark acknowledged, another epoch, or a missing file with groups', async (t) => {
  const dir = folder(t);
  const journal = await Journal.create(dir, KEY, EPOCH, 4, []);
  await journal.append(record('x'));
  const mark = journal.mark!;
  t.equal(await journal.rewrite(() => [record('y')]), 1, 'a compaction keeps what it is given');
  await journal.close();
  const path = join(dir, JOURNAL_FILE);
  t.same(texts((await readJournal(dir, KEY, mark))!.records), ['y'], 'compaction 5 beside a mark of 4: a crash before the mark');
  await t.rejects(readJournal(dir, KEY, { ...mark, seq: 2 }), /compaction 5, where the state file records compaction 2/);
  await t.rejects(readJournal(dir, KEY, { ...mark, seq: 5, epoch: new Uint8Array(16) }), /another epoch/);
  await t.rejects(readJournal(dir, KEY, { ...mark, seq: 5, groups: 2, bytes: mark.bytes + 100 }), /cut after a clean write/);
  truncateSync(path, HEADER + 3);
  await t.rejects(
    readJournal(dir, KEY, undefined),
    /cut after a clean write/,
    "with no mark still: a rewrite's own bytes were synced before its rename, so no crash tears them",
  );
  t.same(await salvageJournal(dir, KEY), [], 'and a repair keeps no record of the cut group');
  rmSync(path);
  await t.rejects(readJournal(dir, KEY, mark), /is missing, but the state file beside it records 1 groups/);
  t.equal(await readJournal(dir, KEY, undefined), undefined);
  writeFileSync(path, 'not a journal');
  t.same(await salvageJournal(dir, KEY), [], 'a repair keeps nothing of a file that is not a journal');
});
