// Part 4: the gateway while other clients flood POST /ext/auth with wrong passwords.
// api-auth in front of the nginx upstream, placed like a one-thread gateway: first the
// unflooded figure of the proxied POST, then the same load with a second wrk flooding
// auth.newToken with a wrong password from its own connections (both wrk on the load's
// CPUs), then the flood alone, to price one refused guess.
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { int, log, ms, pass, pct, ratio, size, table, usec } from '../lib/common.js';
import { authCall, newToken, startOurs } from '../lib/api-auth.js';
import { ensureCommands } from '../lib/apt.js';
import { load, measureQuietly, withCpu } from '../lib/measure.js';
import { placement } from '../lib/proc.js';
import { runWrk } from '../lib/wrk.js';
import { startUpstream } from '../servers/nginx.js';
import { CONTENT_TYPE, RPC_PATH, RPC_REQUEST } from '../servers/rpc.js';

export const DEFAULTS = {
  connections: 64,
  bytes: 100,
  durationS: 8,
  warmupS: 2,
  waitQuietS: 10,
  retries: 1,
  floodConnections: 16,
  // The flood starts this long before the measured run, so it is in full swing.
  floodLeadS: 2,
};

export async function runFlood(options = {}) {
  const o = { ...DEFAULTS, ...options };
  ensureCommands(['wrk', 'nginx']);
  const where = placement(1);
  const m = { ...o, placement: where };
  log(
    `part flood: ${o.floodConnections} connections of wrong-password auth.newToken, while wrk -c${o.connections} POSTs ${RPC_PATH} through api-auth; ${where.label}`,
  );
  const upstream = await startUpstream({ bytes: o.bytes, workers: where.load?.length ?? 1, cpus: where.load });
  const ours = await startOurs({ cpus: where.server, threads: 1, upstream: `http://127.0.0.1:${upstream.port}` }).catch(async (error) => {
    await upstream.stop();
    throw error;
  });
  try {
    const { port } = ours.server;
    const authorization = `Bearer ${await newToken(port, ours.password, [RPC_PATH])}`;
    const pids = { server: ours.server.child.pid, upstream: upstream.child.pid };
    const shape = {
      url: `http://127.0.0.1:${port}${RPC_PATH}`,
      method: 'POST',
      body: RPC_REQUEST,
      contentType: CONTENT_TYPE,
      authorization,
      connections: o.connections,
    };
    const cpus = where.load;
    const threads = Math.min(o.connections, cpus?.length ?? 1);

    const wrong = `wrong-${randomBytes(12).toString('base64url')}`;
    const floodBody = JSON.stringify({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: wrong, endpoints: ['*'] }, id: 1 });
    const probe = await authCall(port, 'auth.newToken', { password: wrong, endpoints: ['*'] });
    if (probe.body?.result) throw new Error('a wrong password got a token');
    const floodAnswer = probe.body?.error
      ? `HTTP ${probe.status} ${probe.body.error.code} ${probe.body.error.message}`
      : `HTTP ${probe.status} ${JSON.stringify(probe.body)}`;
    const flood = (durationS) =>
      runWrk({
        url: `http://127.0.0.1:${port}/ext/auth`,
        threads: 1,
        connections: o.floodConnections,
        durationS,
        cpus,
        timeoutS: 10,
        method: 'POST',
        body: floodBody,
        contentType: CONTENT_TYPE,
      });

    const unflooded = await load(shape, pids, m);
    log(`  unflooded   ${int(unflooded.rps).padStart(9)} req/s  p50 ${ms(unflooded.p50Ms)}  p99 ${ms(unflooded.p99Ms)}`);

    let attempts = 0;
    let floodRun = null;
    const flooded = await measureQuietly(o, () =>
      withCpu(pids, async () => {
        // Before a repeat, let the server work off what the last flood left queued.
        if (attempts++ > 0) await new Promise((r) => setTimeout(r, 3000));
        const running = flood(o.floodLeadS + o.durationS + 1);
        await new Promise((r) => setTimeout(r, o.floodLeadS * 1000));
        const run = await runWrk({ ...shape, threads, cpus, durationS: o.durationS });
        floodRun = await running;
        return run;
      }),
    );
    log(
      `  flooded     ${int(flooded.rps).padStart(9)} req/s  p50 ${ms(flooded.p50Ms)}  p99 ${ms(flooded.p99Ms)}  ` +
        `(flood answered ${int(floodRun.rps)}/s, ${floodRun.errorCount} flood errors)`,
    );

    // What one throttled guess costs the server: the flood alone, no other load, once the
    // last flood's held-back answers are out.
    await new Promise((r) => setTimeout(r, 2000));
    const floodAlone = await measureQuietly({ ...o, retries: 0 }, () => withCpu({ server: pids.server }, () => flood(4)));
    log(
      `  flood alone ${int(floodAlone.rps).padStart(9)} guesses/s answered, server ${usec(floodAlone.cpu.server?.usPerRequest)} CPU per guess, ` +
        `server CPU ${pct(floodAlone.cpu.server?.busy)} busy`,
    );

    // A correct-password call right after the flood, from the same (loopback) address as
    // the flood: with per-address throttling it is expected to wait too.
    const after = await authCall(port, 'auth.newToken', { password: ours.password, endpoints: [RPC_PATH] });
    const afterAnswer = after.body?.result?.token
      ? `HTTP ${after.status}, a token`
      : `HTTP ${after.status} ${after.body?.error?.code} ${after.body?.error?.message}`;

    const throughputRatio = flooded.rps / unflooded.rps;
    const targets = {
      'flood: gateway p99 < 10 ms while /ext/auth is flooded': {
        value: flooded.p99Ms,
        ok: flooded.p99Ms < 10,
        disturbed: Boolean(flooded.contended),
        measured: ms(flooded.p99Ms),
        needed: '< 10 ms',
      },
      'flood: gateway req/s >= 0.7x unflooded': {
        value: throughputRatio,
        ok: throughputRatio >= 0.7,
        disturbed: Boolean(flooded.contended || unflooded.contended),
        measured: ratio(throughputRatio),
        needed: '>= 0.70x',
      },
      'flood: no errors on the gateway path': {
        value: flooded.errorCount,
        ok: flooded.errorCount === 0,
        measured: String(flooded.errorCount),
        needed: '0',
      },
    };
    return {
      settings: { ...o, placement: where },
      unflooded,
      flooded,
      flood: { ...floodRun, answer: floodAnswer, body: floodBody.replace(wrong, '<wrong password>') },
      floodAlone,
      correctPasswordAfterFlood: afterAnswer,
      ratios: { floodedOverUnflooded: throughputRatio },
      targets,
    };
  } finally {
    await ours.cleanup();
    await upstream.stop();
  }
}

export function floodMarkdown(result) {
  const s = result.settings;
  const row = (name, r) => [
    name,
    `${int(r.rps)}${r.contended ? '*' : ''}`,
    ms(r.p50Ms),
    ms(r.p99Ms),
    ms(r.p999Ms),
    ms(r.maxMs),
    r.errorCount,
    usec(r.cpu.server?.usPerRequest),
    pct(r.cpu.server?.busy),
  ];
  return [
    `## Flood: POST ${RPC_PATH} through api-auth (answers of ${size(s.bytes)}, wrk -c${s.connections}) while ${s.floodConnections} connections post wrong-password auth.newToken`,
    '',
    `${s.placement.label}; both wrk on the load's CPUs. CPU per request counts all the server's work in the window (the flood's included).`,
    '',
    table(
      ['run', 'req/s', 'p50', 'p99', 'p99.9', 'max', 'errors', 'server CPU per request', 'server CPU busy'],
      [row('api-auth gateway, unflooded', result.unflooded), row('api-auth gateway, flooded', result.flooded)],
    ),
    ...(result.unflooded.contended || result.flooded.contended
      ? ['', '\\* other processes used over 5% of the machine during that run: its figures are suspect.']
      : []),
    '',
    `Flood: ${int(result.flood.rps)} wrong-password requests answered per second ` +
      `(${result.flood.requests} in ${result.flood.seconds.toFixed(1)} s; wrk errors ${JSON.stringify(result.flood.errors)}); ` +
      `p50 ${ms(result.flood.p50Ms)}, p99 ${ms(result.flood.p99Ms)}. First wrong-password answer: ${result.flood.answer}. ` +
      `A correct-password auth.newToken right after the flood, from the same address: ${result.correctPasswordAfterFlood}.`,
    '',
    `The flood alone (4 s, no other load): ${int(result.floodAlone.rps)} guesses answered per second, server CPU ${pct(result.floodAlone.cpu.server?.busy)} busy` +
      (result.floodAlone.cpu.server?.busy > 0.2 ? `, ${usec(result.floodAlone.cpu.server.usPerRequest)} of server CPU per guess.` : '.'),
    '',
    table(
      ['target', 'measured', 'needed', 'result'],
      Object.entries(result.targets).map(([k, t]) => [k, t.measured, t.needed, pass(t.ok, t.disturbed)]),
    ),
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runFlood();
  process.stdout.write(`${floodMarkdown(result)}\n`);
}
