// Per-token limits in the core (assembly/limits.ts), through the Core class: a grant's
// limit entries, the Limited outcome, admit's bucket and client ranges, usage, the bounded
// table, and one bucket shared by readers on several threads.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { Core } from '../../build/host/core/core.js';
import {
  ADMIT_CLIENT,
  ADMIT_OK,
  ADMIT_OVER_BURST,
  ADMIT_RATE,
  ADMIT_TABLE_FULL,
  admitRecord,
  checkRecord,
  type GrantError,
  Outcome,
} from '../../build/host/core/abi.js';
import { coreModule, coreThreadsModule, newThreadsCore } from '../../build/host/core/module.js';
import { addressBytes, trustedProxies } from '../../build/host/addresses.js';
import { clientRange } from '../../build/host/service/token-params.js';
import { CLIENT_RANGES } from '../vectors/client-ranges.js';

const NOW = 1_700_000_000;
const NOW_MS = NOW * 1000;
const HOUR = 3600;
const YEAR = 365 * 24 * HOUR;
const RPC = '/ext/bc/C/rpc';
const MAPPED = '00000000000000000000ffff';
const v4 = (a: number, b: number, c: number, d: number) =>
  Buffer.from(MAPPED + [a, b, c, d].map((x) => x.toString(16).padStart(2, '0')).join(''), 'hex');
const CLIENT = v4(192, 0, 2, 7);

function keyedCore(windowLog2 = 12): Core {
  const core = new Core(coreModule(), { windowLog2 });
  core.setKey(new Uint8Array(32).fill(7));
  return core;
}

t.test('a token of a grant with limits checks Limited, with its serial and grant; one without is Valid as before', async (t) => {
  const core = keyedCore();
  const plain = core.addGrant([RPC]);
  const limited = core.addGrant([RPC], undefined, ['rate 10/s', 'burst 10']);
  const scopedLimited = core.addGrant([RPC], ['eth_call'], ['rate 10/s', 'burst 10']);
  t.not(limited, plain, 'limits make another grant');
  t.equal(core.addGrant([RPC], undefined, ['rate 10/s', 'burst 10']), limited, 'interned');
  t.not(core.findGrant([RPC], undefined, ['rate 10/s', 'burst 11']), limited, 'another burst is another grant');
  const a = core.issue(plain, NOW, HOUR).token;
  const b = core.issue(limited, NOW, HOUR);
  const c = core.issue(scopedLimited, NOW, HOUR);
  t.equal(core.authorize(`Bearer ${a}`, RPC, NOW), Outcome.Valid);
  const checked = checkRecord();
  t.equal(core.authorize(`Bearer ${b.token}`, RPC, NOW, checked), Outcome.Limited);
  t.same(checked, { grant: limited, serial: b.claims.serial, expiry: b.claims.expiry, scoped: false }, 'no method scope to check');
  t.equal(core.verify(c.token, RPC, NOW, checked), Outcome.Limited, 'limits and a method scope: Limited, the scope still to check');
  t.same(checked, { grant: scopedLimited, serial: c.claims.serial, expiry: c.claims.expiry, scoped: true });
  t.equal(core.methodAllowed(scopedLimited, 'eth_call'), true);
  t.equal(core.methodAllowed(scopedLimited, 'eth_sendRawTransaction'), false);
  t.equal(core.methodAllowed(limited, 'eth_sendRawTransaction'), true, 'limits without a scope allow every method');
  t.equal(core.authorize(`Bearer ${b.token}`, RPC, NOW + HOUR), Outcome.Expired, 'the token checks come first');
  t.equal(core.authorize(`Bearer ${b.token}`, '/ext/info', NOW), Outcome.NotGranted);
  t.equal(
    core.admit(b.claims.serial, b.claims.expiry, plain, 1, CLIENT, NOW_MS),
    ADMIT_OK,
    'a grant without limits lets everything through',
  );
  t.equal(core.usage(b.claims.serial), undefined, 'and counts nothing');
  t.throws(() => core.admit(0, NOW + HOUR, 99, 1, CLIENT, NOW_MS), RangeError, 'an unknown grant is a host error');
});

t.test('the bucket: the burst at once, then the rate, a wait to the nanosecond, a batch as its calls', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant([RPC], undefined, ['rate 4/s', 'burst 2']);
  const { claims } = core.issue(grant, NOW, HOUR);
  const admitted = admitRecord();
  const admit = (calls: number, ms: number) => core.admit(claims.serial, claims.expiry, grant, calls, CLIENT, ms, admitted);
  t.equal(admit(1, NOW_MS), ADMIT_OK);
  t.equal(admit(1, NOW_MS), ADMIT_OK);
  t.equal(admit(1, NOW_MS), ADMIT_RATE, 'past the burst');
  t.same(admitted, { waitMs: 250, resetMs: 0 }, 'the next call is due in 250 ms');
  t.equal(admit(1, NOW_MS + 249), ADMIT_RATE);
  t.equal(admitted.waitMs, 1);
  t.equal(admit(1, NOW_MS + 250), ADMIT_OK, 'refilled by one');
  t.equal(admit(3, NOW_MS + 10_000), ADMIT_OVER_BURST, 'more calls than the burst never pass');
  t.equal(admit(2, NOW_MS + 10_000), ADMIT_OK, 'a batch of the burst passes when the bucket is full');
  t.equal(admit(1, NOW_MS + 10_000), ADMIT_RATE);
  t.same(core.usage(claims.serial), { requests: 5, lastUsedMs: NOW_MS + 10_000 }, "calls let through, and the last one's time");
  const other = core.issue(grant, NOW, HOUR).claims;
  t.equal(core.admit(other.serial, other.expiry, grant, 2, CLIENT, NOW_MS + 10_000), ADMIT_OK, 'every token of a grant has its own bucket');
});

t.test('client ranges: IPv4 as IPv4-mapped, IPv6, prefixes; a check of the client alone counts nothing', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant(['/ext/info'], undefined, [`client ${MAPPED}0a000000/104`, 'client 20010db8000000000000000000000000/32']);
  const { claims } = core.issue(grant, NOW, HOUR);
  const admit = (client: Buffer, calls = 0) => core.admit(claims.serial, claims.expiry, grant, calls, client, NOW_MS);
  t.equal(admit(v4(10, 200, 0, 1)), ADMIT_OK);
  t.equal(admit(v4(11, 0, 0, 1)), ADMIT_CLIENT);
  t.equal(admit(Buffer.from('20010db8ffff00000000000000000001', 'hex')), ADMIT_OK);
  t.equal(admit(Buffer.from('20010db9000000000000000000000001', 'hex')), ADMIT_CLIENT);
  t.equal(core.usage(claims.serial), undefined, 'nothing counted yet');
  t.equal(admit(v4(10, 0, 0, 1), 3), ADMIT_OK, 'no rate: any number of calls');
  t.equal(admit(v4(9, 0, 0, 1), 1), ADMIT_CLIENT, 'a refused client is not counted');
  t.same(core.usage(claims.serial), { requests: 3, lastUsedMs: NOW_MS });
});

t.test('limit entries the core refuses, named by their index', async (t) => {
  const core = keyedCore();
  const refused = (limits: string[], code: string, entry?: number) => {
    const error = t.throws(() => core.findGrant([RPC], undefined, limits)) as GrantError;
    t.match(error, { name: 'GrantError', code, entry }, JSON.stringify(limits).slice(0, 60));
  };
  refused([], 'bad-limit', 0);
  refused(['rate 5/s'], 'bad-limit', 1);
  refused(['burst 5'], 'bad-limit', 0);
  refused(['rate 5/d', 'burst 1'], 'bad-limit', 0);
  refused(['rate 5/s', 'burst 1', `client ${MAPPED}0a000001/104`], 'bad-limit', 2);
  refused(
    Array.from({ length: 65 }, (_, i) => `client ${MAPPED}0a0000${i.toString(16).padStart(2, '0')}/128`),
    'too-many-clients',
  );
  t.throws(
    () => core.findGrant([RPC], [''], undefined),
    { code: 'bad-method', entry: 0 },
    'an empty method pattern is refused before it could read as the start of the limits',
  );
  t.equal(core.grantCount, 0, 'nothing refused was added');
});

/** Serials whose slot in the limits table starts at the same place: as assembly/limits.ts hashes them. */
function collidingSerials(count: number): number[] {
  const home = (s: bigint) => ((s * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn) >> 48n;
  const want = home(1n);
  const found = [1];
  for (let s = 2n; found.length < count; s++) if (home(s) === want) found.push(Number(s));
  return found;
}

t.test(
  'the table: 64 tokens that hash alike fit, the 65th is refused until one of theirs expires, however long an older one lives',
  async (t) => {
    const core = keyedCore(22);
    const grant = core.addGrant([RPC], undefined, ['rate 1/h', 'burst 1']);
    const serials = collidingSerials(66);
    // The first lives a year, the 63 after it a minute: the floor never passes the first's
    // page, so only the expiry of each slot's own token can free it.
    const expiry = (i: number) => NOW + (i === 0 ? YEAR : 60);
    serials
      .slice(0, 64)
      .forEach((serial, i) => t.equal(core.admit(serial, expiry(i), grant, 1, CLIENT, NOW_MS), ADMIT_OK, `serial ${serial}`));
    t.equal(core.admit(serials[64], NOW + HOUR, grant, 1, CLIENT, NOW_MS), ADMIT_TABLE_FULL, 'no slot within reach: refused');
    t.equal(
      core.admit(serials[64], NOW + HOUR, grant, 1, CLIENT, NOW_MS + 59_999),
      ADMIT_TABLE_FULL,
      'a millisecond before they expire, still',
    );
    t.same(core.usage(serials[1]), { requests: 1, lastUsedMs: NOW_MS }, 'an expired token keeps its count until its slot is taken');
    t.equal(core.admit(serials[64], NOW + HOUR, grant, 1, CLIENT, NOW_MS + 60_000), ADMIT_OK, 'once they have expired, a slot is taken');
    t.equal(core.admit(serials[65], NOW + HOUR, grant, 1, CLIENT, NOW_MS + 60_000), ADMIT_OK, 'and another');
    t.same(core.usage(serials[64]), { requests: 1, lastUsedMs: NOW_MS + 60_000 }, "afresh: nothing of its last token's");
    t.equal(core.usage(serials[1]), undefined, 'the first expired slot in probe order went to the first new token');
    t.equal(core.usage(serials[2]), undefined, 'the next to the next');
    t.same(core.usage(serials[3]), { requests: 1, lastUsedMs: NOW_MS }, 'the others wait for a claim');
    t.equal(
      core.admit(serials[0], expiry(0), grant, 1, CLIENT, NOW_MS + 60_000),
      ADMIT_RATE,
      'the live token kept its slot and its bucket',
    );
    t.equal(core.floor, 0, 'the floor never moved');
  },
);

t.test(
  'usage of tokens without limits: counted by the check, restored by the owner; a token with no slot is served and counted as a miss',
  async (t) => {
    const core = keyedCore(24);
    const plain = core.addGrant([RPC]);
    const limited = core.addGrant([RPC], undefined, ['rate 1/s', 'burst 1']);
    const serials = collidingSerials(130);
    core.reserveSerials(0, serials[129] + 1, NOW + 2 * HOUR);
    const first = core.issueSerial(serials[64], plain, NOW, HOUR).token;
    // The usage table is apart from the limits table: 64 tokens with limits take none of its slots.
    for (const serial of serials.slice(0, 64)) t.equal(core.admit(serial, NOW + HOUR, limited, 1, CLIENT, NOW_MS), ADMIT_OK);
    t.equal(core.authorize(`Bearer ${first}`, RPC, NOW + 1), Outcome.Valid);
    t.same(core.usage(serials[64]), { requests: 1, lastUsedMs: NOW_MS + 1000 }, 'counted by the check, to the second');
    t.equal(core.restoreUsage(serials[64], NOW + HOUR, plain, 10, NOW_MS - 5000), true);
    t.same(core.usage(serials[64]), { requests: 11, lastUsedMs: NOW_MS + 1000 }, 'restored counts add; the later last use stays');
    t.equal(core.restoreUsage(serials[0], NOW + HOUR, limited, 4, NOW_MS + 9000), true);
    t.same(core.usage(serials[0]), { requests: 5, lastUsedMs: NOW_MS + 9000 }, 'a token with limits: restored in its limits slot');
    t.throws(() => core.restoreUsage(serials[1], NOW + HOUR, 99, 1, NOW_MS), RangeError, 'an unknown grant is a host error');
    // 63 more tokens without limits fill the usage slots within reach; the next finds none.
    for (const serial of serials.slice(65, 128)) t.equal(core.restoreUsage(serial, NOW + HOUR, plain, 1, NOW_MS), true);
    t.equal(core.restoreUsage(serials[128], NOW + HOUR, plain, 1, NOW_MS), false, 'no slot within reach: nothing restored');
    t.equal(core.usageMisses, 0);
    const unplaced = core.issueSerial(serials[129], plain, NOW, HOUR).token;
    t.equal(core.authorize(`Bearer ${unplaced}`, RPC, NOW), Outcome.Valid, 'no usage slot within reach: still valid');
    t.equal(core.usage(serials[129]), undefined, 'not counted');
    t.equal(core.usageMisses, 1, 'but counted as a miss');
  },
);

t.test('usage of tokens without limits: a slot is freed when its own token has expired, however long an older one lives', async (t) => {
  const core = keyedCore(24);
  const plain = core.addGrant([RPC]);
  const serials = collidingSerials(65);
  core.reserveSerials(0, serials[64] + 1, NOW + YEAR);
  const tokens = serials.map((serial, i) => core.issueSerial(serial, plain, NOW, i === 0 ? YEAR : i < 64 ? 60 : HOUR).token);
  for (const token of tokens.slice(0, 64)) t.equal(core.authorize(`Bearer ${token}`, RPC, NOW), Outcome.Valid);
  t.equal(core.authorize(`Bearer ${tokens[64]}`, RPC, NOW + 59), Outcome.Valid, 'no usage slot within reach: still valid');
  t.equal(core.usage(serials[64]), undefined, 'not counted');
  t.equal(core.usageMisses, 1, 'but counted as a miss');
  t.equal(core.authorize(`Bearer ${tokens[64]}`, RPC, NOW + 60), Outcome.Valid);
  t.same(core.usage(serials[64]), { requests: 1, lastUsedMs: NOW_MS + 60_000 }, 'once the 63 have expired, counted in a slot of theirs');
  t.equal(core.usageMisses, 1, 'no more misses');
  t.equal(core.authorize(`Bearer ${tokens[0]}`, RPC, NOW + 60), Outcome.Valid);
  t.same(core.usage(serials[0]), { requests: 2, lastUsedMs: NOW_MS + 60_000 }, 'the live token kept its count');
  t.same(core.usage(serials[2]), { requests: 1, lastUsedMs: NOW_MS }, 'the other expired tokens keep theirs until a claim takes them');
  t.equal(
    core.restoreUsage(serials[1], NOW + 60, plain, 5, NOW_MS),
    false,
    "a restore (at start) takes no other token's slot, even an expired one's",
  );
  t.same(core.usage(serials[2]), { requests: 1, lastUsedMs: NOW_MS }, 'so they stay as they were');
});

t.test(
  'allowedClients and --trusted-proxies hold an IPv4 client by one rule: IPv4 ranges only, never ::/0 or another IPv6 range',
  async (t) => {
    const core = keyedCore();
    for (const { range, holds, not } of CLIENT_RANGES) {
      const entry = clientRange(range);
      t.ok(entry !== null, `${range} is an allowedClients range`);
      const grant = core.addGrant([RPC], undefined, [`client ${entry}`]);
      const proxies = trustedProxies([range]);
      for (const [client, held] of [...holds.map((c) => [c, true] as const), ...not.map((c) => [c, false] as const)]) {
        const bytes = addressBytes(client, new Uint8Array(16));
        t.equal(
          core.admit(0, NOW + HOUR, grant, 0, bytes, NOW_MS),
          held ? ADMIT_OK : ADMIT_CLIENT,
          `allowedClients ${range} ${held ? 'holds' : 'does not hold'} ${client}`,
        );
        t.equal(proxies.has(client), held, `--trusted-proxies ${range} ${held ? 'holds' : 'does not hold'} ${client}`);
      }
    }
  },
);

t.test('readers on several threads share one bucket: together they get the burst, not a burst each', async (t) => {
  const THREADS = 3;
  const BURST = 50;
  const owner = newThreadsCore({ windowLog2: 12, threads: THREADS + 1 });
  owner.setKey(new Uint8Array(32).fill(9));
  const grant = owner.addGrant([RPC], undefined, ['rate 1/h', `burst ${BURST}`]);
  const { claims } = owner.issue(grant, NOW, HOUR);
  const start = new Int32Array(new SharedArrayBuffer(4));
  // Each reader tries 40 calls at one instant: 120 tries, of which exactly the burst may pass.
  const source = `
    import { workerData, parentPort } from 'node:worker_threads';
    const { Core } = await import(workerData.core);
    const core = new Core(workerData.module, { memory: workerData.memory, slot: workerData.slot });
    const start = new Int32Array(workerData.start);
    Atomics.wait(start, 0, 0);
    let admitted = 0;
    for (let i = 0; i < 40; i++) if (core.admit(workerData.serial, workerData.expiry, workerData.grant, 1, workerData.client, workerData.now) === 0) admitted++;
    parentPort.postMessage(admitted);`;
  const results = Array.from(
    { length: THREADS },
    (_, i) =>
      new Promise<number>((resolve, reject) => {
        const worker = new Worker(source, {
          eval: true,
          execArgv: [],
          workerData: {
            core: new URL('../../build/host/core/core.js', import.meta.url).href,
            module: coreThreadsModule(),
            memory: owner.memory,
            slot: i + 1,
            start: start.buffer,
            serial: claims.serial,
            expiry: claims.expiry,
            grant,
            client: CLIENT,
            now: NOW_MS,
          },
        });
        worker.once('message', resolve);
        worker.once('error', reject);
      }),
  );
  // Released together as far as can be: a reader that comes later finds the word set and
  // runs at once, so the count holds however the threads are scheduled.
  await new Promise((resolve) => setTimeout(resolve, 200));
  Atomics.store(start, 0, 1);
  Atomics.notify(start, 0);
  const admitted = await Promise.all(results);
  t.equal(
    admitted.reduce((a, b) => a + b, 0),
    BURST,
    `the readers let through ${admitted.join(' + ')}`,
  );
  t.same(owner.usage(claims.serial), { requests: BURST, lastUsedMs: NOW_MS }, 'and the owner reads their count');
});

/** `count` pairs of serials, each pair hashing to one home slot, the homes 8 apart: no pair's probe reaches another's. */
function pairedSerials(count: number): [number, number][] {
  const byHome = new Map<bigint, number[]>();
  const pairs: [number, number][] = [];
  for (let s = 1n; pairs.length < count; s++) {
    const home = ((s * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn) >> 48n;
    if (home % 8n !== 0n) continue;
    const seen = byHome.get(home) ?? [];
    seen.push(Number(s));
    byHome.set(home, seen);
    if (seen.length === 2) pairs.push([seen[0], seen[1]]);
  }
  return pairs;
}

/** What a reader on its own thread does: at each step, once the other reader is there too, `calls` calls of the step's serial. */
const STEPPING_READER = `
  import { workerData, parentPort } from 'node:worker_threads';
  const { Core } = await import(workerData.core);
  const { me, serials, expiry, grant, client, calls, now } = workerData;
  const core = new Core(workerData.module, { memory: workerData.memory, slot: me + 1 });
  const steps = new Int32Array(workerData.steps);
  let admitted = 0;
  for (let k = 0; k < serials.length; k++) {
    Atomics.store(steps, me, k + 1);
    while (Atomics.load(steps, 1 - me) < k + 1);
    for (let i = 0; i < calls; i++) if (core.admit(serials[k], expiry, grant, 1, client, now) === 0) admitted++;
  }
  parentPort.postMessage(admitted);`;

interface SteppingReader {
  readonly serials: number[];
  readonly expiry: number;
  readonly calls: number;
  readonly nowMs: number;
}

/** Two readers of `owner`'s memory, stepping together through their serials; what each let through. */
function stepTogether(owner: Core, grant: number, readers: [SteppingReader, SteppingReader]): Promise<number[]> {
  const steps = new Int32Array(new SharedArrayBuffer(8));
  return Promise.all(
    readers.map(
      ({ serials, expiry, calls, nowMs }, me) =>
        new Promise<number>((resolve, reject) => {
          const worker = new Worker(STEPPING_READER, {
            eval: true,
            execArgv: [],
            workerData: {
              core: new URL('../../build/host/core/core.js', import.meta.url).href,
              module: coreThreadsModule(),
              memory: owner.memory,
              steps: steps.buffer,
              me,
              serials,
              expiry,
              grant,
              client: CLIENT,
              calls,
              now: nowMs,
            },
          });
          worker.once('message', resolve);
          worker.once('error', reject);
        }),
    ),
  );
}

t.test(
  'readers whose clocks disagree on whether a token has expired keep the table exact: one slot per token, each count its own',
  async (t) => {
    const PAIRS = 1500;
    // Each pair: an old token whose slot is claimed first, expiring at EXPIRY, and a new one
    // whose serial hashes alike. One reader's clock is a millisecond before EXPIRY, the
    // other's at it: to the first the old token lives, to the second its slot is free.
    const EXPIRY = NOW + 60;
    const pairs = pairedSerials(PAIRS);
    const older = pairs.map(([old]) => old);
    const newer = pairs.map(([, young]) => young);
    const setUp = (limits: string[]) => {
      const owner = newThreadsCore({ windowLog2: 12, threads: 3 });
      owner.setKey(new Uint8Array(32).fill(9));
      const grant = owner.addGrant([RPC], undefined, limits);
      t.same(
        older.filter((serial) => owner.admit(serial, EXPIRY, grant, 1, CLIENT, NOW_MS) !== ADMIT_OK),
        [],
        'every old token has a slot',
      );
      return { owner, grant };
    };

    await t.test("both readers make a new token's first call at once: it gets one slot, so one bucket", async (t) => {
      // Without the claim lock, the early reader takes the empty slot after the old token's
      // and the late one the old token's: two slots, two buckets, two calls let through.
      const { owner, grant } = setUp(['rate 1/h', 'burst 1']);
      const admitted = await stepTogether(owner, grant, [
        { serials: newer, expiry: NOW + HOUR, calls: 1, nowMs: EXPIRY * 1000 - 1 },
        { serials: newer, expiry: NOW + HOUR, calls: 1, nowMs: EXPIRY * 1000 },
      ]);
      t.equal(admitted[0] + admitted[1], PAIRS, `a burst of 1 each: ${admitted.join(' + ')} let through`);
      const counts = newer.map((serial) => owner.usage(serial)?.requests);
      t.same(
        counts.filter((c) => c !== 1),
        [],
        'each new token counted once, in one slot',
      );
    });

    await t.test('calls of the old token go on while the other reader takes its slot for the new one: none is counted there', async (t) => {
      // Without the pins, a call of the old token that found its slot just before the claim
      // reset it adds its count to the new token's.
      const { owner, grant } = setUp([`client ${MAPPED}00000000/96`]);
      const admitted = await stepTogether(owner, grant, [
        { serials: older, expiry: EXPIRY, calls: 8, nowMs: EXPIRY * 1000 - 1 },
        { serials: newer, expiry: NOW + HOUR, calls: 1, nowMs: EXPIRY * 1000 },
      ]);
      t.same(admitted, [8 * PAIRS, PAIRS], 'no rate: every call let through');
      const counts = newer.map((serial) => owner.usage(serial)?.requests);
      t.same(
        counts.filter((c) => c !== 1),
        [],
        'each new token counts its own call alone',
      );
    });
  },
);
