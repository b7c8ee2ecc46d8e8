// The fleet's metrics: membership, lease health, how far behind the watch is, and how
// long the barrier takes on writes. Plain numbers, read at each scrape into the owner's
// registry (the one the metrics route serves, summed with the HTTP threads' on several).
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { Clock } from '../clock.js';

const BARRIER_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class FleetMetrics {
  /** The highest etcd revision this gateway's watch has applied. */
  applied = 0;
  /** Unix ms of the last time this gateway caught up with the fleet (joined, or rejoined). */
  joinedAt = 0;
  /** The local deadline of the lease (ms); the gateway refuses protected requests past it. */
  leaseDeadline = 0;
  renewalFailures = 0;
  leasesLost = 0;
  resyncs = 0;
  watchDisconnects = 0;
  /** Times a damaged key that verification needs fenced this gateway. */
  damageFences = 0;
  private barrier: Histogram | undefined;

  /** `clock`: the gateway's, which its lease deadline is kept in. */
  constructor(private readonly clock: Clock) {}

  joined(): void {
    this.joinedAt = this.clock();
  }

  renewed(deadline: number): void {
    this.leaseDeadline = deadline;
  }

  observeBarrier(seconds: number): void {
    this.barrier?.observe(seconds);
  }

  /**
   * Registers the fleet's metrics. `members`, `head`, `ignored` and `damaged` read the
   * live member count, etcd's revision as this gateway last learnt it, the member keys
   * ignored, and the damaged keys skipped.
   */
  register(registry: Registry, members: () => number, head: () => number, ignored: () => number, damaged: () => number): void {
    const registers = [registry];
    const self = this;
    new Gauge({
      name: 'api_auth_fleet_members',
      help: 'Gateways of the fleet with a live lease, as this one sees them.',
      registers,
      collect() {
        this.set(members());
      },
    });
    new Gauge({
      name: 'api_auth_fleet_ignored_member_keys',
      help: 'Member keys not bound to their own lease (no lease: a copy, a hand-written put); the barrier does not wait for them.',
      registers,
      collect() {
        this.set(ignored());
      },
    });
    new Gauge({
      name: 'api_auth_fleet_damaged_keys',
      help: 'Damaged keys that no gateway needs to verify (inventory, member and usage keys), skipped; delete each with api-auth fleet delete-key.',
      registers,
      collect() {
        this.set(damaged());
      },
    });
    new Gauge({
      name: 'api_auth_fleet_lease_remaining_seconds',
      help:
        "Seconds until this gateway's lease runs out unless renewed; past it, it refuses every change, and protected requests " +
        'too once --fleet-outage-grace (0 by default) has passed as well.',
      registers,
      collect() {
        this.set((self.leaseDeadline - self.clock()) / 1000);
      },
    });
    new Gauge({
      name: 'api_auth_fleet_watch_lag_revisions',
      help: 'etcd revisions between what this gateway has applied and the latest it has learnt of.',
      registers,
      collect() {
        this.set(Math.max(0, head() - self.applied));
      },
    });
    new Gauge({
      name: 'api_auth_fleet_applied_revision',
      help: 'The etcd revision this gateway has applied.',
      registers,
      collect() {
        this.set(self.applied);
      },
    });
    const counter = (name: string, help: string, read: () => number): void => {
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(read());
        },
      });
    };
    counter('api_auth_fleet_lease_renewal_failures_total', 'Lease renewals that failed (etcd did not answer).', () => self.renewalFailures);
    counter('api_auth_fleet_leases_lost_total', 'Leases that expired before renewal; each is followed by a rejoin.', () => self.leasesLost);
    counter(
      'api_auth_fleet_resyncs_total',
      'Full reads of the fleet state after the watch was cancelled (compaction).',
      () => self.resyncs,
    );
    counter(
      'api_auth_fleet_damage_fences_total',
      'Times a damaged key that verification needs (key, password, grants, blocks, revocations, serials) fenced this gateway until it was repaired or deleted.',
      () => self.damageFences,
    );
    counter(
      'api_auth_fleet_watch_disconnects_total',
      'Times the watch stream to etcd broke and was reconnected.',
      () => self.watchDisconnects,
    );
    this.barrier = new Histogram({
      name: 'api_auth_fleet_barrier_duration_seconds',
      help: 'Time a state change waits, after its etcd write, until every live gateway holds it.',
      buckets: BARRIER_BUCKETS,
      registers,
    });
  }
}
