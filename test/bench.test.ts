// The bench's own rules, without measuring anything: its command line (help, and every
// bad value refused before anything runs), where it places the server and the load on a
// machine of a given size, and the exact size of the upstream's answer.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, untracked } from './helpers/server.js';

const RUN = join(ROOT, 'bench', 'run.js');
const OUTPUTS = ['results.json', 'results.dirty.json'].map((f) => join(ROOT, 'bench', f));

function bench(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(...untracked(process.execPath, [RUN, ...args]), { encoding: 'utf8', timeout: 20_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Evaluates `expression` in an ES module that imported `names` from a bench module; its JSON value. */
function evaluate(module: string, names: string, expression: string): unknown {
  const code = `import { ${names} } from ${JSON.stringify(join(ROOT, 'bench', module))};\n` +
    `process.stdout.write(JSON.stringify(${expression}));`;
  const r = spawnSync(...untracked(process.execPath, ['--input-type=module', '-e', code]), { encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) throw new Error(`node -e failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

t.test('bench --help names every part and flag and exits 0', async (t) => {
  const r = bench(['--help']);
  t.equal(r.code, 0);
  for (const word of ['gateway', 'builtin', 'core', 'flood', 'state', '--parts', '--threads', '--connections', '--sizes',
    '--duration', '--warmup', '--rounds', '--no-wait-quiet', '--allow-dirty', '--strict']) {
    t.match(r.stdout, word, `help mentions ${word}`);
  }
});

t.test('a bad bench command line exits 2 with a line naming the flag, before anything runs', async (t) => {
  const before = OUTPUTS.map((f) => (existsSync(f) ? statSync(f).mtimeMs : null));
  const cases: Array<[string[], RegExp]> = [
    [['--parts', 'gateway,e2e'], /--parts: "e2e" is not a part \(gateway, builtin, core, flood, scope, state, tls, ws\)/],
    [['--threads', '0'], /--threads: "0" is not a whole number above 0/],
    [['--connections', '64,many'], /--connections: "many" is not a whole number above 0/],
    [['--sizes', '100,10'], /--sizes: "10" is not a size from \d+ to \d+ bytes/],
    [['--sizes', '2GiB'], /--sizes: "2GiB" is not a size/],
    [['--duration', '0.5s'], /--duration: "0.5s" is not a duration of at least 1 s/],
    [['--rounds', 'two'], /--rounds: "two" is not a whole number above 0/],
    [['--threads', ''], /--threads needs at least one value/],
    [['--frobnicate'], /bench: Unknown option '--frobnicate'/],
  ];
  for (const [args, message] of cases) {
    const r = bench(args);
    t.equal(r.code, 2, `${args.join(' ')}: exit code 2`);
    t.match(r.stderr, message, `${args.join(' ')}: the message names the flag and what it takes`);
    t.equal(r.stdout, '', `${args.join(' ')}: no report`);
  }
  t.same(OUTPUTS.map((f) => (existsSync(f) ? statSync(f).mtimeMs : null)), before, 'no results file was written');
});

t.test('placement keeps the load off the server cores when the machine has room, and says when they share', async (t) => {
  const at = (threads: number, cores: number) => evaluate('lib/proc.js', 'placement', `placement(${threads}, ${cores}, true)`) as
    { server: number[] | null; load: number[] | null; shared: boolean; label: string };
  t.match(at(1, 2), { server: [0], load: [1], shared: false }, '2 cores, 1 thread: server on 0, load on 1');
  const two = at(2, 2);
  t.match(two, { server: [0, 1], load: [1], shared: true }, '2 cores, 2 threads: the load shares core 1');
  t.match(two.label, /shared/, 'and the label says so');
  t.match(at(4, 8), { server: [0, 1, 2, 3], load: [4, 5, 6, 7], shared: false }, '8 cores, 4 threads: 0-3 and 4-7');
  t.match(at(1, 16), { server: [0], shared: false }, '16 cores, 1 thread');
  t.equal(at(1, 16).load?.length, 15, 'the load gets every other core');
  t.match(at(8, 8), { server: [0, 1, 2, 3, 4, 5, 6, 7], load: [7], shared: true }, '8 cores, 8 threads: shared');
  t.match(evaluate('lib/proc.js', 'placement', 'placement(1, 1, true)'), { server: null, load: null, shared: true }, 'one core: nothing pinned');
});

t.test('the upstream answers a JSON-RPC result of exactly the size asked', async (t) => {
  const sizes = [100, 10_000, 1_048_576];
  const got = evaluate('servers/rpc.js', 'rpcResult', `${JSON.stringify(sizes)}.map((n) => { const b = rpcResult(n); const o = JSON.parse(b); return [b.length, o.jsonrpc, o.id, typeof o.result]; })`);
  t.same(got, sizes.map((n) => [n, '2.0', 1, 'string']));
  const refused = evaluate('servers/rpc.js', 'rpcResult, MIN_RESULT_BYTES',
    '[MIN_RESULT_BYTES - 1, 1.5, 64 * 1048576 + 1].map((n) => { try { rpcResult(n); return null; } catch (e) { return e instanceof RangeError; } })');
  t.same(refused, [true, true, true], 'sizes it cannot make are refused with a RangeError');
});
