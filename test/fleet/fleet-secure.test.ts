// A fleet on a secured etcd (test/helpers/etcd.ts): TLS with client certificates, and
// etcd's own users (RBAC), as an operator runs them in production. Gateways that show
// what etcd asks for form a fleet; one that does not fails its start at once, saying
// why, and listens on nothing. The etcd user's password never leaves its file.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { Test } from 'tap';
import { call, expectRefused, INCORRECT_PASSWORD, newToken, REASONS, revokeToken, REVOKED } from '../helpers/auth.js';
import { countingRelay, enableAuth, makeCertificates, startEtcd, startGateway } from '../helpers/etcd.js';
import { closedPort } from '../helpers/upstream.js';
import type { Gateway } from '../helpers/etcd.js';
import { jsonrpc } from '../helpers/http.js';
import { launch, randomPassword, runCli, tempDir } from '../helpers/server.js';
import type { CliResult } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '2s', '--http-threads', '1'];
const INFO = '/ext/info';

// The tests at once: each has its etcd, certificates and gateways of its own, and waits
// on etcd more than it computes.
t.jobs = 3;
/**
 * What a start that cannot join may open to etcd: one connection, whose first refusal
 * ends it (etcd3 makes each call once, and the start is one attempt), never a retry
 * loop. A count through a relay: it holds however slowly a loaded machine runs.
 */
const START_CONNECTIONS = 1;
/**
 * The line of a start whose connection failed and gRPC did not say why: it then tries the
 * TLS handshake alone, once, on a connection of its own, to name etcd's refusal.
 */
const PROBED = "etcd's TLS handshake is tried alone: gRPC did not say why it could not connect";

function passwordFile(t: Test, password = randomPassword()): { password: string; file: string } {
  const file = join(tempDir(t), 'password');
  writeFileSync(file, password, { mode: 0o600 });
  return { password, file };
}

interface RefusedStart extends CliResult {
  /** The --cluster-etcd it was given: a relay to etcd. */
  etcd: string;
  /** The connections it opened to etcd. */
  connections: number;
}

/**
 * A gateway that will not start, given `args` and, as --cluster-etcd, a relay to `etcd`:
 * its exit, and how many connections it opened. One that opens more than
 * START_CONNECTIONS and a probe (PROBED) is killed there (it retries).
 */
async function refusedStart(t: Test, etcd: string, args: readonly string[]): Promise<RefusedStart> {
  const relay = await countingRelay(t, etcd);
  const run = launch(t, [...args, '--cluster-etcd', relay.url]);
  relay.onConnection = (count) => {
    if (count > START_CONNECTIONS + 1) run.child.kill('SIGKILL');
  };
  void run
    .waitForLog((l) => l.msg === 'listening')
    .then(
      () => run.child.kill('SIGKILL'),
      () => undefined,
    );
  const exit = await run.waitForExit();
  return { ...exit, stdout: run.stdout(), stderr: run.stderr(), logs: run.logs, etcd: relay.url, connections: relay.connections() };
}

function expectStartFailure(t: Test, run: RefusedStart, message: RegExp, label: string): void {
  const joining = `cannot join the fleet api-auth through --cluster-etcd ${run.etcd}: `.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  t.equal(run.code, 2, `${label}: exit code 2`);
  t.match(run.stderr, new RegExp(joining + message.source), label);
  t.notOk(
    run.logs.some((l) => l.msg === 'listening'),
    `${label}: nothing listened`,
  );
  const probes = run.logs.filter((l) => l.msg === PROBED).length;
  t.equal(
    run.connections,
    START_CONNECTIONS + probes,
    `${label}: failed at its first connection to etcd, with ${probes} handshake alone to name why (${run.connections})`,
  );
}

async function status(gateway: Gateway, token: string): Promise<number> {
  return (await call(gateway.url, INFO, token)).status;
}

t.test(
  'etcd with TLS and client certificates: gateways with the CA and a certificate form a fleet; without them the start fails and says why',
  async (t) => {
    const certs = makeCertificates(tempDir(t));
    const etcd = await startEtcd(t, { certFile: certs.server.cert, keyFile: certs.server.key, clientCaFile: certs.ca });
    const { password, file } = passwordFile(t);
    const tls = ['--cluster-etcd-ca', certs.ca, '--cluster-etcd-cert', certs.client.cert, '--cluster-etcd-key', certs.client.key];
    const a = await startGateway(t, etcd, file, [...LEASE, ...tls]);
    const b = await startGateway(t, etcd, file, [...LEASE, ...tls]);
    const token = await newToken(a.url, password, [INFO]);
    t.equal(await status(b, token), 200, 'issued on A, valid on B');
    t.same(await revokeToken(b.url, password, token), REVOKED);
    expectRefused(t, await call(a.url, INFO, token), REASONS.revoked, 'revoked on B, refused on A as the call returns');
    // gRPC gives etcd's address (127.0.0.1) as the TLS server name, which Node warns of:
    // the warning too is a log line.
    for (const [name, gateway] of [
      ['A', a],
      ['B', b],
    ] as const) {
      const lines = (gateway.stdout() + gateway.stderr()).split('\n').filter((line) => line !== '');
      t.same(
        lines.filter((line) => {
          try {
            return typeof JSON.parse(line) !== 'object';
          } catch {
            return true;
          }
        }),
        [],
        `every line gateway ${name} wrote, on stdout and stderr, is JSON`,
      );
    }

    const base = [
      '--http-port',
      '0',
      '--api-auth-required',
      '--api-auth-password-file',
      file,
      '--data-dir',
      join(tempDir(t), 'd'),
      ...LEASE,
    ];
    const [bare, foreignCa, stranger] = await Promise.all([
      refusedStart(t, etcd.url, [...base, '--cluster-etcd-ca', certs.ca]),
      refusedStart(t, etcd.url, [
        ...base,
        '--cluster-etcd-ca',
        certs.otherCa,
        '--cluster-etcd-cert',
        certs.client.cert,
        '--cluster-etcd-key',
        certs.client.key,
      ]),
      refusedStart(t, etcd.url, [
        ...base,
        '--cluster-etcd-ca',
        certs.ca,
        '--cluster-etcd-cert',
        certs.selfSigned.cert,
        '--cluster-etcd-key',
        certs.selfSigned.key,
      ]),
    ]);
    expectStartFailure(
      t,
      bare,
      new RegExp(
        `etcd refused the TLS handshake \\([^)]*\\): it asks for a client certificate; ` +
          'give --cluster-etcd-cert and --cluster-etcd-key',
      ),
      'no client certificate',
    );
    expectStartFailure(
      t,
      foreignCa,
      new RegExp(
        `etcd's certificate is not trusted \\(unable to verify the first certificate\\); ` +
          `check that --cluster-etcd-ca ${certs.otherCa} holds the CA that signed it`,
      ),
      "a CA that did not sign etcd's certificate",
    );
    expectStartFailure(
      t,
      stranger,
      new RegExp(
        `etcd refused the TLS handshake \\([^)]*\\): it does not accept the client ` +
          `certificate in --cluster-etcd-cert ${certs.selfSigned.cert}`,
      ),
      "a client certificate etcd's CA did not sign",
    );
  },
);

t.test(
  "etcd with users: a gateway signs in as a user limited to the fleet's prefixes, survives an etcd restart, and never shows the password",
  async (t) => {
    const etcd = await startEtcd(t);
    const etcdPassword = randomPassword();
    await enableAuth(etcd, [
      {
        name: 'gateway',
        password: etcdPassword,
        prefixes: ['/api-auth/', '/api-auth.throttle/', '/api-auth.usage/', '/api-auth.usage-history/'],
      },
      { name: 'outsider', password: etcdPassword, prefixes: [] },
    ]);
    const dir = tempDir(t);
    const etcdPasswordFile = join(dir, 'etcd-password');
    // As `echo` writes it, and readable by others: the line ending is not the password's, and the mode is warned of.
    writeFileSync(etcdPasswordFile, `${etcdPassword}\n`, { mode: 0o644 });
    const { password, file } = passwordFile(t);
    const user = ['--cluster-etcd-user', 'gateway', '--cluster-etcd-password-file', etcdPasswordFile];
    const a = await startGateway(t, etcd, file, [...LEASE, ...user]);
    const b = await startGateway(t, etcd, file, [...LEASE, ...user]);
    t.match(
      a.logs.find((l) => l.msg === 'the etcd password file is readable by other users'),
      { level: 'warn', path: etcdPasswordFile, mode: '0644' },
    );
    const token = await newToken(a.url, password, [INFO]);
    t.equal(await status(b, token), 200, 'issued on A, valid on B');
    // A password check is counted under /api-auth.throttle/, which the role grants too.
    t.same((await jsonrpc(`${b.url}/ext/auth`, 'auth.newToken', { password: 'wrong', endpoints: [INFO] })).error, INCORRECT_PASSWORD);

    // etcd forgets its users' tokens when it restarts: the gateways sign in again by themselves.
    await etcd.kill();
    await etcd.start();
    for (const g of [a, b]) await g.waitForLines((l) => l.msg === 'serving in the fleet', 2, 15_000);
    t.same(await revokeToken(a.url, password, token), REVOKED, 'the fleet takes changes again');
    expectRefused(t, await call(b.url, INFO, token), REASONS.revoked, 'revoked on A, refused on B as the call returns');

    for (const g of [a, b]) {
      t.notOk(g.stdout().includes(etcdPassword) || g.stderr().includes(etcdPassword), 'the etcd password is in no log line');
      t.notOk(readFileSync(`/proc/${g.child.pid}/cmdline`, 'utf8').includes(etcdPassword), 'nor in the command line (ps)');
    }

    const wrongFile = join(dir, 'wrong-password');
    const wrong = randomPassword();
    writeFileSync(wrongFile, wrong, { mode: 0o600 });
    const base = ['--http-port', '0', '--api-auth-required', '--api-auth-password-file', file, '--data-dir', join(dir, 'd'), ...LEASE];
    const [refused, anonymous, outsider] = await Promise.all([
      refusedStart(t, etcd.url, [...base, '--cluster-etcd-user', 'gateway', '--cluster-etcd-password-file', wrongFile]),
      refusedStart(t, etcd.url, base),
      refusedStart(t, etcd.url, [...base, '--cluster-etcd-user', 'outsider', '--cluster-etcd-password-file', etcdPasswordFile]),
    ]);
    expectStartFailure(
      t,
      refused,
      new RegExp(
        `etcd refused the user "gateway" with the password in --cluster-etcd-password-file ` +
          `${wrongFile} \\(authentication failed\\); check the user name and the password the file holds`,
      ),
      'a wrong password',
    );
    t.notOk(refused.stdout.includes(wrong) || refused.stderr.includes(wrong), 'the wrong password is not shown either');
    expectStartFailure(
      t,
      anonymous,
      new RegExp(
        `etcd's authentication is enabled, and no etcd user was given; give ` + '--cluster-etcd-user and --cluster-etcd-password-file',
      ),
      'no user',
    );
    expectStartFailure(
      t,
      outsider,
      new RegExp(
        `etcd denied the user "outsider" access to the fleet's keys; grant its role ` +
          'readwrite on the key prefixes /api-auth/, /api-auth\\.throttle/ and /api-auth\\.usage/',
      ),
      "a user without the fleet's prefixes",
    );
  },
);

t.test('the etcd TLS and user flags are checked before anything starts, and their files before etcd is asked', async (t) => {
  const dir = tempDir(t);
  const certs = makeCertificates(dir);
  const { file } = passwordFile(t);
  const https = `https://127.0.0.1:${await closedPort()}`;
  const http = `http://127.0.0.1:${await closedPort()}`;
  const auth = ['--http-port', '0', '--api-auth-required', '--api-auth-password-file', file, '--data-dir', join(dir, 'd')];
  const notPem = join(dir, 'not.pem');
  writeFileSync(notPem, 'not a certificate\n');
  const empty = join(dir, 'empty');
  writeFileSync(empty, '\n', { mode: 0o600 });
  // A gateway password file still to be generated: a bad etcd file must leave it so.
  const ungenerated = join(dir, 'generated-password');
  const cases: [string[], RegExp][] = [
    [
      ['--cluster-etcd', https, '--cluster-etcd-cert', certs.client.cert],
      /^api-auth: --cluster-etcd-cert needs --cluster-etcd-key, its private key's PEM file/m,
    ],
    [['--cluster-etcd', https, '--cluster-etcd-key', certs.client.key], /^api-auth: --cluster-etcd-key needs --cluster-etcd-cert/m],
    [
      ['--cluster-etcd', http, '--cluster-etcd-ca', certs.ca],
      /^api-auth: --cluster-etcd-ca sets TLS to etcd, and --cluster-etcd names http:\/\/ URLs, which do not use TLS: the connection would not be protected/m,
    ],
    [
      ['--cluster-etcd', http, '--cluster-etcd-cert', certs.client.cert, '--cluster-etcd-key', certs.client.key],
      /^api-auth: --cluster-etcd-cert sets TLS to etcd/m,
    ],
    [['--cluster-etcd', `${http},${https}`], /^api-auth: --cluster-etcd mixes http:\/\/ and https:\/\/ URLs/m],
    [['--cluster-etcd', http, '--cluster-etcd-user', 'gateway'], /^api-auth: --cluster-etcd-user needs --cluster-etcd-password-file/m],
    [['--cluster-etcd', http, '--cluster-etcd-password-file', file], /^api-auth: --cluster-etcd-password-file needs --cluster-etcd-user/m],
    [['--cluster-etcd-ca', certs.ca], /^api-auth: --cluster-etcd-ca sets how this gateway joins a fleet, and there is no --cluster-etcd/m],
    [
      ['--cluster-etcd', https, '--cluster-etcd-ca', join(dir, 'missing.pem')],
      /^api-auth: --cluster-etcd-ca \S+missing\.pem does not exist/m,
    ],
    [['--cluster-etcd', https, '--cluster-etcd-ca', notPem], /^api-auth: --cluster-etcd-ca \S+not\.pem holds no PEM certificate/m],
    [
      ['--cluster-etcd', https, '--cluster-etcd-cert', certs.client.cert, '--cluster-etcd-key', certs.selfSigned.key],
      /^api-auth: --cluster-etcd-key \S+stranger\.key is not the key of the certificate in --cluster-etcd-cert \S+client\.crt/m,
    ],
    [
      ['--cluster-etcd', https, '--cluster-etcd-cert', notPem, '--cluster-etcd-key', certs.client.key],
      /^api-auth: --cluster-etcd-cert \S+not\.pem is not a PEM certificate/m,
    ],
    [
      ['--cluster-etcd', http, '--cluster-etcd-user', 'gateway', '--cluster-etcd-password-file', join(dir, 'missing')],
      /^api-auth: --cluster-etcd-password-file \S+missing does not exist/m,
    ],
    [
      ['--cluster-etcd', http, '--cluster-etcd-user', 'gateway', '--cluster-etcd-password-file', empty],
      /^api-auth: --cluster-etcd-password-file \S+empty is empty; write the password of the etcd user "gateway" in it/m,
    ],
  ];
  const runs = await Promise.all(cases.map(([flags]) => runCli(t, [...auth, ...flags])));
  runs.forEach((run, i) => {
    const [flags, message] = cases[i];
    t.equal(run.code, 2, flags.join(' '));
    t.match(run.stderr, message, flags.join(' '));
  });
  const untouched = await runCli(t, [
    '--http-port',
    '0',
    '--api-auth-required',
    '--api-auth-password-file',
    ungenerated,
    '--data-dir',
    join(dir, 'e'),
    '--cluster-etcd',
    https,
    '--cluster-etcd-ca',
    notPem,
  ]);
  t.equal(untouched.code, 2);
  t.notOk(existsSync(ungenerated), "the gateway's password file is not generated when an etcd file is bad");
});
