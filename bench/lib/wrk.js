// wrk: found or installed through apt, run pinned to a CPU, its figures read back
// through bench/wrk/report.lua.
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { log, ROOT } from './common.js';
import { pinned, track } from './proc.js';

const REPORT_LUA = join(ROOT, 'bench', 'wrk', 'report.lua');

function hasWrk() {
  try {
    execFileSync('sh', ['-c', 'command -v wrk'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Makes sure `wrk` is on PATH: `apt-get install -y wrk`, after `apt-get update` if that fails. */
export function ensureWrk() {
  if (hasWrk()) return;
  log('wrk not found; installing it with apt-get');
  const apt = (args) => execFileSync('apt-get', args, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  try {
    apt(['install', '-y', 'wrk']);
  } catch {
    apt(['update']);
    apt(['install', '-y', 'wrk']);
  }
  if (!hasWrk()) throw new Error('wrk is still missing after apt-get install -y wrk');
}

/**
 * One wrk run. Options: url, threads, connections, durationS, cpu (pin), timeoutS,
 * method, body, contentType, authorization. Resolves with requests/s, latency percentiles
 * in ms and the error counts; `started` is a promise that resolves once wrk is running.
 */
export function runWrk(options) {
  const {
    url, threads = 1, connections = 64, durationS = 8, cpu = null, timeoutS = 5,
    method, body, contentType, authorization,
  } = options;
  const args = ['-t', String(threads), '-c', String(connections), '-d', `${durationS}s`,
    '--timeout', `${timeoutS}s`, '-s', REPORT_LUA, url];
  const [cmd, argv] = pinned(cpu, 'wrk', args);
  const env = {
    ...process.env,
    WRK_METHOD: method ?? '',
    WRK_BODY: body ?? '',
    WRK_CONTENT_TYPE: contentType ?? '',
    WRK_AUTHORIZATION: authorization ?? '',
  };
  const child = track(spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], env }));
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('BENCH_JSON '));
      if (code !== 0 || !line) {
        reject(new Error(`wrk failed (exit ${code}): ${err.trim() || out.trim()}`));
        return;
      }
      const raw = JSON.parse(line.slice('BENCH_JSON '.length));
      const seconds = raw.durationUs / 1e6;
      const errors = Object.values(raw.errors).reduce((a, b) => a + b, 0);
      resolve({
        requests: raw.requests,
        seconds,
        rps: raw.requests / seconds,
        p50Ms: raw.latencyUs.p50 / 1000,
        p90Ms: raw.latencyUs.p90 / 1000,
        p99Ms: raw.latencyUs.p99 / 1000,
        p999Ms: raw.latencyUs.p999 / 1000,
        maxMs: raw.latencyUs.max / 1000,
        meanMs: raw.latencyUs.mean / 1000,
        errors: raw.errors,
        errorCount: errors,
        threads,
        connections,
      });
    });
  });
}
