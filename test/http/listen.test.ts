// Listening is exclusive. uSockets sets SO_REUSEPORT on a listening
// socket unless told otherwise, and then a second api-auth on the same port listens too:
// the kernel splits the connections between the two, and a second instance with auth
// off answered about half of the clients of the first. A port that is taken, or an
// address that cannot be listened on, gets one line on stderr and exit code 2.
import t, { type Test } from 'tap';
import { join } from 'node:path';
import { call, expectRefused, REASONS } from '../helpers/auth.js';
import { launch, runCli, startServer, tempDir, type CliResult } from '../helpers/server.js';
import { closedPort } from '../helpers/upstream.js';

const REQUESTS = 20;

/** Exit code 2, nothing on stdout, and exactly one stderr line matching `line`. */
function expectListenRefusal(t: Test, result: Pick<CliResult, 'code' | 'stdout' | 'stderr'>, line: RegExp): void {
  t.equal(result.code, 2, `exit code 2 (stderr: ${JSON.stringify(result.stderr)})`);
  t.equal(result.stdout, '', 'nothing on stdout');
  const lines = result.stderr.split('\n');
  t.equal(lines.length, 2, 'exactly one line on stderr');
  t.match(lines[0], line, `the line names the address and what to do: ${lines[0]}`);
}

t.test('a second api-auth on a port in use exits 2 with one line; the first keeps every connection', async (t) => {
  // A port named, not 0: uSockets shares only named ports.
  const first = await startServer(t, { args: ['--http-port', String(await closedPort())] });
  // Its own data folder and auth off: were it to listen, it would let anyone through.
  const second = launch(t, ['--http-port', String(first.port), '--data-dir', join(tempDir(t), 'data')]);
  const listened = await second
    .waitForLog((l) => l.msg === 'listening')
    .then(
      () => true,
      () => false,
    );
  t.notOk(listened, 'the second never listened');
  // While the second runs (when it listens) or after it exited: every connection reaches the first.
  for (let i = 0; i < REQUESTS; i++) {
    expectRefused(t, await call(first.url, '/ext/info'), REASONS.noToken, `request ${i + 1} of ${REQUESTS} without a token`);
  }
  const exit = await second.waitForExit();
  expectListenRefusal(
    t,
    { code: exit.code, stdout: second.stdout(), stderr: second.stderr() },
    new RegExp(`^api-auth: cannot listen on 127\\.0\\.0\\.1:${first.port}: the port is in use by another program .*--http-port$`),
  );
});

t.test("an address that is not one of this machine's exits 2 with one line naming it", async (t) => {
  // 192.0.2.0/24 is TEST-NET-1: never assigned to a host.
  const result = await runCli(t, ['--http-host', '192.0.2.1', '--http-port', '9650', '--data-dir', join(tempDir(t), 'data')]);
  expectListenRefusal(t, result, /^api-auth: cannot listen on 192\.0\.2\.1:9650: the address is not one of this machine's; .*--http-host/);
});
