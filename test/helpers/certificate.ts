// A self-signed certificate for the TLS tests, made by openssl: an EC P-256 key and a
// certificate for 127.0.0.1 (the IP in its subjectAltName), valid a day.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

export interface CertificatePair {
  readonly cert: string;
  readonly key: string;
}

/** `<name>.crt` and `<name>.key` in `dir`, the certificate's CN `name`. */
export function selfSigned(dir: string, name: string): CertificatePair {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}
