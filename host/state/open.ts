// The data folder as the token service's backend, opened: created on the first start,
// locked, the core restored from its state file, the inventory from its journal, the
// usage counters from their snapshot (usage.ts).
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Logger } from '../ops/log.js';
import type { PasswordVerifier } from '../password/hash.js';
import type { Backend, InventoryEntry } from '../service/ledger.js';
import { StateError } from '../errors.js';
import { RotationEnds } from '../service/rotation-ends.js';
import { repairCommand } from './codec.js';
import { JournalInventory, readInventory } from './inventory.js';
import type { InventoryRead } from './inventory.js';
import { JOURNAL_FILE } from './journal-format.js';
import type { ServiceState } from './store.js';
import { FolderLedger } from './ledger.js';
import { restoreService, StateStore } from './store.js';
import { USAGE_FILE, UsageSaver } from './usage.js';
import { HISTORY_FILE, HISTORY_JOURNAL, HistoryFile } from './usage-history.js';
import type { UsageHistory } from '../service/usage-history.js';

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
export async function openDataFolder(
  core: Core,
  settings: DataFolderSettings,
  filePassword: string,
  verifier: PasswordVerifier,
  log: Logger,
  clock: Clock,
  history?: UsageHistory,
): Promise<Backend> {
  const store = await StateStore.open(settings.dataDir, log, clock);
  let inventory: JournalInventory | undefined;
  let usage: UsageSaver | undefined;
  const close = async (): Promise<void> => {
    await usage?.close();
    await inventory?.close();
    await store.close();
  };
  try {
    // Everything is read and checked before anything is written: a start that refuses
    // leaves every file as it found it, for the repair (or a backup) to work on.
    const stored = store.state;
    let read: InventoryRead = { contents: undefined, entries: [] };
    if (stored === undefined) await refuseOrphans(settings.dataDir, store.path);
    else read = await readInventory(settings.dataDir, stored.key, stored.journal, entryProblem(stored));
    await restoreService(core, store, verifier, filePassword, settings.tokenLifetime, log, clock);
    const state = store.written;
    // Listed: issued under the current password, and not expired.
    const live = (e: InventoryEntry): boolean => e.generation === core.generation && e.expiry > unixSeconds(clock);
    const ledger = new FolderLedger(core, store);
    const ends = new RotationEnds(
      {
        refuse: (serial) => core.revokeSerial(serial),
        record: (serial, expiry) => ledger.revoke(serial, expiry),
        recorded: (serial) => ledger.isRevoked(serial),
      },
      clock,
      log,
    );
    inventory = await JournalInventory.open(
      settings.dataDir,
      state.key,
      read,
      state.journal,
      live,
      (mark) => store.recordJournal(mark),
      log,
      ends,
    );
    const opened = inventory;
    const historyFile = history && new HistoryFile(settings.dataDir, history, log);
    await historyFile?.restore((serial) => opened.get(serial) !== undefined);
    const saver = new UsageSaver(settings.dataDir, core, inventory, clock, log, historyFile);
    await saver.restore();
    saver.start();
    usage = saver;
    return { ledger, inventory, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * What in an entry the state `state` cannot hold (a grant it lacks, a serial never
 * reserved, a generation not reached): that is damage. Undefined for an entry it can.
 */
export function entryProblem(state: ServiceState): (e: InventoryEntry) => string | undefined {
  return (e) =>
    e.grant >= state.grants.length
      ? `names endpoint list ${e.grant}, which the state file does not hold`
      : e.serial >= state.serialCeiling
        ? 'has a serial the state file never reserved'
        : e.generation > state.generation
          ? 'is of a password generation the state file has not reached'
          : undefined;
}

/** The files of a data folder written only once it has a state file: one of them without it means the state file was lost. */
export const WRITTEN_WITH_STATE: readonly string[] = [JOURNAL_FILE, USAGE_FILE, HISTORY_FILE, HISTORY_JOURNAL];

/**
 * Refuses a data folder whose state file is gone while files written with it are there:
 * a new state would be a new token key, every token of the old one invalid, and its
 * journal replaced.
 */
async function refuseOrphans(dir: string, statePath: string): Promise<void> {
  const found: string[] = [];
  for (const name of WRITTEN_WITH_STATE) {
    try {
      await lstat(join(dir, name));
      found.push(join(dir, name));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  if (found.length === 0) return;
  throw new StateError(
    `state file ${statePath} is missing, but ${found.join(' and ')} ${found.length > 1 ? 'are' : 'is'} there, ` +
      'written with it: a new state would be a new token key, and every token issued so far would stop working; put the state ' +
      `file back from a backup of the data folder, or run ${repairCommand(dir)} to move ${found.length > 1 ? 'them' : 'it'} aside ` +
      'and start with fresh state',
  );
}
