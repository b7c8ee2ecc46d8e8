// One memory map and one result record for every host: assembly/memory-map.ts and
// assembly/result-record.ts, which the core and the TypeScript host compile, and what
// scripts/go-memory-map.mjs (`go generate`) writes from them for Go (go/core/memory_map.go,
// go/core/result_record.go) and the C host (test/c-host/result-record.h). The files
// checked in must be what the generator writes now.
import t from 'tap';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { memoryMap, outputs, RECORD_SOURCE, render, SOURCE, TARGET } from '../../scripts/go-memory-map.mjs';
import * as RECORD from '../../build/assembly/result-record.js';
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

t.test(
  "the result record's offsets, for Go and the C host, are what the generator writes from assembly/result-record.ts now",
  async (t) => {
    for (const [target, text] of await outputs()) {
      t.ok(text === readFileSync(join(ROOT, target), 'utf8'), `${target} is current: run \`cd go && go generate ./core\` and check it in`);
    }
    const record = await memoryMap(readFileSync(join(ROOT, RECORD_SOURCE), 'utf8'));
    t.same(
      Object.fromEntries(record.map((c) => [c.name, c.value])),
      { ...RECORD },
      'every offset, with the value the core and the host compile',
    );
    // The fields of one call do not overlap: a Limited check's claims, admit's wait and reset, quota's counts and window.
    const calls = [
      ['RESULT_SERIAL', 'RESULT_EXPIRY', 'RESULT_GENERATION', 'RESULT_GRANT', 'RESULT_SCOPED'],
      ['RESULT_WAIT', 'RESULT_RESET'],
      ['RESULT_REQUESTS', 'RESULT_LAST_USED'],
      ['RESULT_HERE', 'RESULT_OTHERS', 'RESULT_WINDOW'],
    ];
    for (const names of calls) {
      const offsets = names.map((n) => (RECORD as Record<string, number>)[n]);
      t.equal(new Set(offsets).size, offsets.length, `${names.join(', ')} each at an offset of its own`);
      t.ok(
        offsets.every((o) => o + 8 <= RECORD.RESULT_BYTES),
        'within the buffer',
      );
    }
  },
);
