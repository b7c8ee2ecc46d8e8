// Every core, one state: --http-threads N. The main thread accepts every
// connection and hands it to one of N HTTP threads in turn; it owns the state (the
// core's owner instance, the token service, the throttle), and each HTTP thread checks
// tokens with a reader instance over the same shared memory. To the outside it stays
// one process: a change answered by /ext/auth holds on every thread at once, metrics
// and logs are the process's, a stop drains every thread, and a thread that fails takes
// the process down in order, never half alive, never with an abort.
import t, { type Test } from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { call, changePassword, newToken, REASONS, refusalBody, REVOKED, revokeToken } from '../helpers/auth.js';
import { exchange, KeepAliveConnection, request, type HttpResponse } from '../helpers/http.js';
import { launch, randomPassword, ROOT, runCli, startServer, tempDir, type LogLine, type Running } from '../helpers/server.js';
import { closedPort, echo, startUpstream } from '../helpers/upstream.js';
import { createLogger, parseArgs, startServer as startLibraryServer } from '../../build/host/index.js';
import { scrape } from '../helpers/metrics.js';

// Two tests at a time: each has a server of its own, and several spend most of their
// time waiting (for a watchdog, for a process to end).
t.jobs = 2;

/** More threads than this machine may have cores, so that the tests exercise threads anywhere. */
const THREADS = 3;
/** Connections opened one after another take every thread in turn, so twice round covers each twice. */
const SPREAD = 2 * THREADS;
const INFO_BODY = JSON.stringify({ jsonrpc: '2.0', method: 'info.getNodeVersion', id: 1 });

/** Requests received by each HTTP thread, 1 to `threads`. */
function byThread(samples: Map<string, number>, threads: number): number[] {
  return Array.from({ length: threads }, (_, i) => samples.get(`api_auth_http_requests_total{thread="${i + 1}"}`) ?? 0);
}

/** POST /ext/info with the token, over a kept-alive connection. */
function checkOn(connection: KeepAliveConnection, token: string): Promise<HttpResponse> {
  return connection.request('/ext/info', {
    method: 'POST',
    body: INFO_BODY,
    headers: [
      ['Authorization', `Bearer ${token}`],
      ['Content-Type', 'application/json'],
    ],
  });
}

/** What a check came to, in brief: `200`, or the status and the refusal's reason. */
function verdict(response: HttpResponse): string {
  if (response.status === 200) return '200';
  for (const reason of Object.values(REASONS)) if (response.text === refusalBody(reason)) return `${response.status} ${reason}`;
  return `${response.status} ${response.text}`;
}

/** Opens `count` kept-alive connections one after another (so they take every thread in turn), each checked once. */
async function openChecked(
  base: string,
  token: string,
  count: number,
): Promise<{ connections: KeepAliveConnection[]; verdicts: string[] }> {
  const connections: KeepAliveConnection[] = [];
  const verdicts: string[] = [];
  for (let i = 0; i < count; i++) {
    const connection = new KeepAliveConnection(base);
    connections.push(connection);
    verdicts.push(verdict(await checkOn(connection, token)));
  }
  return { connections, verdicts };
}

/** `count` checks on fresh connections, one after another. */
async function freshChecks(base: string, token: string, count: number): Promise<string[]> {
  const verdicts: string[] = [];
  for (let i = 0; i < count; i++) verdicts.push(verdict(await call(base, '/ext/info', token)));
  return verdicts;
}

// One server for the tests that look only at answers to their own tokens and calls (and
// the throttle's count, which only the guesser's test moves): what one leaves behind (tokens
// issued and revoked) changes nothing another checks. The tests that count a thread's
// requests or the tokens issued, or change the password, have a server of their own.
//
// Started before the first test is queued: tap's root test ends by itself once it is idle
// (it has a teardown), so a start awaited after a test had ended would be killed by that
// teardown when the start outlasted the test, as it did on a loaded machine.
const shared = await startServer(t, { cheapChecks: true, args: ['--http-threads', String(THREADS)] });

t.test('fresh connections go to every HTTP thread in turn; a kept-alive connection stays on its thread', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ['--http-threads', String(THREADS)] });
  t.equal(server.listening.httpThreads, THREADS, 'the listening line says how many threads serve');
  t.equal(server.logs.filter((l) => l.msg === 'listening').length, 1, 'once');
  const token = await newToken(server.url, server.password, ['/ext/metrics', '/ext/info']);

  const before = byThread(await scrape(server.url, token), THREADS);
  t.same(await freshChecks(server.url, token, 4 * THREADS), Array(4 * THREADS).fill('200'));
  const after = byThread(await scrape(server.url, token), THREADS);
  const fresh = after.map((n, i) => n - before[i]);
  // Each thread took 4 of them; one of them also took the second scrape.
  t.equal(
    fresh.reduce((a, b) => a + b),
    4 * THREADS + 1,
    `every request was counted once: ${fresh}`,
  );
  t.ok(
    fresh.every((n) => n === 4 || n === 5),
    `every thread took its turn: ${fresh}`,
  );

  const connection = new KeepAliveConnection(server.url);
  for (let i = 0; i < 10; i++) t.equal(verdict(await checkOn(connection, token)), '200');
  connection.close();
  const kept = byThread(await scrape(server.url, token), THREADS).map((n, i) => n - after[i]);
  t.equal(kept.filter((n) => n >= 10).length, 1, `one thread served the kept-alive connection: ${kept}`);
  t.ok(
    kept.every((n) => n >= 10 || n <= 1),
    `the others saw the scrape at most: ${kept}`,
  );
});

t.test(
  'once auth.revokeToken answers, no thread answers 200 for the token, on fresh connections or ones kept alive from before',
  async (t) => {
    const server = shared;
    const rounds = 15;
    for (let round = 1; round <= rounds; round++) {
      const token = await newToken(server.url, server.password, ['/ext/info']);
      // A token the owner just issued is good on every thread at once.
      const { connections, verdicts } = await openChecked(server.url, token, SPREAD);
      t.same(
        [...verdicts, ...(await freshChecks(server.url, token, SPREAD))],
        Array(2 * SPREAD).fill('200'),
        `round ${round}: 200 everywhere before`,
      );
      t.same(await revokeToken(server.url, server.password, token), REVOKED);
      // All at once, on every thread: the connections from before, and fresh ones.
      const after = await Promise.all([
        ...connections.map((connection) => checkOn(connection, token)),
        ...Array.from({ length: SPREAD }, () => call(server.url, '/ext/info', token)),
      ]);
      t.same(after.map(verdict), Array(2 * SPREAD).fill(`401 ${REASONS.revoked}`), `round ${round}: revoked everywhere after`);
      for (const connection of connections) connection.close();
    }
  },
);

t.test('once auth.changePassword answers, no thread answers 200 for a token of the old password', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ['--http-threads', String(THREADS)] });
  let password = server.password;
  const rounds = 6;
  for (let round = 1; round <= rounds; round++) {
    const token = await newToken(server.url, password, ['/ext/info']);
    const { connections, verdicts } = await openChecked(server.url, token, SPREAD);
    t.same(
      [...verdicts, ...(await freshChecks(server.url, token, SPREAD))],
      Array(2 * SPREAD).fill('200'),
      `round ${round}: 200 everywhere before`,
    );
    const next = randomPassword();
    t.same(await changePassword(server.url, password, next), { success: true });
    password = next;
    const after = await Promise.all([
      ...connections.map((connection) => checkOn(connection, token)),
      ...Array.from({ length: SPREAD }, () => call(server.url, '/ext/info', token)),
    ]);
    t.same(after.map(verdict), Array(2 * SPREAD).fill(`401 ${REASONS.earlierGeneration}`), `round ${round}: refused everywhere after`);
    for (const connection of connections) connection.close();
  }
});

t.test('/ext/auth answered by the owner for a thread: the body arrives whole and the answer keeps its id, whatever the size', async (t) => {
  const server = shared;
  // Spread over the threads; bodies from a few bytes to near the 64 KiB limit, in one piece or chunked.
  for (const [i, pad] of [0, 1000, 60_000].entries()) {
    for (let k = 0; k < THREADS; k++) {
      const id = `call-${i}-${k}`;
      // Padded with white space, which JSON allows anywhere between tokens (a param of its own would be refused).
      const body = JSON.stringify({
        jsonrpc: '2.0',
        method: 'auth.newToken',
        id,
        params: { password: server.password, endpoints: ['/ext/info'] },
      }).replace('"params":', `"params":${' '.repeat(pad)}`);
      const whole = await request(server.url, '/ext/auth', { method: 'POST', body, headers: [['Content-Type', 'application/json']] });
      t.match(JSON.parse(whole.text), { id, result: { token: String } }, `${body.length} bytes, in one piece`);
      const chunked = await exchange(
        server.url,
        Buffer.concat([
          Buffer.from(
            'POST /ext/auth HTTP/1.1\r\nHost: api-auth\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
          ),
          ...[body.slice(0, 10), body.slice(10)].map((part) => Buffer.from(`${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`)),
          Buffer.from('0\r\n\r\n'),
        ]),
      );
      t.match(JSON.parse(chunked.text), { id, result: { token: String } }, `${body.length} bytes, chunked`);
    }
  }
  // One after another on kept-alive connections, which uWS reads into the same memory.
  const connections = Array.from({ length: SPREAD }, () => new KeepAliveConnection(server.url));
  for (let round = 0; round < 3; round++) {
    for (const [k, connection] of connections.entries()) {
      const id = round * 100 + k;
      const answer = await connection.request('/ext/auth', {
        method: 'POST',
        headers: [['Content-Type', 'application/json']],
        body: JSON.stringify({
          jsonrpc: '2.0',
          method: 'auth.newToken',
          id,
          params: { password: server.password, endpoints: ['/ext/info'] },
        }),
      });
      t.match(JSON.parse(answer.text), { id, result: { token: String } }, `kept alive: call ${id}`);
    }
  }
  for (const connection of connections) connection.close();
});

t.test("a scrape on any thread sums every thread's metrics and the owner's", async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ['--http-threads', String(THREADS)] });
  const token = await newToken(server.url, server.password, ['/ext/metrics']);
  const refused = 4 * THREADS;
  for (let i = 0; i < refused; i++) t.equal((await call(server.url, '/ext/info')).status, 401);
  // Two scrapes on fresh connections, so on two threads.
  const first = await scrape(server.url, token);
  const second = await scrape(server.url, token);
  for (const [name, samples] of [
    ['first', first],
    ['second', second],
  ] as const) {
    t.equal(samples.get('api_auth_verifications_total{outcome="no token"}'), refused, `${name}: the refusals of every thread`);
    t.equal(samples.get('api_auth_tokens_issued_total'), 1, `${name}: the owner's count`);
    t.ok(
      byThread(samples, THREADS).every((n) => n >= 4),
      `${name}: every thread's requests, apart: ${byThread(samples, THREADS)}`,
    );
    t.equal([...samples.keys()].filter((k) => k === 'process_cpu_user_seconds_total').length, 1, `${name}: the process's metrics, once`);
  }
  // Each scrape's own check counts: the second sees the first's, made on another thread.
  t.equal(first.get('api_auth_verifications_total{outcome="valid"}'), 1);
  t.equal(second.get('api_auth_verifications_total{outcome="valid"}'), 2);
});

t.test("a client that must wait is refused on every thread from its request's head; its body is never read", async (t) => {
  const server = shared;
  const guesser = '127.3.0.1';
  for (let i = 0; i < 3; i++) {
    const guess = await request(server.url, '/ext/auth', {
      method: 'POST',
      headers: [['Content-Type', 'application/json']],
      localAddress: guesser,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'auth.newToken', params: { password: 'wrong', endpoints: ['*'] }, id: i }),
    });
    t.equal(JSON.parse(guess.text).error?.code, -32000, `wrong password ${i + 1}`);
  }
  // Heads that promise a body and never send it: only a refusal made from the head answers them.
  const head = Buffer.from('POST /ext/auth HTTP/1.1\r\nHost: api-auth\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n');
  const refusals = await Promise.all(Array.from({ length: SPREAD }, () => exchange(server.url, head, 5000, guesser)));
  for (const refusal of refusals) {
    t.equal(refusal.status, 429);
    // At most the 10 s the third wrong password started; how much less depends on how long
    // this machine took since, which no verdict may depend on.
    t.match(refusal.headers['retry-after'], /^([1-9]|10)$/);
    t.match(JSON.parse(refusal.text), { error: { code: -32005 }, id: null });
  }
  const token = await newToken(server.url, server.password, ['/ext/metrics']);
  t.equal((await scrape(server.url, token)).get('api_auth_password_throttled_total'), SPREAD, 'each refusal counted once');
});

t.test("the log lines of every thread come out whole, in one stream; the upstream's failure is warned of once", async (t) => {
  const server = await startServer(t, {
    auth: false,
    args: ['--upstream', `http://127.0.0.1:${await closedPort()}`, '--log-level', 'debug', '--http-threads', String(THREADS)],
  });
  const count = 20 * THREADS;
  const answers = await Promise.all(
    Array.from({ length: count }, () =>
      request(server.url, '/ext/bc/C/rpc', {
        method: 'POST',
        body: INFO_BODY,
        headers: [['Content-Type', 'application/json']],
      }),
    ),
  );
  t.same(
    answers.map((a) => a.status),
    Array(count).fill(502),
  );
  const failures = (): LogLine[] => server.logs.filter((l) => l.msg === 'the upstream node did not answer');
  await server.waitForLog(() => failures().length === count);
  t.same(
    server.logs.filter((l) => l.raw !== undefined),
    [],
    'every line is one JSON object: none cut into or run together',
  );
  t.same(failures().filter((l) => l.level === 'warn').length, 1, 'one warning for the process, whichever thread saw it first');
  t.same(new Set(failures().map((l) => l.thread)), new Set(Array.from({ length: THREADS }, (_, i) => i + 1)), 'each line names its thread');
});

/** Resolves once connecting to `port` is refused: the server has stopped listening. */
async function refused(port: number): Promise<void> {
  for (;;) {
    const outcome = await new Promise<'refused' | 'accepted'>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve('accepted');
      });
      socket.once('error', () => resolve('refused'));
    });
    if (outcome === 'refused') return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

t.test('SIGTERM with requests in flight on every thread: each is answered, new connections are refused, exit 0', async (t) => {
  const held: Array<() => void> = [];
  const count = SPREAD;
  let arrived!: () => void;
  const allArrived = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const upstream = await startUpstream(t, () => (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    held.push(() => echo(req, res, body));
    if (held.length === count) arrived();
  });
  const server = await startServer(t, { auth: false, args: ['--upstream', upstream.url, '--http-threads', String(THREADS)] });
  const before = byThread(await scrape(server.url), THREADS);
  const answers = Array.from({ length: count }, (_, i) =>
    request(server.url, `/ext/bc/C/rpc?n=${i}`, {
      method: 'POST',
      body: INFO_BODY,
      headers: [['Content-Type', 'application/json']],
    }),
  );
  await allArrived;
  const during = byThread(await scrape(server.url), THREADS).map((n, i) => n - before[i]);
  t.ok(
    during.every((n) => n >= 2),
    `every thread holds requests in flight: ${during}`,
  );

  server.child.kill('SIGTERM');
  await refused(server.port);
  t.pass('new connections are refused once the stop has begun');
  for (const answer of held) answer();
  const responses = await Promise.all(answers);
  t.same(
    responses.map((r) => r.status),
    Array(count).fill(200),
    'every request in flight was answered',
  );
  t.same(
    responses.map((r) => JSON.parse(r.text).url),
    Array.from({ length: count }, (_, i) => `/ext/bc/C/rpc?n=${i}`),
  );
  const exit = await server.waitForExit();
  t.same(exit, { code: 0, signal: null }, 'exit 0');
  t.equal(server.logs.filter((l) => l.msg === 'stopped').length, 1, 'one "stopped" line');
  // The one warning expected: this gateway runs without --api-auth-required, an open proxy.
  t.same(
    server.logs.filter((l) => (l.level === 'error' || l.level === 'warn') && !/^the upstream node is open to anyone/.test(l.msg ?? '')),
    [],
    'nothing went wrong',
  );
  t.equal(server.stderr(), '', 'nothing on stderr');
});

t.test('--http-threads takes a whole number from 1 to 256, by default every core the process may use', async (t) => {
  const message = (bad: string): string =>
    `--http-threads must be a whole number from 1 to 256 (threads serving HTTP), not ${JSON.stringify(bad)}`;
  for (const bad of ['0', '257', 'two', '1.5', '-1', '', '+2', '2 ', '1e2', '0x2']) {
    t.throws(
      () => parseArgs([`--http-threads=${bad}`]),
      { name: 'UsageError', message: message(bad) },
      `${JSON.stringify(bad)}: refused, naming the flag`,
    );
  }
  const result = await runCli(t, ['--http-threads', '0', '--data-dir', join(tempDir(t), 'data')]);
  t.same(
    { code: result.code, stderr: result.stderr, stdout: result.stdout },
    { code: 2, stderr: `api-auth: ${message('0')}\n`, stdout: '' },
    'the command exits 2 with that one line, before anything listens',
  );
  const one = await startServer(t, { cheapChecks: true, args: ['--http-threads', '1'] });
  t.equal(one.listening.httpThreads, 1, '1: one thread');
  const token = await newToken(one.url, one.password, ['/ext/metrics']);
  t.same(byThread(await scrape(one.url, token), 2), [2, 0], '1: the main thread serves every request itself');
  const byDefault = await startServer(t, { cheapChecks: true });
  t.equal(byDefault.listening.httpThreads, Math.min(availableParallelism(), 256), 'by default, one per core the process may use');
  const help = await runCli(t, ['--help']);
  t.match(help.stdout, /--http-threads N +threads serving HTTP, 1 to 256/);
});

t.test('the library takes httpThreads too, checked the same way; a clock of its own needs one thread', async (t) => {
  const dir = tempDir(t);
  const quiet = { log: createLogger(() => undefined) };
  for (const bad of [0, 257, 1.5, '2x', -1]) {
    await t.rejects(
      startLibraryServer({ port: 0, dataDir: join(dir, 'data'), httpThreads: bad }, quiet),
      {
        code: 'API_AUTH_BAD_OPTION',
        option: 'httpThreads',
        message: `httpThreads must be a whole number from 1 to 256 (threads serving HTTP), not ${JSON.stringify(bad)}`,
      },
      `httpThreads ${JSON.stringify(bad)}`,
    );
  }
  await t.rejects(
    startLibraryServer({ port: 0, dataDir: join(dir, 'data') }, { ...quiet, clock: () => 0 }),
    {
      code: 'API_AUTH_BAD_OPTION',
      option: 'clock',
      message: "clock: HTTP threads tell time by the system's clock; a clock of your own needs httpThreads: 1",
    },
    'a clock of its own, with every core by default',
  );
  const lines: string[] = [];
  const server = await startLibraryServer(
    { port: 0, dataDir: join(dir, 'data'), httpThreads: THREADS },
    { log: createLogger((line) => lines.push(line)) },
  );
  t.equal((await request(`http://127.0.0.1:${server.port}`, '/ext/health')).status, 200, 'in process, on threads');
  await server.stop();
  await server.closed;
  t.same(
    lines.map((line) => JSON.parse(line).msg),
    ['listening', 'stopped'],
    'its lines through the logger it was given',
  );
});

// The thread runtime and the acceptor, with HTTP threads that fail on demand (api-auth
// has no request that makes a thread fail): test/helpers/threads-server.js.
const DRIVER = join(ROOT, 'test', 'helpers', 'threads-server.js');

async function startDriver(t: Test): Promise<{ run: Running; base: string }> {
  const run = launch(t, ['2'], DRIVER);
  const listening = await run.waitForLog((l) => l.msg === 'listening');
  return { run, base: `http://127.0.0.1:${Number(listening.port)}` };
}

function failureLines(logs: LogLine[]): LogLine[] {
  return logs.filter((l) => l.msg === 'an HTTP thread failed; stopping');
}

t.test("the HTTP threads start with the process's flags, but without its loaders and preloads", async (t) => {
  // A node that embeds the library may start with loaders and preloads (a TypeScript
  // loader, an APM agent's --import), on its command line or in NODE_OPTIONS; the threads
  // run api-auth's own modules, and a thread that inherited them would start them all
  // again: under a TypeScript loader, most of a second of CPU per thread. Other flags
  // still apply on the threads.
  const dir = tempDir(t);
  const seen = join(dir, 'threads');
  const preload = (name: string): string => {
    const path = join(dir, name);
    writeFileSync(
      path,
      `${
        name.endsWith('.mjs')
          ? "import { appendFileSync } from 'node:fs'; import { isMainThread, workerData } from 'node:worker_threads';"
          : "const { appendFileSync } = require('node:fs'); const { isMainThread, workerData } = require('node:worker_threads');"
      }
appendFileSync(${JSON.stringify(seen)}, \`${name} \${isMainThread ? 'main' : typeof workerData?.thread === 'number' ? 'HTTP thread' : 'other thread'}\\n\`);
`,
    );
    return path;
  };
  const [cli, cliRequire, env] = [preload('argv.mjs'), preload('argv.cjs'), preload('env.cjs')];
  const flagsOf = async (run: Running): Promise<string[][]> => {
    const listening = await run.waitForLog((l) => l.msg === 'listening');
    const base = `http://127.0.0.1:${Number(listening.port)}`;
    // Fresh connections, so one on each thread.
    const answers = [JSON.parse((await request(base, '/exec-argv')).text), JSON.parse((await request(base, '/exec-argv')).text)];
    t.same(answers.map((a) => a.thread).sort(), [1, 2], 'both threads answered');
    t.same(await run.stop('SIGTERM'), { code: 0, signal: null }, 'a clean stop');
    return answers.map((a) => a.execArgv);
  };
  const ran = (): string[] =>
    readFileSync(seen, 'utf8')
      .split('\n')
      .filter((line) => line !== '');

  const flags = await flagsOf(
    launch(t, ['2'], DRIVER, {
      nodeFlags: [`--import=${pathToFileURL(cli).href}`, '--dns-result-order=ipv4first', '--require', cliRequire, '--no-deprecation'],
      nodeOptions: `--require=${env} --no-warnings`,
    }),
  );
  t.same(flags, Array(2).fill(['--dns-result-order=ipv4first', '--no-deprecation']), 'each thread has the other flags of the command line');
  // Node runs the --require preloads on a thread of its own too (workerData null) when
  // an --import needs its module hooks; that thread is not api-auth's.
  t.ok(
    ['argv.mjs main', 'argv.cjs main', 'env.cjs main'].every((line) => ran().includes(line)),
    `each preload ran on the main thread: ${ran()}`,
  );
  t.same(
    ran().filter((line) => line.endsWith('HTTP thread')),
    [],
    'and on no HTTP thread',
  );

  // Flags Node takes for a process but not for a thread hold for every thread already.
  const before = ran().length;
  t.same(
    await flagsOf(
      launch(t, ['2'], DRIVER, { nodeFlags: ['--stack-trace-limit=50', '--max-old-space-size=512'], nodeOptions: `--require=${env}` }),
    ),
    [[], []],
    "V8's flags on the command line: the threads start, without them",
  );
  t.same(ran().slice(before), ['env.cjs main'], 'the preload of NODE_OPTIONS ran on the main thread only');
});

const FAILURES: ReadonlyArray<readonly [path: string, error: RegExp, answered: boolean]> = [
  ['/throw', /^HTTP thread [12] failed: thrown in a handler$/, true],
  ['/throw-later', /^HTTP thread [12] failed: thrown in a timer$/, false],
  ['/reject-later', /^HTTP thread [12] failed: a rejection nobody handled$/, false],
  ['/exit', /^HTTP thread [12] failed: process\.exit\(3\) was called on HTTP thread [12]$/, true],
];

for (const [path, error, answered] of FAILURES) {
  t.test(
    `a thread that fails (GET ${path}) stops the process in order: the other thread's requests answered, one error line, exit 1`,
    async (t) => {
      const { run, base } = await startDriver(t);
      // One connection after the other: one on each thread.
      const slow = request(base, '/slow?ms=700');
      await run.waitForLog((l) => l.msg === 'holding a request');
      const failing = request(base, path).then(
        (r) => r.status,
        () => 'closed',
      );
      const exit = await run.waitForExit();
      t.same(exit, { code: 1, signal: null }, 'exit 1: no abort, no segfault');
      t.equal((await slow).status, 200, 'the request in flight on the other thread was answered');
      t.equal(
        await failing,
        answered ? 500 : 'closed',
        answered ? 'the failing request got a 500' : "the failing request's connection was closed",
      );
      const lines = failureLines(run.logs);
      t.equal(lines.length, 1, 'one line says which thread failed and why');
      t.equal(lines[0]?.level, 'error');
      t.match(lines[0]?.error, error);
      t.ok(
        run.logs.some((l) => l.msg === 'stopped'),
        'then the process stopped in order',
      );
      t.equal(run.stderr(), '', 'nothing on stderr');
    },
  );
}

t.test('a thread that stops responding is noticed; when it cannot end, the process kills itself rather than abort', async (t) => {
  const { run, base } = await startDriver(t);
  const hung = request(base, '/hang', { timeoutMs: 30_000 }).then(
    (r) => r.status,
    () => 'closed',
  );
  t.equal(await request(base, '/').then((r) => r.status), 200, 'the other thread still serves');
  const exit = await run.waitForExit(30_000);
  t.same(exit, { code: null, signal: 'SIGKILL' }, 'killed: the one hard stop that does not abort');
  t.equal(await hung, 'closed');
  const lines = failureLines(run.logs);
  t.equal(lines.length, 1);
  t.match(lines[0]?.error, /^HTTP thread [12] stopped responding \(no heartbeat for 5 s\)$/);
  t.match(
    run.logs.find((l) => l.msg === 'HTTP threads did not stop in time; killing the process'),
    { level: 'error', threads: [lines[0]?.thread] },
  );
  t.equal(run.stderr(), '', 'nothing on stderr');
});
