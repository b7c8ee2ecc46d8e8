// The token inventory of a fleet gateway: the fleet's `tokens/` keys, which every gateway
// holds through its watch (cluster/fleet.ts). An entry is written to etcd and applied by
// every live gateway before the issue that made it answers, so a token issued through one
// gateway is listed, and can be revoked by id, through any other at once.
import type { Clock } from '../clock.js';
import { unixSeconds } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Inventory, InventoryEntry, ReadHistory, Usage } from '../service/ledger.js';
import type { Fleet } from './fleet.js';

export class FleetInventory implements Inventory {
  private pending = 0;

  constructor(
    private readonly fleet: Fleet,
    private readonly core: Core,
    private readonly clock: Clock,
  ) {}

  /** Live: not expired, and of the password generation in force. */
  private live(entry: InventoryEntry, now: number): boolean {
    return entry.expiry > now && entry.generation === this.core.generation;
  }

  list(): InventoryEntry[] {
    const now = unixSeconds(this.clock);
    // Issue order across gateways: by issue time, then by serial (each gateway issues its
    // block's serials in order).
    return [...this.fleet.tokens()].filter((e) => this.live(e, now)).sort((a, b) => a.issuedAt - b.issuedAt || a.serial - b.serial);
  }

  get(serial: number): InventoryEntry | undefined {
    const entry = this.fleet.token(serial);
    return entry !== undefined && this.live(entry, unixSeconds(this.clock)) ? entry : undefined;
  }

  successor(serial: number): { readonly to: number; readonly endsAt: number } | undefined {
    return this.fleet.ends.successor(serial);
  }

  hasRoom(max: number): boolean {
    const now = unixSeconds(this.clock);
    let count = this.pending;
    for (const entry of this.fleet.tokens()) if (this.live(entry, now) && ++count >= max) return false;
    return count < max;
  }

  async append(entry: InventoryEntry): Promise<void> {
    this.pending++;
    try {
      await this.fleet.recordToken(entry);
    } finally {
      this.pending--;
    }
  }

  async close(): Promise<void> {}

  othersUsage(): Promise<ReadonlyMap<number, Usage>> {
    return this.fleet.othersUsage();
  }

  othersHistory(serial?: number): Promise<readonly ReadHistory[]> {
    return this.fleet.othersHistory(serial);
  }
}
