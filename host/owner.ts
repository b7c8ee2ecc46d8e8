// The state owner, opened: the composition root of the token service. It reads the
// password (from its file, generated when missing), starts the hashing thread, opens the
// backend the options name (the data folder, or a fleet in etcd), and hands the service
// its ledger and inventory; here and only here is the backend chosen. The serving side
// talks to the result through the link.
import type { Clock } from './clock.js';
import type { Core } from './core/core.js';
import type { Logger } from './ops/log.js';
import type { Metrics } from './ops/metrics.js';
import type { ClusterConfig } from './options.js';
import { loadPasswordFile } from './password/file.js';
import { Argon2idVerifier } from './password/hash.js';
import type { PasswordVerifier } from './password/hash.js';
import { loggedEndpoint } from './rpc/jsonrpc.js';
import type { Backend } from './service/ledger.js';
import type { TokenServiceLink } from './service/link.js';
import type { PasswordThrottle } from './service/throttle.js';
import { TokenService } from './service/token-service.js';
import { openDataFolder } from './state/open.js';
import { UsageHistory } from './service/usage-history.js';
import type { RefusalTotals } from './service/usage-history.js';
import type { NodeStatus } from './ops/node-status.js';
import { authMethods } from './service/auth-methods.js';

export interface OwnerSettings {
  /** Absolute path of the password file; generated when missing. */
  readonly passwordFile: string;
  /** Seconds. */
  readonly tokenLifetime: number;
  /** Seconds; NEVER_SECONDS for never. */
  readonly maxTokenLifetime: number;
  /** Live tokens at most (--api-auth-max-tokens); fleet-wide in a fleet. */
  readonly maxTokens: number;
  /** Seconds: the longest a console session's renewals run from its sign-in (--console-session-max-lifetime); 12 hours when left out. */
  readonly sessionMaxLifetime?: number;
  /** The password throttle; by default a fresh one. */
  readonly throttle?: PasswordThrottle;
  /** Where the state is kept: the data folder, or a fleet, with the fence its gates read (threads/fence.ts). */
  readonly backend: { readonly dataDir: string } | { readonly cluster: ClusterConfig; readonly fence: Uint32Array };
  /** The refused requests' totals by reason, every HTTP thread's (auth.usageHistory's refusals); none without it. */
  readonly refusals?: RefusalTotals;
  /** The sessions open and the upstream's latency now (auth.nodeStatus); none without it. */
  readonly status?: () => Promise<NodeStatus>;
}

/** The token service, opened, as the serving side sees it. */
export interface OpenedAuth {
  /** What POST /ext/auth calls. */
  readonly link: TokenServiceLink;
  /** Stops the hashing thread and releases the backend (the data folder's lock; the fleet's lease). */
  close(): Promise<void>;
}

/**
 * Opens the token service, on `clock`'s time. Throws OptionError for a bad password file
 * or etcd file, StateError for a data folder it cannot use or a fleet it cannot join.
 */
export async function openOwner(core: Core, settings: OwnerSettings, log: Logger, metrics: Metrics, clock: Clock): Promise<OpenedAuth> {
  const { backend } = settings;
  // Kept by the backend: the data folder's file, or this gateway's fleet keys.
  const history = new UsageHistory(core, clock, settings.refusals);
  let open: (password: string, verifier: PasswordVerifier) => Promise<Backend>;
  if ('cluster' in backend) {
    const { cluster, fence } = backend;
    // Loaded only for a fleet: etcd3 and gRPC under it take about as much CPU to load as
    // the rest of api-auth, which every start on a data folder (and every operator
    // command) would otherwise pay.
    const { readEtcdAccess, joinFleet } = await import('./cluster/open.js');
    // Before the password file, which may be generated: a bad etcd file changes nothing.
    const access = await readEtcdAccess(cluster, log);
    open = (password, verifier) => joinFleet(core, cluster, access, fence, password, verifier, log, metrics, clock, history);
  } else {
    open = (password, verifier) =>
      openDataFolder(core, { dataDir: backend.dataDir, tokenLifetime: settings.tokenLifetime }, password, verifier, log, clock, history);
  }
  const password = await loadPasswordFile(settings.passwordFile, () => core.generatePassword(), log);
  const verifier = new Argon2idVerifier();
  let opened: Backend;
  try {
    opened = await open(password, verifier);
  } catch (error) {
    await verifier.close();
    throw error;
  }
  const service = new TokenService({
    core,
    ledger: opened.ledger,
    inventory: opened.inventory,
    verifier,
    tokenLifetime: settings.tokenLifetime,
    maxTokenLifetime: settings.maxTokenLifetime,
    maxTokens: settings.maxTokens,
    log,
    metrics,
    clock,
    throttle: settings.throttle,
    history,
    status: settings.status,
    sessionMaxLifetime: settings.sessionMaxLifetime,
  });
  history.begin(() => opened.inventory.list());
  const endpoint = loggedEndpoint(authMethods(service), log);
  const link: TokenServiceLink = {
    throttled: (address) => service.throttled(address),
    handle: (body, context) => Promise.resolve(endpoint.handle(body, context)),
  };
  return {
    link,
    close: async () => {
      history.stop();
      await verifier.close();
      await opened.close();
    },
  };
}
