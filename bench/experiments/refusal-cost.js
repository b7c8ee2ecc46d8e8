// Experiment, not part of `npm run bench`: what one refused password guess costs a
// uWebSockets.js server, and what a flood of them does to a protected GET, for three ways
// of refusing: answer at once and close the connection (the client reconnects for every
// guess), read the small body and keep the connection, or read it and answer after a delay
// (tarpit). Same shapes as part 3: GET /ext/health at 64 connections, a 16-connection
// flood, both wrk on CPU 0, the server on CPU 1.
//   node bench/experiments/refusal-cost.js [seconds]
import { join } from 'node:path';
import { ROOT, int, ms, ratio, table } from '../lib/common.js';
import { startServer } from '../lib/proc.js';
import { ensureWrk, runWrk } from '../lib/wrk.js';
import { pct, usec, withCpu } from '../end-to-end.js';

const seconds = Number(process.argv[2] ?? 5);
ensureWrk();
const body = JSON.stringify({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: 'wrong', endpoints: ['*'] }, id: 1 });
const server = await startServer('refuse-uws', process.execPath, [join(ROOT, 'bench', 'servers', 'refuse-uws.js')], { cpu: 1 });
const url = (path) => `http://127.0.0.1:${server.port}${path}`;
const flood = (path, durationS) => runWrk({
  url: url(path), threads: 1, connections: 16, durationS, cpu: 0, timeoutS: 10, method: 'POST', body, contentType: 'application/json',
});
const protectedRun = () => runWrk({ url: url('/ext/health'), threads: 1, connections: 64, durationS: seconds, cpu: 0 });
const alone = [];
const under = [];
try {
  for (const path of ['/close', '/keep']) {
    const r = await withCpu(server, () => flood(path, seconds));
    alone.push([path, int(r.rps), usec(r.serverCpuUsPerRequest), pct(r.serverCpuShare), pct(r.clientCpuShare)]);
  }
  await runWrk({ url: url('/ext/health'), threads: 1, connections: 64, durationS: 2, cpu: 0 });
  const base = await protectedRun();
  under.push(['none', int(base.rps), ms(base.p50Ms), ms(base.p99Ms), '1.00x', '-']);
  for (const path of ['/close', '/keep', '/tarpit']) {
    const f = flood(path, seconds + 3);
    await new Promise((r) => setTimeout(r, 2000));
    const p = await protectedRun();
    const fr = await f;
    under.push([path, int(p.rps), ms(p.p50Ms), ms(p.p99Ms), ratio(p.rps / base.rps), int(fr.rps)]);
  }
} finally {
  await server.stop();
}
process.stdout.write(`${table(['refusal (flood alone)', 'refusals/s', 'server CPU per refusal', 'server core busy', 'wrk core busy'], alone)}\n\n`);
process.stdout.write(`${table(['flood refused by', 'GET /ext/health req/s', 'p50', 'p99', 'vs no flood', 'flood refusals/s'], under)}\n`);
