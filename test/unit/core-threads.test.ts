// The threads build of the core (build/core-threads.wasm): instances on several threads
// over one shared memory, one owner that changes the state and readers that check tokens.
// Readers run on worker threads (test/helpers/core-reader.ts) while the owner revokes,
// bumps the generation, adds grants, sweeps and sets keys; every change is visible to a
// check that starts after the owner's call returned, and no check ever gives an outcome
// the state does not allow.
import t, { type Test } from 'tap';
import { Worker } from 'node:worker_threads';
import { Core } from '../../build/host/core/core.js';
import { checkRecord, GrantError, Outcome } from '../../build/host/core/abi.js';
import { sharedMemory, sharedMemoryPages } from '../../build/host/core/memory.js';
import { coreModule, coreThreadsModule, newThreadsCore } from '../../build/host/core/module.js';
import {
  BUMPED,
  CHANGING,
  CONTROL_WORDS,
  PATH,
  PROGRESS,
  PUBLISHED,
  REVOKED,
  STAGE,
  STOP,
  TOKEN_BYTES,
  type ReaderData,
  type ReaderReport,
} from '../helpers/core-reader.js';

const NOW = 1_700_000_000;
const HOUR = 3600;
const READERS = 3;
const KEY_A = new Uint8Array(32).fill(0xa1);
const KEY_B = new Uint8Array(32).fill(0xb2);

interface RawExports {
  memory: WebAssembly.Memory;
  init(windowLog2: number): number;
  attach(slot: number): number;
  detach(): number;
  slots(): number;
  tokenBuffer(): number;
  verify(tokenLen: number, pathLen: number, now: bigint): number;
  setGeneration(generation: number): void;
  generation(): number;
}

/** An instance of the threads build over `memory`, straight from the ABI: no init, no attach. */
function rawInstance(memory: WebAssembly.Memory): RawExports {
  const abort = () => {
    throw new Error('core abort');
  };
  return new WebAssembly.Instance(coreThreadsModule(), { env: { memory, abort } }).exports as unknown as RawExports;
}

/** A token with one character of its tag changed. */
function forged(token: string): string {
  const i = 60;
  return token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
}

/** Readers on worker threads, slots 1..count, and the shared words that tell them what the owner did. */
function startReaders(
  t: Test,
  count: number,
  data: Omit<ReaderData, 'slot' | 'control' | 'published' | 'module'> & { published?: SharedArrayBuffer },
) {
  const control = new Int32Array(new SharedArrayBuffer(CONTROL_WORDS * 4));
  for (let slot = 1; slot <= count; slot++) Atomics.store(control, PROGRESS + slot, -1);
  // Also when a test fails halfway: readers loop until told to stop.
  t.teardown(() => Atomics.store(control, STOP, 1));
  const published = data.published ?? new SharedArrayBuffer(256 * TOKEN_BYTES);
  const reports = Array.from(
    { length: count },
    (_, i) =>
      new Promise<ReaderReport>((resolve, reject) => {
        const workerData: ReaderData = {
          ...data,
          module: coreThreadsModule(),
          control: control.buffer as SharedArrayBuffer,
          published,
          slot: i + 1,
        };
        // Plain JavaScript, started without the test runner's loaders.
        const worker = new Worker(new URL('../helpers/core-reader.js', import.meta.url), { workerData, execArgv: [] });
        worker.once('message', resolve);
        worker.once('error', reject);
        worker.once('exit', (code) => reject(new Error(`reader ${i + 1} exited with ${code} before reporting`)));
      }),
  );
  return {
    control,
    published: new Uint8Array(published),
    /** Opens `stage` and waits until every reader has finished a pass that began in it. */
    advance(stage: number): void {
      Atomics.store(control, STAGE, stage);
      for (let slot = 1; slot <= count; slot++) {
        for (let seen = Atomics.load(control, PROGRESS + slot); seen < stage; seen = Atomics.load(control, PROGRESS + slot)) {
          // The timeout only bounds a lost wake-up; the reader notifies after every pass.
          Atomics.wait(control, PROGRESS + slot, seen, 1000);
        }
      }
    },
    async stop(): Promise<ReaderReport[]> {
      Atomics.store(control, STOP, 1);
      return Promise.all(reports);
    },
  };
}

function checkReports(t: Test, reports: ReaderReport[], mustSee: string[]): void {
  reports.forEach((report, i) => {
    t.same(report.violations, [], `reader ${i + 1}: no outcome the state did not allow (${report.passes} passes)`);
  });
  for (const name of mustSee)
    t.ok(
      reports.some((r) => (r.counts[name] ?? 0) > 0),
      `a reader saw ${name}`,
    );
}

t.test('the threads build has the plain ABI plus attach, detach and slots, over an imported shared memory', async (t) => {
  const names = (m: WebAssembly.Module) =>
    WebAssembly.Module.exports(m)
      .map((e) => e.name)
      .sort();
  t.same(names(coreThreadsModule()), [...names(coreModule()), 'attach', 'detach', 'slots'].sort());
  t.same(
    WebAssembly.Module.imports(coreThreadsModule())
      .map((i) => `${i.module}.${i.name}:${i.kind}`)
      .sort(),
    ['env.abort:function', 'env.memory:memory'],
  );
  const owner = newThreadsCore({ windowLog2: 12 });
  t.ok(owner.memory.buffer instanceof SharedArrayBuffer, 'the memory is shared');
});

t.test('a second instance over the memory changes none of it, and an attached reader sees the whole state', async (t) => {
  const owner = newThreadsCore({ windowLog2: 12, threads: 2 });
  owner.setKey(KEY_A);
  owner.generation = 7;
  const grant = owner.addGrant(['/ext/info']);
  const old = owner.issue(grant, NOW, HOUR).token;
  owner.bumpGeneration();
  const revoked = owner.issue(grant, NOW, HOUR).token;
  const kept = owner.issue(owner.addGrant(['/ext/bc/X', '/ext/info']), NOW, HOUR).token;
  t.equal(owner.revoke(revoked, NOW).outcome, Outcome.Valid);
  t.equal(owner.authorize(`Bearer ${kept}`, PATH, NOW), Outcome.Valid, 'the owner checks a token, filling its tag cache');

  const before = new Uint8Array(owner.memory.buffer).slice();
  rawInstance(owner.memory);
  t.ok(Buffer.compare(before, new Uint8Array(owner.memory.buffer)) === 0, 'instantiating again writes no byte of the shared memory');

  const reader = new Core(coreThreadsModule(), { memory: owner.memory, slot: 1 });
  t.equal(reader.generation, 8);
  t.equal(reader.grantCount, 2);
  t.equal(reader.nextSerial, 3);
  t.equal(reader.verify(revoked, PATH, NOW), Outcome.Revoked);
  t.equal(reader.verify(old, PATH, NOW), Outcome.EarlierGeneration);
  t.equal(reader.verify(kept, '/ext/bc/X', NOW), Outcome.Valid);
  t.equal(reader.verify(kept, '/ext/health', NOW), Outcome.NotGranted);
  t.equal(reader.verify(forged(kept), PATH, NOW), Outcome.BadSignature);
  t.equal(owner.authorize(`Bearer ${kept}`, PATH, NOW), Outcome.Valid, 'the owner still checks tokens after the reader attached');
  const later = owner.issue(grant, NOW, HOUR).token;
  t.equal(reader.authorize(`Bearer ${later}`, PATH, NOW), Outcome.Valid, 'a token issued after the reader attached');
  t.equal(owner.revoke(later, NOW).outcome, Outcome.Valid);
  t.equal(reader.authorize(`Bearer ${later}`, PATH, NOW), Outcome.Revoked, 'and its revocation');
});

t.test('a scoped grant added by the owner reaches an attached reader whole: Scoped, its grant id, its methods', async (t) => {
  const owner = newThreadsCore({ windowLog2: 12, threads: 2 });
  owner.setKey(KEY_A);
  const before = owner.addGrant([PATH], ['eth_*', 'net_version']);
  const scoped = owner.issue(before, NOW, HOUR).token;
  const reader = new Core(coreThreadsModule(), { memory: owner.memory, slot: 1 });
  const checked = checkRecord();
  t.equal(reader.verify(scoped, PATH, NOW, checked), Outcome.Scoped, 'a grant added before the reader attached');
  t.equal(checked.grant, before);
  t.equal(reader.methodAllowed(before, 'eth_call'), true);
  t.equal(reader.methodAllowed(before, 'net_version'), true);
  t.equal(reader.methodAllowed(before, 'avax.getHeight'), false);
  // Added after: the reader finds the new grant's methods once the owner's call returned.
  const after = owner.addGrant([PATH], ['avax.*']);
  const plain = owner.addGrant([PATH]);
  const later = owner.issue(after, NOW, HOUR).token;
  t.equal(reader.authorize(`Bearer ${later}`, PATH, NOW, checked), Outcome.Scoped);
  t.equal(checked.grant, after);
  t.equal(reader.methodAllowed(after, 'avax.getHeight'), true);
  t.equal(reader.methodAllowed(after, 'eth_call'), false);
  t.equal(reader.methodAllowed(plain, 'eth_call'), true, 'a grant without scope allows every method');
  t.equal(reader.verify(owner.issue(plain, NOW, HOUR).token, PATH, NOW), Outcome.Valid);
  t.throws(() => reader.methodAllowed(plain + 1, 'eth_call'), RangeError, 'a grant not yet published is unknown');
  const ownerChecked = checkRecord();
  t.equal(owner.authorize(`Bearer ${scoped}`, PATH, NOW, ownerChecked), Outcome.Scoped);
  t.equal(ownerChecked.grant, before);
  t.equal(checked.grant, after, "the owner's check leaves the reader's record as it was");
});

t.test('instances attach in turn: one owner, one instance per slot, and nobody but the owner changes the state', async (t) => {
  const memory = sharedMemory(12, 3);
  t.throws(() => new Core(coreThreadsModule(), { memory, slot: 1 }), /no core set up yet/, 'nothing to attach to before the owner');
  const owner = new Core(coreThreadsModule(), { memory, windowLog2: 12 });
  t.equal(owner.slots, 3);
  t.throws(() => new Core(coreThreadsModule(), { memory, windowLog2: 12 }), /set up already/, 'a second owner');
  t.throws(() => new Core(coreThreadsModule(), { memory, slot: 0 }), /no slot 0; this memory has slots 1 to 2/);
  t.throws(() => new Core(coreThreadsModule(), { memory, slot: 3 }), /no slot 3/);
  const reader = new Core(coreThreadsModule(), { memory, slot: 1 });
  t.throws(() => new Core(coreThreadsModule(), { memory, slot: 1 }), /slot 1 is taken/);
  t.throws(() => new Core(coreModule(), { memory }), /need the threads build/, 'core.wasm does not share');
  t.throws(() => new Core(coreThreadsModule(), { slot: 1 }), /needs the memory of its owner/);

  owner.setKey(KEY_A);
  const grant = owner.addGrant(['*']);
  const { token } = owner.issue(grant, NOW, HOUR);
  for (const [name, change] of Object.entries({
    setKey: () => reader.setKey(KEY_B),
    generation: () => {
      reader.generation = 3;
    },
    bumpGeneration: () => reader.bumpGeneration(),
    addGrant: () => reader.addGrant(['/x']),
    issue: () => reader.issue(grant, NOW, HOUR),
    revoke: () => reader.revoke(token, NOW),
    revokeSerial: () => reader.revokeSerial(0),
    restoreSerials: () => reader.restoreSerials(0, 1, NOW),
    sweep: () => reader.sweep(NOW),
  })) {
    t.throws(change, /only its owner manages the state/, `a reader cannot ${name}`);
  }
  t.equal(reader.verify(token, '/ext/info', NOW), Outcome.Valid, 'nothing changed');
  t.equal(owner.generation, 0);

  // Below the wrapper, the core refuses the same: an instance without a slot traps on its
  // first buffer access, and only the owner's instance may change the state.
  const raw = rawInstance(memory);
  t.throws(() => raw.verify(0, 1, 0n), WebAssembly.RuntimeError, "no slot: a check traps instead of using another instance's buffers");
  t.throws(() => raw.setGeneration(5), /core abort/, 'no slot: a change aborts');
  t.equal(raw.attach(2), 0);
  t.throws(() => raw.setGeneration(5), /core abort/, 'a reader: a change aborts');
  t.equal(raw.generation(), 0);
  t.equal(raw.init(12), -1, 'a reader cannot set the memory up again');
  t.equal(raw.attach(1), -1, 'an instance holds one slot');

  reader.detach();
  t.throws(() => reader.verify(token, '/ext/info', NOW), /detached from its slot/, 'a detached Core is done');
  const next = new Core(coreThreadsModule(), { memory, slot: 1 });
  t.equal(next.verify(token, '/ext/info', NOW), Outcome.Valid, 'a detached slot is free for another instance');
  t.equal(raw.detach(), 0);
  t.equal(raw.detach(), -1);
});

t.test('sharedMemoryPages makes room for the state and exactly the slots asked for', async (t) => {
  for (const [windowLog2, threads] of [
    [12, 1],
    [12, 4],
    [16, 64],
    [22, 3],
    [22, 17],
  ]) {
    const pages = sharedMemoryPages(windowLog2, threads);
    const owner = new Core(coreThreadsModule(), { windowLog2, threads });
    t.equal(owner.memory.buffer.byteLength, pages * 65536);
    t.ok(owner.slots >= threads, `windowLog2 ${windowLog2}, ${threads} threads: ${pages} pages hold ${owner.slots} slots`);
    if (threads > 1) new Core(coreThreadsModule(), { memory: owner.memory, slot: threads - 1 });
    const smaller = new WebAssembly.Memory({ initial: pages - 1, maximum: pages - 1, shared: true });
    if (threads === 1) {
      t.throws(
        () => new Core(coreThreadsModule(), { memory: smaller, windowLog2 }),
        /fewer than sharedMemoryPages/,
        'a page less holds no state',
      );
    } else {
      t.ok(new Core(coreThreadsModule(), { memory: smaller, windowLog2 }).slots < threads, 'a page less holds a slot less');
    }
  }
  t.equal(sharedMemoryPages(), 411, 'the default window with one thread: about 25.7 MiB (4 MiB each of it the limits and usage tables)');
  t.throws(() => sharedMemoryPages(11), RangeError);
  t.throws(() => sharedMemoryPages(22, 0), RangeError);
  t.throws(() => sharedMemoryPages(22, 30_000), /2 GiB/);
});

t.test("the grant lists fill their area without growing the memory or reaching a reader's slot", async (t) => {
  const owner = newThreadsCore({ windowLog2: 12, threads: 2 });
  const reader = new Core(coreThreadsModule(), { memory: owner.memory, slot: 1 });
  owner.setKey(KEY_A);
  const { token } = owner.issue(owner.addGrant(['/ext/info']), NOW, HOUR);
  t.equal(reader.authorize(`Bearer ${token}`, PATH, NOW), Outcome.Valid);
  const size = owner.memory.buffer.byteLength;
  // Lists just under the io buffer's 64 KiB, until the 16 MiB of grant lists are full.
  const big = (i: number) => Array.from({ length: 63 }, (_, j) => `/ext/${String(i).padStart(4, '0')}/${j}/${'x'.repeat(1000)}`);
  let added = 0;
  let error: unknown;
  try {
    for (; added < 1000; added++) owner.addGrant(big(added));
  } catch (e) {
    error = e;
  }
  t.ok(error instanceof GrantError && error.code === 'table-full', `table full after ${added} lists`);
  t.ok(added > 250, 'the whole 16 MiB was used');
  t.equal(owner.memory.buffer.byteLength, size, 'the memory did not grow');
  t.equal(reader.authorize(`Bearer ${token}`, PATH, NOW), Outcome.Valid, 'the reader still checks tokens');
  t.equal(
    reader.authorize(
      `Bearer ${owner.issue(added, NOW, HOUR).token}`,
      `/ext/${String(added - 1).padStart(4, '0')}/62/${'x'.repeat(1000)}`,
      NOW,
    ),
    Outcome.Valid,
    'and the last list grants its paths',
  );
});

t.test('readers on other threads never see a revoked token as valid once revoke returned, nor any wrong outcome', async (t) => {
  const owner = newThreadsCore({ windowLog2: 12, threads: READERS + 1 });
  owner.setKey(KEY_A);
  const grant = owner.addGrant([PATH]);
  const revocable = Array.from({ length: 48 }, () => owner.issue(grant, NOW, HOUR).token);
  const kept = owner.issue(grant, NOW, HOUR).token;
  const elsewhere = owner.issue(owner.addGrant(['/ext/bc/X']), NOW, HOUR).token;
  const readers = startReaders(t, READERS, {
    mode: 'revocations',
    memory: owner.memory,
    now: NOW,
    revocable,
    kept,
    elsewhere,
    forged: forged(kept),
  });
  readers.advance(0);
  let stage = 0;
  let fresh = 0;
  for (let i = 0; i < revocable.length; i++) {
    t.equal(owner.revoke(revocable[i], NOW).outcome, Outcome.Valid, `revoke ${i}`);
    Atomics.store(readers.control, REVOKED, i + 1);
    if (i % 8 === 7) {
      // A grant and a token published while the readers run: both visible at once.
      const token = owner.issue(owner.addGrant([PATH, `/ext/fresh/${fresh}`]), NOW, HOUR).token;
      readers.published.set(Buffer.from(token), fresh * TOKEN_BYTES);
      Atomics.store(readers.control, PUBLISHED, ++fresh);
    }
    readers.advance(++stage);
  }
  owner.bumpGeneration();
  Atomics.store(readers.control, BUMPED, 1);
  readers.advance(++stage);
  checkReports(t, await readers.stop(), ['Valid', 'Revoked', 'NotGranted', 'BadSignature', 'EarlierGeneration']);
});

t.test("a sweep never makes a revoked token valid for a reader whose clock lags the owner's", async (t) => {
  // Two pages of serials: each round fills one, revokes some of it, and sweeps it once it
  // has expired for the owner; the round after next reuses its bits. The readers check
  // the revoked tokens at the clock of their page, the newest most often.
  const owner = newThreadsCore({ windowLog2: 13, threads: READERS + 1 });
  owner.setKey(KEY_A);
  const grant = owner.addGrant([PATH]);
  const rounds = 60;
  const perRound = 8;
  const clocks = new SharedArrayBuffer(rounds * perRound * 8);
  const published = new SharedArrayBuffer(rounds * perRound * TOKEN_BYTES);
  const readers = startReaders(t, READERS, { mode: 'sweeps', memory: owner.memory, now: NOW, published, clocks });
  readers.advance(0);
  let stage = 0;
  let count = 0;
  const revokes = new Set<Outcome>();
  const floors: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const now = NOW + round * 10;
    const page = Array.from({ length: 4096 }, () => owner.issue(grant, now, 5).token);
    for (let k = 0; k < perRound; k++) {
      const token = page[k * 512 + round];
      revokes.add(owner.revoke(token, now).outcome);
      readers.published.set(Buffer.from(token), count * TOKEN_BYTES);
      new Float64Array(clocks)[count++] = now;
    }
    Atomics.store(readers.control, PUBLISHED, count);
    readers.advance(++stage);
    owner.sweep(now + 5);
    floors.push(owner.floor);
    readers.advance(++stage);
  }
  t.same([...revokes], [Outcome.Valid], 'every revocation took');
  t.same(
    floors,
    Array.from({ length: rounds }, (_, round) => (round + 1) * 4096),
    'every round swept its page',
  );
  checkReports(t, await readers.stop(), ['Revoked']);
});

t.test('a key set while readers run reaches every reader, cached tags included', async (t) => {
  const owner = newThreadsCore({ windowLog2: 12, threads: READERS + 1 });
  owner.setKey(KEY_A);
  const grant = owner.addGrant([PATH]);
  const underA = owner.issue(grant, NOW, HOUR).token;
  owner.setKey(KEY_B);
  const underB = owner.issue(grant, NOW, HOUR).token;
  const readers = startReaders(t, READERS, { mode: 'keys', memory: owner.memory, now: NOW, underA, underB });
  readers.advance(0);
  for (let stage = 1; stage <= 40; stage++) {
    Atomics.store(readers.control, CHANGING, 1);
    owner.setKey(stage % 2 === 1 ? KEY_A : KEY_B);
    Atomics.store(readers.control, STAGE, stage);
    Atomics.store(readers.control, CHANGING, 0);
    readers.advance(stage);
  }
  checkReports(t, await readers.stop(), ['Valid', 'BadSignature']);
});
