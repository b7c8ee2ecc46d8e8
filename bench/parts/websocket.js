// The WebSocket part: relayed messages per second and the latency a gateway adds, for
// sessions to the same upstream (a bare uWebSockets.js echo server) made three ways:
//   direct     straight to the upstream: the floor of latency, the ceiling of messages
//   api-auth   --api-auth-required --upstream, a valid token in the upgrade's Authorization
//   nginx      proxy_pass with the Upgrade headers, no auth at all
// The load (bench/lib/ws-load.js: `connections` sessions, each with one message in flight,
// sent again as soon as its echo is back) and the upstream share the load's cores; the
// gateway has its own, placed as in the gateway part (lib/proc.js placement()).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, int, log, ms, pass, pct, ratio, size, table, usec } from '../lib/common.js';
import { newToken, startOurs, wsLoadArgs } from '../lib/api-auth.js';
import { ensureCommands } from '../lib/apt.js';
import { TICKS_PER_SECOND, treeMeter } from '../lib/cpu.js';
import { foreignCpuWindow, waitForQuiet } from '../lib/quiet.js';
import { CONTENDED } from '../lib/measure.js';
import { pinned, placement, startServer, track } from '../lib/proc.js';
import { startNginxWsProxy } from '../servers/nginx.js';
import { WebSocket } from 'ws';

export const WS_PATH = '/ext/bc/C/ws';

export const DEFAULTS = {
  threads: [1],
  connections: [64],
  sizes: [100],
  depth: 1,
  durationS: 8,
  warmupS: 2,
  waitQuietS: 10,
};

function contenders() {
  return [
    {
      id: 'direct',
      name: 'direct to the upstream',
      start: async ({ upstreamPort }) => ({ port: upstreamPort, pid: null, headers: {}, refused: false, cleanup: async () => undefined }),
    },
    {
      id: 'apiAuth',
      name: 'api-auth --upstream, valid token',
      start: async ({ upstreamPort, threads, cpus }) => {
        const ours = await startOurs({ cpus, threads, upstream: `http://127.0.0.1:${upstreamPort}`, extraArgs: wsLoadArgs(1024) });
        const token = await newToken(ours.server.port, ours.password, [WS_PATH]);
        return {
          port: ours.server.port,
          pid: ours.server.child.pid,
          headers: { Authorization: `Bearer ${token}` },
          refused: true,
          cleanup: ours.cleanup,
        };
      },
    },
    {
      id: 'nginx',
      name: 'nginx proxy_pass Upgrade, no auth',
      start: async ({ upstreamPort, threads, cpus }) => {
        const server = await startNginxWsProxy({ upstreamPort, workers: threads, cpus });
        return { port: server.port, pid: server.child.pid, headers: {}, refused: false, cleanup: () => server.stop() };
      },
    },
  ];
}

/** One message there and back, and (for a gateway that checks tokens) a refusal without one: none is measured doing less than it claims. */
async function check(name, url, started) {
  const echoed = await new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers: started.headers, perMessageDeflate: false });
    socket.once('open', () => socket.send('ping through'));
    socket.once('message', (data, isBinary) => {
      socket.close();
      resolve(!isBinary && data.toString() === 'ping through');
    });
    socket.once('unexpected-response', (_req, res) => reject(new Error(`${name}: the upgrade got HTTP ${res.statusCode}`)));
    socket.once('error', reject);
  });
  if (!echoed) throw new Error(`${name}: the message did not come back unchanged`);
  if (!started.refused) return;
  const status = await new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { perMessageDeflate: false });
    socket.once('open', () => {
      socket.terminate();
      resolve(101);
    });
    socket.once('unexpected-response', (_req, res) => {
      socket.terminate();
      resolve(res.statusCode);
    });
    socket.on('error', () => undefined);
    socket.once('error', reject);
  });
  if (status !== 401) throw new Error(`${name}: an upgrade without a token got ${status}, not 401`);
}

/**
 * Runs the load process (lib/ws-load.js, pinned to `cpus`); meters the gateway's CPU over
 * the measured window only. `onMeasuring` is called when that window opens.
 */
export function runLoad(options, cpus, gatewayPid, onMeasuring = () => undefined) {
  const [cmd, argv] = pinned(cpus, process.execPath, [join(ROOT, 'bench', 'lib', 'ws-load.js'), JSON.stringify(options)]);
  const child = track(spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  let err = '';
  let meter = null;
  let window = null;
  let t0 = 0;
  child.stderr.on('data', (d) => {
    err += d;
  });
  child.stdout.on('data', (d) => {
    out += d;
    if (meter === null && out.includes('"measuring"')) {
      meter = gatewayPid == null ? undefined : treeMeter(gatewayPid);
      window = foreignCpuWindow();
      t0 = performance.now();
      onMeasuring();
    }
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      const wall = (performance.now() - t0) / 1000;
      const ticks = meter?.read();
      const foreign = window?.end();
      const line = out.split('\n').find((l) => l.includes('"perSecond"'));
      if (code !== 0 || line === undefined) return reject(new Error(`ws-load exited ${code}: ${err.slice(-2000)}`));
      const r = JSON.parse(line);
      const seconds = ticks == null ? null : ticks / TICKS_PER_SECOND;
      r.cpu = seconds == null ? null : { usPerMessage: (seconds * 1e6) / Math.max(1, r.messages), busy: seconds / wall };
      r.foreign = foreign;
      r.contended = foreign ? foreign.share > CONTENDED : null;
      resolve(r);
    });
  });
}

export async function runWebsocket(options = {}) {
  const o = { ...DEFAULTS, ...options };
  ensureCommands(['nginx']);
  const cells = [];
  const placements = {};
  for (const threads of o.threads) {
    const where = placement(threads);
    placements[threads] = where;
    log(
      `part ws: ${threads} thread(s); ${where.label}; ${o.connections.join(',')} sessions, ${o.depth} message(s) in flight each, ` +
        `${o.durationS}s (warm-up ${o.warmupS}s), messages of ${o.sizes.map(size).join(', ')}`,
    );
    const upstream = await startServer('ws-echo upstream', process.execPath, [join(ROOT, 'bench', 'servers', 'ws-echo.js')], {
      cpus: where.load,
    });
    try {
      for (const c of contenders()) {
        const started = await c.start({ upstreamPort: upstream.port, threads, cpus: where.server });
        try {
          const url = `ws://127.0.0.1:${started.port}${WS_PATH}`;
          await check(c.name, url, started);
          for (const bytes of o.sizes) {
            for (const connections of o.connections) {
              if (o.waitQuietS > 0) await waitForQuiet({ maxWaitS: o.waitQuietS });
              const r = await runLoad(
                { url, headers: started.headers, connections, depth: o.depth, bytes, durationS: o.durationS, warmupS: o.warmupS },
                where.load,
                started.pid,
              );
              cells.push({ threads, bytes, connections, id: c.id, name: c.name, ...r });
              log(
                `  ${c.name.padEnd(34)} ${String(threads).padStart(2)}t ${size(bytes).padStart(8)} c${String(connections).padEnd(4)} ` +
                  `${int(r.perSecond).padStart(8)} msg/s  p50 ${ms(r.p50Ms)}  p99 ${ms(r.p99Ms)}  CPU ${usec(r.cpu?.usPerMessage)}/msg`,
              );
            }
          }
        } finally {
          await started.cleanup();
        }
      }
    } finally {
      await upstream.stop();
    }
  }
  return { settings: { ...o, placements }, cells, targets: websocketTargets(o, cells) };
}

/** The targets of a run: api-auth's CPU per echo against nginx's, per cell; no failed session. */
export function websocketTargets(o, cells) {
  const errors = cells.reduce((a, c) => a + c.errors, 0);
  const targets = {};
  for (const threads of o.threads) {
    for (const bytes of o.sizes) {
      for (const connections of o.connections) {
        const here = cells.filter((c) => c.threads === threads && c.bytes === bytes && c.connections === connections);
        const ours = here.find((c) => c.id === 'apiAuth');
        const nginx = here.find((c) => c.id === 'nginx');
        if (!ours?.cpu || !nginx?.cpu) continue;
        // Per echo, not per second: with one message in flight per session neither gateway
        // is saturated, so what each spends on an echo is what tells them apart.
        const value = nginx.cpu.usPerMessage / ours.cpu.usPerMessage;
        targets[`websocket, ${threads} thread(s), ${size(bytes)}, ${connections} sessions: api-auth >= 1.0x nginx (CPU per echo)`] = {
          value,
          ok: value >= 1,
          disturbed: ours.contended || nginx.contended,
          measured: `${ratio(value)}; ${usec(ours.cpu.usPerMessage)} vs ${usec(nginx.cpu.usPerMessage)} per echo`,
          needed: '>= 1.00x',
        };
      }
    }
  }
  targets['websocket: no session failed during the runs'] = { value: errors, ok: errors === 0, measured: String(errors), needed: '0' };
  return targets;
}

export function websocketMarkdown(result) {
  const s = result.settings;
  const lines = [
    `## WebSocket: messages relayed through a gateway to the same echo upstream (${WS_PATH})`,
    '',
    `Sessions with ${s.depth} binary message(s) in flight each, sent again as soon as the echo is back; ${s.durationS} s measured ` +
      `after a ${s.warmupS} s warm-up. Latency: from send to echo, as the client saw it; added: over the direct connection's, ` +
      "in the same run. CPU per message: the gateway's whole process tree over the measured window, per echo counted " +
      '(each echo is two messages relayed).',
  ];
  for (const threads of s.threads) {
    const rows = [];
    for (const bytes of s.sizes) {
      for (const connections of s.connections) {
        const here = result.cells.filter((c) => c.threads === threads && c.bytes === bytes && c.connections === connections);
        const direct = here.find((c) => c.id === 'direct');
        const nginx = here.find((c) => c.id === 'nginx');
        for (const c of here) {
          rows.push([
            size(bytes),
            connections,
            c.name,
            `${int(c.perSecond)}${c.contended ? '*' : ''}`,
            ms(c.p50Ms),
            ms(c.p99Ms),
            c.id === 'direct' || !direct ? '-' : `+${ms(c.p50Ms - direct.p50Ms)}`,
            c.id === 'direct' || !direct ? '-' : `+${ms(c.p99Ms - direct.p99Ms)}`,
            usec(c.cpu?.usPerMessage),
            pct(c.cpu?.busy),
            nginx ? ratio(c.perSecond / nginx.perSecond) : 'n/a',
            nginx?.cpu && c.cpu ? ratio(c.cpu.usPerMessage / nginx.cpu.usPerMessage) : 'n/a',
            c.errors,
          ]);
        }
      }
    }
    lines.push(
      '',
      `${threads} gateway thread(s); ${s.placements[threads].label}.`,
      '',
      table(
        [
          'size',
          'sessions',
          'path',
          'echoes/s',
          'p50',
          'p99',
          'added p50',
          'added p99',
          'gateway CPU/echo',
          'gateway busy',
          'echoes/s vs nginx',
          'CPU/echo vs nginx',
          'errors',
        ],
        rows,
      ),
    );
  }
  if (result.cells.some((c) => c.contended)) lines.push('', '\\* other processes used more than 5% of the machine during the run.');
  lines.push(
    '',
    table(
      ['target', 'measured', 'needed', 'result'],
      Object.entries(result.targets).map(([k, t]) => [k, t.measured, t.needed, pass(t.ok, t.disturbed)]),
    ),
  );
  return lines.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runWebsocket();
  process.stdout.write(`${websocketMarkdown(result)}\n`);
}
