// The fleet's key space in etcd, under `/<cluster-name>/`:
//   key                 the token key, base64; written once, by the first gateway
//   password            {"record", "generation"}: the service password's argon2id record
//   serials             the start of the next serial block (a decimal number)
//   blocks/<start>      {"end", "bound"}: a block one gateway reserved and issues from;
//                       every token of it expires by `bound` (Unix seconds)
//   grants/<id>         an endpoint grant, as the opaque entry list the core interns
//   revoked/<serial>    a revoked token's serial; the value is its expiry
//   tokens/<serial>     the inventory's entry of an issued token: {"generation", "grant",
//                       "issuedAt", "expiry", "label"} (never the token itself), and for a
//                       rotation's new token "rotation": {"from", "endsAt", "fromExpiry",
//                       "requests", "lastUsedMs"} (rotation-ends.ts)
//   members/<lease>     one per live member, under its lease: {"applied"}, the highest
//                       revision of a state change it holds; {"applied", "follower": true}
//                       for a member that never writes (a Go node, go/fleet)
// and under `/<cluster-name>.throttle/`, the fleet throttle's records (throttle.ts), and
// under `/<cluster-name>.usage/<id>`, each gateway's usage counts, by an id it draws at start (usage.ts), and
// under `/<cluster-name>.usage-history/<id>/<part>`, its hourly counts by the same id (usage-history.ts).
// Numbers in keys are zero-padded, so that etcd's key order is their order. The whole
// schema, which go/fleet reads too, is docs/fleet-keys.md.
//
// One decoder reads every key and value, for the full read at start and for the watch
// alike: a value that is not what its key holds is refused, naming the key, rather than
// applied as NaN or undefined.
import { FleetError } from '../errors.js';
import type { InventoryEntry } from '../service/ledger.js';

const SERIAL_WIDTH = 16;
const GRANT_WIDTH = 10;
/** The width of a time in ms in the throttle's keys. */
export const TIME_WIDTH = 15;

export const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/** The names of the fleet `name`'s keys. */
export class FleetKeys {
  /** Every key of the fleet's state, and of its members, starts with it. */
  readonly prefix: string;
  /** The fleet throttle's records start with it. */
  readonly throttlePrefix: string;
  /** The gateways' usage counts start with it. */
  readonly usagePrefix: string;
  /** The gateways' hourly usage counts start with it. */
  readonly historyPrefix: string;

  constructor(readonly name: string) {
    this.prefix = `/${name}/`;
    this.throttlePrefix = `/${name}.throttle/`;
    this.usagePrefix = `/${name}.usage/`;
    this.historyPrefix = `/${name}.usage-history/`;
  }

  readonly key = (): string => this.prefix + 'key';
  readonly password = (): string => this.prefix + 'password';
  readonly serials = (): string => this.prefix + 'serials';
  readonly block = (start: number): string => `${this.prefix}blocks/${pad(start, SERIAL_WIDTH)}`;
  readonly grant = (id: number): string => `${this.prefix}grants/${pad(id, GRANT_WIDTH)}`;
  readonly revoked = (serial: number): string => `${this.prefix}revoked/${pad(serial, SERIAL_WIDTH)}`;
  readonly token = (serial: number): string => `${this.prefix}tokens/${pad(serial, SERIAL_WIDTH)}`;
  /** A member's key, by its lease's id in hex. */
  readonly member = (lease: string): string => `${this.prefix}members/${lease}`;
  /** A gateway's usage counts, by the id it drew at start. */
  readonly usage = (id: string): string => this.usagePrefix + id;
  /** A part of a gateway's hourly counts (`node`, or a block of serials: `t<first serial>`), by the id it drew at start. */
  readonly history = (id: string, part: string): string => `${this.historyPrefix}${id}/${part}`;
  /** The folder of blocks/, revoked/ or tokens/. */
  readonly folder = (name: 'blocks' | 'revoked' | 'tokens'): string => `${this.prefix}${name}/`;
}

/** What a key of the fleet's prefix names. */
export type FleetKey =
  | { readonly kind: 'key' | 'password' | 'serials' }
  | { readonly kind: 'grant' | 'block' | 'revoked' | 'token'; readonly number: number }
  | { readonly kind: 'member' }
  /** A key no version of api-auth writes: left alone. */
  | { readonly kind: 'other' };

/** What a value of the fleet's prefix holds, decoded and checked. */
export type FleetValue =
  | { readonly kind: 'key'; readonly key: string }
  | { readonly kind: 'password'; readonly record: string; readonly generation: number }
  | { readonly kind: 'serials'; readonly next: number }
  | { readonly kind: 'grant'; readonly id: number; readonly entries: readonly string[] }
  | { readonly kind: 'block'; readonly start: number; readonly end: number; readonly bound: number }
  | { readonly kind: 'revoked'; readonly serial: number; readonly expiry: number }
  | { readonly kind: 'token'; readonly entry: InventoryEntry }
  | { readonly kind: 'member'; readonly applied: number; readonly follower: boolean; readonly limitShare: boolean }
  | { readonly kind: 'other' };

const NUMBERED = { 'grants/': 'grant', 'blocks/': 'block', 'revoked/': 'revoked', 'tokens/': 'token' } as const;

/** What `full`, a key under `keys.prefix`, names. */
export function fleetKey(keys: FleetKeys, full: string): FleetKey {
  const name = full.slice(keys.prefix.length);
  if (name === 'key' || name === 'password' || name === 'serials') return { kind: name };
  if (name.startsWith('members/')) return { kind: 'member' };
  for (const [folder, kind] of Object.entries(NUMBERED)) {
    if (!name.startsWith(folder)) continue;
    const digits = name.slice(folder.length);
    if (!/^[0-9]{1,16}$/.test(digits)) throw new DamagedKeyError(keys, full, kind, 'its name does not end in a number');
    return { kind, number: Number(digits) };
  }
  return { kind: 'other' };
}

/** The key `full` and its value, decoded; throws FleetError naming the key when the value is not what the key holds. */
export function fleetValue(keys: FleetKeys, full: string, value: string): FleetValue {
  const key = fleetKey(keys, full);
  const bad = (why: string): FleetError => new DamagedKeyError(keys, full, key.kind, why, 'number' in key ? key.number : undefined);
  switch (key.kind) {
    case 'key':
      if (!/^[A-Za-z0-9+/]{43}=$/.test(value)) throw bad('it is not 32 bytes in base64');
      return { kind: 'key', key: value };
    case 'password': {
      const v = object(value, bad);
      if (typeof v.record !== 'string' || !count(v.generation)) throw bad('it is not {"record", "generation"}');
      return { kind: 'password', record: v.record, generation: v.generation };
    }
    case 'serials':
      return { kind: 'serials', next: decimal(value, bad) };
    case 'grant': {
      const entries = parse(value, bad);
      if (!Array.isArray(entries) || !entries.every((e) => typeof e === 'string')) throw bad('it is not a list of strings');
      return { kind: 'grant', id: key.number, entries };
    }
    case 'block': {
      const v = object(value, bad);
      if (!count(v.end) || !count(v.bound)) throw bad('it is not {"end", "bound"}');
      return { kind: 'block', start: key.number, end: v.end, bound: v.bound };
    }
    case 'revoked':
      return { kind: 'revoked', serial: key.number, expiry: decimal(value, bad) };
    case 'token': {
      const v = object(value, bad);
      const { generation, grant, issuedAt, expiry, label } = v;
      if (
        !count(generation) ||
        !count(grant) ||
        !count(issuedAt) ||
        !count(expiry) ||
        !(label === null || label === undefined || typeof label === 'string')
      ) {
        throw bad('it is not {"generation", "grant", "issuedAt", "expiry", "label"}');
      }
      const entry = { serial: key.number, generation, grant, issuedAt, expiry, label: label ?? undefined };
      if (v.rotation === undefined) return { kind: 'token', entry };
      const r = v.rotation as Record<string, unknown> | null;
      if (
        typeof r !== 'object' ||
        r === null ||
        !count(r.from) ||
        !count(r.endsAt) ||
        !count(r.fromExpiry) ||
        !count(r.requests) ||
        !count(r.lastUsedMs)
      ) {
        throw bad('its rotation is not {"from", "endsAt", "fromExpiry", "requests", "lastUsedMs"}');
      }
      const { from, endsAt, fromExpiry, requests, lastUsedMs } = r;
      return { kind: 'token', entry: { ...entry, rotation: { from, endsAt, fromExpiry, requests, lastUsedMs } } };
    }
    case 'member': {
      const v = object(value, bad);
      if (
        !count(v.applied) ||
        !(v.follower === undefined || typeof v.follower === 'boolean') ||
        !(v.limitShare === undefined || typeof v.limitShare === 'boolean')
      ) {
        throw bad('it is not {"applied"}, or {"applied", "follower", "limitShare"}');
      }
      return { kind: 'member', applied: v.applied, follower: v.follower === true, limitShare: v.limitShare === true };
    }
    case 'other':
      return key;
  }
}

/**
 * Whether a gateway needs keys of `kind` to verify tokens: the token key, the password's
 * generation, grants, serial blocks, revocations (and the serial counter its issues take
 * blocks from). The inventory (tokens/) and member keys are not: a damaged one is skipped.
 */
export function verifiesWith(kind: FleetKey['kind']): boolean {
  return kind !== 'token' && kind !== 'member' && kind !== 'other';
}

/** The command that deletes a damaged key no gateway needs to verify (cli/fleet.ts). */
export function deleteKeyCommand(full: string): string {
  return `api-auth fleet delete-key ${full} with the gateway's --cluster-etcd flags or --config-file`;
}

/**
 * A key whose name or value is not what its folder holds. One that verification needs
 * (verifiesWith) fences the gateway until it is repaired or deleted; one it does not need
 * is skipped, and `api-auth fleet delete-key` deletes it.
 */
export class DamagedKeyError extends FleetError {
  /** `number`: the serial or id its name holds, when its name is whole. */
  constructor(
    keys: FleetKeys,
    readonly key: string,
    readonly kind: FleetKey['kind'],
    readonly why: string,
    readonly number?: number,
  ) {
    super(
      `the fleet ${keys.name} holds a damaged key ${key} (${why}); ` +
        (verifiesWith(kind)
          ? 'this gateway cannot verify tokens without it: write its value back from a backup of etcd, or delete it'
          : `no gateway needs it to verify tokens: delete it with ${deleteKeyCommand(key)}`),
    );
  }
}

function count(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function decimal(value: string, bad: (why: string) => FleetError): number {
  if (!/^[0-9]{1,16}$/.test(value)) throw bad('it is not a decimal number');
  return Number(value);
}

function parse(value: string, bad: (why: string) => FleetError): unknown {
  try {
    return JSON.parse(value);
  } catch {
    throw bad('it is not JSON');
  }
}

function object(value: string, bad: (why: string) => FleetError): Record<string, unknown> {
  const v = parse(value, bad);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('it is not a JSON object');
  return v as Record<string, unknown>;
}
