// No refusal of a start echoes a value that could be a secret: a config
// file that is really the password file, a URL's password (--upstream, --cluster-etcd, from
// a flag, the environment or the config file), a password flag with one dash, or a word
// that is no flag's. Each runs the real CLI with a marked value and looks for it on
// stdout and stderr.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launch, tempDir } from '../helpers/server.js';

const MARK = 'SECRETMARK123';

t.test('every refusal of the start names what is wrong without the secret in it', async (t) => {
  const dir = tempDir(t);
  const passwordFile = join(dir, 'password.txt');
  writeFileSync(passwordFile, `pw-${MARK}-0123456789\n`, { mode: 0o600 });
  const jsonString = join(dir, 'string.json');
  writeFileSync(jsonString, JSON.stringify(MARK), { mode: 0o600 });
  const number = join(dir, 'number.json');
  writeFileSync(number, '123456789012', { mode: 0o600 });
  const configUpstream = join(dir, 'upstream.json');
  writeFileSync(configUpstream, JSON.stringify({ upstream: `http://user:${MARK}@127.0.0.1:9652` }), { mode: 0o600 });
  const configPassword = join(dir, 'password.json');
  writeFileSync(configPassword, JSON.stringify({ 'api-auth-password': MARK }), { mode: 0o600 });
  const base = ['--http-port', '0', '--data-dir', join(dir, 'data')];
  const cases: [string, string[], Record<string, string>, RegExp][] = [
    ['the password file as the config file', ['--config-file', passwordFile], {}, /is not JSON/],
    [
      'a config file that is a JSON string',
      ['--config-file', jsonString],
      {},
      /must hold one JSON object, such as \{"http-port": 9650\}, not a string/,
    ],
    ['a config file that is a number', ['--config-file', number], {}, /not a number/],
    [
      '--upstream with a user and password',
      ['--upstream', `http://user:${MARK}@127.0.0.1:9652`],
      {},
      /--upstream must be just scheme, host and port/,
    ],
    ['--upstream with a password and no port', ['--upstream', `http://user:${MARK}@127.0.0.1`], {}, /--upstream must/],
    ['--upstream not http', ['--upstream', `ftp://user:${MARK}@127.0.0.1:21`], {}, /--upstream must be an http:\/\/ or https:\/\/ URL/],
    ['--upstream that is no URL', ['--upstream', `http://user:${MARK}@`], {}, /--upstream must be a URL/],
    [
      'API_AUTH_UPSTREAM with a password',
      [],
      { API_AUTH_UPSTREAM: `http://user:${MARK}@127.0.0.1:9652` },
      /API_AUTH_UPSTREAM \(environment\) must/,
    ],
    ["the config file's upstream with a password", ['--config-file', configUpstream], {}, /"upstream" \(config file \S+\) must/],
    [
      '--cluster-etcd with a user and password',
      ['--cluster-etcd', `http://user:${MARK}@127.0.0.1:2379`],
      {},
      /--cluster-etcd must be etcd client URLs/,
    ],
    [
      '--cluster-etcd with a password that holds a comma',
      ['--cluster-etcd', `http://user:SECRET,${MARK}@127.0.0.1:2379`],
      {},
      /--cluster-etcd must be etcd client URLs/,
    ],
    [
      '--cluster-etcd, the second URL',
      ['--cluster-etcd', `http://127.0.0.1:2379,http://user:${MARK}@127.0.0.1:2380`],
      {},
      /--cluster-etcd must/,
    ],
    [
      '-api-auth-password= with one dash',
      [`-api-auth-password=${MARK}`],
      {},
      /^api-auth: unknown flag -api-auth-password; flags start with two dashes/,
    ],
    [
      '-api-auth-password with one dash, then the value',
      ['-api-auth-password', MARK],
      {},
      /unknown flag -api-auth-password; flags start with two dashes/,
    ],
    ['--api-auth-password=', [`--api-auth-password=${MARK}`], {}, /--api-auth-password is refused/],
    [
      'a misspelt flag with a secret as its value',
      [`--api-auth-pasword-file=${MARK}`],
      {},
      /unknown flag --api-auth-pasword-file \(did you mean --api-auth-password-file\?\)/,
    ],
    ['--cluster-etcd-password, then the value', ['--cluster-etcd-password', MARK], {}, /--cluster-etcd-password is refused/],
    ["a word that is no flag's", [MARK], {}, /^api-auth: unexpected argument \(not shown: it may be a secret\); api-auth takes only flags/],
    ["a word after a flag's value", ['--http-host', '127.0.0.1', MARK], {}, /unexpected argument \(not shown/],
    ['API_AUTH_PASSWORD', [], { API_AUTH_PASSWORD: MARK }, /API_AUTH_PASSWORD \(environment\) is refused/],
    ["the config file's password", ['--config-file', configPassword], {}, /"api-auth-password" \(config file \S+\) is refused/],
  ];
  for (const [what, args, env, message] of cases) {
    const run = launch(t, [...base, ...args], undefined, { env });
    const exit = await run.exited;
    t.equal(exit.code, 2, `${what}: exit 2`);
    t.match(run.stderr(), message, `${what}: the message`);
    t.equal(run.stderr().split('\n').length, 2, `${what}: one line`);
    for (const part of [MARK, 'MARK123', '123456789012']) {
      t.notOk(run.stderr().includes(part) || run.stdout().includes(part), `${what}: ${part} is not printed`);
    }
  }
});

t.test('the operator commands do not echo a word that may be a secret either', async (t) => {
  const cases: [string, string[], RegExp][] = [
    ['a password pasted after "api-auth token"', ['token', MARK], /^api-auth: unknown command \(not shown: it may be a secret\)/],
    [
      'a second token to revoke',
      ['token', 'revoke', 'first', MARK, '--password-stdin'],
      /^api-auth: unexpected argument \(not shown: it may be a secret\)/,
    ],
    ['a word after token list', ['token', 'list', MARK], /^api-auth: unexpected argument \(not shown/],
    ['a word after password change', ['password', 'change', MARK], /^api-auth: unexpected argument \(not shown/],
  ];
  for (const [what, args, message] of cases) {
    const run = launch(t, args);
    const exit = await run.exited;
    t.equal(exit.code, 2, `${what}: exit 2`);
    t.match(run.stderr(), message, `${what}: the message`);
    t.notOk(run.stderr().includes('MARK123') || run.stdout().includes('MARK123'), `${what}: the word is not printed`);
  }
});
