// What the docs' quickstarts write into a clone is ignored by git. The README's and the
// guides' blocks run from the clone's root (test/docs/readme.test.ts runs them there), and
// they write passwords, tokens, keys, logs and data folders beside the sources: each of
// them must be one that `git add .` skips, so that a secret is never one command from a
// commit. The files are found in the blocks themselves, so a new guide's file is checked
// without a list to keep.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { docBlocks, docFiles } from '../helpers/readme.js';
import { ROOT } from '../helpers/server.js';

/** The clone-relative paths a command writes: redirections, tee, and the files and folders api-auth makes. */
function written(text: string): string[] {
  const found: string[] = [];
  const patterns = [
    /(?:^|[^0-9&<>])>>?\s*([^\s;&|)'"]+)/g,
    /\btee\s+(?:-a\s+)?([^\s;&|)'"]+)/g,
    // A data folder: the empty named group marks the match as one.
    /--data-dir[= ]([^\s;&|)'"]+)(?<folder>)/g,
    /--(?:api-auth-password-file|password-file|access-log|config-file)[= ]([^\s;&|)'"]+)/g,
    /-(?:out|keyout)\s+([^\s;&|)'"]+)/g,
  ];
  for (const pattern of patterns) {
    for (const match of text.matchAll(pattern)) {
      const path = match[1].replace(/^\.\//, '') + (match.groups?.folder === undefined ? '' : '/');
      // Only files in the clone: not /dev/null, /etc/..., ~/..., $VARIABLE or a file descriptor.
      if (/^[A-Za-z0-9_][A-Za-z0-9_.-]*\/?$/.test(path) && !['stdout', 'stderr'].includes(path)) found.push(path);
    }
  }
  return found;
}

const paths = new Map<string, string>();
for (const file of docFiles()) {
  for (const block of docBlocks(file)) {
    for (const command of block.commands) {
      for (const path of written(command.text)) if (!paths.has(path)) paths.set(path, `${file}:${command.line}`);
    }
  }
}

t.test("the scan finds the quickstarts' secrets", async (t) => {
  // So that the check below cannot pass on an empty list.
  for (const known of ['password.txt', 'token.json', 'eth-password.txt', 'full.token', 'eth-data/']) {
    t.ok(paths.has(known), `${known} is among the files the docs write`);
  }
});

t.test('every file the docs write into the clone is ignored', async (t) => {
  const repo = mkdtempSync(join(tmpdir(), 'api-auth-gitignore-'));
  t.teardown(() => rmSync(repo, { recursive: true, force: true }));
  execFileSync('git', ['init', '-q', repo]);
  copyFileSync(join(ROOT, '.gitignore'), join(repo, '.gitignore'));
  // Each made as the docs make it (a data folder holding a state file), then git asked what it would add.
  for (const path of paths.keys()) {
    if (path.endsWith('/')) {
      mkdirSync(join(repo, path));
      writeFileSync(join(repo, path, 'state'), '');
    } else {
      writeFileSync(join(repo, path), '');
    }
  }
  const untracked = execFileSync('git', ['-C', repo, 'status', '--porcelain', '--untracked-files=all'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line !== '' && line !== '?? .gitignore')
    .map((line) => line.slice(3));
  for (const path of untracked) t.fail(`${path} (written at ${paths.get(path) ?? paths.get(path.replace(/[^/]*$/, ''))}) is not ignored`);
  t.same(untracked, [], `git add . would add none of the ${paths.size} files and folders the docs write`);
});

t.test('no tracked file is ignored', async (t) => {
  const ignored = execFileSync('git', ['-C', ROOT, 'ls-files', '--cached', '--ignored', '--exclude-standard'], { encoding: 'utf8' });
  t.equal(ignored, '', 'the patterns hide nothing the repository holds');
});
