// The arrows of host/ point one way: no file imports itself back through
// others, and the folders of host/ (the top-level files each count as their own node)
// form no cycle either, so each layer can be read, tested and replaced without the
// layers above it. The graph is madge's, read from the TypeScript sources, type-only
// imports included: a type that points the wrong way is a wrong-way arrow too.
import t from 'tap';
import madge from 'madge';
import { mkdtempSync, readdirSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../helpers/server.js';

type Graph = Record<string, string[]>;

/** madge's graph of the TypeScript files under `dir`, keyed and valued by paths relative to it. */
async function importGraph(dir: string): Promise<{ graph: Graph; skipped: string[] }> {
  const result = await madge(dir, { fileExtensions: ['ts'], tsConfig: join(ROOT, 'tsconfig.json') });
  return { graph: result.obj(), skipped: result.warnings().skipped };
}

/** The first cycle of a graph found by a depth-first walk, as its nodes in order with the first repeated, or null. */
function findCycle(graph: Graph): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (node: string): string[] | null => {
    if (state.get(node) === 'done') return null;
    if (state.get(node) === 'open') return [...path.slice(path.indexOf(node)), node];
    state.set(node, 'open');
    path.push(node);
    for (const next of graph[node] ?? []) {
      const cycle = visit(next);
      if (cycle !== null) return cycle;
    }
    path.pop();
    state.set(node, 'done');
    return null;
  };
  for (const node of Object.keys(graph).sort()) {
    const cycle = visit(node);
    if (cycle !== null) return cycle;
  }
  return null;
}

/** A file's node in the folders' graph: its folder under host/, or the file itself when it sits at the top. */
function folderOf(file: string): string {
  const slash = file.lastIndexOf('/');
  return slash < 0 ? file : `${file.slice(0, slash)}/`;
}

/** The folders' graph, each arrow with the file imports that draw it (so a failure names them). */
function folderGraph(graph: Graph): { graph: Graph; why: Map<string, string[]> } {
  const folders: Graph = {};
  const why = new Map<string, string[]>();
  for (const [file, imports] of Object.entries(graph)) {
    const from = folderOf(file);
    folders[from] ??= [];
    for (const imported of imports) {
      const to = folderOf(imported);
      if (to === from) continue;
      if (!folders[from].includes(to)) folders[from].push(to);
      why.set(`${from} -> ${to}`, [...(why.get(`${from} -> ${to}`) ?? []), `${file} -> ${imported}`]);
    }
  }
  return { graph: folders, why };
}

/** The TypeScript files under a folder, relative to it. */
function tsFiles(dir: string, under = ''): string[] {
  return readdirSync(join(dir, under), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? tsFiles(dir, join(under, entry.name)) : entry.name.endsWith('.ts') ? [join(under, entry.name)] : [],
  );
}

t.test('the check sees the imports as tsc does: `.js` specifiers, type-only imports, and a cycle through them', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-graph-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'a'));
  mkdirSync(join(dir, 'b'));
  writeFileSync(join(dir, 'a', 'one.ts'), "import { two } from '../b/two.js';\nexport const one = (): number => two + 1;\n");
  writeFileSync(join(dir, 'b', 'two.ts'), "import type { Three } from './three.js';\nexport const two: Three = 2;\n");
  writeFileSync(join(dir, 'b', 'three.ts'), "import type { one } from '../a/one.js';\nexport type Three = ReturnType<typeof one>;\n");
  const { graph, skipped } = await importGraph(dir);
  t.same(skipped, [], 'every import resolves');
  t.same(graph, { 'a/one.ts': ['b/two.ts'], 'b/two.ts': ['b/three.ts'], 'b/three.ts': ['a/one.ts'] }, 'every import is an arrow');
  t.same(findCycle(graph), ['a/one.ts', 'b/two.ts', 'b/three.ts', 'a/one.ts'], 'the cycle of files is found and named');
  t.same(findCycle(folderGraph(graph).graph), ['a/', 'b/', 'a/'], 'the cycle of folders is found and named');
});

const HOST = join(ROOT, 'host');
/** host/'s graph, read once for the three tests below (each read costs about a second of CPU). */
let hostGraph: ReturnType<typeof importGraph> | undefined;
const readHost = (): ReturnType<typeof importGraph> => (hostGraph ??= importGraph(HOST));

t.test('host/: every file is in the graph, and every import resolves', async (t) => {
  const { graph, skipped } = await readHost();
  t.same(skipped, [], 'no import madge could not resolve');
  t.same(
    Object.keys(graph)
      .filter((file) => !file.startsWith('../'))
      .sort(),
    tsFiles(HOST).sort(),
    'every file of host/ is a node',
  );
  t.ok(graph['server.ts'].includes('owner.ts'), 'an arrow we know is there: server.ts -> owner.ts');
  t.ok(graph['errors.ts'].includes('../assembly/outcome.ts'), "and one into the core's sources: errors.ts -> ../assembly/outcome.ts");
});

t.test('host/: no cycle among files', async (t) => {
  const { graph } = await readHost();
  const cycle = findCycle(graph);
  t.equal(
    cycle,
    null,
    cycle === null
      ? 'no cycle'
      : `host/ has an import cycle: ${cycle.join(' -> ')}; ` + 'move what both sides need into a module that imports neither',
  );
});

t.test('host/: no cycle among folders (a top-level file is its own node)', async (t) => {
  const { graph } = await readHost();
  const folders = folderGraph(graph);
  const cycle = findCycle(folders.graph);
  const arrows =
    cycle === null ? [] : cycle.slice(1).map((to, i) => `${cycle[i]} -> ${to} (${folders.why.get(`${cycle[i]} -> ${to}`)!.join(', ')})`);
  t.equal(
    cycle,
    null,
    cycle === null
      ? 'no cycle'
      : `host/'s folders import each other in a cycle: ${arrows.join('; ')}; ` +
          'move the code to the folder it belongs to, so the arrows point one way',
  );
  t.ok(folders.graph['threads/'].includes('http/'), 'an arrow we know is there: threads/ -> http/');
});
