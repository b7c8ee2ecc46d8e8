// Options from three places besides the defaults: the flags, API_AUTH_*
// variables of the environment, and a JSON config file (--config-file) whose keys are
// the flags without their dashes. A flag beats the environment, the environment beats
// the file, the file beats the default. A mistake in any of them is one line naming the
// source and the key (exit 2), and a password comes from none of them, only from its
// file. The options are checked without reading a file: the TLS files at start.
import t from 'tap';
import type { Test } from 'tap';
import { writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, startServer } from '../../build/host/index.js';
import type { ServerOptions } from '../../build/host/index.js';
import { launch, tempDir } from '../helpers/server.js';
import type { CliResult } from '../helpers/server.js';
import { closedPort } from '../helpers/upstream.js';

const quiet = { log: { debug() {}, info() {}, warn() {}, error() {} } };

/** A config file in `t`'s folder holding `content` (JSON unless a string). */
function configFile(t: Test, content: unknown): string {
  const path = join(tempDir(t), 'api-auth.json');
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

/** The options parseArgs gives, or the line the CLI would print for its refusal. */
function parsed(args: readonly string[], env: Record<string, string> = {}): ServerOptions | string {
  try {
    const command = parseArgs(args, env);
    return command.action === 'serve' ? command.options : command.action;
  } catch (error) {
    return `api-auth: ${(error as Error).message} (exit ${(error as { exitCode?: number }).exitCode})`;
  }
}

/** The CLI with `env` beside the test's environment, to its exit; one that listens is stopped there. */
async function runWith(t: Test, args: readonly string[], env: Record<string, string>): Promise<CliResult> {
  const run = launch(t, args, undefined, { env });
  const listened = await run
    .waitForLog((l) => l.msg === 'listening', 10_000)
    .then(
      () => true,
      () => false,
    );
  const exit = listened ? await run.stop('SIGTERM') : await run.exited;
  return { ...exit, stdout: run.stdout(), stderr: run.stderr(), logs: run.logs };
}

t.test('each option is an API_AUTH_ variable and a config file key, read as its flag is', async (t) => {
  const dir = tempDir(t);
  const password = join(dir, 'password');
  t.same(
    parsed([], {
      API_AUTH_HTTP_PORT: '0',
      API_AUTH_REQUIRED: 'true',
      API_AUTH_PASSWORD_FILE: '~/password',
      API_AUTH_TOKEN_LIFETIME: '90s',
      API_AUTH_PUBLIC_ENDPOINTS: '/ext/health, /ext/info',
      API_AUTH_DATA_DIR: dir,
      API_AUTH_HTTP_TLS_ENABLED: 'false',
    }),
    {
      port: '0',
      authRequired: true,
      passwordFile: join(homedir(), 'password'),
      tokenLifetime: '90s',
      publicEndpoints: ['/ext/health', '/ext/info'],
      dataDir: dir,
      tlsEnabled: false,
    },
    "the environment: the flag's name in upper snake case, its own api-auth- not repeated; the text read as the flag's",
  );
  const file = configFile(t, {
    'http-port': 0,
    'api-auth-required': true,
    'api-auth-password-file': password,
    'api-auth-token-lifetime': '90s',
    'api-auth-public-endpoints': ['/ext/health'],
    'trusted-proxies': '10.0.0.0/8,127.0.0.1',
    upstream: 'http://127.0.0.1:9652',
    'upstream-max-body': 2048,
    'ws-idle-timeout': 30,
    'api-auth-query-token': 'true',
  });
  t.same(
    parsed(['--config-file', file]),
    {
      port: 0,
      authRequired: true,
      passwordFile: password,
      tokenLifetime: '90s',
      publicEndpoints: ['/ext/health'],
      trustedProxies: ['10.0.0.0/8', '127.0.0.1'],
      upstream: 'http://127.0.0.1:9652',
      upstreamMaxBody: 2048,
      wsIdleTimeout: 30,
      queryToken: true,
    },
    "the config file: a string as the flag's text, a number, true/false or an array as startServer takes it",
  );
  t.same(parsed([], { API_AUTH_CONFIG_FILE: file }), parsed(['--config-file', file]), 'the environment may name the config file too');

  // The service starts with them: a token lifetime from the file, a port from the environment.
  writeFileSync(password, 'a-password-from-a-file', { mode: 0o600 });
  const served = parseArgs([], {
    API_AUTH_CONFIG_FILE: configFile(t, { 'api-auth-required': true, 'api-auth-password-file': password }),
    API_AUTH_HTTP_PORT: '0',
    API_AUTH_DATA_DIR: join(dir, 'data'),
  });
  t.equal(served.action, 'serve');
  if (served.action !== 'serve') return;
  const server = await startServer(served.options, quiet);
  t.teardown(() => server.stop());
  const answer = await fetch(`http://127.0.0.1:${server.port}/ext/auth`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      method: 'auth.newToken',
      params: { password: 'a-password-from-a-file', endpoints: ['*'] },
      id: 1,
    }),
  });
  t.match(await answer.json(), { result: { token: String } }, 'auth is on, with the password file the config file names');
});

t.test('a flag beats the environment, the environment beats the config file, the file beats the default', async (t) => {
  const file = configFile(t, { 'http-port': 3333, 'log-level': 'warn', 'metrics-path': '/file/metrics' });
  const env = { API_AUTH_CONFIG_FILE: file, API_AUTH_HTTP_PORT: '2222', API_AUTH_LOG_LEVEL: 'error' };
  t.same(
    parsed(['--http-port', '1111'], env),
    { port: '1111', logLevel: 'error', metricsPath: '/file/metrics' },
    'flag, environment, file',
  );
  t.same(parsed([], env), { port: '2222', logLevel: 'error', metricsPath: '/file/metrics' }, 'without the flag: the environment');
  t.same(
    parsed([], { API_AUTH_CONFIG_FILE: file }),
    { port: 3333, logLevel: 'warn', metricsPath: '/file/metrics' },
    'without either: the file',
  );
  t.same(parsed([]), {}, 'without any: the defaults');
  t.same(
    parsed(['--http-port', '1111', '--config-file', file], { API_AUTH_CONFIG_FILE: '/nonexistent.json' }),
    { port: '1111', logLevel: 'warn', metricsPath: '/file/metrics' },
    '--config-file beats API_AUTH_CONFIG_FILE',
  );

  // The same through the command itself: the port it listens on says which one won.
  const [flag, environment, inFile] = [await closedPort(), await closedPort(), await closedPort()];
  const data = ['--data-dir', join(tempDir(t), 'data')];
  const portFile = configFile(t, { 'http-port': inFile });
  const listened = async (args: string[], vars: Record<string, string>): Promise<unknown> =>
    (await runWith(t, [...data, ...args], vars)).logs.find((l) => l.msg === 'listening')?.port;
  t.equal(
    await listened(['--http-port', String(flag)], { API_AUTH_HTTP_PORT: String(environment), API_AUTH_CONFIG_FILE: portFile }),
    flag,
    'the CLI: the flag',
  );
  t.equal(
    await listened([], { API_AUTH_HTTP_PORT: String(environment), API_AUTH_CONFIG_FILE: portFile }),
    environment,
    'the CLI: the environment',
  );
  t.equal(await listened(['--config-file', portFile], {}), inFile, 'the CLI: the file');
});

t.test('a true/false variable or flag takes the words systemd units write: 1/0, yes/no, on/off, in any case', async (t) => {
  const password = { API_AUTH_PASSWORD_FILE: '/run/api-auth/password' };
  const required = (options: ServerOptions | string): unknown => (typeof options === 'string' ? options : options.authRequired);
  for (const word of ['1', 'yes', 'YES', 'On', 'true', 'True']) {
    t.equal(required(parsed([], { ...password, API_AUTH_REQUIRED: word })), true, `API_AUTH_REQUIRED=${word}`);
    t.equal(
      required(parsed([`--api-auth-required=${word}`, '--api-auth-password-file', '/run/api-auth/password'])),
      true,
      `--api-auth-required=${word}`,
    );
  }
  for (const word of ['0', 'no', 'NO', 'off', 'false', 'FALSE']) {
    t.equal(required(parsed([], { ...password, API_AUTH_REQUIRED: word })), false, `API_AUTH_REQUIRED=${word}`);
    t.equal(required(parsed([`--api-auth-required=${word}`])), false, `--api-auth-required=${word}`);
  }
  t.equal(required(parsed(['--api-auth-required=0'], { ...password, API_AUTH_REQUIRED: '1' })), false, 'the flag still beats the variable');
});

t.test('a bad value from any source is one line naming the source and the key, exit 2', async (t) => {
  const file = (content: unknown): string => configFile(t, content);
  const cases: [string, string[], Record<string, string>, RegExp][] = [
    [
      'a flag',
      ['--http-port', '70000'],
      {},
      /^api-auth: --http-port must be a whole number from 0 to 65535 \(0 picks a free port\), not "70000" \(exit 2\)$/,
    ],
    [
      'a variable',
      [],
      { API_AUTH_HTTP_PORT: '70000' },
      /^api-auth: API_AUTH_HTTP_PORT \(environment\) must be a whole number from 0 to 65535 \(0 picks a free port\), not "70000" \(exit 2\)$/,
    ],
    [
      'a config file key',
      ['--config-file', file({ 'http-port': 70000 })],
      {},
      /^api-auth: "http-port" \(config file \/\S+\/api-auth\.json\) must be a whole number from 0 to 65535 \(0 picks a free port\), not 70000 \(exit 2\)$/,
    ],
    [
      'a true/false variable',
      [],
      { API_AUTH_REQUIRED: 'enabled' },
      /^api-auth: API_AUTH_REQUIRED \(environment\) must be true or false \(or yes\/no, on\/off, 1\/0\), not "enabled" \(exit 2\)$/,
    ],
    [
      'a true/false variable of a number but 1 or 0',
      [],
      { API_AUTH_QUERY_TOKEN: '2', API_AUTH_UPSTREAM: 'http://127.0.0.1:9652' },
      /^api-auth: API_AUTH_QUERY_TOKEN \(environment\) must be true or false \(or yes\/no, on\/off, 1\/0\), not "2" \(exit 2\)$/,
    ],
    [
      'a duration in the file',
      ['--config-file', file({ 'api-auth-token-lifetime': '1d' })],
      {},
      /^api-auth: "api-auth-token-lifetime" \(config file \S+\) must be a duration in whole seconds from 1s to 8760h, .*not "1d" \(exit 2\)$/,
    ],
    [
      'a size in the environment',
      [],
      { API_AUTH_UPSTREAM: 'http://127.0.0.1:9652', API_AUTH_UPSTREAM_MAX_BODY: '2GiB' },
      /^api-auth: API_AUTH_UPSTREAM_MAX_BODY \(environment\) must be a size from 1 byte to 1024MiB: .*not "2GiB" \(exit 2\)$/,
    ],
    [
      'a relation across sources',
      [],
      { API_AUTH_REQUIRED: 'true' },
      /^api-auth: API_AUTH_REQUIRED \(environment\) needs --api-auth-password-file, the file holding the service password \(it is generated when missing\) \(exit 2\)$/,
    ],
    [
      'an option within another',
      ['--config-file', file({ 'upstream-timeout': '5s' })],
      {},
      /^api-auth: "upstream-timeout" \(config file \S+\) sets how requests are proxied to the node, and there is no --upstream: /,
    ],
  ];
  for (const [name, args, env, line] of cases) t.match(parsed(args, env), line, name);

  // The command itself: the line alone on stderr, exit 2, nothing listening.
  for (const [args, env, line] of [
    [[], { API_AUTH_HTTP_PORT: '70000' }, /^api-auth: API_AUTH_HTTP_PORT \(environment\) must be a whole number from 0 to 65535/],
    [
      ['--config-file', file({ 'http-port': 'x' })],
      {},
      /^api-auth: "http-port" \(config file \S+\) must be a whole number from 0 to 65535/,
    ],
  ] as [string[], Record<string, string>, RegExp][]) {
    const result = await runWith(t, args, env);
    t.equal(result.code, 2, 'exit 2');
    t.match(result.stderr, line);
    t.equal(result.stderr.split('\n').length, 2, 'one line');
    t.notOk(
      result.logs.some((l) => l.msg === 'listening'),
      'nothing listened',
    );
  }
});

t.test('a config file with an unknown key, or that is not one JSON object, is refused with one line naming it', async (t) => {
  const cases: [string, unknown, RegExp][] = [
    [
      'an unknown key',
      { 'http-prot': 9650 },
      /^api-auth: "http-prot" \(config file \S+\) is not an option; the keys are the flags without their dashes, such as "http-port" \(run api-auth --help to list them\) \(exit 2\)$/,
    ],
    ['a key spelt as the option, not the flag', { httpPort: 9650 }, /^api-auth: "httpPort" \(config file \S+\) is not an option/],
    ['a key with the dashes', { '--http-port': 9650 }, /^api-auth: "--http-port" \(config file \S+\) is not an option/],
    [
      'a config file naming another',
      { 'config-file': '/etc/other.json' },
      /^api-auth: "config-file" \(config file \S+\) is not an option: a config file cannot name another/,
    ],
    ['a null value', { 'http-port': null }, /^api-auth: "http-port" \(config file \S+\) is null; give a value, or leave the key out/],
    [
      'not JSON',
      'http-port = 9650',
      /^api-auth: config file \S+ is not JSON(?: \(at byte \d+\))?; write one JSON object, such as \{"http-port": 9650\} \(exit 2\)$/,
    ],
    [
      'an array',
      [{ 'http-port': 9650 }],
      /^api-auth: config file \S+ must hold one JSON object, such as \{"http-port": 9650\}, not an array/,
    ],
  ];
  for (const [name, content, line] of cases) t.match(parsed(['--config-file', configFile(t, content)]), line, name);
  const missing = join(tempDir(t), 'missing.json');
  t.equal(
    parsed(['--config-file', missing]),
    `api-auth: --config-file ${missing} does not exist; give the path of a JSON config file (exit 2)`,
  );
  t.equal(parsed(['--config-file=']), 'api-auth: --config-file must not be empty (exit 2)');
  t.equal(
    parsed([], { API_AUTH_CONFIG_FILE: '' }),
    'api-auth: API_AUTH_CONFIG_FILE (environment) must not be empty; give the path of a JSON config file, or unset it (exit 2)',
  );
  t.equal(
    parsed([], { API_AUTH_CONFIG_FILE: missing }),
    `api-auth: API_AUTH_CONFIG_FILE (environment) ${missing} does not exist; give the path of a JSON config file (exit 2)`,
  );

  const result = await runWith(t, ['--config-file', configFile(t, { 'http-port': 0, 'data-dirr': '/tmp' })], {});
  t.equal(result.code, 2, 'the CLI: exit 2');
  t.match(result.stderr, /^api-auth: "data-dirr" \(config file \S+\) is not an option; .*\n$/);
  t.equal(result.stderr.split('\n').length, 2, 'the CLI: one line');
  t.notOk(
    result.logs.some((l) => l.msg === 'listening'),
    'the CLI: nothing listened',
  );
});

t.test('a password by flag, environment or config file key is refused, naming how to give it', async (t) => {
  const secret = 'not-to-be-printed-7f3a';
  const cases: [string, string[], Record<string, string>, string][] = [
    [
      'the flag',
      ['--api-auth-password', secret],
      {},
      'api-auth: --api-auth-password is refused: a password on the command line can be read by ' +
        'every user of the machine; write it in a file only this user may read, and give --api-auth-password-file (exit 2)',
    ],
    [
      'the flag, =',
      [`--cluster-etcd-password=${secret}`],
      {},
      'api-auth: --cluster-etcd-password is refused: a password on the command line can be ' +
        'read by every user of the machine; write it in a file only this user may read, and give --cluster-etcd-password-file (exit 2)',
    ],
    [
      'the environment',
      [],
      { API_AUTH_PASSWORD: secret },
      'api-auth: API_AUTH_PASSWORD (environment) is refused: a password in the environment ' +
        'is passed on to every child process; write it in a file only this user may read, and give API_AUTH_PASSWORD_FILE or --api-auth-password-file (exit 2)',
    ],
    [
      "the environment, etcd's",
      [],
      { API_AUTH_CLUSTER_ETCD_PASSWORD: secret },
      'api-auth: API_AUTH_CLUSTER_ETCD_PASSWORD (environment) is refused: ' +
        'a password in the environment is passed on to every child process; write it in a file only this user may read, and give ' +
        'API_AUTH_CLUSTER_ETCD_PASSWORD_FILE or --cluster-etcd-password-file (exit 2)',
    ],
  ];
  for (const [name, args, env, line] of cases) t.equal(parsed(args, env), line, name);
  for (const key of ['api-auth-password', 'cluster-etcd-password']) {
    const path = configFile(t, { [key]: secret });
    t.equal(
      parsed(['--config-file', path]),
      `api-auth: "${key}" (config file ${path}) is refused: a password is taken only from a file of its own, ` +
        `which only this user may read; write it in one and give "${key}-file" (exit 2)`,
      `the config file's ${key}`,
    );
  }
  const result = await runWith(t, ['--http-port', '0'], { API_AUTH_PASSWORD: secret });
  t.equal(result.code, 2, 'the CLI: exit 2');
  t.match(result.stderr, /^api-auth: API_AUTH_PASSWORD \(environment\) is refused: .*--api-auth-password-file\n$/);
  t.notOk(result.stderr.includes(secret) || result.stdout.includes(secret), 'the password is never printed');
});

t.test('an API_AUTH_ variable that is no option changes nothing, and the start warns of it', async (t) => {
  const result = await runWith(t, ['--http-port', '0', '--data-dir', join(tempDir(t), 'data')], {
    API_AUTH_HTTP_PROT: '1',
    API_AUTH_XYZ: 'value-of-xyz-41',
  });
  const listening = result.logs.find((l) => l.msg === 'listening');
  t.ok(listening, 'it serves');
  t.not(listening?.port, 1);
  const warning = result.logs.find(
    (l) => l.level === 'warn' && l.msg === 'environment variables named like options are not options, and change nothing',
  );
  t.same(warning?.names, ['API_AUTH_HTTP_PROT', 'API_AUTH_XYZ'], 'the warning names them');
  t.notOk(result.stdout.includes('value-of-xyz-41'), 'not their values');
});

t.test('the options are checked without reading a file: the TLS pair is read, and refused, at start', async (t) => {
  const dir = tempDir(t);
  const missing = join(dir, 'missing.crt');
  const args = [
    '--http-port',
    '0',
    '--data-dir',
    join(dir, 'data'),
    '--http-tls-enabled',
    '--http-tls-cert-file',
    missing,
    '--http-tls-key-file',
    join(dir, 'k'),
  ];
  const options = parsed(args);
  t.same(
    options,
    { port: '0', dataDir: join(dir, 'data'), tlsEnabled: true, tlsCertFile: missing, tlsKeyFile: join(dir, 'k') },
    'parsing reads neither file',
  );
  await t.rejects(
    startServer(options as ServerOptions, quiet),
    {
      name: 'OptionError',
      option: 'tlsCertFile',
      message: `tlsCertFile ${missing} does not exist; give the certificate chain's PEM file`,
    },
    'the start reads them, before anything listens',
  );
  const result = await runWith(t, [], {
    API_AUTH_HTTP_PORT: '0',
    API_AUTH_DATA_DIR: join(dir, 'data'),
    API_AUTH_HTTP_TLS_ENABLED: 'true',
    API_AUTH_HTTP_TLS_CERT_FILE: missing,
    API_AUTH_HTTP_TLS_KEY_FILE: join(dir, 'k'),
  });
  t.equal(result.code, 2, 'the CLI: exit 2');
  t.equal(
    result.stderr,
    `api-auth: API_AUTH_HTTP_TLS_CERT_FILE (environment) ${missing} does not exist; give the certificate chain's PEM file\n`,
    "the start's message names the file as it was given",
  );
});
