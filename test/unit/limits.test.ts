// Per-token limits in the core (assembly/limits.ts), through the Core class: a grant's
// limit entries, the Limited outcome, admit's bucket and client ranges, usage, the bounded
// table, and one bucket shared by readers on several threads.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { ADMIT_CLIENT, ADMIT_OK, ADMIT_OVER_BURST, ADMIT_RATE, ADMIT_TABLE_FULL, Core, GrantError, Outcome } from '../../build/host/core/core.js';
import { coreModule, coreThreadsModule, newThreadsCore } from '../../build/host/core/module.js';

const NOW = 1_700_000_000;
const NOW_MS = NOW * 1000;
const HOUR = 3600;
const RPC = '/ext/bc/C/rpc';
const MAPPED = '00000000000000000000ffff';
const v4 = (a: number, b: number, c: number, d: number) => Buffer.from(MAPPED + [a, b, c, d].map((x) => x.toString(16).padStart(2, '0')).join(''), 'hex');
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
  t.equal(core.authorize(`Bearer ${b.token}`, RPC, NOW), Outcome.Limited);
  t.equal(core.limitedSerial, b.claims.serial);
  t.equal(core.scopedGrant, limited);
  t.equal(core.limitedScoped, false, 'no method scope to check');
  t.equal(core.verify(c.token, RPC, NOW), Outcome.Limited, 'limits and a method scope: Limited, the scope still to check');
  t.equal(core.limitedScoped, true);
  t.equal(core.limitedSerial, c.claims.serial);
  t.equal(core.scopedGrant, scopedLimited);
  t.equal(core.methodAllowed(scopedLimited, 'eth_call'), true);
  t.equal(core.methodAllowed(scopedLimited, 'eth_sendRawTransaction'), false);
  t.equal(core.methodAllowed(limited, 'eth_sendRawTransaction'), true, 'limits without a scope allow every method');
  t.equal(core.authorize(`Bearer ${b.token}`, RPC, NOW + HOUR), Outcome.Expired, 'the token checks come first');
  t.equal(core.authorize(`Bearer ${b.token}`, '/ext/info', NOW), Outcome.NotGranted);
  t.equal(core.admit(b.claims.serial, plain, 1, CLIENT, NOW_MS), ADMIT_OK, 'a grant without limits lets everything through');
  t.equal(core.usage(b.claims.serial), undefined, 'and counts nothing');
  t.throws(() => core.admit(0, 99, 1, CLIENT, NOW_MS), RangeError, 'an unknown grant is a host error');
});

t.test('the bucket: the burst at once, then the rate, a wait to the nanosecond, a batch as its calls', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant([RPC], undefined, ['rate 4/s', 'burst 2']);
  const { claims } = core.issue(grant, NOW, HOUR);
  const admit = (calls: number, ms: number) => core.admit(claims.serial, grant, calls, CLIENT, ms);
  t.equal(admit(1, NOW_MS), ADMIT_OK);
  t.equal(admit(1, NOW_MS), ADMIT_OK);
  t.equal(admit(1, NOW_MS), ADMIT_RATE, 'past the burst');
  t.equal(core.admitWait, 250, 'the next call is due in 250 ms');
  t.equal(admit(1, NOW_MS + 249), ADMIT_RATE);
  t.equal(core.admitWait, 1);
  t.equal(admit(1, NOW_MS + 250), ADMIT_OK, 'refilled by one');
  t.equal(admit(3, NOW_MS + 10_000), ADMIT_OVER_BURST, 'more calls than the burst never pass');
  t.equal(admit(2, NOW_MS + 10_000), ADMIT_OK, 'a batch of the burst passes when the bucket is full');
  t.equal(admit(1, NOW_MS + 10_000), ADMIT_RATE);
  t.same(core.usage(claims.serial), { requests: 5, lastUsedMs: NOW_MS + 10_000 }, 'calls let through, and the last one\'s time');
  const other = core.issue(grant, NOW, HOUR).claims;
  t.equal(core.admit(other.serial, grant, 2, CLIENT, NOW_MS + 10_000), ADMIT_OK, 'every token of a grant has its own bucket');
});

t.test('client ranges: IPv4 as IPv4-mapped, IPv6, prefixes; a check of the client alone counts nothing', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant(['/ext/info'], undefined, [`client ${MAPPED}0a000000/104`, 'client 20010db8000000000000000000000000/32']);
  const { claims } = core.issue(grant, NOW, HOUR);
  const admit = (client: Buffer, calls = 0) => core.admit(claims.serial, grant, calls, client, NOW_MS);
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
  refused(Array.from({ length: 65 }, (_, i) => `client ${MAPPED}0a0000${i.toString(16).padStart(2, '0')}/128`), 'too-many-clients');
  t.throws(() => core.findGrant([RPC], [''], undefined), { code: 'bad-method', entry: 0 },
    'an empty method pattern is refused before it could read as the start of the limits');
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

t.test('the table: 64 tokens that hash alike fit, the 65th is refused, and a slot whose token has expired is reused', async (t) => {
  const core = keyedCore(22);
  const grant = core.addGrant([RPC], undefined, ['rate 1/s', 'burst 1']);
  const serials = collidingSerials(65);
  for (const serial of serials.slice(0, 64)) t.equal(core.admit(serial, grant, 1, CLIENT, NOW_MS), ADMIT_OK, `serial ${serial}`);
  t.equal(core.admit(serials[64], grant, 1, CLIENT, NOW_MS), ADMIT_TABLE_FULL, 'no slot within reach: refused');
  t.equal(core.admit(serials[0], grant, 1, CLIENT, NOW_MS), ADMIT_RATE, 'the tokens that have a slot keep it');
  // Every one of them expired and swept: the floor passes their serials.
  const floor = serials[63] + 4096;
  core.restoreSerials(floor, floor + 8, NOW + HOUR);
  t.equal(core.admit(serials[64], grant, 1, CLIENT, NOW_MS), ADMIT_OK, 'a slot below the floor is taken');
  t.same(core.usage(serials[64]), { requests: 1, lastUsedMs: NOW_MS }, 'afresh: nothing of its last token\'s');
});

t.test('usage of tokens without limits: counted by the check, restored by the owner; a token with no slot is served and counted as a miss', async (t) => {
  const core = keyedCore(24);
  const plain = core.addGrant([RPC]);
  const limited = core.addGrant([RPC], undefined, ['rate 1/s', 'burst 1']);
  const serials = collidingSerials(130);
  core.reserveSerials(0, serials[129] + 1, NOW + 2 * HOUR);
  const first = core.issueSerial(serials[64], plain, NOW, HOUR).token;
  // The usage table is apart from the limits table: 64 tokens with limits take none of its slots.
  for (const serial of serials.slice(0, 64)) t.equal(core.admit(serial, limited, 1, CLIENT, NOW_MS), ADMIT_OK);
  t.equal(core.authorize(`Bearer ${first}`, RPC, NOW + 1), Outcome.Valid);
  t.same(core.usage(serials[64]), { requests: 1, lastUsedMs: NOW_MS + 1000 }, 'counted by the check, to the second');
  t.equal(core.restoreUsage(serials[64], plain, 10, NOW_MS - 5000), true);
  t.same(core.usage(serials[64]), { requests: 11, lastUsedMs: NOW_MS + 1000 }, 'restored counts add; the later last use stays');
  t.equal(core.restoreUsage(serials[0], limited, 4, NOW_MS + 9000), true);
  t.same(core.usage(serials[0]), { requests: 5, lastUsedMs: NOW_MS + 9000 }, 'a token with limits: restored in its limits slot');
  t.throws(() => core.restoreUsage(serials[1], 99, 1, NOW_MS), RangeError, 'an unknown grant is a host error');
  // 63 more tokens without limits fill the usage slots within reach; the next finds none.
  for (const serial of serials.slice(65, 128)) t.equal(core.restoreUsage(serial, plain, 1, NOW_MS), true);
  t.equal(core.restoreUsage(serials[128], plain, 1, NOW_MS), false, 'no slot within reach: nothing restored');
  t.equal(core.usageMisses, 0);
  const unplaced = core.issueSerial(serials[129], plain, NOW, HOUR).token;
  t.equal(core.authorize(`Bearer ${unplaced}`, RPC, NOW), Outcome.Valid, 'no usage slot within reach: still valid');
  t.equal(core.usage(serials[129]), undefined, 'not counted');
  t.equal(core.usageMisses, 1, 'but counted as a miss');
});

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
    for (let i = 0; i < 40; i++) if (core.admit(workerData.serial, workerData.grant, 1, workerData.client, workerData.now) === 0) admitted++;
    parentPort.postMessage(admitted);`;
  const results = Array.from({ length: THREADS }, (_, i) => new Promise<number>((resolve, reject) => {
    const worker = new Worker(source, {
      eval: true, execArgv: [],
      workerData: {
        core: new URL('../../build/host/core/core.js', import.meta.url).href, module: coreThreadsModule(), memory: owner.memory,
        slot: i + 1, start: start.buffer, serial: claims.serial, grant, client: CLIENT, now: NOW_MS,
      },
    });
    worker.once('message', resolve);
    worker.once('error', reject);
  }));
  // Released together as far as can be: a reader that comes later finds the word set and
  // runs at once, so the count holds however the threads are scheduled.
  await new Promise((resolve) => setTimeout(resolve, 200));
  Atomics.store(start, 0, 1);
  Atomics.notify(start, 0);
  const admitted = await Promise.all(results);
  t.equal(admitted.reduce((a, b) => a + b, 0), BURST, `the readers let through ${admitted.join(' + ')}`);
  t.same(owner.usage(claims.serial), { requests: BURST, lastUsedMs: NOW_MS }, 'and the owner reads their count');
});
