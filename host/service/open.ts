// The state owner, opened: the password (from its file, generated when missing), the
// data folder (created on the first start, locked), the hashing thread, and the token
// service over them, with the link the serving side talks to it through.
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import { loadPasswordFile } from '../password/file.js';
import { Argon2idVerifier } from '../password/hash.js';
import { loggedEndpoint } from '../rpc/jsonrpc.js';
import { JournalInventory } from '../state/inventory.js';
import type { InventoryEntry } from '../state/inventory.js';
import { restoreService, StateStore } from '../state/store.js';
import { unixSeconds } from '../clock.js';
import type { TokenServiceLink } from './link.js';
import type { PasswordThrottle } from './throttle.js';
import { TokenService } from './token-service.js';

export interface AuthSettings {
  /** Absolute path of the password file; generated when missing. */
  readonly passwordFile: string;
  /** Absolute path of the data folder. */
  readonly dataDir: string;
  /** Seconds. */
  readonly tokenLifetime: number;
  /** Live tokens at most in the inventory. */
  readonly maxTokens: number;
  /** The password throttle; by default a fresh one. */
  readonly throttle?: PasswordThrottle;
}

/** The token service, restored from its data folder, as the serving side sees it. */
export interface OpenedAuth {
  /** What POST /ext/auth calls. */
  readonly link: TokenServiceLink;
  /** Stops the hashing thread and releases the data folder. */
  close(): Promise<void>;
}

/**
 * Opens the token service, on `clock`'s time. Throws UsageError for a bad password file, StateError for a
 * data folder it cannot use.
 */
export async function openAuth(core: Core, settings: AuthSettings, log: Logger, metrics: Metrics, clock: Clock): Promise<OpenedAuth> {
  const password = await loadPasswordFile(settings.passwordFile, () => core.generatePassword(), log);
  const store = await StateStore.open(settings.dataDir, log, clock);
  const verifier = new Argon2idVerifier();
  let inventory: JournalInventory | undefined;
  const close = async (): Promise<void> => {
    await verifier.close();
    await inventory?.close();
    await store.close();
  };
  try {
    const fresh = store.state === undefined;
    await restoreService(core, store, verifier, password, settings.tokenLifetime, log, clock);
    const state = store.state!;
    // Listed: issued under the current password, and not expired.
    const live = (e: InventoryEntry): boolean => e.generation === core.generation && e.expiry > unixSeconds(clock);
    // An entry the state beside it cannot hold (a grant it lacks, a serial never reserved) is damage.
    const valid = (e: InventoryEntry): string | undefined =>
      e.grant >= state.grants.length ? `names endpoint list ${e.grant}, which the state file does not hold`
        : e.serial >= state.serialCeiling ? 'has a serial the state file never reserved'
          : e.generation > state.generation ? 'is of a password generation the state file has not reached' : undefined;
    inventory = await JournalInventory.open(settings.dataDir, state.key, fresh, live, valid, log);
  } catch (error) {
    await close();
    throw error;
  }
  const service = new TokenService({
    core, store, verifier, tokenLifetime: settings.tokenLifetime, inventory, maxTokens: settings.maxTokens, log, metrics, clock,
    throttle: settings.throttle,
  });
  const endpoint = loggedEndpoint(service.methods(), log);
  const link: TokenServiceLink = {
    throttled: (address) => service.throttled(address),
    handle: (body, context) => Promise.resolve(endpoint.handle(body, context)),
  };
  return { link, close };
}
