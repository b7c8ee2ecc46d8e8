// Serial blocks: each gateway issues from a block of serials it reserved in etcd, so that
// gateways never give two tokens one serial without asking etcd for each token. Every
// token of a block expires by the block's bound, which is what lets every gateway's core
// make room for it in its revocation window.
import { FleetError } from '../errors.js';
import type { EtcdConnection } from './etcd.js';
import { fleetValue } from './keys.js';
import type { FleetKeys } from './keys.js';

/** Serials per block: one page of the core's revocation window, so blocks are page-aligned. */
export const BLOCK = 4096;
/** How long a gateway issues from one block before it takes another (seconds). */
export const BLOCK_PERIOD = 3600;

export interface Block {
  readonly start: number;
  readonly end: number;
  /** Unix seconds by which every token of the block expires. */
  readonly bound: number;
}

interface Cursor extends Block {
  next: number;
  /** Unix seconds after which no token is issued from it (its bound minus this gateway's lifetime). */
  readonly until: number;
}

export class SerialBlocks {
  private cursor: Cursor | undefined;

  /** `barrier` resolves once every live gateway holds the change at a revision (membership.ts). */
  constructor(
    private readonly etcd: EtcdConnection,
    private readonly keys: FleetKeys,
    private readonly barrier: (revision: number) => Promise<void>,
  ) {}

  /** The serial of a token issued at `now` for `lifetime` seconds, from a new block when this one is used up or too old to issue from. */
  async next(now: number, lifetime: number): Promise<number> {
    let cursor = this.cursor;
    if (cursor === undefined || cursor.next >= cursor.end || now > cursor.until || now + lifetime > cursor.bound) {
      cursor = await this.reserve(now, lifetime);
    }
    return cursor.next++;
  }

  private async reserve(now: number, lifetime: number): Promise<Cursor> {
    const serials = this.keys.serials();
    for (let tries = 0; tries < 64; tries++) {
      const current = await this.etcd.call((client) => client.get(serials).exec());
      const kv = current.kvs[0];
      if (kv === undefined) throw new FleetError(`the fleet ${this.keys.name} has no serial counter in etcd`);
      const counter = fleetValue(this.keys, serials, kv.value.toString('utf8'));
      if (counter.kind !== 'serials') throw new FleetError(`the fleet ${this.keys.name}'s serial counter is not at ${serials}`);
      const start = counter.next;
      const end = start + BLOCK;
      const until = now + BLOCK_PERIOD;
      const bound = until + lifetime;
      const result = await this.etcd.call((client) =>
        client
          .if(serials, 'Mod', '==', kv.mod_revision)
          .then(client.put(serials).value(String(end)), client.put(this.keys.block(start)).value(JSON.stringify({ end, bound })))
          .commit(),
      );
      if (!result.succeeded) continue;
      // Every gateway must hold the block before any of its tokens can be shown to one.
      await this.barrier(Number(result.header.revision));
      this.cursor = { start, end, bound, until, next: start };
      return this.cursor;
    }
    throw new FleetError('other gateways keep reserving serials at the same time; retry');
  }
}
