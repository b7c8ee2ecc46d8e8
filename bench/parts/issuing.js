// Issuing throughput: auth.newToken over HTTP against the built CLI, with
// concurrent clients, and the token journal's own cost (append + fdatasync, group commit)
// measured apart, since the argon2id password check dominates each call.
//
//   node bench/parts/issuing.js [--main PATH] [--concurrency 4] [--duration 10s] [--journal-only]
//
// or as the `issuing` part of bench/run.js (its --duration, this tree's build, 4 clients).
// --main runs another build's main.js (for a before/after comparison: build the earlier
// commit in a worktree of its own and point --main at its build/host/main.js). The
// journal part needs this tree's build (build/host/state/journal.js).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BUILD, MAIN, ms, table } from '../lib/common.js';
import { startServer } from '../lib/proc.js';

async function overHttp(main, concurrency, seconds) {
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-issuing-'));
  const password = randomBytes(18).toString('base64url');
  writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
  const server = await startServer(
    'api-auth',
    process.execPath,
    [
      main,
      '--http-port',
      '0',
      '--data-dir',
      join(dir, 'data'),
      '--api-auth-required',
      '--api-auth-password-file',
      join(dir, 'password'),
      '--api-auth-max-tokens',
      '1000000',
    ].filter(
      (a, i, all) =>
        // An earlier build has no --api-auth-max-tokens: leave it out there.
        main === MAIN || (a !== '--api-auth-max-tokens' && all[i - 1] !== '--api-auth-max-tokens'),
    ),
  );
  const url = `http://127.0.0.1:${server.port}/ext/auth`;
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'auth.newToken', params: { password, endpoints: ['/ext/info'] } });
  const latencies = [];
  const failures = {};
  const until = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        const start = process.hrtime.bigint();
        const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const answer = await response.json();
        // Only issues count; a refusal (busy: more checks waiting than the bound) is counted by its code.
        if (typeof answer.result?.token !== 'string') failures[answer.error?.code] = (failures[answer.error?.code] ?? 0) + 1;
        else latencies.push(Number(process.hrtime.bigint() - start) / 1e6);
      }
    }),
  );
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  latencies.sort((a, b) => a - b);
  return {
    issuesPerSecond: latencies.length / seconds,
    p50Ms: latencies[Math.floor(latencies.length / 2)],
    p99Ms: latencies[Math.floor(latencies.length * 0.99)],
    calls: latencies.length,
    failures,
  };
}

async function journalCost(writers, seconds) {
  const { Journal } = await import(pathToFileURL(join(BUILD, 'host', 'state', 'journal.js')).href);
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-journal-'));
  const journal = await Journal.create(dir, randomBytes(32), []);
  // An issue record with a 16-character label: 50 bytes.
  const record = randomBytes(50);
  let appends = 0;
  const started = process.hrtime.bigint();
  const until = Date.now() + Math.min(seconds, 5) * 1000;
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (Date.now() < until) {
        await journal.append(record);
        appends++;
      }
    }),
  );
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  await journal.close();
  rmSync(dir, { recursive: true, force: true });
  const { groups, records, writeNs } = journal.stats;
  return {
    writers,
    appendsPerSecond: appends / elapsed,
    recordsPerGroup: records / groups,
    usPerGroup: Number(writeNs) / groups / 1000,
    usPerAppend: Number(writeNs) / records / 1000,
  };
}

/** Issues over HTTP for `seconds` with `concurrency` clients (unless `journalOnly`), then the journal's cost alone. */
export async function runIssuing({ main = MAIN, concurrency = 4, seconds = 10, journalOnly = false } = {}) {
  const report = { main, concurrency, seconds };
  if (!journalOnly) report.http = await overHttp(main, concurrency, seconds);
  report.journal = [];
  for (const writers of [1, concurrency, 64]) report.journal.push(await journalCost(writers, seconds));
  return report;
}

export function issuingMarkdown(r) {
  const lines = ['## Issuing: auth.newToken over HTTP, and the token journal alone', ''];
  if (r.http) {
    const failed =
      Object.entries(r.http.failures)
        .map(([code, n]) => `${n} × ${code}`)
        .join(', ') || 'none';
    lines.push(
      `${r.concurrency} clients for ${r.seconds} s: ${r.http.issuesPerSecond.toFixed(1)} tokens a second, ` +
        `p50 ${ms(r.http.p50Ms)}, p99 ${ms(r.http.p99Ms)} (${r.http.calls} issued; refusals: ${failed}). The argon2id password check dominates each call.`,
      '',
    );
  }
  lines.push(
    table(
      ['journal writers', 'appends/s', 'records per fdatasync', 'µs per fdatasync', 'µs per append'],
      r.journal.map((j) => [
        j.writers,
        j.appendsPerSecond.toFixed(0),
        j.recordsPerGroup.toFixed(1),
        j.usPerGroup.toFixed(0),
        j.usPerAppend.toFixed(1),
      ]),
    ),
  );
  return lines.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const flag = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return i < 0 ? fallback : process.argv[i + 1];
  };
  const report = await runIssuing({
    main: flag('main', MAIN),
    concurrency: Number(flag('concurrency', '4')),
    seconds: Number(String(flag('duration', '10s')).replace(/s$/, '')),
    journalOnly: process.argv.includes('--journal-only'),
  });
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}
