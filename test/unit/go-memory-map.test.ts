// One memory map for every host: assembly/memory-map.ts, which the core and the TypeScript
// host compile, and go/core/memory_map.go, written from it by scripts/go-memory-map.mjs
// (`go generate`). The Go file checked in must be what the generator writes now.
import t from 'tap';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { memoryMap, render, SOURCE, TARGET } from '../../scripts/go-memory-map.mjs';
import * as MAP from '../../build/assembly/memory-map.js';
import { ROOT } from '../helpers/server.js';

const STALE = 'assembly/memory-map.ts changed: run `cd go && go generate ./core` and check in go/core/memory_map.go';

t.test('go/core/memory_map.go is what the generator writes from assembly/memory-map.ts now', async (t) => {
  const constants = await memoryMap();
  t.ok(render(constants) === readFileSync(join(ROOT, TARGET), 'utf8'), STALE);
  t.same(Object.fromEntries(constants.map((c) => [c.name, c.value])), { ...MAP }, 'every constant, with the value the host compiles');
  const check = await promisify(execFile)(process.execPath, ['scripts/go-memory-map.mjs', '--check'], { cwd: ROOT });
  t.same([check.stdout, check.stderr], ['', ''], '--check passes, silently');
});

t.test('the generator carries values and doc comments, and refuses what it cannot carry', async (t) => {
  const go = render(await memoryMap('/** A page, MAX_X of them. */\nexport const PAGE_X = 2 * 3;\nexport const MAX_X = 1 << 4;\n'));
  t.match(go, /\t\/\/ A page, maxX of them\.\n\tpageX = 6\n\tmaxX {2}= 16\n\)/);
  await t.rejects(memoryMap('export const A = 1.5;\n'), /A is 1.5, not a non-negative integer/);
  await t.rejects(memoryMap('export const A = 1;\nexport function b() { return 2; }\n'), /not `export const NAME = value;`/);
  await t.rejects(memoryMap('export const A =\n  1;\n'), /not `export const NAME = value;`/);
});

t.test("the map's limit on pages is the threads build's maximum memory", async (t) => {
  const asconfig = JSON.parse(readFileSync(join(ROOT, 'asconfig.json'), 'utf8'));
  t.equal(MAP.MAX_PAGES, asconfig.targets.threads.maximumMemory, `${SOURCE}'s MAX_PAGES is asconfig.json's maximumMemory`);
});
