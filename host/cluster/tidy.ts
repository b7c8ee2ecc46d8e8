// The fleet's clean-up: the revocations and serial blocks past their expiry, and the
// inventory entries of tokens that work nowhere, deleted from etcd. One member does it
// (the lowest key), so that the fleet does not do the same work N times.
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { EtcdConnection } from './etcd.js';
import { fleetValue } from './keys.js';
import type { FleetKeys, FleetValue } from './keys.js';

/** How often a gateway looks for what to clean up, ms. */
export const TIDY_INTERVAL_MS = 60_000;
/** Deletions per txn (etcd takes at most 128 operations in one). */
const TIDY_BATCH = 100;

/**
 * Deletes what is dead at `now` (Unix seconds): revocations and blocks past their
 * expiry, and inventory entries expired or of a generation before `generation` (an entry
 * of an earlier password is listed nowhere: its token works nowhere). A failure is only
 * logged: the next round tries again.
 */
export async function deleteExpired(etcd: EtcdConnection, keys: FleetKeys, now: number, generation: number, log: Logger): Promise<void> {
  try {
    const isDead = (v: FleetValue): boolean =>
      v.kind === 'revoked' ? v.expiry <= now
        : v.kind === 'block' ? v.bound <= now
          : v.kind === 'token' ? v.entry.expiry <= now || v.entry.generation < generation : false;
    const expired: string[] = [];
    for (const folder of ['revoked', 'blocks', 'tokens'] as const) {
      const found = await etcd.client.getAll().prefix(keys.folder(folder)).strings();
      for (const [key, value] of Object.entries(found)) if (isDead(fleetValue(keys, key, value))) expired.push(key);
    }
    for (let i = 0; i < expired.length; i += TIDY_BATCH) {
      const batch = expired.slice(i, i + TIDY_BATCH);
      await etcd.client.if(keys.key(), 'Create', '>', 0).then(...batch.map((key) => etcd.client.delete().key(key))).commit();
    }
    if (expired.length > 0) log.info('deleted expired revocations, serial blocks and inventory entries from the fleet', { count: expired.length });
  } catch (error) {
    log.debug('cannot tidy the fleet state', errorFields(error));
  }
}
