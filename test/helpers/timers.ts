// This process's setTimeout on a time the test moves (node:test's mock timers), for what
// the host schedules with a timer rather than reads from its injected clock: the tarpit's
// hold, the WebSocket handshake's deadline. It keeps the delay of each timer set, so a
// test waits for the event "a timer of N ms was set" and then moves the time itself,
// instead of waiting for real time to pass. setInterval, setImmediate and I/O stay real.
import { mock } from 'node:test';
import type { Test } from 'tap';

export interface ManualTimers {
  /** Moves the time on by `ms`, running the timers that come due, in order. */
  tick(ms: number): void;
  /** Resolves once a timer of `ms` has been set (each set timer answers one call), letting I/O run meanwhile. */
  set(ms: number): Promise<void>;
  /** Gives setTimeout back; also done when `t` ends. */
  restore(): void;
}

/** Mocks setTimeout until `t` ends (or `restore`). */
export function manualTimers(t: Test): ManualTimers {
  mock.timers.enable({ apis: ['setTimeout'] });
  const mocked = globalThis.setTimeout;
  const delays: number[] = [];
  globalThis.setTimeout = ((run: () => void, ms?: number, ...args: unknown[]) => {
    delays.push(ms ?? 0);
    return mocked(run, ms, ...args);
  }) as typeof setTimeout;
  let restored = false;
  const restore = (): void => {
    if (restored) return;
    restored = true;
    globalThis.setTimeout = mocked;
    mock.timers.reset();
  };
  t.teardown(restore);
  return {
    tick: (ms) => mock.timers.tick(ms),
    async set(ms) {
      for (;;) {
        const at = delays.indexOf(ms);
        if (at >= 0) {
          delays.splice(at, 1);
          return;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
    restore,
  };
}

/** Lets the I/O that is ready run: `turns` turns of the event loop. */
export async function settle(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}
