// Debian's HAProxy as a JWT gateway: `jwt_verify` checks an HS256 signature with the
// shared secret and `exp` is compared with `date()`, 401 otherwise; the same promise as
// api-auth's gate (a token validly signed and not expired), without revocation or
// per-path grants. Runs in the foreground (-db) from a temporary directory. With `tls`
// (lib/certificate.js's pair) it terminates TLS itself (`bind ... ssl crt`), as it would
// at the edge.
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startOnPort } from '../lib/proc.js';

const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** An HS256 JWT over `claims`, signed with the bytes of `secret`. */
export function hs256(claims, secret) {
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}

/**
 * Starts HAProxy with `threads` threads (nbthread) in front of the upstream, serving
 * HTTPS when `tls` is given. `secret` must be printable ASCII without quotes or
 * backslashes: it sits in the config as text.
 */
export async function startHaproxyJwt({ upstreamPort, secret, threads = 1, cpus = null, tls }) {
  if (!/^[A-Za-z0-9_-]+$/.test(secret)) throw new Error('the HAProxy secret must be base64url text');
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-haproxy-'));
  try {
    const port = await freePort();
    const config = `global
  nbthread ${threads}
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
frontend gate
  bind 127.0.0.1:${port}${tls ? ` ssl crt ${tls.pemFile}` : ''}
  http-request set-var(txn.bearer) http_auth_bearer
  http-request set-var(txn.now) date()
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_verify("HS256","${secret}") -m int 1 }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_payload_query('$.exp','int'),sub(txn.now) -m int gt 0 }
  default_backend node
backend node
  http-reuse always
  server node 127.0.0.1:${upstreamPort}
`;
    const file = join(dir, 'haproxy.cfg');
    writeFileSync(file, config, { mode: 0o600 });
    const server = await startOnPort(
      `HAProxy jwt_verify (${threads} thread${threads > 1 ? 's' : ''}${tls ? ', TLS' : ''})`,
      'haproxy',
      ['-db', '-f', file],
      port,
      { cpus },
    );
    return {
      ...server,
      stop: async () => {
        await server.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
