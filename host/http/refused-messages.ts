// The WebSocket messages the relay refused inside sessions (a method outside the token's
// scope, past its rate or quota, calls that cannot be read), by reason. Such a refusal is
// no HTTP answer, so api_auth_http_responses_total does not see it; the usage history's
// refusals (service/usage-history.ts) add these. Counted in shared memory that the owner
// makes once per process and hands every HTTP thread, as the session ledger is: a thread's
// end loses none of its counts, a clean stop's last sample included.
import { RESPONSE_REASONS } from '../ops/metric-labels.js';
import type { ResponseReason } from '../ops/metric-labels.js';

/** The shared memory of the counts: one 64-bit word per reason of RESPONSE_REASONS. */
export function refusedMessagesMemory(): SharedArrayBuffer {
  return new SharedArrayBuffer(8 * RESPONSE_REASONS.length);
}

/** The counts over `memory` (refusedMessagesMemory), for every thread to add to and the owner to read. */
export class RefusedMessages {
  private readonly counts: BigInt64Array;

  constructor(memory: SharedArrayBuffer) {
    this.counts = new BigInt64Array(memory);
  }

  /** One message refused for `reason`. */
  count(reason: ResponseReason): void {
    Atomics.add(this.counts, reason, 1n);
  }

  /** The messages refused so far, by reason: those counted at least once. */
  byReason(): Map<string, number> {
    const totals = new Map<string, number>();
    for (let reason = 0; reason < RESPONSE_REASONS.length; reason++) {
      const n = Number(Atomics.load(this.counts, reason));
      if (n > 0) totals.set(RESPONSE_REASONS[reason], n);
    }
    return totals;
  }
}

/** `a` and `b` summed by reason. */
export function addByReason(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): Map<string, number> {
  const sum = new Map(a);
  for (const [reason, n] of b) sum.set(reason, (sum.get(reason) ?? 0) + n);
  return sum;
}
