// TLS with the node's flags (--http-tls-enabled, --http-tls-cert-file, --http-tls-key-file):
// certificates made by openssl here; bad files refused before anything listens; SIGHUP
// reloads the pair, a kept-alive connection survives it and a new one gets the new
// certificate; a bad pair on SIGHUP keeps the old one. On one thread and on several.
import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import t from 'tap';
import type { Test } from 'tap';
import { encodeRequest, readResponse } from './helpers/http.js';
import type { HttpResponse } from './helpers/http.js';
import { runCli, startServer, tempDir } from './helpers/server.js';
import type { Server } from './helpers/server.js';

interface Pair {
  cert: string;
  key: string;
}

/** A self-signed certificate for 127.0.0.1 named `name`, and its key, made by openssl in `dir`. */
function makePair(dir: string, name: string): Pair {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key,
    '-out', cert, '-days', '1', '-subj', `/CN=${name}`, '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  return { cert, key };
}

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

  request(path: string): Promise<HttpResponse> {
    this.socket.write(encodeRequest('http://127.0.0.1:1', path, { keepAlive: true }));
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

async function tlsServer(t: Test, threads: number): Promise<{ server: Server; live: Pair; first: Pair; second: Pair }> {
  const dir = tempDir(t);
  const first = makePair(dir, 'first');
  const second = makePair(dir, 'second');
  // The files the server is given; a renewal writes over them.
  const live = { cert: join(dir, 'live.crt'), key: join(dir, 'live.key') };
  copyFileSync(first.cert, live.cert);
  copyFileSync(first.key, live.key);
  const server = await startServer(t, {
    args: ['--http-threads', String(threads), '--http-tls-enabled', '--http-tls-cert-file', live.cert, '--http-tls-key-file', live.key],
  });
  return { server, live, first, second };
}

for (const threads of [1, 2]) {
  t.test(`on ${threads} HTTP thread(s)`, async (t) => {
    t.test('serves HTTPS with the certificate given', async (t) => {
      const { server, first } = await tlsServer(t, threads);
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

    t.test('SIGHUP with a bad pair keeps the old certificate and logs why', async (t) => {
      const { server, live, first, second } = await tlsServer(t, threads);
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

t.test('bad TLS settings: one clear line, exit 2, before anything listens', async (t) => {
  const dir = tempDir(t);
  const pair = makePair(dir, 'good');
  const other = makePair(dir, 'other');
  const notPem = join(dir, 'not.pem');
  writeFileSync(notPem, 'hello\n');
  const encrypted = join(dir, 'encrypted.key');
  execFileSync('openssl', ['pkey', '-in', pair.key, '-aes256', '-passout', 'pass:secret', '-out', encrypted], { stdio: 'ignore' });
  const base = ['--http-port', '0', '--data-dir', join(dir, 'data')];
  const cases: [string, string[], RegExp][] = [
    ['no certificate file', ['--http-tls-enabled', '--http-tls-key-file', pair.key],
      /^api-auth: --http-tls-enabled needs --http-tls-cert-file, the certificate chain's PEM file$/],
    ['no key file', ['--http-tls-enabled', '--http-tls-cert-file', pair.cert],
      /^api-auth: --http-tls-enabled needs --http-tls-key-file, the private key's PEM file$/],
    ['a missing certificate file', ['--http-tls-enabled', '--http-tls-cert-file', join(dir, 'missing.crt'), '--http-tls-key-file', pair.key],
      /^api-auth: --http-tls-cert-file \S+missing\.crt does not exist; give the certificate chain's PEM file$/],
    ['a certificate that is not PEM', ['--http-tls-enabled', '--http-tls-cert-file', notPem, '--http-tls-key-file', pair.key],
      /^api-auth: --http-tls-cert-file \S+not\.pem is not a PEM certificate chain \(.+\); give the certificate chain's PEM file$/],
    ['a key that is not PEM', ['--http-tls-enabled', '--http-tls-cert-file', pair.cert, '--http-tls-key-file', notPem],
      /^api-auth: --http-tls-key-file \S+not\.pem is not a PEM private key \(.+\); give the private key's PEM file$/],
    ['a key that is not the certificate\'s', ['--http-tls-enabled', '--http-tls-cert-file', pair.cert, '--http-tls-key-file', other.key],
      /^api-auth: --http-tls-key-file \S+other\.key is not the key of the certificate in --http-tls-cert-file \S+good\.crt \(.+\); give the pair that belongs together$/],
    ['an encrypted key', ['--http-tls-enabled', '--http-tls-cert-file', pair.cert, '--http-tls-key-file', encrypted],
      /^api-auth: --http-tls-key-file \S+encrypted\.key is encrypted; give an unencrypted key, readable only by this user \(openssl pkey -in encrypted\.key -out plain\.key\)$/],
    ['a certificate file without TLS on', ['--http-tls-cert-file', pair.cert],
      /^api-auth: --http-tls-cert-file is used only with --http-tls-enabled; add it, or leave --http-tls-cert-file out$/],
  ];
  for (const [label, args, line] of cases) {
    const result = await runCli(t, [...base, ...args]);
    t.equal(result.code, 2, `${label}: exit 2`);
    t.match(result.stderr.trimEnd(), line, label);
    t.equal(result.stderr.trim().split('\n').length, 1, `${label}: one line`);
    t.notOk(result.logs.some((l) => l.msg === 'listening'), `${label}: never listened`);
  }
});
