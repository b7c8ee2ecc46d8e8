// One measured HTTP run: a warm-up, then wrk with the CPU time of the servers involved
// read around it, taken when the machine is quiet and marked when it was not.
import { readFileSync } from 'node:fs';
import { log } from './common.js';
import { TICKS_PER_SECOND, coreTicks, processTicks, treeMeter } from './cpu.js';
import { foreignCpuWindow, waitForQuiet } from './quiet.js';
import { runWrk } from './wrk.js';

/** Over this share of the machine used by other processes during a run, the run is flagged. */
export const CONTENDED = 0.05;
/** A server whose cores were busy at least this share of a run was the limit of that run... */
export const SATURATED = 0.95;
/** ...provided the load's cores were busy at most this share: wrk had room to send more. */
export const HEADROOM = 0.9;

/**
 * What limited a run, from the busy shares of the server's and the load's cores
 * (`withCpu`'s `cores`): 'server' when the server's cores were saturated while the load's
 * had room to spare, so that the requests a second are the server's own; 'load' otherwise
 * (the load side, or nothing, was the limit: the figure says more about wrk and the
 * upstream than about the server); 'shared' or 'unpinned' when the placement keeps no
 * core apart, so the two cannot be told apart.
 */
export function limitOf(cores, placement) {
  if (!placement?.server || !placement.load) return 'unpinned';
  if (placement.shared) return 'shared';
  if (cores?.server == null || cores.load == null) return 'unpinned';
  return cores.server >= SATURATED && cores.load <= HEADROOM ? 'server' : 'load';
}

export function median(values) {
  const s = values.filter((v) => v != null && Number.isFinite(v)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * TCP connections the machine has accepted so far (PassiveOpens of /proc/net/snmp, Linux);
 * null elsewhere. Over a run, the count per request tells whether clients reconnected.
 */
export function tcpAccepted() {
  try {
    const lines = readFileSync('/proc/net/snmp', 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('Tcp:'));
    const names = lines[0].split(/\s+/);
    return Number(lines[1].split(/\s+/)[names.indexOf('PassiveOpens')]);
  } catch {
    return null;
  }
}

/**
 * Runs a wrk measurement and adds where the CPU went: for each named process tree in
 * `meters` ({ server: pid, upstream: pid }), its CPU time per request and its busy share of
 * the window; wrk's own CPU time (a reaped child of this process); and, with a
 * `placement` (lib/proc.js), how busy the server's cores and the load's cores were.
 */
export async function withCpu(pids, measure, placement = null) {
  const meters = Object.entries(pids)
    .filter(([, pid]) => pid != null)
    .map(([name, pid]) => [name, treeMeter(pid)]);
  const me0 = processTicks(process.pid);
  const accepted0 = tcpAccepted();
  const cores0 = coreTicks();
  const t0 = process.hrtime.bigint();
  const result = await measure();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cores1 = coreTicks();
  const me1 = processTicks(process.pid);
  const accepted1 = tcpAccepted();
  // Every connection accepted on the machine in the window (the gateways' own upstream
  // connections are kept open, so these are wrk's): about 1 per request when each
  // request came on a new connection, about 0 when they were kept alive.
  result.connectionsPerRequest = accepted0 == null || accepted1 == null ? null : (accepted1 - accepted0) / Math.max(1, result.requests);
  result.cpu = {};
  const ticks = {};
  for (const [name, meter] of meters) {
    ticks[name] = meter.read();
    if (ticks[name] == null) continue;
    const seconds = ticks[name] / TICKS_PER_SECOND;
    // Everything the tree used in the window, over the requests wrk counted: requests
    // still in flight when wrk stopped are charged to the ones it counted.
    result.cpu[name] = { usPerRequest: (seconds * 1e6) / Math.max(1, result.requests), busy: seconds / wall };
  }
  if (me0 && me1) {
    ticks.wrk = me1.children - me0.children;
    result.cpu.wrk = { busy: ticks.wrk / TICKS_PER_SECOND / wall };
  }
  if (placement?.server && placement.load && !placement.shared && cores0 && cores1) {
    // A side's share of its cores: its processes' time, plus the interrupt time of those
    // cores, which the kernel charges to no process (loopback TCP is mostly softirq work
    // on the core that sent the packet: without it, nginx at full tilt reads as 60-80%).
    // Other processes' time on those cores is left out; lib/quiet.js flags a run they disturbed.
    const share = (cpus, names) => {
      if (names.some((n) => ticks[n] == null)) return null;
      const interrupts = cpus.reduce((a, c) => a + cores1[c].interrupts - cores0[c].interrupts, 0);
      const own = names.reduce((a, n) => a + ticks[n], 0);
      return (own + interrupts) / TICKS_PER_SECOND / wall / cpus.length;
    };
    result.cores = {
      server: share(placement.server, ['server']),
      load: share(placement.load, ['wrk', ...(pids.upstream != null ? ['upstream'] : [])]),
    };
  }
  return result;
}

/**
 * Runs `measure` once the machine is quiet (waiting up to `o.waitQuietS`), recording how
 * much CPU other processes took meanwhile; a run they disturbed is repeated (up to
 * `o.retries` times) and the least disturbed one kept, marked `contended` if even that one was.
 */
export async function measureQuietly(o, measure) {
  let best = null;
  for (let attempt = 0; attempt <= o.retries; attempt++) {
    if (o.waitQuietS > 0) await waitForQuiet({ maxWaitS: o.waitQuietS });
    const window = foreignCpuWindow();
    const result = await measure();
    result.foreign = window.end();
    result.contended = result.foreign ? result.foreign.share > CONTENDED : null;
    result.attempts = attempt + 1;
    if (best === null || (result.foreign?.share ?? 0) < (best.foreign?.share ?? 0)) best = result;
    if (!result.contended) break;
    if (attempt < o.retries)
      log(`  other processes used ${(result.foreign.share * 100).toFixed(0)}% of the machine during the run; measuring again`);
  }
  return best;
}

/**
 * Warm-up, then the measured run, both with the same request shape (`shape`: url,
 * method, body, contentType, authorization, connections), wrk on `o.placement.load`
 * with one thread per load CPU. `pids` are the process trees whose CPU is metered.
 */
export async function load(shape, pids, o) {
  const cpus = o.placement.load;
  const run = { ...shape, cpus, threads: Math.min(shape.connections, cpus?.length ?? 1) };
  if (o.warmupS > 0) await runWrk({ ...run, durationS: o.warmupS });
  const result = await measureQuietly(o, () => withCpu(pids, () => runWrk({ ...run, durationS: o.durationS }), o.placement));
  if (result.errorCount > 0) log(`  WARNING: wrk counted errors ${JSON.stringify(result.errors)}`);
  if (result.contended)
    log(
      `  WARNING: other processes used ${(result.foreign.share * 100).toFixed(0)}% of the machine during the run (${result.foreign.top.join(', ')})`,
    );
  return result;
}
