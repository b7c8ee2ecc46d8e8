// The data folder's repair (`api-auth state repair --data-dir D --accept-loss`): what a
// start refused as damaged is set aside, never deleted, and the folder is made one a start
// takes. It runs with the folder locked, so never beside a running api-auth.
//
// A damaged or missing state file cannot be rebuilt: the token key is gone. The journal
// and the usage file written with it are moved aside (`NAME.damaged-TIME`), and the next
// start creates fresh state. A damaged, cut, missing or foreign journal beside a sound
// state is copied aside, and replaced by one of a new epoch holding the entries of its
// whole groups before the damage that the state can hold; the state file records it.
import { constants, promises as fs } from 'node:fs';
import { join } from 'node:path';
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import { newCore } from '../core/module.js';
import { StateError } from '../errors.js';
import type { Logger } from '../ops/log.js';
import { STATE_FILE, syncFolder } from './data-folder.js';
import { keepable, readInventory } from './inventory.js';
import { Journal } from './journal.js';
import { JOURNAL_FILE } from './journal-format.js';
import { salvageJournal } from './journal-read.js';
import { entryProblem, WRITTEN_WITH_STATE } from './open.js';
import { newEpoch, restoreCore, StateStore } from './store.js';
import type { ServiceState } from './store.js';

/** What a repair did: the files set aside (from, to), and the tokens the new journal lists. */
export interface RepairReport {
  readonly movedAside: readonly { readonly from: string; readonly to: string }[];
  /** Undefined when no journal was written. */
  readonly keptEntries: number | undefined;
  /** Why: the start's refusal it answers; undefined when there was nothing to repair. */
  readonly reason: string | undefined;
}

/**
 * Repairs the data folder `dir` (which must exist): see the file's head. Throws StateError
 * for a folder it cannot use or lock (a running api-auth holds it), or a file it must not
 * touch (one of a newer format, one it cannot read).
 */
export async function repairDataFolder(dir: string, log: Logger, clock: Clock): Promise<RepairReport> {
  try {
    if (!(await fs.stat(dir)).isDirectory()) throw new Error('not a folder');
  } catch {
    throw new StateError(`the data folder ${dir} is not there, or is not a folder; name the --data-dir the node runs with`);
  }
  const opened = await StateStore.openLocked(dir, log, clock);
  const { store } = opened;
  const stamp = new Date(clock()).toISOString();
  try {
    const state = store.state;
    const damage = opened.damage ?? (state === undefined ? undefined : restoreDamage(state, store.path, clock));
    if (state === undefined || damage !== undefined) {
      const names = damage === undefined ? WRITTEN_WITH_STATE : [STATE_FILE, ...WRITTEN_WITH_STATE];
      const movedAside = [];
      for (const name of names) {
        const moved = await moveAside(dir, name, stamp);
        if (moved !== undefined) movedAside.push(moved);
      }
      if (movedAside.length > 0) await syncFolder(dir);
      const reason = damage?.message ?? (movedAside.length > 0 ? `state file ${store.path} is missing` : undefined);
      return { movedAside, keptEntries: undefined, reason };
    }
    const valid = entryProblem(state);
    try {
      await readInventory(dir, state.key, state.journal, valid);
      return { movedAside: [], keptEntries: undefined, reason: undefined };
    } catch (e) {
      if (!(e instanceof StateError && e.damage)) throw e;
      const kept = keepable((await salvageJournal(dir, state.key)) ?? [], valid);
      // Copied, not moved: until the new journal is renamed over it, a crash leaves the old one in place.
      const copied = await copyAside(dir, JOURNAL_FILE, stamp);
      const journal = await Journal.create(dir, state.key, newEpoch(), 1, kept);
      await journal.close();
      await store.recordJournal(journal.mark!);
      return { movedAside: copied === undefined ? [] : [copied], keptEntries: kept.length, reason: e.message };
    }
  } finally {
    await store.close();
  }
}

/** What a start's restore of the core would refuse in `state` (an endpoint list, the serial range, a revocation); undefined when nothing. */
function restoreDamage(state: ServiceState, path: string, clock: Clock): StateError | undefined {
  try {
    restoreCore(newCore(), state, unixSeconds(clock), path);
    return undefined;
  } catch (e) {
    if (e instanceof StateError && e.damage) return e;
    throw e;
  }
}

function asideName(dir: string, name: string, stamp: string): { from: string; to: string } {
  return { from: join(dir, name), to: join(dir, `${name}.damaged-${stamp}`) };
}

/** Renames `name` aside, never over a file (link, then unlink); undefined when it is not there. */
async function moveAside(dir: string, name: string, stamp: string): Promise<{ from: string; to: string } | undefined> {
  const moved = asideName(dir, name, stamp);
  try {
    await fs.link(moved.from, moved.to);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  await fs.unlink(moved.from);
  return moved;
}

/** Copies `name` aside, synced, never over a file; undefined when it is not there. */
async function copyAside(dir: string, name: string, stamp: string): Promise<{ from: string; to: string } | undefined> {
  const copied = asideName(dir, name, stamp);
  try {
    await fs.copyFile(copied.from, copied.to, constants.COPYFILE_EXCL);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  const file = await fs.open(copied.to, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    await file.sync();
  } finally {
    await file.close();
  }
  await syncFolder(dir);
  return copied;
}
