// A comment, a test's name or a document says what it means, never only which issue asked
// for it: "issue 33, M4" tells a reader outside the tracker nothing, where "one token
// could open every session" tells them why the code is there. Every tracked source and
// document is read: host/, assembly/, go/, test/, bench/, scripts/, docs/, the README and
// the CHANGELOG. CONTRIBUTING.md and this file are left out: they give the rule, with an
// example.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/server.js';

/** "issue 33", "Issue 7": an issue's number. The core's vectors' `issue` lines (test/vectors/core-vectors.txt) are an op, not a citation. */
const CITATION = /\bissues? #?\d+\b/i;
const LEFT_OUT = new Set(['CONTRIBUTING.md', 'test/vectors/core-vectors.txt', 'test/unit/house-references.test.ts']);

t.test('no tracked source or document cites an issue by its number', async (t) => {
  const tracked = execFileSync(
    'git',
    ['ls-files', '-z', 'host', 'assembly', 'go', 'test', 'bench', 'scripts', 'docs', 'console', 'deploy', 'README.md', 'CHANGELOG.md'],
    { cwd: ROOT, encoding: 'utf8' },
  )
    .split('\0')
    .filter((path) => path !== '' && !LEFT_OUT.has(path));
  t.ok(tracked.length > 100, `${tracked.length} files read`);
  const found: string[] = [];
  for (const path of tracked) {
    if (/\.(wasm|png|gz|tgz)$/.test(path)) continue;
    readFileSync(join(ROOT, path), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (CITATION.test(line)) found.push(`${path}:${i + 1}: ${line.trim()}`);
      });
  }
  t.same(found, [], 'each says what it means instead');
});
