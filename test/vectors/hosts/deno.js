// The core in Deno, and the vectors through it. From the repository root:
//   deno run --no-config --allow-read=. --import-map=test/vectors/hosts/import-map.json test/vectors/hosts/deno.js
// prints one JSON line: the snippet's answers and the runner's result.
import { Core } from '../../../build/host/core/core.js';
import { Outcome } from '../../../build/host/core/abi.js';
import { runVectors } from '../run-vectors.js';

const module = await WebAssembly.compile(await Deno.readFile(new URL('../../../build/core.wasm', import.meta.url)));
const core = new Core(module);
core.setKey();
const now = Math.floor(Date.now() / 1000);
const { token } = core.issue(core.addGrant(['/ext/info']), now, 3600);
const snippet = { outcome: Outcome[core.authorize(`Bearer ${token}`, '/ext/info', now)], password: core.generatePassword().length };

const vectors = JSON.parse(await Deno.readTextFile(new URL('../core-vectors.json', import.meta.url)));
console.log(JSON.stringify({ runtime: `deno ${Deno.version.deno}`, snippet, ...(await runVectors(module, vectors)) }));
