// The ends of rotated tokens (auth.rotateToken). A rotation's new token carries, in its
// inventory entry, the old token's serial and the time its overlap ends; that entry is
// durable (the journal; etcd) before the rotation answers, and every member that holds
// it (the node; each gateway of a fleet, by its watch) keeps the end here. When the end
// is due, the core refuses the old token at once, on this member's own clock, and the
// end is then recorded as a revocation (the state file; a revoked/ key, which a Go
// follower applies too), kept until the old token's expiry, which may come after the
// new token's entry is gone. A write that fails is tried again each second: the core
// refuses the old token meanwhile all the same, and the entry stays to redo it after a
// restart, when an end already due is applied as the inventory is read.
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { InventoryEntry } from './ledger.js';

/** How often due ends are looked for at most, ms: a clock that jumps (or a test's) is followed within it, and a failed write retried. */
const LOOK_MS = 1000;

/** What a member needs to end a token: refuse it now, record the revocation durably, and know whether it is recorded. */
export interface Ender {
  /** Makes the core refuse `serial` at once (idempotent). */
  refuse(serial: number): void;
  /** Records the revocation of `serial`, kept until `expiry`, where the backend keeps revocations; rejects when it cannot. */
  record(serial: number, expiry: number): Promise<void>;
  /** Whether the revocation of `serial` is recorded. */
  recorded(serial: number): boolean;
}

interface Pending {
  readonly endsAt: number;
  readonly expiry: number;
}

export class RotationEnds {
  /** By the old token's serial: what is still to be recorded. */
  private readonly pending = new Map<number, Pending>();
  /** By the old token's serial: its successor and when the old one ends, while the successor's entry is held. */
  private readonly successors = new Map<number, { readonly to: number; readonly endsAt: number }>();
  /** By the new token's serial: the old one's. */
  private readonly predecessors = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private failing = false;
  private closed = false;

  constructor(
    private readonly ender: Ender,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Holds the end an entry carries, if any (a rotation's new token); one already due is applied now. */
  add(entry: InventoryEntry): void {
    const r = entry.rotation;
    if (r === undefined) return;
    this.successors.set(r.from, { to: entry.serial, endsAt: r.endsAt });
    this.predecessors.set(entry.serial, r.from);
    if (r.fromExpiry > unixSeconds(this.clock) && !this.ender.recorded(r.from)) {
      this.pending.set(r.from, { endsAt: r.endsAt, expiry: r.fromExpiry });
      this.look();
    }
  }

  /** Forgets the link of an entry no longer held (expired, of an earlier password); a pending end stays until recorded. */
  forget(serial: number): void {
    const from = this.predecessors.get(serial);
    if (from === undefined) return;
    this.predecessors.delete(serial);
    this.successors.delete(from);
  }

  /** The token that replaced `serial`, and when `serial` ends (Unix seconds), while the successor is held. */
  successor(serial: number): { readonly to: number; readonly endsAt: number } | undefined {
    return this.successors.get(serial);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  /** Applies what is due now, then waits for the next end (at most LOOK_MS). */
  private look(): void {
    if (this.closed || this.running) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.running = true;
    void this.applyDue().finally(() => {
      this.running = false;
      if (this.closed || this.pending.size === 0) return;
      let next = Infinity;
      for (const p of this.pending.values()) next = Math.min(next, p.endsAt * 1000);
      const wait = this.failing ? LOOK_MS : Math.min(LOOK_MS, Math.max(0, next - this.clock()));
      this.timer = setTimeout(() => this.look(), wait).unref();
    });
  }

  private async applyDue(): Promise<void> {
    const now = unixSeconds(this.clock);
    let failed = false;
    for (const [serial, p] of [...this.pending]) {
      if (p.endsAt > now) continue;
      this.ender.refuse(serial);
      if (p.expiry <= now || this.ender.recorded(serial)) {
        this.pending.delete(serial);
        continue;
      }
      try {
        await this.ender.record(serial, p.expiry);
        this.pending.delete(serial);
        this.log.info("a rotated token's overlap ended: it is revoked", { serial });
      } catch (error) {
        // Refused by the core already; recorded on a later look, or after a restart from the entry.
        if (!this.failing)
          this.log.warn('cannot record the end of a rotated token yet; retrying each second', { serial, ...errorFields(error) });
        failed = true;
      }
    }
    this.failing = failed;
  }
}
