// Time is injected end to end: the clock given to startServer or createAuth
// is the one tokens expire by, the throttle counts by, and the logs tell, so expiry and
// throttling are driven with plain numbers in-process, without waiting.
import t from 'tap';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createAuth, createLogger, Outcome, startServer } from '../../build/host/index.js';
import { call, expectGranted, expectRefused, newToken, REASONS } from '../helpers/auth.js';
import { request, rpc } from '../helpers/http.js';
import { mountedOnApp } from '../helpers/library.js';
import { randomPassword, tempDir } from '../helpers/server.js';

const START = Date.parse('2030-01-01T00:00:00Z');

t.test('startServer: tokens expire and the logs tell time by the clock it is given', async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  let now = START;
  const lines: string[] = [];
  const server = await startServer(
    {
      port: 0,
      authRequired: true,
      passwordFile: join(dir, 'password'),
      dataDir: join(dir, 'data'),
      tokenLifetime: '1h',
      // HTTP threads tell time by the system's clock.
      httpThreads: 1,
    },
    {
      clock: () => now,
      log: createLogger(
        (line) => lines.push(line),
        'info',
        () => now,
      ),
    },
  );
  t.teardown(() => server.stop());
  const base = `http://127.0.0.1:${server.port}`;
  const token = await newToken(base, readFileSync(join(dir, 'password'), 'utf8').trim(), ['/ext/info']);
  expectGranted(t, await call(base, '/ext/info', token), '/ext/info', 'when issued');
  now += 3600_000 - 1000;
  expectGranted(t, await call(base, '/ext/info', token), '/ext/info', 'a second before its hour is up by the clock');
  now += 1000;
  expectRefused(t, await call(base, '/ext/info', token), REASONS.expired, 'its hour is up by the clock, though no time passed');
  t.ok(
    lines.length > 0 && lines.every((line) => (JSON.parse(line) as { time: string }).time.startsWith('2030-01-01T')),
    'the log lines are stamped by the clock',
  );
});

t.test('createAuth: verdicts, the throttle and its Retry-After follow the clock it is given', async (t) => {
  const dir = tempDir(t);
  let now = START;
  const auth = await createAuth({
    passwordFile: join(dir, 'password'),
    dataDir: join(dir, 'data'),
    tokenLifetime: 60,
    clock: () => now,
    log: createLogger(() => undefined),
  });
  const { base } = await mountedOnApp(t, auth);
  const password = readFileSync(join(dir, 'password'), 'utf8').trim();

  const token = await newToken(base, password, ['*']);
  t.equal(auth.verify(token, '/ext/info').outcome, Outcome.Valid);
  now += 60_000;
  t.equal(auth.verify(token, '/ext/info').outcome, Outcome.Expired, 'expired 60 s later by the clock');

  // One client throughout (every connection has an address of its own otherwise).
  const post = (body: unknown) =>
    request(base, '/ext/auth', {
      method: 'POST',
      headers: [['Content-Type', 'application/json']],
      body: JSON.stringify(body),
      localAddress: '127.0.0.77',
    });
  // One batch, so that the throttle's refusal comes from the service rather than from the
  // route, which would hold it back a second first.
  const wrong = randomPassword();
  const guesses = await post([1, 2, 3, 4].map((id) => rpc('auth.newToken', { password: id < 4 ? wrong : password, endpoints: ['*'] }, id)));
  const answers = JSON.parse(guesses.text) as { id: number; error?: { code: number; message: string } }[];
  t.same(
    answers.map((a) => a.error?.code),
    [-32000, -32000, -32000, -32005],
    'three wrong passwords, then the client must wait',
  );
  t.equal(answers[3].error?.message, 'too many failed password attempts; retry in 10 s');
  now += 9_000;
  const early = await post(rpc('auth.newToken', { password, endpoints: ['*'] }, 5));
  t.equal(early.status, 429, '9 s later by the clock, still refused before the body is read');
  t.equal(early.headers['retry-after'], '1', 'with a second left to wait');
  now += 1_000;
  const late = await post(rpc('auth.newToken', { password, endpoints: ['*'] }, 6));
  t.match(JSON.parse(late.text), { result: { token: String } }, '10 s later by the clock, though a second or so passed');
});

t.test('a clock that is not a function is refused, naming the option', async (t) => {
  const dir = tempDir(t);
  await t.rejects(createAuth({ passwordFile: join(dir, 'password'), dataDir: join(dir, 'data'), clock: 5 as unknown as () => number }), {
    code: 'API_AUTH_BAD_OPTION',
    option: 'clock',
    message: /^clock must be a function that returns the time in ms since the Unix epoch, not 5$/,
  });
});
