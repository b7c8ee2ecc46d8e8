// The operator command's parts (host/cli/operator/), each through its own exports: the
// command line read into options, the node's settings as defaults, the secrets read, each
// command's request, the TLS failures explained, and what is printed. The command end to
// end is test/cli/operator-cli.test.ts and operator-tls.test.ts.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { UsageError } from '../../build/host/errors.js';
import { METHOD_SETS } from '../../build/host/method-sets.js';
import { checkFlagsOf, parseOperatorArgs, parseUri } from '../../build/host/cli/operator/args.js';
import { readCaFile, tlsFailure } from '../../build/host/cli/operator/client.js';
import { fromNodeSettings } from '../../build/host/cli/operator/node-settings.js';
import { printResult, shown, table } from '../../build/host/cli/operator/output.js';
import { requestOf } from '../../build/host/cli/operator/request.js';
import { readNewPassword, readSecret } from '../../build/host/cli/operator/secrets.js';
import { OPERATOR_USAGE } from '../../build/host/cli/operator/usage.js';
import { tempDir } from '../helpers/server.js';

/** An io that keeps what is written, with `input` as stdin (not a terminal). */
function memoryIo(input = ''): {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  stdin: NodeJS.ReadStream;
  out: string[];
  err: string[];
} {
  const out: string[] = [];
  const err: string[] = [];
  return {
    stdout: (text) => {
      out.push(text);
    },
    stderr: (text) => {
      err.push(text);
    },
    stdin: Readable.from([Buffer.from(input)]) as unknown as NodeJS.ReadStream,
    out,
    err,
  };
}

t.test("args: flags into options, lists split and trimmed, the command's words checked", async (t) => {
  const { action, options, positional } = parseOperatorArgs([
    'token',
    'new',
    '--endpoints',
    ' /ext/info, /ext/bc/* ,',
    '--methods',
    'eth_*,@read',
    '--uri',
    'https://node.example:9650/',
    '--burst',
    '20',
    '--timeout',
    '5s',
    '--json',
  ]);
  t.equal(action, 'token new');
  t.same(positional, []);
  t.same(options.endpoints, ['/ext/info', '/ext/bc/*'], 'endpoints split on commas, trimmed, empties dropped');
  t.same(options.methods, ['eth_*', '@read'], 'named sets kept by name until the request');
  t.equal(options.uri, 'https://node.example:9650', 'the URI without its trailing slash');
  t.equal(options.uriGiven, true);
  t.equal(options.burst, 20);
  t.equal(options.timeoutMs, 5000);
  t.equal(options.json, true);
  t.equal(parseOperatorArgs(['token', 'list']).options.uri, 'http://127.0.0.1:9650', 'the default node');
  t.throws(() => parseOperatorArgs(['token', 'delete']), {
    message:
      /unknown command \(not shown: it may be a secret\); the commands are "token new", "token list", "token revoke" or "token rotate"/,
  });
  t.throws(
    () => parseOperatorArgs(['password', 'change', '--password', 'hunter2']),
    { message: /--password is not taken: a password on the command line is visible to other users/ },
    'a password flag is refused',
  );
  t.throws(() => parseOperatorArgs(['token', 'new', '--burst', '1.5']), { message: /--burst must be a whole number/ });
  t.throws(() => parseOperatorArgs(['token', 'new', '--expires-in', '0s']), { message: /--expires-in must be a duration/ });
  t.equal(parseOperatorArgs(['token', 'new', '--expires-in', 'never']).options.expiresIn, 'never');
  t.throws(() => parseOperatorArgs(['token', 'list', '--timeout', '2h']), { message: /--timeout must be a duration from 1s to 1h/ });
  t.same(parseOperatorArgs(['token', '--help']).action, 'token new', "a group's --help needs no verb");
  t.throws(() => parseUri('ftp://node'), { message: /--uri must be an http:\/\/ or https:\/\/ URL/ });
  t.throws(() => parseUri('http://user:pw@node'), { message: /without query, fragment or credentials/ });
});

t.test('args: which flag belongs to which command, and "-" is --token-stdin', async (t) => {
  const revoke = parseOperatorArgs(['token', 'revoke', '-']);
  t.same(checkFlagsOf(revoke.action, revoke.options, revoke.positional), [], '"-" is taken out of the words');
  t.equal(revoke.options.tokenStdin, true, 'and read as --token-stdin');
  const both = parseOperatorArgs(['token', 'revoke', '-', '--token-stdin']);
  t.throws(() => checkFlagsOf(both.action, both.options, both.positional), { message: 'give --token-stdin or "-", not both' });
  const list = parseOperatorArgs(['token', 'list', '--label', 'x']);
  t.throws(() => checkFlagsOf(list.action, list.options, list.positional), {
    message: '--label belongs to "api-auth token new", not "api-auth token list"',
  });
  const stdin = parseOperatorArgs(['password', 'change', '--password-stdin', '--new-password-stdin']);
  t.throws(() => checkFlagsOf(stdin.action, stdin.options, stdin.positional), {
    message: '--password-stdin and --new-password-stdin cannot both read stdin; give one of them as a file',
  });
  const overlap = parseOperatorArgs(['token', 'revoke', '--id', '7', '--overlap', '1m']);
  t.throws(() => checkFlagsOf(overlap.action, overlap.options, overlap.positional), {
    message: /--overlap belongs to "api-auth token rotate"/,
  });
});

t.test("node settings: the node's address and password file are the defaults, a flag beats them", async (t) => {
  const io = memoryIo();
  const { options } = parseOperatorArgs(['token', 'list']);
  fromNodeSettings(
    options,
    { API_AUTH_HTTP_HOST: '0.0.0.0', API_AUTH_HTTP_PORT: '9999', API_AUTH_PASSWORD_FILE: '/etc/api-auth/password' },
    io,
  );
  t.equal(options.uri, 'http://127.0.0.1:9999', "a listener on every address is called at this machine's own");
  t.equal(options.passwordFile, '/etc/api-auth/password');
  t.equal(options.passwordFileNamed, 'API_AUTH_PASSWORD_FILE (environment)', 'the messages name where the file came from');
  const given = parseOperatorArgs(['token', 'list', '--uri', 'http://10.0.0.1:1', '--password-file', '/p']).options;
  fromNodeSettings(given, { API_AUTH_HTTP_PORT: '9999', API_AUTH_PASSWORD_FILE: '/etc/api-auth/password' }, io);
  t.equal(given.uri, 'http://10.0.0.1:1');
  t.equal(given.passwordFile, '/p');
  const v6 = parseOperatorArgs(['token', 'list']).options;
  fromNodeSettings(v6, { API_AUTH_HTTP_HOST: '::', API_AUTH_HTTP_PORT: '9651' }, io);
  t.equal(v6.uri, 'http://[::1]:9651');
  t.same(io.err, []);
  fromNodeSettings(parseOperatorArgs(['token', 'list']).options, { API_AUTH_HTTP_PROT: '1' }, io);
  t.match(
    io.err.join(''),
    /^api-auth: warning: API_AUTH_HTTP_PROT is named like the node's settings but none of them/,
    'a misspelt setting is warned of',
  );
  t.throws(() => fromNodeSettings(parseOperatorArgs(['token', 'list']).options, { API_AUTH_HTTP_PORT: '0' }, io), {
    message: /^API_AUTH_HTTP_PORT \(environment\) is 0 \(a port the system picks\).*give --uri$/,
  });
});

t.test('secrets: a file trimmed, stdin without its line break, UTF-8 only, never empty', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'password');
  writeFileSync(file, '  correct horse \n');
  t.equal(await readSecret(file, false, '', '--password', memoryIo()), 'correct horse', 'a file is trimmed');
  t.equal(
    await readSecret(undefined, true, '', '--password', memoryIo(' pass word \n')),
    ' pass word ',
    'a password from stdin keeps its spaces',
  );
  t.equal(await readSecret(undefined, true, '', '--token', memoryIo(' tok \r\n'), 'token'), 'tok', 'a token from stdin is trimmed');
  writeFileSync(file, Buffer.from([0x70, 0xff, 0x71]));
  await t.rejects(readSecret(file, false, '', '--password', memoryIo()), {
    message: `--password-file ${file}: the file is not UTF-8 text; save the password as UTF-8`,
  });
  await t.rejects(readSecret(join(dir, 'absent'), false, '', '--password', memoryIo()), { message: /cannot read it \(ENOENT\)/ });
  await t.rejects(readSecret(undefined, true, '', '--password', memoryIo('\n')), {
    message: 'the password from --password-stdin is empty',
  });
  await t.rejects(
    readSecret(undefined, false, 'Password: ', '--password', memoryIo()),
    { message: 'no password: give --password-file PATH or --password-stdin, or run the command in a terminal to be prompted' },
    'no terminal: no prompt',
  );
  await t.rejects(readSecret(undefined, true, '', '--token', memoryIo('x'.repeat(64 * 1024 + 1)), 'token'), {
    message: /stdin holds more than 65536 bytes/,
  });
  writeFileSync(file, 'x'.repeat(1025));
  await t.rejects(readNewPassword(file, false, memoryIo()), {
    message: 'the new password is 1025 characters long; at most 1024 are allowed',
  });
});

t.test("request: each command's method and params, the named sets expanded", async (t) => {
  const file = join(tempDir(t), 'password');
  writeFileSync(file, 'pw\n');
  const made = parseOperatorArgs([
    'token',
    'new',
    '--endpoints',
    '/',
    '--methods',
    '@read',
    '--rate-limit',
    '5/s',
    '--password-file',
    file,
    '--label',
    'ci',
  ]);
  const request = await requestOf(made.action, made.options, made.positional, memoryIo());
  t.equal(request.method, 'auth.newToken');
  t.same(request.params, { password: 'pw', endpoints: ['/'], label: 'ci', methods: [...METHOD_SETS['@read']], rateLimit: '5/s' });
  const io = memoryIo();
  const revoke = parseOperatorArgs(['token', 'rotate', 'TOKEN', '--overlap', '10m', '--password-file', file]);
  t.same(await requestOf(revoke.action, revoke.options, revoke.positional, io), {
    method: 'auth.rotateToken',
    params: { password: 'pw', token: 'TOKEN', overlap: '10m' },
  });
  t.match(io.err.join(''), /^api-auth: warning: a token on the command line can be read by every user/, 'a token in argv is warned of');
  const byId = parseOperatorArgs(['token', 'revoke', 'TOKEN', '--id', '3', '--password-file', file]);
  await t.rejects(requestOf(byId.action, byId.options, byId.positional, memoryIo()), { message: 'give the token or its --id, not both' });
  const none = parseOperatorArgs(['token', 'new', '--password-file', file]);
  await t.rejects(requestOf(none.action, none.options, none.positional, memoryIo()), { message: /^token new needs --endpoints/ });
  const bad = parseOperatorArgs(['token', 'new', '--endpoints', '/', '--methods', '@nope', '--password-file', file]);
  await t.rejects(requestOf(bad.action, bad.options, bad.positional, memoryIo()), { message: /^--methods: / });
});

t.test('client: a TLS failure said as what to do, and --cacert checked before the call', async (t) => {
  t.match(
    tlsFailure('DEPTH_ZERO_SELF_SIGNED_CERT', undefined, 'node', false),
    /self-signed, and not trusted: give that certificate with --cacert FILE/,
  );
  t.match(
    tlsFailure('UNABLE_TO_VERIFY_LEAF_SIGNATURE', undefined, 'node', true),
    /signed by a CA this command does not trust: the CA of --cacert/,
  );
  t.match(tlsFailure('CERT_HAS_EXPIRED', undefined, 'node', false), /has expired/);
  t.equal(tlsFailure('ECONNREFUSED', undefined, 'node', false), undefined, "not a certificate's failure");
  t.equal(tlsFailure(undefined, undefined, 'node', false), undefined);
  await t.rejects(readCaFile('/nowhere', 'http://127.0.0.1:1'), { message: /--cacert is for a node at an https:\/\/ --uri/ });
  const key = join(tempDir(t), 'key.pem');
  writeFileSync(key, '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n');
  await t.rejects(readCaFile(key, 'https://127.0.0.1:1'), { message: /holds no PEM certificate/ });
  await t.rejects(readCaFile(key, 'https://127.0.0.1:1'), UsageError, 'a bad file is a bad command line');
});

t.test('output: the table for people, the revoke outcome and its exit code', async (t) => {
  t.equal(table({ tokens: [] }), 'no live tokens\n');
  const lines = table({
    tokens: [
      {
        id: '7',
        label: 'a\u001b[2Jb',
        endpoints: ['/'],
        methods: [...METHOD_SETS['@read']],
        rateLimit: '5/s',
        burst: 5,
        quota: null,
        allowedClients: null,
        expiresAt: '2030-01-02T03:04:05Z',
        revoked: false,
        rotatedTo: null,
        lastUsedAt: null,
        requests: 3,
      },
      {
        id: '8',
        label: null,
        endpoints: ['/'],
        methods: null,
        rateLimit: null,
        burst: null,
        quota: { requests: 1000, per: 'day', used: 17, resetsAt: '2030-01-02T00:00:00Z' },
        allowedClients: null,
        expiresAt: '2030-01-02T03:04:05Z',
        revoked: false,
        rotatedTo: null,
        lastUsedAt: null,
        requests: 17,
      },
    ],
  }).split('\n');
  t.match(
    lines[0],
    /^ID +LABEL +ENDPOINTS +METHODS +RATE +QUOTA +CLIENTS +EXPIRES \(UTC\) +REVOKED +ROTATED TO +LAST USED \(UTC\) +REQUESTS$/,
  );
  t.match(
    lines[1],
    /^7 +a\?\[2Jb +\/ +@read +5\/s \(burst 5\) +- +\* +2030-01-02 03:04:05 +no +- +- +3$/,
    'a control character shows as "?"; a set by its name',
  );
  t.match(lines[2], /^8 +- +\/ +\* +- +17\/1000 per day +\* +2030-01-02 03:04:05 +no +- +- +17$/, 'a quota as used/requests per window');
  t.throws(() => table({}), { message: /holds no token list/ });
  t.equal(shown('a\u202eb\nc'), 'a?b?c');
  const io = memoryIo();
  t.equal(printResult('token revoke', { success: true, revocation: 'revoked' }, false, false, io), 0);
  t.equal(printResult('token revoke', { success: true, revocation: 'already revoked' }, false, false, io), 0);
  t.equal(printResult('token revoke', { success: true, revocation: 'not a live token', reason: 'expired' }, false, true, io), 1);
  t.equal(printResult('token revoke', { success: true }, false, false, io), 1, "an older node's bare success cannot tell");
  t.same(io.out, ['token revoked\n', 'token already revoked: nothing to do\n']);
  t.match(io.err[0], /^api-auth: nothing revoked: not a live token of this node \(expired\); check the id with api-auth token list\n$/);
  const json = memoryIo();
  t.equal(printResult('token new', { token: 'T', id: '1' }, true, false, json), 0);
  t.equal(printResult('token rotate', { token: 'U' }, false, false, json), 0);
  t.equal(printResult('password change', { success: true }, false, false, json), 0);
  t.same(json.out, ['{"token":"T","id":"1"}\n', 'U\n', 'password changed; every token issued before no longer works\n']);
  t.match(OPERATOR_USAGE, /--uri URL +the node \(default http:\/\/127\.0\.0\.1:9650\)/);
});
