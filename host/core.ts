// The one module of the host that touches the Wasm core. Everything else in the host goes
// through the `Core` class below; nothing else reads or writes Wasm memory.
//
// It is also the core's portable loader: it uses no Node built-ins, so Deno, Bun and
// browsers load it unchanged and hand it the compiled module their own way (Node code
// gets it from core-module.ts). The ABI it wraps is documented in assembly/README.md.
import { instantiateSync } from '@assemblyscript/loader';

/** Outcomes of a token check. Same numbers as `Outcome` in assembly/outcome.ts. */
export enum Outcome {
  Valid = 0,
  Malformed = 1,
  BadSignature = 2,
  Expired = 3,
  Revoked = 4,
  EarlierGeneration = 5,
  NotGranted = 6,
  NoToken = 7,
  BadHeader = 8,
  BadPath = 9,
}

export const OUTCOME_NAMES: readonly string[] = [
  'valid', 'malformed', 'bad signature', 'expired', 'revoked',
  'earlier generation', 'not granted', 'no token', 'bad header', 'bad path',
];

/** What a token says about itself, read back after `issue` and `revoke`. */
export interface Claims {
  serial: number;
  expiry: number;
  generation: number;
  grant: number;
}

/** Why the core refused an endpoint list: the list itself, or the table's size. */
export type GrantErrorCode = 'empty' | 'too-many-entries' | 'table-full' | 'bad-entry' | 'entry-too-long';

export class GrantError extends Error {
  constructor(readonly code: GrantErrorCode, message: string, readonly entry?: number) {
    super(message);
    this.name = 'GrantError';
  }
}

/** Raised by `issue` when no token can be made; the message is safe to show a client. */
export type IssueErrorCode = 'unknown-grant' | 'window-full' | 'bad-time' | 'no-key';

export class IssueError extends Error {
  constructor(readonly code: IssueErrorCode, message: string) {
    super(message);
    this.name = 'IssueError';
  }
}

export const TOKEN_LENGTH = 76;
export const MAX_ENDPOINTS = 128;
export const MAX_ENDPOINT_LENGTH = 1024;
export const GENERATED_PASSWORD_LENGTH = 32;
const DEFAULT_WINDOW_LOG2 = 22;

interface Exports extends Record<string, unknown> {
  memory: WebAssembly.Memory;
  abiVersion(): number;
  init(windowLog2: number): number;
  tokenBuffer(): number;
  tokenCapacity(): number;
  pathBuffer(): number;
  pathCapacity(): number;
  ioBuffer(): number;
  ioCapacity(): number;
  resultBuffer(): number;
  sha256(len: number): number;
  hmacSha256(keyLen: number, msgLen: number): number;
  setKey(len: number): number;
  generation(): number;
  setGeneration(generation: number): void;
  bumpGeneration(): number;
  grantAdd(len: number): number;
  grantFind(len: number): number;
  grantCount(): number;
  nextSerial(): bigint;
  floor(): bigint;
  restoreSerials(floor: bigint, nextSerial: bigint, expiryBound: bigint): number;
  issue(grant: number, now: bigint, lifetime: number): number;
  verify(tokenLen: number, pathLen: number, now: bigint): number;
  authorize(headerLen: number, pathLen: number, now: bigint): number;
  checkPath(pathLen: number): number;
  revoke(tokenLen: number, now: bigint): number;
  inspect(tokenLen: number, now: bigint): number;
  revokeSerial(serial: bigint): number;
  sweep(now: bigint): void;
  generatePassword(entropyLen: number, length: number): number;
}

const GRANT_ERRORS: Record<number, [GrantErrorCode, string]> = {
  [-1]: ['empty', 'endpoints must not be empty'],
  [-2]: ['too-many-entries', `endpoints may hold at most ${MAX_ENDPOINTS} entries`],
  [-3]: ['table-full', 'the node holds too many distinct endpoint lists; reuse an existing one'],
};

const ISSUE_ERRORS: Record<number, [IssueErrorCode, string]> = {
  [-1]: ['unknown-grant', 'unknown endpoint grant'],
  [-2]: ['window-full', 'too many live tokens; revoke some or wait for them to expire'],
  [-3]: ['bad-time', 'the token lifetime must be at least one second, and the time not before 1970'],
  [-4]: ['no-key', 'the core has no token key yet'],
};

/**
 * One instance of the Wasm core with its own state. Time is passed in as Unix seconds,
 * entropy is drawn here from the platform's CSPRNG and handed to the core.
 */
export class Core {
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
   * An instance of `module` (build/core.wasm compiled), with its own memory and state.
   * `random` fills a buffer with cryptographically strong bytes (keys, passwords); by
   * default the platform's `crypto.getRandomValues`.
   */
  constructor(module: WebAssembly.Module, options: { windowLog2?: number; random?: (into: Uint8Array) => void } = {}) {
    this.random = options.random ?? ((into) => globalThis.crypto.getRandomValues(into));
    const instance = instantiateSync<Exports>(module, {});
    this.x = instance.exports as unknown as Exports;
    if (this.x.abiVersion() !== 1) throw new Error(`core ABI ${this.x.abiVersion()} is not the one this host speaks (1)`);
    this.windowLog2 = options.windowLog2 ?? DEFAULT_WINDOW_LOG2;
    if (this.x.init(this.windowLog2) !== 0) throw new Error('core init failed');
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

  /** A fresh random HMAC key (or the given one) for signing and checking tokens. */
  setKey(key?: Uint8Array): void {
    if (key === undefined) {
      key = new Uint8Array(32);
      this.random(key);
    }
    this.writeIo(key);
    if (this.x.setKey(key.length) !== 0) throw new Error('the token key must be 1 to 64 bytes');
    this.mem().fill(0, this.ioPtr, this.ioPtr + key.length);
  }

  get generation(): number {
    return this.x.generation();
  }

  set generation(value: number) {
    this.x.setGeneration(value);
  }

  /** Starts a new password generation: every token issued before stops verifying. */
  bumpGeneration(): number {
    return this.x.bumpGeneration();
  }

  /**
   * Interns an endpoint list and returns its grant id. The list is canonicalised first
   * (`*` anywhere means just `*`; duplicates dropped; sorted) so equal grants share an id.
   * Throws GrantError naming the first bad entry.
   */
  addGrant(endpoints: readonly string[]): number {
    return this.grantCall(endpoints, (len) => this.x.grantAdd(len));
  }

  /**
   * The grant id `addGrant` would return for this list, adding nothing: the list's id,
   * or `grantCount` when it is new. Throws what `addGrant` would throw. A host that
   * records new lists durably records them under this id first, then adds them.
   */
  findGrant(endpoints: readonly string[]): number {
    return this.grantCall(endpoints, (len) => this.x.grantFind(len));
  }

  private grantCall(endpoints: readonly string[], call: (len: number) => number): number {
    // Every entry goes to the core, which validates them all; one holding `*` is then
    // stored as `*` alone, as canonicalEndpoints records it.
    const canonical = [...new Set(endpoints)].sort();
    const newline = canonical.findIndex((e) => e.includes('\n'));
    if (newline >= 0) throw new GrantError('bad-entry', `endpoint ${JSON.stringify(canonical[newline])} holds a line break`, newline);
    // Each entry ends in a line feed, so an empty entry stays visible to the core.
    const encoded = new TextEncoder().encode(canonical.map((e) => e + '\n').join(''));
    if (encoded.length > this.ioCap) throw new GrantError('too-many-entries', 'the endpoint list is too long');
    this.writeIo(encoded);
    const id = call(encoded.length);
    if (id >= 0) return id;
    if (id === -4 || id === -5) {
      const bad = this.mem32(this.resultPtr);
      const shown = JSON.stringify(canonical[bad].length > 64 ? canonical[bad].slice(0, 64) + '…' : canonical[bad]);
      if (id === -5) throw new GrantError('entry-too-long', `endpoint ${shown} is longer than ${MAX_ENDPOINT_LENGTH} bytes`, bad);
      throw new GrantError('bad-entry', `endpoint ${shown} is not "*" or an absolute path ` +
        '(like /ext/info or /ext/bc/X, optionally ending in /* for a subtree, with no empty, "." or ".." segments)', bad);
    }
    const [code, message] = GRANT_ERRORS[id] ?? ['table-full', `grant refused (${id})`];
    throw new GrantError(code, message);
  }

  get grantCount(): number {
    return this.x.grantCount();
  }

  /** Issues a token for a grant id; `lifetime` in seconds. */
  issue(grant: number, now: number, lifetime: number): { token: string; claims: Claims } {
    const len = this.x.issue(grant, this.seconds(now), lifetime);
    if (len < 0) {
      const [code, message] = ISSUE_ERRORS[len] ?? ['bad-time', `token refused (${len})`];
      throw new IssueError(code, message);
    }
    const token = this.readAscii(this.tokenPtr, len);
    return { token, claims: this.claims() };
  }

  /**
   * The gate's hot path: the raw `Authorization` header value (empty when absent) and the
   * request path as uWebSockets.js hands them over.
   */
  authorize(header: string, path: string, now: number): Outcome {
    return this.x.authorize(this.fit(header, this.tokens()), this.fit(path, this.paths()), this.seconds(now));
  }

  /** Checks a bare token (no `Bearer `) against a path: the path rules, then the token. */
  verify(token: string, path: string, now: number): Outcome {
    return this.x.verify(this.fit(token, this.tokens()), this.fit(path, this.paths()), this.seconds(now));
  }

  /** Whether a request path may be served at all (no dot or empty segments, no encoded `/`, `.`, `%`). */
  pathAllowed(path: string): boolean {
    return this.x.checkPath(this.fit(path, this.paths())) === Outcome.Valid;
  }

  /**
   * Revokes a token that is currently valid (for any path). Valid: this call revoked it;
   * Revoked: it already was. Both come with the claims, so the caller can make sure the
   * revocation is durable. Any other outcome means nothing changed.
   */
  revoke(token: string, now: number): { outcome: Outcome; claims?: Claims } {
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
   * Marks a serial revoked: a durable revocation replayed at start, or one just recorded
   * (after `inspect`). 0 marked; 1 below the floor (its token has expired, nothing to
   * keep); -1 never issued.
   */
  revokeSerial(serial: number): 0 | 1 | -1 {
    return this.x.revokeSerial(BigInt(serial)) as 0 | 1 | -1;
  }

  get nextSerial(): number {
    return Number(this.x.nextSerial());
  }

  /** How many serials the revocation window spans: at most this many tokens are live at once. */
  get windowSize(): number {
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
    if (this.x.restoreSerials(BigInt(floor), BigInt(nextSerial), BigInt(expiryBound)) !== 0) {
      throw new Error(`cannot restore serials ${floor}..${nextSerial}: outside the revocation window`);
    }
  }

  /** Forgets revocations of tokens that have all expired by `now`. */
  sweep(now: number): void {
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
      if (n !== -1) throw new Error(`password length must be 1 to ${this.x.tokenCapacity()}`);
    }
  }

  /** SHA-256 of `data`, for the published vectors. */
  sha256(data: Uint8Array): Uint8Array {
    this.writeIo(data);
    if (this.x.sha256(data.length) !== 0) throw new RangeError('input too long');
    return this.mem().slice(this.resultPtr, this.resultPtr + 32);
  }

  /** HMAC-SHA256, for the published vectors. */
  hmacSha256(key: Uint8Array, message: Uint8Array): Uint8Array {
    const both = new Uint8Array(key.length + message.length);
    both.set(key);
    both.set(message, key.length);
    this.writeIo(both);
    if (this.x.hmacSha256(key.length, message.length) !== 0) throw new RangeError('input too long');
    return this.mem().slice(this.resultPtr, this.resultPtr + 32);
  }

  private claims(): Claims {
    const v = this.dv();
    const p = this.resultPtr;
    return {
      serial: Number(v.getBigUint64(p, true)),
      expiry: Number(v.getBigUint64(p + 8, true)),
      generation: v.getUint32(p + 16, true),
      grant: v.getUint32(p + 20, true),
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
  // a cheaper test than comparing buffers on each call.
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

  // Memory can grow (grant table), which detaches the old views.
  private mem(): Uint8Array {
    if (this.bytes.buffer !== this.x.memory.buffer) this.refreshViews();
    return this.bytes;
  }

  private dv(): DataView {
    if (this.view.buffer !== this.x.memory.buffer) this.refreshViews();
    return this.view;
  }

  private refreshViews(): void {
    this.bytes = new Uint8Array(this.x.memory.buffer);
    this.view = new DataView(this.x.memory.buffer);
    this.tokenView = new Uint8Array(this.x.memory.buffer, this.tokenPtr, this.x.tokenCapacity());
    this.pathView = new Uint8Array(this.x.memory.buffer, this.pathPtr, this.pathCap);
  }
}

/** `*` anywhere means every endpoint; otherwise duplicates go and the order is fixed. */
export function canonicalEndpoints(endpoints: readonly string[]): string[] {
  if (endpoints.includes('*')) return ['*'];
  return [...new Set(endpoints)].sort();
}
