// The WebSocket sessions of the whole process, in one block of shared memory that every
// HTTP thread holds: how many are open (or being opened), and how many of them each
// token and each client address holds. A session is taken whole or not at all, under one
// lock, so that no two threads can each find the last place free, and a token refused
// for its share holds no place in the count.
//
// Why shares: with --ws-max-sessions alone, one token (a `1/h` one, even) could open
// every session and leave every other token a 503 (found by an attack of the hardening round). A client address is
// an IPv4 address, or an IPv6 address's /64: the least a network hands one host, so
// that a host cannot take more places by stepping through the addresses of its own /64.
//
// Each table holds at most one entry per session, in twice as many slots (a power of
// two), by linear probing from a hash seeded at random per process: the probes stay
// short whatever addresses a client picks. An entry leaves its table when its count
// falls to 0, the entries after it shifted back, so that the table never fills with
// the dead.
import { randomInt } from 'node:crypto';

/** What open() decided. */
export const enum Opening {
  Opened,
  /** --ws-max-sessions are open. */
  Full,
  /** The token holds its share. */
  TokenFull,
  /** The client address holds its share. */
  ClientFull,
}

/** The bounds: sessions in the process, and each token's and each client address's share of them. */
export interface SessionShares {
  readonly maxSessions: number;
  readonly perToken: number;
  readonly perClient: number;
}

/** A session's places: its token's serial (-1: no token) and its client address's key (clientKey). */
export interface SessionKeys {
  readonly serial: number;
  readonly client: Int32Array;
}

const TOTAL = 0;
const LOCK = 1;
const SEED = 2;
const HEADER = 4;
/** A token's slot: its count (0: empty), its serial's low and high words. */
const TOKEN_SLOT = 3;
/** A client's slot: its count (0: empty), its key's four words. */
const CLIENT_SLOT = 5;
const KEY_WORDS = 4;

/** Slots of each table for `maxSessions`: a power of two, at least twice as many. */
function capacity(maxSessions: number): number {
  let slots = 2;
  while (slots < 2 * maxSessions) slots *= 2;
  return slots;
}

/** The shared memory of a ledger for `maxSessions`, made once per process and handed to every thread. */
export function ledgerMemory(maxSessions: number): SharedArrayBuffer {
  const slots = capacity(maxSessions);
  const memory = new SharedArrayBuffer((HEADER + slots * (TOKEN_SLOT + CLIENT_SLOT)) * 4);
  new Int32Array(memory)[SEED] = randomInt(0x7fffffff);
  return memory;
}

/**
 * The key of a client address's 16 bytes (addressBytes: IPv4 as IPv4-mapped): the whole
 * of an IPv4 address, the first 64 bits of an IPv6 one.
 */
export function clientKey(address: Uint8Array): Int32Array {
  const key = new Int32Array(KEY_WORDS);
  const mapped = isMapped(address);
  for (let word = 0; word < KEY_WORDS; word++) {
    if (word >= 2 && !mapped) break;
    const at = word * 4;
    key[word] = (address[at] << 24) | (address[at + 1] << 16) | (address[at + 2] << 8) | address[at + 3];
  }
  return key;
}

function isMapped(address: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (address[i] !== 0) return false;
  return address[10] === 0xff && address[11] === 0xff;
}

/** One thread's view of the process's ledger. */
export class SessionLedger {
  private readonly words: Int32Array;
  private readonly mask: number;
  private readonly tokens = HEADER;
  private readonly clients: number;
  private readonly seed: number;
  private readonly serialKey = new Int32Array(2);

  constructor(
    memory: SharedArrayBuffer,
    readonly shares: SessionShares,
  ) {
    this.words = new Int32Array(memory);
    const slots = capacity(shares.maxSessions);
    if (this.words.length !== HEADER + slots * (TOKEN_SLOT + CLIENT_SLOT))
      throw new RangeError("the ledger's memory is not for this many sessions");
    this.mask = slots - 1;
    this.clients = HEADER + slots * TOKEN_SLOT;
    this.seed = this.words[SEED];
  }

  /** Sessions open or being opened in the process. */
  get open(): number {
    return Atomics.load(this.words, TOTAL);
  }

  /** Takes a place for a session, or says which bound it is over (and takes none). */
  take(keys: SessionKeys): Opening {
    const { words, shares } = this;
    this.lock();
    try {
      if (words[TOTAL] >= shares.maxSessions) return Opening.Full;
      let token = -1;
      if (keys.serial >= 0) {
        token = this.find(this.tokens, TOKEN_SLOT, this.serial(keys.serial));
        if (words[token] >= shares.perToken) return Opening.TokenFull;
      }
      const client = this.find(this.clients, CLIENT_SLOT, keys.client);
      if (words[client] >= shares.perClient) return Opening.ClientFull;
      if (token >= 0) this.add(token, this.serialKey);
      this.add(client, keys.client);
      words[TOTAL]++;
      return Opening.Opened;
    } finally {
      this.unlock();
    }
  }

  /** Gives back the place take() gave for the same keys. */
  give(keys: SessionKeys): void {
    this.lock();
    try {
      if (keys.serial >= 0) this.remove(this.tokens, TOKEN_SLOT, this.find(this.tokens, TOKEN_SLOT, this.serial(keys.serial)));
      this.remove(this.clients, CLIENT_SLOT, this.find(this.clients, CLIENT_SLOT, keys.client));
      this.words[TOTAL]--;
    } finally {
      this.unlock();
    }
  }

  /** The lock: held only for a few probes, by one thread at a time, so a spin is all it takes. */
  private lock(): void {
    while (Atomics.compareExchange(this.words, LOCK, 0, 1) !== 0);
  }

  private unlock(): void {
    Atomics.store(this.words, LOCK, 0);
  }

  private serial(serial: number): Int32Array {
    this.serialKey[0] = serial | 0;
    this.serialKey[1] = Math.floor(serial / 0x100000000) | 0;
    return this.serialKey;
  }

  /** The slot of `key` in the table at `base`: the word of its count, or, when it is not there, of the empty slot it would take. */
  private find(base: number, width: number, key: Int32Array): number {
    const words = this.words;
    let slot = this.home(key);
    for (;;) {
      const at = base + slot * width;
      if (words[at] === 0 || this.holds(at, key)) return at;
      slot = (slot + 1) & this.mask;
    }
  }

  private holds(at: number, key: Int32Array): boolean {
    for (let i = 0; i < key.length; i++) if (this.words[at + 1 + i] !== key[i]) return false;
    return true;
  }

  private home(key: Int32Array): number {
    let hash = this.seed;
    for (let i = 0; i < key.length; i++) {
      hash = Math.imul(hash ^ key[i], 0x9e3779b1);
      hash ^= hash >>> 15;
    }
    hash = Math.imul(hash, 0x85ebca6b);
    return (hash ^ (hash >>> 13)) & this.mask;
  }

  private add(at: number, key: Int32Array): void {
    const words = this.words;
    if (words[at] === 0) words.set(key, at + 1);
    words[at]++;
  }

  /** One place less at `at`; at 0 the entry leaves, and those after it that probed past it move back. */
  private remove(base: number, width: number, at: number): void {
    const words = this.words;
    if (words[at] === 0) return;
    if (--words[at] > 0) return;
    const length = width - 1;
    let hole = (at - base) / width;
    let next = hole;
    for (;;) {
      next = (next + 1) & this.mask;
      const from = base + next * width;
      if (words[from] === 0) break;
      const home = this.home(words.subarray(from + 1, from + 1 + length));
      // The entry at `next` stays unless the hole lies on its probe, from its home to it.
      const stays = hole <= next ? home > hole && home <= next : home > hole || home <= next;
      if (stays) continue;
      words.copyWithin(base + hole * width, from, from + width);
      words[from] = 0;
      hole = next;
    }
    words[base + hole * width] = 0;
  }
}
