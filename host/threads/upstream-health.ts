// The upstream's health as every HTTP thread's proxy sees it: one word of shared memory,
// so that the process logs one warning when the upstream starts failing and one line
// when it answers again, whichever threads see it.
import type { UpstreamHealth } from '../http/forwarding.js';

const ANSWERING = 0;
const FAILING = 1;

/** A fresh word for `sharedHealth`, to hand to every thread. */
export function healthWord(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(4));
}

/**
 * The health kept in `word`. Only a change writes it: every exchange reads the word, and
 * a word that is only read stays in every core's cache.
 */
export function sharedHealth(word: Int32Array): UpstreamHealth {
  return {
    answered: () => Atomics.load(word, 0) === FAILING && Atomics.compareExchange(word, 0, FAILING, ANSWERING) === FAILING,
    failed: () => Atomics.load(word, 0) === ANSWERING && Atomics.compareExchange(word, 0, ANSWERING, FAILING) === ANSWERING,
  };
}
