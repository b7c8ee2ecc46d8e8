// The operator commands against a node served over TLS: --cacert trusts the
// CA that signed the node's certificate, a private one made here by openssl, beside the
// system's; and a handshake that fails says why (self-signed, an unknown CA, a name the
// certificate does not hold, expired) rather than asking whether the node is running.
// The node is a real TLS server (node:https) that answers auth.newToken as a node does.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { runOperator } from '../helpers/operator.js';
import { tempDir } from '../helpers/server.js';

const dir = tempDir(t);
const openssl = (args: string[]): void => {
  execFileSync('openssl', args, { stdio: 'ignore' });
};
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A certificate and key made by openssl: self-signed, or signed by the CA `ca` for `san` with `days` of life. */
function certificate(name: string, san: string, ca?: string, days = 1): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  if (ca === undefined) {
    openssl([
      'req',
      '-x509',
      ...EC,
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      String(days),
      '-subj',
      `/CN=${name}`,
      '-addext',
      `subjectAltName=${san}`,
    ]);
    return { cert, key };
  }
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, `subjectAltName=${san}\n`);
  openssl(['req', ...EC, '-keyout', key, '-out', csr, '-subj', `/CN=${name}`]);
  openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    `${ca}.crt`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    cert,
    '-days',
    String(days),
    '-extfile',
    ext,
  ]);
  return { cert, key };
}

const ca = certificate('private-ca', 'DNS:private-ca', undefined, 2);
const caBase = join(dir, 'private-ca');
const good = certificate('node', 'IP:127.0.0.1', caBase);
const otherName = certificate('elsewhere', 'DNS:node.example', caBase);
// Its end before its start: a certificate expired before the test began.
const expired = certificate('expired', 'IP:127.0.0.1', caBase, -1);
const selfSigned = certificate('self', 'IP:127.0.0.1');
const passwordFile = join(dir, 'password');
writeFileSync(passwordFile, 'correct horse battery staple\n', { mode: 0o600 });

/** A TLS node with `pair`, answering every call with a token: its https:// URI. */
async function tlsNode(pair: { cert: string; key: string }): Promise<string> {
  const server = createServer({ cert: readFileSync(pair.cert), key: readFileSync(pair.key) }, (req, res) => {
    req.resume();
    req.on('end', () =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","result":{"token":"a-token","id":"t1"},"id":1}'),
    );
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  t.teardown(() => new Promise<void>((closed) => server.close(() => closed())));
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const api = (args: readonly string[]) => runOperator(args);

const tokenNew = (uri: string, ...more: string[]) =>
  api(['token', 'new', '--uri', uri, '--password-file', passwordFile, '--endpoints', '/', ...more]);

t.test("--cacert: a node whose certificate a private CA signed is reached, beside the system's CAs", async (t) => {
  const uri = await tlsNode(good);
  const untrusted = await tokenNew(uri);
  t.equal(untrusted.code, 3, 'without it: the node cannot be trusted');
  t.match(
    untrusted.stderr,
    /^api-auth: cannot reach https:\/\/127\.0\.0\.1:\d+\/ext\/auth: the node's TLS certificate is signed by a CA this command does not trust: give the CA certificate that signed it with --cacert FILE\n$/,
  );
  t.notMatch(untrusted.stderr, /is the node running there/, 'it is running: the message does not ask');
  const trusted = await tokenNew(uri, '--cacert', ca.cert);
  t.equal(trusted.code, 0, trusted.stderr);
  t.equal(trusted.stdout, 'a-token\n');
});

t.test('a failed handshake names its cause', async (t) => {
  const self = await tokenNew(await tlsNode(selfSigned));
  t.equal(self.code, 3);
  t.match(self.stderr, /the node's TLS certificate is self-signed, and not trusted: give that certificate with --cacert FILE\n$/);
  const selfTrusted = await tokenNew(await tlsNode(selfSigned), '--cacert', selfSigned.cert);
  t.equal(selfTrusted.code, 0, 'a self-signed certificate given with --cacert is trusted');
  const wrongCa = await tokenNew(await tlsNode(good), '--cacert', selfSigned.cert);
  t.match(wrongCa.stderr, /signed by a CA this command does not trust: the CA of --cacert \(and the system's\) did not sign it\n$/);
  const name = await tokenNew(await tlsNode(otherName), '--cacert', ca.cert);
  t.equal(name.code, 3);
  t.match(name.stderr, /the node's TLS certificate is not for 127\.0\.0\.1 \(.*\); use the name the certificate holds in --uri\n$/);
  const old = await tokenNew(await tlsNode(expired), '--cacert', ca.cert);
  t.equal(old.code, 3);
  t.match(old.stderr, /the node's TLS certificate has expired: the node needs a new one\n$/);
});

t.test('--cacert must be a readable PEM certificate, for an https:// node: exit 2, nothing sent', async (t) => {
  const key = await tokenNew('https://127.0.0.1:1', '--cacert', ca.key);
  t.equal(key.code, 2);
  t.match(
    key.stderr,
    /^api-auth: --cacert \S+private-ca\.key holds no PEM certificate \(-----BEGIN CERTIFICATE-----\); give the CA certificate's PEM file, not its key\n$/,
  );
  const missing = await tokenNew('https://127.0.0.1:1', '--cacert', join(dir, 'nothing.crt'));
  t.equal(missing.code, 2);
  t.match(missing.stderr, /--cacert \S+nothing\.crt does not exist; give the PEM file of the CA certificate/);
  const plain = await tokenNew('http://127.0.0.1:1', '--cacert', ca.cert);
  t.equal(plain.code, 2);
  t.match(plain.stderr, /--cacert is for a node at an https:\/\/ --uri, and http:\/\/127\.0\.0\.1:1 is plain HTTP/);
});
