// --access-log stdout into a pipe whose reader pauses: EAGAIN is
// back-pressure, not a failed write. Within the 4 MiB a thread holds, every line arrives
// once the reader reads again, and so does every line of the JSON log.
import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from '../helpers/http.js';
import { launch, randomPassword, sleep, tempDir } from '../helpers/server.js';

t.test('a reader that pauses for seconds loses no line: all arrive, and no failure is logged', async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'password'), randomPassword(), { mode: 0o600 });
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  const server = launch(t, [
    '--http-port',
    '0',
    '--data-dir',
    join(dir, 'data'),
    '--api-auth-required',
    '--api-auth-password-file',
    join(dir, 'password'),
    '--access-log',
    'stdout',
    '--http-threads',
    '2',
  ]);
  const listening = await server.waitForLog((l) => l.msg === 'listening');
  const url = `http://127.0.0.1:${String(listening.port)}`;
  // The reader stops: the pipe (64 KiB) and the reader's own buffer fill up long before the lines end.
  server.child.stdout!.pause();
  const count = 3000;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      t.equal((await request(url, `/ext/info/paused/${i}`)).status, 401);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  // Answers came while nothing was read; the lines wait for the reader a while longer.
  await sleep(3000);
  server.child.stdout!.resume();
  const lines = await server.waitForLines((l) => typeof l.path === 'string' && l.path.startsWith('/ext/info/paused/'), count);
  t.equal(new Set(lines.map((l) => l.path)).size, count, 'every line, once');
  t.equal((await server.stop('SIGTERM')).code, 0);
  t.ok(
    server.logs.some((l) => l.msg === 'stopped'),
    "the JSON log's last line arrives",
  );
  t.notOk(
    server.logs.some((l) => l.msg?.startsWith('the access log cannot be written')),
    'no failure logged',
  );
  t.notOk(
    server.logs.some((l) => l.raw !== undefined),
    'every line is JSON, none cut',
  );
});
