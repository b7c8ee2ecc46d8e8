// The core's calls for several issuers over one serial space (a fleet of gateways):
// each reserves blocks and issues from its own, and every core verifies every block.
// Through the Core class (build/host/core/core.ts) over both builds' exports.
import t from 'tap';
import { Core } from '../../build/host/core/core.js';
import { Outcome, RESERVE_EXPIRED } from '../../build/host/core/abi.js';
import { coreModule, coreThreadsModule } from '../../build/host/core/module.js';

const NOW = 1_700_000_000;
const HOUR = 3600;
const KEY = Buffer.alloc(32, 9);
const BLOCK = 4096;

function fleetCore(threads = false): Core {
  const core = threads ? new Core(coreThreadsModule(), { windowLog2: 14 }) : new Core(coreModule(), { windowLog2: 14 });
  core.setKey(KEY);
  core.addGrant(['*']);
  return core;
}

for (const build of ['core.wasm', 'core-threads.wasm']) {
  const threads = build === 'core-threads.wasm';

  t.test(`${build}: a token issued from one issuer's block verifies on a core that holds the reservation`, async (t) => {
    const a = fleetCore(threads);
    const b = fleetCore(threads);
    for (const core of [a, b]) {
      t.equal(core.reserveSerials(0, BLOCK, NOW + 2 * HOUR), 0, "A's block");
      t.equal(core.reserveSerials(BLOCK, 2 * BLOCK, NOW + 2 * HOUR), 0, "B's block");
    }
    const fromB = b.issueSerial(BLOCK, 0, NOW, HOUR);
    t.equal(fromB.claims.serial, BLOCK);
    t.equal(a.verify(fromB.token, '/ext/info', NOW), Outcome.Valid, "A verifies B's token");
    const fromA = a.issueSerial(7, 0, NOW, HOUR);
    t.equal(b.verify(fromA.token, '/ext/info', NOW), Outcome.Valid, "B verifies A's token");
    t.equal(b.revokeSerial(7), 0);
    t.equal(b.verify(fromA.token, '/ext/info', NOW), Outcome.Revoked, 'a revocation applies across blocks');
    t.equal(a.nextSerial, 2 * BLOCK, 'the ceiling is the end of the highest block');
  });

  t.test(`${build}: a core refuses the serials of a block it has not seen, and issuing outside a reservation`, async (t) => {
    const a = fleetCore(threads);
    const b = fleetCore(threads);
    a.reserveSerials(0, BLOCK, NOW + 2 * HOUR);
    b.reserveSerials(0, BLOCK, NOW + 2 * HOUR);
    b.reserveSerials(BLOCK, 2 * BLOCK, NOW + 2 * HOUR);
    const { token } = b.issueSerial(BLOCK + 1, 0, NOW, HOUR);
    t.equal(a.verify(token, '/x', NOW), Outcome.Revoked, 'outside the range A knows: fails closed');
    t.throws(() => a.issueSerial(BLOCK + 5, 0, NOW, HOUR), { name: 'IssueError', code: 'bad-serial' }, 'not reserved');
    t.throws(
      () => a.issueSerial(3, 0, NOW, 3 * HOUR),
      { name: 'IssueError', code: 'bad-serial' },
      "a token that would outlive its block's bound",
    );
    a.revokeSerial(4);
    t.throws(() => a.issueSerial(4, 0, NOW, HOUR), { name: 'IssueError', code: 'bad-serial' }, 'a revoked serial');
    t.throws(() => a.reserveSerials(5, 5, NOW), RangeError, 'an empty block');
    t.throws(() => a.reserveSerials(0, 2 ** 14 + 1, NOW), RangeError, 'past the window');
  });

  t.test(`${build}: blocks expire by their bound, and the floor passes them`, async (t) => {
    const core = fleetCore(threads);
    core.reserveSerials(0, BLOCK, NOW + HOUR);
    core.reserveSerials(BLOCK, 2 * BLOCK, NOW + 3 * HOUR);
    const late = core.issueSerial(BLOCK, 0, NOW, 2 * HOUR);
    core.sweep(NOW + HOUR);
    t.equal(core.floor, BLOCK, 'the first block is past once its bound is');
    t.equal(core.reserveSerials(0, BLOCK, NOW + HOUR), RESERVE_EXPIRED, 'a block below the floor is nothing to keep');
    t.equal(core.verify(late.token, '/x', NOW + HOUR), Outcome.Valid, 'the later block stays');
    // A block reserved after a gap: the gap's pages are bounded too, so the floor can pass them.
    core.reserveSerials(3 * BLOCK, 4 * BLOCK, NOW + 4 * HOUR);
    t.equal(core.nextSerial, 4 * BLOCK);
    core.sweep(NOW + 4 * HOUR);
    t.equal(core.floor, 4 * BLOCK, 'every page swept once past its bound');
  });
}
