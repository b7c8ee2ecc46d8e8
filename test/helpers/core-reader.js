// @ts-check
// A reader thread for test/unit/core-threads.test.ts: it attaches to the owner's shared
// memory with a slot of its own and checks tokens in a tight loop while the owner, on the
// main thread, changes the state. Before each check it reads what the owner has signalled
// as done (an Atomics store made after the core's call returned), and it holds every
// outcome to what those signals allow. It reports back when the owner says stop.
//
// Plain JavaScript, so that a worker starts without the test runner's TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import { Core } from '../../build/host/core/core.js';
import { Outcome } from '../../build/host/core/abi.js';

/** Words of the control array (an Int32Array over a SharedArrayBuffer). */
export const STAGE = 0;
export const STOP = 1;
/** revocations: how many of `revocable` the owner has revoked, in order. */
export const REVOKED = 2;
/** revocations: 1 once the owner has bumped the generation. */
export const BUMPED = 3;
/** revocations: how many fresh tokens are published; sweeps: how many revoked ones. */
export const PUBLISHED = 4;
/** keys: 1 while the owner is setting a key. */
export const CHANGING = 5;
/** Per reader, at PROGRESS + its slot: the last stage in which it finished a pass. */
export const PROGRESS = 8;
export const CONTROL_WORDS = 64;
/** Published tokens sit one after another in `published`, this many bytes each. */
export const TOKEN_BYTES = 76;
export const PATH = '/ext/info';

const { Valid, BadSignature, Revoked, EarlierGeneration, NotGranted } = Outcome;

/**
 * @param {import('./core-reader.d.ts').ReaderData} data
 * @returns {import('./core-reader.d.ts').ReaderReport}
 */
function run(data) {
  const core = new Core(data.module, { memory: data.memory, slot: data.slot });
  const control = new Int32Array(data.control);
  const publishedBytes = new Uint8Array(data.published);
  /** @type {import('./core-reader.d.ts').ReaderReport} */
  const report = { passes: 0, counts: {}, violations: [] };
  /** @param {string} what @param {number} outcome @param {number[]} allowed */
  const expect = (what, outcome, allowed) => {
    report.counts[Outcome[outcome]] = (report.counts[Outcome[outcome]] ?? 0) + 1;
    if (!allowed.includes(outcome) && report.violations.length < 20) {
      report.violations.push(`${what}: ${Outcome[outcome]}, not ${allowed.map((o) => Outcome[o]).join(' or ')}`);
    }
  };
  /** @param {string | undefined} token */
  const bearer = (token) => `Bearer ${token}`;
  /** @type {string[]} */
  const published = [];
  const readPublished = () => {
    const count = Atomics.load(control, PUBLISHED);
    for (let k = published.length; k < count; k++) {
      published.push(bearer(String.fromCharCode(...publishedBytes.subarray(k * TOKEN_BYTES, (k + 1) * TOKEN_BYTES))));
    }
  };

  const passes = {
    revocations: () => {
      const revocable = (data.revocable ?? []).map(bearer);
      const [kept, elsewhere, forged] = [data.kept, data.elsewhere, data.forged].map(bearer);
      return () => {
        for (let i = 0; i < revocable.length; i++) {
          const revoked = Atomics.load(control, REVOKED);
          const bumped = Atomics.load(control, BUMPED);
          expect(
            `token ${i} after ${revoked} revocations${bumped ? ' and the bump' : ''}`,
            core.authorize(revocable[i], PATH, data.now),
            bumped ? [EarlierGeneration] : i < revoked ? [Revoked, EarlierGeneration] : [Valid, Revoked, EarlierGeneration],
          );
        }
        let bumped = Atomics.load(control, BUMPED);
        expect('the kept token', core.authorize(kept, PATH, data.now), bumped ? [EarlierGeneration] : [Valid, EarlierGeneration]);
        bumped = Atomics.load(control, BUMPED);
        expect(
          'the token for another path',
          core.authorize(elsewhere, PATH, data.now),
          bumped ? [EarlierGeneration] : [NotGranted, EarlierGeneration],
        );
        expect('the forged token', core.authorize(forged, PATH, data.now), [BadSignature]);
        // Each issued, for a grant added, after the reader started.
        readPublished();
        for (let k = 0; k < published.length; k++) {
          bumped = Atomics.load(control, BUMPED);
          expect(
            `fresh token ${k}`,
            core.authorize(published[k], PATH, data.now),
            bumped ? [EarlierGeneration] : [Valid, EarlierGeneration],
          );
        }
        return true;
      };
    },
    keys: () => {
      const [underA, underB] = [data.underA, data.underB].map(bearer);
      return () => {
        const changingBefore = Atomics.load(control, CHANGING);
        const stage = Atomics.load(control, STAGE);
        const a = core.authorize(underA, PATH, data.now);
        const b = core.authorize(underB, PATH, data.now);
        // Checked wholly between two key changes: under key A in odd stages, B in even ones.
        const stable = changingBefore === 0 && Atomics.load(control, CHANGING) === 0 && Atomics.load(control, STAGE) === stage;
        const keyA = stage % 2 === 1;
        expect(`the token of key A in stage ${stage}`, a, stable ? [keyA ? Valid : BadSignature] : [Valid, BadSignature]);
        expect(`the token of key B in stage ${stage}`, b, stable ? [keyA ? BadSignature : Valid] : [Valid, BadSignature]);
        return stable;
      };
    },
    sweeps: () => {
      const clocks = new Float64Array(data.clocks ?? new SharedArrayBuffer(0));
      return () => {
        readPublished();
        // Each at the clock of its page, before its expiry: a thread whose clock lags the
        // owner's while the owner sweeps that page and reuses its bits.
        for (let k = 0; k < published.length; k++) {
          expect(`revoked token ${k}`, core.authorize(published[k], PATH, clocks[k]), [Revoked]);
        }
        for (let r = 0; r < 64; r++) {
          for (let k = Math.max(0, published.length - 8); k < published.length; k++) {
            expect(`revoked token ${k}`, core.authorize(published[k], PATH, clocks[k]), [Revoked]);
          }
        }
        return true;
      };
    },
  };

  const pass = passes[data.mode]();
  while (Atomics.load(control, STOP) === 0) {
    const stage = Atomics.load(control, STAGE);
    if (!pass()) continue;
    report.passes++;
    Atomics.store(control, PROGRESS + data.slot, stage);
    Atomics.notify(control, PROGRESS + data.slot);
  }
  core.detach();
  return report;
}

if (parentPort) parentPort.postMessage(run(/** @type {import('./core-reader.d.ts').ReaderData} */ (workerData)));
