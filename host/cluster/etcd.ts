// The gateway's client of the fleet's etcd: made with this gateway's TLS and etcd user,
// replaced when a watch must start anew, and one wrapper that turns a failed call into a
// FleetError for the client (its cause goes to the log).
import { Etcd3 } from 'etcd3';
import { systemClock } from '../clock.js';
import { FleetError } from '../errors.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';

/** What this gateway shows etcd, as read from the files the options name (open.ts). */
export interface EtcdAccess {
  /** TLS (https:// endpoints): the CAs that may sign etcd's certificate (undefined: the system's), and a client certificate. */
  readonly tls?: { readonly ca?: Buffer; readonly client?: { readonly cert: Buffer; readonly key: Buffer } };
  /** etcd's authentication (RBAC). */
  readonly auth?: { readonly user: string; readonly password: string };
}

export interface EtcdSettings {
  /** etcd client URLs. */
  readonly endpoints: readonly string[];
  /** Lease TTL, whole seconds: no unary call waits longer. */
  readonly leaseSeconds: number;
  /** How this gateway proves itself to etcd. */
  readonly access: EtcdAccess;
}

// etcd3's fault policies retry and break circuits for seconds; a gateway handles
// failures itself (fail the call, let the lease decide), so each call is made once. A
// policy's execute must return a promise even when `fn` throws: etcd3 chains .catch on it.
const NOOP_POLICY = { execute: async <T>(fn: (context: object) => T): Promise<Awaited<T>> => await fn({}) };

export class EtcdConnection {
  /** Replaced when a watch is started anew (reconnect). */
  client: Etcd3;

  constructor(
    private readonly settings: EtcdSettings,
    private readonly log: Logger,
  ) {
    this.client = this.connect();
  }

  /** A call to etcd whose failure becomes a FleetError for the client; the cause goes to the log. */
  async call<T>(call: (client: Etcd3) => Promise<T>): Promise<T> {
    try {
      return await call(this.client);
    } catch (error) {
      if (error instanceof FleetError) throw error;
      this.log.warn('etcd call failed', errorFields(error));
      throw new FleetError(
        "the fleet's etcd did not answer, so the change is not confirmed (it may still take effect); retry, " + 'or use another gateway',
        { cause: error },
      );
    }
  }

  /**
   * A new client in the current one's place. etcd3 opens its watch stream with the
   * etcd user's token of the moment and keeps it when it reconnects, and etcd forgets its
   * tokens when it restarts: it then cancels the watch, and would refuse any new one on
   * that stream (where a watch refused at its creation leaves etcd3's queue of watches to
   * create stuck). A new client signs in anew.
   */
  reconnect(): void {
    this.client.close();
    this.client = this.connect();
  }

  close(): void {
    this.client.close();
  }

  private connect(): Etcd3 {
    const { settings } = this;
    const { tls, auth } = settings.access;
    return new Etcd3({
      hosts: [...settings.endpoints],
      // Without a CA of its own, gRPC trusts the system's (as Node does): it takes null
      // for them, which etcd3's type does not say.
      credentials: tls && {
        rootCertificate: tls.ca ?? (null as unknown as Buffer),
        certChain: tls.client?.cert,
        privateKey: tls.client?.key,
      },
      auth: auth && { username: auth.user, password: auth.password },
      dialTimeout: settings.leaseSeconds * 1000,
      // Unary calls fail within the lease's time rather than retry past it: a caller
      // waiting for a state change needs an answer while the fleet still vouches for it.
      // gRPC measures a deadline against the system's clock, so it is given in that
      // clock's time, whatever clock the gateway tells time by.
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: systemClock() + settings.leaseSeconds * 1000 }),
      faultHandling: {
        host: () => NOOP_POLICY as never,
        global: NOOP_POLICY as never,
        // Reconnect the watch quickly once etcd is back: the fleet serves again only after.
        watchBackoff: {
          duration: 200,
          next() {
            return this;
          },
        } as never,
      },
    });
  }
}
