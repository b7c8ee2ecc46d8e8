// The operator commands against a running node: `api-auth token new`, `token revoke`,
// `password change`. Passwords come from a file, stdin or a no-echo prompt, never argv;
// a token to revoke comes the same ways, or from argv with a warning; secrets that are
// not UTF-8 are refused; results print plainly or as JSON; exit codes tell success (0),
// refusal (1), a bad command line (2) and an unreachable node (3) apart.
//
// Most commands run in this process, through runOperatorCommand, the entry the binary
// hands its arguments and its stdout, stderr and stdin to: a process start costs more
// than the command. The binary itself runs where the process is the point: its exit code
// and output for each kind of end (the same as the entry's), a pipe on stdin, and a
// terminal's prompts.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { USAGE } from '../../build/host/cli/flags.js';
import { REASONS, TOKEN_PATTERN, call, expectGranted, expectRefused, tryPassword } from '../helpers/auth.js';
import { MAIN, PROGRAM_ENV, ROOT, randomPassword, startServer, tempDir, untracked } from '../helpers/server.js';
import { runOperator } from '../helpers/operator.js';
import { closedPort } from '../helpers/upstream.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `api-auth ...args` in a process of its own, to its end, with `stdin` (or an empty,
 * closed stdin): the binary as an operator runs it.
 */
function spawned(args: readonly string[], stdin: string | Buffer = ''): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(...untracked(process.execPath, [MAIN, ...args]), { cwd: ROOT, env: PROGRAM_ENV, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

/**
 * The same command in this process, through the entry the binary calls with its
 * arguments (build/host/main.js sets its exit code to what runOperatorCommand resolves
 * with, and hands it the process's stdout, stderr and stdin): `stdin` is a stream that is
 * not a terminal, holding those bytes. The spawned tests below pin that wiring.
 */
const api = runOperator;

// Two tests at a time: each has calls to the node out most of its time.
t.jobs = 2;

/**
 * The operator's commands are these tests' subject, not the node's HTTP threads
 * (test/http/threads.test.ts): nodes on one thread, whose start costs about a third less CPU time.
 */
const ONE_THREAD = ['--http-threads', '1'];

const server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
const dir = tempDir(t);
const uri = ['--uri', server.url];

function secretFile(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content, { mode: 0o600 });
  return path;
}

t.test('token new prints the token alone; it grants exactly the endpoints asked for', async (t) => {
  // The binary itself: exit code 0, stdout the token alone.
  const run = await spawned(['token', 'new', ...uri, '--password-file', server.passwordFile, '--endpoints', '/ext/info,/ext/bc/*']);
  t.equal(run.code, 0, run.stderr);
  t.equal(run.stderr, '');
  t.match(run.stdout, /^[A-Za-z0-9_-]{76}\n$/, 'one line: the token');
  const token = run.stdout.trim();
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info');
  expectRefused(t, await call(server.url, '/ext/health', token), REASONS.notGranted, '/ext/health');
});

t.test('token new --json prints the result object; --endpoints may be repeated', async (t) => {
  const run = await api([
    'token',
    'new',
    ...uri,
    '--password-file',
    server.passwordFile,
    '--endpoints',
    '/ext/info',
    '--endpoints=/ext/health',
    '--json',
  ]);
  t.equal(run.code, 0, run.stderr);
  const result = JSON.parse(run.stdout) as { token: string };
  t.match(result.token, TOKEN_PATTERN);
  expectGranted(t, await call(server.url, '/ext/health', result.token), '/ext/health');
});

t.test('the password can come from stdin', async (t) => {
  // The binary itself, reading the pipe that is its stdin.
  const run = await spawned(['token', 'new', ...uri, '--password-stdin', '--endpoints', '*'], `${server.password}\n`);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout.trim(), TOKEN_PATTERN);
});

t.test('token revoke TOKEN: exit 0, the token is refused from then on, and a warning says why argv is the weaker choice', async (t) => {
  const issued = await api(['token', 'new', ...uri, '--password-file', server.passwordFile, '--endpoints', '*']);
  const token = issued.stdout.trim();
  expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'before');
  const run = await api(['token', 'revoke', token, ...uri, '--password-file', server.passwordFile]);
  t.equal(run.code, 0, run.stderr);
  t.equal(run.stdout, 'token revoked\n');
  t.equal(
    run.stderr,
    'api-auth: warning: a token on the command line can be read by every user of this machine while the command runs ' +
      '(ps, /proc/PID/cmdline), and stays in your shell history; use --token-file PATH or --token-stdin\n',
  );
  expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, 'after');
  const json = await api(['token', 'revoke', token, ...uri, '--password-file', server.passwordFile, '--json']);
  t.equal(json.code, 0);
  t.same(
    JSON.parse(json.stdout),
    { success: true, revocation: 'already revoked' },
    'revoking again says it was revoked already, and succeeds',
  );
});

t.test('token revoke takes the token from --token-file, --token-stdin or "-", without a warning', async (t) => {
  const ways: [string, (token: string) => [string[], string]][] = [
    ['--token-file', (token) => [['--token-file', secretFile('token', `\n ${token}\n`), '--password-file', server.passwordFile], '']],
    ['--token-stdin', (token) => [['--token-stdin', '--password-file', server.passwordFile], `${token}\n`]],
    ['"-"', (token) => [['-', '--password-file', server.passwordFile], token]],
    [
      '--token-file with the password from stdin',
      (token) => [['--token-file', secretFile('token2', token), '--password-stdin'], `${server.password}\n`],
    ],
  ];
  for (const [way, argsFor] of ways) {
    const token = (await api(['token', 'new', ...uri, '--password-file', server.passwordFile, '--endpoints', '*'])).stdout.trim();
    const [args, stdin] = argsFor(token);
    const run = await api(['token', 'revoke', ...args, ...uri], stdin);
    t.equal(run.code, 0, `${way}: ${run.stderr}`);
    t.equal(run.stdout, 'token revoked\n', way);
    t.equal(run.stderr, '', `${way}: no warning`);
    expectRefused(t, await call(server.url, '/ext/info', token), REASONS.revoked, way);
  }
});

t.test('secrets that are not UTF-8 are refused (exit 2), never sent with U+FFFD in place of their bytes', async (t) => {
  const node = server;
  const at = uri;
  const notUtf8 = Buffer.concat([Buffer.from(node.password), Buffer.from([0xed, 0xa0, 0x80])]);
  const file = secretFile('not-utf8', notUtf8);
  const cases: [string, string[], Buffer, RegExp][] = [
    [
      'a password file',
      ['token', 'new', '--endpoints', '*', '--password-file', file],
      Buffer.alloc(0),
      /--password-file .*not-utf8: the file is not UTF-8 text/,
    ],
    ['a password on stdin', ['token', 'new', '--endpoints', '*', '--password-stdin'], notUtf8, /--password-stdin: stdin is not UTF-8 text/],
    [
      'a new password file',
      [
        'password',
        'change',
        '--password-file',
        node.passwordFile,
        '--new-password-file',
        secretFile('new-not-utf8', Buffer.from([0x70, 0x77, 0xff])),
      ],
      Buffer.alloc(0),
      /--new-password-file .*new-not-utf8: the file is not UTF-8 text; save the password as UTF-8/,
    ],
    [
      'a new password on stdin',
      ['password', 'change', '--password-file', node.passwordFile, '--new-password-stdin'],
      Buffer.from([0x70, 0x77, 0xff, 0x0a]),
      /--new-password-stdin: stdin is not UTF-8 text/,
    ],
    [
      'a token file',
      ['token', 'revoke', '--password-file', node.passwordFile, '--token-file', file],
      Buffer.alloc(0),
      /--token-file .*: the file is not UTF-8 text; save the token as UTF-8/,
    ],
  ];
  const runs = await Promise.all(cases.map(([, args, stdin]) => api([...args, ...at], stdin)));
  for (const [i, [name, , , message]] of cases.entries()) {
    const run = runs[i];
    t.equal(run.code, 2, `${name}: exit 2 (${run.stderr.trim()})`);
    t.match(run.stderr, message, `${name}: says so`);
  }
  t.ok(await tryPassword(node.url, node.password), 'the password is unchanged');
});

t.test("a refusal: exit 1 and the node's reason (plain and --json); nothing is printed on stdout in plain mode", async (t) => {
  // A node of its own: two wrong passwords and the shared node's client allowance (3 at
  // once, a check in flight counted as wrong) would refuse the right one whenever a test
  // beside this one (t.jobs) had a check of its own in flight.
  const server = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const uri = ['--uri', server.url];
  const wrong = secretFile('wrong', 'not the password\n');
  const plain = await api(['token', 'new', ...uri, '--password-file', wrong, '--endpoints', '*']);
  t.equal(plain.code, 1);
  t.equal(plain.stdout, '');
  t.equal(plain.stderr, 'api-auth: the node refused: incorrect password (-32000)\n');
  const json = await api(['token', 'new', ...uri, '--password-file', wrong, '--endpoints', '*', '--json']);
  t.equal(json.code, 1);
  t.same(JSON.parse(json.stdout), { error: { code: -32000, message: 'incorrect password' } });
  const invalid = await api(['token', 'new', ...uri, '--password-file', server.passwordFile, '--endpoints', 'ext/info']);
  t.equal(invalid.code, 1, 'an invalid endpoint is refused by the node');
  t.match(
    invalid.stderr,
    /^api-auth: the node refused: endpoint "ext\/info" is not one of "\*" \(every path\), "\/" \(the root alone.*\(-32602\)\n$/,
  );
});

t.test('an unreachable node: exit 3 with what went wrong', async (t) => {
  const port = await closedPort();
  const run = await api(['token', 'new', '--uri', `http://127.0.0.1:${port}`, '--password-file', server.passwordFile, '--endpoints', '*']);
  t.equal(run.code, 3);
  t.match(run.stderr, new RegExp(`^api-auth: cannot reach http://127\\.0\\.0\\.1:${port}/ext/auth: connection refused`));
  const json = await api([
    'token',
    'new',
    '--uri',
    `http://127.0.0.1:${port}`,
    '--password-file',
    server.passwordFile,
    '--endpoints',
    '*',
    '--json',
  ]);
  t.equal(json.code, 3);
  t.match(JSON.parse(json.stdout), { error: { message: /connection refused/ } });
  const authOff = await startServer(t, { auth: false, args: ONE_THREAD });
  const off = await api(['token', 'new', '--uri', authOff.url, '--password-file', server.passwordFile, '--endpoints', '*']);
  t.equal(off.code, 3, 'a node without /ext/auth');
  t.match(off.stderr, /answered 404.*--api-auth-required/);
});

t.test('bad command lines: exit 2, one line on stderr, nothing sent', async (t) => {
  const cases: [string, string[], RegExp][] = [
    [
      'a password on the command line',
      ['token', 'new', '--endpoints', '*', '--password', 'hunter2'],
      /--password is not taken.*--password-file/,
    ],
    ['a password with =', ['token', 'new', '--endpoints', '*', '--password=hunter2'], /--password is not taken/],
    ['a new password on the command line', ['password', 'change', '--new-password', 'x'], /--new-password is not taken/],
    ['no password and no terminal', ['token', 'new', '--endpoints', '*'], /no password: give --password-file PATH or --password-stdin/],
    ['token new without endpoints', ['token', 'new', '--password-file', server.passwordFile], /--endpoints/],
    [
      'token revoke without a token',
      ['token', 'revoke', '--password-file', server.passwordFile],
      /no token: give --token-file PATH or --token-stdin/,
    ],
    ['a token twice', ['token', 'revoke', 'a', '--token-file', 'x', '--password-file', server.passwordFile], /give the token once/],
    [
      '--token-file and --token-stdin',
      ['token', 'revoke', '--token-file', 'x', '--token-stdin', '--password-file', server.passwordFile],
      /give --token-file or --token-stdin, not both/,
    ],
    [
      '"-" and --token-stdin',
      ['token', 'revoke', '-', '--token-stdin', '--password-file', server.passwordFile],
      /give --token-stdin or "-", not both/,
    ],
    [
      'the token and the password from stdin',
      ['token', 'revoke', '--token-stdin', '--password-stdin'],
      /--password-stdin and --token-stdin cannot both read stdin/,
    ],
    [
      'a token for token new',
      ['token', 'new', '--endpoints', '*', '--token-file', 'x'],
      /--token-file and --token-stdin belong to "api-auth token revoke"/,
    ],
    [
      'a missing token file',
      ['token', 'revoke', '--token-file', join(dir, 'missing'), '--password-file', server.passwordFile],
      /--token-file .*missing: cannot read it \(ENOENT\)/,
    ],
    [
      'an empty token file',
      ['token', 'revoke', '--token-file', secretFile('empty-token', '\n'), '--password-file', server.passwordFile],
      /the token from --token-file .* is empty/,
    ],
    [
      'token revoke with two tokens',
      ['token', 'revoke', 'a', 'b', '--password-file', server.passwordFile],
      /unexpected argument \(not shown: it may be a secret\); api-auth token revoke takes one argument, the token/,
    ],
    [
      'an unknown verb',
      ['token', 'show'],
      /unknown command \(not shown: it may be a secret\); the commands are "token new", "token list", "token revoke" or "token rotate"/,
    ],
    ['a slip of a verb', ['token', 'lsit'], /unknown command "token lsit" \(did you mean "token list"\?\); the commands are/],
    [
      '--label for token list',
      ['token', 'list', '--label', 'x', '--password-file', server.passwordFile],
      /--label belongs to "api-auth token new"/,
    ],
    [
      '--expires-in for token revoke',
      ['token', 'revoke', '--id', 't1', '--expires-in', '1h'],
      /--expires-in belongs to "api-auth token new"/,
    ],
    ['--methods for password change', ['password', 'change', '--methods', 'eth_*'], /--methods belongs to "api-auth token new"/],
    ['--id for token new', ['token', 'new', '--endpoints', '*', '--id', 't1'], /--id belongs to "api-auth token revoke"/],
    [
      '--id and a token',
      ['token', 'revoke', '--id', 't1', 'TOKEN', '--password-file', server.passwordFile],
      /give the token or its --id, not both/,
    ],
    [
      '--id and --token-file',
      ['token', 'revoke', '--id', 't1', '--token-file', 'x', '--password-file', server.passwordFile],
      /give the token or its --id, not both/,
    ],
    [
      'a bad --expires-in',
      ['token', 'new', '--endpoints', '*', '--expires-in', 'soon'],
      /--expires-in must be a duration such as 90s, 15m or 1h30m, or "never", not "soon"/,
    ],
    ['a zero --expires-in', ['token', 'new', '--endpoints', '*', '--expires-in', '0s'], /--expires-in must be a duration/],
    ['an unknown flag', ['token', 'new', '--endpoints', '*', '--bogus'], /unknown flag --bogus/],
    ['a bad --uri', ['token', 'new', '--endpoints', '*', '--uri', 'ftp://x'], /--uri/],
    ['a bad --timeout', ['token', 'new', '--endpoints', '*', '--timeout', '5'], /--timeout/],
    [
      'a missing password file',
      ['token', 'new', '--endpoints', '*', '--password-file', join(dir, 'missing')],
      /--password-file .*missing: cannot read it \(ENOENT\)/,
    ],
    ['an empty password file', ['token', 'new', '--endpoints', '*', '--password-file', secretFile('empty', ' \n')], /is empty/],
    [
      'both secrets from stdin',
      ['password', 'change', '--password-stdin', '--new-password-stdin'],
      /--password-stdin and --new-password-stdin cannot both read stdin/,
    ],
    [
      'a new password for token new',
      ['token', 'new', '--endpoints', '*', '--new-password-file', 'x'],
      /belong to "api-auth password change"/,
    ],
  ];
  const runs = await Promise.all(cases.map(([, args]) => api([...args, ...uri])));
  for (const [i, [name, , message]] of cases.entries()) {
    const run = runs[i];
    t.equal(run.code, 2, `${name}: exit 2 (${run.stderr.trim()})`);
    t.match(run.stderr, /^api-auth: [^\n]+\n$/, `${name}: one line`);
    t.match(run.stderr, message, `${name}: names the problem`);
    t.equal(run.stdout, '', `${name}: nothing on stdout`);
  }
});

t.test(
  'the binary ends as its entry does: the same exit code, stdout and stderr, refused, unreachable or a bad command line',
  async (t) => {
    // Refused for its endpoint, not its password: a wrong password here would count
    // towards this client's throttle, beside the refusal test's.
    const cases: [string, string[], number][] = [
      ['a refusal', ['token', 'new', ...uri, '--password-file', server.passwordFile, '--endpoints', 'ext/info'], 1],
      ['a refusal, --json', ['token', 'new', ...uri, '--password-file', server.passwordFile, '--endpoints', 'ext/info', '--json'], 1],
      ['a bad command line', ['token', 'new', '--endpoints', '*', '--password', 'hunter2', ...uri], 2],
      [
        'an unreachable node',
        ['token', 'new', '--uri', `http://127.0.0.1:${await closedPort()}`, '--password-file', server.passwordFile, '--endpoints', '*'],
        3,
      ],
    ];
    for (const [name, args, code] of cases) {
      const [binary, entry] = [await spawned(args), await api(args)];
      t.equal(binary.code, code, `${name}: exit ${code}`);
      t.same(binary, entry, `${name}: what the binary printed is what the entry returned`);
    }
  },
);

t.test('--help prints the commands and exit codes', async (t) => {
  for (const args of [
    ['token', '--help'],
    ['token', 'new', '--help'],
    ['password', 'change', '--help'],
  ]) {
    const run = await api(args);
    t.equal(run.code, 0);
    t.match(run.stdout, /api-auth token new --endpoints/);
    t.match(run.stdout, /Exit codes: 0 success \(for token revoke: the token is revoked now\); 1 the node refused/);
    t.match(run.stdout, /api-auth token revoke --token-file PATH/);
    t.match(run.stdout, /api-auth token list \[flags\]/);
    t.match(run.stdout, /api-auth token revoke --id ID/);
    t.match(run.stdout, /--label TEXT/);
    t.match(run.stdout, /--expires-in DURATION/);
    t.match(run.stdout, /--methods PATTERNS/);
    t.match(run.stdout, /--token-stdin/);
    t.ok(
      run.stdout
        .replace(/\s+/g, ' ')
        .includes(
          'A token is, but that is the weaker choice: while the command runs, any user of this ' +
            'machine can read its command line (ps, /proc/PID/cmdline), and the shell keeps it in its history.',
        ),
      'the help says why a token on the command line is the weaker choice',
    );
  }
  // What `api-auth --help` prints (cli.test.ts pins that the binary prints exactly this).
  t.match(USAGE, /api-auth password change/, "the server's usage names the operator commands");
  t.match(USAGE, /api-auth token revoke --token-file PATH\|--token-stdin/, "the server's usage takes the token from a file or stdin");
  t.notMatch(USAGE, /token revoke TOKEN/, 'not from the command line');
});

t.test('token new --rate-limit --burst --allowed-clients, then token list shows them with LAST USED and REQUESTS', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const auth = ['--uri', node.url, '--password-file', node.passwordFile];
  const made = await api([
    'token',
    'new',
    ...auth,
    '--endpoints',
    '/ext/info',
    '--rate-limit',
    '1/h',
    '--burst',
    '2',
    '--allowed-clients',
    '127.0.0.0/8, 2001:db8::/32',
    '--json',
  ]);
  t.equal(made.code, 0, made.stderr);
  const { token, id } = JSON.parse(made.stdout) as { token: string; id: string };
  t.equal((await call(node.url, '/ext/info', token)).status, 200);
  t.equal((await call(node.url, '/ext/info', token)).status, 200);
  t.equal((await call(node.url, '/ext/info', token)).status, 429, 'the burst of 2 is spent');
  const { tokens } = JSON.parse((await api(['token', 'list', ...auth, '--json'])).stdout) as { tokens: Record<string, unknown>[] };
  t.match(tokens[0], { id, rateLimit: '1/h', burst: 2, allowedClients: ['127.0.0.0/8', '2001:db8::/32'], requests: 2, lastUsedAt: /Z$/ });
  const lines = (await api(['token', 'list', ...auth])).stdout.trimEnd().split('\n');
  t.match(
    lines[1],
    new RegExp(
      `^${id} +- +/ext/info +\\* +1/h \\(burst 2\\) +- +127\\.0\\.0\\.0/8,2001:db8::/32 +.* no +- +\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d +2$`,
    ),
    'RATE, CLIENTS, LAST USED and REQUESTS',
  );
  const bad = await api(['token', 'new', ...auth, '--endpoints', '/ext/info', '--rate-limit', '5/d']);
  t.equal(bad.code, 1, 'the node refuses a bad rate');
  t.match(bad.stderr, /rateLimit/);
  const usage = await api(['token', 'new', ...auth, '--endpoints', '/ext/info', '--rate-limit', '5/s', '--burst', 'x']);
  t.equal(usage.code, 2, 'a --burst that is no number is a bad command line');
  t.match(usage.stderr, /--burst must be a whole number/);
  const misplaced = await api(['token', 'list', ...auth, '--rate-limit', '5/s']);
  t.match(misplaced.stderr, /--rate-limit belongs to "api-auth token new"/);
});

t.test('token new --label --expires-in, then token list shows it (a table, or --json) and token revoke --id revokes it', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const auth = ['--uri', node.url, '--password-file', node.passwordFile];
  const made = await api([
    'token',
    'new',
    ...auth,
    '--endpoints',
    '/ext/info',
    '--label',
    'ops laptop \u{1F4BB}',
    '--expires-in',
    '30m',
    '--json',
  ]);
  t.equal(made.code, 0, made.stderr);
  const { token, id } = JSON.parse(made.stdout) as { token: string; id: string };
  t.match(id, /^t\d+$/, 'token new --json prints the id beside the token');
  const plain = await api(['token', 'new', ...auth, '--endpoints', '*']);
  t.match(plain.stdout, /^[A-Za-z0-9_-]{76}\n$/, 'token new without --json still prints the token alone');

  const listedJson = await api(['token', 'list', ...auth, '--json']);
  t.equal(listedJson.code, 0, listedJson.stderr);
  const { tokens } = JSON.parse(listedJson.stdout) as {
    tokens: { id: string; label: string | null; endpoints: string[]; issuedAt: string; expiresAt: string }[];
  };
  t.equal(tokens.length, 2);
  t.match(tokens[0], { id, label: 'ops laptop \u{1F4BB}', endpoints: ['/ext/info'], methods: null, revoked: false });
  t.equal(Date.parse(tokens[0].expiresAt) - Date.parse(tokens[0].issuedAt), 30 * 60_000, '--expires-in 30m');
  t.notOk(listedJson.stdout.includes(token), 'never the token');

  const table = await api(['token', 'list', ...auth]);
  t.equal(table.code, 0, table.stderr);
  const lines = table.stdout.trimEnd().split('\n');
  t.match(
    lines[0],
    /^ID +LABEL +ENDPOINTS +METHODS +RATE +QUOTA +CLIENTS +EXPIRES \(UTC\) +REVOKED +ROTATED TO +LAST USED \(UTC\) +REQUESTS$/,
    'a header line',
  );
  t.match(
    lines[1],
    new RegExp(`^${id} +ops laptop \u{1F4BB} +/ext/info +\\* +- +- +\\* +\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d +no +- +- +0$`, 'u'),
    'a line per token',
  );
  t.match(
    lines[2],
    /^t\d+ +- +\* +\* +- +- +\* +.* no +- +- +0$/,
    'no label: "-"; every method: "*"; no rate, no quota: "-"; from anywhere: "*"; not rotated: "-"; not used yet: "-", 0',
  );
  const column = (line: string, text: string): number => Array.from(line.slice(0, line.indexOf(text))).length;
  t.equal(column(lines[1], '/ext/info'), column(lines[0], 'ENDPOINTS'), 'columns line up, counted in code points');

  const revoked = await api(['token', 'revoke', ...auth, '--id', id]);
  t.same([revoked.code, revoked.stdout], [0, 'token revoked\n'], 'exit 0: revoked now');
  expectRefused(t, await call(node.url, '/ext/info', token), REASONS.revoked, 'the gate refuses it');
  const again = await api(['token', 'revoke', ...auth, '--id', id]);
  t.same([again.code, again.stdout], [0, 'token already revoked: nothing to do\n'], 'exit 0: it is revoked');
  const unknown = await api(['token', 'revoke', ...auth, '--id', 't999999']);
  t.equal(unknown.code, 1, 'exit 1: nothing revoked');
  t.match(unknown.stderr, /nothing revoked: not a live token of this node \(unknown id\); check the id with api-auth token list/);
  t.match((await api(['token', 'list', ...auth])).stdout, new RegExp(`^${id} .* yes +- +- +0$`, 'm'), 'listed revoked');
  const tooLong = await api(['token', 'new', ...auth, '--endpoints', '*', '--expires-in', '13h']);
  t.equal(tooLong.code, 1, "past the node's lifetime: the node refuses");
  t.match(tooLong.stderr, /invalid params: expiresIn must be .*43200s \(12h, the node's --max-token-lifetime\)/);
});

t.test('token new --endpoints / --methods with named sets: the node gets the root and plain method names', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const auth = ['--uri', node.url, '--password-file', node.passwordFile];
  const made = await api(['token', 'new', ...auth, '--endpoints', '/', '--methods', '@chain,eth_call,@subscribe', '--json']);
  t.equal(made.code, 0, made.stderr);
  const listed = await api(['token', 'list', ...auth, '--json']);
  const { tokens } = JSON.parse(listed.stdout) as { tokens: { endpoints: string[]; methods: string[] }[] };
  t.same(tokens[0].endpoints, ['/'], 'the root alone');
  t.same(
    [...tokens[0].methods].sort(),
    ['eth_blockNumber', 'eth_call', 'eth_chainId', 'eth_subscribe', 'eth_unsubscribe', 'net_version'],
    'each set expanded, once each, beside the plain name',
  );
  const unknown = await api(['token', 'new', ...auth, '--endpoints', '/', '--methods', '@everything']);
  t.equal(unknown.code, 2, 'an unknown set is a bad command line');
  t.equal(
    unknown.stderr,
    'api-auth: --methods: unknown method set "@everything"; the sets are @chain, @read, @send, @subscribe, @filter\n',
  );
  t.equal(
    (JSON.parse((await api(['token', 'list', ...auth, '--json'])).stdout) as { tokens: unknown[] }).tokens.length,
    1,
    'and nothing was issued',
  );
  const noRoot = await api(['token', 'new', ...auth, '--endpoints', '//']);
  t.equal(noRoot.code, 1);
  t.match(noRoot.stderr, /"\/" \(the root alone, where Ethereum nodes serve JSON-RPC\)/, 'a bad endpoint\'s refusal suggests "/"');
});

t.test('token list shows a method set by its name: the largest set whose every method the token holds, then the other names', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const auth = ['--uri', node.url, '--password-file', node.passwordFile];
  for (const [methods, label] of [
    ['@read,eth_sendRawTransaction', 'send'],
    ['@subscribe,@filter,debug_traceCall', 'sub'],
    ['eth_chainId,eth_call', 'plain'],
  ]) {
    const made = await api(['token', 'new', ...auth, '--endpoints', '/', '--methods', methods, '--label', label]);
    t.equal(made.code, 0, made.stderr);
  }
  const lines = (await api(['token', 'list', ...auth])).stdout.trimEnd().split('\n');
  const methodsOf = (label: string): string => lines.find((line) => line.includes(` ${label} `))!.split(/ {2,}/)[3];
  t.equal(methodsOf('send'), '@send', '@read and eth_sendRawTransaction are @send, shown alone (@chain and @read are in it)');
  t.equal(methodsOf('sub'), '@subscribe,@filter,debug_traceCall', 'two sets that share @chain, and a name of no set');
  t.same(methodsOf('plain').split(',').sort(), ['eth_call', 'eth_chainId'], 'names that make up no whole set stay names');
  const { tokens } = JSON.parse((await api(['token', 'list', ...auth, '--json'])).stdout) as {
    tokens: { label: string; methods: string[] }[];
  };
  t.ok(tokens.find((token) => token.label === 'send')!.methods.includes('eth_getBalance'), "--json gives the node's plain names");
});

t.test(
  "the node's own settings give the defaults: API_AUTH_PASSWORD_FILE, API_AUTH_HTTP_PORT, its config file; a flag beats them",
  async (t) => {
    const node = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
    const port = new URL(node.url).port;
    const env = { API_AUTH_PASSWORD_FILE: node.passwordFile, API_AUTH_HTTP_PORT: port, API_AUTH_REQUIRED: 'yes' };
    const listed = await api(['token', 'list'], '', env);
    t.same([listed.code, listed.stdout, listed.stderr], [0, 'no live tokens\n', ''], "no flag needed in the node's environment");
    const made = await api(['token', 'new', '--endpoints', '/ext/info'], '', env);
    t.equal(made.code, 0, made.stderr);
    t.equal((await call(node.url, '/ext/info', made.stdout.trim())).status, 200, 'the token issued that way works');
    const wrong = secretFile('not-the-password.txt', 'not the password\n');
    const beaten = await api(['token', 'list', '--password-file', wrong], '', env);
    t.equal(beaten.code, 1, '--password-file beats API_AUTH_PASSWORD_FILE: the wrong password is refused');
    const stdin = await api(['token', 'list', '--password-stdin'], readFileSync(node.passwordFile, 'utf8').trim(), {
      API_AUTH_PASSWORD_FILE: wrong,
      API_AUTH_HTTP_PORT: port,
    });
    t.equal(stdin.code, 0, '--password-stdin beats API_AUTH_PASSWORD_FILE too: ' + stdin.stderr);
    const config = join(dir, 'node-config.json');
    writeFileSync(
      config,
      JSON.stringify({ 'api-auth-password-file': node.passwordFile, 'http-port': Number(port), 'http-host': '0.0.0.0' }),
      { mode: 0o600 },
    );
    const fromFile = await api(['token', 'list', '--config-file', config]);
    t.same([fromFile.code, fromFile.stderr], [0, ''], "--config-file: the node's file, a listener on every address called at 127.0.0.1");
    const fromEnvFile = await api(['token', 'list'], '', { API_AUTH_CONFIG_FILE: config });
    t.same([fromEnvFile.code, fromEnvFile.stderr], [0, ''], 'API_AUTH_CONFIG_FILE names it as for the node');
    const missing = await api(['token', 'list'], '', { API_AUTH_PASSWORD_FILE: join(dir, 'no-such-file'), API_AUTH_HTTP_PORT: port });
    t.equal(missing.code, 2, 'a password file that is not there is a bad command line');
    t.match(missing.stderr, /^api-auth: API_AUTH_PASSWORD_FILE \(environment\) \S+no-such-file: cannot read it/, 'named as it was given');
    const badPort = await api(['token', 'list', '--password-file', node.passwordFile], '', { API_AUTH_HTTP_PORT: 'ninety' });
    t.equal(badPort.code, 2, 'a setting the node would refuse is refused here too');
    t.match(badPort.stderr, /API_AUTH_HTTP_PORT \(environment\)/);
    const warned = await api(['token', 'list'], '', { ...env, API_AUTH_PASSWORD_FIEL: 'x' });
    t.equal(warned.code, 0);
    t.match(warned.stderr, /^api-auth: warning: API_AUTH_PASSWORD_FIEL is named like the node's settings but none of them/);
    const spawnedRun = await new Promise<Run>((resolve) => {
      const child = spawn(...untracked(process.execPath, [MAIN, 'token', 'list']), {
        cwd: ROOT,
        env: { ...PROGRAM_ENV, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        stdout += chunk;
      });
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
        stderr += chunk;
      });
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    t.equal(spawnedRun.code, 0, 'the binary reads its own environment: ' + spawnedRun.stderr);
    t.match(spawnedRun.stdout, /^ID +LABEL[^\n]*\n\S+ +- +\/ext\/info /, 'and lists the token issued above');
  },
);

t.test('an unknown flag gets the flag it is likely a slip of, never the value given', async (t) => {
  const slip = await api(['token', 'list', '--pasword-file=hunter2-secret']);
  t.equal(slip.code, 2);
  t.equal(
    slip.stderr,
    'api-auth: unknown flag --pasword-file (did you mean --password-file?); run api-auth token --help to list the flags\n',
  );
  const far = await api(['token', 'list', '--frobnicate']);
  t.equal(far.stderr, 'api-auth: unknown flag --frobnicate; run api-auth token --help to list the flags\n', 'nothing near: no guess');
});

t.test('token list with no live token says so', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const run = await api(['token', 'list', '--uri', node.url, '--password-file', node.passwordFile]);
  t.same([run.code, run.stdout, run.stderr], [0, 'no live tokens\n', '']);
});

t.test('password change: from files, then every earlier token is refused and the new password works', async (t) => {
  const node = await startServer(t, { cheapChecks: true, args: ONE_THREAD });
  const token = (await api(['token', 'new', '--uri', node.url, '--password-file', node.passwordFile, '--endpoints', '*'])).stdout.trim();
  const next = randomPassword();
  const run = await api([
    'password',
    'change',
    '--uri',
    node.url,
    '--password-file',
    node.passwordFile,
    '--new-password-file',
    secretFile('next', `${next}\n`),
  ]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^password changed/);
  expectRefused(t, await call(node.url, '/ext/info', token), REASONS.earlierGeneration);
  t.ok(await tryPassword(node.url, next), 'the new password gives tokens');
  const back = await api(
    ['password', 'change', '--uri', node.url, '--password-file', secretFile('next2', next), '--new-password-stdin', '--json'],
    `${node.password}\n`,
  );
  t.equal(back.code, 0, back.stderr);
  t.same(JSON.parse(back.stdout), { success: true }, 'the new password from stdin');
  t.ok(await tryPassword(node.url, node.password));
});

const hasScript = spawnSync('script', ['--version']).status === 0;

t.test('without a password flag, a terminal prompts without echo', async (t) => {
  if (!hasScript) {
    t.fail('no `script` to make a terminal with: apt-get install bsdutils');
    return;
  }
  const node = server;
  const command = untracked(process.execPath, [MAIN, 'token', 'new', '--uri', node.url, '--endpoints', '/ext/info'])
    .flat()
    .map((a) => `'${a}'`)
    .join(' ');
  // `script` runs the command on a pseudo-terminal; the password is typed only once the
  // prompt is up (echo is off by then), as a person would.
  const child = spawn('script', ['-qefc', command, '/dev/null'], { env: PROGRAM_ENV, stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  const prompted = new Promise<void>((resolve) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('Password: ')) resolve();
    });
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await prompted;
  child.stdin.write(`${node.password}\r`);
  const code = await exited;
  clearTimeout(timer);
  t.equal(code, 0, output);
  t.notOk(output.includes(node.password), 'the password was not echoed');
  const token = /([A-Za-z0-9_-]{76})/.exec(output)?.[1];
  t.ok(token, 'the token was printed');
  expectGranted(t, await call(node.url, '/ext/info', token), '/ext/info');
});

t.test('token revoke in a terminal prompts for the token, then the password, without echo', async (t) => {
  if (!hasScript) {
    t.fail('no `script` to make a terminal with: apt-get install bsdutils');
    return;
  }
  const node = server;
  const token = (await api(['token', 'new', '--uri', node.url, '--password-file', node.passwordFile, '--endpoints', '*'])).stdout.trim();
  const command = untracked(process.execPath, [MAIN, 'token', 'revoke', '--uri', node.url])
    .flat()
    .map((a) => `'${a}'`)
    .join(' ');
  const child = spawn('script', ['-qefc', command, '/dev/null'], { env: PROGRAM_ENV, stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  const waiters: Array<[string, () => void]> = [];
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
    for (const [prompt, resolve] of waiters) if (output.includes(prompt)) resolve();
  });
  const prompted = (prompt: string): Promise<void> =>
    new Promise((resolve) => {
      if (output.includes(prompt)) resolve();
      else waiters.push([prompt, resolve]);
    });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  // Typed only once each prompt is up (echo is off by then), as a person would.
  await prompted('Token: ');
  child.stdin.write(`${token}\r`);
  await prompted('Password: ');
  child.stdin.write(`${node.password}\r`);
  const code = await exited;
  clearTimeout(timer);
  t.equal(code, 0, output);
  t.match(output, /token revoked/);
  t.notOk(output.includes(token), 'the token was not echoed');
  t.notOk(output.includes(node.password), 'the password was not echoed');
  expectRefused(t, await call(node.url, '/ext/info', token), REASONS.revoked);
});
