// A fleet of gateways sharing one state through etcd v3 (docs/guides/fleet.md): the
// ledger of a fleet gateway (service/ledger.ts).
//
// Each gateway reads the whole state at start and then follows one watch of the prefix
// (the key space: keys.ts), in revision order, applying every change to its core (the
// state as it holds it: replica.ts). A call that changes state (writes.ts) returns only
// once every live member holds it (the barrier of membership.ts); tokens take their
// serials from blocks this gateway reserved (blocks.ts); password checks count against
// the fleet's allowance (throttle.ts); what has expired is deleted by one member
// (tidy.ts). Nothing here runs on the verify path.
import type { Watcher } from 'etcd3';
import type { Registry } from 'prom-client';
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Claims } from '../core/abi.js';
import { FleetError } from '../errors.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import { encodeRecord } from '../password/hash.js';
import type { PasswordRecord } from '../password/hash.js';
import type { GrantRequest, InventoryEntry, Ledger, ReadHistory, SharedCheck, Usage } from '../service/ledger.js';
import { RotationEnds } from '../service/rotation-ends.js';
import { SerialBlocks } from './blocks.js';
import { EtcdConnection } from './etcd.js';
import type { EtcdSettings } from './etcd.js';
import { DamagedKeyError, FleetKeys } from './keys.js';
import { Membership } from './membership.js';
import { FleetReplica } from './replica.js';
import { FleetWrites } from './writes.js';
import { FleetMetrics } from './metrics.js';
import { FleetThrottle } from './throttle.js';
import { deleteExpired, TIDY_INTERVAL_MS } from './tidy.js';
import { FleetUsage, USAGE_PUBLISH_MS } from './usage.js';
import { FleetHistory } from './usage-history.js';
import type { UsageHistory } from '../service/usage-history.js';

export interface FleetSettings extends EtcdSettings {
  readonly name: string;
  /** The fence this gateway's gates read (threads/fence.ts); written by its membership only. */
  readonly fence: Uint32Array;
  /** --fleet-outage-grace, whole seconds (membership.ts). */
  readonly outageGraceSeconds: number;
  /** This gateway's usage history, published beside its usage counts (usage-history.ts). */
  readonly history?: UsageHistory;
}

export class Fleet implements Ledger {
  readonly metrics: FleetMetrics;
  private readonly keys: FleetKeys;
  private readonly etcd: EtcdConnection;
  private readonly membership: Membership;
  private readonly blocks: SerialBlocks;
  private readonly throttle: FleetThrottle;
  /** The fleet's state as this gateway holds it, applied to the core. */
  private readonly replica: FleetReplica;
  private readonly writes: FleetWrites;
  /** The latest etcd revision this gateway has learnt of. */
  private head = 0;
  private watcher: Watcher | undefined;
  private tidyTimer: NodeJS.Timeout | undefined;
  private readonly usage: FleetUsage;
  private readonly history: FleetHistory | undefined;
  /** The ends of rotated tokens: each gateway refuses an old token on its own clock, then records its revocation. */
  readonly ends: RotationEnds;
  private usageTimer: NodeJS.Timeout | undefined;
  private closed = false;

  private constructor(
    private readonly core: Core,
    private readonly settings: FleetSettings,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {
    this.keys = new FleetKeys(settings.name);
    this.metrics = new FleetMetrics(clock);
    this.etcd = new EtcdConnection(settings, log);
    this.membership = new Membership(this.etcd, this.keys, settings, this.metrics, log, clock, () => this.rejoin());
    // Each gateway lets a token through at rate / gateways: no call between them per request.
    this.membership.onGateways = (count) => this.core.setLimitShare(count);
    this.blocks = new SerialBlocks(this.etcd, this.keys, (revision) => this.membership.barrier(revision));
    this.throttle = new FleetThrottle(this.etcd, this.keys, log);
    this.usage = new FleetUsage(this.etcd, this.keys, core, log, clock);
    this.history = settings.history && new FleetHistory(this.etcd, this.keys, settings.history, this.usage.id, log);
    this.ends = new RotationEnds(
      {
        refuse: (serial) => this.core.revokeSerial(serial),
        record: (serial, expiry) => this.revoke(serial, expiry),
        recorded: (serial) => this.isRevoked(serial),
      },
      clock,
      log,
    );
    this.replica = new FleetReplica(core, this.keys, this.membership, this.ends, settings.name, log, clock, (message) =>
      this.fatal(message),
    );
    this.writes = new FleetWrites(core, this.etcd, this.keys, this.membership, this.blocks, this.replica);
  }

  /**
   * Joins the fleet: seeds it with what `seed` makes (a new key, the record of this
   * gateway's password) when it is empty, else reads it; brings the core up from it;
   * registers this gateway and starts serving once it has caught up. `matchesFile` tells
   * whether the fleet's password is the password file's; a warning says when it is not.
   */
  static async join(
    core: Core,
    settings: FleetSettings,
    seed: () => Promise<{ key: Uint8Array; record: PasswordRecord }>,
    matchesFile: (record: PasswordRecord) => Promise<boolean>,
    log: Logger,
    clock: Clock,
  ): Promise<Fleet> {
    const fleet = new Fleet(core, settings, log, clock);
    try {
      await fleet.seedIfEmpty(seed);
      await fleet.start();
      if (!(await matchesFile(fleet.password))) {
        log.warn(
          "the password file differs from the fleet's password: the fleet's is in force (docs/guides/fleet.md, " + '"Resetting a fleet")',
          { cluster: settings.name },
        );
      }
    } catch (error) {
      await fleet.close();
      throw error;
    }
    return fleet;
  }

  /** Adds the fleet's metrics to a registry (the one the metrics route serves). */
  registerMetrics(registry: Registry): void {
    this.metrics.register(
      registry,
      () => this.membership.members.size,
      () => this.head,
      () => this.membership.ignored.size,
      () => this.replica.damaged.size + this.usage.damaged.size + (this.history?.damaged.size ?? 0),
    );
  }

  /** The current password's record. */
  get password(): PasswordRecord {
    return this.replica.password;
  }

  private async seedIfEmpty(seed: () => Promise<{ key: Uint8Array; record: PasswordRecord }>): Promise<void> {
    const { keys } = this;
    const existing = await this.etcd.call((client) => client.get(keys.key()).string());
    if (existing !== null) return;
    const { key, record } = await seed();
    const result = await this.etcd.call((client) =>
      client
        .if(keys.key(), 'Create', '==', 0)
        .then(
          client.put(keys.key()).value(Buffer.from(key).toString('base64')),
          client.put(keys.password()).value(JSON.stringify({ record: encodeRecord(record), generation: 0 })),
          client.put(keys.serials()).value('0'),
        )
        .commit(),
    );
    if (result.succeeded)
      this.log.info("seeded the fleet from this gateway's password file, with a new token key", { cluster: this.settings.name });
  }

  /** A lease, the whole state, the watch, the member key; serves once caught up. */
  private async start(): Promise<void> {
    const { membership } = this;
    await membership.takeLease();
    const snapshot = await this.etcd.call((client) => client.getAll().prefix(this.keys.prefix).exec());
    const revision = Number(snapshot.header.revision);
    if (revision > this.head) this.head = revision;
    this.replica.load(snapshot.kvs);
    // A watch that still runs (a lost lease) keeps its place: the snapshot only added to
    // what it had applied. A new one starts after the snapshot.
    if (this.watcher === undefined) {
      membership.applied = revision;
      membership.stateApplied = revision;
      await this.etcd.call(() => this.watch(revision + 1));
    }
    await membership.register(revision);
    // etcd may have cancelled the watch meanwhile (compaction): then start over.
    if (this.watcher === undefined) throw new FleetError('the fleet watch was cancelled while joining');
    membership.serve();
    if (this.tidyTimer === undefined) {
      this.tidyTimer = setInterval(() => void this.tidy(), TIDY_INTERVAL_MS).unref();
      void this.tidy();
    }
    this.usageTimer ??= setInterval(() => void this.publishUsage(), USAGE_PUBLISH_MS).unref();
    this.log.info('serving in the fleet', { cluster: this.settings.name, members: membership.members.size, revision: membership.applied });
  }

  /** After a lost lease or a cancelled watch: a watch that etcd cancelled is started anew on a new client (reconnect). */
  private async rejoin(): Promise<void> {
    if (this.watcher === undefined) {
      this.throttle.release();
      this.etcd.reconnect();
    }
    await this.start();
  }

  /** Follows the prefix from `revision`; a watch that etcd cancels (compaction) is started anew from a full read. */
  private async watch(revision: number): Promise<void> {
    const watcher = await this.etcd.client.watch().prefix(this.keys.prefix).startRevision(String(revision)).create();
    this.watcher = watcher;
    watcher.on('data', (res) => {
      if (this.watcher !== watcher) return;
      const head = Number(res.header.revision);
      if (head > this.head) this.head = head;
      try {
        this.replica.applyEvents(res.events);
      } catch (error) {
        if (error instanceof DamagedKeyError) this.fenceOnDamage(watcher, error);
        else this.fatal(`cannot apply the fleet's change: ${(error as Error).message}; restart api-auth`);
      }
    });
    watcher.on('error', (error) => {
      // etcd cancelled the watch: most often its start was compacted away.
      if (this.watcher !== watcher || this.closed) return;
      this.log.warn('the fleet watch was cancelled; reading the whole state again', errorFields(error));
      this.metrics.resyncs++;
      this.watcher = undefined;
      void this.membership.resync();
    });
    watcher.on('disconnected', () => this.metrics.watchDisconnects++);
  }

  /**
   * Issues a token of the grant, added fleet-wide when new, from this gateway's block,
   * reserving a new block when it is used up or too old to issue from.
   */
  issue(request: GrantRequest, now: number, lifetime: number): Promise<{ token: string; claims: Claims }> {
    return this.writes.issue(request, now, lifetime);
  }

  grantList(id: number): readonly string[] | undefined {
    return this.replica.grantList(id);
  }

  /** Whether `serial` is revoked (and not yet expired), as this gateway holds the fleet's state. */
  isRevoked(serial: number): boolean {
    return this.replica.isRevoked(serial);
  }

  /** The inventory's entries of every gateway, as this gateway holds them; expired or earlier ones may still be among them. */
  tokens(): IterableIterator<InventoryEntry> {
    return this.replica.tokens();
  }

  /** The inventory entry of `serial`, if this gateway holds one. */
  token(serial: number): InventoryEntry | undefined {
    return this.replica.token(serial);
  }

  /** Records a token's inventory entry fleet-wide (writes.ts). */
  recordToken(entry: InventoryEntry): Promise<void> {
    return this.writes.recordToken(entry);
  }

  /** Records a revocation fleet-wide (writes.ts). */
  revoke(serial: number, expiry: number): Promise<void> {
    return this.writes.revoke(serial, expiry);
  }

  /** A new password fleet-wide, if the password is still the one `checked` (writes.ts). Returns the generation. */
  changePassword(checked: PasswordRecord, record: PasswordRecord): Promise<number> {
    return this.writes.changePassword(checked, record);
  }

  /** Counted against the fleet's allowance (throttle.ts). */
  async beginPasswordCheck(nowMs: number): Promise<number | SharedCheck> {
    // Not while the lease is not surely alive: in an outage the count cannot reach etcd, so
    // the caller is told why at once rather than after etcd's deadline.
    this.membership.serving();
    return this.throttle.begin(nowMs, this.membership.leaseId);
  }

  /**
   * Forgets what has expired: in the core, the pages of serials whose tokens have all
   * expired (a gateway that issues nothing would not sweep otherwise); in etcd, what
   * tidy.ts deletes, if this gateway is the member that cleans up.
   */
  private async tidy(): Promise<void> {
    if (this.closed || this.membership.rejoining) return;
    const now = unixSeconds(this.clock);
    this.core.sweep(now);
    if (this.membership.lowest) await deleteExpired(this.etcd, this.keys, now, this.core.generation, this.log);
  }

  /** Publishes this gateway's counts of the live tokens (usage.ts); not while it rejoins, its lease being replaced. */
  private async publishUsage(): Promise<void> {
    if (this.closed || this.membership.rejoining) return;
    const live = this.replica.liveTokens();
    await this.usage.publish(live);
    if (!this.closed) await this.history?.publish();
    // The others' quota counts, read as often as this gateway publishes its own: only
    // when a live token has a quota, so that a fleet without quotas reads nothing more.
    const quoted = live.filter((e) => this.replica.grantList(e.grant)?.some((entry) => entry.startsWith('quota ')) === true);
    if (quoted.length > 0 && !this.closed) await this.usage.refreshQuota(quoted);
  }

  /** The other gateways' published hourly counts (usage-history.ts). */
  othersHistory(serial?: number): Promise<ReadHistory[]> {
    return this.history?.others(serial) ?? Promise.resolve([]);
  }

  /** The other gateways' published usage, by serial (usage.ts). */
  othersUsage(): Promise<Map<number, Usage>> {
    return this.usage.others();
  }

  /**
   * A key that verification needs is damaged: this gateway cannot know the state it
   * holds, so it stops serving (its member key goes with its lease, so writers stop
   * waiting for it) and reads the whole state again until the key is repaired or
   * deleted, as it rejoins after an etcd outage.
   */
  private fenceOnDamage(watcher: Watcher, error: DamagedKeyError): void {
    this.log.error(`${error.message}; protected requests get 503 until then`, { cluster: this.settings.name, key: error.key });
    this.metrics.damageFences++;
    this.watcher = undefined;
    void watcher.cancel().catch(() => undefined);
    void this.membership.resync();
  }

  private fatal(message: string): void {
    this.membership.stop();
    this.log.error(message, { cluster: this.settings.name });
    this.closed = true;
  }

  /** Stops renewing and watching, and gives the lease back so that writers stop waiting for this gateway at once. */
  async close(): Promise<void> {
    this.closed = true;
    this.ends.close();
    this.membership.stop();
    clearInterval(this.tidyTimer);
    clearInterval(this.usageTimer);
    // The last counts, so that a clean stop loses none of them (usage.ts).
    if (this.usageTimer !== undefined) {
      await this.usage.publish(this.replica.liveTokens());
      await this.history?.publish();
    }
    await this.watcher?.cancel().catch(() => undefined);
    await this.membership.close();
    this.throttle.release();
    this.etcd.close();
  }
}
