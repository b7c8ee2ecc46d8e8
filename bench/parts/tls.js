// Part tls: the gateway part's path with TLS terminated at the gateway, as operators
// deploy it at the edge. The same three gateways in front of the same upstream (Debian
// nginx answering a fixed JSON-RPC result), each serving HTTPS with one certificate made
// by openssl for this run (lib/certificate.js):
//   api-auth   --api-auth-required --upstream --http-tls-enabled, a valid token
//   HAProxy    bind ... ssl crt, jwt_verify of an HS256 JWT and its exp, 401 otherwise
//   nginx      listen ... ssl, proxy_pass with no auth at all: the ceiling
// loaded by wrk over https in two shapes: connections kept alive (the cost of TLS records
// on a request), and a new connection per request (`Connection: close`: the handshake's
// cost, what many short-lived dapp clients cost). One gateway thread, placed as the
// gateway part places it (lib/proc.js placement()).
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { int, log, ms, pass, pct, ratio, size, table, usec } from '../lib/common.js';
import { newToken, startOurs } from '../lib/api-auth.js';
import { ensureCommands } from '../lib/apt.js';
import { makeCertificate } from '../lib/certificate.js';
import { load, median } from '../lib/measure.js';
import { placement } from '../lib/proc.js';
import { exchange } from '../lib/tls-client.js';
import { hs256, startHaproxyJwt } from '../servers/haproxy.js';
import { startNginxProxy, startUpstream } from '../servers/nginx.js';
import { CONTENT_TYPE, RPC_PATH, RPC_REQUEST } from '../servers/rpc.js';

export const DEFAULTS = {
  connections: [64, 256],
  bytes: 100,
  durationS: 8,
  warmupS: 2,
  rounds: 1,
  waitQuietS: 10,
  retries: 1,
};

/** The load shapes: wrk's extra header lines for each. */
export const SHAPES = {
  keepAlive: { label: 'kept alive', heading: 'Connections kept alive', headers: [] },
  // wrk reconnects after an answer that carries Connection: close, and makes a new TLS
  // handshake on the new connection (resuming the session when the gateway gave a ticket).
  // A gateway that closes without saying so makes wrk send its next request on the closed
  // connection, count a read error and reconnect: still one handshake per request.
  close: { label: 'new connection per request', heading: 'A new connection per request', headers: ['Connection: close'] },
};

/** Below this many accepted connections per request in the close shape, wrk did not really reconnect. */
const RECONNECTED = 0.95;
const LIFETIME_S = 12 * 3600;

/** The gateways, serving HTTPS with `tls`: each starts itself in front of an upstream and says what Authorization to send. */
function gateways(jwtSecret, tls) {
  const now = Math.floor(Date.now() / 1000);
  return [
    {
      id: 'apiAuth',
      name: 'api-auth --upstream --http-tls-enabled, valid token',
      start: async ({ upstreamPort, cpus }) => {
        const ours = await startOurs({ cpus, threads: 1, tls, upstream: `http://127.0.0.1:${upstreamPort}` });
        const token = await newToken(ours.server.port, ours.password, [RPC_PATH], undefined, tls).catch(async (error) => {
          await ours.cleanup();
          throw error;
        });
        return {
          server: ours.server,
          authorization: `Bearer ${token}`,
          refused: { 'no token': null, 'forged token': `Bearer ${token.slice(0, 50)}${token[50] === 'A' ? 'B' : 'A'}${token.slice(51)}` },
          cleanup: ours.cleanup,
        };
      },
    },
    {
      id: 'haproxy',
      name: 'HAProxy bind ssl, jwt_verify HS256 + exp',
      start: async ({ upstreamPort, cpus }) => {
        const server = await startHaproxyJwt({ upstreamPort, secret: jwtSecret, threads: 1, cpus, tls });
        return {
          server,
          authorization: `Bearer ${hs256({ sub: 'bench', exp: now + LIFETIME_S }, jwtSecret)}`,
          refused: {
            'no token': null,
            'expired token': `Bearer ${hs256({ sub: 'bench', exp: now - 10 }, jwtSecret)}`,
            'token signed with another key': `Bearer ${hs256({ sub: 'bench', exp: now + LIFETIME_S }, `${jwtSecret}x`)}`,
          },
          cleanup: () => server.stop(),
        };
      },
    },
    {
      id: 'nginx',
      name: 'nginx listen ssl, proxy_pass, no auth',
      start: async ({ upstreamPort, cpus }) => {
        const server = await startNginxProxy({ upstreamPort, workers: 1, cpus, tls });
        return { server, authorization: null, refused: {}, cleanup: () => server.stop() };
      },
    },
  ];
}

/**
 * The fairness check over TLS, before any load: the upstream's answer byte for byte,
 * the refusals the gateway promises, and what the close shape depends on: whether the
 * gateway closes a connection whose request says `Connection: close` (and says so in its
 * answer, which is what makes wrk reconnect), and whether it resumes a session a client
 * offers (wrk offers the last one on each reconnection). Returns those facts.
 */
async function check(name, started, expected, tls) {
  const port = started.server.port;
  const post = (authorization, connection) =>
    exchange({
      port,
      ca: tls.ca,
      path: RPC_PATH,
      body: RPC_REQUEST,
      connection,
      headers: { 'Content-Type': CONTENT_TYPE, Authorization: authorization },
    });
  const passes = (r) => r.status === 200 && r.body.equals(expected) && r.headers['content-type'] === CONTENT_TYPE;
  const ok = await post(started.authorization, 'keep-alive');
  if (!passes(ok)) {
    throw new Error(
      `${name}: POST ${RPC_PATH} over TLS answered ${ok.status} ${ok.headers['content-type']} (${ok.body.length} bytes); ` +
        `every gateway must pass on the upstream's 200 ${CONTENT_TYPE} of ${expected.length} bytes unchanged`,
    );
  }
  for (const [label, authorization] of Object.entries(started.refused)) {
    const r = await post(authorization, 'keep-alive');
    if (r.status !== 401) throw new Error(`${name}: a request over TLS with ${label} got ${r.status}, not 401`);
  }
  const closing = await post(started.authorization, 'close');
  if (!passes(closing))
    throw new Error(`${name}: POST ${RPC_PATH} with Connection: close answered ${closing.status}, not the upstream's answer`);
  const saysClose = /(^|,)\s*close\s*(,|$)/i.test(closing.headers.connection ?? '');
  const again = closing.session
    ? await exchange({
        port,
        ca: tls.ca,
        session: closing.session,
        path: RPC_PATH,
        body: RPC_REQUEST,
        connection: 'close',
        headers: { 'Content-Type': CONTENT_TYPE, Authorization: started.authorization },
      })
    : null;
  return {
    protocol: ok.protocol,
    cipher: ok.cipher,
    closes: closing.closed,
    saysClose,
    closeAnswer: `${closing.closed ? 'closed the connection' : 'kept the connection open'}, answer ${saysClose ? 'with' : 'without'} Connection: close`,
    resumes: again?.reused ?? false,
  };
}

const key = (shape, connections, id) => `${shape}|${connections}|${id}`;

export async function runTls(options = {}) {
  const o = { ...DEFAULTS, ...options };
  ensureCommands(['wrk', 'nginx', 'haproxy']);
  const where = placement(1);
  const tls = makeCertificate();
  const jwtSecret = randomBytes(32).toString('base64url');
  const list = gateways(jwtSecret, tls);
  const runs = new Map();
  const facts = {};
  log(
    `part tls: 1 thread; ${where.label}; certificate ${tls.description}; wrk over https -c ${o.connections.join(',')} -d${o.durationS}s ` +
      `(warm-up ${o.warmupS}s), POST ${RPC_PATH}, answers of ${size(o.bytes)}, connections ${Object.values(SHAPES)
        .map((s) => s.label)
        .join(' and ')}`,
  );
  try {
    const upstream = await startUpstream({ bytes: o.bytes, workers: where.load?.length ?? 1, cpus: where.load });
    try {
      for (let round = 0; round < o.rounds; round++) {
        for (const g of list) {
          const started = await g.start({ upstreamPort: upstream.port, cpus: where.server });
          try {
            const f = await check(g.name, started, upstream.body, tls);
            facts[g.id] = f;
            if (round === 0)
              log(`  ${g.name}: ${f.protocol} ${f.cipher}; Connection: close ${f.closeAnswer}; sessions ${f.resumes ? '' : 'not '}resumed`);
            for (const [shapeId, shape] of Object.entries(SHAPES)) {
              // A gateway that keeps the connection would be measured kept alive under the close shape's name.
              if (shapeId === 'close' && !f.closes) continue;
              for (const connections of o.connections) {
                const load_ = {
                  url: `https://127.0.0.1:${started.server.port}${RPC_PATH}`,
                  method: 'POST',
                  body: RPC_REQUEST,
                  contentType: CONTENT_TYPE,
                  authorization: started.authorization ?? undefined,
                  headers: shape.headers,
                  connections,
                };
                const r = await load(load_, { server: started.server.child.pid, upstream: upstream.child.pid }, { ...o, placement: where });
                const k = key(shapeId, connections, g.id);
                if (!runs.has(k)) runs.set(k, []);
                runs.get(k).push(r);
                log(
                  `  ${g.name.padEnd(52)} ${shape.label.padEnd(26)} c${String(connections).padEnd(4)} ${int(r.rps).padStart(8)} req/s  ` +
                    `p50 ${ms(r.p50Ms)}  p99 ${ms(r.p99Ms)}  CPU ${usec(r.cpu.server?.usPerRequest)}/req  ${r.connectionsPerRequest?.toFixed(2) ?? 'n/a'} connections/req`,
                );
              }
            }
          } finally {
            await started.cleanup();
          }
        }
      }
    } finally {
      await upstream.stop();
    }
  } finally {
    tls.cleanup();
  }
  // Runs other processes disturbed are left out of a cell's medians when it has undisturbed ones.
  const cells = [];
  for (const shape of Object.keys(SHAPES)) {
    for (const connections of o.connections) {
      for (const g of list) {
        const all = runs.get(key(shape, connections, g.id));
        if (!all) continue;
        const r = all.some((x) => !x.contended) ? all.filter((x) => !x.contended) : all;
        const loadCores = where.load?.length ?? 1;
        // wrk's read errors when the gateway closed without saying so: counted apart (see SHAPES.close).
        const unannounced = (x) => (shape === 'close' && !facts[g.id].saysClose ? x.errors.read : 0);
        cells.push({
          shape,
          connections,
          id: g.id,
          name: g.name,
          rps: median(r.map((x) => x.rps)),
          p50Ms: median(r.map((x) => x.p50Ms)),
          p99Ms: median(r.map((x) => x.p99Ms)),
          cpuUsPerRequest: median(r.map((x) => x.cpu.server?.usPerRequest)),
          serverBusy: median(r.map((x) => x.cpu.server?.busy)),
          loadBusy: median(r.map((x) => ((x.cpu.wrk?.busy ?? 0) + (x.cpu.upstream?.busy ?? 0)) / loadCores)),
          connectionsPerRequest: median(r.map((x) => x.connectionsPerRequest)),
          errors: r.reduce((a, x) => a + x.errorCount - unannounced(x), 0),
          unannouncedCloses: r.reduce((a, x) => a + unannounced(x), 0),
          contended: r.every((x) => x.contended),
          runs: all,
        });
      }
    }
  }
  const gatewaysFacts = list.map((g) => ({ id: g.id, name: g.name, ...facts[g.id] }));
  return {
    settings: { ...o, placement: where, certificate: tls.description, shapes: SHAPES },
    gateways: gatewaysFacts,
    cells,
    targets: targets(o, cells, gatewaysFacts),
  };
}

function targets(o, cells, gatewaysFacts) {
  const find = (shape, connections, id) => cells.find((c) => c.shape === shape && c.connections === connections && c.id === id);
  const out = {};
  for (const [shape, { label }] of Object.entries(SHAPES)) {
    for (const connections of o.connections) {
      const name = `tls, ${label}, ${connections} connections: api-auth >= 1.0x HAProxy req/s, p99 no worse`;
      const ours = find(shape, connections, 'apiAuth');
      const hap = find(shape, connections, 'haproxy');
      if (!ours || !hap) {
        out[name] = {
          value: null,
          ok: false,
          measured: `not measured (${ours ? 'HAProxy' : 'api-auth'} did not close on Connection: close)`,
          needed: '>= 1.00x, p99 <=',
        };
        continue;
      }
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
  // RFC 9112 9.6: a server MUST close after answering a request with the close option, and SHOULD say so in that answer.
  const keeping = gatewaysFacts.filter((g) => !g.closes || !g.saysClose);
  out['tls: every gateway closes a connection whose request says Connection: close, and says so in its answer'] = {
    value: keeping.length,
    ok: keeping.length === 0,
    measured: keeping.length === 0 ? 'all do' : keeping.map((g) => `${g.name}: ${g.closeAnswer}`).join('; '),
    needed: 'closed, answer with Connection: close',
  };
  const stayed = cells.filter((c) => c.shape === 'close' && c.connectionsPerRequest != null && c.connectionsPerRequest < RECONNECTED);
  out['tls, new connection per request: wrk reconnected for every request'] = {
    value: stayed.length,
    ok: cells.some((c) => c.shape === 'close') ? stayed.length === 0 : null,
    measured:
      stayed.length === 0
        ? 'yes'
        : stayed.map((c) => `${c.name} c${c.connections}: ${c.connectionsPerRequest.toFixed(2)} connections/request`).join('; '),
    needed: `>= ${RECONNECTED} accepted connections per request`,
  };
  const errors = cells.reduce((a, c) => a + c.errors, 0);
  out['tls: no errors or non-2xx answers'] = { value: errors, ok: errors === 0, measured: String(errors), needed: '0' };
  return out;
}

export function tlsMarkdown(result) {
  const s = result.settings;
  const lines = [
    `## TLS at the gateway: POST ${RPC_PATH} over HTTPS through a gateway to the same nginx upstream`,
    '',
    `Each gateway terminates TLS with the same certificate (${s.certificate}, made by openssl for this run) and one thread; ` +
      `${s.placement.label}. Answers of ${size(s.bytes)}. wrk over https, ${s.durationS} s per run after a ${s.warmupS} s warm-up, ` +
      `median of ${s.rounds} round(s); connections kept alive, then a new connection per request (wrk with ` +
      '`-H "Connection: close"`: a TCP connection and a TLS handshake per request; wrk offers its last session on each new ' +
      "connection). p50/p99 run from the request's first byte to its answer: a handshake before it is not in them. " +
      "CPU per request: the gateway's whole process tree, user + system, over the requests wrk counted. Connections per " +
      'request: TCP connections the machine accepted during the run (/proc/net/snmp PassiveOpens) over the requests.',
    '',
    table(
      ['gateway', 'TLS', 'Connection: close', 'session offered again'],
      result.gateways.map((g) => [g.name, `${g.protocol} ${g.cipher}`, g.closeAnswer, g.resumes ? 'resumed' : 'full handshake']),
    ),
  ];
  for (const [shape, { heading }] of Object.entries(SHAPES)) {
    const rows = [];
    for (const connections of s.connections) {
      const here = result.cells.filter((c) => c.shape === shape && c.connections === connections);
      const hap = here.find((c) => c.id === 'haproxy');
      for (const c of here) {
        rows.push([
          connections,
          c.name,
          `${int(c.rps)}${c.contended ? '*' : ''}`,
          ms(c.p50Ms),
          ms(c.p99Ms),
          usec(c.cpuUsPerRequest),
          pct(c.serverBusy),
          pct(c.loadBusy),
          c.connectionsPerRequest?.toFixed(2) ?? 'n/a',
          hap ? ratio(c.rps / hap.rps) : 'n/a',
          c.unannouncedCloses > 0
            ? `${c.errors} (and ${int(c.unannouncedCloses)} read errors: closed without Connection: close)`
            : c.errors,
        ]);
      }
      for (const g of result.gateways.filter((x) => shape === 'close' && !x.closes)) {
        rows.push([connections, g.name, `not measured: ${g.closeAnswer}`, '', '', '', '', '', '', '', '']);
      }
    }
    lines.push(
      '',
      `### ${heading}`,
      '',
      table(
        [
          'connections',
          'gateway',
          'req/s',
          'p50',
          'p99',
          'CPU per request',
          'gateway CPU busy',
          'load CPU busy',
          'connections per request',
          'req/s vs HAProxy',
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

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runTls();
  process.stdout.write(`${tlsMarkdown(result)}\n`);
}
