// The core as the host builds it: build/host/core/core.js, instantiated the way the server
// does (through build/host/core/module.js's newCore when the build has it; older builds
// took the options straight in `new Core(options)`). Outcome is build/host/core/abi.js's
// (older builds had it in core.js).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BUILD, CORE_JS } from './common.js';

const CORE_MODULE_JS = join(BUILD, 'host', 'core', 'module.js');
const CORE_ABI_JS = join(BUILD, 'host', 'core', 'abi.js');

/** { Core, Outcome, newCore(options) } from the build. */
export async function loadCore() {
  const mod = await import(pathToFileURL(CORE_JS).href);
  const abi = existsSync(CORE_ABI_JS) ? await import(pathToFileURL(CORE_ABI_JS).href) : {};
  let newCore = (options = {}) => new mod.Core(options);
  if (existsSync(CORE_MODULE_JS)) {
    const cm = await import(pathToFileURL(CORE_MODULE_JS).href);
    if (typeof cm.newCore === 'function') newCore = (options = {}) => cm.newCore(options);
  }
  return { ...abi, ...mod, newCore };
}
