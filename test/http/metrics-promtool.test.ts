// What /ext/metrics serves passes `promtool check metrics`, Prometheus's own linter, with
// every family there (an upstream, a WebSocket session, refusals): the text a real
// Prometheus scrapes. promtool comes with Debian's prometheus package, which
// scripts/setup-tests.sh installs; without it this test fails, saying so, rather than skip.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { busyGateway } from '../helpers/metrics.js';

t.test('promtool check metrics passes the live exposition', async (t) => {
  const { text } = await busyGateway(t);
  const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  if (result.error !== undefined) {
    t.fail(`promtool cannot be run (${result.error.message}): install Debian's prometheus package (scripts/setup-tests.sh does)`);
    return;
  }
  t.equal(result.status, 0, `promtool exits 0; it said: ${result.stdout}${result.stderr}`);
  t.equal(`${result.stdout}${result.stderr}`, '', 'with no complaint');
});
