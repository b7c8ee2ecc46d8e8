// Shared helpers for the bench parts: machine facts, number formatting, markdown tables,
// and the uWebSockets.js-like string copies used to feed the gate.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BUILD = join(ROOT, 'build');
export const MAIN = join(BUILD, 'host', 'main.js');
export const CORE_JS = join(BUILD, 'host', 'core.js');

/** What the numbers were measured on. */
export function machineFacts() {
  const cpus = os.cpus();
  let model = cpus[0]?.model ?? 'unknown';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('model name'));
    if (line) model = line.split(':').slice(1).join(':').trim();
  } catch { /* not Linux */ }
  let wrk = null;
  try {
    wrk = execFileSync('wrk', ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).split('\n')[0].trim();
  } catch (error) {
    // wrk --version exits 1 after printing its banner.
    const out = `${error.stdout ?? ''}`.split('\n')[0].trim();
    if (out) wrk = out;
  }
  let gitCommit = null;
  try {
    gitCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch { /* not a clone */ }
  return {
    cpuModel: model,
    cores: os.availableParallelism?.() ?? cpus.length,
    cpuMHz: cpus[0]?.speed ?? null,
    memoryBytes: os.totalmem(),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
    v8: process.versions.v8,
    wrk,
    gitCommit,
    date: new Date().toISOString(),
  };
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
