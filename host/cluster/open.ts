// The state owner of a fleet gateway, opened: the password file (generated when missing),
// the hashing thread, the fleet (etcd) the state lives in, and the token service over
// them. Where openAuth (service/open.ts) keeps the state in the data folder, this one
// keeps it in etcd only: the data folder is not used.
import { webcrypto } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import type { ClusterConfig } from '../options.js';
import { loadPasswordFile } from '../password/file.js';
import { Argon2idVerifier } from '../password/hash.js';
import { loggedEndpoint } from '../rpc/jsonrpc.js';
import type { TokenServiceLink } from '../service/link.js';
import type { OpenedAuth } from '../service/open.js';
import type { PasswordThrottle } from '../service/throttle.js';
import { TokenService } from '../service/token-service.js';
import { StateError } from '../errors.js';
import { Fleet, FleetError } from './fleet.js';
import { FleetInventory } from './inventory.js';

export interface FleetAuthSettings {
  readonly passwordFile: string;
  /** Seconds. */
  readonly tokenLifetime: number;
  readonly cluster: ClusterConfig;
  readonly throttle?: PasswordThrottle;
  /** The fence the gates read (cluster/fence.ts). */
  readonly fence: Uint32Array;
  /** Live tokens at most, fleet-wide (--api-auth-max-tokens). */
  readonly maxTokens: number;
}


/**
 * Joins the fleet and opens the token service over it. Throws UsageError for a bad
 * password file, FleetError when the fleet cannot be joined (etcd unreachable).
 */
export async function openFleetAuth(core: Core, settings: FleetAuthSettings, log: Logger, metrics: Metrics, clock: Clock): Promise<OpenedAuth> {
  const password = await loadPasswordFile(settings.passwordFile, () => core.generatePassword(), log);
  const verifier = new Argon2idVerifier();
  let fleet: Fleet;
  try {
    fleet = await Fleet.join(core, { ...settings.cluster, tokenLifetime: settings.tokenLifetime, fence: settings.fence },
      async () => ({ key: webcrypto.getRandomValues(new Uint8Array(32)), record: await verifier.hash(password) }),
      (record) => verifier.verify(password, record), log, clock);
  } catch (error) {
    await verifier.close();
    if (error instanceof FleetError) {
      throw new StateError((name) => `cannot join the fleet ${settings.cluster.name} through ${name('clusterEtcd')} ` +
        `${settings.cluster.endpoints.join(',')}: ${error.message}; check that etcd runs there and answers`);
    }
    throw error;
  }
  fleet.registerMetrics(metrics.registry);
  const inventory = new FleetInventory(fleet, core, clock);
  const service = new TokenService({ core, store: fleet, inventory, maxTokens: settings.maxTokens, verifier, tokenLifetime: settings.tokenLifetime,
    log, metrics, clock, throttle: settings.throttle });
  const endpoint = loggedEndpoint(service.methods(), log);
  const link: TokenServiceLink = {
    throttled: (address) => service.throttled(address),
    handle: (body, context) => Promise.resolve(endpoint.handle(body, context)),
  };
  return {
    link,
    close: async () => {
      await fleet.close();
      await verifier.close();
    },
  };
}
