// The token journal: the inventory's file in the data folder. An entry is on
// disk before newToken answers (kill -9 right after loses nothing); a start compacts it
// (expired entries and those of earlier passwords are dropped); a torn tail, as a crash
// mid-write leaves, is dropped and logged; damage before the tail, or a journal of
// another state, stops the start with one line naming the file.
import t, { type Test } from 'tap';
import { crc32 } from 'node:zlib';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { authUrl, call, changePassword, expectGranted, expectRefused, issueToken, listTokens, REASONS, REVOKED } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { manualClock, serveAgain, serveInProcess, type LibraryServer } from '../helpers/library.js';
import { restartServer, runCli, startServer } from '../helpers/server.js';

t.jobs = 2;

const MAGIC = Buffer.from('api-auth tokens\n', 'latin1');
/** Magic, format version, key fingerprint, epoch, compaction, the bytes its rewrite wrote. */
const HEADER = MAGIC.length + 4 + 8 + 16 + 4 + 8;
const GROUP_HEAD = 12;
/**
 * The journal is these tests' subject, not the HTTP threads (test/http/threads.test.ts):
 * one thread, whose start costs about a third less CPU time.
 */
const ONE_THREAD = ['--http-threads', '1'];

interface Listed {
  id: string;
  label: string | null;
  revoked: boolean;
}

function journalPath(server: { dataDir: string }): string {
  return join(server.dataDir, 'tokens');
}

/** The offsets of the journal's groups: where each starts and ends. */
function groups(file: Buffer): { start: number; end: number }[] {
  const found: { start: number; end: number }[] = [];
  for (let at = HEADER; at < file.length; ) {
    const end = at + GROUP_HEAD + file.readUInt32LE(at);
    found.push({ start: at, end });
    at = end;
  }
  return found;
}

/** A group head claiming `length` bytes of payload, with a valid check of the length. */
function head(length: number, payloadCrc = 0): Buffer {
  const h = Buffer.alloc(GROUP_HEAD);
  h.writeUInt32LE(length, 0);
  h.writeUInt32LE(crc32(h.subarray(0, 4)), 4);
  h.writeUInt32LE(payloadCrc, 8);
  return h;
}

/**
 * Two tokens, each its own group, then a clean stop: the journal holds the header and two
 * groups. `crashState` is the state file as it was before the stop, as a kill -9 leaves
 * it: it records the journal of the start's compaction, so the two groups are the crash's
 * to tear.
 */
async function twoGroups(t: Test): Promise<{
  server: LibraryServer;
  a: { token: string; id: string };
  b: { token: string; id: string };
  file: Buffer;
  crashState: Buffer;
}> {
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const a = await issueToken(server.url, server.password, { label: 'first' });
  const b = await issueToken(server.url, server.password, { label: 'second' });
  const crashState = readFileSync(join(server.dataDir, 'state'));
  await server.stop();
  const file = readFileSync(journalPath(server));
  t.equal(groups(file).length, 2, 'two issues one after the other: two groups');
  return { server, a, b, file, crashState };
}

t.test('the journal has the documented layout, mode 0600, and a group per write', async (t) => {
  const { server, file } = await twoGroups(t);
  t.same(file.subarray(0, MAGIC.length), MAGIC, 'it starts with "api-auth tokens\\n"');
  t.equal(file.readUInt32LE(MAGIC.length), 2, 'format version 2');
  t.notOk(
    file.subarray(28, 44).every((b) => b === 0),
    'a random epoch',
  );
  t.equal(file.readUInt32LE(44), 1, "compaction 1: the first start's");
  t.equal(Number(file.readBigUInt64LE(48)), HEADER, 'the bytes its rewrite wrote: the header alone, nothing to keep');
  for (const g of groups(file)) {
    t.equal(file.readUInt32LE(g.start + 4), crc32(file.subarray(g.start, g.start + 4)), 'the CRC-32 of the length');
    t.equal(file.readUInt32LE(g.start + 8), crc32(file.subarray(g.start + GROUP_HEAD, g.end)), 'the CRC-32 of the payload');
  }
  t.equal(groups(file).at(-1)!.end, file.length, 'the groups fill the file');
  t.equal(statSync(journalPath(server)).mode & 0o777, 0o600, 'mode 0600');
  t.notOk(file.includes(server.password), 'no password in it');
});

t.test('kill -9 right after newToken answers: the entry is listed and its token verifies; so is a revocation by id', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const kept = await issueToken(server.url, server.password, { label: 'survives kill -9', expiresIn: '1h' });
  t.same(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
  server = await restartServer(t, server);
  const [entry] = await listTokens<Listed>(server.url, server.password);
  t.match(entry, { id: kept.id, label: 'survives kill -9', revoked: false }, 'listed after kill -9');
  expectGranted(t, await call(server.url, '/ext/info', kept.token), '/ext/info', 'its token verifies');
  const answer = await jsonrpc(authUrl(server.url), 'auth.revokeToken', { password: server.password, id: kept.id });
  t.same(answer.result, REVOKED);
  t.same(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
  server = await restartServer(t, server);
  t.match(await listTokens<Listed>(server.url, server.password), [{ id: kept.id, revoked: true }], 'listed revoked after kill -9');
  expectRefused(t, await call(server.url, '/ext/info', kept.token), REASONS.revoked, 'and refused');
});

t.test('a start compacts the journal: expired entries and those of earlier passwords are dropped', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  await issueToken(server.url, server.password, { expiresIn: 60, label: 'expires' });
  const other = await issueToken(server.url, server.password, { label: 'earlier password' });
  const next = `new-${server.password}`;
  t.same(await changePassword(server.url, server.password, next), { success: true });
  const current = await issueToken(server.url, next, { label: 'current' });
  time.now += 60_000;
  await server.stop();
  const before = readFileSync(journalPath(server));
  const again = await serveAgain(t, server, time.clock, next);
  t.same(
    (await listTokens<Listed>(again.url, again.password)).map((e) => e.id),
    [current.id],
    'only the live entry of the current password is listed',
  );
  const after = readFileSync(journalPath(again));
  t.ok(after.length < before.length, `the file shrank (${before.length} -> ${after.length} bytes)`);
  t.notOk(after.includes('expires') || after.includes('earlier password'), 'the dropped entries are gone from the file');
  t.ok(after.includes('current'), 'the live one is kept');
  t.not(other.id, current.id);
});

/** A last group of `length` bytes whose sectors after the first never landed: its head and first bytes, then zeros. */
function landedInPart(file: Buffer, length: number): Buffer {
  const group = Buffer.concat([head(length, 0x5eed), Buffer.alloc(length)]);
  const firstSector = 512 - (file.length % 512);
  group.fill(0x61, GROUP_HEAD, firstSector);
  return Buffer.concat([file, group]);
}

t.test(
  'a torn tail after kill -9 (a group cut short, zeros, a last group part of whose sectors never landed) is dropped and logged; the rest is kept',
  async (t) => {
    const { server, a, b, file, crashState } = await twoGroups(t);
    const [, second] = groups(file);
    const tails: [string, Buffer, string[]][] = [
      ['a group head whose payload never landed', Buffer.concat([file, head(120), Buffer.from('partial')]), [a.id, b.id]],
      ['a group head cut short', Buffer.concat([file, head(120).subarray(0, 7)]), [a.id, b.id]],
      ['zeros, as a file that grew but whose data never landed', Buffer.concat([file, Buffer.alloc(300)]), [a.id, b.id]],
      ['a whole last group whose later sectors are zeros', landedInPart(file, 1500), [a.id, b.id]],
      ['the last group cut short', file.subarray(0, second.end - 3), [a.id]],
    ];
    let previous: LibraryServer = server;
    for (const [name, bytes, kept] of tails) {
      writeFileSync(join(server.dataDir, 'state'), crashState);
      writeFileSync(journalPath(server), bytes);
      const again = await serveAgain(t, previous);
      t.same(
        (await listTokens<Listed>(again.url, again.password)).map((e) => e.id),
        kept,
        `${name}: the whole groups are kept`,
      );
      t.ok(
        again.logs.some((l) => l.level === 'warn' && /token journal ended in a write cut short/.test(String(l.msg))),
        `${name}: logged`,
      );
      await again.stop();
      t.same(
        groups(readFileSync(journalPath(server))).at(-1)?.end,
        readFileSync(journalPath(server)).length,
        `${name}: the start wrote it whole again`,
      );
      writeFileSync(journalPath(server), file);
      previous = again;
    }
  },
);

t.test(
  'damage before the tail, a foreign or unknown journal stops the start: exit 2, one line naming the file, the file left alone',
  async (t) => {
    const { server, file } = await twoGroups(t);
    const [first] = groups(file);
    const flipped = Buffer.from(file);
    flipped[first.start + GROUP_HEAD + 3] ^= 0x01;
    const lastFlipped = Buffer.from(file);
    lastFlipped[groups(file)[1].end - 1] ^= 0x01;
    const badLength = Buffer.from(file);
    badLength[first.start] ^= 0x40;
    const foreign = Buffer.from(file);
    foreign[MAGIC.length + 4] ^= 0xff;
    const version = Buffer.from(file);
    version.writeUInt32LE(7, MAGIC.length);
    const cases: [string, Buffer, RegExp][] = [
      [
        'a bit flipped in the first of two groups',
        flipped,
        /is damaged \(the group at byte \d+ fails its checksum, and other groups follow it\)/,
      ],
      [
        'a bit flipped in the last group, whole',
        lastFlipped,
        /is damaged \(the last group, at byte \d+, is whole \(\d+ bytes\) but fails its checksum: it was written and synced, so this is not a write cut short by a crash\)/,
      ],
      [
        'a bit flipped in the last group, zeros after it',
        Buffer.concat([lastFlipped, Buffer.alloc(600)]),
        /is damaged \(the last group, at byte \d+, is whole/,
      ],
      [
        'a damaged length before another group',
        badLength,
        /is damaged \(the group at byte \d+ has a damaged length, and data follows it\)/,
      ],
      ['cut inside the header', file.subarray(0, HEADER - 1), /is damaged \(it is not an api-auth token journal, or it is cut short\)/],
      ["another state's journal", foreign, /belongs to another state file \(its token key differs\)/],
      ['format version 7', version, /has format version 7, which this api-auth \(format 2\) cannot read/],
    ];
    const path = journalPath(server);
    for (const [name, bytes, message] of cases) {
      writeFileSync(path, bytes);
      const result = await runCli(t, server.args);
      t.equal(result.code, 2, `exit code 2 (${name})`);
      t.match(result.stderr, message, `the reason (${name})`);
      t.match(result.stderr, `token journal ${path}`, `names the file (${name})`);
      t.equal(result.stderr.trim().split('\n').length, 1, `one line (${name})`);
      t.ok(readFileSync(path).equals(bytes), `the journal was left alone (${name})`);
    }
  },
);

t.test(
  'a whole last group failing its checksum stops the start naming the repair; repaired, the start lists the tokens before it',
  async (t) => {
    const { server, a, file } = await twoGroups(t);
    const [, second] = groups(file);
    const damaged = Buffer.from(file);
    damaged[second.start + GROUP_HEAD + 5] ^= 0x10;
    const path = journalPath(server);
    writeFileSync(path, damaged);
    const result = await runCli(t, server.args);
    t.equal(result.code, 2, 'exit code 2: the acknowledged token is not silently dropped');
    t.match(
      result.stderr,
      `api-auth state repair --data-dir ${server.dataDir} --accept-loss: it copies the journal aside to ${path}.damaged-<time> ` +
        `and keeps the tokens written whole before byte ${second.start}`,
      'the line names the step, and what it keeps',
    );
    t.match(result.stderr, /revoke them by the token, or change the password/, 'and what that loses, and how to still end those tokens');
    t.ok(readFileSync(path).equals(damaged), 'the journal was left alone');
    t.equal((await runCli(t, ['state', 'repair', '--data-dir', server.dataDir, '--accept-loss'])).code, 0, 'the repair');
    const again = await serveAgain(t, server);
    t.same(
      (await listTokens<Listed>(again.url, again.password)).map((e) => e.id),
      [a.id],
      'after the repair, the start serves and lists the token before the damage',
    );
    t.notOk(
      again.logs.some((l) => /cut short/.test(String(l.msg))),
      'no torn tail to drop: the new journal is whole',
    );
  },
);
