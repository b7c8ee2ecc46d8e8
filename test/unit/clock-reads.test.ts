// The time is read in one place (host/clock.ts): the clock every module is handed
// (startServer's and createAuth's `clock`), which tests and embedders drive, and the
// monotonic timer the metrics' durations use. A module under host/ that read the system's
// time itself would follow no clock a test can move: an expiry, a throttle or an upstream
// deadline that only real waiting can reach.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/server.js';

/** What reads the time of day or a timer: Date.now(), new Date() without an argument, performance.now(), process.hrtime. */
const TIME_READ = /\bDate\.now\s*\(|\bnew\s+Date\s*\(\s*\)|\bperformance\.now\s*\(|\bprocess\.hrtime\b|\bperformance\.timeOrigin\b/;

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    return entry.isDirectory() ? sources(path) : entry.name.endsWith('.ts') ? [path] : [];
  });
}

t.test('nothing under host/ reads the time but host/clock.ts', async (t) => {
  const found: string[] = [];
  for (const file of sources('host')) {
    if (file === 'host/clock.ts') continue;
    readFileSync(join(ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (TIME_READ.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
  }
  t.same(found, [], "every module takes the clock it is handed, or clock.ts's timer");
  t.match(readFileSync(join(ROOT, 'host/clock.ts'), 'utf8'), TIME_READ, 'and clock.ts is where it is read');
});

t.test('the pattern sees each way of reading the time', async (t) => {
  for (const line of ['const now = Date.now();', 'new Date()', 'performance.now() - start', 'process.hrtime.bigint()', 'Date.now ()']) {
    t.match(line, TIME_READ, line);
  }
  for (const line of ['new Date(ms)', 'clock()', 'systemTimer()', 'new Date(clock())']) t.notMatch(line, TIME_READ, line);
});
