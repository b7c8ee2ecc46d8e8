// A damaged state file stops the start: truncated, extended, bit-flipped,
// re-sealed with a body that does not hold together, or of an unknown format version.
// Each refusal names the file and the way to recover, and leaves the file exactly as it
// was: never a start on wrong state, never a silent replacement.
//
// The cases open the folder through the library (createAuth), which rejects with the
// error the CLI prints; a few run the CLI too, to pin that line, exit code 2 and that
// nothing listens.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createAuth } from '../../build/host/index.js';
import { REASONS, call, changePassword, expectGranted, expectRefused, newToken, revokeToken } from '../helpers/auth.js';
import { SILENT, cliLine, serveInProcess } from '../helpers/library.js';
import { launch, randomPassword, runCli, tempDir, type CliResult } from '../helpers/server.js';

const MAGIC = Buffer.from('api-auth', 'latin1');
/** Magic, u32 LE format version, u32 LE body length. */
const HEADER = 16;
/** SHA-256 of everything before it. */
const CHECKSUM = 32;
const FORMAT_VERSION = 2;
/**
 * The state file is these tests' subject, not the HTTP threads (test/http/threads.test.ts): one thread,
 * whose start costs about a third less CPU time.
 */
const ONE_THREAD = ['--http-threads', '1'];

type Expect = 'damaged' | 'version' | 'damaged-or-version';

interface Case {
  name: string;
  bytes: Buffer;
  expect: Expect;
}

// A real state: tokens of two password generations over three endpoint lists, two
// revocations, a password change; then a clean stop.
const fixture = await (async () => {
  const server = await serveInProcess(t, { args: ONE_THREAD });
  const p1 = `p1-${randomPassword()}`;
  const old = await newToken(server.url, server.password, ['/ext/info']);
  const star = await newToken(server.url, server.password, ['*']);
  await newToken(server.url, server.password, ['/ext/bc/*']);
  await revokeToken(server.url, server.password, star);
  await changePassword(server.url, server.password, p1);
  const valid = await newToken(server.url, p1, ['/ext/info']);
  const revoked = await newToken(server.url, p1, ['/ext/info']);
  await revokeToken(server.url, p1, revoked);
  await server.stop();
  const bytes = readFileSync(join(server.dataDir, 'state'));
  const journal = readFileSync(join(server.dataDir, 'tokens'));
  return { passwordFile: server.passwordFile, bytes, journal, tokens: { old, valid, revoked } };
})();
const STATE = fixture.bytes;
/** The token journal beside it: the state records what it holds, and a start without it is refused (journal-acknowledged.test.ts). */
const JOURNAL = fixture.journal;
const BODY_LENGTH = STATE.readUInt32LE(MAGIC.length + 4);

/** `header` (with `version` and the body's length) + `body` + a correct checksum. */
function seal(body: Buffer, version = FORMAT_VERSION, magic = MAGIC): Buffer {
  const head = Buffer.alloc(HEADER);
  magic.copy(head);
  head.writeUInt32LE(version, MAGIC.length);
  head.writeUInt32LE(body.length, MAGIC.length + 4);
  const sum = createHash('sha256').update(head).update(body).digest();
  return Buffer.concat([head, body, sum]);
}

function flip(bytes: Buffer, at: number, bit: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[at] ^= 1 << bit;
  return copy;
}

/** A data folder of its own under `root`, holding `bytes` as its state file, beside the fixture's journal. */
function dataDirWith(root: string, index: number, bytes: Buffer): { data: string; statePath: string } {
  const data = join(root, `case-${index}`, 'data');
  mkdirSync(data, { recursive: true, mode: 0o700 });
  const statePath = join(data, 'state');
  writeFileSync(statePath, bytes, { mode: 0o600 });
  writeFileSync(join(data, 'tokens'), JOURNAL, { mode: 0o600 });
  return { data, statePath };
}

/** The error createAuth rejects with on `data`; undefined when it opens (and it is closed again). */
async function openError(data: string): Promise<Error | undefined> {
  try {
    const auth = await createAuth({ passwordFile: fixture.passwordFile, dataDir: data, log: SILENT });
    await auth.close();
    return undefined;
  } catch (error) {
    return error as Error;
  }
}

/** The command line of a start on `data` with the fixture's password file. */
function cliArgs(data: string): string[] {
  return ['--http-port', '0', '--data-dir', data, '--api-auth-required', '--api-auth-password-file', fixture.passwordFile, ...ONE_THREAD];
}

/** What is wrong with one refused opening; empty when it is right. */
function problemsOf(c: Case, error: Error | undefined, statePath: string): string[] {
  if (error === undefined) return ['it opened'];
  const problems: string[] = [];
  const message = error.message;
  const code = (error as { code?: unknown }).code;
  if (code !== 'API_AUTH_BAD_STATE') problems.push(`a ${error.name} (${String(code)}), not a StateError (API_AUTH_BAD_STATE): ${message}`);
  if (message.includes('\n')) problems.push(`the message is more than one line: ${JSON.stringify(message)}`);
  if (!message.includes(statePath)) problems.push(`the message does not name ${statePath}: ${JSON.stringify(message)}`);
  const damaged = message.includes('is damaged') && message.includes('restore it from a backup');
  const version = message.includes('format version');
  const ok = c.expect === 'damaged' ? damaged : c.expect === 'version' ? version : damaged || version;
  if (!ok)
    problems.push(
      `the message does not say ${c.expect === 'damaged' ? '"is damaged ... restore it from a backup"' : '"format version"'}: ${JSON.stringify(message)}`,
    );
  if (!readFileSync(statePath).equals(c.bytes)) problems.push('the state file was changed');
  const mode = statSync(statePath).mode & 0o777;
  if (mode !== 0o600) problems.push(`the state file's mode became ${mode.toString(8)}`);
  return problems;
}

/** Opens a folder holding each case's bytes through the library; one assertion per case. */
async function refuseAll(t: Test, cases: readonly Case[]): Promise<void> {
  const root = tempDir(t);
  for (const [index, c] of cases.entries()) {
    const { data, statePath } = dataDirWith(root, index, c.bytes);
    t.same(problemsOf(c, await openError(data), statePath), [], c.name);
  }
}

/** The CLI on a refused folder: exit code 2, exactly the library's message on one stderr line, nothing listening. */
function expectCliRefusal(t: Test, result: CliResult, error: Error | undefined, label: string): void {
  t.equal(result.code, 2, `exit code 2 (${label})`);
  t.equal(
    result.stderr,
    error === undefined ? 'no error in the library' : `${cliLine(error)}\n`,
    `stderr is one line: the library's error (${label})`,
  );
  t.notOk(
    result.logs.some((l) => l.msg === 'listening'),
    `nothing listened (${label})`,
  );
}

t.test('the state file has the documented layout: magic, format version, body length, body, SHA-256', async (t) => {
  t.same(STATE.subarray(0, MAGIC.length), MAGIC, 'it starts with "api-auth"');
  t.equal(STATE.readUInt32LE(MAGIC.length), FORMAT_VERSION, `format version ${FORMAT_VERSION}`);
  t.equal(STATE.length, HEADER + BODY_LENGTH + CHECKSUM, 'the length field names the body');
  t.same(seal(STATE.subarray(HEADER, HEADER + BODY_LENGTH)), STATE, 'the checksum is the SHA-256 of all before it');
  t.ok(BODY_LENGTH > 64, `the body holds the state (${BODY_LENGTH} bytes)`);
});

t.test('the intact state starts, with its tokens (the control for every case below)', async (t) => {
  const root = tempDir(t);
  const data = join(root, 'data');
  mkdirSync(data, { mode: 0o700 });
  writeFileSync(join(data, 'state'), STATE, { mode: 0o600 });
  writeFileSync(join(data, 'tokens'), JOURNAL, { mode: 0o600 });
  // A leftover temporary file, as a crash in the middle of a write leaves, is not damage.
  writeFileSync(join(data, 'state.tmp'), Buffer.concat([STATE.subarray(0, 40), Buffer.from('garbage')]), { mode: 0o600 });
  const auth = await createAuth({ passwordFile: fixture.passwordFile, dataDir: data, log: SILENT });
  t.equal(auth.verify(fixture.tokens.valid, '/ext/info').ok, true, 'the library opens it: a valid token');
  await auth.close();
  const run = launch(t, cliArgs(data));
  const listening = await run.waitForLog((l) => l.msg === 'listening');
  const url = `http://127.0.0.1:${Number(listening.port)}`;
  expectGranted(t, await call(url, '/ext/info', fixture.tokens.valid), '/ext/info', 'a valid token');
  expectRefused(t, await call(url, '/ext/info', fixture.tokens.revoked), REASONS.revoked, 'a revoked token');
  expectRefused(t, await call(url, '/ext/info', fixture.tokens.old), REASONS.earlierGeneration, 'a token of the first password');
  t.same(await run.stop('SIGTERM'), { code: 0, signal: null }, 'a clean stop');
});

t.test("the CLI refuses a damaged state file with the library's error: one stderr line, exit code 2, nothing listening", async (t) => {
  const body = STATE.subarray(HEADER, HEADER + BODY_LENGTH);
  const cases: Case[] = [
    { name: 'cut short within the body', bytes: STATE.subarray(0, HEADER + (BODY_LENGTH >> 1)), expect: 'damaged' },
    { name: 'a bit flipped in the body', bytes: flip(STATE, HEADER + (BODY_LENGTH >> 1), 3), expect: 'damaged' },
    { name: 'format version 3', bytes: seal(body, 3), expect: 'version' },
  ];
  const root = tempDir(t);
  for (const [index, c] of cases.entries()) {
    const { data, statePath } = dataDirWith(root, index, c.bytes);
    const error = await openError(data);
    t.same(problemsOf(c, error, statePath), [], `the library refuses it (${c.name})`);
    expectCliRefusal(t, await runCli(t, cliArgs(data)), error, c.name);
    t.ok(readFileSync(statePath).equals(c.bytes), `the CLI left the state file alone (${c.name})`);
  }
});

t.test('a truncated state file stops the start', async (t) => {
  const lengths = new Set([0, 1, 4, 7, 8, 9, 11, 12, 15, HEADER, HEADER + 1, HEADER + 4]);
  const step = Math.max(1, Math.floor(BODY_LENGTH / 16));
  for (let n = HEADER; n < STATE.length; n += step) lengths.add(n);
  for (const n of [
    HEADER + BODY_LENGTH - 1,
    HEADER + BODY_LENGTH,
    HEADER + BODY_LENGTH + 1,
    STATE.length - 16,
    STATE.length - 2,
    STATE.length - 1,
  ]) {
    lengths.add(n);
  }
  const cases = [...lengths]
    .sort((a, b) => a - b)
    .map(
      (n): Case => ({
        name: `cut to ${n} of ${STATE.length} bytes`,
        bytes: STATE.subarray(0, n),
        expect: 'damaged',
      }),
    );
  t.ok(cases.length >= 25, `${cases.length} truncation points`);
  await refuseAll(t, cases);
});

t.test('a state file with bytes after its end stops the start', async (t) => {
  await refuseAll(t, [
    { name: 'one zero byte appended', bytes: Buffer.concat([STATE, Buffer.alloc(1)]), expect: 'damaged' },
    { name: 'a newline appended', bytes: Buffer.concat([STATE, Buffer.from('\n')]), expect: 'damaged' },
    { name: 'the file twice', bytes: Buffer.concat([STATE, STATE]), expect: 'damaged' },
  ]);
});

t.test('a bit flip anywhere in the state file stops the start', async (t) => {
  const cases: Case[] = [];
  const add = (at: number, bit: number, where: string, expect: Expect = 'damaged'): void => {
    cases.push({ name: `bit ${bit} of byte ${at} flipped (${where})`, bytes: flip(STATE, at, bit), expect });
  };
  for (let at = 0; at < MAGIC.length; at++) add(at, (at * 3) % 8, 'magic');
  // A flipped version field reads as another format version; either message names the
  // file and a way out.
  for (let at = MAGIC.length; at < MAGIC.length + 4; at++) add(at, (at * 5) % 8, 'format version', 'damaged-or-version');
  add(MAGIC.length, 0, 'format version', 'damaged-or-version');
  for (let at = MAGIC.length + 4; at < HEADER; at++) add(at, (at * 5 + 1) % 8, 'body length');
  add(MAGIC.length + 7, 7, 'body length');
  const bodyStep = Math.max(1, Math.floor(BODY_LENGTH / 30));
  for (let at = HEADER; at < HEADER + BODY_LENGTH; at += bodyStep) add(at, (at * 7 + 2) % 8, 'body');
  add(HEADER + BODY_LENGTH - 1, 0, 'body, last byte');
  for (let at = HEADER + BODY_LENGTH; at < STATE.length; at += 3) add(at, (at * 3 + 1) % 8, 'checksum');
  add(STATE.length - 1, 7, 'checksum, last byte');
  t.ok(cases.length >= 50, `${cases.length} bit flips`);
  await refuseAll(t, cases);
});

t.test('a re-sealed state file whose body does not hold together stops the start', async (t) => {
  const body = STATE.subarray(HEADER, HEADER + BODY_LENGTH);
  await refuseAll(t, [
    { name: 'an empty body', bytes: seal(Buffer.alloc(0)), expect: 'damaged' },
    { name: 'the body without its last byte', bytes: seal(body.subarray(0, body.length - 1)), expect: 'damaged' },
    { name: 'the body without its last 16 bytes', bytes: seal(body.subarray(0, body.length - 16)), expect: 'damaged' },
    { name: 'the first half of the body', bytes: seal(body.subarray(0, body.length >> 1)), expect: 'damaged' },
    { name: 'the body with a byte appended', bytes: seal(Buffer.concat([body, Buffer.alloc(1)])), expect: 'damaged' },
    { name: 'the body with 16 bytes appended', bytes: seal(Buffer.concat([body, Buffer.alloc(16, 1)])), expect: 'damaged' },
    { name: 'a body of zeros', bytes: seal(Buffer.alloc(body.length)), expect: 'damaged' },
    { name: 'a body of 0xff bytes', bytes: seal(Buffer.alloc(body.length, 0xff)), expect: 'damaged' },
    { name: 'another magic', bytes: seal(body, FORMAT_VERSION, Buffer.from('API-AUTH', 'latin1')), expect: 'damaged' },
  ]);
});

t.test('a state file of an unknown format version stops the start, naming the version problem', async (t) => {
  const body = STATE.subarray(HEADER, HEADER + BODY_LENGTH);
  await refuseAll(
    t,
    [0, 3, 4, 0x100, 0xffffffff].map(
      (version): Case => ({
        name: `format version ${version}, everything else intact`,
        bytes: seal(body, version),
        expect: 'version',
      }),
    ),
  );
});

t.test('a state path the program cannot read as a file, or a data folder that is a file, stops the start', async (t) => {
  const root = tempDir(t);
  const folderState = join(root, 'folder-state');
  mkdirSync(join(folderState, 'state'), { recursive: true, mode: 0o700 });
  const fileDir = join(root, 'not-a-folder');
  writeFileSync(fileDir, 'x', { mode: 0o600 });
  for (const [label, data, mentions] of [
    ['the state file is a folder', folderState, join(folderState, 'state')],
    ['--data-dir names a file', fileDir, fileDir],
  ]) {
    const error = await openError(data);
    t.match(error, { name: 'StateError', code: 'API_AUTH_BAD_STATE' }, `the library refuses it with a StateError (${label})`);
    t.ok(error?.message.includes(mentions), `its message names ${mentions} (${label}): ${error?.message}`);
    expectCliRefusal(t, await runCli(t, cliArgs(data)), error, label);
  }
  t.equal(readFileSync(fileDir, 'utf8'), 'x', 'the file named by --data-dir is left alone');
});
