// The service's durable state: what must survive a restart for tokens, revocations and
// password changes to keep their meaning. The Wasm core stays the source of truth for
// verifying tokens; this module is what the core is rebuilt from at start.
//
// Every `record*` method resolves only once its effect is durable, and callers reply
// success only after it resolves, so a crash right after a reply loses nothing.
import type { PasswordRecord } from './password-hash.js';

export interface Revocation {
  readonly serial: number;
  /** Unix seconds; after it the token is expired anyway and the record can go. */
  readonly expiry: number;
}

export interface ServiceState {
  /** The current password's hash; null before the first password is recorded. */
  readonly password: PasswordRecord | null;
  /** The password generation tokens must carry. */
  readonly generation: number;
  /** Canonical endpoint lists by grant id (ids are dense, from 0). */
  readonly grants: readonly (readonly string[])[];
  /** Revocations of tokens that may not have expired yet. */
  readonly revocations: readonly Revocation[];
  /** No token has a serial at or above this; a restart continues from it. */
  readonly serialCeiling: number;
}

export interface StateStore {
  /** Reads the durable state; the other methods need it loaded first. */
  load(): Promise<ServiceState>;
  /** The password recorded last. */
  readonly password: PasswordRecord | null;
  /** A password and the generation it starts (an initial password, or a change). */
  recordPassword(record: PasswordRecord, generation: number): Promise<void>;
  /** An endpoint list under the id the core gave it; a no-op when that id is recorded. */
  recordGrant(id: number, endpoints: readonly string[]): Promise<void>;
  recordRevocation(serial: number, expiry: number): Promise<void>;
  /** Makes sure serials below `end` may be handed out; a no-op when they already may. */
  reserveSerials(end: number): Promise<void>;
  /** Finishes pending writes and releases the store. */
  close(): Promise<void>;
}

// Reserving serials in blocks makes a reservation (one durable write once the store is
// on disk) rare; a restart skips at most one block of never-issued serials.
const SERIAL_BLOCK = 4096;

/** Holds the state in memory only: nothing survives the process. */
export class MemoryStateStore implements StateStore {
  private passwordRecord: PasswordRecord | null = null;
  private generation = 0;
  private readonly grants: string[][] = [];
  private readonly revocations = new Map<number, number>();
  // Expired revocations are dropped when the map has doubled since the last sweep, which
  // keeps it as large as the live revocations at amortised constant cost.
  private sweepAt = 1024;
  private serialCeiling = 0;
  private loaded = false;
  private closed = false;

  constructor(private readonly now: () => number = () => Math.floor(Date.now() / 1000)) {}

  get password(): PasswordRecord | null {
    return this.passwordRecord;
  }

  async load(): Promise<ServiceState> {
    this.loaded = true;
    return {
      password: this.passwordRecord,
      generation: this.generation,
      grants: this.grants.map((g) => [...g]),
      revocations: [...this.revocations].map(([serial, expiry]) => ({ serial, expiry })),
      serialCeiling: this.serialCeiling,
    };
  }

  async recordPassword(record: PasswordRecord, generation: number): Promise<void> {
    this.writable();
    if (generation < this.generation) {
      throw new Error(`password generation ${generation} is older than the recorded ${this.generation}`);
    }
    this.passwordRecord = record;
    this.generation = generation;
  }

  async recordGrant(id: number, endpoints: readonly string[]): Promise<void> {
    this.writable();
    if (id < this.grants.length) return;
    if (id !== this.grants.length) throw new Error(`grant ${id} recorded out of order (expected ${this.grants.length})`);
    this.grants.push([...endpoints]);
  }

  async recordRevocation(serial: number, expiry: number): Promise<void> {
    this.writable();
    this.revocations.set(serial, expiry);
    if (this.revocations.size >= this.sweepAt) {
      const now = this.now();
      for (const [s, e] of this.revocations) if (e <= now) this.revocations.delete(s);
      this.sweepAt = Math.max(1024, this.revocations.size * 2);
    }
  }

  async reserveSerials(end: number): Promise<void> {
    this.writable();
    if (end > this.serialCeiling) this.serialCeiling = end + SERIAL_BLOCK;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private writable(): void {
    if (!this.loaded) throw new Error('the state store was used before load()');
    if (this.closed) throw new Error('the state store is closed');
  }
}
