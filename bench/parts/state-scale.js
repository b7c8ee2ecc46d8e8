// Part 4: state scale. Start time and memory with 0, 10k and 1M issued tokens (and 100k
// of the 1M revoked), and the verify time as the state grows.
//
// Each scenario runs in fresh processes so memory figures are its own:
//   live     issues N tokens and revokes M of them (spread evenly) on one Core, as a
//            running service would have; reports memory and verify time, and writes what
//            a restart needs (key, serial range, revoked serials) to a state file;
//   restart  a new process rebuilds a Core from that state file (restoreSerials +
//            revokeSerial, the restart path of the host) and reports start time, memory,
//            verify time, and checks that old tokens still verify and revoked ones do not;
//   cli      the real CLI (build/host/main.js) started against a data folder: its
//            spawn-to-"listening" time and RSS. The data folder's state file is seeded
//            with N issued serials and M revocations through the program's own reader
//            and writer (build/host/state/data-folder.js) before the timed start.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BUILD, log, mib, ms, ns, pass, ratio, table, wireCopies, wireString } from '../lib/common.js';
import { track } from '../lib/proc.js';
import { loadCore } from '../lib/core.js';
import { foreignCpuWindow, waitForQuiet } from '../lib/quiet.js';

const SELF = fileURLToPath(import.meta.url);
const PATH = '/ext/health';
const LIFETIME = 12 * 3600;
const FIRST_SEEN_MIN = 2048;

export const DEFAULTS = {
  scenarios: [
    { issued: 0, revoked: 0 },
    { issued: 10_000, revoked: 0 },
    { issued: 1_000_000, revoked: 0 },
    { issued: 1_000_000, revoked: 100_000 },
  ],
  // The Core's (and so the server's) default window: 2^22 serials, room for 1M and more.
  windowLog2: 22,
  // Verify timing: `passes` sets of fresh processes, each timing `rounds` interleaved
  // rounds, each case measured for `cpuTimeMs` per round.
  passes: 2,
  rounds: 3,
  cpuTimeMs: 150,
  cli: true,
  waitQuietS: 60,
};

// ---------------------------------------------------------------------------------------
// Child side

function memory(core) {
  globalThis.gc?.();
  const m = process.memoryUsage();
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    wasm: core.x?.memory?.buffer?.byteLength ?? null,
  };
}

async function childLive({ issued, revoked, windowLog2, stateFile }) {
  const t0 = process.hrtime.bigint();
  const { newCore, Outcome } = await loadCore();
  const key = randomBytes(32);
  const core = newCore({ windowLog2 });
  core.setKey(key);
  const grant = core.addGrant([PATH]);
  const now = Math.floor(Date.now() / 1000);
  const every = revoked > 0 ? Math.floor(issued / revoked) : 0;
  const revokedSerials = [];
  const revokedSample = [];
  const ring = new Array(4096);
  let ringAt = 0;
  let revokeNs = 0n;
  const tIssue = process.hrtime.bigint();
  for (let k = 0; k < issued; k++) {
    const { token, claims } = core.issue(grant, now, LIFETIME);
    if (every > 0 && k % every === 0 && revokedSerials.length < revoked) {
      const r0 = process.hrtime.bigint();
      if (core.revoke(token, now).outcome !== Outcome.Valid) throw new Error('revoke failed');
      revokeNs += process.hrtime.bigint() - r0;
      revokedSerials.push(claims.serial);
      if (revokedSample.length < 1024) revokedSample.push(token);
    } else {
      ring[ringAt++ & 4095] = token;
    }
  }
  const issueMs = Number(process.hrtime.bigint() - tIssue - revokeNs) / 1e6;
  const buildMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const valid = ring.filter(Boolean);
  // An empty service still has to check something: one fresh token, then nothing more.
  if (valid.length === 0) valid.push(core.issue(grant, now, LIFETIME).token);
  const mem = memory(core);
  for (const t of valid.slice(0, 64))
    if (core.authorize(`Bearer ${t}`, PATH, now) !== Outcome.Valid) throw new Error('a valid token did not verify');
  for (const t of revokedSample.slice(0, 64))
    if (core.authorize(`Bearer ${t}`, PATH, now) !== Outcome.Revoked) throw new Error('a revoked token verified');
  writeFileSync(
    stateFile,
    JSON.stringify({
      key: key.toString('hex'),
      windowLog2,
      endpoints: [PATH],
      floor: core.floor,
      nextSerial: core.nextSerial,
      expiryBound: now + LIFETIME,
      revokedSerials,
      sample: { valid, revoked: revokedSample },
    }),
  );
  return {
    issued,
    revoked: revokedSerials.length,
    issueNsPerToken: issued ? (issueMs * 1e6) / issued : null,
    revokeNsPerToken: revokedSerials.length ? Number(revokeNs) / revokedSerials.length : null,
    buildMs,
    memory: mem,
  };
}

/** Rebuilds a Core from a state file the way a restart does. */
function restore(newCore, s) {
  const core = newCore({ windowLog2: s.windowLog2 });
  core.setKey(Buffer.from(s.key, 'hex'));
  core.addGrant(s.endpoints);
  core.restoreSerials(s.floor, s.nextSerial, s.expiryBound);
  for (const serial of s.revokedSerials) {
    // 0 (marked) in today's wrapper; true in the first one.
    const r = core.revokeSerial(serial);
    if (r !== 0 && r !== true) throw new Error(`serial ${serial} not marked revoked (${r})`);
  }
  return core;
}

/**
 * A verify-time server for one state: rebuilds the Core like a restart, then on each
 * "round" line from stdin times every case and answers "ROUND {...}". One process per
 * state keeps the call sites monomorphic (one Core, as in the server); the parent
 * interleaves rounds across states so machine noise falls on all of them alike.
 */
async function childVerifyServer({ stateFile, cpuTimeMs }) {
  const { newCore } = await loadCore();
  const { measure } = await import('mitata');
  const { createInterface } = await import('node:readline');
  const now = Math.floor(Date.now() / 1000);
  const s = JSON.parse(readFileSync(stateFile, 'utf8'));
  const core = restore(newCore, s);
  const cases = {
    validRepeated: wireCopies(`Bearer ${s.sample.valid.at(-1)}`, 1024),
    // Distinct tokens in turn, enough to miss the core's tag cache; a state with fewer
    // issued tokens has no such case.
    validFirstSeen: s.sample.valid.length >= FIRST_SEEN_MIN ? s.sample.valid.map((t) => wireString(`Bearer ${t}`)) : [],
    revoked: s.sample.revoked.map((t) => wireString(`Bearer ${t}`)),
  };
  process.stdout.write('READY\n');
  for await (const line of createInterface({ input: process.stdin })) {
    if (line !== 'round') break;
    const out = {};
    for (const [name, headers] of Object.entries(cases)) {
      if (headers.length === 0) continue;
      const paths = wireCopies(PATH, headers.length);
      const n = headers.length;
      let i = 0;
      const stats = await measure(
        () => {
          i = i + 1 === n ? 0 : i + 1;
          return core.authorize(headers[i], paths[i], now);
        },
        { min_cpu_time: cpuTimeMs * 1e6 },
      );
      out[name] = stats.avg;
    }
    process.stdout.write(`ROUND ${JSON.stringify(out)}\n`);
  }
  return { done: true };
}

/** Runs verify servers for all states and interleaves `rounds` rounds; medians per case. */
async function verifyAcross(stateFiles, rounds, cpuTimeMs) {
  const servers = stateFiles.map((stateFile) => {
    const child = track(
      spawn(process.execPath, [SELF, '--child', 'verify-server', JSON.stringify({ stateFile, cpuTimeMs })], {
        stdio: ['pipe', 'pipe', 'inherit'],
      }),
    );
    let buffered = '';
    const lines = [];
    const waiters = [];
    let exited = null;
    child.stdout.on('data', (d) => {
      buffered += d;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        const waiter = waiters.shift();
        if (waiter) waiter.resolve(line);
        else lines.push(line);
      }
    });
    child.once('exit', (code) => {
      exited = new Error(`verify server exited (${code})`);
      for (const w of waiters.splice(0)) w.reject(exited);
    });
    // The next line the child writes (queued if it came before anyone asked).
    const next = () =>
      new Promise((resolve, reject) => {
        if (lines.length > 0) return resolve(lines.shift());
        if (exited) return reject(exited);
        waiters.push({ resolve, reject });
      });
    return { child, next, samples: {} };
  });
  try {
    for (const sv of servers) if ((await sv.next()) !== 'READY') throw new Error('verify server did not start');
    for (let round = 0; round < rounds; round++) {
      for (const sv of servers) {
        const reply = sv.next();
        sv.child.stdin.write('round\n');
        const line = await reply;
        if (!line.startsWith('ROUND ')) throw new Error(`verify server: ${line}`);
        for (const [k, v] of Object.entries(JSON.parse(line.slice(6)))) (sv.samples[k] ??= []).push(v);
      }
    }
  } finally {
    for (const sv of servers) sv.child.stdin.end();
  }
  const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
  return servers.map((sv) => Object.fromEntries(Object.entries(sv.samples).map(([k, v]) => [k, median(v)])));
}

async function childRestart({ stateFile }) {
  const t0 = process.hrtime.bigint();
  const { newCore, Outcome } = await loadCore();
  const tImport = process.hrtime.bigint();
  const s = JSON.parse(readFileSync(stateFile, 'utf8'));
  const tRead = process.hrtime.bigint();
  const core = restore(newCore, s);
  const tReady = process.hrtime.bigint();
  process.stdout.write('READY\n');
  const mem = memory(core);
  const now = Math.floor(Date.now() / 1000);
  let wrong = 0;
  for (const t of s.sample.valid) if (core.authorize(`Bearer ${t}`, PATH, now) !== Outcome.Valid) wrong++;
  for (const t of s.sample.revoked) if (core.authorize(`Bearer ${t}`, PATH, now) !== Outcome.Revoked) wrong++;
  return {
    importMs: Number(tImport - t0) / 1e6,
    readStateMs: Number(tRead - tImport) / 1e6,
    restoreMs: Number(tReady - tRead) / 1e6,
    inProcessReadyMs: Number(tReady - t0) / 1e6,
    memory: mem,
    wrongOutcomes: wrong,
    checked: s.sample.valid.length + s.sample.revoked.length,
  };
}

// ---------------------------------------------------------------------------------------
// Parent side

function runChild(mode, params) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = track(
      spawn(process.execPath, ['--expose-gc', SELF, '--child', mode, JSON.stringify(params)], { stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    let out = '';
    let err = '';
    let readyMs = null;
    child.stdout.on('data', (d) => {
      out += d;
      if (readyMs === null && out.includes('READY\n')) readyMs = Number(process.hrtime.bigint() - started) / 1e6;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      if (code !== 0 || !line) return reject(new Error(`state-scale ${mode} child failed (exit ${code}): ${err.slice(-2000)}`));
      const result = JSON.parse(line.slice(7));
      if (readyMs !== null) result.spawnToReadyMs = readyMs;
      resolve(result);
    });
  });
}

/** The real CLI, started against a data folder, its state file seeded with the scenario's serials and revocations. */
async function cliStart(scenario, seedFrom) {
  const { startOurs, newToken } = await import('../lib/api-auth.js');
  if (!existsSync(join(BUILD, 'host', 'main.js'))) return { skipped: 'build/host/main.js is missing' };
  // First start: creates the data folder (and, with durable state, its state file).
  const first = await startOurs();
  const dataDir = join(first.dir, 'data');
  const result = {};
  try {
    if (scenario.issued === 0) {
      result.spawnToListeningMs = first.server.readyMs;
      result.rssBytes = first.server.rssBytes();
      await newToken(first.server.port, first.password, [PATH]);
      result.rssAfterFirstTokenBytes = first.server.rssBytes();
      return result;
    }
    await newToken(first.server.port, first.password, [PATH]);
    await first.server.stop();
    // Seed: N issued serials and M revocations, in the program's own format (codec.js),
    // read and written as the program does (data-folder.js).
    const folder = await import(pathToFileURL(join(BUILD, 'host', 'state', 'data-folder.js')).href);
    const state = await folder.readState(dataDir);
    if (state === undefined) throw new Error(`no state file in ${dataDir} after a token was issued`);
    const seeded = JSON.parse(readFileSync(seedFrom, 'utf8'));
    state.serialCeiling = Math.max(state.serialCeiling, seeded.nextSerial);
    state.floor = 0;
    state.maxLifetime = Math.max(state.maxLifetime ?? 0, LIFETIME);
    const expiry = seeded.expiryBound;
    for (const serial of seeded.revokedSerials) state.revocations.set(serial, expiry);
    await folder.writeState(dataDir, state);
    const { startServer } = await import('../lib/proc.js');
    const { MAIN } = await import('../lib/common.js');
    const second = await startServer('api-auth (seeded)', process.execPath, [
      MAIN,
      '--http-port',
      '0',
      '--data-dir',
      dataDir,
      '--api-auth-required',
      '--api-auth-password-file',
      join(first.dir, 'password'),
    ]);
    result.spawnToListeningMs = second.readyMs;
    result.rssBytes = second.rssBytes();
    result.seeded = { serialCeiling: state.serialCeiling, revocations: state.revocations.size };
    await second.stop();
    return result;
  } finally {
    await first.cleanup();
  }
}

export async function runStateScale(options = {}) {
  const o = { ...DEFAULTS, ...options };
  log(`part state: state scale (window 2^${o.windowLog2} serials)`);
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-state-'));
  const rows = [];
  try {
    for (const scenario of o.scenarios) {
      const stateFile = join(dir, `state-${scenario.issued}-${scenario.revoked}.json`);
      const live = await runChild('live', { ...scenario, windowLog2: o.windowLog2, stateFile });
      const restart = await runChild('restart', { stateFile });
      const cli = o.cli ? await cliStart(scenario, stateFile) : { skipped: 'not asked for' };
      rows.push({ ...scenario, stateFile, live, restart, cli });
      log(
        `  issued ${String(scenario.issued).padStart(9)} revoked ${String(scenario.revoked).padStart(7)}: ` +
          `restart ${ms(restart.spawnToReadyMs)} (restore ${ms(restart.restoreMs)}), live RSS ${mib(live.memory.rss)}` +
          (cli.spawnToListeningMs != null ? `, CLI start ${ms(cli.spawnToListeningMs)}` : ''),
      );
    }
    if (o.waitQuietS > 0) await waitForQuiet({ maxWaitS: o.waitQuietS });
    const window = foreignCpuWindow();
    // Each pass starts fresh processes (one per state): a process can come out of its JIT
    // warm-up a little slower or faster than another for reasons that have nothing to do
    // with its state, so every state gets `passes` processes and keeps its fastest median.
    const passes = [];
    for (let k = 0; k < o.passes; k++)
      passes.push(
        await verifyAcross(
          rows.map((r) => r.stateFile),
          o.rounds,
          o.cpuTimeMs,
        ),
      );
    const verify = rows.map((_, i) => {
      const out = {};
      for (const pass of passes) for (const [name, v] of Object.entries(pass[i])) out[name] = Math.min(out[name] ?? Infinity, v);
      return out;
    });
    const foreign = window.end();
    rows.forEach((r, k) => {
      r.verifyNs = verify[k];
      delete r.stateFile;
      log(
        `  verify with ${String(r.issued).padStart(9)} issued, ${String(r.revoked).padStart(7)} revoked: ` +
          `valid ${ns(r.verifyNs.validRepeated)}, first-seen ${ns(r.verifyNs.validFirstSeen)}, revoked ${ns(r.verifyNs.revoked)}`,
      );
    });
    const repeated = rows.map((r) => r.verifyNs.validRepeated);
    const firstSeen = rows.map((r) => r.verifyNs.validFirstSeen).filter((v) => v != null);
    const spread = (v) => Math.max(...v) / Math.min(...v);
    const targets = {
      'state: verify time unchanged as state grows (max/min of valid, repeated)': {
        value: spread(repeated),
        target: 1.15,
        ok: spread(repeated) <= 1.15,
      },
      'state: verify time unchanged as state grows (max/min of valid, first-seen)': {
        value: spread(firstSeen),
        target: 1.15,
        ok: spread(firstSeen) <= 1.15,
      },
      'state: restarted cores verify old tokens and refuse revoked ones': {
        value: rows.reduce((a, r) => a + r.restart.wrongOutcomes, 0),
        target: 0,
        unit: 'count',
        ok: rows.every((r) => r.restart.wrongOutcomes === 0),
      },
    };
    return {
      settings: { windowLog2: o.windowLog2, scenarios: o.scenarios, passes: o.passes, rounds: o.rounds, cpuTimeMs: o.cpuTimeMs },
      rows,
      targets,
      foreign,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function stateScaleMarkdown(result) {
  const label = (r) => `${r.issued.toLocaleString('en-US')} issued, ${r.revoked.toLocaleString('en-US')} revoked`;
  const skipped = result.rows.find((r) => r.cli.skipped)?.cli.skipped;
  return [
    `## State scale (Core window 2^${result.settings.windowLog2} serials; each scenario in fresh processes)`,
    '',
    table(
      [
        'state',
        'issue per token',
        'revoke per token',
        'live RSS',
        'live heap',
        'Wasm memory',
        'restart: spawn to ready',
        'of which restore',
        'RSS after restart',
        'old tokens right',
        'CLI spawn to listening',
        'CLI RSS',
      ],
      result.rows.map((r) => [
        label(r),
        ns(r.live.issueNsPerToken),
        ns(r.live.revokeNsPerToken),
        mib(r.live.memory.rss),
        mib(r.live.memory.heapUsed),
        mib(r.live.memory.wasm),
        ms(r.restart.spawnToReadyMs),
        ms(r.restart.restoreMs),
        mib(r.restart.memory.rss),
        `${r.restart.checked - r.restart.wrongOutcomes}/${r.restart.checked}`,
        r.cli.spawnToListeningMs != null ? ms(r.cli.spawnToListeningMs) : `n/a${r.cli.skipped ? ' (1)' : ''}`,
        r.cli.rssBytes != null ? mib(r.cli.rssBytes) : 'n/a',
      ]),
    ),
    '',
    'Live: one process issues N tokens and revokes M of them (spread evenly). Restart: a fresh process imports the core, reads that state, ' +
      "and rebuilds it with `restoreSerials` and one `revokeSerial` per revocation (the host's restart path).",
    ...(skipped ? ['', `(1) ${skipped}.`] : []),
    '',
    `Verify time per state (\`Core.authorize\`; one process per state, ${result.settings.rounds} rounds interleaved across states, median per process; ` +
      `${result.settings.passes} such passes with fresh processes, fastest kept):`,
    '',
    table(
      ['state', 'valid, repeated', 'valid, first-seen', 'revoked'],
      result.rows.map((r) => [label(r), ns(r.verifyNs.validRepeated), ns(r.verifyNs.validFirstSeen), ns(r.verifyNs.revoked)]),
    ),
    '',
    table(
      ['target', 'measured', 'needed', 'result'],
      Object.entries(result.targets).map(([k, t]) => [
        k,
        t.unit === 'count' ? String(t.value) : ratio(t.value),
        t.unit === 'count' ? '0' : `<= ${t.target}x`,
        pass(t.ok),
      ]),
    ),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------

if (process.argv[2] === '--child') {
  const mode = process.argv[3];
  const params = JSON.parse(process.argv[4]);
  const result =
    mode === 'live' ? await childLive(params) : mode === 'restart' ? await childRestart(params) : await childVerifyServer(params);
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
} else if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runStateScale();
  process.stdout.write(`${stateScaleMarkdown(result)}\n`);
}
