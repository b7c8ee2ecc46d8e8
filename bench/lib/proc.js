// Child processes for the bench: servers started on loopback (optionally pinned to a
// CPU), waited for through their JSON "listening" log line, and stopped by their own pid.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

let tasksetChecked;

/** Whether `taskset` exists and the machine has a second core to keep apart. */
export function canPin() {
  if (tasksetChecked === undefined) {
    try {
      execFileSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' });
      tasksetChecked = (os.availableParallelism?.() ?? os.cpus().length) >= 2;
    } catch {
      tasksetChecked = false;
    }
  }
  return tasksetChecked;
}

/** The command line, prefixed with `taskset -c <cpu>` when pinning is possible. */
export function pinned(cpu, command, args) {
  if (cpu == null || !canPin()) return [command, args];
  return ['taskset', ['-c', String(cpu), command, ...args]];
}

/**
 * Starts a server and resolves once it logs {"msg":"listening","port":N} on stdout.
 * Returns { child, port, logs, stop(), rssBytes() }.
 */
export function startServer(name, command, args, { cpu = null, env = {}, timeoutMs = 20000 } = {}) {
  const [cmd, argv] = pinned(cpu, command, args);
  const started = process.hrtime.bigint();
  const child = track(spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }));
  const logs = [];
  let stderr = '';
  let buffered = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`${name}: no "listening" line within ${timeoutMs} ms`)), timeoutMs);
    const fail = (error) => {
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      reject(new Error(`${error.message}\n${name} stderr: ${stderr.slice(-2000)}`));
    };
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', fail);
    child.on('exit', (code, signal) => fail(new Error(`${name} exited early (code ${code}, signal ${signal})`)));
    child.stdout.on('data', (data) => {
      buffered += data;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let parsed;
        try { parsed = JSON.parse(line); } catch { parsed = { raw: line }; }
        logs.push(parsed);
        if (parsed.msg === 'listening' && Number.isInteger(parsed.port)) {
          clearTimeout(timer);
          child.removeAllListeners('exit');
          const readyMs = Number(process.hrtime.bigint() - started) / 1e6;
          resolve({
            name,
            child,
            port: parsed.port,
            readyMs,
            logs,
            stderr: () => stderr,
            // taskset execs the command, so the child's pid is the server's.
            rssBytes: () => rssOf(child.pid),
            stop: () => stopChild(child),
          });
        }
      }
    });
  });
}

/** Resident set size of a process, from /proc (Linux); null elsewhere. */
export function rssOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** SIGTERM, then SIGKILL after a grace period; resolves on exit. Only this child. */
export function stopChild(child, graceMs = 6000) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Children still running when the bench dies are killed by pid. */
const live = new Set();
export function track(child) {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    for (const child of live) child.kill('SIGKILL');
    process.exit(130);
  });
}
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});
