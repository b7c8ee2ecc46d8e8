// The data folder: one state file, replaced atomically, beside the journal and the lock
// (lock.ts). Nothing here follows a link inside the folder, and a folder that others can
// write to is refused: either would let someone else read or choose the token key.
//
// The whole state is small (fixed fields, the distinct endpoint lists, and 16 bytes per
// revocation of a token not yet expired), so every change writes it anew: to a temporary
// file, fsynced, renamed over the old one, and the folder fsynced. A crash leaves the old
// file or the new one.
import { constants, promises as fs, type Stats } from 'node:fs';
import { join } from 'node:path';
import { StateError } from '../errors.js';
import { writersOf } from '../file-rules.js';
import { decodeState, encodeState } from './codec.js';
import type { PersistedState } from './codec.js';

/** The state file's name in the data folder. */
export const STATE_FILE = 'state';

/**
 * Makes sure the data folder exists (created 0700) and that nobody else can change it:
 * it must belong to this process's user and be writable by nobody else, or someone
 * else could plant a link there that sends the token key to a file they read, or swap
 * in a state of their own. Returns whether it can be entered by other users, for a
 * warning. Throws StateError with the line to show.
 */
export async function prepareDataDir(dir: string): Promise<{ openToOthers: boolean }> {
  const notAFolder = (): StateError =>
    new StateError((name) => `${name('dataDir')} ${dir} is not a folder; name a folder (it is created if missing)`);
  const cannotUse = (e: unknown): StateError =>
    new StateError(
      (name) =>
        `cannot use ${name('dataDir')} ${dir} ` +
        `(${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); make it a folder this user can read and write`,
    );
  let st: Stats;
  try {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    st = await fs.stat(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') throw notAFolder();
    throw cannotUse(e);
  }
  if (!st.isDirectory()) throw notAFolder();
  const user = process.geteuid?.();
  if (user !== undefined && st.uid !== user) {
    throw new StateError(
      (name) =>
        `the data folder ${dir} belongs to user ${st.uid}, not to the user api-auth runs as (${user}), ` +
        `and whoever owns it can take the token key; chown ${user} ${dir}, or give api-auth a folder of its own with ${name('dataDir')}`,
    );
  }
  if ((st.mode & 0o022) !== 0) {
    const who = writersOf(st.mode);
    throw new StateError(
      `the data folder ${dir} can be written by ${who} (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}), ` +
        `who could then take the token key; chmod 700 ${dir}`,
    );
  }
  try {
    await fs.access(dir, constants.R_OK | constants.W_OK | constants.X_OK);
  } catch (e) {
    throw cannotUse(e);
  }
  return { openToOthers: (st.mode & 0o077) !== 0 };
}

/**
 * Reads the state file, or undefined when the folder has none yet. A link is never
 * followed: a state read from elsewhere could carry a key someone else knows.
 */
export async function readState(dir: string): Promise<PersistedState | undefined> {
  const path = join(dir, STATE_FILE);
  const file = await readDataFile(path, 'state file');
  return file === undefined ? undefined : decodeState(file, path);
}

/**
 * A file of the data folder (`what` names it in errors), or undefined when it is missing.
 * A link is never followed. Throws StateError with the line to show.
 */
export async function readDataFile(path: string, what: string): Promise<Buffer | undefined> {
  try {
    const handle = await fs.open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') {
      throw new StateError(
        `${what} ${path} is a symbolic link, and api-auth never follows links in its data folder; ` + 'put the file itself in its place',
      );
    }
    throw new StateError(`cannot read ${what} ${path} (${code ?? (e as Error).message}); check its owner and permissions`);
  }
}

/** Replaces the state file atomically and durably (writeDataFile). */
export async function writeState(dir: string, state: PersistedState): Promise<void> {
  await writeDataFile(dir, STATE_FILE, encodeState(state));
}

/**
 * Replaces the file `name` of the data folder atomically and durably. Whatever holds the
 * temporary name (a crash's leftover, or a link) is removed first, and the new file is
 * created exclusively, so no link is followed; a write that fails removes its temporary
 * file, which gives back the space a full disk let it take.
 */
export async function writeDataFile(dir: string, name: string, bytes: Uint8Array): Promise<void> {
  const path = join(dir, name);
  const tmp = `${path}.tmp`;
  await unlinkIfThere(tmp);
  const file = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    await fs.rename(tmp, path);
  } catch (e) {
    await unlinkIfThere(tmp).catch(() => undefined);
    throw e;
  }
  await syncFolder(dir);
}

/** Makes the renames and creations in `dir` durable. */
export async function syncFolder(dir: string): Promise<void> {
  const folder = await fs.open(dir, 'r');
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
}

/** Removes `path`; one that is not there is no error. */
export async function unlinkIfThere(path: string): Promise<void> {
  try {
    await fs.unlink(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}
