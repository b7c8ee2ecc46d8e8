// Password guessing is throttled per client and overall, password checks run off the
// serving thread, and their queue is bounded. The rules are driven with plain clocks;
// the service runs in this process (the library's startServer), on a clock the test
// moves where the time matters (and the tarpit's timer on timers it moves, timers.ts),
// or as the CLI where the serving thread must be its own;
// it is driven over HTTP from pinned loopback addresses (all of 127/8 is this machine,
// so each address is a client of its own).
import t from 'tap';
import { clientKey, OVERALL, PasswordThrottle, PER_CLIENT } from '../../build/host/service/throttle.js';
import { Tarpit, TARPIT_DELAY } from '../../build/host/http/tarpit.js';
import type { PasswordCheck, ThrottleRule } from '../../build/host/service/throttle.js';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TokenService } from '../../build/host/service/token-service.js';
import { authMethods } from '../../build/host/service/auth-methods.js';
import { newCore } from '../../build/host/core/module.js';
import { createLogger } from '../../build/host/ops/log.js';
import { Argon2idVerifier } from '../../build/host/password/hash.js';
import { restoreService, StateStore } from '../../build/host/state/store.js';
import { JournalInventory } from '../../build/host/state/inventory.js';
import { FolderLedger } from '../../build/host/state/ledger.js';
import { RotationEnds } from '../../build/host/service/rotation-ends.js';
import { call, newToken } from '../helpers/auth.js';
import { freshSource, post, request, rpc } from '../helpers/http.js';
import type { HttpResponse } from '../helpers/http.js';
import { manualClock, serveInProcess } from '../helpers/library.js';
import { startServer, tempDir } from '../helpers/server.js';
import { manualTimers, settle } from '../helpers/timers.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** A rule that never binds, for the side a test does not look at. */
const UNBOUNDED: ThrottleRule = [{ burst: 1_000_000, interval: 1 }];

/** A client address of its own for each i (so the per-client rule never binds). */
const nth = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

/**
 * A guesser that tries again the moment it is let: every wrong password at once, and on
 * a refusal it waits exactly the announced Retry-After. Returns the times (ms) its
 * checks started, up to `until`.
 */
function greedy(throttle: PasswordThrottle, until: number, address: (i: number) => string): number[] {
  const started: number[] = [];
  for (let now = 0; now <= until; ) {
    const check = throttle.begin(address(started.length), now);
    if (typeof check === 'number') {
      now += check * 1000;
    } else {
      check.failed();
      started.push(now);
    }
  }
  return started;
}

/**
 * How far the checks of the busiest span of time went beyond what the rule allows in
 * it (burst + span / interval, for each rate): at most 0 when the rule held throughout.
 */
function overrun(started: readonly number[], rule: ThrottleRule): number {
  let worst = -Infinity;
  for (const { burst, interval } of rule) {
    // Checks i..j overrun by (j - i + 1) - burst - (t[j] - t[i]) / interval; the best i
    // for each j is the running maximum of t[i] / interval - i.
    let best = -Infinity;
    for (let j = 0; j < started.length; j++) {
      best = Math.max(best, started[j] / interval - j);
      worst = Math.max(worst, j + 1 - started[j] / interval + best - burst);
    }
  }
  return worst;
}

t.test(
  'the stated rules: per client 3 at once then one per 10 s, 10 at once then one per 5 min; overall 100 at once then one a second',
  async (t) => {
    t.same(PER_CLIENT, [
      { burst: 3, interval: 10_000 },
      { burst: 10, interval: 5 * MINUTE },
    ]);
    t.same(OVERALL, [{ burst: 100, interval: 1000 }]);
  },
);

t.test('one client: 3 wrong passwords at once, then one per 10 s, and in the long run one per 5 minutes', async (t) => {
  const started = greedy(new PasswordThrottle(), DAY, () => '192.0.2.7');
  t.same(started.slice(0, 10), [0, 0, 0, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 70_000], 'the first ten');
  const gaps = started.slice(10).map((at, i) => at - started[9 + i]);
  t.ok(
    gaps.every((gap, i) => gap === (i === 0 ? 5 * MINUTE - 70_000 : 5 * MINUTE)),
    'then one every 5 minutes',
  );
  t.equal(started.length, 10 + DAY / (5 * MINUTE), 'in a day: the burst of 10 and 288 more (12 an hour)');
  t.equal(Math.round(overrun(started, PER_CLIENT) * 1e6) / 1e6, 0, 'the busiest span held exactly what the rates allow');
});

t.test('all clients together: 100 wrong passwords at once, then one a second', async (t) => {
  const started = greedy(new PasswordThrottle(UNBOUNDED), HOUR, nth);
  t.equal(started.filter((at) => at === 0).length, 100, 'the burst');
  t.ok(
    started.slice(100).every((at, i) => at === (i + 1) * 1000),
    'then one a second',
  );
  t.equal(started.length, 100 + HOUR / 1000, 'in an hour: the burst and 3,600 more');
});

t.test('waiting out a limit never restores the burst', async (t) => {
  const throttle = new PasswordThrottle();
  for (let i = 0; i < 3; i++) (throttle.begin('192.0.2.7', 0) as PasswordCheck).failed();
  t.equal(throttle.retryAfter('192.0.2.7', 0), 10);
  t.equal(throttle.retryAfter('192.0.2.7', 9_001), 1, 'rounded up to whole seconds');
  const one = throttle.begin('192.0.2.7', 10_000);
  t.type(one, 'object', 'the wait is over: one more check');
  (one as PasswordCheck).failed();
  t.equal(throttle.begin('192.0.2.7', 10_000), 10, 'and only one');

  // The old overall rule forgot everything after a minute, its longest wait.
  const everyone = new PasswordThrottle(UNBOUNDED);
  for (let i = 0; i < 100; i++) (everyone.begin(nth(i), 0) as PasswordCheck).failed();
  t.equal(everyone.retryAfter(nth(100), 0), 1);
  let after = 0;
  for (let i = 100; ; i++) {
    const check = everyone.begin(nth(i), MINUTE);
    if (typeof check === 'number') break;
    check.failed();
    after++;
  }
  t.equal(after, 60, 'a quiet minute gives back 60 checks, not 100');

  // Guessers that pause, for any length of time and as often as they like, get no more
  // than the rates allow in any span, per client and overall.
  let seed = 7;
  const random = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (const [rule, address] of [
    [PER_CLIENT, () => '192.0.2.7'],
    [OVERALL, nth],
  ] as const) {
    for (let strategy = 0; strategy < 20; strategy++) {
      const limits = rule === PER_CLIENT ? new PasswordThrottle() : new PasswordThrottle(UNBOUNDED);
      const started: number[] = [];
      for (let now = 0; now <= 6 * HOUR; ) {
        const check = limits.begin(address(started.length), now);
        if (typeof check !== 'number') {
          check.failed();
          started.push(now);
        }
        // Retry at once, after the announced wait, or after a quiet spell of up to an hour.
        const pick = random();
        now += pick < 0.3 ? 0 : pick < 0.8 ? (typeof check === 'number' ? check * 1000 : 0) : Math.floor(random() * HOUR);
      }
      t.ok(overrun(started, rule) <= 1e-9, `strategy ${strategy}: ${started.length} checks, none beyond the rates`);
    }
  }
});

t.test('a check counts from its start: 31 at once from one client, 3 run', async (t) => {
  const throttle = new PasswordThrottle();
  const outcomes = Array.from({ length: 31 }, () => throttle.begin('192.0.2.7', 0));
  const running = outcomes.filter((o): o is PasswordCheck => typeof o !== 'number');
  t.equal(running.length, 3);
  t.ok(
    outcomes.slice(3).every((o) => o === 10),
    'the others wait 10 s',
  );
  t.equal(throttle.retryAfter('192.0.2.7', 0), 10, 'a check under way counts before it ends');
  running[0].abandoned();
  t.type(throttle.begin('192.0.2.7', 0), 'object', 'one that could not run is not counted');
  const overall = new PasswordThrottle(UNBOUNDED, [{ burst: 2, interval: 1000 }]);
  t.type(overall.begin(nth(1), 0), 'object');
  t.type(overall.begin(nth(2), 0), 'object');
  t.equal(overall.begin(nth(3), 0), 1, 'checks under way count overall too');
});

t.test('a right password forgives its client, and is not a guess; it forgives no other client', async (t) => {
  const throttle = new PasswordThrottle(PER_CLIENT, UNBOUNDED);
  for (let i = 0; i < 3; i++) (throttle.begin('192.0.2.1', 0) as PasswordCheck).failed();
  t.equal(throttle.retryAfter('192.0.2.1', 0), 10);
  const right = throttle.begin('192.0.2.1', 10_000) as PasswordCheck;
  right.succeeded();
  for (let i = 0; i < 3; i++) (throttle.begin('192.0.2.1', 10_000) as PasswordCheck).failed();
  t.equal(throttle.begin('192.0.2.1', 10_000), 10, 'its client got its burst back');
  right.failed();
  t.equal(throttle.retryAfter('192.0.2.1', 10_000), 10, 'a check is settled once');

  const everyone = new PasswordThrottle(UNBOUNDED, [{ burst: 4, interval: 1000 }]);
  (everyone.begin(nth(1), 0) as PasswordCheck).failed();
  (everyone.begin(nth(2), 0) as PasswordCheck).failed();
  const correct = everyone.begin(nth(3), 0) as PasswordCheck;
  const wrong = everyone.begin(nth(4), 0) as PasswordCheck;
  t.equal(everyone.retryAfter(nth(5), 0), 1, 'four checks under way or failed: the overall burst is spent');
  correct.succeeded();
  t.equal(everyone.retryAfter(nth(5), 0), 0, 'the right password gave its share back');
  wrong.failed();
  (everyone.begin(nth(5), 0) as PasswordCheck).failed();
  t.equal(everyone.retryAfter(nth(6), 0), 1, "and forgave none of the other clients' failures");
});

t.test('a client is its IPv4 address, also IPv4-mapped, or its IPv6 /64 however it is written', async (t) => {
  for (const address of ['127.0.0.1', '::ffff:127.0.0.1', '::FFFF:7f00:1', '0000:0000:0000:0000:0000:ffff:7f00:0001']) {
    t.equal(clientKey(address), '127.0.0.1', address);
  }
  t.equal(clientKey('0000:0000:0000:0000:0000:ffff:7f00:0002'), '127.0.0.2');
  for (const address of [
    '2001:0db8:0001:0002:0000:0000:0000:0001',
    '2001:db8:1:2::1',
    '2001:DB8:1:2:ffff:ffff:ffff:ffff',
    '2001:db8:1:2::',
    '2001:db8:1:2::192.0.2.1',
    '2001:db8:1:2::1%eth0',
  ]) {
    t.equal(clientKey(address), '2001:db8:1:2::/64', address);
  }
  t.equal(clientKey('2001:db8:1:3::1'), '2001:db8:1:3::/64', 'the next /64');
  t.equal(clientKey('2001:db8::1:2:3:4'), '2001:db8:0:0::/64', 'groups after "::" are the low ones');
  t.equal(clientKey('1:2:3:4:5:6:7::'), '1:2:3:4::/64');
  for (const address of ['::1', '::', '0000:0000:0000:0000:0000:0000:0000:0001', '::192.0.2.1']) {
    t.equal(clientKey(address), '0:0:0:0::/64', `${address}: not an IPv4 client`);
  }
  t.equal(clientKey(''), '[]', 'text that is no address is a key of its own');
  t.equal(clientKey('2001:db8:1:2::/64'), '[2001:db8:1:2::/64]', 'and never the key of an address');

  const throttle = new PasswordThrottle(PER_CLIENT, UNBOUNDED);
  for (let i = 0; i < 3; i++) (throttle.begin('0000:0000:0000:0000:0000:ffff:7f00:0001', 0) as PasswordCheck).failed();
  t.equal(throttle.retryAfter('127.0.0.1', 0), 10, 'one client, however its address is written');
  t.equal(throttle.retryAfter('0000:0000:0000:0000:0000:ffff:7f00:0002', 0), 0, 'IPv4 clients on a dual-stack listener are apart');
  t.equal(throttle.retryAfter('::1', 0), 0, 'and apart from IPv6 clients');
  for (let i = 0; i < 3; i++) (throttle.begin('2001:db8:1:2::1', 0) as PasswordCheck).failed();
  t.equal(throttle.retryAfter('2001:0db8:0001:0002:ffff:ffff:ffff:ffff', 0), 10, 'the same /64');
  t.equal(throttle.retryAfter('2001:db8:1:3::1', 0), 0, 'another /64');
});

t.test('the table of clients is bounded: the longest idle make room', async (t) => {
  const throttle = new PasswordThrottle(PER_CLIENT, UNBOUNDED, 2);
  for (let i = 0; i < 3; i++) (throttle.begin('2001:db8:1:2::1', 0) as PasswordCheck).failed();
  t.equal(throttle.retryAfter('2001:db8:1:2::1', 0), 10);
  (throttle.begin('10.0.0.1', 0) as PasswordCheck).failed();
  (throttle.begin('10.0.0.2', 0) as PasswordCheck).failed();
  t.equal(throttle.retryAfter('2001:db8:1:2::1', 0), 0, 'the longest-idle client made room');
});

t.test('the token service throttles on the clock it is given', async (t) => {
  const dir = join(tempDir(t), 'data');
  mkdirSync(dir, { mode: 0o700 });
  const core = newCore();
  const log = createLogger(() => undefined);
  let now = Date.parse('2030-01-01T00:00:00Z');
  const clock = (): number => now;
  const store = await StateStore.open(dir, log, clock);
  const verifier = new Argon2idVerifier();
  t.teardown(async () => {
    await verifier.close();
    await store.close();
  });
  await restoreService(core, store, verifier, 'the-password', 3600, log, clock);
  const ledger = new FolderLedger(core, store);
  const ends = new RotationEnds(
    { refuse: (s) => core.revokeSerial(s), record: (s, e) => ledger.revoke(s, e), recorded: (s) => ledger.isRevoked(s) },
    clock,
    log,
  );
  const inventory = await JournalInventory.open(
    dir,
    store.state!.key,
    { contents: undefined, entries: [] },
    store.state!.journal,
    () => true,
    (mark) => store.recordJournal(mark),
    log,
    ends,
  );
  t.teardown(() => inventory.close());
  const service = new TokenService({
    core,
    ledger,
    verifier,
    tokenLifetime: 3600,
    maxTokenLifetime: 3600,
    inventory,
    maxTokens: 100,
    log,
    clock,
  });
  const newTokenCall = authMethods(service).get('auth.newToken')!;
  const guess = (password: string) =>
    Promise.resolve(newTokenCall({ password, endpoints: ['*'] }, { address: '192.0.2.7' })).then(
      (result) => ({ result }),
      (error: { rpcCode: number; message: string }) => ({ code: error.rpcCode, message: error.message }),
    );
  for (let i = 0; i < 3; i++) t.match(await guess('wrong'), { code: -32000 });
  t.same(await guess('the-password'), { code: -32005, message: 'too many failed password attempts; retry in 10 s' });
  now += 9_000;
  t.same(
    await guess('the-password'),
    { code: -32005, message: 'too many failed password attempts; retry in 1 s' },
    '9 s later by its clock',
  );
  now += 1_000;
  t.match(await guess('the-password'), { result: { token: String } }, '10 s later by its clock, though no time passed');
  for (let i = 0; i < 3; i++) t.match(await guess('wrong'), { code: -32000 }, 'the right password forgave the client');
});

t.test('the tarpit answers later, in a batch, and at once when full', async (t) => {
  const timers = manualTimers(t);
  const tarpit = new Tarpit(50, 2);
  const answered: number[] = [];
  tarpit.hold(() => answered.push(1));
  tarpit.hold(() => answered.push(2));
  t.same(answered, [], 'held');
  tarpit.hold(() => answered.push(3));
  t.same(answered, [3], 'past the bound, answered at once');
  timers.tick(49);
  t.same(answered, [3], 'still held a millisecond short of the delay');
  timers.tick(1);
  t.same(answered, [3, 1, 2], 'the held ones, in order, in one batch, once the delay is over');
});

/** auth.newToken from `source`. */
function attempt(url: string, password: string, source: string): Promise<HttpResponse> {
  return post(url, '/ext/auth', JSON.stringify(rpc('auth.newToken', { password, endpoints: ['/ext/info'] }, 1)), { localAddress: source });
}

/** The JSON-RPC error code of a response, if any. */
const errorCode = (r: HttpResponse): number | undefined => JSON.parse(r.text).error?.code;

t.test('a guessing client gets 429 with Retry-After after 3 wrong passwords; other clients do not', async (t) => {
  // The service's clock stands still, so the wait it names is the whole 10 s however long
  // the machine takes between the requests.
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const guesser = '127.2.0.1';
  for (let i = 1; i <= 3; i++) {
    const r = await attempt(server.url, 'wrong', guesser);
    t.equal(r.status, 200, `failure ${i} is answered`);
    t.equal(errorCode(r), -32000);
  }
  const held = await attempt(server.url, server.password, guesser);
  t.equal(held.status, 429, 'even the right password waits its turn');
  t.equal(held.headers['retry-after'], '10');
  t.equal(held.headers['content-type'], 'application/json');
  t.same(JSON.parse(held.text), {
    jsonrpc: '2.0',
    error: { code: -32005, message: 'too many failed password attempts; retry in 10 s' },
    id: null,
  });
  const other = await attempt(server.url, server.password, '127.2.0.2');
  t.equal(other.status, 200, 'another client is not held up');
  t.type(JSON.parse(other.text).result?.token, 'string');
  t.notOk(JSON.stringify(server.logs).includes('wrong'), 'the guesses are not logged');
});

t.test('31 wrong passwords at once from one address: 3 are checked, the others wait', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ['--api-auth-public-endpoints', '/ext/metrics'] });
  const replies = await Promise.all(Array.from({ length: 31 }, () => attempt(server.url, 'wrong', '127.5.0.1')));
  const checked = replies.filter((r) => r.status === 200 && errorCode(r) === -32000);
  const held = replies.filter((r) => r.status === 429 && errorCode(r) === -32005);
  t.equal(checked.length, 3, 'the burst, and no more');
  t.equal(held.length, 28, 'the others are refused');
  const metrics = await request(server.url, '/ext/metrics');
  t.match(metrics.text, /^api_auth_password_checks_total\{result="refused"\} 3$/m, 'argon2id ran 3 times');
});

for (const host of ['::', '0.0.0.0']) {
  t.test(`IPv4 clients of a listener on ${host} are throttled apart`, async (t) => {
    const server = await serveInProcess(t, { cheapChecks: true, args: ['--http-host', host] });
    // One batch, answered as soon as its entries are: the guesser's wait has just begun.
    const batch = Array.from({ length: 6 }, (_, id) => rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, id));
    const guesses = await request(server.url, '/ext/auth', {
      method: 'POST',
      headers: [['Content-Type', 'application/json']],
      body: JSON.stringify(batch),
      localAddress: '127.0.0.1',
    });
    const codes = (JSON.parse(guesses.text) as Array<{ error: { code: number } }>).map((e) => e.error.code);
    t.same(codes, [-32000, -32000, -32000, -32005, -32005, -32005], 'the guesser waits after its burst');
    const other = await attempt(server.url, server.password, '127.0.0.2');
    t.equal(other.status, 200, 'another IPv4 client does not');
    t.type(JSON.parse(other.text).result?.token, 'string');
  });
}

t.test("a waiting client's refusals are held back, so its guesses slow to one a second per connection", async (t) => {
  // The service's clock stands still (the guesser stays refused); the tarpit's timer runs
  // on a time the test moves, and a refusal is only sent when that timer fires.
  const time = manualClock();
  const server = await serveInProcess(t, { clock: time.clock });
  const guesser = '127.4.0.1';
  for (let i = 0; i < 3; i++) t.equal(errorCode(await attempt(server.url, 'wrong', guesser)), -32000);
  const timers = manualTimers(t);
  for (let i = 1; i <= 2; i++) {
    let answered = false;
    const refusal = attempt(server.url, 'wrong', guesser).then((r) => {
      answered = true;
      return r;
    });
    await timers.set(TARPIT_DELAY);
    timers.tick(TARPIT_DELAY - 1);
    await settle();
    t.notOk(answered, `refusal ${i}: held a millisecond short of ${TARPIT_DELAY} ms`);
    timers.tick(1);
    t.equal((await refusal).status, 429, `refusal ${i}: sent once the ${TARPIT_DELAY} ms are over`);
  }
  timers.restore();
  const other = await attempt(server.url, server.password, '127.4.0.2');
  t.type(JSON.parse(other.text).result?.token, 'string', 'another client is answered at once');
});

/** The CPU time (clock ticks) each thread of process `pid` has used, by thread id. */
function threadTimes(pid: number): Map<number, number> {
  const times = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended
    }
    // The fields after the thread's name (in parentheses, and it may hold anything):
    // state first, then utime and stime at 11 and 12.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    times.set(Number(tid), Number(fields[11]) + Number(fields[12]));
  }
  return times;
}

t.test('protected requests keep flowing while password checks run', async (t) => {
  // The CLI, in a process of its own, whose threads /proc tells apart: the serving thread
  // is the one whose id is the process's.
  const server = await startServer(t);
  const pid = server.child.pid!;
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const before = threadTimes(pid);
  // Twenty checks: about a second of hashing, queued at once.
  const checks = Array.from({ length: 20 }, () => attempt(server.url, 'wrong', freshSource()));
  let served = 0;
  for (let i = 0; i < 50; i++) {
    const r = await call(server.url, '/ext/info', token);
    if (r.status === 200) served++;
  }
  const replies = await Promise.all(checks);
  const after = threadTimes(pid);
  t.equal(served, 50, 'every protected request was served');
  t.ok(
    replies.every((r) => errorCode(r) === -32000),
    'every check was answered',
  );
  // Counted by the kernel, not by a clock: how loaded the machine is does not matter.
  const used = [...after].map(([tid, ticks]) => ({ tid, ticks: ticks - (before.get(tid) ?? 0) })).sort((a, b) => b.ticks - a.ticks);
  const serving = used.find((u) => u.tid === pid)?.ticks ?? 0;
  t.not(
    used[0].tid,
    pid,
    `the checks were hashed on a thread other than the serving one (${used[0].ticks} ticks there, ${serving} on the serving thread)`,
  );
  t.ok(serving * 2 < used[0].ticks, 'the serving thread spent less than half as long');
});

t.test('the queue of password checks is bounded: past it, calls are refused at once with 503', async (t) => {
  const server = await serveInProcess(t);
  const replies = await Promise.all(Array.from({ length: 64 }, () => attempt(server.url, 'wrong', freshSource())));
  const busy = replies.filter((r) => r.status === 503);
  const checked = replies.filter((r) => r.status === 200 && errorCode(r) === -32000);
  t.equal(busy.length + checked.length, 64, 'every call is answered: checked or refused');
  t.ok(busy.length > 0, `${busy.length} of 64 refused as busy`);
  t.ok(checked.length >= 32, `${checked.length} checked`);
  for (const r of busy) {
    t.equal(r.headers['retry-after'], '1');
    t.equal(errorCode(r), -32043);
  }
  const after = await attempt(server.url, server.password, freshSource());
  t.type(JSON.parse(after.text).result?.token, 'string', 'the right password works once the queue drains');
});

t.test('past the overall allowance, every client waits: 100 wrong passwords at once, then one a second', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  // Waves of wrong passwords, each from clients that never failed before, in sizes the
  // queue of checks holds, until the overall allowance runs out. No time passes by the
  // service's clock, so it lets exactly the burst through.
  let checked = 0;
  let held: HttpResponse[] = [];
  for (let wave = 0; held.length === 0 && wave < 10; wave++) {
    const replies = await Promise.all(Array.from({ length: 25 }, () => attempt(server.url, 'wrong', freshSource())));
    checked += replies.filter((r) => errorCode(r) === -32000).length;
    held = replies.filter((r) => r.status === 429);
  }
  t.ok(held.length > 0, 'clients that never failed were held too');
  for (const r of held) {
    t.equal(errorCode(r), -32005);
    t.equal(r.headers['retry-after'], '1', 'for a second at most');
  }
  t.equal(checked, 100, 'the burst was checked, and no more');
  time.now += 1000;
  t.same(
    await inBatch(server.url, ['wrong', 'wrong'], freshSource()),
    [-32000, -32005],
    'a second later by the clock, one more check, and one only',
  );
  time.now += 1000;
  const token = await newToken(server.url, server.password, ['/ext/health']);
  t.equal((await call(server.url, '/ext/health', token)).status, 200, 'tokens issued once the wait is over work as ever');
});

/**
 * auth.newToken with each of `passwords` from `source`, in one batch: the route lets it
 * in when the client may try once, and the throttle's refusals of the entries after come
 * from the service, at once (the route holds its own back a second). The entries' error
 * codes (undefined for a token).
 */
async function inBatch(url: string, passwords: readonly string[], source: string): Promise<(number | undefined)[]> {
  const r = await request(url, '/ext/auth', {
    method: 'POST',
    headers: [['Content-Type', 'application/json']],
    localAddress: source,
    body: JSON.stringify(passwords.map((password, id) => rpc('auth.newToken', { password, endpoints: ['/ext/info'] }, id))),
  });
  return (JSON.parse(r.text) as Array<{ error?: { code: number } }>).map((entry) => entry.error?.code);
}

t.test('a batch is throttled entry by entry', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true });
  const source = '127.3.0.1';
  const batch = [1, 2, 3, 4, 5].map((id) => rpc('auth.revokeToken', { password: 'wrong', token: 'x' }, id));
  const r = await request(server.url, '/ext/auth', {
    method: 'POST',
    headers: [['Content-Type', 'application/json']],
    body: JSON.stringify(batch),
    localAddress: source,
  });
  t.equal(r.status, 200, 'a batch answers per entry');
  const codes = (JSON.parse(r.text) as Array<{ error: { code: number } }>).map((e) => e.error.code);
  t.same(codes, [-32000, -32000, -32000, -32005, -32005], 'the entries after the third failure wait');
  const next = await attempt(server.url, server.password, source);
  t.equal(next.status, 429);
  t.equal(
    (await call(server.url, '/ext/info', await newToken(server.url, server.password, ['/ext/info']))).status,
    200,
    'other clients are served',
  );
});
