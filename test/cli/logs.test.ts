// Structured logs: JSON lines with a level, filtered by --log-level; one audit line per
// /ext/auth call (method, outcome, client address, the token's serial and generation
// when known); never a password or a token.
import t from 'tap';
import { call, newToken } from '../helpers/auth.js';
import { post, request, rpc } from '../helpers/http.js';
import { launch, randomPassword, runCli, startServer, type LogLine, type Server } from '../helpers/server.js';
import { closedPort } from '../helpers/upstream.js';

const LEVELS = ['debug', 'info', 'warn', 'error'];
/**
 * For the audit lines, which the thread that owns the state writes whatever the number of
 * HTTP threads: one thread, whose start costs about a third less CPU time. The lines of
 * the proxy and the levels keep the default threads, whose lines reach one writer.
 */
const ONE_THREAD = ['--http-threads', '1'];

const audits = (logs: LogLine[]): LogLine[] => logs.filter((l) => l.msg === 'audit');

/**
 * Every line `server` logged for the calls answered so far. The lines come on a pipe,
 * apart from the answers: this makes one more audited call, from an address of its
 * own, and waits for its line, which the server wrote after all of theirs. Returns the
 * lines before it.
 */
async function linesSoFar(server: Server): Promise<LogLine[]> {
  const marker = '127.4.9.9';
  await post(server.url, '/ext/auth', JSON.stringify(rpc('auth.revokeToken', { password: 'marker', token: 'marker' }, 0)), {
    localAddress: marker,
  });
  const line = await server.waitForLog((l) => l.msg === 'audit' && l.client === marker);
  return server.logs.slice(0, server.logs.indexOf(line));
}

t.test('each /ext/auth call leaves one audit line, and no line holds a secret', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const secrets: string[] = [server.password];
  const client = '127.4.0.1';

  const issued = JSON.parse(
    (
      await post(
        server.url,
        '/ext/auth',
        JSON.stringify(rpc('auth.newToken', { password: server.password, endpoints: ['/ext/info'] }, 1)),
        { localAddress: client },
      )
    ).text,
  );
  const token: string = issued.result.token;
  secrets.push(token);
  const wrong = 'wrong-' + randomPassword();
  secrets.push(wrong);
  await post(server.url, '/ext/auth', JSON.stringify(rpc('auth.newToken', { password: wrong, endpoints: ['*'] }, 2)), {
    localAddress: client,
  });
  await post(server.url, '/ext/auth', JSON.stringify(rpc('auth.newToken', { password: server.password, endpoints: ['relative'] }, 3)), {
    localAddress: client,
  });
  await post(server.url, '/ext/auth', JSON.stringify(rpc('auth.revokeToken', { password: server.password, token }, 4)), {
    localAddress: client,
  });
  await post(server.url, '/ext/auth', JSON.stringify(rpc('auth.revokeToken', { password: server.password, token: 'garbage' }, 5)), {
    localAddress: client,
  });
  const next = randomPassword();
  secrets.push(next);
  await post(server.url, '/ext/auth', JSON.stringify(rpc('auth.changePassword', { oldPassword: server.password, newPassword: next }, 6)), {
    localAddress: client,
  });
  await post(
    server.url,
    '/ext/auth',
    JSON.stringify(rpc('auth.changePassword', { oldPassword: server.password, newPassword: randomPassword() }, 7)),
    { localAddress: client },
  );

  const lines = audits(await linesSoFar(server));
  const expected = [
    { level: 'info', method: 'auth.newToken', outcome: 'ok', client, generation: 0 },
    { level: 'warn', method: 'auth.newToken', outcome: 'incorrect password', client },
    { level: 'warn', method: 'auth.newToken', outcome: 'invalid params', client },
    { level: 'info', method: 'auth.revokeToken', outcome: 'ok', client, revoked: true, generation: 0 },
    { level: 'info', method: 'auth.revokeToken', outcome: 'ok', client, revoked: false },
    { level: 'info', method: 'auth.changePassword', outcome: 'ok', client, generation: 1 },
    { level: 'warn', method: 'auth.changePassword', outcome: 'incorrect password', client },
  ];
  t.equal(lines.length, expected.length, 'one audit line per call');
  expected.forEach((want, i) => t.match(lines[i], want, `audit line ${i + 1}: ${JSON.stringify(lines[i])}`));
  const serial = Buffer.from(token, 'base64url').readBigUInt64BE(5);
  t.equal(lines[0].serial, Number(serial), "the issued token's serial");
  t.equal(lines[3].serial, Number(serial), "the revoked token's serial");
  t.equal(lines[1].serial, undefined, 'no serial when nothing was issued');
  t.equal(lines[4].serial, undefined, 'no serial for a token that was not one');
  t.type(lines[0].expiry, 'number');
  t.type(lines[0].time, 'string');

  for (const secret of secrets) t.notOk(server.stdout().includes(secret), 'no log line holds a password or a token');
  t.notOk(server.stderr().includes(server.password), 'nor stderr');
});

t.test('a throttled call in a batch is audited as throttled', async (t) => {
  const server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const client = '127.4.0.2';
  const wrong = rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, 1);
  await post(server.url, '/ext/auth', JSON.stringify([wrong, wrong, wrong, wrong, wrong]), { localAddress: client });
  const lines = await server.waitForLines((l) => l.msg === 'audit' && l.client === client, 5);
  t.same(
    lines.map((l) => l.outcome),
    ['incorrect password', 'incorrect password', 'incorrect password', 'throttled', 'throttled'],
  );
  t.ok(lines.every((l) => l.client === client));
});

t.test('every line is JSON with a time, a level and a message; info is the default level', async (t) => {
  const port = await closedPort();
  const server = await startServer(t, { args: ['--upstream', `http://127.0.0.1:${port}`] });
  const token = await newToken(server.url, server.password, ['*']);
  for (let i = 0; i < 3; i++) await call(server.url, '/ext/info', token);
  const logs = await linesSoFar(server);
  for (const line of logs) {
    t.ok(
      line.raw === undefined && typeof line.time === 'string' && LEVELS.includes(line.level!) && typeof line.msg === 'string',
      `a structured line: ${JSON.stringify(line)}`,
    );
  }
  t.notOk(
    logs.some((l) => l.level === 'debug'),
    'no debug line at the default level',
  );
  t.equal(logs.filter((l) => l.msg === 'the upstream node did not answer').length, 1, 'the first upstream failure is a warning');
});

t.test('--log-level debug adds the debug lines', async (t) => {
  const port = await closedPort();
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', `http://127.0.0.1:${port}`, '--log-level', 'debug'] });
  const token = await newToken(server.url, server.password, ['*']);
  // Two HTTP threads: their lines reach the writer in either order, so each request waits
  // for the line of the one before it. The proxy logs after it answers, so the answer alone
  // would not do: the next request could fail first, on the other thread, and be the warning.
  const isFailure = (l: LogLine): boolean => l.msg === 'the upstream node did not answer';
  for (let i = 0; i < 3; i++) {
    await call(server.url, '/ext/info', token);
    await server.waitForLog(() => server.logs.filter(isFailure).length > i);
  }
  const failures = server.logs.filter(isFailure);
  t.same(
    failures.map((l) => l.level),
    ['warn', 'debug', 'debug'],
    'each later failure is a debug line',
  );
  t.ok(
    failures.every((l, i) => i === 0 || Date.parse(l.time!) >= Date.parse(failures[i - 1]!.time!)),
    'each line has the time of its failure',
  );
  t.match(failures[1], { kind: 'refused', code: 'ECONNREFUSED' });
});

t.test('--log-level warn and error leave out what is below', async (t) => {
  for (const level of ['warn', 'error']) {
    const port = await closedPort();
    const run = launch(t, ['--http-port', String(port), '--data-dir', '/nonexistent', '--log-level', level]);
    // No "listening" line at these levels: try the port until it answers.
    let answered = false;
    for (let i = 0; i < 500 && !answered; i++) {
      answered = await request(`http://127.0.0.1:${port}`, '/ext/health').then(
        () => true,
        () => false,
      );
      if (!answered) await new Promise((retry) => setTimeout(retry, 10));
    }
    t.ok(answered, `${level}: it serves`);
    const exit = await run.stop();
    t.equal(exit.code, 0);
    t.same(run.logs, [], `${level}: nothing logged (the info lines are below ${level})`);
  }
});

t.test('a bad --log-level is refused at start', async (t) => {
  const result = await runCli(t, ['--http-port', '0', '--log-level', 'verbose']);
  t.equal(result.code, 2);
  t.equal(result.stderr, 'api-auth: --log-level must be one of debug, info, warn, error, not "verbose"\n');
});
