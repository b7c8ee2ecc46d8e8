// Node's way to the core: build/core.wasm and build/core-threads.wasm, each compiled once
// per process. Other runtimes compile them their own way and pass them to `new Core(module)`.
import { readFileSync } from 'node:fs';
import { Core, type CoreOptions } from './core.js';

let compiled: WebAssembly.Module | undefined;
let compiledThreads: WebAssembly.Module | undefined;

export function coreModule(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(readFileSync(new URL('../../core.wasm', import.meta.url)));
  return compiled;
}

/**
 * The threads build, whose instances share one memory. A compiled module can be posted
 * to a worker thread, which then instantiates it without compiling again.
 */
export function coreThreadsModule(): WebAssembly.Module {
  compiledThreads ??= new WebAssembly.Module(readFileSync(new URL('../../core-threads.wasm', import.meta.url)));
  return compiledThreads;
}

/** A core instance in this process. */
export function newCore(options: { windowLog2?: number } = {}): Core {
  return new Core(coreModule(), options);
}

/** An instance of the threads build: the owner of a new shared memory, or with `slot`, a reader of the given one. */
export function newThreadsCore(options: CoreOptions = {}): Core {
  return new Core(coreThreadsModule(), options);
}
