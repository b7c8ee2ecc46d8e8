// The bench's own rules, without measuring anything: its command line (help, and every
// bad value refused before anything runs), where it places the server and the load on a
// machine of a given size, and the exact size of the upstream's answer.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, untracked } from '../helpers/server.js';

const RUN = join(ROOT, 'bench', 'run.js');
const OUTPUTS = ['results.json', 'results.dirty.json'].map((f) => join(ROOT, 'bench', 'results', f));

function bench(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(...untracked(process.execPath, [RUN, ...args]), { encoding: 'utf8', timeout: 20_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Evaluates `expression` in an ES module that imported `names` from a bench module; its JSON value. */
function evaluate(module: string, names: string, expression: string): unknown {
  const code =
    `import { ${names} } from ${JSON.stringify(join(ROOT, 'bench', module))};\n` + `process.stdout.write(JSON.stringify(${expression}));`;
  const r = spawnSync(...untracked(process.execPath, ['--input-type=module', '-e', code]), { encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) throw new Error(`node -e failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

t.test('bench --help names every part and flag and exits 0', async (t) => {
  const r = bench(['--help']);
  t.equal(r.code, 0);
  for (const word of [
    'gateway',
    'builtin',
    'core',
    'flood',
    'scope',
    'access',
    'state',
    'issuing',
    'fleet',
    '--parts',
    '--threads',
    '--connections',
    '--sizes',
    '--duration',
    '--warmup',
    '--rounds',
    '--no-wait-quiet',
    '--allow-dirty',
    '--strict',
  ]) {
    t.match(r.stdout, word, `help mentions ${word}`);
  }
});

t.test('a bad bench command line exits 2 with a line naming the flag, before anything runs', async (t) => {
  const before = OUTPUTS.map((f) => (existsSync(f) ? statSync(f).mtimeMs : null));
  const cases: Array<[string[], RegExp]> = [
    [
      ['--parts', 'gateway,e2e'],
      /--parts: "e2e" is not a part \(gateway, builtin, core, flood, scope, access, state, tls, ws, issuing, fleet\)/,
    ],
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
  t.same(
    OUTPUTS.map((f) => (existsSync(f) ? statSync(f).mtimeMs : null)),
    before,
    'no results file was written',
  );
});

t.test('placement keeps the load off the server cores when the machine has room, and says when they share', async (t) => {
  const at = (threads: number, cores: number) =>
    evaluate('lib/proc.js', 'placement', `placement(${threads}, ${cores}, true)`) as {
      server: number[] | null;
      load: number[] | null;
      shared: boolean;
      label: string;
    };
  t.match(at(1, 2), { server: [0], load: [1], shared: false }, '2 cores, 1 thread: server on 0, load on 1');
  const two = at(2, 2);
  t.match(two, { server: [0, 1], load: [1], shared: true }, '2 cores, 2 threads: the load shares core 1');
  t.match(two.label, /shared/, 'and the label says so');
  t.match(at(4, 8), { server: [0, 1, 2, 3], load: [4, 5, 6, 7], shared: false }, '8 cores, 4 threads: 0-3 and 4-7');
  t.match(at(1, 16), { server: [0], shared: false }, '16 cores, 1 thread');
  t.equal(at(1, 16).load?.length, 15, 'the load gets every other core');
  t.match(at(8, 8), { server: [0, 1, 2, 3, 4, 5, 6, 7], load: [7], shared: true }, '8 cores, 8 threads: shared');
  t.match(
    evaluate('lib/proc.js', 'placement', 'placement(1, 1, true)'),
    { server: null, load: null, shared: true },
    'one core: nothing pinned',
  );
});

t.test('the upstream answers a JSON-RPC result of exactly the size asked', async (t) => {
  const sizes = [100, 10_000, 1_048_576];
  const got = evaluate(
    'servers/rpc.js',
    'rpcResult',
    `${JSON.stringify(sizes)}.map((n) => { const b = rpcResult(n); const o = JSON.parse(b); return [b.length, o.jsonrpc, o.id, typeof o.result]; })`,
  );
  t.same(
    got,
    sizes.map((n) => [n, '2.0', 1, 'string']),
  );
  const refused = evaluate(
    'servers/rpc.js',
    'rpcResult, MIN_RESULT_BYTES',
    '[MIN_RESULT_BYTES - 1, 1.5, 64 * 1048576 + 1].map((n) => { try { rpcResult(n); return null; } catch (e) { return e instanceof RangeError; } })',
  );
  t.same(refused, [true, true, true], 'sizes it cannot make are refused with a RangeError');
});

t.test("a run counts as the server's only when its cores were saturated and the load's had room", async (t) => {
  const apart = { server: [0], load: [1], shared: false };
  const cases: Array<[string, unknown, unknown, string]> = [
    ['server at 97%, load at 80%', { server: 0.97, load: 0.8 }, apart, 'server'],
    ['server at exactly 95%, load at exactly 90%', { server: 0.95, load: 0.9 }, apart, 'server'],
    ['server at 88%: the load was the limit', { server: 0.88, load: 0.8 }, apart, 'load'],
    ['server at 99% but the load at 97%: no headroom', { server: 0.99, load: 0.97 }, apart, 'load'],
    ['neither busy', { server: 0.6, load: 0.5 }, apart, 'load'],
    ['no core figures', undefined, apart, 'unpinned'],
    ['cores shared', { server: 0.99, load: 0.5 }, { server: [0, 1], load: [1], shared: true }, 'shared'],
    ['nothing pinned', { server: 0.99, load: 0.5 }, { server: null, load: null, shared: true }, 'unpinned'],
  ];
  const got = evaluate('lib/measure.js', 'limitOf', `${JSON.stringify(cases)}.map(([, cores, where]) => limitOf(cores, where))`);
  t.same(
    got,
    cases.map((c) => c[3]),
    cases.map((c) => c[0]).join('; '),
  );
});

t.test('the gateway report gives a ratio only between rows whose gateway was the limit, and says load-bound otherwise', async (t) => {
  const cell = (id: string, name: string, rps: number, cpu: number, serverCores: number, loadCores: number, limit: string) => ({
    threads: 1,
    bytes: 100,
    connections: 64,
    id,
    name,
    rps,
    p50Ms: 1,
    p99Ms: 2,
    cpuUsPerRequest: cpu,
    serverCores,
    loadCores,
    limit,
    errors: 0,
    contended: false,
  });
  const settings = {
    threads: [1],
    sizes: [100],
    connections: [64],
    gateways: ['apiAuth', 'haproxy', 'nginx'],
    durationS: 8,
    warmupS: 2,
    rounds: 1,
    placements: { 1: { label: 'server on CPU 0, wrk and upstream on CPU 1' } },
  };
  const report = (hapLimit: string) =>
    evaluate(
      'parts/gateway.js',
      'gatewayMarkdown',
      `gatewayMarkdown(${JSON.stringify({
        settings,
        unsupported: [],
        targets: {},
        cells: [
          cell('apiAuth', 'api-auth', 30_000, 30, 0.99, 0.7, 'server'),
          cell('haproxy', 'HAProxy', 40_000, 20, hapLimit === 'server' ? 0.98 : 0.85, 0.97, hapLimit),
          cell('nginx', 'nginx', 41_000, 19, 0.8, 0.96, 'load'),
        ],
      })})`,
    ) as string;
  const row = (text: string, name: string) =>
    text
      .split('\n')
      .find((l) => l.startsWith(`| 100 B | 64 | ${name} |`))!
      .split(' | ');
  const bound = report('server');
  t.same(
    row(bound, 'api-auth').slice(9, 12),
    ['gateway-bound', '0.75x', '1.50x'],
    'api-auth against a saturated HAProxy: req/s and CPU ratios',
  );
  t.same(row(bound, 'HAProxy').slice(9, 12), ['gateway-bound', '1.00x', '1.00x']);
  t.same(row(bound, 'nginx').slice(9, 12), ['load-bound', 'load-bound', 'load-bound'], 'nginx did not saturate its core: no ratio');
  const loadBound = report('load');
  t.same(
    row(loadBound, 'api-auth').slice(9, 12),
    ['gateway-bound', 'load-bound (HAProxy)', 'load-bound (HAProxy)'],
    'no ratio against a load-bound HAProxy',
  );
  t.same(
    row(loadBound, 'HAProxy').slice(6, 10),
    ['20.0 µs', '85%', '97%', 'load-bound'],
    "its CPU per request and both sides' cores are still shown",
  );
  t.notMatch(loadBound, /\d\.\d\dx/, 'no ratio anywhere');
});

t.test('the upstream answers a POST with exactly its result, from memory or from its file, on one kept-alive connection', async (t) => {
  // Either side of INLINE_RESULT_BYTES, and the largest size.
  const got = evaluate(
    'servers/nginx.js',
    'startUpstream, INLINE_RESULT_BYTES',
    `await (async () => {
    const { request } = await import('node:http');
    const { RPC_PATH, RPC_REQUEST } = await import(${JSON.stringify(join(ROOT, 'bench', 'servers', 'rpc.js'))});
    const agent = new (await import('node:http')).Agent({ keepAlive: true, maxSockets: 1 });
    const out = [];
    for (const bytes of [100, INLINE_RESULT_BYTES, INLINE_RESULT_BYTES + 1, 10000, 1048576]) {
      const up = await startUpstream({ bytes });
      const sockets = new Set();
      for (let i = 0; i < 2; i++) {
        const r = await new Promise((resolve, reject) => {
          const req = request({ port: up.port, host: '127.0.0.1', path: RPC_PATH, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
            const chunks = [];
            res.on('data', (c) => chunks.push(c));
            res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], same: Buffer.concat(chunks).equals(up.body) }));
          });
          req.on('socket', (s) => sockets.add(s));
          req.on('error', reject);
          req.end(RPC_REQUEST);
        });
        out.push([bytes, r.status, r.type, r.same]);
      }
      out.push([bytes, 'connections', sockets.size]);
      agent.destroy();
      await up.stop();
    }
    return out;
  })()`,
  ) as unknown[];
  const sizes = [100, 4000, 4001, 10000, 1048576];
  t.same(
    got,
    sizes.flatMap((n) => [
      [n, 200, 'application/json', true],
      [n, 200, 'application/json', true],
      [n, 'connections', 1],
    ]),
  );
});

t.test("the WebSocket part's target is api-auth's CPU per echo against nginx's, in each cell", async (t) => {
  const cell = (id: string, bytes: number, usPerMessage: number) => ({
    threads: 1,
    bytes,
    connections: 16,
    id,
    errors: 0,
    contended: false,
    cpu: id === 'direct' ? null : { usPerMessage, busy: 0.3 },
  });
  const targets = evaluate(
    'parts/websocket.js',
    'websocketTargets',
    `websocketTargets(${JSON.stringify({ threads: [1], sizes: [100, 10000], connections: [16] })}, ${JSON.stringify([
      cell('direct', 100, 0),
      cell('apiAuth', 100, 15),
      cell('nginx', 100, 16),
      cell('direct', 10000, 0),
      cell('apiAuth', 10000, 50),
      cell('nginx', 10000, 40),
    ])})`,
  ) as Record<string, { ok: boolean; measured: string }>;
  t.same(
    Object.entries(targets).map(([name, x]) => [name, x.ok, x.measured]),
    [
      ['websocket, 1 thread(s), 100 B, 16 sessions: api-auth >= 1.0x nginx (CPU per echo)', true, '1.07x; 15.0 µs vs 16.0 µs per echo'],
      ['websocket, 1 thread(s), 10 kB, 16 sessions: api-auth >= 1.0x nginx (CPU per echo)', false, '0.80x; 50.0 µs vs 40.0 µs per echo'],
      ['websocket: no session failed during the runs', true, '0'],
    ],
  );
});

t.test(
  'the gateway targets compare req/s only between gateways that were the limit; otherwise they say which was load-bound',
  async (t) => {
    const cell = (id: string, bytes: number, rps: number, limit: string) => ({
      threads: 1,
      bytes,
      connections: 64,
      id,
      rps,
      p50Ms: 1,
      p99Ms: 2,
      cpuUsPerRequest: 1e6 / rps,
      serverCores: limit === 'server' ? 0.98 : 0.8,
      loadCores: 0.85,
      limit,
      errors: 0,
      contended: false,
    });
    const placements = { 1: { server: [0], load: [1], shared: false } };
    const targets = evaluate(
      'parts/gateway.js',
      'gatewayTargets',
      `gatewayTargets(${JSON.stringify({ sizes: [100, 10000], connections: [64], threads: [1] })}, ${JSON.stringify([
        cell('apiAuth', 100, 40_000, 'server'),
        cell('haproxy', 100, 40_000, 'server'),
        cell('apiAuthScoped', 100, 36_000, 'server'),
        cell('apiAuth', 10000, 30_000, 'server'),
        cell('haproxy', 10000, 35_000, 'load'),
        cell('apiAuthScoped', 10000, 29_000, 'load'),
        cell('apiAuthLogged', 100, 38_000, 'server'),
        cell('apiAuthLogged', 10000, 28_000, 'load'),
      ])}, [], ${JSON.stringify(placements)})`,
    ) as Record<string, { value: number | null; ok: boolean | null; measured: string }>;
    const at = (name: string) => targets[name];
    t.match(at('gateway, 1 thread, 100 B, 64 connections: api-auth >= 1.0x HAProxy req/s, p99 no worse'), {
      value: 1,
      ok: true,
      measured: /^1\.00x; p99/,
    });
    t.match(
      at('gateway, 1 thread, 10 kB, 64 connections: api-auth >= 1.0x HAProxy req/s, p99 no worse'),
      { value: null, ok: null, measured: /^n\/a: HAProxy load-bound \(gateway cores 80%, load cores 85%\)/ },
      'a load-bound HAProxy: no verdict',
    );
    t.match(at('gateway, 1 thread, 100 B, 64 connections: api-auth CPU per request <= HAProxy, p99 no worse'), {
      value: 1,
      ok: true,
      measured: /^CPU 25\.0 µs vs 25\.0 µs\/req \(1\.00x\); p99/,
    });
    t.match(
      at('gateway, 1 thread, 10 kB, 64 connections: api-auth CPU per request <= HAProxy, p99 no worse'),
      { value: null, ok: null, measured: /^n\/a: haproxy load-bound \(gateway cores 80%, load cores 85%\); CPU 33\.3 µs vs 28\.6 µs\/req/ },
      'the CPU target too has no verdict against a load-bound HAProxy',
    );
    t.match(at('gateway, 1 thread(s), 100 B, 64 connections: a token with methods against one without, req/s'), {
      value: 0.9,
      measured: /^0\.90x/,
    });
    t.match(
      at('gateway, 1 thread(s), 10 kB, 64 connections: a token with methods against one without, req/s'),
      { value: null, measured: /^n\/a: with methods load-bound/ },
      'a load-bound scoped row: no ratio',
    );
    t.match(at('gateway, 1 thread(s), 100 B, 64 connections: --access-log on against off, req/s'), {
      value: 0.95,
      measured: /^0\.95x; p99 .*; CPU/,
    });
    t.match(
      at('gateway, 1 thread(s), 10 kB, 64 connections: --access-log on against off, req/s'),
      { value: null, measured: /^n\/a: access log on load-bound/ },
      'a load-bound logged row: no ratio',
    );
  },
);
