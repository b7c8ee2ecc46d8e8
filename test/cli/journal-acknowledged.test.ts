// What was acknowledged is never dropped without a refusal that names the repair.
// The state file records what the token journal held at its last compaction and at
// the last clean stop (its epoch, compaction, groups and bytes): a journal cut below that,
// missing, of another epoch or an older copy stops the start with exit 2, and so does a
// state file that is gone while the journal or the usage file is there. A refused start
// changes no file. `api-auth state repair --data-dir D --accept-loss` then sets the damaged
// file aside and lets the next start serve with what survived. A torn tail, as a crash
// during the last group's own write leaves, still only costs that group, with a warning.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { authUrl, call, expectGranted, expectRefused, issueToken, listTokens, REASONS, REVOKED } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { serveAgain, serveInProcess, type LibraryServer } from '../helpers/library.js';
import { restartServer, runCli, startServer, type LogLine } from '../helpers/server.js';

t.jobs = 2;

const ONE_THREAD = ['--http-threads', '1'];
/** The journal's header in format 2: magic, version, key fingerprint, epoch, compaction, the rewrite's bytes. */
const HEADER = 16 + 4 + 8 + 16 + 4 + 8;

interface Issued {
  token: string;
  id: string;
}

const ids = (entries: readonly { id: string }[]): string[] => entries.map((e) => e.id);

/** Every file of the data folder but its lock, with its bytes. */
function folder(dataDir: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const name of readdirSync(dataDir).sort()) {
    if (name.startsWith('lock.')) continue;
    files.set(
      name,
      createHash('sha256')
        .update(readFileSync(join(dataDir, name)))
        .digest('hex'),
    );
  }
  return files;
}

/** Puts the files of `saved` back, and removes every other one but the lock. */
function restore(dataDir: string, saved: Map<string, Buffer>): void {
  for (const name of readdirSync(dataDir)) if (!name.startsWith('lock.')) rmSync(join(dataDir, name), { recursive: true });
  for (const [name, bytes] of saved) writeFileSync(join(dataDir, name), bytes, { mode: 0o600 });
}

function snapshot(dataDir: string): Map<string, Buffer> {
  const saved = new Map<string, Buffer>();
  for (const name of readdirSync(dataDir)) if (!name.startsWith('lock.')) saved.set(name, readFileSync(join(dataDir, name)));
  return saved;
}

const repairLine = (dataDir: string): string => `api-auth state repair --data-dir ${dataDir} --accept-loss`;

function repair(t: Test, dataDir: string, ...more: string[]) {
  return runCli(t, ['state', 'repair', '--data-dir', dataDir, ...more]);
}

function warned(logs: LogLine[]): boolean {
  return logs.some((l) => l.level === 'warn' && /token journal ended in a write cut short/.test(String(l.msg)));
}

/**
 * N tokens, then a clean stop, then a start that compacts them into one group, and a
 * clean stop again: the layout of the issue's report (174 tokens in one compacted group).
 */
async function compacted(t: Test, n: number): Promise<{ server: LibraryServer; tokens: Issued[]; saved: Map<string, Buffer> }> {
  const first = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const tokens: Issued[] = [];
  for (let i = 0; i < n; i++) tokens.push(await issueToken(first.url, first.password, { label: `token ${i}` }));
  await first.stop();
  const server = await serveAgain(t, first);
  t.equal(ids(await listTokens<Issued>(server.url, server.password)).length, n, `${n} tokens listed`);
  await server.stop();
  return { server, tokens, saved: snapshot(server.dataDir) };
}

t.test(
  'a journal cut, cut to its header, missing, or a state file gone beside it: exit 2 naming the repair, every file left as it was',
  async (t) => {
    const { server, saved } = await compacted(t, 12);
    const { dataDir } = server;
    const journal = join(dataDir, 'tokens');
    const cases: [string, () => void, RegExp][] = [
      [
        'truncate -s -7 tokens',
        () => truncateSync(journal, saved.get('tokens')!.length - 7),
        /token journal \S+ is damaged \(its whole groups end at byte 56, but \d+ bytes were written to it and acknowledged/,
      ],
      [
        `truncate -s ${HEADER} tokens`,
        () => truncateSync(journal, HEADER),
        /is damaged \(its whole groups end at byte 56, but \d+ bytes were written/,
      ],
      ['rm tokens', () => unlinkSync(journal), /token journal \S+ is missing, but the state file beside it records 1 groups \(\d+ bytes\)/],
      [
        'rm state',
        () => unlinkSync(join(dataDir, 'state')),
        /state file \S+ is missing, but \S+tokens and \S+usage are there, written with it/,
      ],
      [
        'rm state tokens (usage kept)',
        () => {
          unlinkSync(join(dataDir, 'state'));
          unlinkSync(journal);
        },
        /state file \S+ is missing, but \S+usage is there/,
      ],
    ];
    for (const [name, damage, reason] of cases) {
      restore(dataDir, saved);
      damage();
      const before = folder(dataDir);
      const result = await runCli(t, server.args);
      t.equal(result.code, 2, `${name}: exit code 2`);
      t.match(result.stderr, reason, `${name}: the reason`);
      t.match(result.stderr, repairLine(dataDir), `${name}: the repair step`);
      t.equal(result.stderr.trim().split('\n').length, 1, `${name}: one line`);
      t.same(folder(dataDir), before, `${name}: every file is as it was (none written, none replaced)`);
    }
  },
);

t.test(
  'truncate -s -7 after a clean stop: the repair copies the journal aside and keeps every token written whole before the cut',
  async (t) => {
    const { server, tokens, saved } = await compacted(t, 12);
    const journal = join(server.dataDir, 'tokens');
    truncateSync(journal, saved.get('tokens')!.length - 7);
    const cut = readFileSync(journal);
    t.equal((await runCli(t, server.args)).code, 2, 'the start refuses');
    const fixed = await repair(t, server.dataDir, '--accept-loss');
    t.equal(fixed.code, 0, 'the repair succeeds');
    const lines = fixed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    t.ok(lines.length > 0, 'every line it writes is JSON');
    const aside = lines.find((l) => l.msg === 'set a file aside');
    t.match(aside, { from: journal, to: new RegExp(`^${journal}\\.damaged-`) }, 'it names the copy');
    t.ok(readFileSync(String(aside!.to)).equals(cut), 'the copy holds the damaged journal, byte for byte');
    t.match(lines.at(-1), { msg: 'repaired the data folder', keptEntries: 11 });
    const again = await serveAgain(t, server);
    t.same(
      ids(await listTokens<Issued>(again.url, again.password)),
      tokens.slice(0, 11).map((e) => e.id),
      'the start lists the 11 tokens written whole before the cut',
    );
    t.notOk(warned(again.logs), 'and drops nothing more');
    expectGranted(t, await call(again.url, '/ext/info', tokens[11].token), '/ext/info', 'the unlisted token still verifies');
    const revoked = await jsonrpc(authUrl(again.url), 'auth.revokeToken', { password: again.password, id: tokens[3].id });
    t.same(revoked.result, REVOKED, 'a kept one is revoked by id');
  },
);

t.test(
  'rm tokens, or a journal cut to its header: after the repair the start serves with an empty inventory, the tokens still verifying',
  async (t) => {
    const { server, tokens, saved } = await compacted(t, 3);
    for (const [name, damage] of [
      ['rm tokens', () => unlinkSync(join(server.dataDir, 'tokens'))],
      ['truncate to the header', () => truncateSync(join(server.dataDir, 'tokens'), HEADER)],
    ] as const) {
      restore(server.dataDir, saved);
      damage();
      t.equal((await runCli(t, server.args)).code, 2, `${name}: refused`);
      const fixed = await repair(t, server.dataDir, '--accept-loss');
      t.equal(fixed.code, 0, `${name}: repaired`);
      t.equal((await runCli(t, server.args)).code, null, `${name}: the next start listens`);
      const again = await serveAgain(t, server);
      t.same(ids(await listTokens<Issued>(again.url, again.password)), [], `${name}: nothing to list`);
      expectGranted(t, await call(again.url, '/ext/info', tokens[0].token), '/ext/info', `${name}: the tokens still verify`);
      await again.stop();
    }
  },
);

t.test(
  'rm state with the journal kept: no new key; the repair moves the journal and usage aside, and the next start begins afresh',
  async (t) => {
    const { server, tokens, saved } = await compacted(t, 3);
    unlinkSync(join(server.dataDir, 'state'));
    t.equal((await runCli(t, server.args)).code, 2, 'refused: a new state would be a new key');
    t.notOk(existsSync(join(server.dataDir, 'state')), 'no state file was created');
    const fixed = await repair(t, server.dataDir, '--accept-loss');
    t.equal(fixed.code, 0);
    const names = readdirSync(server.dataDir)
      .filter((n) => !n.startsWith('lock.'))
      .sort();
    t.match(names, [/^tokens\.damaged-/, /^usage\.damaged-/], 'both set aside, nothing deleted');
    const moved = names.find((n) => n.startsWith('tokens.'))!;
    t.ok(readFileSync(join(server.dataDir, moved)).equals(saved.get('tokens')!), 'the journal set aside is the one that was there');
    const again = await serveAgain(t, server);
    t.same(ids(await listTokens<Issued>(again.url, again.password)), [], 'a fresh state lists nothing');
    expectRefused(
      t,
      await call(again.url, '/ext/info', tokens[0].token),
      REASONS.badSignature,
      'and the old key is gone: its tokens are refused',
    );
  },
);

t.test('a damaged state file: the repair moves it aside with the journal and usage, and the next start begins afresh', async (t) => {
  const { server, saved } = await compacted(t, 2);
  truncateSync(join(server.dataDir, 'state'), 40);
  const refused = await runCli(t, server.args);
  t.equal(refused.code, 2, 'refused');
  t.match(refused.stderr, repairLine(server.dataDir), 'naming the repair');
  t.equal((await repair(t, server.dataDir, '--accept-loss')).code, 0);
  const names = readdirSync(server.dataDir)
    .filter((n) => !n.startsWith('lock.'))
    .sort();
  t.match(names, [/^state\.damaged-/, /^tokens\.damaged-/, /^usage\.damaged-/], 'all three set aside, nothing deleted');
  t.ok(readFileSync(join(server.dataDir, names[1])).equals(saved.get('tokens')!), 'the journal set aside is the one that was there');
  const again = await serveAgain(t, server);
  t.same(ids(await listTokens<Issued>(again.url, again.password)), [], 'a fresh state');
});

t.test("a journal of another epoch: another folder's, one a repair set aside, or an older copy of this one, stops the start", async (t) => {
  const { server, saved } = await compacted(t, 3);
  const other = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  await issueToken(other.url, other.password, { label: 'elsewhere' });
  await other.stop();
  const journal = join(server.dataDir, 'tokens');
  // An older copy: the journal before a start compacted it again.
  const again = await serveAgain(t, server);
  await again.stop();
  const newer = snapshot(server.dataDir);
  const cases: [string, Map<string, Buffer>, Buffer, RegExp][] = [
    ["another data folder's journal", saved, readFileSync(join(other.dataDir, 'tokens')), /belongs to another state file/],
    ['an older copy of this journal', newer, saved.get('tokens')!, /it is compaction \d+, where the state file records compaction \d+/],
  ];
  for (const [name, files, bytes, reason] of cases) {
    restore(server.dataDir, files);
    writeFileSync(journal, bytes);
    const before = folder(server.dataDir);
    const result = await runCli(t, server.args);
    t.equal(result.code, 2, `${name}: exit code 2`);
    t.match(result.stderr, reason, `${name}: the reason`);
    t.match(result.stderr, repairLine(server.dataDir), `${name}: the repair step`);
    t.same(folder(server.dataDir), before, `${name}: every file as it was`);
  }
  // A repair gives the journal a new epoch: the one it set aside, put back, is refused.
  restore(server.dataDir, newer);
  truncateSync(journal, HEADER);
  t.equal((await repair(t, server.dataDir, '--accept-loss')).code, 0);
  writeFileSync(journal, newer.get('tokens')!);
  const result = await runCli(t, server.args);
  t.equal(result.code, 2, 'a journal from before the repair: exit code 2');
  t.match(result.stderr, /is damaged \(it is of another epoch than the state file records/);
});

t.test('kill -9 while issuing leaves a torn last group: the start drops it with the warning, and serves the rest', async (t) => {
  let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const tokens: Issued[] = [];
  for (let i = 0; i < 4; i++) tokens.push(await issueToken(server.url, server.password, { label: `token ${i}` }));
  t.same(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
  const journal = join(server.dataDir, 'tokens');
  const file = readFileSync(journal);
  // The groups written since the start's compaction are the crash's to tear; the last, cut
  // during its own write, had not been acknowledged.
  writeFileSync(journal, file.subarray(0, file.length - 5));
  server = await restartServer(t, server);
  t.same(
    ids(await listTokens<Issued>(server.url, server.password)),
    tokens.slice(0, 3).map((e) => e.id),
    'the whole groups are kept',
  );
  t.ok(warned(server.logs), 'the torn tail is logged');
});

t.test('a data folder of format 1 (state and journal) opens, keeps its tokens, and is written in format 2 at once', async (t) => {
  const { server, tokens } = await compacted(t, 3);
  const statePath = join(server.dataDir, 'state');
  const journal = join(server.dataDir, 'tokens');
  writeFileSync(statePath, stateV1(readFileSync(statePath)));
  writeFileSync(journal, journalV1(readFileSync(journal)));
  const again = await serveAgain(t, server);
  t.same(
    ids(await listTokens<Issued>(again.url, again.password)),
    tokens.map((e) => e.id),
    'the tokens of the old folder are listed',
  );
  await again.stop();
  t.equal(readFileSync(statePath).readUInt32LE(8), 2, 'the state file is of format 2');
  t.equal(readFileSync(journal).readUInt32LE(16), 2, 'the journal is of format 2');
  truncateSync(journal, HEADER);
  t.equal((await runCli(t, server.args)).code, 2, 'and from then on a cut journal is refused');
});

t.test(
  'the repair: --accept-loss is required, unknown flags refused, nothing to repair changes nothing, and a running node keeps it out',
  async (t) => {
    const { server, saved } = await compacted(t, 2);
    const before = folder(server.dataDir);
    const none = await repair(t, server.dataDir, '--accept-loss');
    t.equal(none.code, 0);
    t.match(JSON.parse(none.stdout.trim()), { msg: /nothing to repair/ });
    t.same(folder(server.dataDir), before, 'a sound folder is left alone');
    unlinkSync(join(server.dataDir, 'tokens'));
    const damaged = folder(server.dataDir);
    const help = await runCli(t, ['state', 'repair', '--help']);
    t.equal(help.code, 0, '--help: exit code 0');
    t.match(help.stdout, /^Usage:\n {2}api-auth state repair --data-dir DIR --accept-loss\n/, '--help prints the usage');
    for (const [name, args, message] of [
      ['no --accept-loss', [], /give --accept-loss to go on/],
      ['an unknown flag', ['--accept-loss', '--force'], /unknown flag --force/],
      ['no --data-dir', null, /needs --data-dir/],
    ] as const) {
      const result = args === null ? await runCli(t, ['state', 'repair', '--accept-loss']) : await repair(t, server.dataDir, ...args);
      t.equal(result.code, 2, `${name}: exit code 2`);
      const line = JSON.parse(result.stderr.trim()) as { level: string; msg: string };
      t.match(line, { level: 'error', msg: message }, `${name}: one JSON line says why`);
      t.same(folder(server.dataDir), damaged, `${name}: nothing changed`);
    }
    restore(server.dataDir, saved);
    const running = await serveAgain(t, server);
    unlinkSync(join(server.dataDir, 'tokens'));
    const held = await repair(t, server.dataDir, '--accept-loss');
    t.equal(held.code, 2, 'a folder a node holds is not repaired');
    t.match(held.stderr, /another api-auth is using the data folder/);
    t.notOk(
      readdirSync(server.dataDir).some((n) => n.includes('damaged')),
      'and nothing is set aside',
    );
    await running.stop();
  },
);

/** A state file of format 2 as format 1 wrote it: without the journal's mark, sealed again. */
function stateV1(file: Buffer): Buffer {
  const bodyLength = file.readUInt32LE(12);
  const body = file.subarray(16, 16 + bodyLength);
  const marked = body.readUInt32LE(body.length - 44) === 1;
  const v1 = marked ? body.subarray(0, body.length - 44) : body.subarray(0, body.length - 4);
  const head = Buffer.from(file.subarray(0, 16));
  head.writeUInt32LE(1, 8);
  head.writeUInt32LE(v1.length, 12);
  return Buffer.concat([head, v1, createHash('sha256').update(head).update(v1).digest()]);
}

/** A journal of format 2 as format 1 wrote it: the header without epoch, compaction and size. */
function journalV1(file: Buffer): Buffer {
  const head = Buffer.from(file.subarray(0, 28));
  head.writeUInt32LE(1, 16);
  return Buffer.concat([head, file.subarray(HEADER)]);
}
