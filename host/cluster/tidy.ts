// The fleet's clean-up: the revocations and serial blocks past their expiry, and the
// inventory entries of tokens that work nowhere, deleted from etcd; the usage keys' entries
// of tokens no longer listed dropped, and the keys left empty deleted, so that the keys of
// stopped gateways (usage.ts) do not outlive their tokens; the same of the usage history's
// keys (usage-history.ts), and their hours past the window. One member does it
// (the lowest key), so that the fleet does not do the same work N times.
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { EtcdConnection } from './etcd.js';
import { DamagedKeyError, fleetValue } from './keys.js';
import type { FleetKeys, FleetValue } from './keys.js';
import { decodeFleetUsage } from './usage.js';
import { tidyHistoryValue } from './usage-history.js';
import { HOUR_MS } from '../service/usage-history.js';

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
    // Read before the inventory: a token counted here was issued before, so its entry is
    // read below, and a token issued meanwhile is never taken for one gone.
    // An etcd user without the usage prefix (usage.ts warns of it) still tidies the state.
    const usage = await etcd.client
      .getAll()
      .prefix(keys.usagePrefix)
      .exec()
      .catch(() => ({ kvs: [] }));
    const history = await etcd.client
      .getAll()
      .prefix(keys.historyPrefix)
      .exec()
      .catch(() => ({ kvs: [] }));
    const listed = new Set<number>();
    const isDead = (v: FleetValue): boolean =>
      v.kind === 'revoked'
        ? v.expiry <= now
        : v.kind === 'block'
          ? v.bound <= now
          : v.kind === 'token'
            ? v.entry.expiry <= now || v.entry.generation < generation
            : false;
    const expired: string[] = [];
    for (const folder of ['revoked', 'blocks', 'tokens'] as const) {
      const found = await etcd.client.getAll().prefix(keys.folder(folder)).strings();
      for (const [key, value] of Object.entries(found)) {
        let v: FleetValue;
        try {
          v = fleetValue(keys, key, value);
        } catch (error) {
          // Reported, and fenced on or skipped, where the watch met it (fleet.ts); an operator's to repair.
          if (error instanceof DamagedKeyError) continue;
          throw error;
        }
        if (isDead(v)) expired.push(key);
        else if (v.kind === 'token') listed.add(v.entry.serial);
      }
    }
    for (let i = 0; i < expired.length; i += TIDY_BATCH) {
      const batch = expired.slice(i, i + TIDY_BATCH);
      await etcd.client
        .if(keys.key(), 'Create', '>', 0)
        .then(...batch.map((key) => etcd.client.delete().key(key)))
        .commit();
    }
    if (expired.length > 0)
      log.info('deleted expired revocations, serial blocks and inventory entries from the fleet', { count: expired.length });
    let dropped = 0;
    for (const kv of usage.kvs) {
      const counted = decodeFleetUsage(kv.value.toString('utf8'));
      if (counted === undefined) continue;
      const kept = counted.tokens.filter(([serial]) => listed.has(serial));
      const quota = counted.quota.filter(([serial]) => listed.has(serial));
      if (kept.length === counted.tokens.length && quota.length === counted.quota.length) continue;
      const key = kv.key.toString('utf8');
      // Only the value read: a gateway that published meanwhile wins, and the next round looks again.
      const change =
        kept.length === 0 && quota.length === 0
          ? etcd.client.delete().key(key)
          : etcd.client.put(key).value(JSON.stringify(quota.length === 0 ? { tokens: kept } : { tokens: kept, quota }));
      if ((await etcd.client.if(key, 'Mod', '==', kv.mod_revision).then(change).commit()).succeeded)
        dropped += counted.tokens.length - kept.length;
    }
    if (dropped > 0) log.info('dropped the usage counts of tokens no longer listed from the fleet', { count: dropped });
    // The hourly counts likewise: the tokens no longer listed, the hours past the window (usage-history.ts).
    let tidied = 0;
    for (const kv of history.kvs) {
      const value = tidyHistoryValue(kv.value.toString('utf8'), listed, Math.floor((now * 1000) / HOUR_MS));
      if (value === undefined) continue;
      const key = kv.key.toString('utf8');
      const change = value === null ? etcd.client.delete().key(key) : etcd.client.put(key).value(value);
      if ((await etcd.client.if(key, 'Mod', '==', kv.mod_revision).then(change).commit()).succeeded) tidied++;
    }
    if (tidied > 0)
      log.info('dropped the usage history of tokens no longer listed, and hours past the window, from the fleet', { keys: tidied });
  } catch (error) {
    log.debug('cannot tidy the fleet state', errorFields(error));
  }
}
