// auth.rotateToken and `token rotate`: a new token of the same grant, label,
// methods and limits; the old one valid for the overlap, then ended as if revoked, also
// across a restart (one in the middle of the overlap, one after its end); usage carried
// over, linked both ways in listTokens. The fleet's side is test/fleet/fleet-rotation.test.ts.
import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runOperator } from '../helpers/operator.js';
import { authUrl, call, expectGranted, expectRefused, issueToken, listTokens, REASONS, refusedSoon } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { CLOCK_START, manualClock, serveInProcess } from '../helpers/library.js';
import { randomPassword, startServer, tempDir } from '../helpers/server.js';
import { startClocked } from '../helpers/clocked.js';

const INFO = '/ext/info';
const HOUR = 3600_000;
/** How far the clocked server's clock moves on each SIGUSR2 here: 10 minutes. */
const ROTATION_STEP_MS = 10 * 60_000;

interface Listed {
  id: string;
  label: string | null;
  endpoints: string[];
  methods: string[] | null;
  rateLimit: string | null;
  burst: number | null;
  requests: number;
  lastUsedAt: string | null;
  issuedAt: string;
  expiresAt: string;
  revoked: boolean;
  rotatedFrom: string | null;
  rotatedTo: string | null;
}

t.test('auth.rotateToken: the same grant and label, the old token valid for the overlap then revoked, usage carried over', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const url = authUrl(server.url);
  const old = await issueToken(server.url, server.password, { label: 'partner', methods: ['info.*'], rateLimit: '100/s', expiresIn: '2h' });
  for (let i = 0; i < 2; i++) expectGranted(t, await call(server.url, INFO, old.token), INFO);

  const bad: [Record<string, unknown>, RegExp][] = [
    [{ id: old.id, overlap: '1m', expiresIn: '1h' }, /unknown param "expiresIn"; auth.rotateToken takes password, token, id and overlap/],
    [{ id: old.id, token: old.token }, /give token or id \(the token's id\), one of them/],
    [{}, /give token or id/],
    [{ id: old.id, overlap: 'soon' }, /overlap must be a duration/],
    [{ id: old.id, overlap: -1 }, /overlap must be a duration/],
    [
      { id: old.id, overlap: '3h' },
      /overlap must be .* from 0s to 7200s \(2h, the old token's remaining life, and the new one's lifetime\)/,
    ],
    [{ id: 't99999' }, /t99999 is not a live token of this node/],
    [{ token: 'x'.repeat(76) }, /token is not a live token of this node \(malformed\)/],
  ];
  for (const [params, message] of bad) {
    const refused = await jsonrpc(url, 'auth.rotateToken', { password: server.password, ...params });
    t.equal(refused.error?.code, -32602, JSON.stringify(params));
    t.match(refused.error?.message, message, JSON.stringify(params));
  }
  t.equal((await listTokens<Listed>(server.url, server.password)).length, 1, 'bad input issued nothing');
  t.match((await jsonrpc(url, 'auth.rotateToken', { password: 'wrong', id: old.id })).error, { code: -32000 }, 'the password first');

  time.now += 30 * 60_000;
  const rotated = await jsonrpc(url, 'auth.rotateToken', { password: server.password, token: old.token, overlap: '10m' });
  const fresh = rotated.result as { token: string; id: string };
  t.same(Object.keys(fresh), ['token', 'id'], 'answered as auth.newToken is');
  t.not(fresh.id, old.id);
  const [before, after] = await listTokens<Listed>(server.url, server.password);
  t.match(before, { id: old.id, revoked: false, rotatedTo: fresh.id, rotatedFrom: null, requests: 2 });
  t.match(after, {
    id: fresh.id,
    label: 'partner',
    endpoints: [INFO],
    methods: ['info.*'],
    rateLimit: '100/s',
    burst: 100,
    revoked: false,
    rotatedFrom: old.id,
    rotatedTo: null,
    requests: 2,
    lastUsedAt: before.lastUsedAt,
  });
  t.equal(Date.parse(after.expiresAt) - Date.parse(after.issuedAt), 2 * HOUR, "the old token's whole lifetime");
  const again = await jsonrpc(url, 'auth.rotateToken', { password: server.password, id: old.id });
  t.match(again.error?.message, new RegExp(`${old.id} was rotated already, to ${fresh.id}; rotate that one`));

  expectGranted(t, await call(server.url, INFO, old.token), INFO, 'the old token during the overlap');
  expectGranted(t, await call(server.url, INFO, fresh.token), INFO, 'the new token');
  expectRefused(t, await call(server.url, '/ext/health', fresh.token), REASONS.notGranted, 'the same endpoints only');
  time.now += 10 * 60_000;
  await refusedSoon(server.url, old.token);
  expectRefused(t, await call(server.url, INFO, old.token), REASONS.revoked, 'past the overlap: revoked');
  expectGranted(t, await call(server.url, INFO, fresh.token), INFO, 'the new one works on');
  const [ended, next] = await listTokens<Listed>(server.url, server.password);
  t.match(ended, { id: old.id, revoked: true, rotatedTo: fresh.id });
  t.match(next, { id: fresh.id, requests: 4 }, 'the 2 calls carried over, and its own 2');
  t.match((await jsonrpc(url, 'auth.revokeToken', { password: server.password, id: old.id })).result, { revocation: 'already revoked' });
});

t.test('overlap 0 (the default) ends the old token as the call answers; the lifetime is capped by --max-token-lifetime', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ['--max-token-lifetime', '720h'] });
  const url = authUrl(server.url);
  const old = await issueToken(server.url, server.password, { expiresIn: '720h' });
  const rotated = await jsonrpc(url, 'auth.rotateToken', { password: server.password, id: old.id });
  const fresh = rotated.result as { token: string; id: string };
  expectRefused(t, await call(server.url, INFO, old.token), REASONS.revoked, 'revoked at once');
  expectGranted(t, await call(server.url, INFO, fresh.token), INFO);
  const [, entry] = await listTokens<Listed>(server.url, server.password);
  t.equal(Date.parse(entry.expiresAt) - Date.parse(entry.issuedAt), 720 * HOUR);
});

t.test('token rotate: by --id or by the token from a file, --overlap, --json; the table shows ROTATED TO', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: ['--http-threads', '1'] });
  const auth = ['--uri', node.url, '--password-file', node.passwordFile];
  const api = (args: readonly string[]) => runOperator(args);
  const first = await issueToken(node.url, node.password, { label: 'scraper' });
  const byId = await api(['token', 'rotate', ...auth, '--id', first.id, '--overlap', '1h', '--json']);
  t.equal(byId.code, 0, byId.stderr);
  const second = JSON.parse(byId.stdout) as { token: string; id: string };
  expectGranted(t, await call(node.url, INFO, first.token), INFO, 'the old one, in its hour of overlap');
  const file = join(node.dir, 'token');
  writeFileSync(file, second.token, { mode: 0o600 });
  const byFile = await api(['token', 'rotate', ...auth, '--token-file', file]);
  t.equal(byFile.code, 0, byFile.stderr);
  t.match(byFile.stdout, /^[A-Za-z0-9_-]{76}\n$/, 'the new token alone');
  expectRefused(t, await call(node.url, INFO, second.token), REASONS.revoked, 'no --overlap: ended at once');
  const table = (await api(['token', 'list', ...auth])).stdout.trimEnd().split('\n');
  t.match(table[0], /REVOKED +ROTATED TO +LAST USED/);
  t.match(table[1], new RegExp(`^${first.id} +scraper .* no +${second.id} `));
  t.match(table[2], new RegExp(`^${second.id} +scraper .* yes +t\\d+ `));
  const refused = await api(['token', 'rotate', ...auth, '--id', first.id]);
  t.equal(refused.code, 1);
  t.match(refused.stderr, /was rotated already/);
  const misplaced = await api(['token', 'new', ...auth, '--endpoints', '*', '--overlap', '1h']);
  t.same([misplaced.code, misplaced.stderr], [2, 'api-auth: --overlap belongs to "api-auth token rotate", not "api-auth token new"\n']);
  const badOverlap = await api(['token', 'rotate', ...auth, '--id', first.id, '--overlap', 'soon']);
  t.same([badOverlap.code, badOverlap.stderr], [2, 'api-auth: --overlap must be a duration such as 0s, 10m or 24h, not "soon"\n']);
});

t.test('a restart in the middle of the overlap keeps the end; a start after it applies it before serving', async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  const password = randomPassword();
  writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
  let server = await startClocked(t, dir, CLOCK_START, ROTATION_STEP_MS);
  const old = await issueToken(server.url, password, {});
  const fresh = (await jsonrpc(authUrl(server.url), 'auth.rotateToken', { password, id: old.id, overlap: '15m' })).result as {
    token: string;
    id: string;
  };
  server.child.kill('SIGKILL');
  await server.exited;

  // Five minutes in: the old token still works, and ends on this start's clock.
  server = await startClocked(t, dir, CLOCK_START + 5 * 60_000, ROTATION_STEP_MS);
  expectGranted(t, await call(server.url, INFO, old.token), INFO, 'mid-overlap, after a kill -9');
  expectGranted(t, await call(server.url, INFO, fresh.token), INFO);
  server.child.kill('SIGUSR2');
  await server.waitForLog((l) => l.msg === 'clock moved');
  await refusedSoon(server.url, old.token);
  expectRefused(t, await call(server.url, INFO, old.token), REASONS.revoked, 'past the overlap');
  server.child.kill('SIGKILL');
  await server.exited;

  // A second rotation, and a start only after its end: refused from the first call.
  server = await startClocked(t, dir, CLOCK_START + 20 * 60_000, ROTATION_STEP_MS);
  expectRefused(t, await call(server.url, INFO, old.token), REASONS.revoked, 'still revoked after a restart');
  const third = (await jsonrpc(authUrl(server.url), 'auth.rotateToken', { password, id: fresh.id, overlap: '5m' })).result as {
    token: string;
  };
  t.equal((await server.stop('SIGTERM')).code, 0);
  server = await startClocked(t, dir, CLOCK_START + 40 * 60_000, ROTATION_STEP_MS);
  expectRefused(t, await call(server.url, INFO, fresh.token), REASONS.revoked, 'an end that came due while the node was down');
  expectGranted(t, await call(server.url, INFO, third.token), INFO);
  const tokens = await listTokens<Listed>(server.url, password);
  t.match(
    tokens.map((e) => [e.id, e.revoked, e.rotatedFrom, e.rotatedTo]),
    [
      [old.id, true, null, fresh.id],
      [fresh.id, true, old.id, /^t\d+$/],
      [/^t\d+$/, false, fresh.id, null],
    ],
  );
  t.equal((await server.stop('SIGTERM')).code, 0);
});
