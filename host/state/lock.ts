// The lock of the data folder: a listening Unix socket in the folder, which keeps a
// second api-auth out (lockDataDir says how, and why so).
import { randomBytes } from 'node:crypto';
import { constants, promises as fs, type Stats } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { StateError } from '../errors.js';
import { unlinkIfThere } from './data-folder.js';

/** How a lock name is spelled: `lock.` and a decimal number. */
const LOCK_NAME = /^lock\.(0|[1-9][0-9]{0,14})$/;
/** A starter's socket before it has a lock name. */
const NEW_LOCK_NAME = /^lock\.new-[0-9a-f]{16}$/;
/** The longest socket path the kernel takes (sun_path holds 108 bytes with the final NUL). */
const MAX_SOCKET_PATH = 107;
/** Rounds of a start that keeps meeting other starts before it gives up. */
const LOCK_ROUNDS = 64;

type Probe = 'live' | 'dead' | 'gone';

/**
 * Holds the data folder for this process. At most one process holds a folder, whichever
 * network namespace, container or path it reaches the folder by, and a crash leaves
 * nothing that blocks the next start.
 *
 * The hold is a listening Unix socket in the folder itself, named `lock.N`. A socket
 * file is found through the file system, so connect() reaches it from every network
 * namespace that sees the folder (an abstract socket, the lock before this one, exists
 * in one network namespace only: two containers sharing a volume each got one). Whether
 * its holder lives is the kernel's answer: a connection to the socket of a process that
 * died, even by SIGKILL, is refused at once, and a live one's never is. A crash leaves a
 * file, never a hold.
 *
 * Removing a dead socket file to bind the name anew would race: two starters both find
 * it dead, and the slower one removes the faster one's fresh socket. So names are never
 * reused. A starter listens on a name of its own, finds the highest `lock.N`, and if
 * there is none or it is dead, links its socket (listening already) as `lock.N+1`; link()
 * fails when the name exists, so of two starters one gets it. It then holds only if no
 * higher name appeared meanwhile (it backs off and starts over otherwise). A holder
 * removes the lower names, and at a clean stop its own name, before it stops listening:
 * a starter then finds the name gone (and looks again) or live, never dead, so no one
 * links the name above it on the strength of a holder that has left. While a holder lives,
 * its name stays the highest: a higher one could be linked only by a starter that saw the
 * holder's socket refuse a connection. A crash leaves its name, which the next holder
 * removes.
 *
 * Two hosts sharing the folder over a network file system do not see each other's
 * sockets: one folder must not be used from two machines.
 */
export async function lockDataDir(dir: string): Promise<{ release(): Promise<void> }> {
  const real = await fs.realpath(dir);
  const folder = await fs.open(real, constants.O_RDONLY | constants.O_DIRECTORY);
  // A path too long for a socket address goes through the folder's descriptor (Linux),
  // since Node would otherwise cut it short and bind somewhere else.
  const address = (name: string): string => {
    const path = join(real, name);
    return Buffer.byteLength(path) <= MAX_SOCKET_PATH ? path : `/proc/self/fd/${folder.fd}/${name}`;
  };
  const own = `lock.new-${randomBytes(8).toString('hex')}`;
  const server: Server = createServer((socket) => socket.destroy());
  let identity: Stats;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) => reject(cannotLock(real, e)));
      server.listen(address(own), () => resolve());
    });
    let held: string;
    try {
      held = join(real, `lock.${await claim(real, own, address)}`);
      // The socket file's identity: the name is removed at the stop only while it is still this file.
      identity = await fs.lstat(held);
    } finally {
      await unlinkIfThere(join(real, own)).catch(() => undefined);
    }
    server.unref();
    return { release: () => releaseLock(server, held, identity) };
  } catch (e) {
    server.close();
    throw e;
  } finally {
    await folder.close();
  }
}

/** Removes the lock's name if it is still our socket file (a 0755 socket left behind is clutter), then stops listening. */
async function releaseLock(server: Server, path: string, identity: Stats): Promise<void> {
  try {
    const now = await fs.lstat(path);
    if (now.ino === identity.ino && now.dev === identity.dev) await fs.unlink(path);
  } catch {
    // A name left in place is only clutter: the next start finds its socket dead and removes it.
  }
  server.close();
}

/** Links the socket named `own` as the next lock name, once every lock name below is dead; returns its number. */
async function claim(real: string, own: string, address: (name: string) => string): Promise<number> {
  for (let round = 0; round < LOCK_ROUNDS; round++) {
    const top = highestLock(await listFolder(real));
    if (top !== undefined) {
      const found = await probe(address(`lock.${top}`));
      if (found === 'live') {
        throw new StateError(
          (name) => `another api-auth is using the data folder ${real}; stop it first, or give this one its own ${name('dataDir')}`,
        );
      }
      if (found === 'gone') continue;
    }
    const mine = top === undefined ? 0 : top + 1;
    try {
      await fs.link(join(real, own), join(real, `lock.${mine}`));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw cannotLock(real, e);
    }
    const names = await listFolder(real);
    if (highestLock(names) !== mine) {
      await unlinkIfThere(join(real, `lock.${mine}`)).catch(() => undefined);
      continue;
    }
    // Held. The lower names are dead (or starters' that will see this one and back off);
    // so are the sockets of starters that died before linking theirs.
    for (const name of names) {
      const n = lockNumber(name);
      const stale = n !== undefined ? n < mine : NEW_LOCK_NAME.test(name) && name !== own && (await probe(address(name))) === 'dead';
      if (stale) await unlinkIfThere(join(real, name)).catch(() => undefined);
    }
    return mine;
  }
  throw new StateError(`cannot lock the data folder ${real}: other api-auth processes keep starting on it; start one at a time`);
}

async function listFolder(real: string): Promise<string[]> {
  try {
    return await fs.readdir(real);
  } catch (e) {
    throw cannotLock(real, e);
  }
}

function lockNumber(name: string): number | undefined {
  const match = LOCK_NAME.exec(name);
  return match === null ? undefined : Number(match[1]);
}

function highestLock(names: readonly string[]): number | undefined {
  let top: number | undefined;
  for (const name of names) {
    const n = lockNumber(name);
    if (n !== undefined && (top === undefined || n > top)) top = n;
  }
  return top;
}

/**
 * Whether a process listens on the socket at `path`: refused means dead, a missing name
 * is gone, and anything else (a full backlog) counts as live, which errs on the safe side.
 */
function probe(path: string): Promise<Probe> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    socket.once('connect', () => {
      socket.destroy();
      resolve('live');
    });
    socket.once('error', (e: NodeJS.ErrnoException) => {
      socket.destroy();
      resolve(e.code === 'ECONNREFUSED' ? 'dead' : e.code === 'ENOENT' ? 'gone' : 'live');
    });
  });
}

function cannotLock(real: string, e: unknown): StateError {
  return new StateError(
    `cannot lock the data folder ${real} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); ` +
      'make it a folder this user can read and write, on a file system that holds Unix sockets',
  );
}
