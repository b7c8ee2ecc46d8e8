// The fence: whether this gateway of a fleet may serve protected requests, as one word
// every HTTP thread reads. It holds the Unix second until which this gateway's lease is
// surely alive on etcd's side (0: not serving: not yet caught up, or the lease is lost).
// The gate compares it with the time of each request, so a gateway that was stopped or
// cut off refuses by itself once that second has come, whatever its timers have done
// meanwhile: no timer has to fire first.

/** One Int32 in shared memory, for the owner to write and every thread to read. */
export function fenceMemory(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(4));
}

/** Whether a request at `nowSeconds` may be served. Allocates nothing. */
export function fenceOpen(fence: Int32Array, nowSeconds: number): boolean {
  return Atomics.load(fence, 0) > nowSeconds;
}

/** Serves until `untilSeconds` (exclusive). */
export function openFence(fence: Int32Array, untilSeconds: number): void {
  Atomics.store(fence, 0, untilSeconds);
}

export function closeFence(fence: Int32Array): void {
  Atomics.store(fence, 0, 0);
}

/** The body of the 503 a fenced gateway answers, with what the operator should look at. */
export const FENCED_REASON = 'this api-auth gateway has lost touch with its fleet (etcd) and cannot vouch that it holds every ' +
  'revocation; it serves again by itself once it has caught up; meanwhile use another gateway';
