// The command line as an operator meets it: help and version, every way a command line
// is refused (one stderr line, exit 2, nothing listening), the password file's life,
// flag spellings, and a clean stop on SIGTERM and SIGINT.
//
// Command lines that are refused, or only parsed, go through the library's parseArgs and
// startServer, whose errors carry the line the CLI prints; a few run the CLI itself, to
// pin that it prints that line alone and exits 2 before listening.
import t, { type Test } from 'tap';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { startServer as startLibraryServer, USAGE } from '../../build/host/index.js';
import { authUrl, newToken } from '../helpers/auth.js';
import { jsonrpc, parseResponse, postJson, request, type HttpResponse } from '../helpers/http.js';
import { SILENT, cliLine, optionsOf, recordingLogger, refusalOf, serveInProcess } from '../helpers/library.js';
import { VERSION, launch, randomPassword, runCli, startServer, tempDir, type CliResult, type LogLine } from '../helpers/server.js';

// Two tests at a time: each has its servers and files of its own.
t.jobs = 2;

const FLAGS = [
  '--http-host',
  '--http-port',
  '--api-auth-required',
  '--api-auth-password-file',
  '--api-auth-token-lifetime',
  '--data-dir',
  '--help',
  '--version',
];

/**
 * For the tests of the password file, whose subject is not the HTTP threads: one thread,
 * whose start costs about a third less CPU time. The stops keep the default.
 */
const ONE_THREAD = ['--http-threads', '1'];

const isListening = (l: LogLine): boolean => l.msg === 'listening';

/**
 * A refusal of the command line (UsageError) or of the start (OptionError), with a stable
 * code, whose CLI line is one line naming the problem.
 */
function expectUsageError(t: Test, error: Error | undefined, mentions: readonly string[]): void {
  if (error === undefined) {
    t.fail('it started');
    return;
  }
  const code = (error as { code?: unknown }).code;
  t.ok(
    code === 'API_AUTH_BAD_COMMAND_LINE' || code === 'API_AUTH_BAD_OPTION',
    `a bad command line or option: ${error.name} ${String(code)}`,
  );
  const line = cliLine(error);
  t.match(line, /^api-auth: \S[^\n]*$/, 'one line, starting with "api-auth: "');
  t.ok(
    mentions.some((m) => line.includes(m)),
    `the line names the problem (one of ${JSON.stringify(mentions)}): ${line}`,
  );
}

/** The CLI's refusal: exit code 2, the error's line alone on stderr, never listening. */
function expectCliRefusal(t: Test, result: CliResult, error: Error | undefined): void {
  t.equal(result.code, 2, `exit code 2 (stderr: ${JSON.stringify(result.stderr)})`);
  t.equal(
    result.stderr,
    error === undefined ? 'no error in the library' : `${cliLine(error)}\n`,
    "stderr is exactly the library's error, on one line",
  );
  t.notOk(result.logs.some(isListening), 'nothing listened');
}

t.test('--help prints the usage naming every flag and exits 0', async (t) => {
  const result = await runCli(t, ['--help']);
  t.equal(result.code, 0);
  t.equal(result.stdout, USAGE, 'the usage the library exports, exactly');
  for (const flag of FLAGS) t.ok(result.stdout.includes(flag), `usage names ${flag}`);
  t.equal(result.stderr, '');
  t.notOk(result.logs.some(isListening), 'help does not start the server');
});

t.test('--version prints "api-auth <version>" and exits 0', async (t) => {
  const result = await runCli(t, ['--version']);
  t.equal(result.code, 0);
  t.equal(result.stdout, `api-auth ${VERSION}\n`);
  t.equal(result.stderr, '');
});

t.test('every bad command line gets one stderr line, exit code 2 and nothing listening', async (t) => {
  const dir = tempDir(t);
  const data = join(dir, 'data');
  mkdirSync(data, { mode: 0o700 });
  const password = (name: string, content: string): string => {
    const path = join(dir, name);
    writeFileSync(path, content, { mode: 0o600 });
    return path;
  };
  // Root reads any file whatever its mode; /proc/self/mem is one whose reads fail (EIO).
  const unreadable = process.getuid?.() === 0 ? '/proc/self/mem' : password('unreadable', randomPassword());
  if (unreadable !== '/proc/self/mem') chmodSync(unreadable, 0o000);
  const empty = password('empty', ' \n\t \r\n');
  const long = password('long', 'a'.repeat(1025));
  const longCodePoints = password('long-code-points', '\u00e9'.repeat(1025));
  const missingFolder = join(dir, 'no-such-folder', 'password');
  const auth = (file: string): string[] => [
    '--http-port',
    '0',
    '--data-dir',
    data,
    '--api-auth-required',
    '--api-auth-password-file',
    file,
  ];
  const base = ['--http-port', '0', '--data-dir', data];

  const cases: [string, string[], string[]][] = [
    ['an unknown flag', [...base, '--bogus'], ['--bogus']],
    ['an unknown flag with a value', [...base, '--bogus=1'], ['--bogus']],
    ['a misspelt flag: the one meant is named', [...base, '--http-prot', '1'], ['--http-prot (did you mean --http-port?)']],
    [
      'a misspelt flag with a value: the value is not echoed',
      [...base, '--api-auth-pasword-file=s3cr3t-mark'],
      ['did you mean --api-auth-password-file?'],
    ],
    ['a single-dash flag', [...base, '-p', '1'], ['-p']],
    ['a port that is not a number', ['--http-port', 'abc', '--data-dir', data], ['--http-port', 'abc']],
    ['a port above 65535', ['--http-port', '65536', '--data-dir', data], ['--http-port', '65536']],
    ['a negative port', ['--http-port', '-1', '--data-dir', data], ['--http-port', '-1']],
    ['a fractional port', ['--http-port', '1.5', '--data-dir', data], ['--http-port', '1.5']],
    ['an empty port', ['--http-port=', '--data-dir', data], ['--http-port']],
    ['a value flag at the end with no value', ['--data-dir', data, '--http-port'], ['--http-port']],
    ['a lifetime without a unit', [...base, '--api-auth-token-lifetime', '10'], ['--api-auth-token-lifetime']],
    ['a lifetime that is not a duration', [...base, '--api-auth-token-lifetime', 'soon'], ['--api-auth-token-lifetime']],
    ['a lifetime of zero', [...base, '--api-auth-token-lifetime', '0s'], ['--api-auth-token-lifetime']],
    ['a lifetime under one second', [...base, '--api-auth-token-lifetime', '500ms'], ['--api-auth-token-lifetime']],
    ['a lifetime over 8760h', [...base, '--api-auth-token-lifetime', '8761h'], ['--api-auth-token-lifetime']],
    ['a negative lifetime', [...base, '--api-auth-token-lifetime=-5s'], ['--api-auth-token-lifetime']],
    ['a lifetime in days (not a Go unit)', [...base, '--api-auth-token-lifetime', '1d'], ['--api-auth-token-lifetime']],
    ['a boolean that is not true or false', [...base, '--api-auth-required=enabled'], ['--api-auth-required']],
    ['a boolean given maybe', [...base, '--api-auth-required=maybe'], ['--api-auth-required']],
    ['a positional argument', [...base, 'serve'], ['unexpected argument (not shown']],
    ['a positional argument first', ['extra', ...base], ['unexpected argument (not shown']],
    ['auth on without a password file', [...base, '--api-auth-required'], ['--api-auth-password-file']],
    [
      'auth on with an empty password file path',
      [...base, '--api-auth-required', '--api-auth-password-file='],
      ['--api-auth-password-file'],
    ],
    ['an unreadable password file', auth(unreadable), [unreadable, '--api-auth-password-file']],
    ['a password file that is a directory', auth(dir), [dir, '--api-auth-password-file']],
    ['a password file empty after trimming', auth(empty), [empty, '--api-auth-password-file']],
    ['a password file over 1024 characters', auth(long), [long, '--api-auth-password-file']],
    ['a password file over 1024 code points (2050 bytes)', auth(longCodePoints), [longCodePoints, '--api-auth-password-file']],
    ['a password file whose folder is missing', auth(missingFolder), [join(dir, 'no-such-folder'), '--api-auth-password-file']],
  ];
  for (const [name, args, mentions] of cases) {
    await t.test(name, async (t) => {
      t.comment(`args: ${JSON.stringify(args)}`);
      expectUsageError(t, await refusalOf(args), mentions);
    });
  }
  // The CLI itself, on refusals of each kind: a flag, a value, a missing flag, and a
  // password file found wanting only when the service opens.
  for (const name of ['an unknown flag', 'a port above 65535', 'auth on without a password file', 'a password file empty after trimming']) {
    const [, args] = cases.find(([n]) => n === name)!;
    await t.test(`the CLI: ${name}`, async (t) => {
      expectCliRefusal(t, await runCli(t, args), await refusalOf(args));
    });
  }
});

t.test('a missing password file is generated: 32 letters and digits, mode 0600, path logged, password never printed', async (t) => {
  const server = await startServer(t, { generate: true, args: ONE_THREAD });
  const content = readFileSync(server.passwordFile, 'utf8');
  t.match(content, /^[A-Za-z0-9]{32}\n?$/, 'the file holds a 32-character alphanumeric password');
  t.equal(statSync(server.passwordFile).mode & 0o777, 0o600, 'the file has mode 0600');
  const generated = server.logs.find((l) => l.msg === 'generated a password file');
  t.ok(generated, 'the generation is logged');
  t.equal(generated?.level, 'info');
  t.equal(generated?.path, server.passwordFile, 'the log names the file');
  t.notOk(
    server.logs.some((l) => l.msg === 'password file is readable by other users'),
    'no readability warning for a 0600 file',
  );
  const token = await newToken(server.url, server.password, ['*']);
  t.ok(token, 'the generated password is the service password');
  const exit = await server.stop();
  t.equal(exit.code, 0);
  t.notOk(server.stdout().includes(server.password), 'the password is not on stdout');
  t.notOk(server.stderr().includes(server.password), 'the password is not on stderr');
  t.notOk(server.stdout().includes(token), 'the token is not logged');
});

t.test('an existing password file is never rewritten', async (t) => {
  const password = randomPassword();
  const server = await startServer(t, { password, fileContent: `${password}\n`, cheapChecks: true, args: ONE_THREAD });
  await newToken(server.url, password, ['*']);
  await server.stop();
  t.equal(readFileSync(server.passwordFile, 'utf8'), `${password}\n`);
  t.notOk(server.logs.some((l) => l.msg === 'generated a password file'));
});

t.test('a password file readable by group or others is warned about', async (t) => {
  for (const mode of [0o644, 0o640, 0o604]) {
    await t.test(`mode ${mode.toString(8)}`, async (t) => {
      const server = await serveInProcess(t, { mode, cheapChecks: true, args: ONE_THREAD });
      const warning = server.logs.find((l) => l.msg === 'password file is readable by other users');
      t.ok(warning, 'a warning is logged');
      t.equal(warning?.level, 'warn');
      t.equal(warning?.path, server.passwordFile, 'the warning names the file');
      t.notOk(JSON.stringify(server.logs).includes(server.password), 'the password is not logged');
    });
  }
});

t.test('the password file content is trimmed of leading and trailing white space only', async (t) => {
  const password = `inner space ${randomPassword()}`;
  const fileContent = ` \t\r\n${password} \r\n\t\n`;
  const server = await startServer(t, { password, fileContent, args: ONE_THREAD });
  t.notOk(
    server.logs.some((l) => l.msg === 'password file is readable by other users'),
    'no warning for a 0600 file',
  );
  t.ok(await newToken(server.url, password, ['*']), 'the trimmed password works');
  const raw = await jsonrpc(authUrl(server.url), 'auth.newToken', { password: fileContent, endpoints: ['*'] });
  t.same(raw.error, { code: -32000, message: 'incorrect password' }, 'the untrimmed content is not the password');
  await server.stop();
  t.notOk(server.stdout().includes(password) || server.stderr().includes(password), 'the password is never printed');
});

t.test('a password of 1024 code points (2048 bytes) is accepted, white space around it not counted', async (t) => {
  const password = '\u00e9'.repeat(1024);
  const server = await serveInProcess(t, { password, fileContent: `  ${password}  \n`, args: ONE_THREAD });
  t.ok(await newToken(server.url, password, ['/ext/info']));
});

t.test('flags take --name=value, --name value, bare booleans and =true/=false', async (t) => {
  await t.test('--name=value forms, =true, a duration with two units', async (t) => {
    const dir = tempDir(t);
    const file = join(dir, 'password');
    writeFileSync(file, 'equals-form-password', { mode: 0o600 });
    const run = launch(t, [
      '--http-host=127.0.0.1',
      '--http-port=0',
      `--data-dir=${dir}`,
      '--api-auth-required=true',
      `--api-auth-password-file=${file}`,
      '--api-auth-token-lifetime=1h30m',
    ]);
    const listening = await run.waitForLog(isListening);
    t.equal(listening.level, 'info');
    t.equal(listening.host, '127.0.0.1');
    t.type(listening.port, 'number');
    t.ok(Number(listening.port) > 0, 'port 0 logs the port actually bound');
    t.equal(new Date(String(listening.time)).toISOString(), listening.time, 'time is an ISO timestamp');
    const base = `http://127.0.0.1:${listening.port}`;
    const answer = await jsonrpc(authUrl(base), 'auth.noSuchMethod', {}, 1);
    t.equal(answer.error?.code, -32601, '/ext/auth is served: auth is on');
    t.ok(await newToken(base, 'equals-form-password', ['*']), 'the password file was read');
  });

  await t.test('--name value forms and a bare boolean', async (t) => {
    const dir = tempDir(t);
    const file = join(dir, 'password');
    writeFileSync(file, 'space-form-password', { mode: 0o600 });
    const options = optionsOf([
      '--http-host',
      '127.0.0.1',
      '--http-port',
      '0',
      '--data-dir',
      dir,
      '--api-auth-required',
      '--api-auth-password-file',
      file,
      '--api-auth-token-lifetime',
      '90s',
    ]);
    t.same(options, { host: '127.0.0.1', port: '0', dataDir: dir, authRequired: true, passwordFile: file, tokenLifetime: '90s' });
    const { log, lines } = recordingLogger();
    const server = await startLibraryServer(options, { log });
    t.teardown(() => server.stop());
    t.ok(lines.some(isListening), 'it listens');
    t.ok(await newToken(`http://127.0.0.1:${server.port}`, 'space-form-password', ['*']), 'auth is on and the password file was read');
  });

  await t.test('--api-auth-required=false turns auth off and needs no password file', async (t) => {
    const dir = tempDir(t);
    const options = optionsOf(['--http-port', '0', '--data-dir', dir, '--api-auth-required=false']);
    t.same(options, { port: '0', dataDir: dir, authRequired: false });
    const server = await startLibraryServer(options, { log: SILENT });
    t.teardown(() => server.stop());
    const base = `http://127.0.0.1:${server.port}`;
    const auth = await postJson(authUrl(base), { jsonrpc: '2.0', method: 'auth.newToken', params: {}, id: 1 });
    t.equal(auth.status, 404, '/ext/auth does not exist');
    const info = await jsonrpc(`${base}/ext/info`, 'info.getNodeVersion');
    t.same(info.result, { version: `api-auth/${VERSION}`, gitCommit: '', vmVersions: {} }, 'endpoints need no token');
  });
});

/** Opens a connection and sends a POST whose body arrives in two parts; `sent` once the first part is written. */
function slowRequest(
  port: number,
  path: string,
  body: string,
): {
  sent: Promise<void>;
  sendRest(): void;
  response: Promise<HttpResponse>;
} {
  const socket = connect({ host: '127.0.0.1', port });
  const half = Math.floor(body.length / 2);
  const sent = new Promise<void>((done, fail) => {
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body.slice(0, half)}`,
      (error) => (error ? fail(error) : done()),
    );
  });
  let received = Buffer.alloc(0);
  const response = new Promise<HttpResponse>((done, fail) => {
    socket.setTimeout(10_000, () => {
      socket.destroy();
      fail(new Error('no response within 10 s'));
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const parsed = parseResponse(received, false);
      if (parsed) {
        socket.destroy();
        done(parsed);
      }
    });
    socket.on('close', () => {
      const parsed = parseResponse(received, true);
      if (parsed) done(parsed);
      else fail(new Error(`closed before a complete response: ${JSON.stringify(received.toString())}`));
    });
    socket.on('error', () => undefined);
  });
  return { sent, sendRest: () => socket.write(body.slice(half)), response };
}

/**
 * Resolves once a new connection to `port` is refused; false when it never is within
 * `ms`. Outside the process, the closing of its listening socket shows only as refused
 * connections, so this tries one every few milliseconds.
 */
async function refusesConnections(port: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const refused = await new Promise<boolean>((done) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.on('connect', () => {
        socket.destroy();
        done(false);
      });
      socket.on('error', (error: NodeJS.ErrnoException) => done(error.code === 'ECONNREFUSED'));
    });
    if (refused) return true;
    await new Promise((retry) => setTimeout(retry, 10));
  }
  return false;
}

t.test('a SIGTERM as soon as the listening line is out is a clean stop too: exit 0, "stopped" logged', async (t) => {
  // The line is written before the start has returned; a signal that came in between
  // once ended the process at once. Several starts, as the gap is short.
  for (let round = 1; round <= 4; round++) {
    const server = await startServer(t, { auth: round % 2 === 0 });
    server.child.kill('SIGTERM');
    const exit = await server.waitForExit();
    t.same(exit, { code: 0, signal: null }, `round ${round}: exit code 0`);
    t.ok(
      server.logs.some((l) => l.msg === 'stopped'),
      `round ${round}: the stop is logged`,
    );
  }
});

/**
 * Resolves once the server's threads have received `count` requests besides the scrapes
 * that tell (each scrape counts itself): asks its metrics until they say so.
 */
async function headsReceived(base: string, count: number): Promise<void> {
  for (let scrapes = 1; ; scrapes++) {
    const text = (await request(base, '/ext/metrics')).text;
    const received = [...text.matchAll(/^api_auth_http_requests_total\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    if (received - scrapes >= count) return;
  }
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${signal} stops accepting, lets the in-flight request finish and exits 0`, async (t) => {
    const server = await startServer(t, { auth: false });
    const inFlight = slowRequest(
      server.port,
      '/ext/info',
      JSON.stringify({ jsonrpc: '2.0', method: 'info.getNetworkName', id: 'in-flight' }),
    );
    // The server has the in-flight request's head once some thread counts it among its
    // requests (a request on another connection may be read first, on another thread).
    await inFlight.sent;
    await headsReceived(server.url, 1);
    t.pass("the server has the in-flight request's head before the signal");
    server.child.kill(signal);
    t.ok(await refusesConnections(server.port, 4_000), 'new connections are refused after the signal');
    t.notOk(server.hasExited(), 'the process waits for the in-flight request');
    inFlight.sendRest();
    const response = await inFlight.response;
    t.equal(response.status, 200, 'the in-flight request is answered');
    t.same(JSON.parse(response.text), { jsonrpc: '2.0', result: { networkName: 'local' }, id: 'in-flight' });
    const exit = await server.waitForExit();
    t.same(exit, { code: 0, signal: null }, 'exit code 0');
    t.ok(
      server.logs.some((l) => l.msg === 'stopped'),
      'the stop is logged',
    );
  });
}
