// The ledger of a node that keeps its state in its data folder (service/ledger.ts): each
// change is written to the state file (store.ts) before the core applies it, so a write
// that fails (a full disk) leaves the core as it was, and the next call finds it so.
import { grantEntries } from '../core/grants.js';
import type { Core } from '../core/core.js';
import type { Claims } from '../core/abi.js';
import type { PasswordRecord } from '../password/hash.js';
import type { GrantRequest, Ledger, SharedCheck } from '../service/ledger.js';
import { InvariantError } from '../api-auth-error.js';
import type { StateStore } from './store.js';

/** A node alone shares its password checks with no one: its own throttle is the whole allowance. */
const UNSHARED: SharedCheck = { succeeded() {}, abandoned() {} };

export class FolderLedger implements Ledger {
  constructor(
    private readonly core: Core,
    private readonly store: StateStore,
  ) {}

  get password(): PasswordRecord {
    return this.store.password;
  }

  beginPasswordCheck(): Promise<SharedCheck> {
    return Promise.resolve(UNSHARED);
  }

  async issue(grant: GrantRequest, now: number, lifetime: number): Promise<{ token: string; claims: Claims }> {
    // Sweeping first frees the pages of expired tokens, so the reservation sees the
    // whole window. It forgets only revocations of tokens that have all expired, which
    // nobody can tell, so it may come before a write that fails.
    this.core.sweep(now);
    const fresh = grant.id === this.core.grantCount;
    await this.store.prepareIssue(
      fresh ? { id: grant.id, endpoints: grantEntries(grant.endpoints, grant.methods, grant.limits) } : undefined,
      this.core.nextSerial + 1,
      this.core.floor,
      this.core.floor + this.core.windowSize,
      lifetime,
    );
    if (fresh && this.core.addGrant(grant.endpoints, grant.methods, grant.limits) !== grant.id)
      throw new InvariantError(`the core gave grant ${grant.id} another id`);
    return this.core.issue(grant.id, now, lifetime);
  }

  async revoke(serial: number, expiry: number): Promise<void> {
    await this.store.recordRevocation(serial, expiry);
    this.core.revokeSerial(serial);
  }

  isRevoked(serial: number): boolean {
    return this.store.written.revocations.has(serial);
  }

  grantList(id: number): readonly string[] | undefined {
    return this.store.written.grants[id];
  }

  /** `checked` is current: the service asks only in its exclusive section, and this node alone changes the password. */
  async changePassword(_checked: PasswordRecord, record: PasswordRecord): Promise<number> {
    const generation = this.core.generation + 1;
    await this.store.recordPassword(record, generation);
    this.core.bumpGeneration();
    return generation;
  }
}
