// Part 1, the headline: the deployed path, a gateway in front of a node. Three gateways
// in front of the same upstream (Debian nginx answering a fixed JSON-RPC result of the
// chosen size):
//   api-auth   --api-auth-required --upstream, a valid token from auth.newToken
//   HAProxy    jwt_verify of an HS256 JWT and its exp against date(), 401 otherwise
//   nginx      proxy_pass with no auth at all: the ceiling
// and, for the `scope` part only, api-auth with a token limited to some JSON-RPC methods:
// its body is read whole and its call checked before it is forwarded, where
// a token without methods is streamed; for the `access` part only, api-auth with
// --access-log: a line per request, written to a file.
// Each is loaded in turn by wrk POSTing one JSON-RPC call, for every thread count,
// response size and connection count asked for, with the same placement: the gateway on
// its own cores, wrk and the upstream on the others (lib/proc.js placement()).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { int, log, ms, pass, pct, ratio, size, table, usec } from '../lib/common.js';
import { startOurs, newToken, supportsHttpThreads } from '../lib/api-auth.js';
import { ensureCommands } from '../lib/apt.js';
import { HEADROOM, SATURATED, limitOf, load, median } from '../lib/measure.js';
import { freePort, placement, startOnPort } from '../lib/proc.js';
import { hs256, startHaproxyJwt } from '../servers/haproxy.js';
import { startNginxProxy, startUpstream } from '../servers/nginx.js';
import { CONTENT_TYPE, RPC_PATH, RPC_REQUEST } from '../servers/rpc.js';

export const DEFAULTS = {
  /** The gateways measured, by id (the `scope` part measures apiAuth and apiAuthScoped, the `access` part apiAuth and apiAuthLogged). */
  gateways: ['apiAuth', 'apiAuthPipelined', 'relay', 'relayPipelined', 'haproxy', 'nginx'],
  threads: [1],
  connections: [64],
  sizes: [100],
  durationS: 8,
  warmupS: 2,
  rounds: 1,
  waitQuietS: 10,
  retries: 1,
};

const LIFETIME_S = 12 * 3600;
/** Requests on one upstream connection at once for the pipelined rows. */
const PIPELINING = 4;
/** The bare relay probe, in ../shared beside the checkout. */
const RELAY = fileURLToPath(new URL('../../../shared/probes/relay.mjs', import.meta.url));
/** The scoped token's methods: a read-only dapp's, as an operator would grant them; the bench's call (eth_blockNumber) matches a prefix. */
export const SCOPED_METHODS = ['eth_chainId', 'eth_call', 'eth_get*', 'eth_blockNumber', 'net_version', 'web3_clientVersion'];
/** A call outside SCOPED_METHODS, which the scoped gateway must refuse with 403 before any load. */
const OUTSIDE_SCOPE = JSON.stringify({ jsonrpc: '2.0', method: 'eth_sendRawTransaction', params: ['0x00'], id: 1 });
export const UNSUPPORTED = 'not supported by this build (its --help has no --http-threads)';

/** The gateways: each starts itself in front of an upstream and says what Authorization to send. */
function gateways(jwtSecret) {
  const now = Math.floor(Date.now() / 1000);
  return [
    {
      id: 'apiAuth',
      name: 'api-auth --upstream, valid token',
      start: async ({ upstreamPort, threads, cpus }) => {
        const ours = await startOurs({ cpus, threads, upstream: `http://127.0.0.1:${upstreamPort}` });
        const token = await newToken(ours.server.port, ours.password, [RPC_PATH]);
        return {
          server: ours.server,
          authorization: `Bearer ${token}`,
          // A token of the right shape whose tag is wrong must be refused.
          refused: { 'no token': null, 'forged token': `Bearer ${token.slice(0, 50)}${token[50] === 'A' ? 'B' : 'A'}${token.slice(51)}` },
          cleanup: ours.cleanup,
        };
      },
    },
    {
      id: 'apiAuthScoped',
      name: 'api-auth --upstream, token with methods',
      start: async ({ upstreamPort, threads, cpus }) => {
        const ours = await startOurs({ cpus, threads, upstream: `http://127.0.0.1:${upstreamPort}` });
        const token = await newToken(ours.server.port, ours.password, [RPC_PATH], SCOPED_METHODS);
        return {
          server: ours.server,
          authorization: `Bearer ${token}`,
          refused: { 'no token': null },
          outsideScope: OUTSIDE_SCOPE,
          cleanup: ours.cleanup,
        };
      },
    },
    {
      id: 'apiAuthLogged',
      name: 'api-auth --upstream, --access-log',
      start: async ({ upstreamPort, threads, cpus }) => {
        const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-log-'));
        const accessLog = join(dir, 'access.log');
        const ours = await startOurs({
          cpus,
          threads,
          upstream: `http://127.0.0.1:${upstreamPort}`,
          extraArgs: ['--access-log', accessLog],
        });
        const token = await newToken(ours.server.port, ours.password, [RPC_PATH]);
        return {
          server: ours.server,
          authorization: `Bearer ${token}`,
          refused: { 'no token': null },
          accessLog,
          cleanup: async () => {
            await ours.cleanup();
            rmSync(dir, { recursive: true, force: true });
          },
        };
      },
    },
    {
      id: 'apiAuthPipelined',
      name: 'api-auth --upstream, pipelining 4',
      start: async ({ upstreamPort, threads, cpus }) => {
        const ours = await startOurs({
          cpus,
          threads,
          upstream: `http://127.0.0.1:${upstreamPort}`,
          extraArgs: ['--upstream-pipelining', String(PIPELINING)],
        });
        const token = await newToken(ours.server.port, ours.password, [RPC_PATH]);
        return { server: ours.server, authorization: `Bearer ${token}`, refused: { 'no token': null }, cleanup: ours.cleanup };
      },
    },
    relay('relay', 'bare relay (probe), no auth', 1, 64),
    relay('relayPipelined', 'bare relay (probe), 4 deep on 16', PIPELINING, 16),
    {
      id: 'haproxy',
      name: 'HAProxy jwt_verify HS256 + exp',
      start: async ({ upstreamPort, threads, cpus }) => {
        const server = await startHaproxyJwt({ upstreamPort, secret: jwtSecret, threads, cpus });
        const valid = hs256({ sub: 'bench', exp: now + LIFETIME_S }, jwtSecret);
        return {
          server,
          authorization: `Bearer ${valid}`,
          refused: {
            'no token': null,
            'expired token': `Bearer ${hs256({ sub: 'bench', exp: now - 10 }, jwtSecret)}`,
            'token signed with another key': `Bearer ${hs256({ sub: 'bench', exp: now + LIFETIME_S }, `${jwtSecret}x`)}`,
            'token without exp': `Bearer ${hs256({ sub: 'bench' }, jwtSecret)}`,
          },
          cleanup: () => server.stop(),
        };
      },
    },
    {
      id: 'nginx',
      name: 'nginx proxy_pass, no auth',
      start: async ({ upstreamPort, threads, cpus }) => {
        const server = await startNginxProxy({ upstreamPort, workers: threads, cpus });
        return { server, authorization: null, refused: {}, cleanup: () => server.stop() };
      },
    },
  ];
}

/**
 * The bare relay of ../shared/probes/relay.mjs (beside the checkout), the platform's
 * ceiling for the gateway's path: uWebSockets.js in front, a node:net pool behind, no
 * checks. `depth` requests at once on each of `connections` upstream connections.
 */
function relay(id, name, depth, connections) {
  return {
    id,
    name,
    start: async ({ upstreamPort, cpus }) => {
      const port = await freePort();
      const server = await startOnPort(
        name,
        process.execPath,
        [RELAY, String(port), String(upstreamPort), String(depth), String(connections)],
        port,
        {
          cpus,
        },
      );
      // It answers anything that carries an Authorization header.
      return { server, authorization: 'Bearer relay', refused: { 'no token': null }, cleanup: () => server.stop() };
    },
  };
}

async function post(port, authorization, body = RPC_REQUEST) {
  const headers = { 'content-type': CONTENT_TYPE };
  if (authorization) headers.authorization = authorization;
  const res = await fetch(`http://127.0.0.1:${port}${RPC_PATH}`, { method: 'POST', headers, body });
  return { status: res.status, type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()) };
}

/**
 * The fairness check, before any load: the gateway passes the upstream's answer through
 * byte for byte, and (for the two that check tokens) refuses what its promise says it
 * refuses, so that neither is measured doing less than it claims.
 */
async function check(name, started, expected) {
  const ok = await post(started.server.port, started.authorization);
  if (ok.status !== 200 || !ok.body.equals(expected) || ok.type !== CONTENT_TYPE) {
    throw new Error(
      `${name}: POST ${RPC_PATH} answered ${ok.status} ${ok.type} (${ok.body.length} bytes); ` +
        `every gateway must pass on the upstream's 200 ${CONTENT_TYPE} of ${expected.length} bytes unchanged`,
    );
  }
  for (const [label, authorization] of Object.entries(started.refused)) {
    const r = await post(started.server.port, authorization);
    if (r.status !== 401) throw new Error(`${name}: a request with ${label} got ${r.status}, not 401`);
  }
  if (started.outsideScope !== undefined) {
    const r = await post(started.server.port, started.authorization, started.outsideScope);
    if (r.status !== 403) throw new Error(`${name}: a call outside the token's methods got ${r.status}, not 403`);
  }
  if (started.accessLog !== undefined) await checkAccessLog(name, started.accessLog, 1 + Object.keys(started.refused).length);
}

/** The access log holds a whole JSON line for each of the check's requests (auth.newToken's too), within its flush interval. */
async function checkAccessLog(name, file, requests) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const lines = existsSync(file)
      ? readFileSync(file, 'utf8')
          .split('\n')
          .filter((line) => line !== '')
      : [];
    const rpc = lines.map((line) => JSON.parse(line)).filter((line) => line.path === RPC_PATH);
    if (rpc.length >= requests) return;
    if (Date.now() > deadline) throw new Error(`${name}: the access log holds ${rpc.length} lines for ${RPC_PATH}, not ${requests}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const key = (c) => `${c.threads}|${c.bytes}|${c.connections}|${c.id}`;

export async function runGateway(options = {}) {
  const o = { ...DEFAULTS, ...options };
  ensureCommands(['wrk', 'nginx', ...(o.gateways.includes('haproxy') ? ['haproxy'] : [])]);
  const jwtSecret = randomBytes(32).toString('base64url');
  const all = gateways(jwtSecret);
  const unknown = o.gateways.filter((id) => !all.some((g) => g.id === id));
  if (unknown.length > 0) throw new Error(`--gateways: ${unknown.join(', ')}: no such gateway (${all.map((g) => g.id).join(', ')})`);
  const list = all.filter((g) => o.gateways.includes(g.id));
  const runs = new Map();
  const unsupported = [];
  const placements = {};
  for (const threads of o.threads) {
    const where = placement(threads);
    placements[threads] = where;
    log(
      `part gateway: ${threads} thread(s); ${where.label}; wrk -c ${o.connections.join(',')} -d${o.durationS}s (warm-up ${o.warmupS}s), ` +
        `POST ${RPC_PATH}, answers of ${o.sizes.map(size).join(', ')}`,
    );
    const contenders = list.filter((g) => {
      if (g.id.startsWith('relay') && (threads !== 1 || !existsSync(RELAY))) {
        const reason = threads !== 1 ? 'the bare relay runs on one thread' : `the bare relay probe is not at ${RELAY}`;
        unsupported.push({ threads, id: g.id, name: g.name, reason });
        log(`  ${g.name}, ${threads} threads: ${reason}`);
        return false;
      }
      if (!g.id.startsWith('apiAuth') || threads === 1 || supportsHttpThreads()) return true;
      unsupported.push({ threads, id: g.id, name: g.name, reason: UNSUPPORTED });
      log(`  ${g.name}, ${threads} threads: ${UNSUPPORTED}`);
      return false;
    });
    for (const bytes of o.sizes) {
      const upstream = await startUpstream({ bytes, workers: where.load?.length ?? 1, cpus: where.load });
      try {
        for (let round = 0; round < o.rounds; round++) {
          for (const g of contenders) {
            const started = await g.start({ upstreamPort: upstream.port, threads, cpus: where.server });
            try {
              await check(g.name, started, upstream.body);
              for (const connections of o.connections) {
                const shape = {
                  url: `http://127.0.0.1:${started.server.port}${RPC_PATH}`,
                  method: 'POST',
                  body: RPC_REQUEST,
                  contentType: CONTENT_TYPE,
                  authorization: started.authorization ?? undefined,
                  connections,
                };
                const r = await load(shape, { server: started.server.child.pid, upstream: upstream.child.pid }, { ...o, placement: where });
                const k = key({ threads, bytes, connections, id: g.id });
                if (!runs.has(k)) runs.set(k, []);
                runs.get(k).push(r);
                log(
                  `  ${g.name.padEnd(34)} ${String(threads).padStart(2)}t ${size(bytes).padStart(8)} c${String(connections).padEnd(4)} ` +
                    `${int(r.rps).padStart(8)} req/s  p50 ${ms(r.p50Ms)}  p99 ${ms(r.p99Ms)}  CPU ${usec(r.cpu.server?.usPerRequest)}/req`,
                );
              }
            } finally {
              await started.cleanup();
            }
          }
        }
      } finally {
        await upstream.stop();
      }
    }
  }
  // Runs other processes disturbed are left out of a cell's medians when it has undisturbed ones.
  const cells = [];
  for (const threads of o.threads) {
    for (const bytes of o.sizes) {
      for (const connections of o.connections) {
        for (const g of list) {
          const all = runs.get(key({ threads, bytes, connections, id: g.id }));
          if (!all) continue;
          const r = all.some((x) => !x.contended) ? all.filter((x) => !x.contended) : all;
          const loadCores = placements[threads].load?.length ?? 1;
          cells.push({
            threads,
            bytes,
            connections,
            id: g.id,
            name: g.name,
            rps: median(r.map((x) => x.rps)),
            p50Ms: median(r.map((x) => x.p50Ms)),
            p99Ms: median(r.map((x) => x.p99Ms)),
            cpuUsPerRequest: median(r.map((x) => x.cpu.server?.usPerRequest)),
            serverBusy: median(r.map((x) => x.cpu.server?.busy)),
            upstreamCpuUsPerRequest: median(r.map((x) => x.cpu.upstream?.usPerRequest)),
            // wrk and the upstream together, as a share of the load's cores (processes only).
            loadBusy: median(r.map((x) => ((x.cpu.wrk?.busy ?? 0) + (x.cpu.upstream?.busy ?? 0)) / loadCores)),
            // The gateway's cores and the load's, interrupts included (lib/measure.js withCpu),
            // and what limited the cell: only a gateway that was the limit has a ratio.
            serverCores: median(r.map((x) => x.cores?.server)),
            loadCores: median(r.map((x) => x.cores?.load)),
            limit: limitOf(
              { server: median(r.map((x) => x.cores?.server)), load: median(r.map((x) => x.cores?.load)) },
              placements[threads],
            ),
            errors: r.reduce((a, x) => a + x.errorCount, 0),
            contended: r.every((x) => x.contended),
            runs: all,
          });
        }
      }
    }
  }
  return { settings: { ...o, placements }, cells, unsupported, targets: gatewayTargets(o, cells, unsupported, placements) };
}

/** How a cell's limit reads in the report: only a gateway that was the limit has a ratio. */
const LIMITS = {
  server: 'gateway-bound',
  load: 'load-bound',
  shared: 'n/a: shared cores',
  unpinned: 'n/a: not pinned',
};

function limitFigures(c) {
  return `gateway cores ${pct(c.serverCores)}, load cores ${pct(c.loadCores)}`;
}

/** A ratio of `c` to `base` (req/s and CPU per request), or why there is none. */
function against(c, base) {
  if (!base) return ['n/a', 'n/a'];
  const unbound = [c, base].find((x) => x.limit !== 'server');
  if (unbound) {
    const why = unbound === c ? LIMITS[c.limit] : `${LIMITS[base.limit]} (${base.id === 'haproxy' ? 'HAProxy' : 'the base'})`;
    return [why, why];
  }
  return [ratio(c.rps / base.rps), ratio(c.cpuUsPerRequest / base.cpuUsPerRequest)];
}

/** The targets of a run, from its cells: a ratio only between cells whose gateway was the limit. */
/** The api-auth variants each compared with apiAuth (a token without methods, no access log) in the same run. */
const VARIANTS = [
  { id: 'apiAuthScoped', title: 'a token with methods against one without', with: 'with methods', without: 'without methods' },
  { id: 'apiAuthLogged', title: '--access-log on against off', with: 'access log on', without: 'access log off' },
];

export function gatewayTargets(o, cells, unsupported, placements) {
  const find = (threads, bytes, connections, id) =>
    cells.find((c) => c.threads === threads && c.bytes === bytes && c.connections === connections && c.id === id);
  const out = {};
  for (const bytes of o.sizes) {
    for (const connections of o.connections) {
      const where = `${size(bytes)}, ${connections} connections`;
      const ours = find(1, bytes, connections, 'apiAuth');
      const hap = find(1, bytes, connections, 'haproxy');
      for (const threads of o.threads) {
        for (const variant of VARIANTS) {
          const plain = find(threads, bytes, connections, 'apiAuth');
          const other = find(threads, bytes, connections, variant.id);
          if (!plain || !other) continue;
          // No product target: reported so that the variant's cost is seen, run by run.
          const name = `gateway, ${threads} thread(s), ${where}: ${variant.title}, req/s`;
          const cpu = `CPU ${usec(other.cpuUsPerRequest)} vs ${usec(plain.cpuUsPerRequest)}/req`;
          const unbound = [other, plain].filter((c) => c.limit !== 'server');
          if (unbound.length > 0) {
            out[name] = {
              value: null,
              ok: null,
              disturbed: plain.contended || other.contended,
              measured: `n/a: ${unbound.map((c) => `${c.id === 'apiAuth' ? variant.without : variant.with} ${LIMITS[c.limit]} (${limitFigures(c)})`).join('; ')}; ${cpu}`,
              needed: 'reported',
            };
            continue;
          }
          const value = other.rps / plain.rps;
          out[name] = {
            value,
            ok: null,
            disturbed: plain.contended || other.contended,
            measured: `${ratio(value)}; p99 ${ms(other.p99Ms)} vs ${ms(plain.p99Ms)}; ${cpu}`,
            needed: 'reported',
          };
        }
      }
      if (ours && hap) {
        const name = `gateway, 1 thread, ${where}: api-auth >= 1.0x HAProxy req/s, p99 no worse`;
        const unbound = [ours, hap].filter((c) => c.limit !== 'server');
        if (unbound.length > 0) {
          out[name] = {
            value: null,
            ok: null,
            disturbed: ours.contended || hap.contended,
            measured:
              `n/a: ${unbound.map((c) => `${c.id === 'haproxy' ? 'HAProxy' : 'api-auth'} ${LIMITS[c.limit]} (${limitFigures(c)})`).join('; ')}; ` +
              `CPU ${usec(ours.cpuUsPerRequest)} vs ${usec(hap.cpuUsPerRequest)}/req`,
            needed: '>= 1.00x, p99 <=',
          };
        } else {
          const value = ours.rps / hap.rps;
          out[name] = {
            value,
            ok: value >= 1 && ours.p99Ms <= hap.p99Ms,
            disturbed: ours.contended || hap.contended,
            measured: `${ratio(value)}; p99 ${ms(ours.p99Ms)} vs ${ms(hap.p99Ms)}; CPU ${usec(ours.cpuUsPerRequest)} vs ${usec(hap.cpuUsPerRequest)}/req`,
            needed: '>= 1.00x, p99 <=',
          };
        }
      }
      // Issue-level targets of the wire-speed round: CPU per request against HAProxy's, with
      // and without pipelining, and the plain gateway against the bare relay (the platform's ceiling).
      const pairs = [
        [
          'apiAuth',
          'haproxy',
          'api-auth CPU per request <= HAProxy, p99 no worse',
          (a, b) => a.cpuUsPerRequest <= b.cpuUsPerRequest && a.p99Ms <= b.p99Ms,
          '<= 1.00x CPU, p99 <=',
        ],
        [
          'apiAuthPipelined',
          'haproxy',
          'api-auth pipelining 4 CPU per request <= HAProxy, p99 no worse',
          (a, b) => a.cpuUsPerRequest <= b.cpuUsPerRequest && a.p99Ms <= b.p99Ms,
          '<= 1.00x CPU, p99 <=',
        ],
        [
          'apiAuth',
          'relay',
          'api-auth within 5% of the bare relay (CPU per request)',
          (a, b) => a.cpuUsPerRequest <= 1.05 * b.cpuUsPerRequest,
          '<= 1.05x CPU',
        ],
      ];
      for (const [id, baseId, title, passes, needed] of pairs) {
        const a = find(1, bytes, connections, id);
        const b = find(1, bytes, connections, baseId);
        if (!a || !b) continue;
        const name = `gateway, 1 thread, ${where}: ${title}`;
        const cpu = `CPU ${usec(a.cpuUsPerRequest)} vs ${usec(b.cpuUsPerRequest)}/req (${ratio(a.cpuUsPerRequest / b.cpuUsPerRequest)})`;
        const unbound = [a, b].filter((c) => c.limit !== 'server');
        out[name] =
          unbound.length > 0
            ? {
                value: null,
                ok: null,
                disturbed: a.contended || b.contended,
                measured: `n/a: ${unbound.map((c) => `${c.id} ${LIMITS[c.limit]} (${limitFigures(c)})`).join('; ')}; ${cpu}`,
                needed,
              }
            : {
                value: a.cpuUsPerRequest / b.cpuUsPerRequest,
                ok: passes(a, b),
                disturbed: a.contended || b.contended,
                measured: `${cpu}; p99 ${ms(a.p99Ms)} vs ${ms(b.p99Ms)}`,
                needed,
              };
      }
      for (const threads of o.threads) {
        if (threads === 1) continue;
        const name = `gateway, ${threads} threads, ${where}: api-auth >= ${(0.8 * threads).toFixed(1)}x its 1-thread req/s`;
        const one = find(1, bytes, connections, 'apiAuth');
        const n = find(threads, bytes, connections, 'apiAuth');
        if (unsupported.some((u) => u.threads === threads && u.id === 'apiAuth')) {
          out[name] = { value: null, ok: false, measured: 'not supported by this build', needed: `>= ${(0.8 * threads).toFixed(1)}x` };
        } else if (!one || !n) {
          out[name] = {
            value: null,
            ok: null,
            measured: 'n/a (1 thread not measured in this run)',
            needed: `>= ${(0.8 * threads).toFixed(1)}x`,
          };
        } else if (placements[threads].shared) {
          const value = n.rps / one.rps;
          out[name] = {
            value,
            ok: null,
            measured: `${ratio(value)}, n/a: the gateway shared cores with the load on this machine`,
            needed: `>= ${(0.8 * threads).toFixed(1)}x`,
          };
        } else {
          const value = n.rps / one.rps;
          out[name] = {
            value,
            ok: value >= 0.8 * threads,
            disturbed: n.contended || one.contended,
            measured: ratio(value),
            needed: `>= ${(0.8 * threads).toFixed(1)}x`,
          };
        }
      }
    }
  }
  const errors = cells.reduce((a, c) => a + c.errors, 0);
  out['gateway: no errors or non-2xx answers'] = { value: errors, ok: errors === 0, measured: String(errors), needed: '0' };
  return out;
}

export function gatewayMarkdown(result) {
  const s = result.settings;
  const lines = [
    `## Gateway: POST ${RPC_PATH} (one JSON-RPC call) through a gateway to the same nginx upstream`,
    '',
    `wrk, HTTP/1.1 keep-alive, ${s.durationS} s per run after a ${s.warmupS} s warm-up, one wrk thread per load CPU; ` +
      `median of ${s.rounds} round(s). CPU per request: the gateway's whole process tree (every thread and worker), ` +
      "user + system time from /proc over the run, divided by the requests wrk counted. Cores busy: the gateway's processes, " +
      "or wrk's and the upstream's, plus the interrupt time of their cores (loopback TCP), as a share of those cores. " +
      `Limit: gateway-bound when the gateway's cores were at least ${pct(SATURATED)} busy and the load's at most ${pct(HEADROOM)}; ` +
      'otherwise load-bound, and the row has no ratio: its req/s say more about wrk and the upstream than about the gateway.',
  ];
  for (const threads of s.threads) {
    const rows = [];
    for (const bytes of s.sizes) {
      for (const connections of s.connections) {
        const here = result.cells.filter((c) => c.threads === threads && c.bytes === bytes && c.connections === connections);
        const hap = here.find((c) => c.id === 'haproxy');
        const plain = here.find((c) => c.id === 'apiAuth');
        for (const c of here) {
          rows.push([
            size(bytes),
            connections,
            c.name,
            `${int(c.rps)}${c.contended ? '*' : ''}`,
            ms(c.p50Ms),
            ms(c.p99Ms),
            usec(c.cpuUsPerRequest),
            pct(c.serverCores),
            pct(c.loadCores),
            LIMITS[c.limit],
            ...against(c, hap ?? plain),
            c.errors,
          ]);
        }
        for (const u of result.unsupported.filter((x) => x.threads === threads)) {
          rows.push([size(bytes), connections, u.name, u.reason, '', '', '', '', '', '', '', '', '']);
        }
      }
    }
    const base = s.gateways.includes('haproxy')
      ? 'HAProxy'
      : s.gateways.includes('apiAuthLogged')
        ? 'api-auth, access log off'
        : 'api-auth, token without methods';
    lines.push(
      '',
      `### ${threads} thread${threads > 1 ? 's' : ''} (api-auth --http-threads ${threads}, HAProxy nbthread ${threads}, nginx worker_processes ${threads}); ${s.placements[threads].label}`,
      '',
      table(
        [
          'answer',
          'connections',
          'gateway',
          'req/s',
          'p50',
          'p99',
          'CPU per request',
          'gateway cores busy',
          'load cores busy',
          'limit',
          `req/s vs ${base}`,
          `CPU per request vs ${base}`,
          'errors',
        ],
        rows,
      ),
    );
  }
  if (result.cells.some((c) => c.contended))
    lines.push('', '\\* other processes used over 5% of the machine during every run of that cell: its figures are suspect.');
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
  const result = await runGateway();
  process.stdout.write(`${gatewayMarkdown(result)}\n`);
}
