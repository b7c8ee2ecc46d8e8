// The service's durable state: what must survive a restart for tokens, revocations and
// password changes to keep their meaning. The Wasm core stays the source of truth for
// verifying tokens; this module is what the core is rebuilt from at start.
//
// Every `record*` method resolves only once its effect is on disk, and callers reply
// success only after it resolves, so a crash right after a reply loses nothing. A change
// is applied to a copy that replaces the current state only once written: a failed write
// changes nothing, in memory or on disk.
import { webcrypto } from 'node:crypto';
import { join } from 'node:path';
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import { REVOKE_NEVER_ISSUED } from '../core/abi.js';
import { splitGrantEntries } from '../core/grants.js';
import type { Core } from '../core/core.js';
import type { Logger } from '../ops/log.js';
import { decodeRecord, encodeRecord } from '../password/hash.js';
import type { PasswordRecord, PasswordVerifier } from '../password/hash.js';
import { InvariantError } from '../api-auth-error.js';
import { StateError } from '../errors.js';
import { EPOCH_BYTES, stateDamaged } from './codec.js';
import type { JournalMark, PersistedState } from './codec.js';
import { prepareDataDir, readState, STATE_FILE, writeState } from './data-folder.js';
import { lockDataDir } from './lock.js';

/** The state with its password records parsed. */
export interface ServiceState {
  readonly key: Uint8Array;
  readonly generation: number;
  readonly password: PasswordRecord;
  readonly filePassword: PasswordRecord;
  readonly maxLifetime: number;
  readonly serialCeiling: number;
  readonly floor: number;
  readonly grants: readonly (readonly string[])[];
  readonly revocations: ReadonlyMap<number, number>;
  /** The token journal as last compacted or at the last clean stop (journal.ts); undefined before the first. */
  readonly journal: JournalMark | undefined;
}

// Reserving serials in blocks makes the reservation's write rare; a restart skips at
// most one block of never-issued serials.
const SERIAL_BLOCK = 4096;

export class StateStore {
  private current: ServiceState | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly dir: string,
    private readonly lock: { release(): Promise<void> },
    loaded: ServiceState | undefined,
    private readonly clock: Clock,
  ) {
    this.current = loaded;
  }

  /**
   * Opens the data folder (created 0700 when missing), locks it against a second
   * instance, and reads its state. Throws StateError with the line to show. `clock`
   * tells which revocations have expired, and need not be written again.
   */
  static async open(dir: string, log: Logger, clock: Clock): Promise<StateStore> {
    const { store, damage } = await StateStore.openLocked(dir, log, clock);
    if (damage === undefined) return store;
    await store.close();
    throw damage;
  }

  /**
   * Opens and locks the data folder as `open` does, but a state file that is there and
   * damaged is no error: the store then holds no state, and `damage` says what is wrong
   * (for the repair, which sets the file aside).
   */
  static async openLocked(dir: string, log: Logger, clock: Clock): Promise<{ store: StateStore; damage: StateError | undefined }> {
    const { openToOthers } = await prepareDataDir(dir);
    if (openToOthers) log.warn('the data folder can be entered by other users; chmod 700 it', { path: dir });
    const lock = await lockDataDir(dir);
    try {
      const stored = await readState(dir);
      return {
        store: new StateStore(dir, lock, stored === undefined ? undefined : parse(stored, join(dir, STATE_FILE)), clock),
        damage: undefined,
      };
    } catch (e) {
      if (e instanceof StateError && e.damage) return { store: new StateStore(dir, lock, undefined, clock), damage: e };
      await lock.release();
      throw e;
    }
  }

  /** The state file's path, for messages. */
  get path(): string {
    return join(this.dir, STATE_FILE);
  }

  /** The state as last written; undefined for a data folder that has none yet. */
  get state(): ServiceState | undefined {
    return this.current;
  }

  /** The state as last written, once there is one (restoreService makes it at start). */
  get written(): ServiceState {
    if (this.current === undefined) throw new InvariantError('the state store has no state yet');
    return this.current;
  }

  /** The current password's record. */
  get password(): PasswordRecord {
    return this.written.password;
  }

  /** Writes the first state of a new data folder. */
  create(state: ServiceState): Promise<void> {
    return this.enqueue(async () => {
      if (this.current !== undefined) throw new InvariantError('the data folder has a state already');
      await this.write(state);
    });
  }

  /**
   * A new password and the generation it starts: a change through the API, or the
   * password file's new content adopted at start (`fromFile`).
   */
  recordPassword(record: PasswordRecord, generation: number, fromFile = false): Promise<void> {
    return this.change((s) => {
      if (generation <= s.generation) throw new InvariantError(`password generation ${generation} does not follow ${s.generation}`);
      return { ...s, password: record, generation, ...(fromFile ? { filePassword: record } : {}) };
    });
  }

  /** A revoked token, kept until its expiry; nothing to write when it is recorded. */
  recordRevocation(serial: number, expiry: number): Promise<void> {
    return this.change((s) => {
      if (s.revocations.get(serial) === expiry) return undefined;
      const revocations = new Map(s.revocations);
      revocations.set(serial, expiry);
      return { ...s, revocations };
    });
  }

  /**
   * What issuing a token needs on disk before the core may issue it, in one write at
   * most: its endpoint list when the core does not hold it yet (under the id the core
   * will give it), and serials below `end`, reserved up to a block more but never past
   * `limit` (the end of the core's window), together with the core's floor, so that a
   * restart restores a range the window holds; and `lifetime`, the token's, when it is
   * longer than any before, so that a restart knows by when every issued token expires.
   */
  prepareIssue(
    grant: { id: number; endpoints: readonly string[] } | undefined,
    end: number,
    floor: number,
    limit: number,
    lifetime: number,
  ): Promise<void> {
    return this.change((s) => {
      let next = s;
      if (lifetime > s.maxLifetime) next = { ...next, maxLifetime: lifetime };
      if (grant !== undefined) {
        if (grant.id !== s.grants.length) throw new InvariantError(`grant ${grant.id} recorded out of order (expected ${s.grants.length})`);
        next = { ...next, grants: [...s.grants, [...grant.endpoints]] };
      }
      if (end > s.serialCeiling) {
        const serialCeiling = Math.min(end - 1 + SERIAL_BLOCK, limit);
        if (serialCeiling >= end) next = { ...next, serialCeiling, floor: Math.max(s.floor, floor) };
      }
      return next === s ? undefined : next;
    });
  }

  /**
   * What the token journal holds now, every byte of it acknowledged: after a compaction
   * and at a clean stop. A start then refuses a journal that holds less.
   */
  recordJournal(mark: JournalMark): Promise<void> {
    return this.change((s) => {
      const was = s.journal;
      if (was !== undefined && Buffer.from(was.epoch).equals(mark.epoch) && was.seq === mark.seq && was.bytes === mark.bytes)
        return undefined;
      return { ...s, journal: mark };
    });
  }

  /** The longest token lifetime used, which bounds the expiry of tokens issued before a restart. */
  recordLifetime(seconds: number): Promise<void> {
    return this.change((s) => (seconds <= s.maxLifetime ? undefined : { ...s, maxLifetime: seconds }));
  }

  /** Finishes pending writes and releases the folder. */
  async close(): Promise<void> {
    await this.queue.catch(() => undefined);
    await this.lock.release();
  }

  /** Derives the next state from the written one; undefined when nothing changes. */
  private change(next: (s: ServiceState) => ServiceState | undefined): Promise<void> {
    return this.enqueue(async () => {
      const changed = next(this.written);
      if (changed !== undefined) await this.write(changed);
    });
  }

  /** Writes a state, and adopts it once it is on disk. */
  private async write(s: ServiceState): Promise<void> {
    const compacted = dropExpired(s, unixSeconds(this.clock));
    await writeState(this.dir, serialise(compacted));
    this.current = compacted;
  }

  /** One change at a time, in call order. */
  private enqueue(work: () => Promise<void>): Promise<void> {
    const run = this.queue.then(work);
    this.queue = run.catch(() => undefined);
    return run;
  }
}

/** A new journal epoch: a random id, so that no other data folder's journal, and no journal before a repair, shares it. */
export function newEpoch(): Uint8Array {
  return webcrypto.getRandomValues(new Uint8Array(EPOCH_BYTES));
}

/** The mark of a journal not written yet: a start may find none. */
export function emptyJournal(epoch: Uint8Array): JournalMark {
  return { epoch, seq: 0, groups: 0, bytes: 0 };
}

/** Revocations of tokens that have expired are kept no longer. */
function dropExpired(s: ServiceState, now: number): ServiceState {
  let expired = 0;
  for (const expiry of s.revocations.values()) if (expiry <= now) expired++;
  if (expired === 0) return s;
  const revocations = new Map<number, number>();
  for (const [serial, expiry] of s.revocations) if (expiry > now) revocations.set(serial, expiry);
  return { ...s, revocations };
}

function serialise(s: ServiceState): PersistedState {
  return {
    key: s.key,
    generation: s.generation,
    password: encodeRecord(s.password),
    filePassword: encodeRecord(s.filePassword),
    maxLifetime: s.maxLifetime,
    serialCeiling: s.serialCeiling,
    floor: s.floor,
    grants: s.grants.map((g) => [...g]),
    revocations: new Map(s.revocations),
    journal: s.journal,
  };
}

function parse(p: PersistedState, path: string): ServiceState {
  const password = decodeRecord(p.password);
  const filePassword = decodeRecord(p.filePassword);
  if (password === undefined || filePassword === undefined || p.key.length !== 32 || p.floor > p.serialCeiling) {
    throw stateDamaged(path, 'its records do not hold together');
  }
  return { ...p, password, filePassword };
}

/**
 * Rebuilds the core from a stored state: key, generation, grants in id order, the serial
 * range, and the revocations that still matter at `now`.
 */
export function restoreCore(core: Core, s: ServiceState, now: number, path: string): void {
  const damaged = (why: string) => stateDamaged(path, why);
  core.setKey(s.key);
  core.generation = s.generation;
  s.grants.forEach((entries, id) => {
    let got: number;
    try {
      const { endpoints, methods, limits } = splitGrantEntries(entries);
      got = core.addGrant(endpoints, methods, limits);
    } catch {
      throw damaged(`endpoint list ${id} is not valid`);
    }
    if (got !== id) throw damaged(`endpoint list ${id} repeats list ${got}`);
  });
  if (s.serialCeiling - s.floor > core.windowSize) throw damaged('its serial range is wider than the revocation window');
  // Every token issued before now expires by now plus the longest lifetime ever used.
  core.restoreSerials(s.floor, s.serialCeiling, now + s.maxLifetime);
  for (const [serial, expiry] of s.revocations) {
    if (expiry > now && core.revokeSerial(serial) === REVOKE_NEVER_ISSUED) throw damaged(`revoked serial ${serial} was never issued`);
  }
}

/**
 * Brings the core up at start: from the stored state, or as a new node with a random
 * key. A password file whose content changed while the program was down is the
 * operator's reset: its password is adopted in a new generation, so every earlier token
 * stops working. Passwords set through the API are kept while the file is unchanged.
 */
export async function restoreService(
  core: Core,
  store: StateStore,
  verifier: PasswordVerifier,
  filePassword: string,
  lifetime: number,
  log: Logger,
  clock: Clock,
): Promise<void> {
  const stored = store.state;
  if (stored === undefined) {
    const key = webcrypto.getRandomValues(new Uint8Array(32));
    core.setKey(key);
    const record = await verifier.hash(filePassword);
    // The journal's epoch is written with the state: a journal of another epoch is not this state's.
    await store.create({
      key,
      generation: 0,
      password: record,
      filePassword: record,
      maxLifetime: lifetime,
      serialCeiling: 0,
      floor: 0,
      grants: [],
      revocations: new Map(),
      journal: emptyJournal(newEpoch()),
    });
    log.info('created the state file', { path: store.path });
    return;
  }
  restoreCore(core, stored, unixSeconds(clock), store.path);
  if (!(await verifier.verify(filePassword, stored.filePassword))) {
    const generation = core.generation + 1;
    await store.recordPassword(await verifier.hash(filePassword), generation, true);
    core.bumpGeneration();
    log.warn(
      'the password file changed while api-auth was down: its password is now the service password, ' +
        'and every token issued before is invalid',
      { generation },
    );
  }
  await store.recordLifetime(lifetime);
}
