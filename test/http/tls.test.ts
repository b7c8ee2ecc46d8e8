// TLS with the node's flags (--http-tls-enabled, --http-tls-cert-file, --http-tls-key-file):
// certificates made by openssl here; bad files refused before anything listens; SIGHUP
// reloads the pair, a kept-alive connection survives it and a new one gets the new
// certificate; a bad pair on SIGHUP keeps the old one. On one thread and on several.
// WebSocket sessions over TLS (wss://) through --upstream, across a reload and a revoke.
import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import t from 'tap';
import type { Test } from 'tap';
import { encodeRequest, readResponse } from '../helpers/http.js';
import type { HttpResponse, RequestOptions } from '../helpers/http.js';
import { REASONS, REVOKED } from '../helpers/auth.js';
import { CHAIN_ID, openClient, Refused, startWsUpstream } from '../helpers/ws-upstream.js';
import { runCli, startServer, tempDir } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';
import type { Server } from '../helpers/server.js';
import { selfSigned } from '../helpers/certificate.js';
import type { CertificatePair as Pair } from '../helpers/certificate.js';

/** A TLS connection that trusts only `ca`, and sends its requests one at a time. */
class TlsConnection {
  private received = Buffer.alloc(0);
  private waiting: (() => void) | null = null;
  private ended = false;

  private constructor(readonly socket: TLSSocket) {
    socket.on('data', (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      this.waiting?.();
    });
    const end = (): void => {
      this.ended = true;
      this.waiting?.();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
  }

  static open(port: number, ca: string): Promise<TlsConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, ca: readFileSync(ca) });
      socket.once('secureConnect', () => resolve(new TlsConnection(socket)));
      socket.once('error', reject);
    });
  }

  /** The name (CN) of the certificate the server presented. */
  get certificateName(): string {
    return String(this.socket.getPeerCertificate().subject.CN);
  }

  request(path: string, options: RequestOptions = {}): Promise<HttpResponse> {
    this.socket.write(encodeRequest('http://127.0.0.1:1', path, { ...options, keepAlive: true }));
    return new Promise((resolve, reject) => {
      this.waiting = () => {
        const parsed = readResponse(this.received, this.ended, 'GET');
        if (parsed !== undefined) {
          this.received = this.received.subarray(parsed.length);
          this.waiting = null;
          resolve(parsed.response);
        } else if (this.ended) {
          this.waiting = null;
          reject(new Error('the connection closed before a complete response'));
        }
      };
      this.waiting();
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

async function tlsServer(
  t: Test,
  threads: number,
  extra: readonly string[] = [],
): Promise<{ server: Server; live: Pair; first: Pair; second: Pair }> {
  const dir = tempDir(t);
  const first = selfSigned(dir, 'first');
  const second = selfSigned(dir, 'second');
  // The files the server is given; a renewal writes over them.
  const live = { cert: join(dir, 'live.crt'), key: join(dir, 'live.key') };
  copyFileSync(first.cert, live.cert);
  copyFileSync(first.key, live.key);
  const server = await startServer(t, {
    cheapChecks: true,
    args: [
      '--http-threads',
      String(threads),
      '--http-tls-enabled',
      '--http-tls-cert-file',
      live.cert,
      '--http-tls-key-file',
      live.key,
      ...extra,
    ],
  });
  return { server, live, first, second };
}

for (const threads of [1, 2]) {
  t.test(`on ${threads} HTTP thread(s)`, async (t) => {
    // The first test only connects, so the last one (a bad pair on SIGHUP, which must leave
    // the first pair in force) can follow it on the same server; the others load other
    // pairs or stop the server, each on a server of its own.
    const served = await tlsServer(t, threads);

    t.test('serves HTTPS with the certificate given', async (t) => {
      const { server, first } = served;
      t.equal(server.listening.tls, true, 'the listening line says TLS');
      // Several connections: with several threads, each gets some.
      for (let i = 0; i < 4; i++) {
        const connection = await TlsConnection.open(server.port, first.cert);
        t.equal(connection.certificateName, 'first');
        t.equal((await connection.request('/ext/auth/health')).status, 200);
        connection.close();
      }
    });

    t.test('SIGHUP reloads the pair: a kept-alive connection survives, a new one gets the new certificate', async (t) => {
      const { server, live, first, second } = await tlsServer(t, threads);
      const kept = await TlsConnection.open(server.port, first.cert);
      t.equal((await kept.request('/ext/auth/health')).status, 200);
      copyFileSync(second.cert, live.cert);
      copyFileSync(second.key, live.key);
      server.child.kill('SIGHUP');
      const reloaded = await server.waitForLog((l) => l.msg === 'TLS certificate reloaded');
      t.equal(reloaded.subject, 'CN=second');
      t.equal((await kept.request('/ext/auth/health')).status, 200, 'the kept-alive connection still serves');
      t.equal(kept.certificateName, 'first');
      kept.close();
      for (let i = 0; i < 4; i++) {
        const fresh = await TlsConnection.open(server.port, second.cert);
        t.equal(fresh.certificateName, 'second', 'a new connection gets the new certificate');
        t.equal((await fresh.request('/ext/auth/health')).status, 200);
        fresh.close();
      }
      t.notOk(server.hasExited(), 'still running');
    });

    // The listening app once was a plain App handing connections to SSLApps: uWS adopted
    // each as a plain socket, too small for its TLS state, and the heap overflowed on every
    // connection; within some hundreds of them (sooner with reloads) a thread crashed.
    t.test('hundreds of connections over many reloads: each is served, and the stop is clean', async (t) => {
      const { server, live, first, second } = await tlsServer(t, threads);
      let served = 0;
      let reloads = 0;
      for (let round = 0; round < 30; round++) {
        const pair = round % 2 === 0 ? second : first;
        copyFileSync(pair.cert, live.cert);
        copyFileSync(pair.key, live.key);
        server.child.kill('SIGHUP');
        await server.waitForLines((l) => l.msg === 'TLS certificate reloaded', ++reloads);
        for (let i = 0; i < 8; i++) {
          const connection = await TlsConnection.open(server.port, pair.cert);
          if ((await connection.request('/ext/auth/health')).status === 200) served++;
          connection.close();
        }
      }
      t.equal(served, 30 * 8, 'every connection served');
      const exit = await server.stop();
      t.same(exit, { code: 0, signal: null }, 'and the process stops cleanly');
    });

    // A FIFO with no writer blocks a plain read for good: the reload used to read the pair
    // on the thread that accepts every connection, so none was accepted any more.
    t.test(
      'SIGHUP with the certificate file a FIFO: new connections are served during and after, the old pair kept, the reason logged',
      async (t) => {
        const { server, live, first, second } = await tlsServer(t, threads);
        unlinkSync(live.cert);
        execFileSync('mkfifo', [live.cert]);
        server.child.kill('SIGHUP');
        const during = Array.from({ length: 4 }, () => TlsConnection.open(server.port, first.cert));
        const error = await server.waitForLog(
          (l) => l.msg === 'cannot reload the TLS certificate; serving with the one loaded before',
          5000,
        );
        t.match(
          String(error.error),
          /^--http-tls-cert-file \S+live\.crt is a FIFO, not a regular file; give the certificate chain's PEM file$/,
          'the log line says why',
        );
        for (const pending of during) {
          const connection = await pending;
          t.equal(connection.certificateName, 'first', 'a connection made during the reload has the old certificate');
          t.equal((await connection.request('/ext/auth/health')).status, 200, 'and is served');
          connection.close();
        }
        server.child.kill('SIGHUP');
        await server.waitForLines((l) => l.msg === 'cannot reload the TLS certificate; serving with the one loaded before', 2, 5000);
        for (let i = 0; i < 4; i++) {
          const connection = await TlsConnection.open(server.port, first.cert);
          t.equal((await connection.request('/ext/auth/health')).status, 200, 'a connection after the reload is served with the old pair');
          connection.close();
        }
        unlinkSync(live.cert);
        copyFileSync(second.cert, live.cert);
        copyFileSync(second.key, live.key);
        server.child.kill('SIGHUP');
        t.equal(
          (await server.waitForLog((l) => l.msg === 'TLS certificate reloaded', 5000)).subject,
          'CN=second',
          'with a regular file back, the next reload takes it',
        );
        const fresh = await TlsConnection.open(server.port, second.cert);
        t.equal(fresh.certificateName, 'second');
        fresh.close();
        t.notOk(server.hasExited(), 'still running');
        t.same(await server.stop(), { code: 0, signal: null }, 'and a clean stop');
      },
    );

    t.test('SIGHUP with a bad pair keeps the old certificate and logs why', async (t) => {
      const { server, live, first, second } = served;
      copyFileSync(second.cert, live.cert);
      server.child.kill('SIGHUP');
      const error = await server.waitForLog((l) => l.level === 'error');
      t.equal(error.msg, 'cannot reload the TLS certificate; serving with the one loaded before');
      t.match(String(error.error), /--http-tls-key-file .* is not the key of the certificate in --http-tls-cert-file/);
      const connection = await TlsConnection.open(server.port, first.cert);
      t.equal(connection.certificateName, 'first');
      t.equal((await connection.request('/ext/auth/health')).status, 200);
      connection.close();
    });
  });
}

/** A JSON-RPC call to /ext/auth over a TLS connection of its own: the result or the error. */
async function authCall(port: number, ca: string, method: string, params: object): Promise<unknown> {
  const connection = await TlsConnection.open(port, ca);
  try {
    const response = await connection.request('/ext/auth', {
      headers: [['Content-Type', 'application/json']],
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    const answer = JSON.parse(response.text) as { result?: unknown; error?: unknown };
    return answer.error ?? answer.result;
  } finally {
    connection.close();
  }
}

t.test('a request forwarded over TLS tells the node X-Forwarded-Proto: https, on one thread and on two', async (t) => {
  for (const threads of [1, 2]) {
    const upstream = await startUpstream(t);
    const { server, first } = await tlsServer(t, threads, ['--upstream', upstream.url, '--api-auth-public-endpoints', '/ext/info']);
    for (let i = 0; i < 2; i++) {
      const connection = await TlsConnection.open(server.port, first.cert);
      const response = await connection.request('/ext/info', {
        headers: [
          ['Content-Type', 'application/json'],
          ['X-Forwarded-Proto', 'http'],
        ],
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'info.getNodeVersion' }),
      });
      connection.close();
      t.equal(response.status, 200);
    }
    t.same(
      upstream.seen.map((r) => r.headers['x-forwarded-proto']),
      ['https', 'https'],
      `${threads} thread(s): https, and not what the client claimed`,
    );
  }
});

t.test('WebSocket sessions over TLS (wss://) on two threads: gated, kept across a reload, ended by a revoke', async (t) => {
  const upstream = await startWsUpstream(t);
  const { server, live, first, second } = await tlsServer(t, 2, ['--upstream', upstream.url]);
  const url = `wss://127.0.0.1:${server.port}/ext/bc/C/ws`;
  const issued = await authCall(server.port, first.cert, 'auth.newToken', { password: server.password, endpoints: ['/ext/bc/C/ws'] });
  const token = (issued as { token: string }).token;
  t.type(token, 'string', 'a token issued over HTTPS');

  try {
    await openClient(t, url, { ca: readFileSync(first.cert) });
    t.fail('a session without a token was opened');
  } catch (error) {
    t.ok(error instanceof Refused && error.status === 401, 'without a token: 401, over TLS as over plain HTTP');
  }
  // Consecutive connections go to the threads in turn: two sessions on each.
  const before = await Promise.all([0, 1, 2, 3].map(() => openClient(t, url, { token, ca: readFileSync(first.cert) })));
  for (const client of before) t.same((await client.call('eth_chainId')).result, CHAIN_ID, 'a wss session reaches the node');
  for (let n = 0; n < before.length; n++) {
    t.equal(
      (await upstream.session(n)).headers['x-forwarded-proto'],
      'https',
      'the node is told its client came over TLS, on either thread',
    );
  }

  copyFileSync(second.cert, live.cert);
  copyFileSync(second.key, live.key);
  server.child.kill('SIGHUP');
  await server.waitForLog((l) => l.msg === 'TLS certificate reloaded');
  const after = await Promise.all([0, 1].map(() => openClient(t, url, { token, ca: readFileSync(second.cert) })));
  for (const client of [...before, ...after]) {
    t.same(
      (await client.call('eth_chainId')).result,
      CHAIN_ID,
      'sessions opened before the reload go on, new ones get the new certificate',
    );
  }

  t.same(await authCall(server.port, second.cert, 'auth.revokeToken', { password: server.password, token }), REVOKED);
  for (const client of [...before, ...after]) {
    const closed = await client.closed;
    t.same([closed.code, closed.reason], [1008, REASONS.revoked], 'the revoke ends every session, on both threads and both certificates');
  }
  t.same(await server.stop(), { code: 0, signal: null }, 'and the process stops cleanly');
});

t.test('bad TLS settings: one clear line, exit 2, before anything listens', async (t) => {
  const dir = tempDir(t);
  const pair = selfSigned(dir, 'good');
  const other = selfSigned(dir, 'other');
  const notPem = join(dir, 'not.pem');
  writeFileSync(notPem, 'hello\n');
  const encrypted = join(dir, 'encrypted.key');
  execFileSync('openssl', ['pkey', '-in', pair.key, '-aes256', '-passout', 'pass:secret', '-out', encrypted], { stdio: 'ignore' });
  const fifo = join(dir, 'cert.fifo');
  execFileSync('mkfifo', [fifo]);
  const base = ['--http-port', '0', '--data-dir', join(dir, 'data')];
  const cases: [string, string[], RegExp][] = [
    [
      'no certificate file',
      ['--http-tls-enabled', '--http-tls-key-file', pair.key],
      /^api-auth: --http-tls-enabled needs --http-tls-cert-file, the certificate chain's PEM file$/,
    ],
    [
      'no key file',
      ['--http-tls-enabled', '--http-tls-cert-file', pair.cert],
      /^api-auth: --http-tls-enabled needs --http-tls-key-file, the private key's PEM file$/,
    ],
    [
      'a missing certificate file',
      ['--http-tls-enabled', '--http-tls-cert-file', join(dir, 'missing.crt'), '--http-tls-key-file', pair.key],
      /^api-auth: --http-tls-cert-file \S+missing\.crt does not exist; give the certificate chain's PEM file$/,
    ],
    [
      'a certificate that is not PEM',
      ['--http-tls-enabled', '--http-tls-cert-file', notPem, '--http-tls-key-file', pair.key],
      /^api-auth: --http-tls-cert-file \S+not\.pem is not a PEM certificate chain \(.+\); give the certificate chain's PEM file$/,
    ],
    [
      'a key that is not PEM',
      ['--http-tls-enabled', '--http-tls-cert-file', pair.cert, '--http-tls-key-file', notPem],
      /^api-auth: --http-tls-key-file \S+not\.pem is not a PEM private key \(.+\); give the private key's PEM file$/,
    ],
    [
      "a key that is not the certificate's",
      ['--http-tls-enabled', '--http-tls-cert-file', pair.cert, '--http-tls-key-file', other.key],
      /^api-auth: --http-tls-key-file \S+other\.key is not the key of the certificate in --http-tls-cert-file \S+good\.crt \(.+\); give the pair that belongs together$/,
    ],
    [
      'an encrypted key',
      ['--http-tls-enabled', '--http-tls-cert-file', pair.cert, '--http-tls-key-file', encrypted],
      /^api-auth: --http-tls-key-file \S+encrypted\.key is encrypted; give an unencrypted key, readable only by this user \(openssl pkey -in encrypted\.key -out plain\.key\)$/,
    ],
    [
      'a certificate file that is a FIFO (it would block the start)',
      ['--http-tls-enabled', '--http-tls-cert-file', fifo, '--http-tls-key-file', pair.key],
      /^api-auth: --http-tls-cert-file \S+cert\.fifo is a FIFO, not a regular file; give the certificate chain's PEM file$/,
    ],
    [
      'a key file that is a folder',
      ['--http-tls-enabled', '--http-tls-cert-file', pair.cert, '--http-tls-key-file', dir],
      /^api-auth: --http-tls-key-file \S+ is a folder, not a regular file; give the private key's PEM file$/,
    ],
    [
      'a certificate file without TLS on',
      ['--http-tls-cert-file', pair.cert],
      /^api-auth: --http-tls-cert-file is used only with --http-tls-enabled; add it, or leave --http-tls-cert-file out$/,
    ],
  ];
  for (const [label, args, line] of cases) {
    const result = await runCli(t, [...base, ...args]);
    t.equal(result.code, 2, `${label}: exit 2`);
    t.match(result.stderr.trimEnd(), line, label);
    t.equal(result.stderr.trim().split('\n').length, 1, `${label}: one line`);
    t.notOk(
      result.logs.some((l) => l.msg === 'listening'),
      `${label}: never listened`,
    );
  }
});
