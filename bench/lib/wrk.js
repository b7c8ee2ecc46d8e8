// wrk: run pinned to the load's CPUs, its figures read back through bench/wrk/report.lua.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './common.js';
import { pinned, track } from './proc.js';

const REPORT_LUA = join(ROOT, 'bench', 'wrk', 'report.lua');

/**
 * One wrk run. Options: url, threads, connections, durationS, cpus (pin), timeoutS,
 * method, body, contentType, authorization, headers (more header lines, `-H` on wrk's
 * command line: nothing secret). Resolves with requests/s, latency percentiles
 * in ms, bytes read and the error counts (a non-2xx answer is a "status" error).
 */
export function runWrk(options) {
  const {
    url,
    threads = 1,
    connections = 64,
    durationS = 8,
    cpus = null,
    timeoutS = 5,
    method,
    body,
    contentType,
    authorization,
    headers = [],
  } = options;
  const args = [
    '-t',
    String(threads),
    '-c',
    String(connections),
    '-d',
    `${durationS}s`,
    '--timeout',
    `${timeoutS}s`,
    ...headers.flatMap((h) => ['-H', h]),
    '-s',
    REPORT_LUA,
    url,
  ];
  const [cmd, argv] = pinned(cpus, 'wrk', args);
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
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    err += d;
  });
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
        bytes: raw.bytes,
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
