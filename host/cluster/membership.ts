// A gateway's membership of its fleet: its lease, the fence its gates read, the barrier
// its writes wait at, and the rejoin after a lost lease.
//
// A call that changes state is a linearizable txn at revision R, and returns success only
// once every live member has applied R (its member key says so) or lost its lease (its
// key is gone): the barrier. A member whose lease cannot be renewed stops serving before
// etcd can expire it (the fence, threads/fence.ts), so a writer that stops waiting for it
// never leaves it serving stale.
import { systemTimer } from '../clock.js';
import { EtcdLeaseInvalidError } from 'etcd3';
import type { Lease } from 'etcd3';
import type { Clock } from '../clock.js';
import { FleetError } from '../errors.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import { closeFence, openFence } from '../threads/fence.js';
import type { EtcdConnection } from './etcd.js';
import type { FleetKeys } from './keys.js';
import type { FleetMetrics } from './metrics.js';

export interface MembershipSettings {
  /** Lease TTL, whole seconds. */
  readonly leaseSeconds: number;
  /** The fence this gateway's gates read; written here only. */
  readonly fence: Uint32Array;
  /**
   * How long past the lease's deadline it keeps serving on its last known state while etcd
   * does not answer, whole seconds (--fleet-outage-grace; 0: it stops at the deadline).
   */
  readonly outageGraceSeconds: number;
}

/**
 * The margin taken off the lease on this side: etcd expires a lease TTL after it
 * received the last renewal, which is after it was sent, when this side starts counting.
 */
function leaseMargin(leaseSeconds: number): number {
  return Math.max(500, leaseSeconds * 100);
}

export class Membership {
  /** Every live member's key, and the highest revision of a state change it published. */
  readonly members = new Map<string, number>();
  /** Members that only follow (docs/fleet-keys.md): they never write, so they never tidy. */
  readonly followers = new Set<string>();
  /**
   * Followers that do not enforce a share of each token's limits (an older Go node, which
   * enforces each token's whole rate): left out of G.
   */
  private readonly unshared = new Set<string>();
  /**
   * Called with the number of live members that enforce token limits (every gateway, and
   * the followers that say `"limitShare": true`) whenever it changes: each then takes its
   * share of every token's rate.
   */
  onGateways: ((count: number) => void) | null = null;
  /**
   * Member keys that are not bound to their own lease (no lease, as `etcdctl make-mirror`
   * or a hand-written put leaves them, or another lease than their name says): no member
   * renews them, so the barrier never waits for them. Reported once each (`reported`).
   */
  readonly ignored = new Set<string>();
  private readonly reported = new Set<string>();
  private gateways = 0;
  /** This gateway's member key; '' before its first lease. */
  key = '';
  /** This gateway's lease id, in hex (the end of its member key). */
  leaseId = '';
  /** The highest revision this gateway's watch has applied. */
  applied = 0;
  /** The highest revision of a state change applied (what the member key publishes). */
  stateApplied = 0;
  private published = 0;
  private publishing = false;
  private lease: Lease | undefined;
  /** The lease's id, as etcd gave it. */
  private grant = '';
  /** Local ms deadline of the lease: last successful renewal's send time + TTL - margin. */
  private deadline = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  /** Whether the outage grace has been logged as begun: once per outage. */
  private inGrace = false;
  private waiters: { check(): boolean }[] = [];
  private recovering: Promise<void> | undefined;
  private closed = false;

  /** `rejoin` reads the whole state anew and registers again (Fleet); it is called after a lost lease, until it succeeds. */
  constructor(
    private readonly etcd: EtcdConnection,
    private readonly keys: FleetKeys,
    private readonly settings: MembershipSettings,
    private readonly metrics: FleetMetrics,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly rejoin: () => Promise<void>,
  ) {}

  /** Whether a rejoin is under way. */
  get rejoining(): boolean {
    return this.recovering !== undefined;
  }

  /** The lease's id as etcd gave it ('' before the first lease): what a key bound to the lease is put with. */
  get leaseGrant(): string {
    return this.grant;
  }

  /** Stops serving, and takes a new lease, renewed from now on; the member key is written by register(). */
  async takeLease(): Promise<void> {
    closeFence(this.settings.fence);
    const lease = this.etcd.client.lease(this.settings.leaseSeconds, { autoKeepAlive: false });
    const sent = this.clock();
    const id = await this.etcd.call(() => lease.grant());
    this.lease = lease;
    this.grant = id;
    this.deadline = sent + this.settings.leaseSeconds * 1000 - leaseMargin(this.settings.leaseSeconds);
    this.leaseId = BigInt(id).toString(16);
    this.key = this.keys.member(this.leaseId);
    this.scheduleRenewal();
  }

  /**
   * Writes the member key, as holding `revision`, under the lease, and waits until the
   * watch has passed the key's own revision: a writer that finished its barrier before
   * the key existed may have written after the snapshot the gateway read.
   */
  async register(revision: number): Promise<void> {
    const { key, grant } = this;
    const put = await this.etcd.call((client) =>
      client
        .put(key)
        .value(JSON.stringify({ applied: revision }))
        .lease(grant)
        .exec(),
    );
    this.published = revision;
    await this.appliedAtLeast(Number(put.header.revision));
  }

  /** Serves from now on, until the lease's deadline (moved on by each renewal). */
  serve(): void {
    this.metrics.joined();
    this.inGrace = false;
    openFence(this.settings.fence, this.servesUntil());
  }

  /**
   * Refuses a state change, and a password check (the fleet counts those in etcd), while
   * this gateway's lease is not surely alive: it may not hold the current state, and in the
   * outage grace no change could be confirmed.
   */
  serving(): void {
    if (this.closed || Atomics.load(this.settings.fence, 0) === 0) {
      throw new FleetError('this gateway has lost touch with its fleet (etcd); retry, or use another gateway');
    }
    if (this.clock() >= this.deadline) {
      throw new FleetError(
        this.settings.outageGraceSeconds === 0
          ? 'this gateway has lost touch with its fleet (etcd); retry, or use another gateway'
          : "the fleet's etcd does not answer this gateway: it serves tokens on its last known state for --fleet-outage-grace, " +
              'and takes no change (issue, revoke, password) and checks no password until etcd answers; retry later, or use another gateway',
      );
    }
  }

  /** Until when the gates may serve: the lease's deadline, and the outage grace past it. */
  private servesUntil(): number {
    return this.deadline + this.settings.outageGraceSeconds * 1000;
  }

  /**
   * A member's key as read: the revision it has applied, whether it only follows, and the
   * lease it is bound to (etcd's KeyValue.lease, '0' for none). A key still in etcd with a
   * lease holds a live lease (etcd deletes it with its lease), so only a key whose lease
   * is none, or not the one its name holds, is not a member.
   */
  setMember(key: string, applied: number, follower: boolean, lease: string, limitShare = false): void {
    if (lease === '0' || key !== this.keys.member(BigInt(lease).toString(16))) {
      this.dropMember(key);
      this.ignored.add(key);
      if (!this.reported.has(key)) {
        this.reported.add(key);
        this.log.warn(
          'a fleet member key is not bound to its own lease, so no member keeps it; writes do not wait for it. ' +
            'Delete it: etcdctl del ' +
            key,
          { cluster: this.keys.name, key, lease },
        );
      }
      return;
    }
    this.ignored.delete(key);
    this.members.set(key, applied);
    if (follower) this.followers.add(key);
    else this.followers.delete(key);
    if (follower && !limitShare) this.unshared.add(key);
    else this.unshared.delete(key);
    this.countGateways();
  }

  /** A member's key is gone: its lease ended. */
  dropMember(key: string): void {
    this.ignored.delete(key);
    this.members.delete(key);
    this.followers.delete(key);
    this.unshared.delete(key);
    this.countGateways();
  }

  /** Forgets every member, before the whole state is read again (which counts them anew). */
  clearMembers(): void {
    this.ignored.clear();
    this.members.clear();
    this.followers.clear();
    this.unshared.clear();
  }

  private countGateways(): void {
    const count = this.members.size - this.unshared.size;
    if (count === this.gateways) return;
    this.gateways = count;
    this.onGateways?.(count);
  }

  /** Whether this gateway has the lowest member key of those that write: the one that cleans up for the fleet. */
  get lowest(): boolean {
    for (const key of this.members.keys()) if (key < this.key && !this.followers.has(key)) return false;
    return true;
  }

  /**
   * The watch applied events up to `revision`, the state changes among them up to
   * `stateRevision` (undefined: none): publishes it, and wakes whoever waits for it.
   */
  advanced(revision: number, stateRevision: number | undefined): void {
    if (revision > this.applied) this.applied = revision;
    if (stateRevision !== undefined && stateRevision > this.stateApplied) this.stateApplied = stateRevision;
    this.metrics.applied = this.applied;
    if (stateRevision !== undefined) this.publish();
    this.wake();
  }

  /**
   * Waits until every live member holds revision R: its published revision is at least
   * R, or its key is gone (lease expired or revoked). A member that stopped holds it up
   * for at most its lease's TTL; past twice that, the caller gets an error, not success.
   */
  async barrier(revision: number): Promise<void> {
    const started = systemTimer();
    await this.appliedAtLeast(revision);
    await this.until(
      () => {
        for (const [key, applied] of this.members) if (key !== this.key && applied < revision) return false;
        return true;
      },
      this.settings.leaseSeconds * 2000 + 1000,
      'the change is stored in the fleet, but not every gateway confirmed it in time; ' + 'it holds everywhere within the lease time',
    );
    this.metrics.observeBarrier((systemTimer() - started) / 1000);
  }

  appliedAtLeast(revision: number): Promise<void> {
    return this.until(
      () => this.applied >= revision,
      this.settings.leaseSeconds * 2000,
      "this gateway did not receive the fleet's change in time",
    );
  }

  /** Reads the whole state again (rejoin) under a new lease, and serves once caught up; one at a time. */
  resync(): Promise<void> {
    if (this.recovering !== undefined) return this.recovering;
    closeFence(this.settings.fence);
    this.recovering = (async () => {
      for (let attempt = 0; !this.closed; attempt++) {
        clearTimeout(this.renewTimer);
        const lease = this.lease;
        this.lease = undefined;
        lease?.release();
        try {
          await this.rejoin();
          return;
        } catch (error) {
          this.log.warn('cannot rejoin the fleet yet; retrying', errorFields(error));
          await new Promise((r) => setTimeout(r, Math.min(2000, 200 * (attempt + 1))));
        }
      }
    })().finally(() => {
      this.recovering = undefined;
    });
    return this.recovering;
  }

  /** Stops serving for good (the fleet was reset under this gateway, or it is closing). */
  stop(): void {
    this.closed = true;
    closeFence(this.settings.fence);
    clearTimeout(this.renewTimer);
  }

  /** Stops, and gives the lease back so that writers stop waiting for this gateway at once. */
  async close(): Promise<void> {
    this.stop();
    await this.lease?.revoke().catch(() => undefined);
  }

  /** Tells the fleet which state changes this gateway holds: one write in flight at most, the latest after it. */
  private publish(): void {
    if (this.publishing || this.stateApplied <= this.published || this.lease === undefined) return;
    this.publishing = true;
    const applied = this.stateApplied;
    this.etcd.client
      .put(this.key)
      .value(JSON.stringify({ applied }))
      .lease(this.lease.grant())
      .exec()
      .then(
        () => {
          this.published = applied;
        },
        (error) => this.log.debug('cannot publish the applied revision', errorFields(error)),
      )
      .finally(() => {
        this.publishing = false;
        if (!this.closed) this.publish();
      });
  }

  private wake(): void {
    if (this.waiters.length === 0) return;
    this.waiters = this.waiters.filter((w) => !w.check());
  }

  /** Resolves once `check` holds after some applied event; rejects after `ms`. */
  private until(check: () => boolean, ms: number, why: string): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new FleetError(why));
      }, ms);
      const waiter = {
        check: () => {
          if (!check()) return false;
          clearTimeout(timer);
          resolve();
          return true;
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** Renews the lease every quarter of its TTL (100 ms at least); each success moves the local deadline. */
  private scheduleRenewal(): void {
    if (this.closed) return;
    this.renewTimer = setTimeout(() => void this.renew(), Math.max(100, (this.settings.leaseSeconds * 1000) / 4));
  }

  private async renew(): Promise<void> {
    const lease = this.lease;
    if (lease === undefined || this.closed) return;
    const sent = this.clock();
    let timer: NodeJS.Timeout | undefined;
    try {
      // A keepalive is a stream call, which no deadline bounds: the lease's TTL does.
      await Promise.race([
        lease.keepaliveOnce(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('no answer within the lease time')), this.settings.leaseSeconds * 1000);
        }),
      ]);
      this.deadline = sent + this.settings.leaseSeconds * 1000 - leaseMargin(this.settings.leaseSeconds);
      this.metrics.renewed(this.deadline);
      if (this.recovering === undefined) openFence(this.settings.fence, this.servesUntil());
      if (this.inGrace)
        this.log.info("the fleet's etcd answers again: the outage grace is over, changes are taken", { cluster: this.keys.name });
      this.inGrace = false;
    } catch (error) {
      if (lease !== this.lease || this.closed) return;
      if (error instanceof EtcdLeaseInvalidError) {
        this.inGrace = false;
        this.lost('the fleet lease expired (this gateway was stopped or cut off for longer than the lease)');
        return;
      }
      this.metrics.renewalFailures++;
      const grace = this.settings.outageGraceSeconds;
      this.log.warn(
        grace === 0
          ? 'cannot renew the fleet lease; protected requests get 503 once it runs out'
          : `cannot renew the fleet lease; once it runs out this gateway serves on its last known state for ${grace} s more ` +
              '(--fleet-outage-grace), taking no change, then answers 503',
        errorFields(error),
      );
      const now = this.clock();
      if (now >= this.servesUntil()) {
        closeFence(this.settings.fence);
        if (this.inGrace)
          this.log.warn('the fleet outage grace has run out; protected requests get 503 until etcd answers', { cluster: this.keys.name });
        this.inGrace = false;
      } else if (now >= this.deadline && !this.inGrace && this.recovering === undefined && Atomics.load(this.settings.fence, 0) !== 0) {
        this.inGrace = true;
        this.log.warn(
          `the fleet's etcd has not answered for the lease time: serving tokens on the last known state for at most ${grace} s ` +
            '(--fleet-outage-grace); every change is refused meanwhile',
          { cluster: this.keys.name, graceSeconds: grace },
        );
      }
    } finally {
      clearTimeout(timer);
    }
    this.scheduleRenewal();
  }

  /** The lease is gone: stop serving, then join again with a new lease and the whole state. */
  private lost(why: string): void {
    closeFence(this.settings.fence);
    this.log.warn(why + '; rejoining', { cluster: this.keys.name });
    this.metrics.leasesLost++;
    void this.resync();
  }
}
