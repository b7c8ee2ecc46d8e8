// The data folder: one state file, replaced atomically, and a lock that keeps a second
// instance out. Nothing here follows a link inside the folder, and a folder that others
// can write to is refused: either would let someone else read or choose the token key.
//
// The whole state is small (fixed fields, the distinct endpoint lists, and 16 bytes per
// revocation of a token not yet expired), so every change writes it anew: to a temporary
// file, fsynced, renamed over the old one, and the folder fsynced. A crash leaves the old
// file or the new one. Because no crash can truncate or tear the file, any file that is
// short, too long or fails its checksum is damage, and the start stops rather than guess.
import { createHash, randomBytes } from 'node:crypto';
import { constants, promises as fs, type Stats } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { StateError } from '../errors.js';

export const STATE_FILE = 'state';
export const FORMAT_VERSION = 1;
const MAGIC = Buffer.from('api-auth', 'latin1');
const HEADER = MAGIC.length + 4 + 4;
const CHECKSUM = 32;

/** Everything that must survive a restart. Secrets here are the token key and password hashes. */
export interface PersistedState {
  /** The HMAC key tokens are signed with. */
  key: Uint8Array;
  /** The password generation; only grows. */
  generation: number;
  /** argon2id record of the current service password. */
  password: string;
  /** argon2id record of the password file's content when it was last adopted. */
  filePassword: string;
  /** The longest token lifetime ever used, to bound the expiry of tokens issued before a restart. */
  maxLifetime: number;
  /** No token was issued with a serial at or above this. */
  serialCeiling: number;
  /** Serials below this belong to tokens that have all expired. */
  floor: number;
  /** Endpoint lists by grant id. */
  grants: string[][];
  /** Revoked serials of tokens not yet expired, with their expiry. */
  revocations: Map<number, number>;
}

class Writer {
  private buf = Buffer.alloc(4096);
  private at = 0;

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const bigger = Buffer.alloc(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(bigger, 0, 0, this.at);
    this.buf = bigger;
  }

  u32(v: number): void {
    this.room(4);
    this.buf.writeUInt32LE(v, this.at);
    this.at += 4;
  }

  u64(v: number): void {
    this.room(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.at);
    this.at += 8;
  }

  bytes(b: Uint8Array): void {
    this.u32(b.length);
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }

  text(s: string): void {
    this.bytes(Buffer.from(s, 'utf8'));
  }

  done(): Buffer {
    return this.buf.subarray(0, this.at);
  }
}

class Reader {
  private at = 0;
  constructor(private readonly buf: Buffer) {}

  private need(n: number): void {
    if (this.at + n > this.buf.length) throw new Error('a record runs past the end');
  }

  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.at);
    this.at += 4;
    return v;
  }

  u64(): number {
    this.need(8);
    const v = this.buf.readBigUInt64LE(this.at);
    this.at += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('a number is out of range');
    return Number(v);
  }

  bytes(): Buffer {
    const n = this.u32();
    this.need(n);
    const b = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return b;
  }

  text(): string {
    return this.bytes().toString('utf8');
  }

  end(): void {
    if (this.at !== this.buf.length) throw new Error('there are bytes after the last record');
  }
}

/** The file's bytes: magic, format version, body length, body, SHA-256 of all before it. */
export function encodeState(s: PersistedState): Buffer {
  const w = new Writer();
  w.bytes(s.key);
  w.u32(s.generation);
  w.u32(s.maxLifetime);
  w.u64(s.serialCeiling);
  w.u64(s.floor);
  w.text(s.password);
  w.text(s.filePassword);
  w.u32(s.grants.length);
  for (const g of s.grants) w.text(g.join('\n'));
  w.u32(s.revocations.size);
  for (const [serial, expiry] of s.revocations) {
    w.u64(serial);
    w.u64(expiry);
  }
  const body = w.done();
  const head = Buffer.alloc(HEADER);
  MAGIC.copy(head);
  head.writeUInt32LE(FORMAT_VERSION, MAGIC.length);
  head.writeUInt32LE(body.length, MAGIC.length + 4);
  const sum = createHash('sha256').update(head).update(body).digest();
  return Buffer.concat([head, body, sum]);
}

function damaged(path: string, why: string): StateError {
  return new StateError(`state file ${path} is damaged (${why}); restore it from a backup, ` +
    'or move it aside to start with fresh state (every token issued so far then stops working)');
}

/** Parses a state file; throws StateError naming the file and the way out. */
export function decodeState(file: Buffer, path: string): PersistedState {
  if (file.length < HEADER + CHECKSUM || !file.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw damaged(path, 'it is not an api-auth state file, or it is cut short');
  }
  const version = file.readUInt32LE(MAGIC.length);
  if (version !== FORMAT_VERSION) {
    throw new StateError(`state file ${path} has format version ${version}, which this api-auth (format ` +
      `${FORMAT_VERSION}) cannot read; run the api-auth that wrote it, or restore a backup made by this one`);
  }
  const bodyLength = file.readUInt32LE(MAGIC.length + 4);
  if (file.length !== HEADER + bodyLength + CHECKSUM) {
    throw damaged(path, `it holds ${file.length} bytes where its header announces ${HEADER + bodyLength + CHECKSUM}`);
  }
  const sum = createHash('sha256').update(file.subarray(0, HEADER + bodyLength)).digest();
  if (!sum.equals(file.subarray(HEADER + bodyLength))) throw damaged(path, 'its checksum does not match');
  try {
    const r = new Reader(file.subarray(HEADER, HEADER + bodyLength));
    const key = Uint8Array.from(r.bytes());
    const generation = r.u32();
    const maxLifetime = r.u32();
    const serialCeiling = r.u64();
    const floor = r.u64();
    const password = r.text();
    const filePassword = r.text();
    const grants: string[][] = [];
    for (let n = r.u32(); n > 0; n--) grants.push(r.text().split('\n'));
    const revocations = new Map<number, number>();
    for (let n = r.u32(); n > 0; n--) {
      const serial = r.u64();
      revocations.set(serial, r.u64());
    }
    r.end();
    return { key, generation, password, filePassword, maxLifetime, serialCeiling, floor, grants, revocations };
  } catch (e) {
    throw damaged(path, (e as Error).message);
  }
}

/**
 * Makes sure the data folder exists (created 0700) and that nobody else can change it:
 * it must belong to this process's user and be writable by nobody else, or someone
 * else could plant a link there that sends the token key to a file they read, or swap
 * in a state of their own. Returns whether it can be entered by other users, for a
 * warning. Throws StateError with the line to show.
 */
export async function prepareDataDir(dir: string): Promise<{ openToOthers: boolean }> {
  const notAFolder = (): StateError => new StateError((name) => `${name('dataDir')} ${dir} is not a folder; name a folder (it is created if missing)`);
  const cannotUse = (e: unknown): StateError => new StateError((name) => `cannot use ${name('dataDir')} ${dir} ` +
    `(${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); make it a folder this user can read and write`);
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
    throw new StateError((name) => `the data folder ${dir} belongs to user ${st.uid}, not to the user api-auth runs as (${user}), ` +
      `and whoever owns it can take the token key; chown ${user} ${dir}, or give api-auth a folder of its own with ${name('dataDir')}`);
  }
  if ((st.mode & 0o022) !== 0) {
    const who = (st.mode & 0o020) !== 0 ? ((st.mode & 0o002) !== 0 ? 'its group and by others' : 'its group') : 'others';
    throw new StateError(`the data folder ${dir} can be written by ${who} (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}), ` +
      `who could then take the token key; chmod 700 ${dir}`);
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
      throw new StateError(`${what} ${path} is a symbolic link, and api-auth never follows links in its data folder; ` +
        'put the file itself in its place');
    }
    throw new StateError(`cannot read ${what} ${path} (${code ?? (e as Error).message}); check its owner and permissions`);
  }
}

/**
 * Replaces the state file atomically and durably. Whatever holds the temporary name
 * (a crash's leftover, or a link) is removed first, and the new file is created
 * exclusively, so no link is followed; a write that fails removes its temporary file,
 * which gives back the space a full disk let it take.
 */
export async function writeState(dir: string, state: PersistedState): Promise<void> {
  const path = join(dir, STATE_FILE);
  const tmp = `${path}.tmp`;
  await unlinkIfThere(tmp);
  const file = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      await file.writeFile(encodeState(state));
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
        throw new StateError((name) => `another api-auth is using the data folder ${real}; stop it first, or give this one its own ${name('dataDir')}`);
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
  return new StateError(`cannot lock the data folder ${real} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); ` +
    'make it a folder this user can read and write, on a file system that holds Unix sockets');
}
