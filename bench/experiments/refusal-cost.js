// Experiment, not part of `npm run bench`: what one refused password guess costs a
// uWebSockets.js server, and what a flood of them does to a protected GET, for three ways
// of refusing: answer at once and close the connection (the client reconnects for every
// guess), read the small body and keep the connection, or read it and answer after a delay
// (tarpit). GET /ext/health at 64 connections, a 16-connection flood, placed like a
// one-thread gateway (the server on its CPU, both wrk on the others).
//   node bench/experiments/refusal-cost.js [seconds]
import { join } from 'node:path';
import { ROOT, int, ms, pct, ratio, table, usec } from '../lib/common.js';
import { ensureCommands } from '../lib/apt.js';
import { withCpu } from '../lib/measure.js';
import { placement, startServer } from '../lib/proc.js';
import { runWrk } from '../lib/wrk.js';

const seconds = Number(process.argv[2] ?? 5);
ensureCommands(['wrk']);
const where = placement(1);
const body = JSON.stringify({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: 'wrong', endpoints: ['*'] }, id: 1 });
const server = await startServer('refuse-uws', process.execPath, [join(ROOT, 'bench', 'servers', 'refuse-uws.js')], { cpus: where.server });
const url = (path) => `http://127.0.0.1:${server.port}${path}`;
const flood = (path, durationS) =>
  runWrk({
    url: url(path),
    threads: 1,
    connections: 16,
    durationS,
    cpus: where.load,
    timeoutS: 10,
    method: 'POST',
    body,
    contentType: 'application/json',
  });
const protectedRun = () => runWrk({ url: url('/ext/health'), threads: 1, connections: 64, durationS: seconds, cpus: where.load });
const alone = [];
const under = [];
try {
  for (const path of ['/close', '/keep']) {
    const r = await withCpu({ server: server.child.pid }, () => flood(path, seconds));
    alone.push([path, int(r.rps), usec(r.cpu.server?.usPerRequest), pct(r.cpu.server?.busy), pct(r.cpu.wrk?.busy)]);
  }
  await runWrk({ url: url('/ext/health'), threads: 1, connections: 64, durationS: 2, cpus: where.load });
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
process.stdout.write(
  `${table(['refusal (flood alone)', 'refusals/s', 'server CPU per refusal', 'server CPU busy', 'wrk CPU busy'], alone)}\n\n`,
);
process.stdout.write(`${table(['flood refused by', 'GET /ext/health req/s', 'p50', 'p99', 'vs no flood', 'flood refusals/s'], under)}\n`);
