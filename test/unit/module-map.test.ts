// The module map (docs/explanation/architecture.md) is the tree's: every file under assembly/ and
// host/ is named in it, in its folder, and every name in it is a file or folder that
// exists. A file added, moved or removed without its line fails here.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/server.js';

const MAP_PAGE = 'docs/explanation/architecture.md';
const PAGE = readFileSync(join(ROOT, MAP_PAGE), 'utf8');

/**
 * The paths a map names: its first line is the root folder (`host/`), and every other
 * line is a name indented two spaces deeper than its folder's, then its description.
 * A name ending in "/" is a folder; the files and folders indented under it are in it.
 */
function mapPaths(block: string): { files: string[]; folders: string[] } {
  const files: string[] = [];
  const folders: string[] = [];
  const open: string[] = [];
  for (const line of block.split('\n')) {
    const m = /^( *)(\S+)/.exec(line);
    if (m === null) continue;
    const depth = m[1].length / 2;
    if (!Number.isInteger(depth) || depth > open.length)
      throw new Error(`the map's line ${JSON.stringify(line)} is not indented two spaces under its folder`);
    open.length = depth;
    const path = [...open, m[2]].join('');
    if (m[2].endsWith('/')) {
      folders.push(path.slice(0, -1));
      open.push(m[2]);
    } else {
      files.push(path);
    }
  }
  return { files, folders };
}

/** The page's maps: the fenced blocks of its module map section whose first line is a root folder. */
function pageMaps(): Map<string, string> {
  const section = PAGE.slice(PAGE.indexOf('\n## The module map\n'));
  const maps = new Map<string, string>();
  for (const [, body] of section.matchAll(/^ *```\n([\s\S]*?)^ *```$/gm)) {
    const lines = body.replace(/\n$/, '').split('\n');
    const indent = /^ */.exec(lines[0])![0].length;
    const root = lines[0].trim();
    if (/^[a-z]+\/$/.test(root)) maps.set(root, lines.map((line) => line.slice(indent)).join('\n'));
  }
  return maps;
}

/** Every file and folder under `dir` of the checkout, as paths from the checkout's root. */
function tree(dir: string): { files: string[]; folders: string[] } {
  const files: string[] = [];
  const folders: string[] = [dir];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) {
      const below = tree(path);
      files.push(...below.files);
      folders.push(...below.folders);
    } else {
      files.push(path);
    }
  }
  return { files, folders };
}

t.test("the map's reading: folders by indentation, files in the folder above them", async (t) => {
  t.same(mapPaths('host/\n  a.ts      one\n  http/     per request\n    b.ts    two\n    up/\n      c.ts  three\n  d.ts      four'), {
    files: ['host/a.ts', 'host/http/b.ts', 'host/http/up/c.ts', 'host/d.ts'],
    folders: ['host', 'host/http', 'host/http/up'],
  });
  t.throws(() => mapPaths('host/\n   a.ts  three spaces'), /not indented two spaces/);
});

for (const root of ['assembly', 'host']) {
  t.test(`${MAP_PAGE}'s map of ${root}/ names every file of ${root}/, and nothing else`, async (t) => {
    const block = pageMaps().get(`${root}/`);
    t.ok(block !== undefined, `the module map has a map of ${root}/ (a fenced block whose first line is ${root}/)`);
    if (block === undefined) return;
    const map = mapPaths(block);
    const disk = tree(root);
    const missing = disk.files.filter((file) => !map.files.includes(file));
    const gone = map.files.filter((file) => !disk.files.includes(file));
    t.same(missing, [], `every file of ${root}/ has its line in the map (add it, in its folder, with what it does)`);
    t.same(gone, [], `every file the map names exists (remove or rename the line)`);
    t.same(
      map.folders.filter((folder) => !disk.folders.includes(folder)),
      [],
      'every folder the map names exists',
    );
    t.equal(new Set(map.files).size, map.files.length, 'no file is named twice');
  });
}
