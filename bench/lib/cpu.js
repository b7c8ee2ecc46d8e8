// CPU time of processes, from /proc (Linux): one process, a whole process tree (nginx's
// master and workers, a server's threads are already summed by the kernel), the
// snapshot of every process that lib/quiet.js compares to see what else ran, and each
// CPU's own counters.
import { readdirSync, readFileSync } from 'node:fs';

/** USER_HZ on Linux: /proc/<pid>/stat times are in 1/100 s. */
export const TICKS_PER_SECOND = 100;

/** pid, ppid, name, own ticks (user + system, all threads) and reaped children's ticks. */
export function readStat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    const f = text.slice(close + 2).split(' ');
    // Fields after the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    return {
      pid: Number(pid),
      ppid: Number(f[1]),
      comm: text.slice(text.indexOf('(') + 1, close),
      ticks: Number(f[11]) + Number(f[12]),
      childTicks: Number(f[13]) + Number(f[14]),
    };
  } catch {
    return null;
  }
}

/** Every process on the machine, by pid; null when /proc cannot be read. */
export function snapshot() {
  let names;
  try {
    names = readdirSync('/proc').filter((n) => /^\d+$/.test(n));
  } catch {
    return null;
  }
  const procs = new Map();
  for (const n of names) {
    const s = readStat(n);
    if (s) procs.set(s.pid, s);
  }
  return procs;
}

/** Pids of `root` and everything below it in a snapshot. */
export function descendants(procs, root) {
  const tree = new Set([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of procs.values()) {
      if (!tree.has(p.pid) && tree.has(p.ppid)) {
        tree.add(p.pid);
        grew = true;
      }
    }
  }
  return tree;
}

/** CPU ticks (user + system) of one process, and of its reaped children. */
export function processTicks(pid) {
  const s = readStat(pid);
  return s && { self: s.ticks, children: s.childTicks };
}

/**
 * A CPU meter over the process tree under `root`: `read()` gives the ticks the tree used
 * since the meter was made. Each process counts its own ticks (all its threads) and those
 * of its children it reaped, so a worker that exits in between is still counted, once.
 */
export function treeMeter(root) {
  const total = () => {
    const procs = snapshot();
    if (!procs?.has(root)) return null;
    let ticks = 0;
    for (const pid of descendants(procs, root)) ticks += procs.get(pid).ticks + procs.get(pid).childTicks;
    return ticks;
  };
  const before = total();
  return {
    read() {
      const after = total();
      return before == null || after == null ? null : after - before;
    },
  };
}

/**
 * Jiffies per CPU, from /proc/stat: `busy` (all but idle and iowait), `total`, `charged`
 * (user + nice + system: time some process was charged for) and `interrupts` (irq +
 * softirq: charged to no process). Null when /proc/stat cannot be read.
 */
export function coreTicks() {
  try {
    return readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .filter((l) => /^cpu\d+ /.test(l))
      .map((l) => {
        const v = l.trim().split(/\s+/).slice(1).map(Number);
        const idle = v[3] + (v[4] ?? 0);
        const total = v.slice(0, 8).reduce((a, b) => a + (b || 0), 0);
        return { busy: total - idle, total, charged: v[0] + v[1] + v[2], interrupts: (v[5] ?? 0) + (v[6] ?? 0) };
      });
  } catch {
    return null;
  }
}
