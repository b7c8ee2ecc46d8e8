// The state changes a fleet gateway makes (fleet.ts, the ledger): each written to etcd,
// as a txn where two gateways may race, and returned only once every live member holds
// it (the barrier of membership.ts), so that what a call answered holds on every gateway.
import type { Claims } from '../core/abi.js';
import type { Core } from '../core/core.js';
import { grantEntries } from '../core/grants.js';
import { FleetError } from '../errors.js';
import { encodeRecord } from '../password/hash.js';
import type { PasswordRecord } from '../password/hash.js';
import type { GrantRequest, InventoryEntry } from '../service/ledger.js';
import type { SerialBlocks } from './blocks.js';
import type { EtcdConnection } from './etcd.js';
import type { FleetKeys } from './keys.js';
import type { Membership } from './membership.js';
import type { FleetReplica } from './replica.js';

export class FleetWrites {
  constructor(
    private readonly core: Core,
    private readonly etcd: EtcdConnection,
    private readonly keys: FleetKeys,
    private readonly membership: Membership,
    private readonly blocks: SerialBlocks,
    private readonly replica: FleetReplica,
  ) {}

  /**
   * Issues a token of the grant, added fleet-wide when new, from this gateway's block,
   * reserving a new block when it is used up or too old to issue from.
   */
  async issue(request: GrantRequest, now: number, lifetime: number): Promise<{ token: string; claims: Claims }> {
    const grant = await this.grant(request);
    // The grant may have waited on etcd meanwhile.
    this.membership.serving();
    const serial = await this.blocks.next(now, lifetime);
    return this.core.issueSerial(serial, grant, now, lifetime);
  }

  /**
   * The grant id of `endpoints` in the fleet, added to the core when new: ids are
   * allocated by a txn, so every gateway gives a list the same id (it is signed into
   * tokens). `id` is the id the core would give it.
   */
  private async grant({ id, endpoints, methods, limits }: GrantRequest): Promise<number> {
    this.membership.serving();
    const entries = grantEntries(endpoints, methods, limits);
    for (let tries = 0; ; tries++) {
      if (id < this.core.grantCount) return id;
      const key = this.keys.grant(id);
      const result = await this.etcd.call((client) =>
        client
          .if(key, 'Create', '==', 0)
          .then(client.put(key).value(JSON.stringify(entries)))
          .commit(),
      );
      const revision = Number(result.header.revision);
      if (result.succeeded) {
        await this.membership.barrier(revision);
        return id;
      }
      // Another gateway took this id: once its list is here, ours may be it.
      await this.membership.appliedAtLeast(revision);
      id = this.core.findGrant(endpoints, methods, limits);
      if (tries > 64) throw new FleetError("the fleet's grants keep changing; retry");
    }
  }

  /**
   * Records a token's inventory entry fleet-wide: on return, every serving gateway lists it
   * and can revoke it by id. Expired entries, and those of earlier passwords, are deleted
   * by tidy().
   */
  async recordToken(entry: InventoryEntry): Promise<void> {
    this.membership.serving();
    const { serial, generation, grant, issuedAt, expiry, label, rotation } = entry;
    const value = JSON.stringify({
      generation,
      grant,
      issuedAt,
      expiry,
      label: label ?? null,
      ...(rotation === undefined ? {} : { rotation }),
    });
    const result = await this.etcd.call((client) => client.put(this.keys.token(serial)).value(value).exec());
    await this.membership.barrier(Number(result.header.revision));
  }

  /** Records a revocation fleet-wide: on return, every serving gateway refuses the token (the watch marks it in each core). */
  async revoke(serial: number, expiry: number): Promise<void> {
    this.membership.serving();
    const result = await this.etcd.call((client) => client.put(this.keys.revoked(serial)).value(String(expiry)).exec());
    await this.membership.barrier(Number(result.header.revision));
  }

  /**
   * A new password fleet-wide, in the generation after the current one, if the password
   * is still the one `checked` (else the caller's password is an old one). Returns the generation.
   */
  async changePassword(checked: PasswordRecord, record: PasswordRecord): Promise<number> {
    this.membership.serving();
    if (this.replica.record !== checked) throw new FleetError('the password changed meanwhile');
    const generation = this.core.generation + 1;
    const password = this.keys.password();
    const result = await this.etcd.call((client) =>
      client
        .if(password, 'Mod', '==', this.replica.passwordRevision)
        .then(client.put(password).value(JSON.stringify({ record: encodeRecord(record), generation })))
        .commit(),
    );
    if (!result.succeeded) throw new FleetError('the password was changed through another gateway meanwhile; retry with the new one');
    await this.membership.barrier(Number(result.header.revision));
    return generation;
  }
}
