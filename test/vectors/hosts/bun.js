// The core in Bun, and the vectors through it. From the repository root:
//   bun test/vectors/hosts/bun.js
// prints one JSON line: the snippet's answers and the runner's result. Bun finds
// @assemblyscript/loader in node_modules itself.
import { Core } from '../../../build/host/core/core.js';
import { Outcome } from '../../../build/host/core/abi.js';
import { runVectors } from '../run-vectors.js';

const module = await WebAssembly.compile(await Bun.file(new URL('../../../build/core.wasm', import.meta.url)).arrayBuffer());
const core = new Core(module);
core.setKey();
const now = Math.floor(Date.now() / 1000);
const { token } = core.issue(core.addGrant(['/ext/info']), now, 3600);
const snippet = { outcome: Outcome[core.authorize(`Bearer ${token}`, '/ext/info', now)], password: core.generatePassword().length };

const vectors = await Bun.file(new URL('../core-vectors.json', import.meta.url)).json();
console.log(JSON.stringify({ runtime: `bun ${Bun.version}`, snippet, ...(await runVectors(module, vectors)) }));
