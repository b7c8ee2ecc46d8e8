// Other work on the machine skews every figure of a 2-core box. This measures the CPU
// time used by processes outside the bench's own process tree (from /proc, Linux only),
// can wait for the machine to go quiet before a measured run, and records how busy it
// was during one, so a contended run is visible in the results instead of silently wrong.
import os from 'node:os';
import { log, sleep } from './common.js';
import { TICKS_PER_SECOND as TICK, coreTicks, descendants, snapshot } from './cpu.js';

/**
 * Starts a window; `end()` returns CPU-seconds used by foreign user processes and the top
 * ones, and how busy each CPU was (share of the window, all processes and the kernel).
 */
export function foreignCpuWindow() {
  const before = snapshot();
  const cpusBefore = coreTicks();
  const t0 = process.hrtime.bigint();
  return {
    end() {
      const after = snapshot();
      const cpusAfter = coreTicks();
      if (!before || !after) return null;
      const cpuBusy =
        cpusBefore && cpusAfter
          ? cpusAfter.map((c, k) => (c.busy - cpusBefore[k].busy) / Math.max(1, c.total - cpusBefore[k].total))
          : null;
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      const own = descendants(after, process.pid);
      // Everything charged to processes on the machine, minus what this bench's own
      // processes used (live ones, plus children this process reaped in the window, like
      // a finished wrk): that catches short-lived processes that came and went unseen.
      let ownTicks = 0;
      for (const pid of own) {
        const a = after.get(pid);
        if (a) ownTicks += a.ticks - (before.get(pid)?.ticks ?? 0);
      }
      const meBefore = before.get(process.pid);
      const meAfter = after.get(process.pid);
      if (meBefore && meAfter) ownTicks += meAfter.childTicks - meBefore.childTicks;
      const charged = cpusBefore && cpusAfter ? cpusAfter.reduce((a, c, k) => a + c.charged - cpusBefore[k].charged, 0) : 0;
      const unseenTicks = Math.max(0, charged - ownTicks);
      let ticks = 0;
      const top = [];
      for (const p of after.values()) {
        // Kernel threads (children of kthreadd, pid 2) are left out: loopback traffic of
        // the bench itself shows up there.
        if (own.has(p.pid) || p.pid === 2 || p.ppid === 2) continue;
        const d = p.ticks - (before.get(p.pid)?.ticks ?? 0);
        if (d > 0) {
          ticks += d;
          top.push([p.comm, d / TICK]);
        }
      }
      top.sort((a, b) => b[1] - a[1]);
      const cpuSeconds = Math.max(ticks, unseenTicks) / TICK;
      const cores = os.availableParallelism?.() ?? os.cpus().length;
      return {
        seconds,
        cpuSeconds,
        // Share of the whole machine's CPU taken by others during the window.
        share: cpuSeconds / (seconds * cores),
        top: top.slice(0, 3).map(([comm, s]) => `${comm} ${s.toFixed(2)}s`),
        cpuBusy,
      };
    },
  };
}

/**
 * Waits (up to `maxWaitS`) until other processes use under `threshold` of the machine
 * over a `sampleMs` window. Returns the last sample and whether it was quiet.
 */
export async function waitForQuiet({ threshold = 0.05, sampleMs = 1000, maxWaitS = 60 } = {}) {
  const deadline = Date.now() + maxWaitS * 1000;
  let warned = false;
  for (;;) {
    const w = foreignCpuWindow();
    await sleep(sampleMs);
    const s = w.end();
    if (!s) return { quiet: null, sample: null };
    if (s.share < threshold) return { quiet: true, sample: s };
    if (Date.now() >= deadline) {
      log(`  machine still busy after ${maxWaitS}s (others use ${(s.share * 100).toFixed(0)}%: ${s.top.join(', ')}); measuring anyway`);
      return { quiet: false, sample: s };
    }
    if (!warned) {
      log(`  waiting for the machine to go quiet (others use ${(s.share * 100).toFixed(0)}%: ${s.top.join(', ')})`);
      warned = true;
    }
  }
}
