// Which clients must wait before their next password check, published by the owner's
// throttle in shared memory, so that every HTTP thread refuses them from the request's
// head, as one thread does: a waiting guesser's flood costs a header parse each, its body
// is never read, and none of it reaches the owner's thread, which also accepts every
// connection.
//
// The board only ever says less than the throttle: each time it holds is one the
// throttle computed at or before the moment it was written (ThrottleWatcher), a client
// that does not fit is simply not on it, and an entry being written is skipped. A client
// the board lets through still meets the throttle itself on the owner (owner-auth.ts),
// with the same refusal; so the board makes refusals cheap and never makes one the
// throttle would not.
//
// Layout, all 32-bit words read and written with Atomics, one writer (the owner):
//   the overall time: [sequence, unused, high, low]
//   SLOTS entries:    [sequence, key length, high, low, key bytes (KEY_BYTES)]
// A time is ms since the epoch, split in two words. A sequence is odd while its entry is
// written: a reader that sees it odd, or changed by the end of its read, skips the entry.
import type { ThrottleWatcher } from '../service/throttle.js';
import { clientKey } from '../service/throttle.js';

const SLOTS = 16384;
/** An entry lives within this many slots of its key's hash; a key that finds no room there is not published. */
const PROBES = 16;
/** IPv4 addresses and IPv6 /64 prefixes, the keys the throttle uses, are shorter. */
const KEY_BYTES = 32;
const KEY_WORDS = KEY_BYTES / 4;
const ENTRY_WORDS = 4 + KEY_WORDS;
const HEADER_WORDS = 4;
const SEQ = 0;
const LENGTH = 1;
const HIGH = 2;
const LOW = 3;
const KEY = 4;
const TWO_32 = 2 ** 32;

/** The board's memory, to hand to every HTTP thread. */
export function boardMemory(): SharedArrayBuffer {
  return new SharedArrayBuffer(4 * (HEADER_WORDS + SLOTS * ENTRY_WORDS));
}

export class ThrottleBoard {
  private readonly words: Int32Array;
  // One key at a time is looked at, here: a lookup allocates nothing.
  private readonly keyBytes = new Uint8Array(KEY_BYTES);
  private readonly keyWords = new Int32Array(this.keyBytes.buffer);
  private readonly encoder = new TextEncoder();

  constructor(memory: SharedArrayBuffer) {
    this.words = new Int32Array(memory);
  }

  /** The owner's side: what its throttle's watcher writes. */
  writer(): ThrottleWatcher {
    return {
      changed: (key, clientUntil, overallUntil, at) => {
        this.write(0, overallUntil);
        this.publish(key, clientUntil, at);
      },
      forgot: (key) => this.publish(key, -Infinity, Infinity),
    };
  }

  /** Whole seconds the client at `address` must wait, as far as the board knows; 0 when it may go ahead. `now` in ms. */
  retryAfter(address: string, now: number): number {
    const wait = Math.max(this.readOverall(), this.find(clientKey(address))) - now;
    return wait > 0 ? Math.ceil(wait / 1000) : 0;
  }

  private readOverall(): number {
    const w = this.words;
    const seq = Atomics.load(w, SEQ);
    if ((seq & 1) !== 0) return 0;
    const until = Atomics.load(w, HIGH) * TWO_32 + (Atomics.load(w, LOW) >>> 0);
    return Atomics.load(w, SEQ) === seq ? until : 0;
  }

  /** The time published for `key`, or 0. */
  private find(key: string): number {
    const length = this.encode(key);
    if (length < 0) return 0;
    const w = this.words;
    const home = this.hash(length);
    for (let probe = 0; probe < PROBES; probe++) {
      const at = entry(home + probe);
      const seq = Atomics.load(w, at + SEQ);
      if ((seq & 1) !== 0 || Atomics.load(w, at + LENGTH) !== length || !this.sameKey(at)) continue;
      const until = Atomics.load(w, at + HIGH) * TWO_32 + (Atomics.load(w, at + LOW) >>> 0);
      if (Atomics.load(w, at + SEQ) === seq) return until;
    }
    return 0;
  }

  /**
   * Writes `key`'s time, or takes it off when it is not after `at` (the moment it was
   * reckoned from, at or before now); an entry whose time is not after `at` is free.
   */
  private publish(key: string, until: number, at: number): void {
    const length = this.encode(key);
    if (length < 0) return;
    const w = this.words;
    const home = this.hash(length);
    const past = (slot: number): boolean => Atomics.load(w, slot + HIGH) * TWO_32 + (Atomics.load(w, slot + LOW) >>> 0) <= at;
    let free = -1;
    for (let probe = 0; probe < PROBES; probe++) {
      const slot = entry(home + probe);
      const taken = Atomics.load(w, slot + LENGTH);
      if (taken === length && this.sameKey(slot)) {
        if (until > at) this.write(slot, until);
        else this.clear(slot);
        return;
      }
      if (free < 0 && (taken === 0 || past(slot))) free = slot;
    }
    if (free < 0 || !(until > at)) return;
    this.begin(free);
    Atomics.store(w, free + LENGTH, length);
    for (let i = 0; i < KEY_WORDS; i++) Atomics.store(w, free + KEY + i, this.keyWords[i]);
    this.store(free, until);
    this.end(free);
  }

  private write(at: number, until: number): void {
    this.begin(at);
    this.store(at, until);
    this.end(at);
  }

  private clear(at: number): void {
    this.begin(at);
    Atomics.store(this.words, at + LENGTH, 0);
    this.end(at);
  }

  private store(at: number, until: number): void {
    // Whole ms, rounded down: never later than the throttle's time.
    const ms = Math.max(0, Math.floor(until));
    Atomics.store(this.words, at + HIGH, Math.floor(ms / TWO_32));
    Atomics.store(this.words, at + LOW, ms % TWO_32);
  }

  private begin(at: number): void {
    Atomics.add(this.words, at + SEQ, 1);
  }

  private end(at: number): void {
    Atomics.add(this.words, at + SEQ, 1);
  }

  /** Puts `key` in the key buffer, zero-padded; its length, or -1 when it does not fit. */
  private encode(key: string): number {
    this.keyWords.fill(0);
    const { read, written } = this.encoder.encodeInto(key, this.keyBytes);
    return read === key.length && written > 0 ? written : -1;
  }

  private sameKey(at: number): boolean {
    for (let i = 0; i < KEY_WORDS; i++) if (Atomics.load(this.words, at + KEY + i) !== this.keyWords[i]) return false;
    return true;
  }

  /** FNV-1a over the key buffer's words: the slot a key's search starts at. */
  private hash(length: number): number {
    let h = 0x811c9dc5 ^ length;
    for (let i = 0; i < KEY_WORDS; i++) h = Math.imul(h ^ this.keyWords[i], 0x01000193);
    return h >>> 0;
  }
}

/** The first word of entry `slot` (any integer: taken modulo SLOTS). */
function entry(slot: number): number {
  return HEADER_WORDS + (slot & (SLOTS - 1)) * ENTRY_WORDS;
}
