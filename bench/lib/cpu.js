// CPU time of processes, from /proc (Linux): one process, a whole process tree (nginx's
// master and workers, a server's threads are already summed by the kernel), and the
// snapshot of every process that lib/quiet.js compares to see what else ran.
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
      pid: Number(pid), ppid: Number(f[1]), comm: text.slice(text.indexOf('(') + 1, close),
      ticks: Number(f[11]) + Number(f[12]), childTicks: Number(f[13]) + Number(f[14]),
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
    if (!procs || !procs.has(root)) return null;
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
