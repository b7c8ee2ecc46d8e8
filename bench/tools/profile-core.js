// Profiles the gate's hot call: runs Core.authorize on a valid token in a loop under
// `node --cpu-prof` (in a child) and prints self time by function, so the split between
// the host's copy loop, the JS-to-Wasm call and the Wasm functions (SHA-256 compression,
// base64url decoding, path rules) is visible. Not part of `npm run bench`:
//   node bench/profile-core.js [seconds]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { table, wireCopies } from '../lib/common.js';
import { loadCore } from '../lib/core.js';

const SELF = fileURLToPath(import.meta.url);

if (process.argv[2] === '--loop') {
  const seconds = Number(process.argv[3]);
  const { newCore, Outcome } = await loadCore();
  const core = newCore();
  core.setKey();
  const now = Math.floor(Date.now() / 1000);
  const token = core.issue(core.addGrant(['/ext/health']), now, 3600).token;
  const headers = wireCopies(`Bearer ${token}`, 1024);
  const paths = wireCopies('/ext/health', 1024);
  const end = Date.now() + seconds * 1000;
  let calls = 0;
  while (Date.now() < end) {
    for (let i = 0; i < 1024; i++) if (core.authorize(headers[i], paths[i], now) !== Outcome.Valid) throw new Error('not valid');
    calls += 1024;
  }
  process.stdout.write(`${calls}\n`);
} else {
  const seconds = Number(process.argv[2] ?? 5);
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-prof-'));
  try {
    // Wasm function names need the name section; the release build may strip it, in which
    // case V8 shows "wasm-function[N]" (look N up in build/core.wat).
    const run = spawnSync(process.execPath, ['--cpu-prof', '--cpu-prof-dir', dir, SELF, '--loop', String(seconds)], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(run.stderr);
    const calls = Number(run.stdout.trim());
    const profile = JSON.parse(
      readFileSync(
        join(
          dir,
          readdirSync(dir).find((f) => f.endsWith('.cpuprofile')),
        ),
        'utf8',
      ),
    );
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const self = new Map();
    const dt = profile.timeDeltas;
    for (let k = 0; k < profile.samples.length; k++) {
      const node = byId.get(profile.samples[k]);
      const f = node.callFrame;
      const name = `${f.functionName || '(anonymous)'} ${f.url ? f.url.replace(/^.*\//, '') : ''}`.trim();
      self.set(name, (self.get(name) ?? 0) + (dt[k] ?? 0));
    }
    const total = [...self.values()].reduce((a, b) => a + b, 0);
    const rows = [...self.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 15)
      .map(([name, us]) => [
        name,
        `${(us / 1000).toFixed(0)} ms`,
        `${((us / total) * 100).toFixed(1)}%`,
        `${((us * 1000) / calls).toFixed(0)} ns`,
      ]);
    process.stdout.write(
      `${calls.toLocaleString('en-US')} calls in ${seconds} s (${((seconds * 1e9) / calls).toFixed(0)} ns per call, profiler on)\n\n`,
    );
    process.stdout.write(`${table(['function (self time)', 'total', 'share', 'per call'], rows)}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
