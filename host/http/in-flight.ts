// The requests under way, so that a stop lets them finish: every response that goes out
// later than its handler returns is counted from the handler until it is written or its
// client is gone.
import type { HttpResponse } from 'uWebSockets.js';

/** A response that goes out later; `open` until it is written or its client is gone. */
export interface Pending {
  open: boolean;
  /** Runs once, however the exchange ended; later calls do nothing. */
  finish(): void;
}

export class InFlight {
  private count = 0;
  private idle: (() => void) | null = null;

  enter(): void {
    this.count++;
  }

  leave(): void {
    if (--this.count === 0 && this.idle !== null) this.idle();
  }

  /**
   * A response answered later: in flight until it is answered or its client goes, and
   * `finish` runs once either way. Call it from the uWS handler, before returning: it
   * sets the response's onAborted.
   */
  begin(res: HttpResponse): Pending {
    this.enter();
    const pending: Pending = {
      open: true,
      finish: () => {
        if (!pending.open) return;
        pending.open = false;
        this.leave();
      },
    };
    res.onAborted(pending.finish);
    return pending;
  }

  /** Waits until no request is in flight, or `graceMs` at most; resolves with how many are left. */
  async drain(graceMs: number): Promise<number> {
    if (this.count > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.idle = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      clearTimeout(timer);
    }
    return this.count;
  }
}
