// The TLS parts' certificate: made by openssl at bench time in a temporary directory, an
// EC P-256 key and a self-signed certificate for 127.0.0.1 (CN and IP SAN), the one pair
// every gateway serves, so that all of them do the same signature per handshake.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Resolves with { certFile, keyFile, pemFile (certificate then key, as HAProxy's `crt`
 * takes them), ca (the certificate's PEM, what a client trusts), description, cleanup() }.
 */
export function makeCertificate() {
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-tls-'));
  // nginx's workers drop to "nobody" when started as root: they must be able to read here.
  chmodSync(dir, 0o755);
  try {
    const certFile = join(dir, 'cert.pem');
    const keyFile = join(dir, 'key.pem');
    const pemFile = join(dir, 'haproxy.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        keyFile,
        '-out',
        certFile,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    chmodSync(keyFile, 0o644);
    const ca = readFileSync(certFile, 'latin1');
    writeFileSync(pemFile, ca + readFileSync(keyFile, 'latin1'), { mode: 0o644 });
    return {
      certFile,
      keyFile,
      pemFile,
      ca,
      description: 'EC P-256, self-signed, CN and IP SAN 127.0.0.1',
      cleanup: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`openssl could not make the bench's certificate: ${String(error.stderr ?? error.message).trim()}`);
  }
}
