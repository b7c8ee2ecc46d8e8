// The threads build's entry (build/core-threads.wasm): the whole ABI of index.ts over an
// imported shared memory, plus the calls that give each further instance a slot of its
// own. See README.md beside this file, "Threads".
import { attachSlot, detachSlot, slotCount } from './slots';
import { tokenScratchInit } from './token';

export * from './index';

/**
 * Joins a memory that another instance has set up with `init`, as a reader on `slot`
 * (1 .. slots() - 1). 0; -1 the memory is not set up yet, or this instance already has a
 * slot; -2 no such slot; -3 another instance holds it.
 */
export function attach(slot: u32): i32 {
  const result = attachSlot(slot);
  if (result == 0) tokenScratchInit();
  return result;
}

/** Gives this instance's slot back, wiped, for another instance to attach to. 0; -1 when it has none to give. */
export function detach(): i32 {
  return detachSlot();
}

/** How many instances the memory has room for, the owner's included; 0 before `init`. */
export function slots(): u32 {
  return slotCount();
}
