// The data folder's usage history between two writes of its file whole: a save appends
// only what changed to `usage-history.journal` (the file itself untouched), the journal is
// folded into the file once it is as large, a kill -9 keeps every save's counts, a clean
// stop leaves the whole history in the file and the journal empty, and a journal that is
// damaged, or is not a regular file, is dropped with a warning. The clock is the test's:
// each SIGUSR2 moves it 30 s, to the next save.
import t from 'tap';
import type { Test } from 'tap';
import { existsSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { authUrl, call } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { CLOCK_START } from '../helpers/library.js';
import { randomPassword, sleep, tempDir } from '../helpers/server.js';
import { type Clocked, startClocked } from '../helpers/clocked.js';

const INFO = '/ext/info';
const HOUR = CLOCK_START / 3_600_000;

interface Folder {
  dir: string;
  password: string;
  file: string;
  journal: string;
}

function folder(t: Test): Folder {
  const dir = tempDir(t);
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  const password = randomPassword();
  writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
  return { dir, password, file: join(dir, 'data', 'usage-history'), journal: join(dir, 'data', 'usage-history.journal') };
}

async function issue(url: string, password: string): Promise<{ token: string; id: string }> {
  const answer = await jsonrpc(authUrl(url), 'auth.newToken', { password, endpoints: [INFO] });
  if (answer.result === undefined) throw new Error(`newToken failed: ${JSON.stringify(answer.error)}`);
  return answer.result as { token: string; id: string };
}

async function calls(t: Test, server: Clocked, token: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) t.equal((await call(server.url, INFO, token)).status, 200);
}

/** The token's requests in the first hour, as auth.usageHistory answers. */
async function counted(server: Clocked, password: string, id: string): Promise<number> {
  const answer = await jsonrpc(authUrl(server.url), 'auth.usageHistory', { password, id, hours: 1 });
  return (answer.result as { hours: { requests: number }[] }).hours[0].requests;
}

/** The journal's lines, parsed (a torn last one left out). */
function journalLines(path: string): { hour: number; requests: number; tokens: number[] }[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .slice(0, -1)
    .map((line) => JSON.parse(line));
}

/** The token's count in the file's series for the first hour, or 0. */
function inFile(path: string, serial: number): number {
  if (!existsSync(path)) return 0;
  const saved = JSON.parse(readFileSync(path, 'utf8')) as { tokens: number[][] };
  const entry = saved.tokens.find((e) => e[0] === serial);
  return entry === undefined || entry[1] !== HOUR ? 0 : entry[2];
}

/** The journal's bytes; -1 while it is missing or not a regular file. */
function journalSize(path: string): number {
  return existsSync(path) && lstatSync(path).isFile() ? lstatSync(path).size : -1;
}

/** Whether the file holds `count` for the token and the journal is the fresh one after it (both written whole). */
function compactedAt(f: Folder, serial: number, count: number): boolean {
  return inFile(f.file, serial) === count && journalSize(f.journal) === 0;
}

/** Moves the server's clock to its next save, and waits until `saved` holds. */
async function nextSave(server: Clocked, saved: () => boolean): Promise<void> {
  server.child.kill('SIGUSR2');
  await server.waitForLog((l) => l.msg === 'clock moved');
  while (!saved()) await sleep(20);
}

t.test('a save appends what changed; the file is written whole at the first save and once the journal is as large', async (t) => {
  const f = folder(t);
  let server = await startClocked(t, f.dir, CLOCK_START);
  const { token, id } = await issue(server.url, f.password);
  const serial = Number(id.slice(1));
  await calls(t, server, token, 3);
  await nextSave(server, () => compactedAt(f, serial, 3));
  t.equal(statSync(f.journal).size, 0, 'the first save writes the file whole, and an empty journal');
  t.equal(statSync(f.journal).mode & 0o777, 0o600, 'the journal is 0600');
  const whole = readFileSync(f.file, 'utf8');

  await calls(t, server, token, 2);
  await nextSave(server, () => journalLines(f.journal).some((l) => l.tokens.includes(5)));
  t.equal(readFileSync(f.file, 'utf8'), whole, 'the next save leaves the file as it was...');
  t.same(
    journalLines(f.journal),
    [{ hour: HOUR, requests: 5, refusals: {}, tokens: [serial, 5] }],
    '...and appends the hour it added to: the counts as they stand, the token beside the node',
  );

  // Each save's line is about as long as the file: the second one past it has the file written whole again.
  let compacted = false;
  let count = 5;
  for (let round = 0; round < 4 && !compacted; round++) {
    await calls(t, server, token, 1);
    count++;
    const want = count;
    await nextSave(server, () => compactedAt(f, serial, want) || journalLines(f.journal).some((l) => l.tokens.includes(want)));
    compacted = compactedAt(f, serial, want);
  }
  t.ok(compacted, 'once the journal holds as many bytes as the file, a save writes the file whole');
  t.equal(statSync(f.journal).size, 0, 'and empties the journal');

  await calls(t, server, token, 2);
  await nextSave(server, () => journalLines(f.journal).some((l) => l.tokens.includes(count + 2)));
  await calls(t, server, token, 1);
  server.child.kill('SIGKILL');
  await server.exited;

  server = await startClocked(t, f.dir, CLOCK_START + 10 * 60_000);
  t.equal(await counted(server, f.password, id), count + 2, "a kill -9 keeps the file and the journal's saves, not the call after them");
  t.equal((await server.stop('SIGTERM')).code, 0, 'a clean stop');
  t.equal(inFile(f.file, serial), count + 2, 'leaves the whole history in the file');
  t.equal(statSync(f.journal).size, 0, 'and the journal empty');
});

t.test('a damaged journal counts to its damage, with a warning; a torn last line is a cut write; a link is not followed', async (t) => {
  const f = folder(t);
  let server = await startClocked(t, f.dir, CLOCK_START);
  const { token, id } = await issue(server.url, f.password);
  const serial = Number(id.slice(1));
  await calls(t, server, token, 1);
  await nextSave(server, () => compactedAt(f, serial, 1));
  server.child.kill('SIGKILL');
  await server.exited;

  const line = (n: number): string => `${JSON.stringify({ hour: HOUR, requests: n, refusals: {}, tokens: [serial, n] })}\n`;
  writeFileSync(f.journal, `${line(4)}${line(7).slice(0, 20)}`);
  server = await startClocked(t, f.dir, CLOCK_START + 60_000);
  t.equal(await counted(server, f.password, id), 4, 'a torn last line is left out, silently');
  t.notOk(
    server.logs.some((l) => l.level === 'warn'),
    'no warning for it',
  );
  server.child.kill('SIGKILL');
  await server.exited;

  writeFileSync(f.journal, `${line(5)}{"hour":"x"}\n${line(9)}`);
  server = await startClocked(t, f.dir, CLOCK_START + 2 * 60_000);
  t.equal(await counted(server, f.password, id), 5, 'the lines before the damage count, none after');
  t.match(
    server.logs.find((l) => l.level === 'warn' && /usage history journal is damaged/.test(String(l.msg))),
    { path: f.journal, reason: /^line 2: its hour/ },
    'a warning names the journal and the line',
  );
  await nextSave(server, () => compactedAt(f, serial, 5));
  t.equal(statSync(f.journal).size, 0, 'the next save writes the file whole and a fresh journal');
  server.child.kill('SIGKILL');
  await server.exited;

  const elsewhere = join(f.dir, 'elsewhere');
  writeFileSync(elsewhere, line(8));
  unlinkSync(f.journal);
  symlinkSync(elsewhere, f.journal);
  server = await startClocked(t, f.dir, CLOCK_START + 3 * 60_000);
  t.equal(await counted(server, f.password, id), 5, 'a journal that is a link is not read');
  t.match(
    server.logs.find((l) => l.level === 'warn' && /usage history journal is damaged/.test(String(l.msg))),
    { reason: /symbolic link/ },
  );
  await calls(t, server, token, 1);
  await nextSave(server, () => compactedAt(f, serial, 6));
  t.ok(lstatSync(f.journal).isFile(), 'the save puts a journal of its own in its place');
  t.equal(readFileSync(elsewhere, 'utf8'), line(8), 'and writes nothing through the link');
  t.equal((await server.stop('SIGTERM')).code, 0);
});
