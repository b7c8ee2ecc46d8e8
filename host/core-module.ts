// Node's way to the core: build/core.wasm, compiled once per process. Other runtimes
// compile it their own way and pass it to `new Core(module)`.
import { readFileSync } from 'node:fs';
import { Core } from './core.js';

let compiled: WebAssembly.Module | undefined;

export function coreModule(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(readFileSync(new URL('../core.wasm', import.meta.url)));
  return compiled;
}

/** A core instance in this process. */
export function newCore(options: { windowLog2?: number } = {}): Core {
  return new Core(coreModule(), options);
}
