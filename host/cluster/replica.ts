// The fleet's state as this gateway holds it (fleet.ts): the full read and the watch's
// events applied to the core, in revision order, and what the ledger reads of it: the
// token key, the password record, the grants' entry lists, the revoked serials, the
// token inventory, and the damaged keys skipped (keys.ts: which of them fence instead).
import type { IKeyValue } from 'etcd3';
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import { REVOKE_NEVER_ISSUED } from '../core/abi.js';
import { splitGrantEntries } from '../core/grants.js';
import type { Core } from '../core/core.js';
import { FleetError } from '../errors.js';
import type { Logger } from '../ops/log.js';
import { decodeRecord } from '../password/hash.js';
import type { PasswordRecord } from '../password/hash.js';
import type { InventoryEntry } from '../service/ledger.js';
import type { RotationEnds } from '../service/rotation-ends.js';
import { InvariantError } from '../api-auth-error.js';
import type { Block } from './blocks.js';
import { DamagedKeyError, fleetKey, fleetValue, verifiesWith } from './keys.js';
import type { FleetKeys, FleetValue } from './keys.js';
import type { Membership } from './membership.js';

export class FleetReplica {
  /** The current password's record, undefined until the state is read. */
  record: PasswordRecord | undefined;
  /** The revision that wrote the password: a change is a txn on it. */
  passwordRevision = '0';
  private key = '';
  /** Each grant's entry list, by id, as etcd holds it (what listTokens shows). */
  private readonly grantLists: (readonly string[])[] = [];
  /** Revoked serials not yet expired, and their expiry. */
  private readonly revokedSerials = new Map<number, number>();
  /** The token inventory, by serial: every gateway's issues. */
  private readonly tokenEntries = new Map<number, InventoryEntry>();
  /** Keys of the prefix that no gateway needs to verify (tokens/, members/) whose values are damaged: skipped, each reported once. */
  damaged = new Set<string>();

  /** `fatal`: the state can no longer be followed (the fleet was reset): stop, saying why. */
  constructor(
    private readonly core: Core,
    private readonly keys: FleetKeys,
    private readonly membership: Membership,
    private readonly ends: RotationEnds,
    private readonly name: string,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly fatal: (message: string) => void,
  ) {}

  /** The current password's record. */
  get password(): PasswordRecord {
    if (this.record === undefined) throw new InvariantError('the fleet has no password record yet');
    return this.record;
  }

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

  /** The inventory entries of the tokens that work now. */
  liveTokens(): InventoryEntry[] {
    const now = unixSeconds(this.clock);
    return [...this.tokenEntries.values()].filter((e) => e.expiry > now && e.generation === this.core.generation);
  }

  /** Applies a snapshot of the whole state to the core, adding to what it holds. */
  load(kvs: readonly IKeyValue[]): void {
    const now = unixSeconds(this.clock);
    const grants: [number, readonly string[]][] = [];
    const blocks: Block[] = [];
    const revoked: [number, number][] = [];
    const { membership } = this;
    membership.clearMembers();
    this.revokedSerials.clear();
    this.tokenEntries.clear();
    let serials = 0;
    const damaged = this.damaged;
    this.damaged = new Set();
    for (const kv of kvs) {
      const full = kv.key.toString('utf8');
      const value = this.decode(kv, damaged);
      if (value === undefined) continue;
      switch (value.kind) {
        case 'key':
          this.applyKey(value.key);
          break;
        case 'password':
          this.applyPassword(value, String(kv.mod_revision));
          break;
        case 'serials':
          serials = value.next;
          break;
        case 'grant':
          grants.push([value.id, value.entries]);
          break;
        case 'block':
          blocks.push(value);
          break;
        case 'revoked':
          revoked.push([value.serial, value.expiry]);
          break;
        case 'token':
          this.tokenEntries.set(value.entry.serial, value.entry);
          break;
        case 'member':
          membership.setMember(full, value.applied, value.follower, String(kv.lease), value.limitShare);
          break;
        case 'other':
          break;
      }
    }
    if (this.key === '') throw new FleetError(`the fleet ${this.name} has no token key in etcd`);
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
    // After the blocks and revocations: an end already due is refused in the core at once.
    for (const entry of this.tokenEntries.values()) this.ends.add(entry);
  }

  /**
   * The key `kv` decoded, or undefined for a damaged one that no gateway needs to verify:
   * it is skipped (reported unless it is in `known`, the damaged keys already reported).
   * A member key that is damaged still counts as a member that has applied nothing, so
   * that no barrier passes it by; its gateway's next publish writes it whole. Throws
   * DamagedKeyError for a damaged key that verification needs.
   */
  private decode(kv: IKeyValue, known: ReadonlySet<string>): FleetValue | undefined {
    const full = kv.key.toString('utf8');
    try {
      return fleetValue(this.keys, full, kv.value.toString('utf8'));
    } catch (error) {
      if (!(error instanceof DamagedKeyError) || verifiesWith(error.kind)) throw error;
      if (!known.has(full)) this.log.warn(error.message, { cluster: this.name, key: full });
      this.damaged.add(full);
      if (error.kind === 'token' && error.number !== undefined) this.tokenEntries.delete(error.number);
      if (error.kind === 'member') this.membership.setMember(full, 0, false, String(kv.lease));
      return undefined;
    }
  }

  /** What a deleted key was; a name no gateway writes, such as a damaged one, was nothing it holds. */
  private deletedKey(full: string): ReturnType<typeof fleetKey> {
    try {
      return fleetKey(this.keys, full);
    } catch (error) {
      if (error instanceof DamagedKeyError) return { kind: 'other' };
      throw error;
    }
  }

  private applyKey(value: string): void {
    if (this.key === value) return;
    if (this.key !== '') {
      // The fleet was reset under this gateway (its keys deleted and seeded anew): every
      // token it knows means nothing there. Only a restart may take the new state.
      this.fatal("the fleet's token key changed under this gateway (the fleet was reset); restart api-auth to join it anew");
      return;
    }
    const key = Buffer.from(value, 'base64');
    if (key.length !== 32) throw new FleetError(`the fleet ${this.name} holds a token key of ${key.length} bytes, not 32`);
    this.core.setKey(key);
    key.fill(0);
    this.key = value;
  }

  private applyPassword({ record, generation }: { record: string; generation: number }, modRevision: string): void {
    const decoded = decodeRecord(record);
    if (decoded === undefined) throw new FleetError(`the fleet ${this.name} holds a damaged password record`);
    if (this.record !== undefined && generation <= this.core.generation) return;
    this.core.generation = generation;
    this.record = decoded;
    this.passwordRevision = modRevision;
  }

  private applyGrant(id: number, entries: readonly string[]): void {
    this.grantLists[id] = entries;
    if (id < this.core.grantCount) return;
    if (id > this.core.grantCount) throw new FleetError(`grant ${id} arrived before grant ${this.core.grantCount}`);
    const { endpoints, methods, limits } = splitGrantEntries(entries);
    if (this.core.addGrant(endpoints, methods, limits) !== id) throw new FleetError(`grant ${id} repeats an earlier grant`);
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

  applyEvents(events: readonly { type: string; kv: IKeyValue }[]): void {
    let applied = 0;
    let stateApplied: number | undefined;
    const now = unixSeconds(this.clock);
    const { membership } = this;
    for (const { type, kv } of events) {
      const revision = Number(kv.mod_revision);
      const full = kv.key.toString('utf8');
      if (type === 'Put') {
        const value = this.decode(kv, this.damaged);
        if (value === undefined) {
          // Skipped, but a state change all the same, unless it was a member's key.
          if (!full.startsWith(this.keys.prefix + 'members/')) stateApplied = Math.max(stateApplied ?? 0, revision);
          if (revision > applied) applied = revision;
          continue;
        }
        this.damaged.delete(full);
        switch (value.kind) {
          case 'member':
            membership.setMember(full, value.applied, value.follower, String(kv.lease), value.limitShare);
            break;
          case 'key':
            this.applyKey(value.key);
            break;
          case 'password':
            this.applyPassword(value, String(kv.mod_revision));
            break;
          case 'grant':
            this.applyGrant(value.id, value.entries);
            break;
          case 'block':
            this.applyBlock(value);
            break;
          case 'revoked':
            this.applyRevocation(value.serial, value.expiry, now);
            break;
          case 'token':
            this.tokenEntries.set(value.entry.serial, value.entry);
            this.ends.add(value.entry);
            break;
          case 'serials':
          case 'other':
            break;
        }
        if (value.kind !== 'member') stateApplied = Math.max(stateApplied ?? 0, revision);
      } else {
        this.damaged.delete(full);
        const key = this.deletedKey(full);
        switch (key.kind) {
          case 'member':
            membership.dropMember(full);
            break;
          case 'token':
            this.tokenEntries.delete(key.number);
            this.ends.forget(key.number);
            break;
          // Deleted by tidy() once expired: the core forgets it by its own sweep.
          case 'revoked':
            this.revokedSerials.delete(key.number);
            break;
          case 'key':
            this.fatal("the fleet's token key was deleted (the fleet was reset); restart api-auth to join it anew");
            break;
          default:
            break;
        }
        if (key.kind !== 'member') stateApplied = Math.max(stateApplied ?? 0, revision);
      }
      if (revision > applied) applied = revision;
    }
    this.membership.advanced(applied, stateApplied);
  }
}
