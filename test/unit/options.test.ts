// One resolver of options for the library and the command line: the library's
// errors name the option (`passwordFile`), the command line's the flag
// (`--api-auth-password-file`), and each error is a class of the library's with a stable
// code. In-process: nothing here needs a child process.
import t from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import {
  ApiAuthError,
  ExitCode,
  ListenError,
  OperatorExitCode,
  OptionError,
  RpcCode,
  StateError,
  UsageError,
  createAuth,
  parseArgs,
  startServer,
} from '../../build/host/index.js';
import { tempDir } from '../helpers/server.js';

const quiet = { log: { debug() {}, info() {}, warn() {}, error() {} } };

t.test('createAuth names the option that is missing or bad, with code API_AUTH_BAD_OPTION', async (t) => {
  const dir = tempDir(t);
  const files = { passwordFile: join(dir, 'password'), dataDir: join(dir, 'data') };
  const cases: [string, unknown, string, RegExp][] = [
    ['no options at all', {}, 'passwordFile', /^passwordFile is required: the path of the service password's file/],
    ['no data folder', { passwordFile: files.passwordFile }, 'dataDir', /^dataDir is required/],
    [
      'a password file that is not a path',
      { ...files, passwordFile: 42 },
      'passwordFile',
      /^passwordFile must be the path of the password file, not 42$/,
    ],
    ['an empty data folder path', { ...files, dataDir: ' ' }, 'dataDir', /^dataDir must not be empty/],
    ['a lifetime in days', { ...files, tokenLifetime: '1d' }, 'tokenLifetime', /^tokenLifetime must be a duration/],
    [
      'a fractional lifetime',
      { ...files, tokenLifetime: 1.5 },
      'tokenLifetime',
      /^tokenLifetime must be a whole number of seconds, not 1\.5$/,
    ],
    [
      'public endpoints that are not a list',
      { ...files, publicEndpoints: '/ext/health' },
      'publicEndpoints',
      /^publicEndpoints must be an array/,
    ],
    [
      'a misspelt option',
      { ...files, passwordfile: 'x' },
      'passwordfile',
      /^passwordfile is not an option; the options are passwordFile, dataDir/,
    ],
  ];
  for (const [name, options, option, message] of cases) {
    await t.rejects(
      createAuth({ ...quiet, ...(options as object) } as unknown as Parameters<typeof createAuth>[0]),
      { name: 'OptionError', code: 'API_AUTH_BAD_OPTION', option, message },
      name,
    );
  }
});

t.test('startServer validates with the same resolver and names the option, before anything listens', async (t) => {
  const dir = tempDir(t);
  const cases: [string, object, string, RegExp][] = [
    ['a port out of range', { port: 70000 }, 'port', /^port must be a whole number from 0 to 65535 \(0 picks a free port\), not 70000$/],
    [
      'auth without a password file',
      { authRequired: true },
      'passwordFile',
      /^authRequired needs passwordFile, the file holding the service password/,
    ],
    [
      'an upstream that is not a URL',
      { upstream: 'localhost' },
      'upstream',
      /^upstream must be a URL such as http:\/\/127\.0\.0\.1:9652, not "localhost"$/,
    ],
    [
      'an upstream timeout of two hours',
      { upstreamTimeout: 7200 },
      'upstreamTimeout',
      /^upstreamTimeout must be a duration in whole seconds from 1s to 1h/,
    ],
    ['a body limit in GiB', { upstreamMaxBody: '2GiB' }, 'upstreamMaxBody', /^upstreamMaxBody must be a size from 1 byte to 1024MiB/],
    ['a log level that is not one', { logLevel: 'loud' }, 'logLevel', /^logLevel must be one of debug, info, warn, error, not "loud"$/],
    ['metrics at /ext/auth', { metricsPath: '/ext/auth' }, 'metricsPath', /^metricsPath must not be \/ext\/auth$/],
    [
      'a public endpoint the gate refuses',
      { publicEndpoints: ['/ext/./info'] },
      'publicEndpoints',
      /^publicEndpoints: "\/ext\/\.\/info" is not a path the gate serves/,
    ],
    [
      'a password file whose folder is missing',
      { authRequired: true, passwordFile: join(dir, 'missing', 'password'), dataDir: join(dir, 'data') },
      'passwordFile',
      /^passwordFile .*missing\/password: the file does not exist, and neither does its folder/,
    ],
  ];
  for (const [name, options, option, message] of cases) {
    await t.rejects(startServer({ dataDir: join(dir, 'data'), ...options }, quiet), { code: 'API_AUTH_BAD_OPTION', option, message }, name);
  }
});

t.test('the command line gets the same checks, naming its flags', async (t) => {
  const cases: [string[], string][] = [
    [['--http-port', '70000'], 'api-auth: --http-port must be a whole number from 0 to 65535 (0 picks a free port), not "70000"'],
    [
      ['--api-auth-required'],
      'api-auth: --api-auth-required needs --api-auth-password-file, the file holding the service password (it is generated when missing)',
    ],
    [['--upstream', 'localhost'], 'api-auth: --upstream must be a URL such as http://127.0.0.1:9652, not "localhost"'],
    [['--metrics-path', '/ext/auth'], 'api-auth: --metrics-path must not be /ext/auth'],
  ];
  for (const [args, line] of cases) {
    t.throws(() => parseArgs(args), { name: 'UsageError', code: 'API_AUTH_BAD_COMMAND_LINE', exitCode: 2 }, args.join(' '));
    try {
      parseArgs(args);
    } catch (error) {
      t.equal(`api-auth: ${(error as Error).message}`, line, `${args.join(' ')}: the line printed`);
    }
  }
  t.same(
    parseArgs(['--http-port=0', '--api-auth-token-lifetime', '1h30m']),
    { action: 'serve', options: { port: '0', tokenLifetime: '1h30m' } },
    'a good command line gives the options startServer takes',
  );
});

t.test('a data folder it cannot use is a StateError that names the option; a port in use, a ListenError', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'a-file');
  writeFileSync(file, 'x');
  const error = await createAuth({ ...quiet, passwordFile: join(dir, 'password'), dataDir: file }).catch((e: unknown) => e);
  t.ok(error instanceof StateError && error instanceof ApiAuthError, "a StateError, one of the library's errors");
  t.match(error, {
    code: 'API_AUTH_BAD_STATE',
    exitCode: ExitCode.Usage,
    message: `dataDir ${file} is not a folder; name a folder (it is created if missing)`,
  });
  t.equal(
    (error as StateError).describe((option) => (option === 'dataDir' ? '--data-dir' : option)),
    `--data-dir ${file} is not a folder; name a folder (it is created if missing)`,
    'the command line names its flag',
  );

  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => taken.close());
  const { port } = taken.address() as AddressInfo;
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  const refused = await startServer({ port, dataDir: join(dir, 'data') }, quiet).catch((e: unknown) => e);
  t.ok(refused instanceof ListenError, 'a ListenError');
  t.match(refused, {
    code: 'API_AUTH_CANNOT_LISTEN',
    message: new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use by another program .*choose another port$`),
  });
});

t.test('one table of codes: JSON-RPC errors and exit codes as the product contract has them', async (t) => {
  t.same(RpcCode, {
    ParseError: -32700,
    InvalidRequest: -32600,
    MethodNotFound: -32601,
    InvalidParams: -32602,
    InternalError: -32603,
    IncorrectPassword: -32000,
    ResourceLimit: -32041,
    Throttled: -32005,
    Busy: -32043,
    UpstreamUnavailable: -32044,
    UpstreamTimeout: -32045,
    Unavailable: -32046,
    InsufficientScope: -32047,
    RateLimited: -32005,
    ClientNotAllowed: -32048,
  });
  t.same(ExitCode, { Ok: 0, Failed: 1, Usage: 2 });
  t.same(OperatorExitCode, { Ok: 0, Refused: 1, Failed: 1, Usage: 2, Unreachable: 3 });
  t.ok(new OptionError('port', (name) => `${name('port')} is bad`) instanceof ApiAuthError);
  t.ok(new UsageError('bad') instanceof ApiAuthError);
});
