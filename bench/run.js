#!/usr/bin/env node
// The bench: `npm run bench [-- flags]` (builds first), or `node bench/run.js [flags]`
// after `npm run build`. Never part of `npm test`. A markdown report on stdout (progress
// on stderr) and bench/results/results.json, which names the commit measured; from a tree
// with uncommitted changes it goes to bench/results/results.dirty.json instead, unless
// --allow-dirty. Each part is a module of bench/parts/ that also runs alone.
// `node bench/run.js --help` lists the parts and flags.
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BUILD, MAIN, ROOT, gitState, log, machineFacts, pass, size, table } from './lib/common.js';
import { foreignCpuWindow, waitForQuiet } from './lib/quiet.js';
import { MAX_RESULT_BYTES, MIN_RESULT_BYTES } from './servers/rpc.js';

const PARTS = {
  gateway:
    'api-auth --upstream, HAProxy jwt_verify and nginx (no auth) in front of the same nginx upstream: POST JSON-RPC, per thread count, connection count and answer size',
  builtin: 'the built-in POST /ext/info and GET /ext/health against a bare uWebSockets.js server answering the same',
  core: 'per-call token verification against fast-jwt, jose and node:crypto, cached against cached, uncached against uncached',
  flood: 'the gateway path while /ext/auth is flooded with wrong passwords',
  scope:
    'api-auth --upstream with a token limited to some JSON-RPC methods (body read and checked) against one without (streamed), same upstream and load as gateway',
  access: 'api-auth --upstream with --access-log (a JSON line per request, to a file) against without, same upstream and load as gateway',
  state: 'start time, memory and verify time with 0, 10k and 1M tokens issued and 100k revoked',
  tls: 'api-auth --http-tls-enabled, HAProxy bind ssl + jwt_verify and nginx listen ssl (no auth) in front of the same upstream: HTTPS POST JSON-RPC, connections kept alive and a new connection (TLS handshake) per request, one thread, the smallest size',
  ws: 'WebSocket messages relayed per second and added latency: api-auth and nginx against a direct connection to the same echo upstream',
  issuing:
    'auth.newToken over HTTP with 4 clients for --duration (the argon2id check dominates), then the token journal alone: appends a second and records per fdatasync',
  fleet:
    'the fleet (--cluster-etcd, needs etcd): revoke latency through one of 3 gateways against a lone api-auth, and verify throughput of a fleet member against a lone one',
};

const USAGE = `Usage: npm run bench -- [flags]     (or node bench/run.js [flags] after npm run build)

Parts (--parts, comma-separated, all by default, run in this order):
${Object.entries(PARTS)
  .map(([k, v]) => `  ${k.padEnd(8)} ${v}`)
  .join('\n')}

Flags:
  --parts LIST          parts to run (default ${Object.keys(PARTS).join(',')})
  --threads LIST        gateway thread counts (default 1): api-auth --http-threads N,
                        HAProxy nbthread N, nginx worker_processes N
  --connections LIST    wrk connection counts (default 64,256)
  --sizes LIST          upstream answer sizes in bytes, ${MIN_RESULT_BYTES} to ${MAX_RESULT_BYTES}; a KiB or MiB
                        suffix is allowed (default 100,10000,1048576)
  --duration TIME       measured seconds per run: 8 or 8s (default 8s)
  --warmup TIME         warm-up before each run (default 2s)
  --rounds N            rounds per cell, median kept (default 1)
  --gateways LIST       the gateway part's contenders, by id (default apiAuth,apiAuthPipelined,
                        relay,relayPipelined,haproxy,nginx)
  --no-wait-quiet       measure at once, without waiting for other processes to go quiet
                        or repeating a run they disturbed (disturbed runs are still marked)
  --allow-dirty         write the results file even from uncommitted changes
  --out NAME            the results file under bench/results/ (default results.json), so that a
                        run of some parts does not replace the record of a full run
  --strict              exit 1 when a target is missed
  --help                print this help and exit
`;

/** Exits 2 with a message naming the flag and what it takes. */
function usage(message) {
  process.stderr.write(`bench: ${message}\nRun "node bench/run.js --help" for the flags.\n`);
  process.exit(2);
}

function list(flag, value, parse) {
  const items = value
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  if (items.length === 0) usage(`${flag} needs at least one value`);
  return [...new Set(items.map((v) => parse(v) ?? usage(`${flag}: ${JSON.stringify(v)} is not ${parse.what}`)))];
}

const positive = Object.assign((v) => (/^[1-9]\d*$/.test(v) ? Number(v) : null), { what: 'a whole number above 0' });
const bytes = Object.assign(
  (v) => {
    const m = /^(\d+)\s*(B|KiB|MiB)?$/.exec(v);
    if (!m) return null;
    const n = Number(m[1]) * ({ KiB: 1024, MiB: 1048576 }[m[2]] ?? 1);
    return n >= MIN_RESULT_BYTES && n <= MAX_RESULT_BYTES ? n : null;
  },
  { what: `a size from ${MIN_RESULT_BYTES} to ${MAX_RESULT_BYTES} bytes (such as 100, 10000, 1MiB)` },
);
const seconds = (flag, v, min) => {
  const m = /^(\d+(?:\.\d+)?)s?$/.exec(v);
  if (!m || Number(m[1]) < min) usage(`${flag}: ${JSON.stringify(v)} is not a duration of at least ${min} s (such as 8 or 8s)`);
  return Number(m[1]);
};

let flags;
try {
  ({ values: flags } = parseArgs({
    options: {
      parts: { type: 'string', default: Object.keys(PARTS).join(',') },
      threads: { type: 'string', default: '1' },
      connections: { type: 'string', default: '64,256' },
      sizes: { type: 'string', default: '100,10000,1048576' },
      duration: { type: 'string', default: '8s' },
      warmup: { type: 'string', default: '2s' },
      rounds: { type: 'string', default: '1' },
      gateways: { type: 'string' },
      'no-wait-quiet': { type: 'boolean', default: false },
      'allow-dirty': { type: 'boolean', default: false },
      out: { type: 'string', default: 'results.json' },
      strict: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  }));
} catch (error) {
  usage(error.message);
}
if (flags.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

if (!/^[a-z0-9][a-z0-9-]*\.json$/.test(flags.out) || flags.out.endsWith('.dirty.json') || flags.out.endsWith('.tmp.json')) {
  usage(`--out: ${JSON.stringify(flags.out)} is not a results file name such as results-ws.json (letters, digits and "-", then .json)`);
}
const parts = list(
  '--parts',
  flags.parts,
  Object.assign((v) => (v in PARTS ? v : null), { what: `a part (${Object.keys(PARTS).join(', ')})` }),
);
const http = {
  threads: list('--threads', flags.threads, positive),
  connections: list('--connections', flags.connections, positive),
  sizes: list('--sizes', flags.sizes, bytes),
  durationS: seconds('--duration', flags.duration, 1),
  warmupS: seconds('--warmup', flags.warmup, 0),
  rounds: positive(flags.rounds) ?? usage(`--rounds: ${JSON.stringify(flags.rounds)} is not ${positive.what}`),
  // Wait up to this long for other processes to go quiet before each measured run, and
  // measure again once when they disturbed it anyway.
  waitQuietS: flags['no-wait-quiet'] ? 0 : 10,
  retries: flags['no-wait-quiet'] ? 0 : 1,
};
const needsServer = parts.some((p) => ['gateway', 'scope', 'access', 'builtin', 'flood', 'tls', 'ws', 'issuing', 'fleet'].includes(p));
if (!existsSync(join(BUILD, 'core.wasm')) || (needsServer && !existsSync(MAIN))) {
  usage('the build is missing (build/core.wasm, build/host/main.js); run `npm run build` first, or use `npm run bench`');
}

const git = gitState();
const machine = machineFacts();
log(
  `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}; commit ${git.commit ?? 'n/a'}${git.dirty ? ' with uncommitted changes' : ''}`,
);
const results = {
  commit: git.commit,
  dirty: git.dirty,
  ...(git.dirty ? { changes: git.changes } : {}),
  machine,
  settings: { parts, http },
  parts: {},
  targets: {},
  elapsedSeconds: {},
};
const started = Date.now();
const sections = [
  '# api-auth bench',
  '',
  `Commit ${git.commit?.slice(0, 12) ?? 'n/a'}${git.dirty ? ' **with uncommitted changes**' : ''}; ${machine.date}. ` +
    `Machine: ${machine.cpuModel}, ${machine.cores} cores, ${(machine.memoryBytes / 2 ** 30).toFixed(1)} GiB, ${machine.platform}; ` +
    `Node ${machine.node} (V8 ${machine.v8}); ${machine.wrk ?? 'wrk not installed yet'}; ${machine.haproxy ?? 'HAProxy not installed yet'}; ` +
    `${machine.nginx ?? 'nginx not installed yet'}.`,
  'Every comparison is between figures measured side by side in this one run.',
];

/** Runs one part; a part that throws is reported and the others still run. */
async function part(id, title, body) {
  const t0 = Date.now();
  try {
    const { result, markdown, targets } = await body();
    results.parts[id] = result;
    for (const [name, t] of Object.entries(targets ?? {})) results.targets[name] = t;
    sections.push('', markdown);
    log(`${title}: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  } catch (error) {
    log(`${title} failed: ${error.stack ?? error}`);
    const message = String(error.message ?? error);
    results.parts[id] = { error: message };
    results.targets[`${title}: completed`] = { ok: false, error: message };
    sections.push('', `## ${title}`, '', `Failed: ${message.split('\n')[0]}`);
  }
  results.elapsedSeconds[id] = (Date.now() - t0) / 1000;
}

function busyNote(foreign) {
  if (!foreign) return '';
  return foreign.share > 0.05
    ? `Warning: other processes used ${(foreign.share * 100).toFixed(0)}% of the machine while this part ran (${foreign.top.join(', ')}); its figures are suspect.`
    : `Other processes used ${(foreign.share * 100).toFixed(1)}% of the machine while this part ran.`;
}

const steps = {
  gateway: () =>
    part('gateway', 'Gateway', async () => {
      const { runGateway, gatewayMarkdown } = await import('./parts/gateway.js');
      const r = await runGateway(flags.gateways === undefined ? http : { ...http, gateways: flags.gateways.split(',') });
      return { result: r, markdown: gatewayMarkdown(r), targets: r.targets };
    }),
  builtin: () =>
    part('builtin', 'Built-in endpoints', async () => {
      const { runBuiltin, builtinMarkdown } = await import('./parts/builtin.js');
      const r = await runBuiltin(http);
      return { result: r, markdown: builtinMarkdown(r), targets: r.targets };
    }),
  core: () =>
    part('core', 'Core verification', async () => {
      const { runCoreVerify, coreVerifyMarkdown } = await import('./parts/core-verify.js');
      const { runCoreBreakdown, coreBreakdownMarkdown } = await import('./parts/core-breakdown.js');
      if (http.waitQuietS > 0) await waitForQuiet({ maxWaitS: 30 });
      const window = foreignCpuWindow();
      const r = await runCoreVerify({ cpuTimeMs: 500 });
      r.foreign = window.end();
      r.breakdown = await runCoreBreakdown({ cpuTimeMs: 250 });
      return {
        result: r,
        markdown: [coreVerifyMarkdown(r), busyNote(r.foreign), coreBreakdownMarkdown(r.breakdown)].filter(Boolean).join('\n\n'),
        targets: r.targets,
      };
    }),
  scope: () =>
    part('scope', 'Method scopes', async () => {
      const { runGateway, gatewayMarkdown } = await import('./parts/gateway.js');
      const r = await runGateway({ ...http, gateways: ['apiAuth', 'apiAuthScoped', 'nginx'] });
      return { result: r, markdown: gatewayMarkdown(r), targets: r.targets };
    }),
  access: () =>
    part('access', 'Access log', async () => {
      const { runGateway, gatewayMarkdown } = await import('./parts/gateway.js');
      const r = await runGateway({ ...http, gateways: ['apiAuth', 'apiAuthLogged', 'nginx'] });
      return { result: r, markdown: gatewayMarkdown(r), targets: r.targets };
    }),
  flood: () =>
    part('flood', 'Flood', async () => {
      const { runFlood, floodMarkdown } = await import('./parts/flood.js');
      const r = await runFlood({ ...http, connections: http.connections[0], bytes: Math.min(...http.sizes) });
      return { result: r, markdown: floodMarkdown(r), targets: r.targets };
    }),
  tls: () =>
    part('tls', 'TLS at the gateway', async () => {
      const { runTls, tlsMarkdown } = await import('./parts/tls.js');
      const r = await runTls({ ...http, bytes: Math.min(...http.sizes) });
      return { result: r, markdown: tlsMarkdown(r), targets: r.targets };
    }),
  ws: () =>
    part('ws', 'WebSocket', async () => {
      const { runWebsocket, websocketMarkdown } = await import('./parts/websocket.js');
      // Messages, not answers: the sizes a subscription sends (a 1 MiB answer size is the HTTP parts').
      const sizes = http.sizes.filter((bytes) => bytes <= 65536);
      const r = await runWebsocket({ ...http, sizes: sizes.length > 0 ? sizes : [100] });
      return { result: r, markdown: websocketMarkdown(r), targets: r.targets };
    }),
  state: () =>
    part('state', 'State scale', async () => {
      const { runStateScale, stateScaleMarkdown } = await import('./parts/state-scale.js');
      const r = await runStateScale({ cli: true, waitQuietS: http.waitQuietS });
      return { result: r, markdown: stateScaleMarkdown(r), targets: r.targets };
    }),
  issuing: () =>
    part('issuing', 'Issuing', async () => {
      const { runIssuing, issuingMarkdown } = await import('./parts/issuing.js');
      if (http.waitQuietS > 0) await waitForQuiet({ maxWaitS: 30 });
      const window = foreignCpuWindow();
      const r = await runIssuing({ seconds: http.durationS });
      r.foreign = window.end();
      return { result: r, markdown: [issuingMarkdown(r), busyNote(r.foreign)].filter(Boolean).join('\n\n') };
    }),
  fleet: () =>
    part('fleet', 'Fleet', async () => {
      const { runFleet, fleetMarkdown } = await import('./parts/fleet.js');
      const r = await runFleet({
        durationS: http.durationS,
        warmupS: http.warmupS,
        rounds: http.rounds,
        waitQuietS: http.waitQuietS,
        retries: http.retries,
      });
      return { result: r, markdown: fleetMarkdown(r) };
    }),
};
for (const id of Object.keys(PARTS)) if (parts.includes(id)) await steps[id]();

const all = Object.entries(results.targets);
const missed = all.filter(([, t]) => t.ok === false).length;
const unknown = all.filter(([, t]) => t.ok == null).length;
sections.push(
  '',
  '## Targets',
  '',
  table(
    ['target', 'result'],
    all.map(([name, t]) => [name, pass(t.ok, t.disturbed)]),
  ),
  '',
  `${all.length - missed - unknown} of ${all.length} targets met, ${missed} missed${unknown ? `, ${unknown} not measurable here` : ''}.`,
);

results.elapsedSeconds.total = (Date.now() - started) / 1000;
sections.push(
  '',
  `Bench time: ${results.elapsedSeconds.total.toFixed(0)} s. Settings: --parts ${parts.join(',')} --threads ${http.threads.join(',')} ` +
    `--connections ${http.connections.join(',')} --sizes ${http.sizes.join(',')} (${http.sizes.map(size).join(', ')}) --duration ${http.durationS}s ` +
    `--warmup ${http.warmupS}s --rounds ${http.rounds}${flags['no-wait-quiet'] ? ' --no-wait-quiet' : ''}.`,
);

const out = join(ROOT, 'bench', 'results', git.dirty && !flags['allow-dirty'] ? flags.out.replace(/\.json$/, '.dirty.json') : flags.out);
const tmp = `${out}.tmp`;
writeFileSync(tmp, `${JSON.stringify(results, null, 2)}\n`);
renameSync(tmp, out);
process.stdout.write(`${sections.join('\n')}\n`);
if (git.dirty && !flags['allow-dirty']) {
  log(
    `the tree has uncommitted changes (${git.changes.slice(0, 5).join('; ')}${git.changes.length > 5 ? '; ...' : ''}): ` +
      `results written to ${out}, not bench/results/${flags.out}; commit first, or pass --allow-dirty`,
  );
} else {
  log(`results written to ${out}`);
}
if (flags.strict && missed > 0) process.exitCode = 1;
