#!/usr/bin/env node
// The bench: `npm run bench` (or `node bench/run.js` after `npm run build`). Never part of
// `npm test`. Runs the four parts in one go and prints a markdown report on stdout
// (progress goes to stderr); writes bench/results.json with the machine's facts.
//
//   1. core verification: per-call cost of Core.authorize against fast-jwt, jose, node:crypto
//   2. end to end: our server vs a bare uWebSockets.js server vs node:http + fast-jwt, under wrk
//   3. flood: our protected endpoint while other clients flood /ext/auth with wrong passwords
//   4. state scale: start time, memory and verify time with 0, 10k, 1M tokens and 100k revoked
//
// Flags: --parts core,e2e,flood,state   --duration S   --warmup S   --connections N
//        --threads N   --rounds N (3)   --flood-connections N   --no-extras   --no-breakdown
//        --no-wait-quiet   --quick (short runs, for trying the bench out)   --strict (exit 1 on a missed target)
//        --out PATH (default bench/results.json)
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BUILD, MAIN, ROOT, log, machineFacts, pass, table } from './lib/common.js';
import { waitForQuiet, foreignCpuWindow } from './lib/quiet.js';
import { ensureWrk } from './lib/wrk.js';

const { values: flags } = parseArgs({
  options: {
    parts: { type: 'string', default: 'core,e2e,flood,state' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string' },
    threads: { type: 'string' },
    rounds: { type: 'string' },
    'flood-connections': { type: 'string' },
    'no-extras': { type: 'boolean', default: false },
    'no-breakdown': { type: 'boolean', default: false },
    'no-wait-quiet': { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    strict: { type: 'boolean', default: false },
    out: { type: 'string', default: join(ROOT, 'bench', 'results.json') },
    help: { type: 'boolean', default: false },
  },
});

if (flags.help) {
  process.stdout.write('Usage: node bench/run.js [--parts core,e2e,flood,state] [--duration S] [--warmup S] [--connections N] [--threads N]\n' +
    '  [--rounds N] [--flood-connections N] [--no-extras] [--no-breakdown] [--no-wait-quiet] [--quick] [--strict] [--out PATH]\n');
  process.exit(0);
}

const parts = new Set(flags.parts.split(',').map((p) => p.trim()).filter(Boolean));
for (const p of parts) {
  if (!['core', 'e2e', 'flood', 'state'].includes(p)) {
    process.stderr.write(`bench: unknown part "${p}"; use core, e2e, flood, state\n`);
    process.exit(2);
  }
}
const num = (v, fallback) => (v === undefined ? fallback : Number(v));
const waitQuietS = flags['no-wait-quiet'] ? 0 : 30;
const httpOptions = {
  durationS: num(flags.duration, flags.quick ? 3 : 5),
  warmupS: num(flags.warmup, flags.quick ? 1 : 2),
  connections: num(flags.connections, 64),
  threads: num(flags.threads, 1),
  rounds: num(flags.rounds, flags.quick ? 1 : 3),
  extras: !flags['no-extras'],
  waitQuietS,
};

if (!existsSync(join(BUILD, 'core.wasm')) || !existsSync(join(BUILD, 'host', 'core.js'))) {
  process.stderr.write('bench: build/core.wasm or build/host/core.js is missing; run `npm run build` first\n');
  process.exit(2);
}
const serverBuilt = existsSync(MAIN);

if (parts.has('e2e') || parts.has('flood')) ensureWrk();
const machine = machineFacts();
log(`${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}`);
const results = { machine, settings: { parts: [...parts], http: httpOptions }, parts: {}, targets: {}, elapsedSeconds: {} };
const started = Date.now();
const sections = [
  '# api-auth bench',
  '',
  `Machine: ${machine.cpuModel}, ${machine.cores} cores, ${(machine.memoryBytes / 2 ** 30).toFixed(1)} GiB, ${machine.platform}; ` +
    `Node ${machine.node} (V8 ${machine.v8}); ${machine.wrk ?? 'wrk not installed yet'}; commit ${machine.gitCommit?.slice(0, 12) ?? 'n/a'}; ${machine.date}.`,
  'Every ratio compares figures measured side by side in this one run.',
];

function collectTargets(part, targets) {
  for (const [name, t] of Object.entries(targets ?? {})) results.targets[`${part}: ${name}`] = t;
}

async function quietPart() {
  if (waitQuietS > 0) await waitForQuiet({ maxWaitS: waitQuietS });
  return foreignCpuWindow();
}

/** Runs one part; a part that throws is reported and the others still run. */
async function part(id, title, body) {
  const t0 = Date.now();
  try {
    await body();
    log(`${title}: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    results.elapsedSeconds[id] = (Date.now() - t0) / 1000;
  } catch (error) {
    log(`${title} failed: ${error.stack ?? error}`);
    results.parts[id] = { error: String(error.message ?? error) };
    results.targets[`${title}: completed`] = { ok: false, error: String(error.message ?? error) };
    sections.push('', `## ${title}`, '', `Failed: ${String(error.message ?? error).split('\n')[0]}`);
  }
}

if (parts.has('core')) await part('coreVerify', '1. Core verification', async () => {
  const { runCoreVerify, coreVerifyMarkdown } = await import('./core-verify.js');
  const window = await quietPart();
  const r = await runCoreVerify({ cpuTimeMs: flags.quick ? 200 : 500 });
  r.foreign = window.end();
  results.parts.coreVerify = r;
  collectTargets('1. core verify', r.targets);
  sections.push('', coreVerifyMarkdown(r), '', busyNote(r.foreign));
  if (!flags['no-breakdown']) {
    const { runCoreBreakdown, coreBreakdownMarkdown } = await import('./core-breakdown.js');
    const b = await runCoreBreakdown({ cpuTimeMs: flags.quick ? 100 : 250 });
    results.parts.coreBreakdown = b;
    if (b) sections.push('', coreBreakdownMarkdown(b));
  }
});

if (parts.has('e2e')) await part('endToEnd', '2. End to end', async () => {
  if (!serverBuilt) {
    sections.push('', '## 2. End to end', '', 'Skipped: build/host/main.js is missing (run `npm run build`).');
  } else {
    const { runEndToEnd, endToEndMarkdown } = await import('./end-to-end.js');
    const r = await runEndToEnd(httpOptions);
    results.parts.endToEnd = r;
    collectTargets('2. end to end', r.targets);
    sections.push('', endToEndMarkdown(r));
  }
});

if (parts.has('flood')) await part('flood', '3. Flood', async () => {
  if (!serverBuilt) {
    sections.push('', '## 3. Flood', '', 'Skipped: build/host/main.js is missing (run `npm run build`).');
  } else {
    const { runFlood, floodMarkdown } = await import('./flood.js');
    const r = await runFlood({ ...httpOptions, rounds: 1, floodConnections: num(flags['flood-connections'], 16) });
    results.parts.flood = r;
    collectTargets('3. flood', r.targets);
    sections.push('', floodMarkdown(r));
  }
});

if (parts.has('state')) await part('stateScale', '4. State scale', async () => {
  const { runStateScale, stateScaleMarkdown } = await import('./state-scale.js');
  const r = await runStateScale({ cli: serverBuilt, waitQuietS, passes: flags.quick ? 1 : 2, rounds: 3, cpuTimeMs: flags.quick ? 80 : 150 });
  results.parts.stateScale = r;
  collectTargets('4. state scale', r.targets);
  sections.push('', stateScaleMarkdown(r));
});

function busyNote(foreign) {
  if (!foreign) return '';
  return foreign.share > 0.05
    ? `Warning: other processes used ${(foreign.share * 100).toFixed(0)}% of the machine while this part ran (${foreign.top.join(', ')}); its figures are suspect.`
    : `Other processes used ${(foreign.share * 100).toFixed(1)}% of the machine while this part ran.`;
}

const all = Object.entries(results.targets);
sections.push('', '## Targets', '', table(['target', 'result'], all.map(([name, t]) => [name, pass(t.ok, t.disturbed)])));
const missed = all.filter(([, t]) => t.ok === false).length;
sections.push('', `${all.length - missed} of ${all.length} targets met.`);

results.elapsedSeconds.total = (Date.now() - started) / 1000;
sections.push('', `Bench time: ${results.elapsedSeconds.total.toFixed(0)} s.`);
const tmp = `${flags.out}.tmp`;
writeFileSync(tmp, `${JSON.stringify(results, null, 2)}\n`);
renameSync(tmp, flags.out);
process.stdout.write(`${sections.join('\n')}\n`);
log(`results written to ${flags.out}`);
if (flags.strict && missed > 0) process.exitCode = 1;
