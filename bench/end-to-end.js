// Part 2: end to end, on loopback. Our server (auth on), a bare uWebSockets.js server
// with no auth, and a node:http server checking an equivalent JWT with fast-jwt, each
// answering GET /ext/health with the same body; loaded in turn by wrk with the same
// threads, connections and duration. The server under test is pinned to one CPU and wrk
// to the other, when the machine has two.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createSigner } from 'fast-jwt';
import { MAIN, ROOT, log, ms, int, mib, pass, ratio, table } from './lib/common.js';
import { startServer } from './lib/proc.js';
import { TICKS_PER_SECOND, foreignCpuWindow, processTicks, waitForQuiet } from './lib/quiet.js';
import { ensureWrk, runWrk } from './lib/wrk.js';
import { BODY_TEXT, CONTENT_TYPE, PATH } from './servers/body.js';

export const DEFAULTS = {
  durationS: 5,
  warmupS: 2,
  connections: 64,
  threads: 1,
  serverCpu: 1,
  clientCpu: 0,
  rounds: 3,
  extras: true,
  // Wait (up to this many seconds) for other processes to go quiet before each measured run,
  // and measure again (up to this many times) when they disturbed it anyway.
  waitQuietS: 60,
  retries: 2,
};

/** Over this share of the machine used by other processes during a run, the run is flagged. */
export const CONTENDED = 0.05;

const LIFETIME_S = 12 * 3600;

/**
 * Our CLI with auth on (or off), on a free loopback port, with a fresh password file and
 * data folder under a temporary directory. Resolves with the server, its password, and
 * `cleanup()` (stops it, removes the directory).
 */
export async function startOurs({ cpu = null, authRequired = true, extraArgs = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-'));
  const passwordFile = join(dir, 'password');
  const password = randomBytes(18).toString('base64url');
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  const args = [MAIN, '--http-port', '0', '--data-dir', join(dir, 'data')];
  if (authRequired) args.push('--api-auth-required', '--api-auth-password-file', passwordFile);
  args.push(...extraArgs);
  let server;
  try {
    server = await startServer(authRequired ? 'api-auth (auth on)' : 'api-auth (auth off)', process.execPath, args, { cpu });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    server,
    password,
    dir,
    cleanup: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One JSON-RPC call to /ext/auth. */
export async function authCall(port, method, params, id = 1) {
  const res = await fetch(`http://127.0.0.1:${port}/ext/auth`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method, params, id }),
  });
  return { status: res.status, body: await res.json() };
}

export async function newToken(port, password, endpoints = [PATH]) {
  const { status, body } = await authCall(port, 'auth.newToken', { password, endpoints });
  if (status !== 200 || typeof body.result?.token !== 'string') {
    throw new Error(`auth.newToken failed: HTTP ${status} ${JSON.stringify(body)}`);
  }
  return body.result.token;
}

/** The fairness check: the same status, content-type and body bytes from every server. */
export async function checkResponse(name, port, authorization) {
  const headers = authorization ? { authorization } : {};
  const res = await fetch(`http://127.0.0.1:${port}${PATH}`, { headers });
  const text = await res.text();
  const type = res.headers.get('content-type');
  if (res.status !== 200 || text !== BODY_TEXT || type !== CONTENT_TYPE) {
    throw new Error(`${name}: GET ${PATH} answered ${res.status} ${type} ${JSON.stringify(text)}; ` +
      `every server must answer 200 ${CONTENT_TYPE} ${JSON.stringify(BODY_TEXT)}`);
  }
  return { status: res.status, contentType: type, bytes: Buffer.byteLength(text) };
}

/** Warm-up run, then the measured run; both with the same shape. */
export async function load(server, authorization, o) {
  const url = `http://127.0.0.1:${server.port}${PATH}`;
  const shape = { url, threads: o.threads, connections: o.connections, cpu: o.clientCpu, authorization };
  if (o.warmupS > 0) await runWrk({ ...shape, durationS: o.warmupS });
  return measureQuietly(o, () => withCpu(server, () => runWrk({ ...shape, durationS: o.durationS })));
}

/**
 * Runs a wrk measurement and adds where the CPU went: the server's own CPU time per
 * request (independent of whether wrk or the server was the bottleneck) and its share of
 * its core, and wrk's CPU time (reaped children of this process).
 */
export async function withCpu(server, measure) {
  const s0 = processTicks(server.child.pid);
  const me0 = processTicks(process.pid);
  const t0 = process.hrtime.bigint();
  const result = await measure();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const s1 = processTicks(server.child.pid);
  const me1 = processTicks(process.pid);
  if (s0 && s1) {
    // Shares over the whole window; per request assumes the load was steady in it (a
    // flood run's window also holds the flood's lead and tail).
    result.serverCpuShare = (s1.self - s0.self) / TICKS_PER_SECOND / wall;
    result.serverCpuUsPerRequest = (result.serverCpuShare * result.seconds * 1e6) / result.requests;
  }
  if (me0 && me1) result.clientCpuShare = (me1.children - me0.children) / TICKS_PER_SECOND / wall;
  return result;
}

/**
 * Runs `measure` once the machine is quiet, recording how much CPU other processes took
 * meanwhile; a run they disturbed is repeated (up to `o.retries` times) and the least
 * disturbed one kept, marked `contended` if even that one was.
 */
export async function measureQuietly(o, measure) {
  let best = null;
  for (let attempt = 0; attempt <= (o.retries ?? 0); attempt++) {
    if (o.waitQuietS > 0) await waitForQuiet({ maxWaitS: o.waitQuietS });
    const window = foreignCpuWindow();
    const result = await measure();
    result.foreign = window.end();
    result.contended = result.foreign ? result.foreign.share > CONTENDED : null;
    result.attempts = attempt + 1;
    if (best === null || (result.foreign?.share ?? 0) < (best.foreign?.share ?? 0)) best = { ...result, attempts: attempt + 1 };
    if (!result.contended) break;
    if (attempt < (o.retries ?? 0)) log(`  other processes used ${(result.foreign.share * 100).toFixed(0)}% of the machine during the run; measuring again`);
  }
  return best;
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The contenders: each knows how to start itself and what Authorization to send. */
function contenders(o, jwtKey, jwt) {
  const list = [
    {
      id: 'ours',
      name: 'api-auth (uWS + Wasm core, auth on)',
      start: async () => {
        const ours = await startOurs({ cpu: o.serverCpu });
        const token = await newToken(ours.server.port, ours.password);
        return { server: ours.server, authorization: `Bearer ${token}`, cleanup: ours.cleanup };
      },
    },
    {
      id: 'bareUws',
      name: 'bare uWebSockets.js, no auth',
      start: async () => {
        const server = await startServer('bare uWS', process.execPath, [join(ROOT, 'bench', 'servers', 'bare-uws.js')], { cpu: o.serverCpu });
        return { server, authorization: null, cleanup: () => server.stop() };
      },
    },
    {
      id: 'nodeHttpFastJwt',
      name: 'node:http + fast-jwt (no cache)',
      start: async () => {
        const server = await startServer('node:http + fast-jwt', process.execPath, [join(ROOT, 'bench', 'servers', 'node-http-fast-jwt.js')],
          { cpu: o.serverCpu, env: { BENCH_JWT_KEY: jwtKey.toString('hex'), BENCH_FASTJWT_CACHE: '0' } });
        return { server, authorization: `Bearer ${jwt}`, cleanup: () => server.stop() };
      },
    },
  ];
  if (o.extras) {
    list.push({
      id: 'nodeHttpFastJwtCache',
      name: 'node:http + fast-jwt (cache on)',
      extra: true,
      start: async () => {
        const server = await startServer('node:http + fast-jwt (cache)', process.execPath, [join(ROOT, 'bench', 'servers', 'node-http-fast-jwt.js')],
          { cpu: o.serverCpu, env: { BENCH_JWT_KEY: jwtKey.toString('hex'), BENCH_FASTJWT_CACHE: '1' } });
        return { server, authorization: `Bearer ${jwt}`, cleanup: () => server.stop() };
      },
    }, {
      id: 'oursAuthOff',
      name: 'api-auth, auth off (path rules only)',
      extra: true,
      start: async () => {
        const ours = await startOurs({ cpu: o.serverCpu, authRequired: false });
        return { server: ours.server, authorization: null, cleanup: ours.cleanup };
      },
    });
  }
  return list;
}

export async function runEndToEnd(options = {}) {
  const o = { ...DEFAULTS, ...options };
  ensureWrk();
  log(`part 2: end to end (wrk -t${o.threads} -c${o.connections} -d${o.durationS}s, warm-up ${o.warmupS}s, ` +
    `server on CPU ${o.serverCpu}, wrk on CPU ${o.clientCpu}, ${o.rounds} round(s))`);
  const jwtKey = randomBytes(32);
  const now = Math.floor(Date.now() / 1000);
  const jwt = createSigner({ key: jwtKey, algorithm: 'HS256' })({ endpoints: [PATH], gen: 1, jti: '1', exp: now + LIFETIME_S });
  const list = contenders(o, jwtKey, jwt);
  const runs = Object.fromEntries(list.map((c) => [c.id, []]));
  for (let round = 0; round < o.rounds; round++) {
    for (const c of list) {
      const started = await c.start();
      try {
        await checkResponse(c.name, started.server.port, started.authorization);
        const result = await load(started.server, started.authorization, o);
        result.rssBytes = started.server.rssBytes();
        if (result.errorCount > 0) log(`  WARNING ${c.name}: wrk counted errors ${JSON.stringify(result.errors)}`);
        if (result.contended) log(`  WARNING ${c.name}: other processes used ${(result.foreign.share * 100).toFixed(0)}% of the machine during the run (${result.foreign.top.join(', ')})`);
        runs[c.id].push(result);
        log(`  ${c.name.padEnd(40)} ${int(result.rps).padStart(9)} req/s  p50 ${ms(result.p50Ms)}  p99 ${ms(result.p99Ms)}`);
      } finally {
        await started.cleanup();
      }
    }
  }
  // Runs disturbed by other processes are left out of every figure when undisturbed ones
  // exist: of a server's runs for its medians, of the rounds for the ratios.
  const clean = (r) => (r.some((x) => !x.contended) ? r.filter((x) => !x.contended) : r);
  const servers = {};
  for (const c of list) {
    const all = runs[c.id];
    const r = clean(all);
    servers[c.id] = {
      name: c.name,
      extra: Boolean(c.extra),
      rps: median(r.map((x) => x.rps)),
      p50Ms: median(r.map((x) => x.p50Ms)),
      p99Ms: median(r.map((x) => x.p99Ms)),
      p999Ms: median(r.map((x) => x.p999Ms)),
      maxMs: Math.max(...r.map((x) => x.maxMs)),
      errors: r.reduce((a, x) => a + x.errorCount, 0),
      rssBytes: r.at(-1).rssBytes,
      serverCpuUsPerRequest: median(r.map((x) => x.serverCpuUsPerRequest ?? NaN)),
      serverCpuShare: median(r.map((x) => x.serverCpuShare ?? NaN)),
      clientCpuShare: median(r.map((x) => x.clientCpuShare ?? NaN)),
      contendedRuns: all.filter((x) => x.contended).length,
      usedRuns: r.length,
      runs: all,
    };
  }
  // Ratios are taken within each round (the contenders of a round ran minutes apart at
  // most, under the same conditions) and the median over rounds is kept.
  const roundsFor = (other) => {
    const both = runs.ours.map((x, r) => [x, runs[other][r]]);
    const quiet = both.filter(([a, b]) => !a.contended && !b.contended);
    return quiet.length > 0 ? quiet : both;
  };
  const perRound = (other, f) => median(roundsFor(other).map(([a, b]) => f(a, b)));
  const rpsRatio = (other) => perRound(other, (a, b) => a.rps / b.rps);
  // Capacity: from the server's CPU time per request, what the throughput ratio would be
  // if every server, not wrk, were the bottleneck.
  const capacityRatio = (other) => perRound(other, (a, b) => b.serverCpuUsPerRequest / a.serverCpuUsPerRequest);
  const ratios = {
    oursOverBareUws: rpsRatio('bareUws'),
    oursOverNodeHttpFastJwt: rpsRatio('nodeHttpFastJwt'),
    capacityOursOverBareUws: capacityRatio('bareUws'),
    capacityOursOverNodeHttpFastJwt: capacityRatio('nodeHttpFastJwt'),
    perRound: {
      oursOverBareUws: runs.ours.map((x, r) => ({ value: x.rps / runs.bareUws[r].rps, contended: x.contended || runs.bareUws[r].contended })),
      oursOverNodeHttpFastJwt: runs.ours.map((x, r) => ({ value: x.rps / runs.nodeHttpFastJwt[r].rps, contended: x.contended || runs.nodeHttpFastJwt[r].contended })),
    },
  };
  if (servers.nodeHttpFastJwtCache) ratios.oursOverNodeHttpFastJwtCache = rpsRatio('nodeHttpFastJwtCache');
  if (servers.oursAuthOff) {
    ratios.oursOverOursAuthOff = rpsRatio('oursAuthOff');
    ratios.capacityOursOverOursAuthOff = capacityRatio('oursAuthOff');
  }
  // A figure that only disturbed runs could give is marked so in the targets.
  const disturbed = (...ids) => ids.some((id) => servers[id].usedRuns === servers[id].contendedRuns && servers[id].contendedRuns > 0);
  const targets = {
    'protected throughput >= 0.85x bare uWebSockets.js': {
      value: ratios.oursOverBareUws, target: 0.85, ok: ratios.oursOverBareUws >= 0.85, disturbed: disturbed('ours', 'bareUws'),
    },
    'protected throughput >= 3x node:http + fast-jwt': {
      value: ratios.oursOverNodeHttpFastJwt, target: 3, ok: ratios.oursOverNodeHttpFastJwt >= 3, disturbed: disturbed('ours', 'nodeHttpFastJwt'),
    },
    [`p99 < 2 ms at ${o.connections} connections`]: { value: servers.ours.p99Ms, target: 2, unit: 'ms', ok: servers.ours.p99Ms < 2, disturbed: disturbed('ours') },
    'no errors or non-2xx answers (ours)': { value: servers.ours.errors, target: 0, unit: 'count', ok: servers.ours.errors === 0 },
  };
  return { settings: o, servers, ratios, targets };
}

export function usec(v) {
  return v == null || !Number.isFinite(v) ? 'n/a' : `${v.toFixed(2)} µs`;
}

export function pct(v) {
  return v == null || !Number.isFinite(v) ? 'n/a' : `${(v * 100).toFixed(0)}%`;
}

export function targetRows(targets) {
  return Object.entries(targets).map(([k, t]) => {
    const shown = t.unit === 'ms' ? ms(t.value) : t.unit === 'count' ? String(t.value) : ratio(t.value);
    const need = t.unit === 'ms' ? `< ${t.target} ms` : t.unit === 'count' ? `${t.target}` : `>= ${t.target}x`;
    return [k, shown, need, pass(t.ok, t.disturbed)];
  });
}

export function endToEndMarkdown(result) {
  const s = result.settings;
  const ours = result.servers.ours.rps;
  return [
    `## 2. End to end (GET ${PATH}, wrk -t${s.threads} -c${s.connections} -d${s.durationS}s, HTTP/1.1 keep-alive, ` +
      `server pinned to CPU ${s.serverCpu}, wrk to CPU ${s.clientCpu}, median of ${s.rounds} round(s))`,
    '',
    'Figures per server: median over its undisturbed rounds (over all rounds when every one was disturbed).',
    '',
    table(['server', 'requests/s', 'p50', 'p99', 'p99.9', 'max', 'errors', 'server CPU per request', 'server core busy', 'wrk core busy', 'RSS after', 'ours / this', 'per round (req/s)'],
      Object.values(result.servers).map((v) => [
        v.extra ? `${v.name} (extra)` : v.name, int(v.rps), ms(v.p50Ms), ms(v.p99Ms), ms(v.p999Ms), ms(v.maxMs), v.errors,
        usec(v.serverCpuUsPerRequest), pct(v.serverCpuShare), pct(v.clientCpuShare), mib(v.rssBytes), ratio(ours / v.rps),
        v.runs.map((x) => `${int(x.rps)}${x.contended ? '*' : ''}`).join(' / '),
      ])),
    '',
    `Ratios (median over rounds of the ratio within each round, undisturbed rounds only when there are any): ` +
      `throughput ours / bare uWebSockets.js ${ratio(result.ratios.oursOverBareUws)} ` +
      `(rounds: ${result.ratios.perRound.oursOverBareUws.map((v) => `${ratio(v.value)}${v.contended ? '*' : ''}`).join(', ')}), ` +
      `ours / node:http + fast-jwt ${ratio(result.ratios.oursOverNodeHttpFastJwt)} ` +
      `(rounds: ${result.ratios.perRound.oursOverNodeHttpFastJwt.map((v) => `${ratio(v.value)}${v.contended ? '*' : ''}`).join(', ')}).`,
    '',
    `Capacity from server CPU time per request (the throughput ratio if the server, not wrk, were the limit): ` +
      `ours vs bare uWebSockets.js ${ratio(result.ratios.capacityOursOverBareUws)}, ours vs node:http + fast-jwt ${ratio(result.ratios.capacityOursOverNodeHttpFastJwt)}` +
      (result.ratios.capacityOursOverOursAuthOff ? `, ours vs ours with auth off ${ratio(result.ratios.capacityOursOverOursAuthOff)}` : '') + '. ' +
      'When the server core is not near 100% busy, wrk (one thread on the other core) was the limit and the throughput ratios understate the gaps.',
    '',
    Object.values(result.servers).some((v) => v.contendedRuns > 0)
      ? `\\* other processes used over ${CONTENDED * 100}% of the machine during that run: its figures are suspect.`
      : `No run saw other processes use over ${CONTENDED * 100}% of the machine.`,
    '',
    table(['target', 'measured', 'needed', 'result'], targetRows(result.targets)),
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runEndToEnd();
  process.stdout.write(`${endToEndMarkdown(result)}\n`);
}
