// The core's ABI as the host sees it (assembly/README.md): the raw exports, the version
// this host speaks, where a call leaves its results, the limits the core enforces, and the
// core's result codes turned into the host's errors. No Wasm memory is touched here: the
// `Core` class (core.ts) is the one module that does.
//
// The core's own files are compiled for the host too, so that its codes have one definition.
import { Outcome } from '../../assembly/outcome.js';
import {
  ADMIT_CLIENT,
  ADMIT_OK,
  ADMIT_OVER_BURST,
  ADMIT_QUOTA,
  ADMIT_RATE,
  ADMIT_TABLE_FULL,
  GRANT_EMPTY,
  GRANT_NO_METHODS,
  GRANT_TABLE_FULL,
  GRANT_TOO_MANY_CLIENTS,
  GRANT_TOO_MANY_ENTRIES,
  GRANT_TOO_MANY_METHODS,
  ISSUE_BAD_SERIAL,
  ISSUE_BAD_TIME,
  ISSUE_NO_KEY,
  ISSUE_UNKNOWN_GRANT,
  ISSUE_WINDOW_FULL,
  RESERVE_EXPIRED,
  REVOKE_EXPIRED,
  REVOKE_MARKED,
  REVOKE_NEVER_ISSUED,
} from '../../assembly/results.js';
import {
  RESULT_DIGEST,
  RESULT_EXPIRY,
  RESULT_GENERATION,
  RESULT_GRANT,
  RESULT_HERE,
  RESULT_LAST_USED,
  RESULT_OTHERS,
  RESULT_REFUSED_ENTRY,
  RESULT_REQUESTS,
  RESULT_RESET,
  RESULT_SCOPED,
  RESULT_SERIAL,
  RESULT_WAIT,
  RESULT_WINDOW,
} from '../../assembly/result-record.js';

/** Outcomes of a token check: assembly/outcome.ts itself. */
export { Outcome };
export { RESERVE_EXPIRED, REVOKE_EXPIRED, REVOKE_MARKED, REVOKE_NEVER_ISSUED };
export { ADMIT_CLIENT, ADMIT_OK, ADMIT_OVER_BURST, ADMIT_QUOTA, ADMIT_RATE, ADMIT_TABLE_FULL };

/** The core's ABI this host speaks (assembly/README.md). */
export const ABI_VERSION = 6;

/** The core's exports, as `instantiateSync` hands them over. */
export interface Exports extends Record<string, unknown> {
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
  methodAllowed(grant: number, len: number): number;
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
  standing(serial: bigint, generation: number, expiry: bigint, now: bigint): number;
  sweep(now: bigint): void;
  generatePassword(entropyLen: number, length: number): number;
  reserveSerials(start: bigint, end: bigint, expiryBound: bigint): number;
  issueSerial(serial: bigint, grant: number, now: bigint, lifetime: number): number;
  admit(serial: bigint, expiry: bigint, grant: number, n: number, now: bigint): number;
  setLimitShare(members: number): number;
  quota(serial: bigint, grant: number, now: bigint): number;
  setQuota(serial: bigint, expiry: bigint, window: number, calls: number, here: number): number;
  usage(serial: bigint): number;
  restoreUsage(serial: bigint, expiry: bigint, grant: number, requests: bigint, last: bigint): number;
  countUsage(serial: bigint, expiry: bigint, grant: number, n: number, now: bigint): number;
  usageMisses(): number;
  attach?(slot: number): number;
  detach?(): number;
  slots?(): number;
}

/**
 * Where a call leaves its results: byte offsets into the result buffer (`resultBuffer()`),
 * every field little-endian (assembly/README.md, "Buffers"), each kind of call's apart from
 * the others'. A token's record, after `issue`, `revoke` and `inspect`, and after a
 * Scoped or Limited check: the serial (u64) at SERIAL, the expiry (u64, Unix seconds) at
 * EXPIRY, the generation (u32) at GENERATION, the grant (u32) at GRANT and a check's scope
 * flag (u32) at SCOPED. `admit`'s wait (u64, ns) and a quota's reset (u64, Unix ns) at
 * WAIT and RESET; `usage`'s calls and last time (u64 each) at REQUESTS and LAST_USED;
 * `quota`'s counts here and elsewhere (u64 each) and its window (u32) at HERE, OTHERS and
 * WINDOW; a refused grant entry's index (u32) at REFUSED_ENTRY; a digest at DIGEST.
 */
export const RESULT = {
  SERIAL: RESULT_SERIAL,
  EXPIRY: RESULT_EXPIRY,
  GENERATION: RESULT_GENERATION,
  GRANT: RESULT_GRANT,
  SCOPED: RESULT_SCOPED,
  WAIT: RESULT_WAIT,
  RESET: RESULT_RESET,
  REQUESTS: RESULT_REQUESTS,
  LAST_USED: RESULT_LAST_USED,
  HERE: RESULT_HERE,
  OTHERS: RESULT_OTHERS,
  WINDOW: RESULT_WINDOW,
  REFUSED_ENTRY: RESULT_REFUSED_ENTRY,
  /** The digest of `sha256` and `hmacSha256`: 32 bytes. */
  DIGEST: RESULT_DIGEST,
} as const;

/**
 * What the core's path rules refuse, in brief, for the messages users see (the rule in
 * full: assembly/README.md, "Paths").
 */
export const PATH_RULES =
  'dot or empty segments, "\\", and encoded "/", "\\", ".", "%", ";", "?", "#", controls, look-alikes ' + 'or malformed UTF-8 are refused';

// Keyed by Outcome, so that an outcome added to the core without a name here does not compile.
const NAMES: Readonly<Record<Outcome, string>> = {
  [Outcome.Valid]: 'valid',
  [Outcome.Malformed]: 'malformed',
  [Outcome.BadSignature]: 'bad signature',
  [Outcome.Expired]: 'expired',
  [Outcome.Revoked]: 'revoked',
  [Outcome.EarlierGeneration]: 'earlier generation',
  [Outcome.NotGranted]: 'not granted',
  [Outcome.NoToken]: 'no token',
  [Outcome.BadHeader]: 'bad header',
  [Outcome.BadPath]: 'bad path',
  // Not a refusal: the request is served only for a method the grant's scope allows.
  [Outcome.Scoped]: 'scoped',
  // Not a refusal either: the request is served once `admit` lets it through.
  [Outcome.Limited]: 'limited',
};

/** Each outcome's name (the metrics' label), indexed by outcome. */
export const OUTCOME_NAMES: readonly string[] = Object.values(NAMES);

/** What a token says about itself, read back after `issue` and `revoke`. */
export interface Claims {
  serial: number;
  expiry: number;
  generation: number;
  grant: number;
}

/**
 * What a check found of a token it lets through on conditions, filled by `authorize` and
 * `verify` into a record the caller owns (one per call site, reused: nothing is allocated
 * per request). Every field is written by every check, so a record never holds another
 * call's values: for any outcome but Scoped and Limited, `grant` is -1 and the rest 0 and false.
 */
export interface CheckRecord {
  /** The token's grant id, for `methodAllowed` and `admit`: Scoped and Limited. */
  grant: number;
  /** The token's serial, for `admit`: Limited. */
  serial: number;
  /** The token's expiry, Unix seconds, for `admit`: Limited. */
  expiry: number;
  /** Whether the grant has a method scope: always for Scoped; for Limited, when it has one besides its limits. */
  scoped: boolean;
}

/** A CheckRecord holding no check yet, for a call site to own and hand to every check it makes. */
export function checkRecord(): CheckRecord {
  return { grant: -1, serial: 0, expiry: 0, scoped: false };
}

/** Empties `out`, for an answer that names no token's grant. */
export function clearCheckRecord(out: CheckRecord): void {
  out.grant = -1;
  out.serial = 0;
  out.expiry = 0;
  out.scoped = false;
}

/**
 * What `admit` found besides its answer, filled into a record the caller owns (as
 * CheckRecord). Every field is written by every call: 0 where the answer has none.
 */
export interface AdmitRecord {
  /** How long to wait, in milliseconds (fractional): ADMIT_RATE, and ADMIT_QUOTA (to its reset). */
  waitMs: number;
  /** When the quota's window resets, ms since the Unix epoch: ADMIT_QUOTA. */
  resetMs: number;
}

/** An AdmitRecord holding no answer yet, for a call site to own. */
export function admitRecord(): AdmitRecord {
  return { waitMs: 0, resetMs: 0 };
}

export const TOKEN_LENGTH = 76;
export const MAX_ENDPOINTS = 128;
export const MAX_ENDPOINT_LENGTH = 1024;
/** A method scope holds 1 to MAX_METHODS patterns of 1 to MAX_METHOD_LENGTH bytes each. */
export const MAX_METHODS = 128;
export const MAX_METHOD_LENGTH = 128;
export const GENERATED_PASSWORD_LENGTH = 32;
/** A token's limits hold at most this many client ranges (allowedClients). */
export const MAX_CLIENTS = 64;

/** Why the core refused a grant: its endpoints, its methods, or the table's size. */
export type GrantErrorCode =
  | 'empty'
  | 'too-many-entries'
  | 'table-full'
  | 'bad-entry'
  | 'entry-too-long'
  | 'bad-method'
  | 'method-too-long'
  | 'too-many-methods'
  | 'no-methods'
  | 'bad-limit'
  | 'too-many-clients';

export class GrantError extends Error {
  /**
   * `entry`: for 'bad-entry' and 'entry-too-long', the index of the endpoint in the
   * canonical list; for 'bad-method' and 'method-too-long', the index of the pattern in
   * `methods` as given.
   */
  constructor(
    readonly code: GrantErrorCode,
    message: string,
    readonly entry?: number,
  ) {
    super(message);
    this.name = 'GrantError';
  }
}

/** Raised by `issue` when no token can be made; the message is safe to show a client. */
export type IssueErrorCode = 'unknown-grant' | 'window-full' | 'bad-time' | 'no-key' | 'bad-serial';

export class IssueError extends Error {
  constructor(
    readonly code: IssueErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'IssueError';
  }
}

/** What `revokeSerial` did: assembly/results.ts's REVOKE_ codes. */
export type RevokeResult = typeof REVOKE_MARKED | typeof REVOKE_EXPIRED | typeof REVOKE_NEVER_ISSUED;

/**
 * The grant refusals that name no entry, by the core's code: each as a GrantError's code
 * and message. (The ones that do name one are grants.ts's `grantRefusal`.)
 */
export const CORE_GRANT_ERRORS: Readonly<Record<number, readonly [GrantErrorCode, string]>> = {
  [GRANT_EMPTY]: ['empty', 'endpoints must not be empty'],
  [GRANT_TOO_MANY_ENTRIES]: ['too-many-entries', `endpoints may hold at most ${MAX_ENDPOINTS} entries`],
  [GRANT_TABLE_FULL]: ['table-full', 'the node holds too many distinct grants (endpoint lists and methods); reuse an existing one'],
  [GRANT_TOO_MANY_METHODS]: ['too-many-methods', `methods may hold at most ${MAX_METHODS} patterns`],
  [GRANT_NO_METHODS]: ['no-methods', 'methods must hold at least one pattern; leave methods out for a token that allows every method'],
  [GRANT_TOO_MANY_CLIENTS]: ['too-many-clients', `allowedClients may hold at most ${MAX_CLIENTS} addresses or ranges`],
};

/** Why `issue` and `issueSerial` made no token, by the core's code: each as an IssueError's code and message. */
export const CORE_ISSUE_ERRORS: Readonly<Record<number, readonly [IssueErrorCode, string]>> = {
  [ISSUE_UNKNOWN_GRANT]: ['unknown-grant', 'unknown endpoint grant'],
  [ISSUE_WINDOW_FULL]: ['window-full', 'too many live tokens; revoke some or wait for them to expire'],
  [ISSUE_BAD_TIME]: ['bad-time', 'the token lifetime must be at least one second, and the time not before 1970'],
  [ISSUE_NO_KEY]: ['no-key', 'the core has no token key yet'],
  [ISSUE_BAD_SERIAL]: ['bad-serial', 'the serial is not reserved, is revoked, or its block ends before the token would expire'],
};

/** The IssueError for a negative answer of `issue` or `issueSerial`. */
export function issueError(code: number): IssueError {
  const [name, message] = CORE_ISSUE_ERRORS[code] ?? ['bad-time', `token refused (${code})`];
  return new IssueError(name, message);
}
