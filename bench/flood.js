// Part 3: the protected endpoint while other clients flood POST /ext/auth with wrong
// passwords. One server (ours, auth on, pinned like in part 2): first the unflooded
// figure, then the same load with a second wrk flooding auth.newToken with a wrong
// password from its own connections. Both wrk processes share the client CPU.
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { log, ms, int, ratio, table } from './lib/common.js';
import { ensureWrk, runWrk } from './lib/wrk.js';
import { DEFAULTS as E2E, authCall, checkResponse, load, measureQuietly, newToken, pct, startOurs, targetRows, usec, withCpu } from './end-to-end.js';

export const DEFAULTS = {
  ...E2E,
  rounds: 1,
  floodConnections: 16,
  floodThreads: 1,
  // The flood starts this long before the measured run, so it is in full swing.
  floodLeadS: 2,
};

export async function runFlood(options = {}) {
  const o = { ...DEFAULTS, ...options };
  ensureWrk();
  log(`part 3: flood (${o.floodConnections} connections of wrong-password auth.newToken, while wrk -t${o.threads} -c${o.connections} loads GET /ext/health)`);
  const ours = await startOurs({ cpu: o.serverCpu });
  try {
    const { port } = ours.server;
    const token = await newToken(port, ours.password);
    const authorization = `Bearer ${token}`;
    await checkResponse('api-auth', port, authorization);

    const wrong = `wrong-${randomBytes(12).toString('base64url')}`;
    const floodBody = JSON.stringify({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: wrong, endpoints: ['*'] }, id: 1 });
    const probe = await authCall(port, 'auth.newToken', { password: wrong, endpoints: ['*'] });
    const floodAnswer = probe.body?.error ? `HTTP ${probe.status} ${probe.body.error.code} ${probe.body.error.message}` : `HTTP ${probe.status} ${JSON.stringify(probe.body)}`;
    if (probe.body?.result) throw new Error('a wrong password got a token');

    const unflooded = await load(ours.server, authorization, o);
    log(`  unflooded   ${int(unflooded.rps).padStart(9)} req/s  p50 ${ms(unflooded.p50Ms)}  p99 ${ms(unflooded.p99Ms)}`);

    let flood = null;
    let attempts = 0;
    const flooded = await measureQuietly(o, () => withCpu(ours.server, async () => {
      // Before a repeat, let the server work off what the last flood left queued.
      if (attempts++ > 0) await new Promise((r) => setTimeout(r, 3000));
      const floodRun = runWrk({
        url: `http://127.0.0.1:${port}/ext/auth`,
        threads: o.floodThreads,
        connections: o.floodConnections,
        durationS: o.floodLeadS + o.durationS + 1,
        cpu: o.clientCpu,
        timeoutS: 10,
        method: 'POST',
        body: floodBody,
        contentType: 'application/json',
      });
      await new Promise((r) => setTimeout(r, o.floodLeadS * 1000));
      const run = await runWrk({
        url: `http://127.0.0.1:${port}/ext/health`, threads: o.threads, connections: o.connections, durationS: o.durationS, cpu: o.clientCpu, authorization,
      });
      run.flood = await floodRun;
      return run;
    }));
    flood = flooded.flood;
    delete flooded.flood;
    flooded.rssBytes = ours.server.rssBytes();
    log(`  flooded     ${int(flooded.rps).padStart(9)} req/s  p50 ${ms(flooded.p50Ms)}  p99 ${ms(flooded.p99Ms)}  ` +
      `(flood answered ${int(flood.rps)}/s, ${flood.errorCount} flood errors)`);

    // What one throttled guess costs the server: the flood alone, no other load.
    await new Promise((r) => setTimeout(r, 2000));
    const floodAlone = await measureQuietly({ ...o, retries: 1 }, () => withCpu(ours.server, () => runWrk({
      url: `http://127.0.0.1:${port}/ext/auth`, threads: o.floodThreads, connections: o.floodConnections, durationS: 4,
      cpu: o.clientCpu, timeoutS: 10, method: 'POST', body: floodBody, contentType: 'application/json',
    })));
    log(`  flood alone ${int(floodAlone.rps).padStart(9)} guesses/s answered, server ${usec(floodAlone.serverCpuUsPerRequest)} CPU per guess, ` +
      `server core ${pct(floodAlone.serverCpuShare)} busy`);

    // A correct-password call right after the flood, from the same (loopback) address as
    // the flood: with per-address throttling it is expected to wait too.
    const after = await authCall(port, 'auth.newToken', { password: ours.password, endpoints: ['/ext/health'] });
    const afterAnswer = after.body?.result?.token ? `HTTP ${after.status}, a token`
      : `HTTP ${after.status} ${after.body?.error?.code} ${after.body?.error?.message}`;

    const throughputRatio = flooded.rps / unflooded.rps;
    const targets = {
      'flooded p99 < 10 ms': { value: flooded.p99Ms, target: 10, unit: 'ms', ok: flooded.p99Ms < 10, disturbed: Boolean(flooded.contended) },
      'flooded throughput >= 0.7x unflooded': {
        value: throughputRatio, target: 0.7, ok: throughputRatio >= 0.7, disturbed: Boolean(flooded.contended || unflooded.contended),
      },
      'no errors on the protected endpoint under flood': { value: flooded.errorCount, target: 0, unit: 'count', ok: flooded.errorCount === 0 },
    };
    return {
      settings: o,
      unflooded,
      flooded,
      flood: { ...flood, answer: floodAnswer, body: floodBody.replace(wrong, '<wrong password>') },
      floodAlone,
      correctPasswordAfterFlood: afterAnswer,
      ratios: { floodedOverUnflooded: throughputRatio },
      targets,
    };
  } finally {
    await ours.cleanup();
  }
}

export function floodMarkdown(result) {
  const s = result.settings;
  const row = (name, r) => [name, int(r.rps), ms(r.p50Ms), ms(r.p99Ms), ms(r.p999Ms), ms(r.maxMs), r.errorCount,
    usec(r.serverCpuUsPerRequest), pct(r.serverCpuShare), pct(r.clientCpuShare), r.contended ? 'yes' : 'no'];
  return [
    `## 3. Flood (GET /ext/health at wrk -c${s.connections}, while ${s.floodConnections} connections post wrong-password auth.newToken)`,
    '',
    table(['run', 'requests/s', 'p50', 'p99', 'p99.9', 'max', 'errors', 'server CPU per request (all work)', 'server core busy', 'wrk core busy (both wrk)', 'machine busy with others'], [
      row('api-auth, unflooded', result.unflooded),
      row('api-auth, flooded', result.flooded),
    ]),
    '',
    `Flood: ${int(result.flood.rps)} wrong-password requests answered per second ` +
      `(${result.flood.requests} in ${result.flood.seconds.toFixed(1)} s; wrk errors ${JSON.stringify(result.flood.errors)}); ` +
      `p50 ${ms(result.flood.p50Ms)}, p99 ${ms(result.flood.p99Ms)}. First wrong-password answer: ${result.flood.answer}; ` +
      `HTTP statuses of 400 and above during the flood (wrk "status" errors): ${result.flood.errors.status}. ` +
      `A correct-password auth.newToken right after the flood, from the same address: ${result.correctPasswordAfterFlood}.`,
    '',
    `The flood alone (4 s, no other load): ${int(result.floodAlone.rps)} guesses answered per second, server core ${pct(result.floodAlone.serverCpuShare)} busy` +
      (result.floodAlone.serverCpuShare > 0.2 ? `, ${usec(result.floodAlone.serverCpuUsPerRequest)} of server CPU per guess.` : '.'),
    '',
    table(['target', 'measured', 'needed', 'result'], targetRows(result.targets)),
    '',
    `Flooded / unflooded throughput: ${ratio(result.ratios.floodedOverUnflooded)}.`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runFlood();
  process.stdout.write(`${floodMarkdown(result)}\n`);
}
