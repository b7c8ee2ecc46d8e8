// The fence: whether this gateway of a fleet may serve protected requests, as one word
// every HTTP thread reads. It holds the time until which this gateway's lease is surely
// alive on etcd's side (0: not serving: not yet caught up, or the lease is lost), in
// quarter seconds since FENCE_EPOCH_MS: fine enough that a short lease keeps most of its
// time, and an unsigned 32-bit word lasts until 2058. The gate compares it with the time
// of each request, so a gateway that was stopped or cut off refuses by itself once that
// time has come, whatever its timers have done meanwhile: no timer has to fire first.
// The fleet's membership (cluster/) writes it; it sits with the other words the threads
// share, as the throttle board does.

/** 2024-01-01T00:00:00Z. */
const FENCE_EPOCH_MS = 1_704_067_200_000;
const UNIT_MS = 250;

/** One Uint32 in shared memory, for the owner to write and every thread to read. */
export function fenceMemory(): Uint32Array {
  return new Uint32Array(new SharedArrayBuffer(4));
}

/** Whether a request at `nowMs` (ms since the Unix epoch) may be served. Allocates nothing. */
function fenceOpen(fence: Uint32Array, nowMs: number): boolean {
  return Atomics.load(fence, 0) * UNIT_MS + FENCE_EPOCH_MS > nowMs;
}

/** The gate's and the readiness route's reading of `fence` (http/gate.ts, Serving). */
export function fenceReader(fence: Uint32Array): (nowMs: number) => boolean {
  return (nowMs) => fenceOpen(fence, nowMs);
}

/** Serves until `untilMs` (exclusive), rounded down to the fence's unit. */
export function openFence(fence: Uint32Array, untilMs: number): void {
  Atomics.store(fence, 0, Math.max(0, Math.floor((untilMs - FENCE_EPOCH_MS) / UNIT_MS)));
}

export function closeFence(fence: Uint32Array): void {
  Atomics.store(fence, 0, 0);
}
