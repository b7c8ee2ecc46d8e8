// Every relative link of the documentation resolves: in README.md,
// CONTRIBUTING.md, CHANGELOG.md (once there is one) and every Markdown file under docs/,
// a link to a file names a file or folder of the checkout, and a link's #anchor names a
// heading of its page as GitHub makes the anchor (lower case, punctuation dropped, spaces
// to hyphens, a repeated heading's anchor numbered -1, -2...). Links to other sites are not
// followed: this checks the repository's own pages, offline.
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { ROOT } from '../helpers/server.js';

/** The documentation's Markdown files, as paths from the checkout's root. */
function docs(): string[] {
  const below = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? below(`${dir}/${entry.name}`) : entry.name.endsWith('.md') ? [`${dir}/${entry.name}`] : [],
    );
  return ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md'].filter((file) => existsSync(join(ROOT, file))).concat(below('docs'));
}

/** Markdown without its fenced blocks and inline code, where nothing is a link or a heading. */
function prose(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line);
    if (marker !== null && (fence === undefined || marker[1].startsWith(fence))) {
      fence = fence === undefined ? marker[1] : undefined;
      return '';
    }
    return fence === undefined ? line.replace(/(`+)[^`]*?\1/g, '') : '';
  });
}

/** GitHub's anchor of a heading's text. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown page, a repeated one numbered as GitHub numbers it. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line);
    if (marker !== null && (fence === undefined || marker[1].startsWith(fence))) {
      fence = fence === undefined ? marker[1] : undefined;
      continue;
    }
    const heading = fence === undefined ? /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line) : null;
    if (heading === null) continue;
    const base = slug(heading[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  return found;
}

/** The link targets of a Markdown page: inline links and images, and reference definitions. */
function links(markdown: string): { target: string; line: number }[] {
  const found: { target: string; line: number }[] = [];
  prose(markdown).forEach((text, i) => {
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ target: m[1], line: i + 1 });
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(text);
    if (definition !== null) found.push({ target: definition[1], line: i + 1 });
  });
  return found;
}

/** Why a link of `file` does not resolve, or undefined when it does. */
function broken(file: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined;
  const hash = target.indexOf('#');
  const path = hash < 0 ? target : target.slice(0, hash);
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const resolved = path === '' ? file : normalize(join(dirname(file), decodeURIComponent(path)));
  if (resolved.startsWith('..')) return `${target} leaves the repository`;
  if (!existsSync(join(ROOT, resolved))) return `${target}: ${resolved} does not exist`;
  if (anchor === undefined) return undefined;
  if (!resolved.endsWith('.md')) return `${target}: an anchor into ${resolved}, which is no Markdown page`;
  return anchors(readFileSync(join(ROOT, resolved), 'utf8')).has(anchor)
    ? undefined
    : `${target}: ${resolved} has no heading whose anchor is #${anchor}`;
}

t.test('anchors as GitHub makes them', async (t) => {
  t.same(
    [
      ...anchors(
        "# Protecting a real node (`--upstream`)\n## The core's ABI\n## Logs\n## Logs\n```\n# not a heading\n```\n### CORS for browser dapps",
      ),
    ],
    ['protecting-a-real-node---upstream', 'the-cores-abi', 'logs', 'logs-1', 'cors-for-browser-dapps'],
  );
  t.same(
    links('[a](b.md#c) `[d](e.md)`\n```\n[f](g.md)\n```\n[h]: i.md\n![j](k.png "title")').map((l) => l.target),
    ['b.md#c', 'i.md', 'k.png'],
  );
  t.equal(broken('README.md', 'docs/README.md'), undefined, 'a page that exists');
  t.match(broken('README.md', 'docs/nothing.md'), /does not exist/, 'a page that does not');
  t.match(broken('README.md', '#no-such-heading'), /no heading/, 'an anchor that is no heading');
  t.equal(broken('README.md', 'https://example.com/#x'), undefined, 'other sites are not followed');
});

t.test('every relative link and anchor of the docs resolves', async (t) => {
  const files = docs();
  t.ok(files.includes('README.md') && files.some((file) => file.startsWith('docs/')), 'the README and docs/ are checked');
  for (const file of files) {
    const found = links(readFileSync(join(ROOT, file), 'utf8'));
    const bad = found
      .map(({ target, line }) => {
        const why = broken(file, target);
        return why === undefined ? undefined : `${file} line ${line}: ${why}`;
      })
      .filter((why) => why !== undefined);
    t.same(bad, [], `${file}: its ${found.length} links resolve`);
  }
});
