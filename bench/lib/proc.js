// Child processes for the bench: where they run (CPU placement from the machine's core
// count), servers started on loopback and waited for (through their JSON "listening" log
// line, or their port accepting connections), and stopped by their own pid.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import os from 'node:os';

let tasksetChecked;

export function coreCount() {
  return os.availableParallelism?.() ?? os.cpus().length;
}

/** Whether `taskset` exists and the machine has a second core to keep apart. */
export function canPin() {
  if (tasksetChecked === undefined) {
    try {
      execFileSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' });
      tasksetChecked = coreCount() >= 2;
    } catch {
      tasksetChecked = false;
    }
  }
  return tasksetChecked;
}

/** The command line, prefixed with `taskset -c <cpus>` when pinning is possible. */
export function pinned(cpus, command, args) {
  if (cpus == null || !canPin()) return [command, args];
  return ['taskset', ['-c', [cpus].flat().join(','), command, ...args]];
}

const range = (from, to) => Array.from({ length: to - from }, (_, k) => from + k);

/**
 * Where a server with `threads` threads and its load (wrk and the upstream) run, on a
 * machine of `cores` cores: the server on cores 0..threads-1 and the load on the rest
 * when a core is left over; otherwise the server on every core and the load on the last
 * one, sharing it (`shared`), which the report says. `server`/`load` are null when
 * nothing can be pinned (one core, or no taskset).
 */
export function placement(threads, cores = coreCount(), pinnable = canPin()) {
  if (!pinnable || cores < 2)
    return { server: null, load: null, shared: true, label: 'not pinned (one core, or no taskset): server and load share the machine' };
  const shared = threads > cores - 1;
  const server = shared ? range(0, cores) : range(0, threads);
  const load = shared ? [cores - 1] : range(threads, cores);
  const list = (c) => (c.length > 2 ? `${c[0]}-${c.at(-1)}` : c.join(','));
  return {
    server,
    load,
    shared,
    label: `server on CPU ${list(server)}, wrk and upstream on CPU ${list(load)}${shared ? ' (shared: the machine has too few cores to keep them apart)' : ''}`,
  };
}

/** A port free on 127.0.0.1 right now, for servers that cannot pick their own and say which. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Starts a server and resolves once it logs {"msg":"listening","port":N} on stdout.
 * Returns { child, port, logs, stop(), rssBytes() }.
 */
export function startServer(name, command, args, { cpus = null, env = {}, timeoutMs = 20000 } = {}) {
  const [cmd, argv] = pinned(cpus, command, args);
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
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', fail);
    child.on('exit', (code, signal) => fail(new Error(`${name} exited early (code ${code}, signal ${signal})`)));
    child.stdout.on('data', (data) => {
      buffered += data;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let parsed;
        try {
          parsed = JSON.parse(line);
        } catch {
          parsed = { raw: line };
        }
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

/**
 * Starts a server that listens on a port given to it (nginx, HAProxy) and resolves once
 * that port accepts a connection. Same shape as startServer's result.
 */
export async function startOnPort(name, command, args, port, { cpus = null, timeoutMs = 20000 } = {}) {
  const [cmd, argv] = pinned(cpus, command, args);
  const started = process.hrtime.bigint();
  const child = track(spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  child.stdout.on('data', (d) => {
    output += d;
  });
  child.stderr.on('data', (d) => {
    output += d;
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await Promise.race([exited, accepts(port)]);
    if (state === true) break;
    if (typeof state === 'object')
      throw new Error(`${name} exited early (code ${state.code}, signal ${state.signal}): ${output.slice(-2000)}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name}: port ${port} not accepting within ${timeoutMs} ms: ${output.slice(-2000)}`);
    }
    // The port refused: the server is still reading its config; ask again shortly.
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    name,
    child,
    port,
    readyMs: Number(process.hrtime.bigint() - started) / 1e6,
    output: () => output,
    rssBytes: () => rssOf(child.pid),
    stop: () => stopChild(child),
  };
}

/** Whether a TCP connection to 127.0.0.1:port is accepted. */
function accepts(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
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
