// The one module of the host that touches the Wasm core. Everything else in the host goes
// through the `Core` class below; nothing else reads or writes Wasm memory.
//
// It is also the core's portable loader: it uses no Node built-ins, so Deno, Bun and
// browsers load it unchanged and hand it the compiled module their own way (Node code
// gets it from core/module.ts). The ABI it wraps is documented in assembly/README.md;
// abi.ts beside it holds the ABI's names and codes, grants.ts the grant encoding and
// memory.ts the threads build's memory map, none of them touching Wasm memory.
//
// It loads either build: core.wasm, each instance with its own memory, or
// core-threads.wasm, whose instances on several threads share one memory and so one
// state: one of them, the owner, sets the memory up and makes every change; the others
// attach to it and check tokens.
import { instantiateSync } from '@assemblyscript/loader';
import { MAX_WINDOW_LOG2, MIN_WINDOW_LOG2, PAGE_BYTES } from '../../assembly/memory-map.js';
import { Outcome } from '../../assembly/outcome.js';
import {
  ADMIT_QUOTA,
  ADMIT_RATE,
  ADMIT_UNKNOWN_GRANT,
  ATTACH_BAD_SLOT,
  ATTACH_NOT_READY,
  ATTACH_TAKEN,
  PASSWORD_NEEDS_ENTROPY,
  type RESERVE_EXPIRED,
  RESERVE_OUT_OF_WINDOW,
} from '../../assembly/results.js';
import { InvariantError } from '../api-auth-error.js';
import { ABI_VERSION, clearCheckRecord, GENERATED_PASSWORD_LENGTH, issueError, RESULT } from './abi.js';
import type { AdmitRecord, CheckRecord, Claims, Exports, RevokeResult } from './abi.js';
import { encodeGrant, grantRefusal } from './grants.js';
import { DEFAULT_WINDOW_LOG2, sharedMemory, sharedMemoryPages } from './memory.js';

export interface CoreOptions {
  /** The revocation window: 2^windowLog2 tokens may be live at once (12..30, default 22). */
  windowLog2?: number;
  /** Fills a buffer with cryptographically strong bytes; by default `crypto.getRandomValues`. */
  random?: (into: Uint8Array) => void;
  /**
   * Threads build: the shared memory to run over. By default a fresh one, sized by
   * `sharedMemoryPages(windowLog2, threads)`.
   */
  memory?: WebAssembly.Memory;
  /** Threads build: how many instances a fresh memory has room for, this one included (default 1). */
  threads?: number;
  /**
   * Threads build: join `memory`, already set up by its owner, as a reader in this slot
   * (1 .. slots - 1; each instance its own) rather than set it up as its owner.
   */
  slot?: number;
}

/**
 * One instance of the Wasm core. Time is passed in as Unix seconds, entropy is drawn here
 * from the platform's CSPRNG and handed to the core.
 *
 * With the threads build, instances on several threads share one state: the owner (made
 * without `slot`) sets the memory up and alone changes it; readers (made with the owner's
 * `memory` and a `slot` each) check tokens, and see each change once the owner's call
 * has returned.
 */
export class Core {
  /** The memory the state lives in; with the threads build, the one to hand to readers on other threads. */
  readonly memory: WebAssembly.Memory;
  /** Whether this instance sets up and changes the state (always, with core.wasm). */
  readonly owner: boolean;
  private readonly x: Exports;
  private bytes: Uint8Array;
  private view: DataView;
  private readonly tokenPtr: number;
  private readonly pathPtr: number;
  private readonly pathCap: number;
  private readonly ioPtr: number;
  private readonly ioCap: number;
  private readonly resultPtr: number;
  private readonly windowLog2: number;
  private detached = false;
  private readonly encoder = new TextEncoder();
  // Views of the token and path buffers, for the hot path's copies.
  private tokenView: Uint8Array;
  private pathView: Uint8Array;
  // The clock is read by callers in seconds; the i64 argument wants a BigInt, which is
  // made once per second rather than once per request.
  private lastSecond = -1;
  private lastSecondBig = 0n;

  private readonly random: (into: Uint8Array) => void;

  /**
   * An instance of `module`: build/core.wasm compiled, with its own memory and state, or
   * build/core-threads.wasm over a shared memory (see CoreOptions).
   */
  constructor(module: WebAssembly.Module, options: CoreOptions = {}) {
    this.random = options.random ?? ((into) => globalThis.crypto.getRandomValues(into));
    this.windowLog2 = options.windowLog2 ?? DEFAULT_WINDOW_LOG2;
    this.owner = options.slot === undefined;
    const threaded = WebAssembly.Module.imports(module).some((i) => i.kind === 'memory');
    if (!threaded && (options.memory !== undefined || options.threads !== undefined || !this.owner)) {
      throw new InvariantError('memory, threads and slot need the threads build of the core (core-threads.wasm)');
    }
    if (!this.owner && options.memory === undefined) throw new InvariantError('a reader needs the memory of its owner');
    const memory = threaded ? (options.memory ?? sharedMemory(this.windowLog2, options.threads ?? 1)) : undefined;
    const instance = instantiateSync<Exports>(module, memory ? { env: { memory } } : {});
    this.x = instance.exports as unknown as Exports;
    this.memory = this.x.memory;
    if (this.x.abiVersion() !== ABI_VERSION) {
      throw new InvariantError(`core ABI ${this.x.abiVersion()} is not the one this host speaks (${ABI_VERSION})`);
    }
    if (this.owner) this.init(memory);
    else this.attach(options.slot as number);
    this.tokenPtr = this.x.tokenBuffer();
    this.pathPtr = this.x.pathBuffer();
    this.pathCap = this.x.pathCapacity();
    this.ioPtr = this.x.ioBuffer();
    this.ioCap = this.x.ioCapacity();
    this.resultPtr = this.x.resultBuffer();
    this.bytes = new Uint8Array(this.x.memory.buffer);
    this.view = new DataView(this.x.memory.buffer);
    this.tokenView = new Uint8Array(this.x.memory.buffer, this.tokenPtr, this.x.tokenCapacity());
    this.pathView = new Uint8Array(this.x.memory.buffer, this.pathPtr, this.pathCap);
  }

  private init(memory: WebAssembly.Memory | undefined): void {
    if (this.x.init(this.windowLog2) === 0) return;
    if (
      memory === undefined ||
      !Number.isInteger(this.windowLog2) ||
      this.windowLog2 < MIN_WINDOW_LOG2 ||
      this.windowLog2 > MAX_WINDOW_LOG2
    ) {
      throw new InvariantError(`core init failed: windowLog2 must be an integer from ${MIN_WINDOW_LOG2} to ${MAX_WINDOW_LOG2}`);
    }
    const pages = memory.buffer.byteLength / PAGE_BYTES;
    if (pages < sharedMemoryPages(this.windowLog2)) {
      throw new InvariantError(
        `core init failed: the shared memory has ${pages} pages, fewer than sharedMemoryPages(${this.windowLog2}) = ${sharedMemoryPages(this.windowLog2)}`,
      );
    }
    throw new InvariantError('core init failed: the shared memory is set up already (attach to it with a slot)');
  }

  private attach(slot: number): void {
    const result =
      Number.isInteger(slot) && slot > 0 && slot < 2 ** 32 ? (this.x.attach as (slot: number) => number)(slot) : ATTACH_BAD_SLOT;
    if (result === 0) return;
    if (result === ATTACH_NOT_READY)
      throw new InvariantError('cannot attach: the shared memory has no core set up yet (make its owner first)');
    if (result === ATTACH_TAKEN) throw new InvariantError(`cannot attach: slot ${slot} is taken by another instance`);
    const slots = this.x.slots?.() ?? 0;
    throw new InvariantError(
      `cannot attach: there is no slot ${slot}; this memory has slots 1 to ${slots - 1} (size it with sharedMemoryPages)`,
    );
  }

  /** Threads build: how many instances the shared memory has room for, the owner's included. */
  get slots(): number {
    return this.x.slots?.() ?? 1;
  }

  /**
   * Threads build: gives a reader's slot back, for another instance to attach to. This
   * Core is then unusable: every call that would touch the memory throws.
   */
  detach(): void {
    if (this.owner || this.detached) throw new InvariantError('only an attached reader can detach, once');
    this.detached = true;
    (this.x.detach as () => number)();
    this.bytes = new Uint8Array(0);
    this.view = new DataView(new ArrayBuffer(0));
    this.tokenView = this.bytes;
    this.pathView = this.bytes;
  }

  // Every change of the state is the owner's: a reader that tried would race it.
  private writer(): void {
    if (!this.owner) throw new InvariantError('this Core is a reader attached to a shared memory: only its owner manages the state');
  }

  /** A fresh random HMAC key (or the given one) for signing and checking tokens. */
  setKey(key?: Uint8Array): void {
    this.writer();
    if (key === undefined) {
      key = new Uint8Array(32);
      this.random(key);
    }
    this.writeIo(key);
    if (this.x.setKey(key.length) !== 0) throw new InvariantError('the token key must be 1 to 64 bytes');
    this.mem().fill(0, this.ioPtr, this.ioPtr + key.length);
  }

  get generation(): number {
    return this.x.generation();
  }

  set generation(value: number) {
    this.writer();
    this.x.setGeneration(value);
  }

  /** Starts a new password generation: every token issued before stops verifying. */
  bumpGeneration(): number {
    this.writer();
    return this.x.bumpGeneration();
  }

  /**
   * Interns a grant, its endpoints and, for a token limited to some JSON-RPC methods, its
   * method patterns, and returns its grant id. Both lists are canonicalised first (`*`
   * anywhere means just `*`; duplicates dropped; sorted) so equal grants share an id; the
   * same endpoints with other methods, or without any, are another grant. Throws
   * GrantError naming the first bad endpoint or pattern.
   */
  addGrant(endpoints: readonly string[], methods?: readonly string[], limits?: readonly string[]): number {
    this.writer();
    return this.grantCall(endpoints, methods, limits, (len) => this.x.grantAdd(len));
  }

  /**
   * The grant id `addGrant` would return, adding nothing: the grant's id, or
   * `grantCount` when it is new. Throws what `addGrant` would throw. A host that records
   * new grants durably records them under this id first (`grantEntries`), then adds them.
   */
  findGrant(endpoints: readonly string[], methods?: readonly string[], limits?: readonly string[]): number {
    return this.grantCall(endpoints, methods, limits, (len) => this.x.grantFind(len));
  }

  private grantCall(
    endpoints: readonly string[],
    methods: readonly string[] | undefined,
    limits: readonly string[] | undefined,
    call: (len: number) => number,
  ): number {
    const grant = encodeGrant(endpoints, methods, limits, this.ioCap);
    this.writeIo(grant.bytes);
    const id = call(grant.bytes.length);
    if (id >= 0) return id;
    throw grantRefusal(id, this.mem32(this.resultPtr + RESULT.REFUSED_ENTRY), grant, methods, limits);
  }

  /**
   * Whether the grant of a Scoped token (its CheckRecord's `grant`) allows a JSON-RPC
   * method: the name as the request's JSON string decodes. True for a grant without method scope.
   */
  methodAllowed(grant: number, method: string): boolean {
    const allowed = this.x.methodAllowed(grant, this.fit(method, this.paths()));
    if (allowed < 0) throw new RangeError(`unknown grant ${grant}`);
    return allowed === 1;
  }

  /**
   * One request of `calls` calls (0: only the client is checked, nothing counted) by a
   * Limited token (its serial, expiry and grant, as its check's CheckRecord holds them),
   * from `client` (16 bytes, IPv4 as IPv4-mapped: addressBytes in http/client-address.ts),
   * at `nowMs` (ms since the Unix epoch). ADMIT_OK (let through and counted), ADMIT_CLIENT,
   * ADMIT_RATE (the wait in `out.waitMs`), ADMIT_OVER_BURST, ADMIT_QUOTA (the time to the
   * quota's reset in `out.waitMs`, the reset in `out.resetMs`), ADMIT_TABLE_FULL. `out`,
   * when given, is filled on every answer. Any thread may call it: every thread's calls share one bucket.
   */
  admit(serial: number, expiry: number, grant: number, calls: number, client: Uint8Array, nowMs: number, out?: AdmitRecord): number {
    this.mem().set(client, this.ioPtr);
    const result = this.x.admit(BigInt(serial), BigInt(expiry), grant, calls, BigInt(nowMs) * 1_000_000n);
    if (result === ADMIT_UNKNOWN_GRANT) throw new RangeError(`unknown grant ${grant}`);
    if (out !== undefined) {
      if (result === ADMIT_RATE || result === ADMIT_QUOTA) {
        const v = this.dv();
        out.waitMs = Number(v.getBigUint64(this.resultPtr + RESULT.WAIT, true)) / 1e6;
        out.resetMs = Number(v.getBigUint64(this.resultPtr + RESULT.RESET, true) / 1_000_000n);
      } else {
        out.waitMs = 0;
        out.resetMs = 0;
      }
    }
    return result;
  }

  /**
   * How many gateways share each token's rate (a fleet's live members that enforce
   * limits): each then lets through rate / members and burst / members (rounded up, at
   * least 1), on every thread, from the next `admit` on.
   */
  setLimitShare(members: number): void {
    this.writer();
    this.x.setLimitShare(Math.max(1, Math.min(members, 2 ** 32 - 1)));
  }

  /**
   * The quota count of a token of `grant` in the window of `nowMs`: the calls let through
   * here and (as last given by `setQuota`) at the other gateways, and the window's number
   * (days or months since 1970, UTC); undefined when the grant has no quota or the token
   * has no slot yet.
   */
  quota(serial: number, grant: number, nowMs: number): { here: number; others: number; window: number } | undefined {
    const result = this.x.quota(BigInt(serial), grant, BigInt(nowMs) * 1_000_000n);
    if (result === ADMIT_UNKNOWN_GRANT) throw new RangeError(`unknown grant ${grant}`);
    if (result !== 1) return undefined;
    const v = this.dv();
    return {
      here: Number(v.getBigUint64(this.resultPtr + RESULT.HERE, true)),
      others: Number(v.getBigUint64(this.resultPtr + RESULT.OTHERS, true)),
      window: v.getUint32(this.resultPtr + RESULT.WINDOW, true),
    };
  }

  /**
   * Sets a token's quota count in `window` (the owner): `here`, added to this gateway's
   * count (a restore at start, a rotation's carry-over), or the other gateways' latest
   * sum, replacing the last. False when the core's table has no slot for it.
   */
  setQuota(serial: number, expiry: number, window: number, calls: number, here: boolean): boolean {
    this.writer();
    return this.x.setQuota(BigInt(serial), BigInt(expiry), window, Math.min(calls, 2 ** 32 - 1), here ? 1 : 0) === 0;
  }

  /**
   * What was let through for a token: its calls and the last one's time (ms since the
   * Unix epoch); undefined when it has none counted here (no call yet, or expired and its slot taken). A token
   * with limits counts what `admit` let through; one without, every `authorize` or
   * `verify` that answered Valid or Scoped (to the second).
   */
  usage(serial: number): { requests: number; lastUsedMs: number } | undefined {
    if (this.x.usage(BigInt(serial)) !== 1) return undefined;
    const v = this.dv();
    return {
      requests: Number(v.getBigUint64(this.resultPtr + RESULT.REQUESTS, true)),
      lastUsedMs: Math.floor(Number(v.getBigUint64(this.resultPtr + RESULT.LAST_USED, true)) / 1e6),
    };
  }

  /**
   * Restores a token's usage at start (the owner): adds `requests` calls, the last at
   * `lastUsedMs`, to the token of `serial`, `expiry` (Unix seconds) and `grant`. False when
   * the core's table has no slot for it (its usage then starts again from its next call).
   */
  restoreUsage(serial: number, expiry: number, grant: number, requests: number, lastUsedMs: number): boolean {
    this.writer();
    const result = this.x.restoreUsage(BigInt(serial), BigInt(expiry), grant, BigInt(requests), BigInt(lastUsedMs) * 1_000_000n);
    if (result === ADMIT_UNKNOWN_GRANT) throw new RangeError(`unknown grant ${grant}`);
    return result === 0;
  }

  /**
   * Counts `calls` calls of a token without limits let through without a check of their
   * own (a WebSocket session's message), at `now`, Unix seconds; a token with limits counts
   * nothing here (its calls are `admit`'s).
   */
  countUsage(claims: Claims, calls: number, now: number): void {
    if (
      this.x.countUsage(BigInt(claims.serial), BigInt(claims.expiry), claims.grant, calls, BigInt(now) * 1_000_000_000n) ===
      ADMIT_UNKNOWN_GRANT
    ) {
      throw new RangeError(`unknown grant ${claims.grant}`);
    }
  }

  /** The admitted calls of tokens without limits that the core's usage table had no slot to count (a u32 that wraps). */
  get usageMisses(): number {
    return this.x.usageMisses() >>> 0;
  }

  get grantCount(): number {
    return this.x.grantCount();
  }

  /** Issues a token for a grant id; `lifetime` in seconds. */
  issue(grant: number, now: number, lifetime: number): { token: string; claims: Claims } {
    this.writer();
    const len = this.x.issue(grant, this.seconds(now), lifetime);
    if (len < 0) throw issueError(len);
    const token = this.readAscii(this.tokenPtr, len);
    return { token, claims: this.claims() };
  }

  /**
   * One of several issuers (a fleet): serials [start, end) are a block some issuer
   * reserved, whose tokens expire by `expiryBound`; checks accept them from now on.
   * 0, or RESERVE_EXPIRED when the block is all below the floor (nothing to keep).
   */
  reserveSerials(start: number, end: number, expiryBound: number): 0 | typeof RESERVE_EXPIRED {
    this.writer();
    const result = this.x.reserveSerials(BigInt(start), BigInt(end), BigInt(expiryBound));
    if (result === RESERVE_OUT_OF_WINDOW)
      throw new RangeError(`serials ${start}..${end} do not fit the revocation window above the floor ${this.floor}`);
    return result as 0 | typeof RESERVE_EXPIRED;
  }

  /**
   * `issue` under a serial of a block this issuer reserved (`reserveSerials`) and has not
   * issued from before. Throws IssueError ('bad-serial' when the core refuses the serial).
   */
  issueSerial(serial: number, grant: number, now: number, lifetime: number): { token: string; claims: Claims } {
    this.writer();
    const len = this.x.issueSerial(BigInt(serial), grant, this.seconds(now), lifetime);
    if (len < 0) throw issueError(len);
    return { token: this.readAscii(this.tokenPtr, len), claims: this.claims() };
  }

  /**
   * The gate's hot path: the raw `Authorization` header value (empty when absent) and the
   * request path as uWebSockets.js hands them over. Scoped: the token is valid for the
   * path, but only for the methods its grant allows (`out.grant`, `methodAllowed`);
   * Limited: only once `admit` lets its calls through (`out`'s grant, serial and expiry).
   * `out`, when given, is filled on every outcome (CheckRecord).
   */
  authorize(header: string, path: string, now: number, out?: CheckRecord): Outcome {
    const outcome = this.x.authorize(this.fit(header, this.tokens()), this.fit(path, this.paths()), this.seconds(now));
    if (out !== undefined) this.record(outcome, out);
    return outcome;
  }

  /** Checks a bare token (no `Bearer `) against a path: the path rules, then the token; Scoped, Limited and `out` as `authorize`. */
  verify(token: string, path: string, now: number, out?: CheckRecord): Outcome {
    const outcome = this.x.verify(this.fit(token, this.tokens()), this.fit(path, this.paths()), this.seconds(now));
    if (out !== undefined) this.record(outcome, out);
    return outcome;
  }

  // A check's record, read from the core's right after the check and copied out, so that
  // the caller holds it whatever the core is asked next. The u64s as two u32s: no BigInt.
  private record(outcome: Outcome, out: CheckRecord): void {
    if (outcome !== Outcome.Scoped && outcome !== Outcome.Limited) return clearCheckRecord(out);
    const v = this.dv();
    const p = this.resultPtr;
    out.grant = v.getUint32(p + RESULT.GRANT, true);
    out.scoped = v.getUint32(p + RESULT.SCOPED, true) === 1;
    if (outcome === Outcome.Limited) {
      out.serial = v.getUint32(p + RESULT.SERIAL, true) + v.getUint32(p + RESULT.SERIAL + 4, true) * 2 ** 32;
      out.expiry = v.getUint32(p + RESULT.EXPIRY, true) + v.getUint32(p + RESULT.EXPIRY + 4, true) * 2 ** 32;
    } else {
      out.serial = 0;
      out.expiry = 0;
    }
  }

  /**
   * Whether a request path may be served at all: no path that some server could read as
   * another (see PATH_RULES).
   */
  pathAllowed(path: string): boolean {
    return this.x.checkPath(this.fit(path, this.paths())) === Outcome.Valid;
  }

  /**
   * Revokes a token that is currently valid (for any path). Valid: this call revoked it;
   * Revoked: it already was. Both come with the claims, so the caller can make sure the
   * revocation is durable. Any other outcome means nothing changed.
   */
  revoke(token: string, now: number): { outcome: Outcome; claims?: Claims } {
    this.writer();
    const outcome = this.x.revoke(this.fit(token, this.tokens()), this.seconds(now));
    return outcome === Outcome.Valid || outcome === Outcome.Revoked ? { outcome, claims: this.claims() } : { outcome };
  }

  /**
   * What `revoke` would find, revoking nothing: Valid (revocable now) or Revoked, both
   * with the claims; any other outcome without. A host that records revocations
   * durably records the claims first, then calls `revokeSerial`.
   */
  inspect(token: string, now: number): { outcome: Outcome; claims?: Claims } {
    const outcome = this.x.inspect(this.fit(token, this.tokens()), this.seconds(now));
    return outcome === Outcome.Valid || outcome === Outcome.Revoked ? { outcome, claims: this.claims() } : { outcome };
  }

  /**
   * The re-check of a token verified earlier, for a session held open on it: a function
   * of the time (Unix seconds) that answers Valid while the token still stands, else
   * EarlierGeneration, Expired or Revoked as `verify` would find it. It reads the
   * generation and the revocation bit from the state every thread shares, without the
   * token's tag or any buffer, so it is cheap enough to run on every message.
   */
  standing(claims: Claims): (now: number) => Outcome {
    const x = this.x;
    const serial = BigInt(claims.serial);
    const expiry = BigInt(claims.expiry);
    const { generation } = claims;
    return (now) => x.standing(serial, generation, expiry, this.seconds(now));
  }

  /**
   * Marks a serial revoked: a durable revocation replayed at start, or one just recorded
   * (after `inspect`). REVOKE_MARKED (0) marked; REVOKE_EXPIRED (1) below the floor (its
   * token has expired, nothing to keep); REVOKE_NEVER_ISSUED (-1).
   */
  revokeSerial(serial: number): RevokeResult {
    this.writer();
    return this.x.revokeSerial(BigInt(serial)) as RevokeResult;
  }

  get nextSerial(): number {
    return Number(this.x.nextSerial());
  }

  /** How many serials the revocation window spans: at most this many tokens are live at once. */
  get windowSize(): number {
    this.writer();
    return 2 ** this.windowLog2;
  }

  get floor(): number {
    return Number(this.x.floor());
  }

  /**
   * Restores the serial counter after a restart: serials below `floor` are known expired,
   * and every token with a serial below `nextSerial` expires by `expiryBound` at the latest.
   */
  restoreSerials(floor: number, nextSerial: number, expiryBound: number): void {
    this.writer();
    if (this.x.restoreSerials(BigInt(floor), BigInt(nextSerial), BigInt(expiryBound)) !== 0) {
      throw new InvariantError(`cannot restore serials ${floor}..${nextSerial}: outside the revocation window`);
    }
  }

  /** Forgets revocations of tokens that have all expired by `now`. */
  sweep(now: number): void {
    this.writer();
    this.x.sweep(this.seconds(now));
  }

  /** A strong random password (62-letter alphabet), drawn from the platform's CSPRNG. */
  generatePassword(length = GENERATED_PASSWORD_LENGTH): string {
    for (;;) {
      const entropy = new Uint8Array(length * 2);
      this.random(entropy);
      this.writeIo(entropy);
      const n = this.x.generatePassword(entropy.length, length);
      this.mem().fill(0, this.ioPtr, this.ioPtr + entropy.length);
      if (n === length) {
        const password = this.readAscii(this.tokenPtr, n);
        this.mem().fill(0, this.tokenPtr, this.tokenPtr + n);
        return password;
      }
      if (n !== PASSWORD_NEEDS_ENTROPY) throw new InvariantError(`password length must be 1 to ${this.x.tokenCapacity()}`);
    }
  }

  /** SHA-256 of `data`, for the published vectors. */
  sha256(data: Uint8Array): Uint8Array {
    this.writeIo(data);
    if (this.x.sha256(data.length) !== 0) throw new RangeError('input too long');
    return this.mem().slice(this.resultPtr + RESULT.DIGEST, this.resultPtr + RESULT.DIGEST + 32);
  }

  /** HMAC-SHA256, for the published vectors. */
  hmacSha256(key: Uint8Array, message: Uint8Array): Uint8Array {
    const both = new Uint8Array(key.length + message.length);
    both.set(key);
    both.set(message, key.length);
    this.writeIo(both);
    if (this.x.hmacSha256(key.length, message.length) !== 0) throw new RangeError('input too long');
    return this.mem().slice(this.resultPtr + RESULT.DIGEST, this.resultPtr + RESULT.DIGEST + 32);
  }

  private claims(): Claims {
    const v = this.dv();
    const p = this.resultPtr;
    return {
      serial: Number(v.getBigUint64(p + RESULT.SERIAL, true)),
      expiry: Number(v.getBigUint64(p + RESULT.EXPIRY, true)),
      generation: v.getUint32(p + RESULT.GENERATION, true),
      grant: v.getUint32(p + RESULT.GRANT, true),
    };
  }

  private seconds(now: number): bigint {
    if (now !== this.lastSecond) {
      this.lastSecond = now;
      this.lastSecondBig = BigInt(now);
    }
    return this.lastSecondBig;
  }

  /**
   * Writes a string into a buffer of the core as UTF-8 and returns its length, or, when
   * it does not fit, a length past the buffer's end (the core then refuses the input for
   * its length). Any character past ASCII becomes bytes of 0x80 and above, which no token
   * or allowed path holds, so nothing is lost by not checking for them here.
   */
  private fit(text: string, into: Uint8Array): number {
    const { read, written } = this.encoder.encodeInto(text, into);
    return read === text.length ? written : into.length + 1;
  }

  // When the memory grows, its old buffer detaches and every view of it reads as empty:
  // a cheaper test than comparing buffers on each call (`detach` empties them too).
  private tokens(): Uint8Array {
    if (this.tokenView.byteLength === 0) this.refreshViews();
    return this.tokenView;
  }

  private paths(): Uint8Array {
    if (this.pathView.byteLength === 0) this.refreshViews();
    return this.pathView;
  }

  private readAscii(ptr: number, len: number): string {
    return String.fromCharCode.apply(null, this.mem().subarray(ptr, ptr + len) as unknown as number[]);
  }

  private writeIo(data: Uint8Array): void {
    if (data.length > this.ioCap) throw new RangeError(`at most ${this.ioCap} bytes fit the core's buffer`);
    this.mem().set(data, this.ioPtr);
  }

  private mem32(ptr: number): number {
    return this.dv().getUint32(ptr, true);
  }

  // The plain build's memory can grow (grant table), which detaches the old views; a
  // shared memory never grows.
  private mem(): Uint8Array {
    if (this.bytes.buffer !== this.x.memory.buffer) this.refreshViews();
    return this.bytes;
  }

  private dv(): DataView {
    if (this.view.buffer !== this.x.memory.buffer) this.refreshViews();
    return this.view;
  }

  private refreshViews(): void {
    if (this.detached) throw new InvariantError('this Core has detached from its slot');
    this.bytes = new Uint8Array(this.x.memory.buffer);
    this.view = new DataView(this.x.memory.buffer);
    this.tokenView = new Uint8Array(this.x.memory.buffer, this.tokenPtr, this.x.tokenCapacity());
    this.pathView = new Uint8Array(this.x.memory.buffer, this.pathPtr, this.pathCap);
  }
}
