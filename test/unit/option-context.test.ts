// Flags that would change nothing where they stand are refused, not ignored:
// the proxy's settings without a proxy, /ext/auth named as public, an upstream without
// its port. The command line and the library share the resolver, so both are checked
// here in-process: parseArgs throws the UsageError the CLI prints (exit 2), startServer
// rejects with an OptionError naming the option, before anything listens.
import t from 'tap';
import { join } from 'node:path';
import { createAuth, parseArgs, startServer } from '../../build/host/index.js';
import { tempDir } from '../helpers/server.js';

const quiet = { log: { debug() {}, info() {}, warn() {}, error() {} } };

function printed(args: string[]): string | undefined {
  try {
    parseArgs(args);
    return undefined;
  } catch (error) {
    return `api-auth: ${(error as Error).message} (exit ${(error as { exitCode?: number }).exitCode})`;
  }
}

t.test('the command line refuses flags that mean nothing in context: one line, exit 2', async (t) => {
  const cases: [string[], string][] = [
    [
      ['--upstream-timeout', '5s'],
      'api-auth: --upstream-timeout sets how requests are proxied to the node, and there is no --upstream: ' +
        'give --upstream (such as http://127.0.0.1:9652), or leave --upstream-timeout out (exit 2)',
    ],
    [
      ['--upstream-max-body', '2MiB'],
      'api-auth: --upstream-max-body sets how requests are proxied to the node, and there is no --upstream: ' +
        'give --upstream (such as http://127.0.0.1:9652), or leave --upstream-max-body out (exit 2)',
    ],
    ...[
      '--api-auth-query-token',
      '--ws-max-message=1MiB',
      '--ws-idle-timeout=30s',
      '--ws-max-sessions=5',
      '--ws-max-sessions-per-token=2',
      '--ws-max-sessions-per-client=2',
    ].map((flag): [string[], string] => {
      const name = flag.split('=')[0];
      return [
        [flag],
        `api-auth: ${name} sets how requests are proxied to the node, and there is no --upstream: give --upstream ` +
          `(such as http://127.0.0.1:9652), or leave ${name} out (exit 2)`,
      ];
    }),
    [
      ['--api-auth-public-endpoints', '/ext/auth'],
      'api-auth: --api-auth-public-endpoints: /ext/auth needs no token already (it is where ' +
        'tokens are had, behind the password); leave it out (exit 2)',
    ],
    [
      ['--api-auth-public-endpoints', '/ext/health,/ext/auth'],
      'api-auth: --api-auth-public-endpoints: /ext/auth needs no token already ' +
        '(it is where tokens are had, behind the password); leave it out (exit 2)',
    ],
    [
      ['--api-auth-public-endpoints', '/ext/auth/health'],
      'api-auth: --api-auth-public-endpoints: /ext/auth/health needs no token ' + "already (it is api-auth's own); leave it out (exit 2)",
    ],
    [
      ['--api-auth-public-endpoints', '/ext/auth/live'],
      'api-auth: --api-auth-public-endpoints: /ext/auth/live needs no token ' + "already (it is api-auth's own); leave it out (exit 2)",
    ],
    [['--metrics-path', '/ext/auth/live'], 'api-auth: --metrics-path must not be /ext/auth/live (exit 2)'],
    [
      ['--upstream', 'http://127.0.0.1'],
      "api-auth: --upstream must name the node's port, such as http://127.0.0.1:9652 (write :80 if that " +
        'port is really meant), not "http://127.0.0.1" (exit 2)',
    ],
    [
      ['--upstream', 'https://node.example/'],
      "api-auth: --upstream must name the node's port, such as http://127.0.0.1:9652 (write :443 if " +
        'that port is really meant), not "https://node.example/" (exit 2)',
    ],
    [
      ['--upstream', 'http://[::1]'],
      "api-auth: --upstream must name the node's port, such as http://127.0.0.1:9652 (write :80 if that " +
        'port is really meant), not "http://[::1]" (exit 2)',
    ],
    [
      ['--metrics-path', 'metrics'],
      'api-auth: --metrics-path takes exact absolute paths such as /ext/metrics (no "*", no query), ' + 'not "metrics" (exit 2)',
    ],
  ];
  for (const [args, line] of cases) t.equal(printed(args), line, args.join(' '));
});

t.test('the same flags where they mean something are taken', async (t) => {
  const good: string[][] = [
    ['--upstream', 'http://127.0.0.1:9652', '--upstream-timeout', '5s', '--upstream-max-body', '2MiB'],
    [
      '--upstream',
      'http://127.0.0.1:9652',
      '--api-auth-query-token',
      '--ws-max-message=1MiB',
      '--ws-idle-timeout=30s',
      '--ws-max-sessions=5',
      '--ws-max-sessions-per-token=2',
      '--ws-max-sessions-per-client=2',
    ],
    ['--upstream', 'http://127.0.0.1:80'],
    ['--upstream', 'https://node.example:443'],
    ['--upstream', 'http://[::1]:9652/'],
    ['--upstream', 'http://localhost:9652'],
    ['--api-auth-public-endpoints', '/ext/health,/ext/info'],
    ['--metrics-path', '/ops/metrics'],
  ];
  for (const args of good) t.equal(printed(args), undefined, args.join(' '));
});

t.test('the library names the option, for startServer and createAuth alike', async (t) => {
  const dir = tempDir(t);
  const dataDir = join(dir, 'data');
  const cases: [object, string, RegExp][] = [
    [{ upstreamTimeout: 5 }, 'upstreamTimeout', /^upstreamTimeout sets how requests are proxied to the node, and there is no upstream/],
    [{ upstreamMaxBody: 1024 }, 'upstreamMaxBody', /^upstreamMaxBody sets how requests are proxied to the node, and there is no upstream/],
    [{ upstream: 'http://127.0.0.1' }, 'upstream', /^upstream must name the node's port/],
    [{ publicEndpoints: ['/ext/auth'] }, 'publicEndpoints', /^publicEndpoints: \/ext\/auth needs no token already/],
  ];
  for (const [options, option, message] of cases) {
    await t.rejects(
      startServer({ dataDir, port: 0, ...options }, quiet),
      { name: 'OptionError', code: 'API_AUTH_BAD_OPTION', option, message },
      JSON.stringify(options),
    );
  }
  await t.rejects(
    createAuth({ ...quiet, passwordFile: join(dir, 'password'), dataDir, publicEndpoints: ['/ext/auth'] }),
    { name: 'OptionError', option: 'publicEndpoints', message: /^publicEndpoints: \/ext\/auth needs no token already/ },
    'createAuth',
  );
});
