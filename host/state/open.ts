// The data folder as the token service's backend, opened: created on the first start,
// locked, the core restored from its state file, the inventory from its journal, the
// usage counters from their snapshot (usage.ts).
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Logger } from '../ops/log.js';
import type { PasswordVerifier } from '../password/hash.js';
import type { Backend, InventoryEntry } from '../service/ledger.js';
import { RotationEnds } from '../service/rotation-ends.js';
import { JournalInventory } from './inventory.js';
import { FolderLedger } from './ledger.js';
import { restoreService, StateStore } from './store.js';
import { UsageSaver } from './usage.js';

export interface DataFolderSettings {
  /** Absolute path of the data folder. */
  readonly dataDir: string;
  /** Seconds. */
  readonly tokenLifetime: number;
}

/**
 * Opens the data folder of `settings.dataDir` and brings the core up from it;
 * `filePassword` is the password file's, adopted when it changed while api-auth was
 * down. Throws StateError for a data folder it cannot use.
 */
export async function openDataFolder(core: Core, settings: DataFolderSettings, filePassword: string, verifier: PasswordVerifier,
  log: Logger, clock: Clock): Promise<Backend> {
  const store = await StateStore.open(settings.dataDir, log, clock);
  let inventory: JournalInventory | undefined;
  let usage: UsageSaver | undefined;
  const close = async (): Promise<void> => {
    await usage?.close();
    await inventory?.close();
    await store.close();
  };
  try {
    const fresh = store.state === undefined;
    await restoreService(core, store, verifier, filePassword, settings.tokenLifetime, log, clock);
    const state = store.written;
    // Listed: issued under the current password, and not expired.
    const live = (e: InventoryEntry): boolean => e.generation === core.generation && e.expiry > unixSeconds(clock);
    // An entry the state beside it cannot hold (a grant it lacks, a serial never reserved) is damage.
    const valid = (e: InventoryEntry): string | undefined =>
      e.grant >= state.grants.length ? `names endpoint list ${e.grant}, which the state file does not hold`
        : e.serial >= state.serialCeiling ? 'has a serial the state file never reserved'
          : e.generation > state.generation ? 'is of a password generation the state file has not reached' : undefined;
    const ledger = new FolderLedger(core, store);
    const ends = new RotationEnds({
      refuse: (serial) => core.revokeSerial(serial),
      record: (serial, expiry) => ledger.revoke(serial, expiry),
      recorded: (serial) => ledger.isRevoked(serial),
    }, clock, log);
    inventory = await JournalInventory.open(settings.dataDir, state.key, fresh, live, valid, log, ends);
    const saver = new UsageSaver(settings.dataDir, core, inventory, clock, log);
    await saver.restore();
    saver.start();
    usage = saver;
    return { ledger, inventory, close };
  } catch (error) {
    await close();
    throw error;
  }
}
