// Shared helpers for the bench parts: machine facts, the commit measured, number formatting, markdown tables,
// and the uWebSockets.js-like string copies used to feed the gate.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BUILD = join(ROOT, 'build');
export const MAIN = join(BUILD, 'host', 'main.js');
export const CORE_JS = join(BUILD, 'host', 'core', 'core.js');

/** The first line a command prints, on stdout or stderr whatever its exit code (wrk --version exits 1, nginx -v writes to stderr); null when it cannot run. */
function versionLine(command, args) {
  const r = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.error) return null;
  return (
    `${r.stdout}\n${r.stderr}`
      .split('\n')
      .map((l) => l.trim())
      .find(Boolean) ?? null
  );
}

/** What the numbers were measured on. */
export function machineFacts() {
  const cpus = os.cpus();
  let model = cpus[0]?.model ?? 'unknown';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line) model = line.split(':').slice(1).join(':').trim();
  } catch {
    /* not Linux */
  }
  return {
    cpuModel: model,
    cores: os.availableParallelism?.() ?? cpus.length,
    cpuMHz: cpus[0]?.speed ?? null,
    memoryBytes: os.totalmem(),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
    v8: process.versions.v8,
    wrk: versionLine('wrk', ['--version']),
    haproxy: versionLine('haproxy', ['-v']),
    nginx: versionLine('nginx', ['-v']),
    date: new Date().toISOString(),
  };
}

/** The bench's own outputs: writing them does not make the tree dirty for the next run. */
export const OUTPUTS = ['bench/results/results.json', 'bench/results/results.dirty.json'];

/**
 * The commit measured (`git rev-parse HEAD`) and whether the tree differs from it
 * (`git status --porcelain`, untracked files included: an uncommitted file is as much
 * unmeasured-by-that-commit as a modified one). Null commit outside a git clone.
 */
export function gitState() {
  const git = (args) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const commit = git(['rev-parse', 'HEAD']).trim();
    const changes = git(['status', '--porcelain', '--', '.', ...OUTPUTS.map((p) => `:(exclude)${p}`)])
      .split('\n')
      .filter(Boolean);
    return { commit, dirty: changes.length > 0, changes };
  } catch {
    return { commit: null, dirty: true, changes: ['not a git clone'] };
  }
}

/** Nanoseconds, readable. */
export function ns(value) {
  if (value == null || !Number.isFinite(value)) return 'n/a';
  if (value < 1000) return `${value.toFixed(value < 100 ? 1 : 0)} ns`;
  if (value < 1e6) return `${(value / 1000).toFixed(2)} µs`;
  return `${(value / 1e6).toFixed(2)} ms`;
}

export function ms(value) {
  if (value == null || !Number.isFinite(value)) return 'n/a';
  return `${value.toFixed(value < 10 ? 3 : 1)} ms`;
}

export function ratio(value, digits = 2) {
  if (value == null || !Number.isFinite(value)) return 'n/a';
  return `${value.toFixed(digits)}x`;
}

export function int(value) {
  if (value == null || !Number.isFinite(value)) return 'n/a';
  return Math.round(value).toLocaleString('en-US');
}

export function usec(value) {
  return value == null || !Number.isFinite(value) ? 'n/a' : `${value.toFixed(value < 10 ? 2 : 1)} µs`;
}

export function pct(value) {
  return value == null || !Number.isFinite(value) ? 'n/a' : `${(value * 100).toFixed(0)}%`;
}

/** A body size: 100 B, 10 KB (1000s, as given on the command line), 1 MiB. */
export function size(bytes) {
  if (bytes >= 1048576 && bytes % 1048576 === 0) return `${bytes / 1048576} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  if (bytes >= 1000 && bytes % 1000 === 0) return `${bytes / 1000} kB`;
  return `${bytes} B`;
}

export function mib(bytes) {
  if (bytes == null || !Number.isFinite(bytes)) return 'n/a';
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

/** A markdown table from a header row and rows of cells. */
export function table(header, rows) {
  const line = (cells) => `| ${cells.map((c) => String(c).replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(header), `|${header.map(() => '---').join('|')}|`, ...rows.map(line)].join('\n');
}

/** PASS or MISS; marked when the figure came from runs other processes disturbed. */
export function pass(ok, disturbed = false) {
  const word = ok == null ? 'n/a' : ok ? 'PASS' : 'MISS';
  return disturbed ? `${word} (disturbed run: repeat on a quiet machine)` : word;
}

/**
 * A fresh, flat, one-byte, non-internalized string with the text of `s`: what
 * uWebSockets.js hands JavaScript for a header value or URL (a new V8 string per request,
 * made from the request's bytes), unlike a literal, which V8 internalizes.
 */
export function wireString(s) {
  return Buffer.from(s, 'latin1').toString('latin1');
}

/** `n` distinct string objects, all with the text of `s`. */
export function wireCopies(s, n) {
  return Array.from({ length: n }, () => wireString(s));
}

export function sleep(msDelay) {
  return new Promise((r) => setTimeout(r, msDelay));
}

export function log(...args) {
  process.stderr.write(`[bench] ${args.join(' ')}\n`);
}
