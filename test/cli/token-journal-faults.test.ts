// The token journal's paths that only load and faults reach: the compaction
// while serving, a kill -9 around its rename, a journal write that fails on a full disk, a
// compaction that fails for lack of room, and a start on a full disk. The full disk is a
// small tmpfs filled to its last page (helpers/tmpfs.ts); the tests place the journal's
// end in its last page so that the next write needs a page the disk no longer has, or not.
//
// The running compaction comes after 1,024 issues since the start (COMPACT_MIN_RECORDS
// and PRUNE_EVERY in host/state/inventory.ts). Each issue is a password check, and at
// the default argon2id cost 1,024 of them take a minute; the service checks a password
// against its stored record's own parameters, so each test starts on a state file whose
// record of the password has argon2id's smallest cost (as a data folder written with
// other parameters would hold). The journal's work is the same, and 1,024 issues take a
// second or two.
import t, { type Test } from 'tap';
import { existsSync, readFileSync, statfsSync, statSync, unlinkSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { authUrl, call, listTokens, REASONS, REVOKED } from '../helpers/auth.js';
import { freshSource, jsonrpc, parseRpc, request, rpc, type RpcResponse } from '../helpers/http.js';
import { writeCheapState } from '../helpers/cheap-state.js';
import { launch, randomPassword, restartServer, startServer, type LogLine, type Server } from '../helpers/server.js';
import { needsRoot } from '../helpers/root.js';
import { fillUp, startOnTmpfs, tmpfsDataDir } from '../helpers/tmpfs.js';

t.jobs = 2;

/**
 * The journal is these tests' subject, not the HTTP threads (test/http/threads.test.ts):
 * one thread, whose start costs about a third less CPU time.
 */
const ONE_THREAD = ['--http-threads', '1'];

/** Issues since the start after which the journal is compacted while serving (host/state/inventory.ts). */
const COMPACT_AFTER = 1024;
/** Requests in one JSON-RPC batch, at most (host/rpc/jsonrpc.ts). */
const BATCH = 100;
/** Clients issuing at once around a compaction, and the issues of each. */
const CLIENTS = 4;
const EACH = 12;
const INTERNAL_ERROR = { code: -32603, message: 'internal error' };
// The journal's layout (host/state/journal-format.ts): a header (magic, version, key fingerprint),
// then groups (length, two CRC-32s, records), each record its length and its bytes; an
// issue record without a label is 34 bytes.
/** Magic, format version, key fingerprint, epoch, compaction, the bytes its rewrite wrote. */
const HEADER = 16 + 4 + 8 + 16 + 4 + 8;
const GROUP_HEAD = 12;
const RECORD_HEAD = 4;
const UNLABELLED_GROUP = GROUP_HEAD + RECORD_HEAD + 34;

interface Issued {
  token: string;
  id: string;
}
interface Listed {
  id: string;
  label: string | null;
  revoked: boolean;
}

const serial = (id: string): number => Number(id.slice(1));
const bySerial = (a: string, b: string): number => serial(a) - serial(b);

/**
 * A server as startOnTmpfs starts it, on a state file written before its first start whose
 * record of the password has argon2id's smallest cost (cheap-state.ts): password checks then
 * cost a fraction of a millisecond.
 */
async function startCheapOnTmpfs(t: Test, root: string, dataDir: string): Promise<Server> {
  const password = randomPassword();
  const passwordFile = join(root, 'password');
  writeFileSync(passwordFile, password, { mode: 0o600 });
  await writeCheapState(dataDir, password);
  const args = ['--http-port', '0', '--data-dir', dataDir, '--api-auth-required', '--api-auth-password-file', passwordFile, ...ONE_THREAD];
  const run = launch(t, args);
  const listening = await run.waitForLog((l) => l.msg === 'listening');
  const port = Number(listening.port);
  return { ...run, url: `http://127.0.0.1:${port}`, port, password, passwordFile, dir: root, dataDir, args, listening };
}

/**
 * `count` tokens for /ext/info, in batches sent at once, each from an address of its own
 * (their issues then share the journal's syncs); `params(i)` adds to the params of the
 * i-th. Returns them in the order of `params`.
 */
async function issueMany(server: Server, count: number, params: (i: number) => Record<string, unknown> = () => ({})): Promise<Issued[]> {
  const batches = Array.from({ length: Math.ceil(count / BATCH) }, async (_, b) => {
    const calls = Array.from({ length: Math.min(BATCH, count - b * BATCH) }, (_, k) =>
      rpc('auth.newToken', { password: server.password, endpoints: ['/ext/info'], ...params(b * BATCH + k) }, k),
    );
    const body = JSON.stringify(calls);
    const response = await request(server.url, '/ext/auth', {
      headers: [['Content-Type', 'application/json']],
      body,
      localAddress: freshSource(),
    });
    return (parseRpc(response) as unknown as RpcResponse[]).map((answer) => {
      if (answer.result === undefined) throw new Error(`newToken failed: ${JSON.stringify(answer.error)}`);
      return answer.result as Issued;
    });
  });
  return (await Promise.all(batches)).flat();
}

/**
 * `clients` clients, each from an address of its own (the throttle counts the checks in
 * flight per client), each issuing `each` tokens one after another: issues that keep coming
 * while the journal is written and rewritten. A client stops at its first call that gets no
 * answer (the server was killed). Returns the tokens answered, in issue order.
 */
async function stream(server: Server, clients: number, each: number, label: string): Promise<Issued[]> {
  const answered: Issued[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const localAddress = freshSource();
      for (let i = 0; i < each; i++) {
        const body = JSON.stringify(
          rpc('auth.newToken', { password: server.password, endpoints: ['/ext/info'], label: `${label} ${c}.${i}` }, 1),
        );
        let answer: RpcResponse;
        try {
          answer = parseRpc(
            await request(server.url, '/ext/auth', { headers: [['Content-Type', 'application/json']], body, localAddress }),
          );
        } catch {
          return;
        }
        if (answer.result === undefined) throw new Error(`newToken failed: ${JSON.stringify(answer.error)}`);
        answered.push(answer.result as Issued);
      }
    }),
  );
  return answered.sort((a, b) => bySerial(a.id, b.id));
}

/**
 * The live tokens as listTokens shows them, without their usage (lastUsedAt, requests): the
 * journal's entries, which these tests hold to. Usage is a snapshot's, which a kill -9 may
 * set back by design (token-usage.test.ts).
 */
async function listed(server: Server): Promise<Listed[]> {
  return (await listTokens<Listed & { lastUsedAt?: unknown; requests?: unknown }>(server.url, server.password)).map(
    ({ lastUsedAt: _lastUsedAt, requests: _requests, ...entry }) => entry,
  );
}

async function revokeId(server: Server, id: string): Promise<unknown> {
  const answer = await jsonrpc(authUrl(server.url), 'auth.revokeToken', { password: server.password, id });
  return answer.error ?? answer.result;
}

/**
 * Resolves once the clock has passed into the next whole second: a token issued with
 * `expiresIn: 1` before this call (the server reads the same clock) has expired by then.
 */
function nextSecond(): Promise<void> {
  const end = (Math.floor(Date.now() / 1000) + 1) * 1000;
  return new Promise((done) => setTimeout(done, Math.max(0, end - Date.now())));
}

/** `count` tokens that expire a second after their issue, and the wait until they all have. */
async function shortLived(server: Server, count: number): Promise<{ ids: string[]; expired: Promise<void> }> {
  const ids = (await issueMany(server, count, (i) => ({ expiresIn: 1, label: `short-lived ${i}` }))).map((i) => i.id);
  return { ids, expired: nextSecond() };
}

function journal(server: Server): string {
  return join(server.dataDir, 'tokens');
}

const tornTail = (l: LogLine): boolean => l.level === 'warn' && /token journal ended in a write cut short/.test(String(l.msg));

/** What the gate says of each listed token: granted, or refused with its reason; it must agree with the list. */
async function checkGate(
  t: Test,
  server: Server,
  tokens: ReadonlyMap<string, Issued>,
  list: readonly Listed[],
  what: string,
): Promise<void> {
  const expected: [string, number, string | undefined][] = [];
  const seen: [string, number, string | undefined][] = [];
  for (const entry of list) {
    const response = await call(server.url, '/ext/info', tokens.get(entry.id)!.token);
    expected.push([entry.id, entry.revoked ? 401 : 200, entry.revoked ? REASONS.revoked : undefined]);
    seen.push([entry.id, response.status, response.status === 200 ? undefined : JSON.parse(response.text).error?.message]);
  }
  t.same(seen, expected, `${what}: the gate grants each listed token and refuses the revoked ones as revoked`);
}

/** How many records the journal at `path` holds, group after group. */
function records(path: string): number {
  const file = readFileSync(path);
  let count = 0;
  for (let at = HEADER; at < file.length; ) {
    const end = at + GROUP_HEAD + file.readUInt32LE(at);
    for (let r = at + GROUP_HEAD; r < end; r += RECORD_HEAD + file.readUInt32LE(r)) count++;
    at = end;
  }
  return count;
}

/**
 * On a server just started: 1,000 tokens that live a second, then 8 that live on (the
 * first two revoked), and the wait until the first thousand have expired. `toGo` more
 * issues set the compaction off, with far more dead records than live ones.
 */
async function nearCompaction(server: Server): Promise<{ dead: string[]; before: Issued[]; toGo: number }> {
  const dead = await shortLived(server, 1000);
  const before = await issueMany(server, 8, (i) => ({ label: `before ${i}` }));
  for (const { id } of before.slice(0, 2)) {
    if (JSON.stringify(await revokeId(server, id)) !== JSON.stringify(REVOKED)) throw new Error(`${id} was not revoked`);
  }
  await dead.expired;
  return { dead: dead.ids, before, toGo: COMPACT_AFTER - dead.ids.length - before.length };
}

/** A label of exactly `bytes` UTF-8 bytes (up to 400) in at most 103 code points: 4-byte emoji, then ASCII. */
function labelOf(bytes: number): string {
  return '\u{1F600}'.repeat(Math.floor(bytes / 4)) + 'x'.repeat(bytes % 4);
}

/** Bytes left in the journal's last page of the file system (a group longer than that needs a new page). */
function roomInPage(path: string, page: number): number {
  return (page - (statSync(path).size % page)) % page;
}

t.test(
  'the compaction while serving keeps every entry issued before, during and after it; revoked ones stay revoked, also after kill -9',
  async (t) => {
    let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
    const { dead, before } = await nearCompaction(server);
    const { size, ino } = statSync(journal(server));
    t.same(
      (await listed(server)).map((e) => e.id),
      before.map((i) => i.id),
      'the short-lived tokens have expired: only the 8 others are listed',
    );

    // One of these makes 1,024 issues since the start and sets the compaction off; the others
    // come before it, while the new file is written, and after.
    const during = await stream(server, CLIENTS, EACH, 'during');
    t.equal(during.length, CLIENTS * EACH, 'every issue around the compaction answers a token');
    const after = await issueMany(server, 8, (i) => ({ label: `after ${i}` }));
    t.same(await revokeId(server, during[0].id), REVOKED);
    t.same(await revokeId(server, after[0].id), REVOKED);
    const compacted = statSync(journal(server));
    t.not(compacted.ino, ino, 'the journal was replaced while serving');
    t.ok(compacted.size < size / 10, `without the expired entries (${size} -> ${compacted.size} bytes)`);
    const logged = await server.waitForLog((l) => l.msg === 'compacted the token journal', 5000);
    t.match(
      logged,
      { level: 'info', path: journal(server), records: Number, kept: Number },
      'and logged it, with the records before and kept',
    );
    t.ok(
      (logged.records as number) >= COMPACT_AFTER && (logged.kept as number) <= before.length + during.length,
      `only live entries were kept (${logged.records} -> ${logged.kept})`,
    );

    const all = new Map([...before, ...during, ...after].map((i) => [i.id, i]));
    const revoked = new Set([before[0].id, before[1].id, during[0].id, after[0].id]);
    const expected = [...all.keys()].sort(bySerial).map((id) => ({ id, revoked: revoked.has(id) }));
    const list = await listed(server);
    t.same(
      list.map((e) => ({ id: e.id, revoked: e.revoked })),
      expected,
      'listed: all of them, in issue order, the revoked ones revoked',
    );
    t.notOk(
      list.some((e) => dead.includes(e.id)),
      'none of the expired ones',
    );
    await checkGate(t, server, all, list, 'while serving');

    t.same(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
    server = await restartServer(t, server);
    const again = await listed(server);
    t.same(again, list, 'after kill -9: the same list');
    t.notOk(server.logs.some(tornTail), 'the journal read back whole');
    await checkGate(t, server, all, again, 'after kill -9');
  },
);

t.test(
  'kill -9 while the compaction writes its new file, or right after the rename: the next start reads every acknowledged entry',
  async (t) => {
    let server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
    const tmp = join(server.dataDir, 'tokens.tmp');
    const tokens = new Map<string, Issued>();
    const revoked = new Set<string>();
    // The folder's watcher hears of the temporary file as it is created, and of the rename as it happens.
    for (const [moment, event] of [
      ['while it writes the new file', 'tokens.tmp'],
      ['right after its rename', 'tokens'],
    ] as const) {
      const { dead, before } = await nearCompaction(server);
      for (const i of before) tokens.set(i.id, i);
      revoked.add(before[0].id).add(before[1].id);
      const running = server;
      let killed = false;
      const watcher = watch(running.dataDir, (type, name) => {
        if (type !== 'rename' || name !== event || killed) return;
        // At once, in the event's callback: the server runs on only as long as the signal takes.
        killed = true;
        running.child.kill('SIGKILL');
      });
      const acknowledged = await stream(running, CLIENTS, EACH, 'stream');
      // The last answers may come before the compaction's rename (the new file is written after their group).
      const exit = await running.waitForExit();
      watcher.close();
      t.ok(killed, `the compaction came, and the kill ${moment}`);
      t.same(exit, { code: null, signal: 'SIGKILL' });
      t.comment(
        existsSync(tmp) ? 'the kill came before the rename: the new file was left as tokens.tmp' : 'the kill came after the rename',
      );
      for (const i of acknowledged) tokens.set(i.id, i);

      server = await restartServer(t, server);
      const list = await listed(server);
      const ids = new Set(list.map((e) => e.id));
      t.same(
        [...before, ...acknowledged].map((i) => i.id).filter((id) => !ids.has(id)),
        [],
        `killed ${moment}: each of the ${before.length + acknowledged.length} acknowledged entries is listed after the restart`,
      );
      t.notOk(
        list.some((e) => dead.includes(e.id)),
        'no expired one is',
      );
      for (const e of list) {
        if (!tokens.has(e.id)) t.match(e.label, /^stream /, `${e.id}: an issue in flight at the kill, written but not answered`);
      }
      t.same(
        list.filter((e) => e.revoked).map((e) => e.id),
        [...revoked].sort(bySerial),
        'the revoked ones stay revoked',
      );
      t.notOk(existsSync(tmp), 'no temporary file is left after the start');
      await checkGate(
        t,
        server,
        tokens,
        list.filter((e) => tokens.has(e.id)),
        `killed ${moment}`,
      );
    }

    // What a kill before the rename leaves, whatever the moment the watcher's kill landed: the
    // old journal, and beside it a temporary file cut short.
    const list = await listed(server);
    t.same(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
    writeFileSync(tmp, readFileSync(journal(server)).subarray(0, 100), { mode: 0o600 });
    server = await restartServer(t, server);
    t.same(await listed(server), list, 'a temporary file cut short beside the journal: the journal is read, the same list');
    t.notOk(existsSync(tmp), 'and the temporary file is gone');
  },
);

t.test(
  'a journal write that fails on a full disk answers an internal error and changes nothing; once there is room, issues work and the journal reads back whole',
  needsRoot('mount, for a small tmpfs that really fills up'),
  async (t) => {
    const { root, dataDir } = tmpfsDataDir(t);
    let server = await startCheapOnTmpfs(t, root, dataDir);
    const page = statfsSync(dataDir).bsize;
    // The first issue writes the state (its endpoint list, a block of serials); later ones write only the journal.
    const tokens = await issueMany(server, 1, () => ({ label: 'first' }));
    const filler = fillUp(dataDir);
    // Groups that fill the journal's last page to within a group's length, so that the next needs a page the disk lacks.
    while (roomInPage(journal(server), page) >= UNLABELLED_GROUP) {
      const room = roomInPage(journal(server), page);
      const bytes = Math.min(400, Math.max(0, room - UNLABELLED_GROUP - 10));
      tokens.push(...(await issueMany(server, 1, () => (bytes === 0 ? {} : { label: labelOf(bytes) }))));
    }
    const state = readFileSync(join(dataDir, 'state'));
    const file = readFileSync(journal(server));
    const listBefore = await listed(server);
    const last = serial(tokens.at(-1)!.id);

    const failed = await jsonrpc(authUrl(server.url), 'auth.newToken', {
      password: server.password,
      endpoints: ['/ext/info'],
      label: 'full disk',
    });
    t.same(failed.error, INTERNAL_ERROR, 'newToken on a full disk: internal error, nothing more said');
    t.notOk(failed.result, 'no token');
    t.ok(await server.waitForLog((l) => l.msg === 'internal error' && l.code === 'ENOSPC'), 'the log names the cause: ENOSPC');
    t.ok(readFileSync(journal(server)).equals(file), 'the journal is as it was: what of the group fit was cut off again');
    t.ok(readFileSync(join(dataDir, 'state')).equals(state), 'the state file is as it was');
    t.same(await listed(server), listBefore, 'nothing more is listed');
    t.same(
      await revokeId(server, `t${last + 1}`),
      { success: true, revocation: 'not a live token', reason: 'unknown id' },
      'the id the failed call would have had names no token',
    );

    unlinkSync(filler);
    const later = await issueMany(server, 3, (i) => ({ label: `later ${i}` }));
    t.equal(later[0].id, `t${last + 2}`, "the next token skips the failed call's serial: an id is never given twice");
    tokens.push(...later);
    t.same(await revokeId(server, later[1].id), REVOKED);
    const list = await listed(server);
    t.same(
      list.map((e) => e.id),
      tokens.map((i) => i.id),
      'listed: every token answered, none other',
    );

    t.same(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
    server = await restartServer(t, server);
    t.same(await listed(server), list, 'after kill -9: the same list');
    t.notOk(server.logs.some(tornTail), 'the journal read back whole: no torn tail');
    await checkGate(t, server, new Map(tokens.map((i) => [i.id, i])), list, 'after kill -9');
  },
);

t.test(
  'a compaction that fails for lack of room leaves the journal as it was and is logged; the service answers on, and nothing is lost',
  needsRoot('mount, for a small tmpfs that really fills up'),
  async (t) => {
    const { root, dataDir } = tmpfsDataDir(t);
    let server = await startCheapOnTmpfs(t, root, dataDir);
    const page = statfsSync(dataDir).bsize;
    const { before, toGo } = await nearCompaction(server);
    const tokens = [...before, ...(await issueMany(server, toGo - 3, (i) => ({ label: `more ${i}` })))];
    // The third last issue before the compaction leaves room in the journal's last page for the two
    // others (it starts a page if need be): they fit on the full disk, the new journal does not.
    const room = roomInPage(journal(server), page);
    const bytes = room >= 3 * UNLABELLED_GROUP ? 0 : Math.max(0, room - UNLABELLED_GROUP + 1);
    tokens.push(...(await issueMany(server, 1, () => (bytes === 0 ? {} : { label: 'x'.repeat(bytes) }))));
    const { ino } = statSync(journal(server));
    const filler = fillUp(dataDir);
    tokens.push(...(await issueMany(server, 2)));

    const failure = await server.waitForLog((l) => /^the token journal could not be compacted/.test(String(l.msg)), 5000);
    t.match(failure, { level: 'warn', code: 'ENOSPC', path: journal(server) }, 'logged: a warning, with the cause and the file');
    t.match(
      failure.msg,
      /it is kept as it was, and compaction is tried again after 1024 more issues \(free space in the data folder if it is full\)$/,
    );
    t.equal(statSync(journal(server)).ino, ino, 'the journal is the one it was');
    t.equal(records(journal(server)), COMPACT_AFTER, 'holding every record written since the start');
    t.notOk(existsSync(join(dataDir, 'tokens.tmp')), 'the new file was removed');
    const live = new Map(tokens.map((i) => [i.id, i]));
    const list = await listed(server);
    t.same(
      list.map((e) => e.id),
      tokens.map((i) => i.id),
      'listTokens answers: every live token',
    );
    await checkGate(t, server, live, list, 'on the full disk');

    unlinkSync(filler);
    const later = await issueMany(server, 3, (i) => ({ label: `later ${i}` }));
    for (const i of later) live.set(i.id, i);
    t.same(await revokeId(server, later[0].id), REVOKED, 'with room again, revocations are written');
    const whole = await listed(server);
    t.same(
      whole.map((e) => e.id),
      [...live.keys()],
      'and issues are listed',
    );

    t.same(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
    server = await restartServer(t, server);
    t.same(await listed(server), whole, 'after kill -9: the same list');
    t.notOk(server.logs.some(tornTail), 'the journal read back whole');
    t.equal(records(journal(server)), whole.length, 'and the start compacted it');
    await checkGate(t, server, live, whole, 'after kill -9');
  },
);

t.test(
  'a start on a full disk keeps the journal as it was (a torn tail cut off), logs it and serves; with room again, issues work and the journal reads back whole',
  needsRoot('mount, for a small tmpfs that really fills up'),
  async (t) => {
    const { root, dataDir } = tmpfsDataDir(t);
    let server = await startOnTmpfs(t, root, dataDir, ONE_THREAD);
    const tokens = await issueMany(server, 3, (i) => ({ label: `kept ${i}` }));
    t.same(await revokeId(server, tokens[0].id), REVOKED);
    const [short] = await issueMany(server, 1, () => ({ expiresIn: 1, label: 'expires' }));
    const expired = nextSecond();
    t.same(await server.stop(), { code: 0, signal: null });
    const whole = readFileSync(journal(server));
    // A crash's torn group, longer than the groups that will follow it: left in place, its rest would follow them.
    const head = Buffer.alloc(GROUP_HEAD);
    head.writeUInt32LE(5000, 0);
    head.writeUInt32LE(crc32(head.subarray(0, 4)), 4);
    writeFileSync(journal(server), Buffer.concat([whole, head, Buffer.alloc(300, 0x5a)]));
    await expired;
    const filler = fillUp(dataDir);

    server = await restartServer(t, server);
    t.ok(await server.waitForLog(tornTail, 5000), 'the torn tail is dropped and logged');
    const failure = await server.waitForLog((l) => /^the token journal could not be compacted at start/.test(String(l.msg)), 5000);
    t.match(
      failure,
      { level: 'warn', code: 'ENOSPC', path: journal(server) },
      'the failed compaction is logged, with the cause and the file',
    );
    t.match(
      failure.msg,
      /it is kept as it was, and compaction is tried again after 1024 issues or at the next start \(free space in the data folder if it is full\)$/,
    );
    t.ok(
      readFileSync(journal(server)).equals(whole),
      'the journal is as it was before the crash: its whole groups, the expired entry among them',
    );
    const list = await listed(server);
    t.same(
      list.map((e) => [e.id, e.revoked]),
      tokens.map((i, n) => [i.id, n === 0]),
      'listTokens answers: the live tokens, one revoked',
    );
    t.notOk(
      list.some((e) => e.id === short.id),
      'not the expired one',
    );
    await checkGate(t, server, new Map(tokens.map((i) => [i.id, i])), list, 'on the full disk');

    unlinkSync(filler);
    tokens.push(...(await issueMany(server, 2, (i) => ({ label: `later ${i}` }))));
    const later = await listed(server);
    t.same(
      later.map((e) => e.id),
      tokens.map((i) => i.id),
      'with room again, new tokens are listed',
    );
    t.same(await server.stop('SIGKILL'), { code: null, signal: 'SIGKILL' });
    server = await restartServer(t, server);
    t.same(await listed(server), later, 'after kill -9: the same list');
    t.notOk(server.logs.some(tornTail), "the journal read back whole: the new groups were not followed by the torn one's rest");
    t.equal(records(journal(server)), tokens.length, 'and this start compacted it');
  },
);
