// A fleet of gateways sharing one state through etcd v3 (README, "Running a fleet").
//
// The keyspace, under `/<cluster-name>/`:
//   key                 the token key, base64; written once, by the first gateway
//   password            {"record", "generation"}: the service password's argon2id record
//   serials             the start of the next serial block (a decimal number)
//   blocks/<start>      {"end", "bound"}: a block one gateway reserved and issues from;
//                       every token of it expires by `bound` (Unix seconds)
//   grants/<id>         an endpoint grant, as the opaque entry list the core interns
//   revoked/<serial>    a revoked token's serial; the value is its expiry
//   tokens/<serial>     the inventory's entry of an issued token: {"generation", "grant",
//                       "issuedAt", "expiry", "label"} (never the token itself)
//   members/<lease>     one per live member, under its lease: {"applied"}, the highest
//                       revision of a state change it holds; {"applied", "follower": true}
//                       for a member that never writes (a Go node, go/fleet)
// Numbers in keys are zero-padded, so that etcd's key order is their order. The whole
// schema, which go/fleet reads too, is docs/fleet-keys.md.
//
// Each gateway reads the whole state at start and then follows one watch of the prefix,
// in revision order, applying every change to its core. A call that changes state is a
// linearizable txn at revision R, and returns success only once every live member has
// applied R (its member key says so) or lost its lease (its key is gone): the barrier.
// A member whose lease cannot be renewed stops serving before etcd can expire it (the
// fence, fence.ts), so a writer that stops waiting for it never leaves it serving stale.
// Nothing here runs on the verify path.
import { Etcd3, EtcdAuthenticationFailedError, EtcdLeaseInvalidError, EtcdPermissionDeniedError } from 'etcd3';
import type { IKeyValue, Lease, Watcher } from 'etcd3';
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import { grantEntries, REVOKE_NEVER_ISSUED, splitGrantEntries } from '../core/core.js';
import type { Claims, Core } from '../core/core.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import { decodeRecord, encodeRecord } from '../password/hash.js';
import type { PasswordRecord } from '../password/hash.js';
import { closeFence, openFence } from './fence.js';
import { FleetMetrics } from './metrics.js';
import type { InventoryEntry } from '../state/inventory.js';

/**
 * Password checks the whole fleet may fail per window, whatever the number of gateways:
 * each gateway's own throttle (service/throttle.ts) allows 100 at once and then one a
 * second, so without this N gateways would let a guesser spread over them try N times
 * as fast.
 */
export const FLEET_PASSWORD_FAILURES = 100;
/** The fleet throttle's window, seconds. */
export const FLEET_PASSWORD_WINDOW = 60;

const TIDY_INTERVAL_MS = 60_000;
/** Deletions per txn (etcd takes at most 128 operations in one). */
const TIDY_BATCH = 100;

/** Serials per block: one page of the core's revocation window, so blocks are page-aligned. */
export const BLOCK = 4096;
/** How long a gateway issues from one block before it takes another (seconds). */
export const BLOCK_PERIOD = 3600;

export interface FleetSettings {
  /** etcd client URLs. */
  readonly endpoints: readonly string[];
  readonly name: string;
  /** Lease TTL, whole seconds. */
  readonly leaseSeconds: number;
  /** Lifetime of the tokens this gateway issues, seconds. */
  readonly tokenLifetime: number;
  /** The fence this gateway's gates read (fence.ts); written here only. */
  readonly fence: Uint32Array;
  /** How this gateway proves itself to etcd. */
  readonly access: EtcdAccess;
}

/** What this gateway shows etcd, as read from the files the options name (open.ts). */
export interface EtcdAccess {
  /** TLS (https:// endpoints): the CAs that may sign etcd's certificate (undefined: the system's), and a client certificate. */
  readonly tls?: { readonly ca?: Buffer; readonly client?: { readonly cert: Buffer; readonly key: Buffer } };
  /** etcd's authentication (RBAC). */
  readonly auth?: { readonly user: string; readonly password: string };
}

/**
 * A state change the fleet could not make: the message is for the client; etcd's own
 * error is the cause (the log has it, and a start that fails explains it: etcdRefusal).
 */
export class FleetError extends Error {
  override readonly name = 'FleetError';
}

/** Why etcd could not be used, as far as its answer (or the TLS handshake's) tells. */
export type EtcdRefusal =
  /** The user or its password is wrong. */
  | { readonly kind: 'authentication-failed' }
  /** etcd's authentication is on, and no user was given. */
  | { readonly kind: 'authentication-required' }
  /** A user was given, and etcd's authentication is off: it would protect nothing. */
  | { readonly kind: 'authentication-disabled' }
  /** The user's roles do not grant the fleet's keys. */
  | { readonly kind: 'permission-denied' }
  /** etcd's certificate is not one this gateway trusts. */
  | { readonly kind: 'server-untrusted'; readonly detail: string }
  /** etcd refused this gateway's client certificate, or its lack of one. */
  | { readonly kind: 'client-refused'; readonly detail: string }
  /** Anything else: not listening, not answering, not etcd. */
  | { readonly kind: 'unreachable'; readonly detail: string };

// gRPC reports a connection that failed as UNAVAILABLE, with the socket's or TLS's error
// after "Last error:" (and at times a time stamp in brackets).
const LAST_ERROR = /Last error: (?:Error(?: \[\w+\])?: )?([\s\S]*?)\s*(?:\(\d{4}-\d\d-\d\dT[^)]*\))?\.? Resolution note/;
// OpenSSL's line: "...:error:0A000412:SSL routines:ssl3_read_bytes:sslv3 alert bad certificate:file:line:...".
const OPENSSL_REASON = /SSL routines:[^:]*:([^:]+)/;
// The alerts a TLS server sends about the client's certificate (RFC 8446 §6.2).
const CLIENT_CERTIFICATE_ALERT = /alert (bad certificate|certificate required|unknown ca|certificate unknown|unsupported certificate|certificate expired|certificate revoked)/i;
// Node's own checks of the server's certificate (its chain, its dates, its names).
const SERVER_CERTIFICATE_PROBLEM = /unable to (verify|get)|self[- ]signed certificate|certificate has expired|certificate is not yet valid|does not match certificate's altnames/i;

/** What an error of etcd3 (or of the gRPC under it) says went wrong. */
export function etcdRefusal(error: unknown): EtcdRefusal {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof EtcdAuthenticationFailedError) return { kind: 'authentication-failed' };
  if (message.includes('etcdserver: user name is empty')) return { kind: 'authentication-required' };
  if (message.includes('etcdserver: authentication is not enabled')) return { kind: 'authentication-disabled' };
  if (error instanceof EtcdPermissionDeniedError) return { kind: 'permission-denied' };
  const last = LAST_ERROR.exec(message)?.[1];
  const detail = last === undefined ? message.replace(/^\d+ [A-Z_]+: /, '') : OPENSSL_REASON.exec(last)?.[1] ?? last;
  if (CLIENT_CERTIFICATE_ALERT.test(detail)) return { kind: 'client-refused', detail };
  if (SERVER_CERTIFICATE_PROBLEM.test(detail)) return { kind: 'server-untrusted', detail };
  return { kind: 'unreachable', detail };
}

interface Block {
  readonly start: number;
  readonly end: number;
  readonly bound: number;
}

interface Cursor extends Block {
  next: number;
  /** Unix seconds after which no token is issued from it (its bound minus this gateway's lifetime). */
  readonly until: number;
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');
const SERIAL_WIDTH = 16;
const GRANT_WIDTH = 10;
// etcd3's fault policies retry and break circuits for seconds; a gateway handles
// failures itself (fail the call, let the lease decide), so each call is made once. A
// policy's execute must return a promise even when `fn` throws: etcd3 chains .catch on it.
const NOOP_POLICY = { execute: async <T>(fn: (context: object) => T): Promise<Awaited<T>> => await fn({}) };

/**
 * The margin taken off the lease on this side: etcd expires a lease TTL after it
 * received the last renewal, which is after it was sent, when this side starts counting.
 */
function leaseMargin(leaseSeconds: number): number {
  return Math.max(500, leaseSeconds * 100);
}

export class Fleet {
  /** The fence every HTTP thread's gate reads (fence.ts). */
  private readonly fence: Uint32Array;
  readonly metrics = new FleetMetrics();
  /** Replaced when a watch is started anew (reconnect). */
  private client: Etcd3;
  private readonly prefix: string;
  private record: PasswordRecord | undefined;
  private passwordRevision = '0';
  private key = '';
  /** The highest revision this gateway's watch has applied. */
  private applied = 0;
  /** The latest etcd revision this gateway has learnt of. */
  private head = 0;
  /** The highest revision of a state change applied (what the member key publishes). */
  private stateApplied = 0;
  private published = 0;
  private publishing = false;
  private readonly members = new Map<string, number>();
  /** Members that only follow (docs/fleet-keys.md): they never write, so they never tidy. */
  private readonly followers = new Set<string>();
  /** Each grant's entry list, by id, as etcd holds it (what listTokens shows). */
  private readonly grantLists: (readonly string[])[] = [];
  /** Revoked serials not yet expired, and their expiry. */
  private readonly revokedSerials = new Map<number, number>();
  /** The token inventory, by serial: every gateway's issues. */
  private readonly tokenEntries = new Map<number, InventoryEntry>();
  private memberKey = '';
  private lease: Lease | undefined;
  private watcher: Watcher | undefined;
  private cursor: Cursor | undefined;
  private waiters: { check(): boolean }[] = [];
  private renewTimer: NodeJS.Timeout | undefined;
  private tidyTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private throttleLease: { window: number; lease: Lease } | undefined;
  private checks = 0;
  private recovering: Promise<void> | undefined;
  /** Local ms deadline of the lease: last successful renewal's send time + TTL - margin. */
  private deadline = 0;

  private constructor(
    private readonly core: Core,
    private readonly settings: FleetSettings,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {
    this.prefix = `/${settings.name}/`;
    this.fence = settings.fence;
    this.client = this.connect();
  }

  /** A client of the fleet's etcd, with this gateway's TLS and etcd user. */
  private connect(): Etcd3 {
    const { settings } = this;
    const { tls, auth } = settings.access;
    return new Etcd3({
      hosts: [...settings.endpoints],
      // Without a CA of its own, gRPC trusts the system's (as Node does): it takes null
      // for them, which etcd3's type does not say.
      credentials: tls && { rootCertificate: tls.ca ?? (null as unknown as Buffer), certChain: tls.client?.cert, privateKey: tls.client?.key },
      auth: auth && { username: auth.user, password: auth.password },
      dialTimeout: settings.leaseSeconds * 1000,
      // Unary calls fail within the lease's time rather than retry past it: a caller
      // waiting for a state change needs an answer while the fleet still vouches for it.
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + settings.leaseSeconds * 1000 }),
      faultHandling: {
        host: () => NOOP_POLICY as never,
        global: NOOP_POLICY as never,
        // Reconnect the watch quickly once etcd is back: the fleet serves again only after.
        watchBackoff: { duration: 200, next() { return this; } } as never,
      },
    });
  }

  /**
   * A new client in the current one's place. etcd3 opens its watch stream with the
   * etcd user's token of the moment and keeps it when it reconnects, and etcd forgets its
   * tokens when it restarts: it then cancels the watch, and would refuse any new one on
   * that stream (where a watch refused at its creation leaves etcd3's queue of watches to
   * create stuck). A new client signs in anew.
   */
  private reconnect(): void {
    this.throttleLease?.lease.release();
    this.throttleLease = undefined;
    this.client.close();
    this.client = this.connect();
  }

  /**
   * Joins the fleet: seeds it from this gateway's password record and a new key when it
   * is empty, else reads it; brings the core up from it; registers this gateway and
   * starts serving once it has caught up. `filePassword` is checked against the fleet's
   * with `verify`, which warns when they differ.
   */
  static async join(core: Core, settings: FleetSettings, seed: () => Promise<{ key: Uint8Array; record: PasswordRecord }>,
    matchesFile: (record: PasswordRecord) => Promise<boolean>, log: Logger, clock: Clock): Promise<Fleet> {
    const fleet = new Fleet(core, settings, log, clock);
    try {
      await fleet.seedIfEmpty(seed);
      await fleet.start();
      if (!(await matchesFile(fleet.password))) {
        log.warn('the password file differs from the fleet\'s password: the fleet\'s is in force (README, Running a fleet: ' +
          'the reset path)', { cluster: settings.name });
      }
    } catch (error) {
      fleet.close();
      throw error;
    }
    return fleet;
  }

  /** Adds the fleet's metrics to a registry (the one the metrics route serves). */
  registerMetrics(registry: import('prom-client').Registry): void {
    this.metrics.register(registry, () => this.members.size, () => this.head);
  }

  /** The current password's record. */
  get password(): PasswordRecord {
    if (this.record === undefined) throw new Error('the fleet has no password record yet');
    return this.record;
  }

  private k(key: string): string {
    return this.prefix + key;
  }

  private async seedIfEmpty(seed: () => Promise<{ key: Uint8Array; record: PasswordRecord }>): Promise<void> {
    const existing = await this.etcd(() => this.client.get(this.k('key')).string());
    if (existing !== null) return;
    const { key, record } = await seed();
    const result = await this.etcd(() => this.client.if(this.k('key'), 'Create', '==', 0)
      .then(
        this.client.put(this.k('key')).value(Buffer.from(key).toString('base64')),
        this.client.put(this.k('password')).value(JSON.stringify({ record: encodeRecord(record), generation: 0 })),
        this.client.put(this.k('serials')).value('0'),
      ).commit());
    if (result.succeeded) this.log.info('seeded the fleet from this gateway\'s password file, with a new token key', { cluster: this.settings.name });
  }

  /** A lease, the whole state, the watch, the member key; serves once caught up. */
  private async start(): Promise<void> {
    closeFence(this.fence);
    const lease = this.client.lease(this.settings.leaseSeconds, { autoKeepAlive: false });
    const sent = this.clock();
    const id = await this.etcd(() => lease.grant());
    this.lease = lease;
    this.deadline = sent + this.settings.leaseSeconds * 1000 - leaseMargin(this.settings.leaseSeconds);
    this.memberKey = this.k(`members/${BigInt(id).toString(16)}`);
    this.scheduleRenewal();
    const snapshot = await this.etcd(() => this.client.getAll().prefix(this.prefix).exec());
    const revision = Number(snapshot.header.revision);
    if (revision > this.head) this.head = revision;
    this.load(snapshot.kvs);
    // A watch that still runs (a lost lease) keeps its place: the snapshot only added to
    // what it had applied. A new one starts after the snapshot.
    if (this.watcher === undefined) {
      this.applied = revision;
      this.stateApplied = revision;
      await this.etcd(() => this.watch(revision + 1));
    }
    const put = await this.etcd(() => this.client.put(this.memberKey).value(JSON.stringify({ applied: revision })).lease(id).exec());
    this.published = revision;
    // A writer that finished its barrier before this key existed may have written after
    // the snapshot: serve only once the watch has passed this key's own revision.
    await this.appliedAtLeast(Number(put.header.revision));
    // etcd may have cancelled the watch meanwhile (compaction): then start over.
    if (this.watcher === undefined) throw new FleetError('the fleet watch was cancelled while joining');
    this.metrics.joined();
    this.refreshFence();
    if (this.tidyTimer === undefined) {
      this.tidyTimer = setInterval(() => void this.tidy(), TIDY_INTERVAL_MS).unref();
      void this.tidy();
    }
    this.log.info('serving in the fleet', { cluster: this.settings.name, members: this.members.size, revision: this.applied });
  }

  /** Applies a snapshot of the whole state to the core, adding to what it holds. */
  private load(kvs: readonly IKeyValue[]): void {
    const now = unixSeconds(this.clock);
    const grants: [number, string[]][] = [];
    const blocks: Block[] = [];
    const revoked: [number, number][] = [];
    this.members.clear();
    this.followers.clear();
    this.revokedSerials.clear();
    this.tokenEntries.clear();
    let serials = 0;
    for (const kv of kvs) {
      const name = kv.key.toString('utf8').slice(this.prefix.length);
      const value = kv.value.toString('utf8');
      if (name === 'key') this.applyKey(value);
      else if (name === 'password') this.applyPassword(value, String(kv.mod_revision));
      else if (name === 'serials') serials = Number(value);
      else if (name.startsWith('grants/')) grants.push([Number(name.slice(7)), JSON.parse(value) as string[]]);
      else if (name.startsWith('blocks/')) blocks.push({ start: Number(name.slice(7)), ...(JSON.parse(value) as { end: number; bound: number }) });
      else if (name.startsWith('revoked/')) revoked.push([Number(name.slice(8)), Number(value)]);
      else if (name.startsWith('tokens/')) this.applyToken(Number(name.slice(7)), value);
      else if (name.startsWith('members/')) this.setMember(this.prefix + name, value);
    }
    if (this.key === '') throw new FleetError(`the fleet ${this.settings.name} has no token key in etcd`);
    grants.sort((a, b) => a[0] - b[0]);
    for (const [id, entries] of grants) this.applyGrant(id, entries);
    const live = blocks.filter((b) => b.bound > now).sort((a, b) => a.start - b.start);
    if (this.core.nextSerial === 0 && this.core.floor === 0) {
      // A fresh core: its range starts at the lowest live block (or the next one to come).
      const base = live.length > 0 ? live[0].start : serials;
      this.core.restoreSerials(base, base, 0);
    }
    for (const block of live) this.applyBlock(block);
    for (const [serial, expiry] of revoked) this.applyRevocation(serial, expiry, now);
  }

  /**
   * A member's key: the revision it has applied, which the barrier waits for; a follower
   * (a Go node verifying in-process, docs/fleet-keys.md) says so, and is never the one to tidy.
   */
  private setMember(key: string, value: string): void {
    const member = JSON.parse(value) as { applied: number; follower?: boolean };
    this.members.set(key, member.applied);
    if (member.follower === true) this.followers.add(key);
    else this.followers.delete(key);
  }

  private applyKey(value: string): void {
    if (this.key === value) return;
    if (this.key !== '') {
      // The fleet was reset under this gateway (its keys deleted and seeded anew): every
      // token it knows means nothing there. Only a restart may take the new state.
      this.fatal('the fleet\'s token key changed under this gateway (the fleet was reset); restart api-auth to join it anew');
      return;
    }
    const key = Buffer.from(value, 'base64');
    if (key.length !== 32) throw new FleetError(`the fleet ${this.settings.name} holds a token key of ${key.length} bytes, not 32`);
    this.core.setKey(key);
    key.fill(0);
    this.key = value;
  }

  private applyPassword(value: string, modRevision: string): void {
    const { record, generation } = JSON.parse(value) as { record: string; generation: number };
    const decoded = decodeRecord(record);
    if (decoded === undefined) throw new FleetError(`the fleet ${this.settings.name} holds a damaged password record`);
    if (this.record !== undefined && generation <= this.core.generation) return;
    this.core.generation = generation;
    this.record = decoded;
    this.passwordRevision = modRevision;
  }

  private applyGrant(id: number, entries: readonly string[]): void {
    this.grantLists[id] = entries;
    if (id < this.core.grantCount) return;
    if (id > this.core.grantCount) throw new FleetError(`grant ${id} arrived before grant ${this.core.grantCount}`);
    const { endpoints, methods } = splitGrantEntries(entries);
    if (this.core.addGrant(endpoints, methods) !== id) throw new FleetError(`grant ${id} repeats an earlier grant`);
  }

  private applyToken(serial: number, value: string): void {
    const { generation, grant, issuedAt, expiry, label } = JSON.parse(value) as Omit<InventoryEntry, 'serial' | 'label'> & { label: string | null };
    this.tokenEntries.set(serial, { serial, generation, grant, issuedAt, expiry, label: label ?? undefined });
  }

  private applyBlock(block: Block): void {
    // Pages whose tokens have all expired make room in the window first.
    this.core.sweep(unixSeconds(this.clock));
    this.core.reserveSerials(block.start, block.end, block.bound);
  }

  private applyRevocation(serial: number, expiry: number, now: number): void {
    if (expiry <= now) return;
    this.revokedSerials.set(serial, expiry);
    if (this.core.revokeSerial(serial) === REVOKE_NEVER_ISSUED) {
      throw new FleetError(`revoked serial ${serial} lies in no block this gateway holds`);
    }
  }

  /** Follows the prefix from `revision`; a watch that etcd cancels (compaction) is started anew from a full read. */
  private async watch(revision: number): Promise<void> {
    const watcher = await this.client.watch().prefix(this.prefix).startRevision(String(revision)).create();
    this.watcher = watcher;
    watcher.on('data', (res) => {
      const head = Number(res.header.revision);
      if (head > this.head) this.head = head;
      try {
        this.applyEvents(res.events);
      } catch (error) {
        this.fatal(`cannot apply the fleet's change: ${(error as Error).message}; restart api-auth`);
      }
    });
    watcher.on('error', (error) => {
      // etcd cancelled the watch: most often its start was compacted away.
      if (this.watcher !== watcher || this.closed) return;
      this.log.warn('the fleet watch was cancelled; reading the whole state again', errorFields(error));
      this.metrics.resyncs++;
      this.watcher = undefined;
      void this.resync();
    });
    watcher.on('disconnected', () => this.metrics.watchDisconnects++);
  }

  private applyEvents(events: readonly { type: string; kv: IKeyValue }[]): void {
    let state = false;
    const now = unixSeconds(this.clock);
    for (const { type, kv } of events) {
      const revision = Number(kv.mod_revision);
      const full = kv.key.toString('utf8');
      const name = full.slice(this.prefix.length);
      const put = type === 'Put';
      if (name.startsWith('members/')) {
        if (put) this.setMember(full, kv.value.toString('utf8'));
        else {
          this.members.delete(full);
          this.followers.delete(full);
        }
      } else {
        state = true;
        if (put) {
          const value = kv.value.toString('utf8');
          if (name === 'key') this.applyKey(value);
          else if (name === 'password') this.applyPassword(value, String(kv.mod_revision));
          else if (name.startsWith('grants/')) this.applyGrant(Number(name.slice(7)), JSON.parse(value) as string[]);
          else if (name.startsWith('blocks/')) this.applyBlock({ start: Number(name.slice(7)), ...(JSON.parse(value) as { end: number; bound: number }) });
          else if (name.startsWith('revoked/')) this.applyRevocation(Number(name.slice(8)), Number(value), now);
          else if (name.startsWith('tokens/')) this.applyToken(Number(name.slice(7)), value);
        } else if (name.startsWith('tokens/')) {
          this.tokenEntries.delete(Number(name.slice(7)));
        } else if (name.startsWith('revoked/')) {
          // Deleted by tidy() once expired: the core forgets it by its own sweep.
          this.revokedSerials.delete(Number(name.slice(8)));
        } else if (name === 'key') {
          this.fatal('the fleet\'s token key was deleted (the fleet was reset); restart api-auth to join it anew');
        }
        if (revision > this.stateApplied) this.stateApplied = revision;
      }
      if (revision > this.applied) this.applied = revision;
    }
    this.metrics.applied = this.applied;
    if (state) this.publish();
    this.wake();
  }

  /** Tells the fleet which state changes this gateway holds: one write in flight at most, the latest after it. */
  private publish(): void {
    if (this.publishing || this.stateApplied <= this.published || this.lease === undefined) return;
    this.publishing = true;
    const applied = this.stateApplied;
    this.client.put(this.memberKey).value(JSON.stringify({ applied })).lease(this.lease.grant()).exec().then(
      () => { this.published = applied; },
      (error) => this.log.debug('cannot publish the applied revision', errorFields(error)),
    ).finally(() => {
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

  private appliedAtLeast(revision: number): Promise<void> {
    return this.until(() => this.applied >= revision, this.settings.leaseSeconds * 2000,
      'this gateway did not receive the fleet\'s change in time');
  }

  /**
   * Waits until every live member holds revision R: its published revision is at least
   * R, or its key is gone (lease expired or revoked). A member that stopped holds it up
   * for at most its lease's TTL; past twice that, the caller gets an error, not success.
   */
  private async barrier(revision: number): Promise<void> {
    const started = performance.now();
    await this.appliedAtLeast(revision);
    await this.until(() => {
      for (const [key, applied] of this.members) if (key !== this.memberKey && applied < revision) return false;
      return true;
    }, this.settings.leaseSeconds * 2000 + 1000, 'the change is stored in the fleet, but not every gateway confirmed it in time; ' +
      'it holds everywhere within the lease time');
    this.metrics.observeBarrier((performance.now() - started) / 1000);
  }

  /** Refuses a state change while this gateway does not serve: it may not hold the current state. */
  private serving(): void {
    if (this.closed || this.clock() >= this.deadline || Atomics.load(this.fence, 0) === 0) {
      throw new FleetError('this gateway has lost touch with its fleet (etcd); retry, or use another gateway');
    }
  }

  /**
   * The grant id of `endpoints` in the fleet, added to the core when new: ids are
   * allocated by a txn, so every gateway gives a list the same id (it is signed into
   * tokens). `id` is the id the core would give it.
   */
  async grant(id: number, endpoints: readonly string[], methods?: readonly string[]): Promise<number> {
    this.serving();
    const entries = grantEntries(endpoints, methods);
    for (let tries = 0; ; tries++) {
      if (id < this.core.grantCount) return id;
      const key = this.k(`grants/${pad(id, GRANT_WIDTH)}`);
      const result = await this.etcd(() => this.client.if(key, 'Create', '==', 0)
        .then(this.client.put(key).value(JSON.stringify(entries))).commit());
      const revision = Number(result.header.revision);
      if (result.succeeded) {
        await this.barrier(revision);
        return id;
      }
      // Another gateway took this id: once its list is here, ours may be it.
      await this.appliedAtLeast(revision);
      id = this.core.findGrant(endpoints, methods);
      if (tries > 64) throw new FleetError('the fleet\'s grants keep changing; retry');
    }
  }

  /** Issues a token from this gateway's block, reserving a new block when it is used up or too old to issue from. */
  async issue(grant: number, now: number, lifetime: number): Promise<{ token: string; claims: Claims }> {
    this.serving();
    let cursor = this.cursor;
    if (cursor === undefined || cursor.next >= cursor.end || now > cursor.until || now + lifetime > cursor.bound) {
      cursor = await this.reserveBlock(now, lifetime);
    }
    const serial = cursor.next++;
    return this.core.issueSerial(serial, grant, now, lifetime);
  }

  private async reserveBlock(now: number, lifetime: number): Promise<Cursor> {
    for (let tries = 0; tries < 64; tries++) {
      const current = await this.etcd(() => this.client.get(this.k('serials')).exec());
      const kv = current.kvs[0];
      if (kv === undefined) throw new FleetError(`the fleet ${this.settings.name} has no serial counter in etcd`);
      const start = Number(kv.value.toString('utf8'));
      const end = start + BLOCK;
      const until = now + BLOCK_PERIOD;
      const bound = until + lifetime;
      const result = await this.etcd(() => this.client.if(this.k('serials'), 'Mod', '==', kv.mod_revision)
        .then(
          this.client.put(this.k('serials')).value(String(end)),
          this.client.put(this.k(`blocks/${pad(start, SERIAL_WIDTH)}`)).value(JSON.stringify({ end, bound })),
        ).commit());
      if (!result.succeeded) continue;
      // Every gateway must hold the block before any of its tokens can be shown to one.
      await this.barrier(Number(result.header.revision));
      this.cursor = { start, end, bound, until, next: start };
      return this.cursor;
    }
    throw new FleetError('other gateways keep reserving serials at the same time; retry');
  }

  /** The entry list of grant `id` (endpoints, and a scope's methods after an empty entry). */
  grantList(id: number): readonly string[] | undefined {
    return this.grantLists[id];
  }

  /** Whether `serial` is revoked (and not yet expired), as this gateway holds the fleet's state. */
  isRevoked(serial: number): boolean {
    return this.revokedSerials.has(serial);
  }

  /** The inventory's entries of every gateway, as this gateway holds them; expired or earlier ones may still be among them. */
  tokens(): IterableIterator<InventoryEntry> {
    return this.tokenEntries.values();
  }

  /** The inventory entry of `serial`, if this gateway holds one. */
  token(serial: number): InventoryEntry | undefined {
    return this.tokenEntries.get(serial);
  }

  /**
   * Records a token's inventory entry fleet-wide: on return, every serving gateway lists it
   * and can revoke it by id. Expired entries, and those of earlier passwords, are deleted
   * by tidy().
   */
  async recordToken(entry: InventoryEntry): Promise<void> {
    this.serving();
    const { serial, generation, grant, issuedAt, expiry, label } = entry;
    const value = JSON.stringify({ generation, grant, issuedAt, expiry, label: label ?? null });
    const result = await this.etcd(() => this.client.put(this.k(`tokens/${pad(serial, SERIAL_WIDTH)}`)).value(value).exec());
    await this.barrier(Number(result.header.revision));
  }

  /** Records a revocation fleet-wide: on return, every serving gateway refuses the token. */
  async revoke(serial: number, expiry: number): Promise<void> {
    this.serving();
    const result = await this.etcd(() => this.client.put(this.k(`revoked/${pad(serial, SERIAL_WIDTH)}`)).value(String(expiry)).exec());
    await this.barrier(Number(result.header.revision));
  }

  /**
   * A new password fleet-wide, in the generation after the current one, if the password
   * is still the one `checked` (else the caller's password is an old one). Returns the generation.
   */
  async changePassword(checked: PasswordRecord, record: PasswordRecord): Promise<number> {
    this.serving();
    if (this.record !== checked) throw new FleetError('the password changed meanwhile');
    const generation = this.core.generation + 1;
    const result = await this.etcd(() => this.client.if(this.k('password'), 'Mod', '==', this.passwordRevision)
      .then(this.client.put(this.k('password')).value(JSON.stringify({ record: encodeRecord(record), generation }))).commit());
    if (!result.succeeded) throw new FleetError('the password was changed through another gateway meanwhile; retry with the new one');
    await this.barrier(Number(result.header.revision));
    return generation;
  }

  /**
   * A password check about to run, counted against the fleet's allowance as a failure
   * from its start (so that checks running at once on many gateways cannot overrun it
   * together): at most FLEET_PASSWORD_FAILURES in any FLEET_PASSWORD_WINDOW seconds. A
   * record is a key named by its time in ms, so the last window's are one range.
   * Returns the whole seconds to wait when the allowance is spent (nothing counted), or
   * the check: `succeeded()` or `abandoned()` takes it back; a failure leaves it counted.
   */
  async beginPasswordCheck(nowMs: number): Promise<number | { succeeded(): void; abandoned(): void }> {
    const prefix = `/${this.settings.name}.throttle/`;
    const windowMs = FLEET_PASSWORD_WINDOW * 1000;
    const span = { start: prefix + pad(Math.max(0, nowMs - windowMs), 15), end: prefix + '~' };
    const counted = await this.etcd(() => this.client.getAll().inRange(span).count());
    if (counted >= FLEET_PASSWORD_FAILURES) {
      // One more fits once the oldest record of the span is a window old.
      const oldest = await this.etcd(() => this.client.getAll().inRange(span).sort('Key', 'Ascend').limit(1).keys());
      const at = oldest.length > 0 ? Number(oldest[0].slice(prefix.length, prefix.length + 15)) : nowMs;
      return Math.max(1, Math.ceil((at + windowMs - nowMs) / 1000));
    }
    // Records go with their lease, which outlives the window; one lease per window of starts.
    const bucket = Math.floor(nowMs / windowMs);
    if (this.throttleLease?.window !== bucket) {
      this.throttleLease?.lease.release();
      this.throttleLease = { window: bucket, lease: this.client.lease(3 * FLEET_PASSWORD_WINDOW, { autoKeepAlive: false }) };
    }
    const lease = this.throttleLease.lease;
    const key = `${prefix}${pad(nowMs, 15)}-${this.memberKey.slice(this.k('members/').length)}-${this.checks++}`;
    await this.etcd(async () => this.client.put(key).value('').lease(await lease.grant()).exec());
    const takeBack = (): void => {
      this.client.delete().key(key).exec().catch((error) => this.log.debug('cannot take back a password check', errorFields(error)));
    };
    return { succeeded: takeBack, abandoned: takeBack };
  }

  /**
   * Forgets what has expired: in the core, the pages of serials whose tokens have all
   * expired (a gateway that issues nothing would not sweep otherwise); in etcd, the
   * revocations and blocks past their expiry, which only the member with the lowest key
   * deletes, so that the fleet does not do the same work N times.
   */
  private async tidy(): Promise<void> {
    if (this.closed || this.recovering !== undefined) return;
    const now = unixSeconds(this.clock);
    this.core.sweep(now);
    let lowest = this.memberKey;
    for (const key of this.members.keys()) if (key < lowest && !this.followers.has(key)) lowest = key;
    if (lowest !== this.memberKey) return;
    try {
      const expired: string[] = [];
      const generation = this.core.generation;
      const dead: [string, (v: string) => boolean][] = [
        ['revoked/', (v) => Number(v) <= now],
        ['blocks/', (v) => (JSON.parse(v) as Block).bound <= now],
        // An entry of an earlier password is listed nowhere: its token works nowhere.
        ['tokens/', (v) => { const e = JSON.parse(v) as InventoryEntry; return e.expiry <= now || e.generation < generation; }],
      ];
      for (const [dir, isDead] of dead) {
        const found = await this.client.getAll().prefix(this.k(dir)).strings();
        for (const [key, value] of Object.entries(found)) if (isDead(value)) expired.push(key);
      }
      for (let i = 0; i < expired.length; i += TIDY_BATCH) {
        const batch = expired.slice(i, i + TIDY_BATCH);
        await this.client.if(this.k('key'), 'Create', '>', 0).then(...batch.map((key) => this.client.delete().key(key))).commit();
      }
      if (expired.length > 0) this.log.info('deleted expired revocations, serial blocks and inventory entries from the fleet', { count: expired.length });
    } catch (error) {
      this.log.debug('cannot tidy the fleet state', errorFields(error));
    }
  }

  /** Renews the lease every third of its TTL; each success moves the local deadline. */
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
        new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('no answer within the lease time')), this.settings.leaseSeconds * 1000); }),
      ]);
      this.deadline = sent + this.settings.leaseSeconds * 1000 - leaseMargin(this.settings.leaseSeconds);
      this.metrics.renewed(this.deadline);
      if (this.recovering === undefined) this.refreshFence();
    } catch (error) {
      if (lease !== this.lease || this.closed) return;
      if (error instanceof EtcdLeaseInvalidError) {
        this.lost('the fleet lease expired (this gateway was stopped or cut off for longer than the lease)');
        return;
      }
      this.metrics.renewalFailures++;
      this.log.warn('cannot renew the fleet lease; protected requests get 503 once it runs out', errorFields(error));
      if (this.clock() >= this.deadline) closeFence(this.fence);
    } finally {
      clearTimeout(timer);
    }
    this.scheduleRenewal();
  }

  private refreshFence(): void {
    openFence(this.fence, this.deadline);
  }

  /** The lease is gone: stop serving, then join again with a new lease and the whole state. */
  private lost(why: string): void {
    closeFence(this.fence);
    this.log.warn(why + '; rejoining', { cluster: this.settings.name });
    this.metrics.leasesLost++;
    void this.resync();
  }

  /** Reads the whole state again (adding to what the core holds) under a new lease and watch, and serves once caught up. */
  private resync(): Promise<void> {
    if (this.recovering !== undefined) return this.recovering;
    closeFence(this.fence);
    this.recovering = (async () => {
      for (let attempt = 0; !this.closed; attempt++) {
        clearTimeout(this.renewTimer);
        const lease = this.lease;
        this.lease = undefined;
        lease?.release();
        try {
          // A watch that etcd cancelled is started anew on a new client (reconnect).
          if (this.watcher === undefined) this.reconnect();
          await this.start();
          return;
        } catch (error) {
          this.log.warn('cannot rejoin the fleet yet; retrying', errorFields(error));
          await new Promise((r) => setTimeout(r, Math.min(2000, 200 * (attempt + 1))));
        }
      }
    })().finally(() => { this.recovering = undefined; });
    return this.recovering;
  }

  private fatal(message: string): void {
    closeFence(this.fence);
    this.log.error(message, { cluster: this.settings.name });
    this.closed = true;
  }

  /** A call to etcd whose failure becomes a FleetError for the client; the cause goes to the log. */
  private async etcd<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof FleetError) throw error;
      this.log.warn('etcd call failed', errorFields(error));
      throw new FleetError('the fleet\'s etcd did not answer, so the change is not confirmed (it may still take effect); retry, ' +
        'or use another gateway', { cause: error });
    }
  }

  /** Stops renewing and watching, and gives the lease back so that writers stop waiting for this gateway at once. */
  async close(): Promise<void> {
    this.closed = true;
    closeFence(this.fence);
    clearTimeout(this.renewTimer);
    clearInterval(this.tidyTimer);
    await this.watcher?.cancel().catch(() => undefined);
    await this.lease?.revoke().catch(() => undefined);
    this.throttleLease?.lease.release();
    this.client.close();
  }
}
