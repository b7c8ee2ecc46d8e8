// Part 2: the built-in endpoints (no --upstream), like against like. Our server with auth
// on (a valid token) against a bare uWebSockets.js server with no auth answering the
// same requests with the same bytes:
//   POST /ext/info   one JSON-RPC call (info.getNetworkID), the body read, parsed, answered
//   GET /ext/health  a fixed body
// Each server is loaded in turn by wrk, for every connection count, with the placement of
// a one-thread gateway (lib/proc.js placement(1)).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, int, log, ms, pass, pct, ratio, table, usec } from '../lib/common.js';
import { newToken, startOurs } from '../lib/api-auth.js';
import { ensureCommands } from '../lib/apt.js';
import { load, median } from '../lib/measure.js';
import { placement, startServer } from '../lib/proc.js';
import { CONTENT_TYPE, INFO_PATH, INFO_REQUEST, PATH } from '../servers/body.js';

export const DEFAULTS = {
  connections: [64],
  durationS: 8,
  warmupS: 2,
  rounds: 1,
  waitQuietS: 10,
  retries: 1,
};

/** The two requests, each as wrk sends it. */
export const REQUESTS = [
  { id: 'post', label: `POST ${INFO_PATH} (JSON-RPC)`, path: INFO_PATH, method: 'POST', body: INFO_REQUEST, contentType: CONTENT_TYPE },
  { id: 'get', label: `GET ${PATH}`, path: PATH, method: 'GET' },
];

function servers() {
  return [
    {
      id: 'ours',
      name: 'api-auth, auth on, valid token',
      start: async (cpus) => {
        // One HTTP thread, like the bare server, whatever this build's default.
        const ours = await startOurs({ cpus, threads: 1 });
        const token = await newToken(ours.server.port, ours.password, [INFO_PATH, PATH]);
        return { server: ours.server, authorization: `Bearer ${token}`, cleanup: ours.cleanup };
      },
    },
    {
      id: 'bare',
      name: 'bare uWebSockets.js, no auth',
      start: async (cpus) => {
        const server = await startServer('bare uWS', process.execPath, [join(ROOT, 'bench', 'servers', 'bare-uws.js')], { cpus });
        return { server, authorization: null, cleanup: () => server.stop() };
      },
    },
  ];
}

async function send(port, request, authorization) {
  const headers = {};
  if (authorization) headers.authorization = authorization;
  if (request.contentType) headers['content-type'] = request.contentType;
  const res = await fetch(`http://127.0.0.1:${port}${request.path}`, { method: request.method, headers, body: request.body });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

export async function runBuiltin(options = {}) {
  const o = { ...DEFAULTS, ...options };
  ensureCommands(['wrk']);
  const where = placement(1);
  log(`part builtin: ${where.label}; wrk -c ${o.connections.join(',')} -d${o.durationS}s (warm-up ${o.warmupS}s)`);
  const list = servers();
  const runs = new Map();
  const answers = {};
  for (let round = 0; round < o.rounds; round++) {
    for (const s of list) {
      const started = await s.start(where.server);
      try {
        // The fairness check: both servers answer each request with the same status, type and bytes.
        for (const request of REQUESTS) {
          const a = await send(started.server.port, request, started.authorization);
          const seen = (answers[request.id] ??= a);
          if (a.status !== 200 || a.type !== CONTENT_TYPE || a.text !== seen.text) {
            throw new Error(
              `${s.name}: ${request.label} answered ${a.status} ${a.type} ${JSON.stringify(a.text)}; ` +
                `both servers must answer 200 ${CONTENT_TYPE} ${JSON.stringify(seen.text)}`,
            );
          }
        }
        for (const request of REQUESTS) {
          for (const connections of o.connections) {
            const shape = {
              url: `http://127.0.0.1:${started.server.port}${request.path}`,
              method: request.method,
              body: request.body,
              contentType: request.contentType,
              authorization: started.authorization ?? undefined,
              connections,
            };
            const r = await load(shape, { server: started.server.child.pid }, { ...o, placement: where });
            const k = `${request.id}|${connections}|${s.id}`;
            if (!runs.has(k)) runs.set(k, []);
            runs.get(k).push(r);
            log(
              `  ${s.name.padEnd(32)} ${request.label.padEnd(28)} c${String(connections).padEnd(4)} ${int(r.rps).padStart(8)} req/s  ` +
                `p50 ${ms(r.p50Ms)}  p99 ${ms(r.p99Ms)}  CPU ${usec(r.cpu.server?.usPerRequest)}/req`,
            );
          }
        }
      } finally {
        await started.cleanup();
      }
    }
  }
  const cells = [];
  for (const request of REQUESTS) {
    for (const connections of o.connections) {
      for (const s of list) {
        const all = runs.get(`${request.id}|${connections}|${s.id}`);
        const r = all.some((x) => !x.contended) ? all.filter((x) => !x.contended) : all;
        cells.push({
          request: request.id,
          label: request.label,
          connections,
          id: s.id,
          name: s.name,
          rps: median(r.map((x) => x.rps)),
          p50Ms: median(r.map((x) => x.p50Ms)),
          p99Ms: median(r.map((x) => x.p99Ms)),
          cpuUsPerRequest: median(r.map((x) => x.cpu.server?.usPerRequest)),
          serverBusy: median(r.map((x) => x.cpu.server?.busy)),
          loadBusy: median(r.map((x) => (x.cpu.wrk?.busy ?? 0) / (where.load?.length ?? 1))),
          errors: r.reduce((a, x) => a + x.errorCount, 0),
          contended: r.every((x) => x.contended),
          runs: all,
        });
      }
    }
  }
  const targets = {};
  for (const request of REQUESTS) {
    for (const connections of o.connections) {
      const ours = cells.find((c) => c.request === request.id && c.connections === connections && c.id === 'ours');
      const bare = cells.find((c) => c.request === request.id && c.connections === connections && c.id === 'bare');
      const value = ours.rps / bare.rps;
      targets[`built-in, ${request.label}, ${connections} connections: api-auth >= 0.85x bare uWebSockets.js`] = {
        value,
        ok: value >= 0.85,
        disturbed: ours.contended || bare.contended,
        measured: ratio(value),
        needed: '>= 0.85x',
      };
    }
  }
  const errors = cells.filter((c) => c.id === 'ours').reduce((a, c) => a + c.errors, 0);
  targets['built-in: no errors or non-2xx answers (api-auth)'] = { value: errors, ok: errors === 0, measured: String(errors), needed: '0' };
  return { settings: { ...o, placement: where }, answers, cells, targets };
}

export function builtinMarkdown(result) {
  const s = result.settings;
  const rows = result.cells.map((c) => {
    const bare = result.cells.find((b) => b.request === c.request && b.connections === c.connections && b.id === 'bare');
    return [
      c.label,
      c.connections,
      c.name,
      `${int(c.rps)}${c.contended ? '*' : ''}`,
      ms(c.p50Ms),
      ms(c.p99Ms),
      usec(c.cpuUsPerRequest),
      pct(c.serverBusy),
      pct(c.loadBusy),
      ratio(c.rps / bare.rps),
      c.errors,
    ];
  });
  return [
    '## Built-in endpoints (no --upstream): api-auth against a bare uWebSockets.js server answering the same requests',
    '',
    `wrk, HTTP/1.1 keep-alive, ${s.durationS} s per run after a ${s.warmupS} s warm-up; ${s.placement.label}; median of ${s.rounds} round(s). ` +
      `Both answer POST ${INFO_PATH} with ${JSON.stringify(result.answers.post?.text.trim())} and GET ${PATH} with ` +
      `${JSON.stringify(result.answers.get?.text.trim())}; the bare server reads, parses and answers the JSON-RPC call too.`,
    '',
    table(
      [
        'request',
        'connections',
        'server',
        'req/s',
        'p50',
        'p99',
        'CPU per request',
        'server CPU busy',
        'wrk CPU busy',
        'req/s vs bare',
        'errors',
      ],
      rows,
    ),
    ...(result.cells.some((c) => c.contended)
      ? ['', '\\* other processes used over 5% of the machine during every run of that cell: its figures are suspect.']
      : []),
    '',
    table(
      ['target', 'measured', 'needed', 'result'],
      Object.entries(result.targets).map(([k, t]) => [k, t.measured, t.needed, pass(t.ok, t.disturbed)]),
    ),
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runBuiltin();
  process.stdout.write(`${builtinMarkdown(result)}\n`);
}
