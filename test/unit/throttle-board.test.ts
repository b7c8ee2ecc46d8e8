// The throttle board: the owner's throttle publishes who must wait, in shared memory, and
// each HTTP thread reads it to refuse a waiting client from its request's head. The board
// may say less than the throttle, never more: a client it refuses is one the throttle
// refuses too. Driven with plain clocks, as the throttle's own tests are; the HTTP side is
// in threads.test.ts.
import t from 'tap';
import fc from 'fast-check';
import { PasswordThrottle, PER_CLIENT } from '../../build/host/service/throttle.js';
import type { PasswordCheck, ThrottleRule } from '../../build/host/service/throttle.js';
import { boardMemory, ThrottleBoard } from '../../build/host/threads/throttle-board.js';
import { SEED } from '../helpers/fuzz.js';

const SMALL_OVERALL: ThrottleRule = [{ burst: 5, interval: 1000 }];

/** A throttle that publishes to a board, and a reader of that board (as an HTTP thread has). */
function published(perClient: ThrottleRule = PER_CLIENT, overall: ThrottleRule = SMALL_OVERALL, maxClients = 10_000) {
  const memory = boardMemory();
  const throttle = new PasswordThrottle(perClient, overall, maxClients, new ThrottleBoard(memory).writer());
  return { throttle, board: new ThrottleBoard(memory) };
}

t.test('a client that must wait is on the board, with the wait the throttle gives; others are not', async (t) => {
  const { throttle, board } = published(PER_CLIENT, [{ burst: 1000, interval: 1 }]);
  for (let i = 0; i < 3; i++) (throttle.begin('192.0.2.7', 0) as PasswordCheck).failed();
  for (const now of [0, 1, 4_000, 9_999]) {
    t.equal(board.retryAfter('192.0.2.7', now), throttle.retryAfter('192.0.2.7', now), `at ${now} ms`);
  }
  t.equal(board.retryAfter('192.0.2.7', 0), 10);
  t.equal(board.retryAfter('192.0.2.7', 10_000), 0, 'until the wait is over');
  t.equal(board.retryAfter('::ffff:192.0.2.7', 0), 10, 'in any spelling of the address');
  t.equal(board.retryAfter('192.0.2.8', 0), 0, 'another client waits for nothing');
  // A check under way counts; the right password then forgives the client, off the board at once.
  const check = throttle.begin('192.0.2.7', 10_000) as PasswordCheck;
  t.equal(throttle.retryAfter('192.0.2.7', 10_000), 10);
  t.equal(board.retryAfter('192.0.2.7', 10_000), 10, 'while the check runs');
  check.succeeded();
  t.equal(throttle.retryAfter('192.0.2.7', 10_000), 0);
  t.equal(board.retryAfter('192.0.2.7', 10_000), 0, 'forgiven');
});

t.test('checks under way count on the board as in the throttle', async (t) => {
  const { throttle, board } = published(PER_CLIENT, [{ burst: 1000, interval: 1 }]);
  const running = [0, 1, 2].map(() => throttle.begin('2001:db8:1:2::1', 0) as PasswordCheck);
  t.equal(throttle.retryAfter('2001:db8:1:2::1', 0), 10);
  t.equal(board.retryAfter('2001:db8:1:2::99', 0), 10, 'the /64, while its three checks run');
  for (const check of running) check.abandoned();
  t.equal(board.retryAfter('2001:db8:1:2::1', 0), 0, 'checks that could not run count for nothing');
});

t.test('everyone waits when the overall allowance is spent', async (t) => {
  const { throttle, board } = published([{ burst: 1000, interval: 1 }], SMALL_OVERALL);
  for (let i = 0; i < 5; i++) (throttle.begin(`10.0.0.${i}`, 0) as PasswordCheck).failed();
  t.equal(throttle.retryAfter('10.9.9.9', 0), 1);
  t.equal(board.retryAfter('10.9.9.9', 0), 1, 'a client never seen');
  t.equal(board.retryAfter('10.9.9.9', 1000), 0);
});

t.test('a client the throttle forgets (its table full) is off the board', async (t) => {
  const { throttle, board } = published(PER_CLIENT, [{ burst: 1000, interval: 1 }], 2);
  for (let i = 0; i < 3; i++) (throttle.begin('192.0.2.1', 0) as PasswordCheck).failed();
  t.equal(board.retryAfter('192.0.2.1', 0), 10);
  (throttle.begin('192.0.2.2', 0) as PasswordCheck).failed();
  (throttle.begin('192.0.2.3', 0) as PasswordCheck).failed();
  t.equal(throttle.retryAfter('192.0.2.1', 0), 0, 'forgotten by the throttle');
  t.equal(board.retryAfter('192.0.2.1', 0), 0, 'and by the board');
  // Forgotten while its checks run: when they fail, it stays off.
  const running = [0, 1, 2].map(() => throttle.begin('192.0.2.9', 1_000) as PasswordCheck);
  (throttle.begin('192.0.2.2', 1_000) as PasswordCheck).failed();
  (throttle.begin('192.0.2.3', 1_000) as PasswordCheck).failed();
  for (const check of running) check.failed();
  t.equal(throttle.retryAfter('192.0.2.9', 1_000), 0, 'forgotten by the throttle while its checks ran');
  t.equal(board.retryAfter('192.0.2.9', 1_000), 0, 'not put back on the board when they end');
});

t.test('whatever the calls, the board never makes a client wait longer than the throttle does', async (t) => {
  // Clients from a few /64s and IPv4 addresses; checks begin, end every way, overlap;
  // time moves on; the table is small, so clients are forgotten too.
  const address = fc.constantFrom(
    '192.0.2.1',
    '192.0.2.2',
    '198.51.100.7',
    '2001:db8::1',
    '2001:db8::2',
    '2001:db8:0:1::1',
    '10.0.0.1',
    '10.0.0.2',
  );
  const step = fc.oneof(
    fc.record({ op: fc.constant('begin' as const), address }),
    fc.record({ op: fc.constantFrom('failed' as const, 'succeeded' as const, 'abandoned' as const), index: fc.nat() }),
    fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 40_000 }) }),
  );
  await fc.assert(
    fc.asyncProperty(fc.array(step, { maxLength: 200 }), fc.integer({ min: 2, max: 6 }), async (steps, maxClients) => {
      const { throttle, board } = published(PER_CLIENT, SMALL_OVERALL, maxClients);
      const running: PasswordCheck[] = [];
      let now = 1_800_000_000_000;
      for (const s of steps) {
        if (s.op === 'begin') {
          const check = throttle.begin(s.address, now);
          if (typeof check !== 'number') running.push(check);
        } else if (s.op === 'tick') {
          now += s.ms;
        } else if (running.length > 0) {
          const [check] = running.splice(s.index % running.length, 1);
          check[s.op]();
        }
        for (const a of [
          '192.0.2.1',
          '192.0.2.2',
          '198.51.100.7',
          '2001:db8::1',
          '2001:db8:0:1::1',
          '10.0.0.1',
          '10.0.0.2',
          '203.0.113.1',
        ]) {
          for (const later of [0, 999, 1000, 10_000, 600_000]) {
            const onBoard = board.retryAfter(a, now + later);
            const own = throttle.retryAfter(a, now + later);
            if (onBoard > own) throw new Error(`${a} at +${later} ms: the board says ${onBoard} s, the throttle ${own} s`);
          }
        }
      }
    }),
    { seed: SEED, numRuns: 300 },
  );
  t.pass('the board never said more than the throttle');
});
