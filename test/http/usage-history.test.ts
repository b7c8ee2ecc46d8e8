// Usage over time: auth.usageHistory's hourly buckets of the last 7 days, per
// token and node-wide, with the refusals by reason; its params checked; the history kept
// across a clean restart and, to within the usage file's bound, a kill -9. The clock is
// the test's.
import t from 'tap';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { authUrl, call, tamperLast } from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { CLOCK_START, manualClock, serveAgain, serveInProcess } from '../helpers/library.js';
import { randomPassword, sleep, tempDir } from '../helpers/server.js';
import { startClocked } from '../helpers/clocked.js';

const INFO = '/ext/info';
const HOUR_MS = 3_600_000;
/** The reasons the refusals are counted by, as docs/reference/auth-wire.md lists them. */
const REASONS = [
  'malformed',
  'bad signature',
  'expired',
  'revoked',
  'earlier generation',
  'not granted',
  'no token',
  'bad header',
  'bad path',
  'limited',
  'unavailable',
  'rate',
  'quota',
  'table full',
  'unreadable',
  'method not allowed',
  'not json-rpc',
];

interface Hour {
  at: string;
  requests: number;
  refusals: Record<string, number>;
}
interface History {
  bucketSeconds: number;
  from: string;
  hours: Hour[];
}

async function issue(base: string, password: string, extra: Record<string, unknown> = {}): Promise<{ token: string; id: string }> {
  const response = await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints: [INFO], ...extra });
  if (response.result === undefined) throw new Error(`newToken failed: ${JSON.stringify(response.error)}`);
  return response.result as { token: string; id: string };
}

async function history(
  base: string,
  params: Record<string, unknown>,
): Promise<{ result?: History; error?: { code: number; message: string } }> {
  const response = await jsonrpc(authUrl(base), 'auth.usageHistory', params);
  return { result: response.result as History | undefined, error: response.error as { code: number; message: string } | undefined };
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const zeros = (): Record<string, number> => Object.fromEntries(REASONS.map((r) => [r, 0]));

t.test('calls in two hours land in their buckets, per token and node-wide; refusals by reason; 168 hours by default', async (t) => {
  const time = manualClock(CLOCK_START + 10 * 60_000);
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock, args: ['--api-auth-token-lifetime', '720h'] });
  const a = await issue(server.url, server.password);
  const b = await issue(server.url, server.password);
  const limited = await issue(server.url, server.password, { rateLimit: '1/h', burst: 1 });
  for (let i = 0; i < 3; i++) t.equal((await call(server.url, INFO, a.token)).status, 200);
  t.equal((await call(server.url, INFO, b.token)).status, 200);
  t.equal((await call(server.url, INFO)).status, 401, 'no token');
  t.equal((await call(server.url, INFO, tamperLast(a.token))).status, 401, 'a bad signature');
  t.equal((await call(server.url, '/ext/health', a.token)).status, 401, 'a path not granted');
  // Asked within the first hour: what was counted so far is in its bucket.
  const first = await history(server.url, { password: server.password, hours: 1 });
  t.same(first.result, {
    bucketSeconds: 3600,
    from: iso(CLOCK_START),
    hours: [{ at: iso(CLOCK_START), requests: 4, refusals: { ...zeros(), 'no token': 1, 'bad signature': 1, 'not granted': 1 } }],
  });

  time.now += HOUR_MS;
  for (let i = 0; i < 2; i++) t.equal((await call(server.url, INFO, a.token)).status, 200);
  t.equal((await call(server.url, INFO, limited.token)).status, 200);
  t.equal((await call(server.url, INFO, limited.token)).status, 429, 'past its rate');
  const both = (await history(server.url, { password: server.password, hours: 2 })).result!;
  t.equal(both.from, iso(CLOCK_START));
  t.same(
    both.hours.map((h) => h.at),
    [iso(CLOCK_START), iso(CLOCK_START + HOUR_MS)],
    'oldest first, one per hour',
  );
  t.same(
    both.hours.map((h) => h.requests),
    [4, 3],
    "node-wide: every token's calls let through",
  );
  t.same(both.hours[1].refusals, { ...zeros(), rate: 1 }, "the second hour's refusal");
  const ofA = (await history(server.url, { password: server.password, id: a.id, hours: 2 })).result!;
  t.same(
    ofA.hours,
    [
      { at: iso(CLOCK_START), requests: 3, refusals: {} },
      { at: iso(CLOCK_START + HOUR_MS), requests: 2, refusals: {} },
    ],
    "one token's calls, no refusals",
  );
  t.same(
    (await history(server.url, { password: server.password, id: b.id, hours: 2 })).result!.hours.map((h) => h.requests),
    [1, 0],
  );
  t.same(
    (await history(server.url, { password: server.password, id: limited.id, hours: 2 })).result!.hours.map((h) => h.requests),
    [0, 1],
    'a refused call is not a request let through',
  );

  const week = (await history(server.url, { password: server.password, id: a.id })).result!;
  t.equal(week.hours.length, 168, 'the default: 168 hours');
  t.equal(week.from, iso(CLOCK_START + HOUR_MS - 167 * HOUR_MS));
  t.equal(week.hours[167].at, iso(CLOCK_START + HOUR_MS), 'to the current hour');
  t.same(
    week.hours.slice(0, 166).filter((h) => h.requests !== 0),
    [],
    'zeros before the first call',
  );
  t.same(
    week.hours.slice(166).map((h) => h.requests),
    [3, 2],
  );

  // A week on, the first hour has left the window.
  time.now += 167 * HOUR_MS;
  const later = (await history(server.url, { password: server.password, id: a.id })).result!;
  t.same(
    later.hours.filter((h) => h.requests !== 0),
    [{ at: iso(CLOCK_START + HOUR_MS), requests: 2, refusals: {} }],
  );
  t.match(server.logs.filter((l) => l.msg === 'audit' && l.method === 'auth.usageHistory').at(-1), {
    outcome: 'ok',
    serial: Number(a.id.slice(1)),
    hours: 168,
  });
});

t.test("hours is 1 to 168, id a live token's; an unknown param, a bad id or a wrong password is an error", async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const { password } = server;
  const live = await issue(server.url, password);
  const short = await issue(server.url, password, { expiresIn: '60s' });
  t.equal((await history(server.url, { password, hours: 1 })).result!.hours.length, 1);
  t.equal((await history(server.url, { password, hours: 168 })).result!.hours.length, 168);
  for (const hours of [0, 169, -1, 1.5, '5', null, 1e20]) {
    const { result, error } = await history(server.url, { password, hours });
    t.equal(result, undefined, JSON.stringify(hours));
    t.equal(error?.code, -32602);
    t.match(error?.message, /^invalid params: hours must be a whole number of hours from 1 to 168/);
  }
  const unknown = await history(server.url, { password, hour: 5 });
  t.equal(unknown.error?.code, -32602);
  t.match(unknown.error?.message, /unknown param "hour" \(did you mean hours\?\)/);
  time.now += 61_000;
  for (const id of ['x', 't', 't99999', 5, short.id]) {
    const { error } = await history(server.url, { password, id });
    t.equal(error?.code, -32602, JSON.stringify(id));
    t.match(error?.message, /^invalid params: id must be /, 'names id');
  }
  t.equal((await history(server.url, { password, id: live.id, hours: 1 })).result!.hours.length, 1, "a live token's id");
  t.same((await history(server.url, { password: `${password}x` })).error, { code: -32000, message: 'incorrect password' });
});

t.test('a clean restart keeps the history, and counts on from it; a damaged file is dropped with a warning', async (t) => {
  const time = manualClock();
  const first = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const { token, id } = await issue(first.url, first.password);
  for (let i = 0; i < 3; i++) t.equal((await call(first.url, INFO, token)).status, 200);
  // A call is counted in the hour of the sample that sees it: this one, in the first hour.
  t.equal((await history(first.url, { password: first.password, hours: 1 })).result!.hours[0].requests, 3);
  time.now += HOUR_MS;
  t.equal((await call(first.url, INFO, token)).status, 200);
  await first.stop();
  const saved = JSON.parse(readFileSync(join(first.dataDir, 'usage-history'), 'utf8'));
  t.match(saved, { version: 1, requests: [CLOCK_START / HOUR_MS, 3, 1] }, 'the file holds the hours');

  const second = await serveAgain(t, first, time.clock);
  t.equal((await call(second.url, INFO, token)).status, 200);
  const kept = (await history(second.url, { password: second.password, id, hours: 2 })).result!;
  t.same(
    kept.hours.map((h) => h.requests),
    [3, 2],
    'the saved hours, and the call after the restart once (not the restored count again)',
  );
  t.same(
    (await history(second.url, { password: second.password, hours: 2 })).result!.hours.map((h) => h.requests),
    [3, 2],
  );
  await second.stop();

  writeFileSync(join(first.dataDir, 'usage-history'), '{"version":1,"tokens":[[1,2]]}');
  const third = await serveAgain(t, first, time.clock);
  t.match(
    third.logs.find((l) => l.level === 'warn' && /usage history file is damaged/.test(String(l.msg))),
    { path: join(first.dataDir, 'usage-history') },
  );
  t.same(
    (await history(third.url, { password: third.password, id, hours: 2 })).result!.hours.map((h) => h.requests),
    [0, 0],
    'starts empty',
  );
  const listed = await jsonrpc(authUrl(third.url), 'auth.listTokens', { password: third.password });
  t.match((listed.result as { tokens: unknown[] }).tokens[0], { requests: 5 }, "the usage counts are not the history's");
});

/** Waits until the history file of `dir` holds `count` in a token's series: the save is the owner's, off the request path. */
async function savedHolds(dir: string, count: number): Promise<void> {
  const path = join(dir, 'data', 'usage-history');
  for (;;) {
    if (existsSync(path)) {
      const saved = JSON.parse(readFileSync(path, 'utf8')) as { tokens?: number[][] };
      if (saved.tokens?.some((e) => e[2] === count)) return;
    }
    await sleep(50);
  }
}

t.test('the history survives a kill -9 up to its last save (every 30 s of the clock), as requests does', async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  const password = randomPassword();
  writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
  let server = await startClocked(t, dir, CLOCK_START);
  const { token, id } = await issue(server.url, password);
  for (let i = 0; i < 3; i++) t.equal((await call(server.url, INFO, token)).status, 200);
  server.child.kill('SIGUSR2');
  await server.waitForLog((l) => l.msg === 'clock moved');
  await savedHolds(dir, 3);
  // Counted after the save: what a kill -9 may lose.
  t.equal((await call(server.url, INFO, token)).status, 200);
  server.child.kill('SIGKILL');
  await server.exited;

  server = await startClocked(t, dir, CLOCK_START + 60_000);
  const kept = (await history(server.url, { password, id, hours: 1 })).result!;
  t.same(kept.hours, [{ at: iso(CLOCK_START), requests: 3, refusals: {} }], 'the saved count, not the call after it');
  const listed = await jsonrpc(authUrl(server.url), 'auth.listTokens', { password });
  t.match((listed.result as { tokens: unknown[] }).tokens[0], { requests: 3 }, 'the same bound as requests');
  t.equal((await server.stop('SIGTERM')).code, 0);
});
