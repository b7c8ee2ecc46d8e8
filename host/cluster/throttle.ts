// The fleet throttle: password checks the whole fleet may fail per window, whatever the
// number of gateways. Each gateway's own throttle (service/throttle.ts) allows 100 at once
// and then one a second, so without this N gateways would let a guesser spread over them
// try N times as fast.
import type { Lease } from 'etcd3';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { SharedCheck } from '../service/ledger.js';
import type { EtcdConnection } from './etcd.js';
import { pad, TIME_WIDTH } from './keys.js';
import type { FleetKeys } from './keys.js';

/** Password checks the whole fleet may fail per window. */
export const FLEET_PASSWORD_FAILURES = 100;
/** The fleet throttle's window, seconds. */
export const FLEET_PASSWORD_WINDOW = 60;

export class FleetThrottle {
  /** The lease of this window's records: one per window of starts. */
  private lease: { window: number; lease: Lease } | undefined;
  private checks = 0;

  constructor(
    private readonly etcd: EtcdConnection,
    private readonly keys: FleetKeys,
    private readonly log: Logger,
  ) {}

  /**
   * A password check about to run, counted against the fleet's allowance as a failure
   * from its start (so that checks running at once on many gateways cannot overrun it
   * together): at most FLEET_PASSWORD_FAILURES in any FLEET_PASSWORD_WINDOW seconds. A
   * record is a key named by its time in ms, so the last window's are one range; `member`
   * (this gateway's lease id) keeps two gateways' records of one ms apart.
   * Returns the whole seconds to wait when the allowance is spent (nothing counted), or
   * the check: `succeeded()` or `abandoned()` takes it back; a failure leaves it counted.
   */
  async begin(nowMs: number, member: string): Promise<number | SharedCheck> {
    const prefix = this.keys.throttlePrefix;
    const windowMs = FLEET_PASSWORD_WINDOW * 1000;
    const span = { start: prefix + pad(Math.max(0, nowMs - windowMs), TIME_WIDTH), end: prefix + '~' };
    const counted = await this.etcd.call((client) => client.getAll().inRange(span).count());
    if (counted >= FLEET_PASSWORD_FAILURES) {
      // One more fits once the oldest record of the span is a window old.
      const oldest = await this.etcd.call((client) => client.getAll().inRange(span).sort('Key', 'Ascend').limit(1).keys());
      const at = oldest.length > 0 ? Number(oldest[0].slice(prefix.length, prefix.length + TIME_WIDTH)) : nowMs;
      return Math.max(1, Math.ceil((at + windowMs - nowMs) / 1000));
    }
    // Records go with their lease, which outlives the window.
    const bucket = Math.floor(nowMs / windowMs);
    if (this.lease?.window !== bucket) {
      this.lease?.lease.release();
      this.lease = { window: bucket, lease: this.etcd.client.lease(3 * FLEET_PASSWORD_WINDOW, { autoKeepAlive: false }) };
    }
    const lease = this.lease.lease;
    const key = `${prefix}${pad(nowMs, TIME_WIDTH)}-${member}-${this.checks++}`;
    await this.etcd.call(async (client) =>
      client
        .put(key)
        .value('')
        .lease(await lease.grant())
        .exec(),
    );
    const takeBack = (): void => {
      this.etcd.client
        .delete()
        .key(key)
        .exec()
        .catch((error) => this.log.debug('cannot take back a password check', errorFields(error)));
    };
    return { succeeded: takeBack, abandoned: takeBack };
  }

  /** Lets go of the window's lease (its records expire with it): the client is being replaced, or closed. */
  release(): void {
    this.lease?.lease.release();
    this.lease = undefined;
  }
}
