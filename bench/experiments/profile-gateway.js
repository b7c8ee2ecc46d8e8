// Experiment, not part of `npm run bench`: where a gateway's CPU goes, under the bench's
// own load, so that the profiles the README cites can be made again. The gateway, api-auth
// (--api-auth-required --upstream, one HTTP thread, a valid token) or, to compare, nginx
// (the bench's no-auth proxy, one worker), is placed as in the gateway part (lib/proc.js
// placement(): the gateway on its core, the load and the upstream on the others) and
// loaded one of two ways:
//   --load http   wrk POSTing one JSON-RPC call through it to the gateway part's nginx
//                 upstream (servers/nginx.js startUpstream), as the gateway part does
//   --load ws     WebSocket sessions through it to the ws part's echo upstream
//                 (servers/ws-echo.js), each with one binary message in flight (lib/ws-load.js)
// and profiled one of two ways:
//   --tool perf      `perf record -g` of the gateway's processes over the measured window,
//                    node started with --perf-basic-prof so JavaScript frames have names:
//                    self time by module (node, libc, the kernel, uWebSockets.js, JIT code)
//                    and by symbol
//   --tool syscalls  `perf trace -s` of the gateway's processes over the measured window:
//                    system calls by name, per request or echo
//   --tool cpu-prof  node --cpu-prof on every thread of api-auth (only), over its whole life
//                    (the start is a few hundred ms of several seconds): self time by
//                    JavaScript function and by where the function's file is
// Everything lands in bench/experiments/results/<time>-<load>-<tool>/ (gitignored): the
// raw profile, perf's reports, and summary.md with the run's figures (throughput, CPU
// per request or echo, how busy the gateway's core was) and the top of the profile.
//   node bench/experiments/profile-gateway.js --load ws --bytes 10000 --connections 16 --tool perf
//   node bench/experiments/profile-gateway.js --help
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT, int, log, ms, pct, size, table, usec } from '../lib/common.js';
import { newToken, startOurs, wsLoadArgs } from '../lib/api-auth.js';
import { ensureCommands } from '../lib/apt.js';
import { descendants, snapshot } from '../lib/cpu.js';
import { withCpu } from '../lib/measure.js';
import { placement, startServer, stopChild, track } from '../lib/proc.js';
import { runWrk } from '../lib/wrk.js';
import { startNginxProxy, startNginxWsProxy, startUpstream } from '../servers/nginx.js';
import { CONTENT_TYPE, RPC_PATH, RPC_REQUEST } from '../servers/rpc.js';
import { WS_PATH, runLoad } from '../parts/websocket.js';

const USAGE = `Usage: node bench/experiments/profile-gateway.js [flags]   (after npm run build)
  --gateway api-auth|nginx  what is profiled (default api-auth; nginx: its no-auth proxy, perf only)
  --load http|ws        what goes through the gateway (default http)
  --tool perf|syscalls|cpu-prof  the profiler (default perf)
  --bytes N             the upstream's answer (http) or the message (ws), in bytes (default 100)
  --connections N       wrk connections (http) or sessions (ws) (default 64 for http, 16 for ws)
  --pipelining N        api-auth's --upstream-pipelining (default 1)
  --seconds N           the profiled window, after a warm-up of 2 s (default 10)
  --top N               symbols or functions listed in summary.md (default 30)
  --help                print this help and exit
Output: bench/experiments/results/<time>-<load>-<tool>/ (summary.md, the raw profile, reports).
`;

function usage(message) {
  process.stderr.write(`profile-gateway: ${message}\n${USAGE}`);
  process.exit(2);
}

let flags;
try {
  ({ values: flags } = parseArgs({
    options: {
      gateway: { type: 'string', default: 'api-auth' },
      load: { type: 'string', default: 'http' },
      tool: { type: 'string', default: 'perf' },
      bytes: { type: 'string', default: '100' },
      connections: { type: 'string' },
      seconds: { type: 'string', default: '10' },
      pipelining: { type: 'string', default: '1' },
      top: { type: 'string', default: '30' },
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
const whole = (flag, value, min) =>
  /^\d+$/.test(value) && Number(value) >= min
    ? Number(value)
    : usage(`--${flag}: ${JSON.stringify(value)} is not a whole number of at least ${min}`);
if (!['http', 'ws'].includes(flags.load)) usage(`--load: ${JSON.stringify(flags.load)} is not http or ws`);
if (!['perf', 'syscalls', 'cpu-prof'].includes(flags.tool))
  usage(`--tool: ${JSON.stringify(flags.tool)} is not perf, syscalls or cpu-prof`);
if (!['api-auth', 'nginx'].includes(flags.gateway)) usage(`--gateway: ${JSON.stringify(flags.gateway)} is not api-auth or nginx`);
if (flags.gateway === 'nginx' && flags.tool === 'cpu-prof')
  usage('--gateway nginx: --tool cpu-prof profiles node only; use perf or syscalls');
const o = {
  gateway: flags.gateway,
  load: flags.load,
  tool: flags.tool,
  bytes: whole('bytes', flags.bytes, flags.load === 'ws' ? 8 : 39),
  connections: whole('connections', flags.connections ?? (flags.load === 'ws' ? '16' : '64'), 1),
  seconds: whole('seconds', flags.seconds, 1),
  pipelining: whole('pipelining', flags.pipelining, 1),
  top: whole('top', flags.top, 1),
};
const WARMUP_S = 2;

ensureCommands(['nginx', ...(o.load === 'http' ? ['wrk'] : []), ...(o.tool === 'cpu-prof' ? [] : ['perf'])]);
const where = placement(1);
const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
const out = join(ROOT, 'bench', 'experiments', 'results', `${stamp}-${o.gateway}-${o.load}-${o.bytes}B-c${o.connections}-${o.tool}`);
mkdirSync(out, { recursive: true });
const cpuProfDir = join(out, 'cpuprofile');
const nodeFlags = {
  // Names for JIT code in /tmp/perf-<pid>.map, and interpreted frames as frames of their own.
  perf: ['--perf-basic-prof-only-functions', '--interpreted-frames-native-stack'],
  syscalls: [],
  'cpu-prof': ['--cpu-prof', '--cpu-prof-dir', cpuProfDir],
}[o.tool];
const PERF_FILE = { perf: 'perf.data', syscalls: 'perf-trace.txt' };

/** perf record (or perf trace) of the process tree under `pid` until stopped (nginx's master and worker). */
function perfRecord(pid) {
  const pids = [...descendants(snapshot(), pid)].join(',');
  const args = o.tool === 'perf' ? ['record', '-F', '999', '-g', '-p', pids] : ['trace', '-s', '-p', pids];
  const file = join(out, PERF_FILE[o.tool]);
  const child = track(spawn('perf', [...args, '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] }));
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, err })));
  return {
    // perf writes its file on SIGINT, as on Ctrl-C.
    stop: async () => {
      child.kill('SIGINT');
      const r = await exited;
      if (!existsSync(file)) throw new Error(`perf ${args[0]} wrote nothing (exit ${r.code}, ${r.signal}): ${r.err.trim()}`);
    },
  };
}

function perfReport(sort, file) {
  const r = spawnSync(
    'perf',
    ['report', '-i', join(out, 'perf.data'), '--no-children', '--sort', sort, '--stdio', '--percent-limit', '0.3'],
    { encoding: 'utf8', maxBuffer: 256 * 1048576 },
  );
  if (r.status !== 0) throw new Error(`perf report failed: ${r.stderr}`);
  writeFileSync(join(out, file), r.stdout);
  // perf's lines: "    12.34%  dso  [.] symbol" (the call chains under them are indented further).
  return r.stdout
    .split('\n')
    .filter((l) => /^\s+\d+\.\d+%/.test(l))
    .map((l) => {
      const m = /^\s+(\d+\.\d+)%\s+(.*)$/.exec(l);
      return [m[2].replace(/\s+/g, ' ').trim(), `${m[1]}%`];
    });
}

/** perf trace's summary, summed over threads: calls of each system call per unit of work. */
function syscalls(per) {
  const counts = new Map();
  // Its lines: "   recvfrom   123456   0   1.234 ..." under a header per thread.
  for (const line of readFileSync(join(out, PERF_FILE.syscalls), 'utf8').split('\n')) {
    const m = /^\s+([a-z_0-9]+)\s+(\d+)\s+\d+\s+\d/.exec(line);
    if (m) counts.set(m[1], (counts.get(m[1]) ?? 0) + Number(m[2]));
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([name, n]) => [name, (n / Math.max(1, per)).toFixed(2)]);
}

/** Self time by function and by file kind, over every thread's .cpuprofile. */
function cpuProfSummary() {
  const self = new Map();
  const kinds = new Map();
  let total = 0;
  const kind = (url, name) => {
    if (!url) return name.startsWith('(') ? name : '(native: node and V8 built-ins)';
    if (url.startsWith('wasm://')) return 'wasm (the core)';
    if (url.includes('/node_modules/ws/')) return 'ws';
    if (url.includes('/node_modules/undici/')) return 'undici';
    if (url.includes('/node_modules/')) return url.replace(/^.*\/node_modules\/((@[^/]+\/)?[^/]+).*$/, '$1');
    if (url.startsWith('node:')) return url.replace(/^node:internal\/([^/]+).*$/, 'node:internal/$1');
    if (url.includes('/build/host/')) return `api-auth ${url.replace(/^.*\/build\/host\//, '')}`;
    return url.replace(/^.*\//, '');
  };
  for (const file of readdirSync(cpuProfDir).filter((f) => f.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(cpuProfDir, file), 'utf8'));
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    for (let k = 0; k < profile.samples.length; k++) {
      const f = byId.get(profile.samples[k]).callFrame;
      const us = profile.timeDeltas[k] ?? 0;
      // (idle) is the thread waiting in its event loop: not CPU.
      if (f.functionName === '(idle)') continue;
      const name = `${f.functionName || '(anonymous)'} ${f.url ? `${f.url.replace(/^.*\//, '')}:${f.lineNumber + 1}` : ''}`.trim();
      self.set(name, (self.get(name) ?? 0) + us);
      const k2 = kind(f.url, f.functionName);
      kinds.set(k2, (kinds.get(k2) ?? 0) + us);
      total += us;
    }
  }
  const rows = (map, n) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, us]) => [name, `${((us / total) * 100).toFixed(1)}%`]);
  return { functions: rows(self, o.top), kinds: rows(kinds, 20) };
}

const upstream =
  o.load === 'http'
    ? await startUpstream({ bytes: o.bytes, workers: where.load?.length ?? 1, cpus: where.load })
    : await startServer('ws-echo upstream', process.execPath, [join(ROOT, 'bench', 'servers', 'ws-echo.js')], { cpus: where.load });
let figures;
let profiled;
/** Requests or echoes counted over the measured window. */
let units;
try {
  const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
  const gateway =
    o.gateway === 'api-auth'
      ? await startOurs({
          cpus: where.server,
          threads: 1,
          upstream: upstreamUrl,
          nodeFlags,
          extraArgs: [...wsLoadArgs(1024), '--upstream-pipelining', String(o.pipelining)],
        })
      : {
          server: await (o.load === 'http' ? startNginxProxy : startNginxWsProxy)({
            upstreamPort: upstream.port,
            workers: 1,
            cpus: where.server,
          }),
        };
  gateway.cleanup ??= () => gateway.server.stop();
  const pid = gateway.server.child.pid;
  const port = gateway.server.port;
  /** The Authorization api-auth needs for `path`; nginx checks nothing. */
  const authorization = async (path) => (o.gateway === 'api-auth' ? `Bearer ${await newToken(port, gateway.password, [path])}` : undefined);
  let perf = null;
  try {
    log(
      `profile-gateway: ${o.gateway}, ${o.load}, ${size(o.bytes)}, ${o.connections} ${o.load === 'ws' ? 'sessions' : 'connections'}, ${o.seconds} s, ${o.tool}; ${where.label}`,
    );
    if (o.load === 'http') {
      const shape = {
        url: `http://127.0.0.1:${port}${RPC_PATH}`,
        method: 'POST',
        body: RPC_REQUEST,
        contentType: CONTENT_TYPE,
        authorization: await authorization(RPC_PATH),
        connections: o.connections,
        cpus: where.load,
        threads: where.load?.length ?? 1,
      };
      await runWrk({ ...shape, durationS: WARMUP_S });
      if (o.tool !== 'cpu-prof') perf = perfRecord(pid);
      const r = await withCpu({ server: pid, upstream: upstream.child.pid }, () => runWrk({ ...shape, durationS: o.seconds }), where);
      await perf?.stop();
      units = r.requests;
      figures = [
        ['requests/s', int(r.rps)],
        ['p50', ms(r.p50Ms)],
        ['p99', ms(r.p99Ms)],
        [`${o.gateway} CPU per request`, usec(r.cpu.server?.usPerRequest)],
        [`${o.gateway} core busy (interrupts included)`, pct(r.cores?.server)],
        ['load core busy', pct(r.cores?.load)],
        ['wrk errors', JSON.stringify(r.errors)],
      ];
    } else {
      const auth = await authorization(WS_PATH);
      const load = {
        url: `ws://127.0.0.1:${port}${WS_PATH}`,
        headers: auth ? { Authorization: auth } : {},
        connections: o.connections,
        depth: 1,
        bytes: o.bytes,
        durationS: o.seconds,
        warmupS: WARMUP_S,
      };
      const r = await runLoad(load, where.load, pid, () => {
        if (o.tool !== 'cpu-prof') perf = perfRecord(pid);
      });
      await perf?.stop();
      units = r.messages;
      figures = [
        ['echoes/s', int(r.perSecond)],
        ['p50', ms(r.p50Ms)],
        ['p99', ms(r.p99Ms)],
        [`${o.gateway} CPU per echo`, usec(r.cpu?.usPerMessage)],
        [`${o.gateway} busy (processes only)`, pct(r.cpu?.busy)],
        ['session errors', String(r.errors)],
      ];
    }
  } finally {
    // --cpu-prof writes each thread's profile as it exits: a clean stop, not a kill.
    await gateway.cleanup();
  }
  if (o.tool === 'perf') {
    const byModule = perfReport('dso', 'perf-by-module.txt');
    const bySymbol = perfReport('dso,sym', 'perf-by-symbol.txt');
    rmSync(`/tmp/perf-${pid}.map`, { force: true });
    profiled = [
      '## Self time by module (perf)',
      '',
      table(['module', 'share of samples'], byModule.slice(0, 15)),
      '',
      '## Self time by symbol (perf)',
      '',
      table(['module and symbol', 'share of samples'], bySymbol.slice(0, o.top)),
    ];
  } else if (o.tool === 'syscalls') {
    profiled = [
      `## System calls per ${o.load === 'ws' ? 'echo' : 'request'} (perf trace -s, every thread)`,
      '',
      table(['system call', 'calls'], syscalls(units)),
    ];
  } else {
    const { functions, kinds } = cpuProfSummary();
    profiled = [
      '## Self time by where the code is (node --cpu-prof, every thread, idle left out)',
      '',
      table(['code', 'share'], kinds),
      '',
      '## Self time by function',
      '',
      table(['function', 'share'], functions),
    ];
  }
} finally {
  await (upstream.stop?.() ?? stopChild(upstream.child));
}

const git = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
const dirty =
  spawnSync('git', ['status', '--porcelain', '--', '.', ':(exclude)bench/experiments/results'], {
    cwd: ROOT,
    encoding: 'utf8',
  }).stdout.trim() !== '';
const summary = [
  `# ${o.gateway} profile: ${o.load === 'http' ? `POST ${RPC_PATH}` : `WebSocket echo at ${WS_PATH}`}, ${size(o.bytes)}, ${o.connections} ${o.load === 'ws' ? 'sessions' : 'connections'}`,
  '',
  `Commit ${git}${dirty ? ' with uncommitted changes' : ''}; ${new Date().toISOString()}; ${where.label}; ${o.seconds} s after a ${WARMUP_S} s warm-up; ` +
    `\`node bench/experiments/profile-gateway.js --gateway ${o.gateway} --load ${o.load} --tool ${o.tool} --bytes ${o.bytes} --connections ${o.connections} --seconds ${o.seconds}\`. ` +
    'The profiler itself costs CPU: compare figures between profiles, and take throughput from the bench.',
  '',
  table(['figure', 'value'], figures),
  '',
  ...profiled,
].join('\n');
writeFileSync(join(out, 'summary.md'), `${summary}\n`);
process.stdout.write(`${summary}\n\n(written to ${relative(ROOT, out)}/)\n`);
