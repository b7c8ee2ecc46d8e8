// etcd's refusals: why it could not be used, as far as its answer (or the TLS
// handshake's) tells, and what the operator should do about each, for the line a start
// that cannot join the fleet ends with.
import { isIP } from 'node:net';
import { connect } from 'node:tls';
import { EtcdAuthenticationFailedError, EtcdPermissionDeniedError } from 'etcd3';
import type { FleetError, Text } from '../errors.js';
import type { ClusterConfig } from '../options.js';
import type { EtcdAccess } from './etcd.js';

/** Why etcd could not be used, as far as its answer (or the TLS handshake's) tells. */
export type EtcdRefusal =
  /** The user or its password is wrong. */
  | { readonly kind: 'authentication-failed' }
  /** etcd's authentication is on, and no user was given. */
  | { readonly kind: 'authentication-required' }
  /** A user was given, and etcd's authentication is off: it would protect nothing. */
  | { readonly kind: 'authentication-disabled' }
  /** The user's roles do not grant the fleet's keys. */
  | { readonly kind: 'permission-denied' }
  /** etcd's certificate is not one this gateway trusts. */
  | { readonly kind: 'server-untrusted'; readonly detail: string }
  /** etcd refused this gateway's client certificate, or its lack of one. */
  | { readonly kind: 'client-refused'; readonly detail: string }
  /** Anything else: not listening, not answering, not etcd. */
  | { readonly kind: 'unreachable'; readonly detail: string };

// gRPC reports a connection that failed as UNAVAILABLE, with the socket's or TLS's error
// after "Last error:" (and at times a time stamp in brackets).
const LAST_ERROR = /Last error: (?:Error(?: \[\w+\])?: )?([\s\S]*?)\s*(?:\(\d{4}-\d\d-\d\dT[^)]*\))?\.? Resolution note/;
// OpenSSL's line: "...:error:0A000412:SSL routines:ssl3_read_bytes:sslv3 alert bad certificate:file:line:...".
const OPENSSL_REASON = /SSL routines:[^:]*:([^:]+)/;
// The alerts a TLS server sends about the client's certificate (RFC 8446 §6.2).
const CLIENT_CERTIFICATE_ALERT =
  /alert (bad certificate|certificate required|unknown ca|certificate unknown|unsupported certificate|certificate expired|certificate revoked)/i;
// Node's own checks of the server's certificate (its chain, its dates, its names).
const SERVER_CERTIFICATE_PROBLEM =
  /unable to (verify|get)|self[- ]signed certificate|certificate has expired|certificate is not yet valid|does not match certificate's altnames/i;

/** What an error of etcd3 (or of the gRPC under it, or of a TLS handshake) says went wrong. */
export function etcdRefusal(error: unknown): EtcdRefusal {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof EtcdAuthenticationFailedError) return { kind: 'authentication-failed' };
  if (message.includes('etcdserver: user name is empty')) return { kind: 'authentication-required' };
  if (message.includes('etcdserver: authentication is not enabled')) return { kind: 'authentication-disabled' };
  if (error instanceof EtcdPermissionDeniedError) return { kind: 'permission-denied' };
  const last = LAST_ERROR.exec(message)?.[1];
  const detail = last === undefined ? message.replace(/^\d+ [A-Z_]+: /, '') : (OPENSSL_REASON.exec(last)?.[1] ?? last);
  if (CLIENT_CERTIFICATE_ALERT.test(detail)) return { kind: 'client-refused', detail };
  if (SERVER_CERTIFICATE_PROBLEM.test(detail)) return { kind: 'server-untrusted', detail };
  return { kind: 'unreachable', detail };
}

/** How long the handshake probe waits for etcd to refuse: a refusal comes within a round trip of the handshake. */
const PROBE_MS = 3000;

/**
 * The TLS handshake with etcd at `endpoint`, alone, with this gateway's `tls`, and the read
 * after it: the error it ends with, or undefined when etcd keeps the connection. In TLS 1.3
 * a server checks the client's certificate after the client's side of the handshake has
 * finished, so its alert comes with the first read; gRPC may have dropped the connection by
 * then and say only "Failed to connect". Asked only when a start has already failed that way.
 */
export function probeTls(endpoint: string, tls: NonNullable<EtcdAccess['tls']>): Promise<Error | undefined> {
  const url = new URL(endpoint);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = connect({
      host,
      port: Number(url.port || 2379),
      ca: tls.ca,
      cert: tls.client?.cert,
      key: tls.client?.key,
      ALPNProtocols: ['h2'],
      // An address is no server name (RFC 6066); Node checks the certificate against the address.
      servername: isIP(host) === 0 ? host : undefined,
    });
    const done = (error: Error | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(error);
    };
    const timer = setTimeout(() => done(undefined), PROBE_MS);
    socket.on('error', (error) => done(error));
    socket.on('close', () => done(undefined));
    socket.resume();
  });
}

/**
 * Why joining failed, with what to do: etcd's refusal when it said one (etcdRefusal), else
 * the fleet's own words. `probed` is what probeTls found, for a failure gRPC could not name.
 */
export function joinProblem(error: FleetError, cluster: ClusterConfig, probed?: Error): Text {
  if (error.cause === undefined) return () => error.message;
  const said = etcdRefusal(error.cause);
  const found = probed === undefined ? undefined : etcdRefusal(probed);
  // The probe's answer only when it names a refusal: a plain failure to connect is gRPC's to tell.
  const refusal = said.kind === 'unreachable' && found !== undefined && found.kind !== 'unreachable' ? found : said;
  const { auth, tls } = cluster;
  const prefixes = `/${cluster.name}/, /${cluster.name}.throttle/ and /${cluster.name}.usage/`;
  switch (refusal.kind) {
    case 'authentication-failed':
      return (name) =>
        `etcd refused the user ${JSON.stringify(auth?.user)} with the password in ${name('clusterEtcdPasswordFile')} ` +
        `${auth?.passwordFile} (authentication failed); check the user name and the password the file holds`;
    case 'authentication-required':
      return (name) =>
        `etcd's authentication is enabled, and no etcd user was given; give ${name('clusterEtcdUser')} and ` +
        `${name('clusterEtcdPasswordFile')}, a user whose role has readwrite on the key prefixes ${prefixes}`;
    case 'authentication-disabled':
      return (name) =>
        `${name('clusterEtcdUser')} is given, and etcd's authentication is not enabled, so it would protect nothing; ` +
        `enable it (etcdctl auth enable), or leave ${name('clusterEtcdUser')} and ${name('clusterEtcdPasswordFile')} out`;
    case 'permission-denied':
      return () =>
        `etcd denied ${auth === undefined ? 'this gateway' : `the user ${JSON.stringify(auth.user)}`} access to the fleet's ` +
        `keys; grant its role readwrite on the key prefixes ${prefixes} (etcdctl role grant-permission ROLE --prefix=true readwrite ` +
        `/${cluster.name}/, and the same for /${cluster.name}.throttle/ and /${cluster.name}.usage/)`;
    case 'server-untrusted':
      return (name) =>
        `etcd's certificate is not trusted (${refusal.detail}); ` +
        (tls?.caFile === undefined
          ? `give ${name('clusterEtcdCa')}, the PEM file of the CA that signed it`
          : `check that ${name('clusterEtcdCa')} ${tls.caFile} holds the CA that signed it, and that it names the host of ${name('clusterEtcd')}`);
    case 'client-refused':
      return (name) =>
        `etcd refused the TLS handshake (${refusal.detail}): ` +
        (tls?.client === undefined
          ? `it asks for a client certificate; give ${name('clusterEtcdCert')} and ${name('clusterEtcdKey')}, signed by a CA of etcd's --trusted-ca-file`
          : `it does not accept the client certificate in ${name('clusterEtcdCert')} ${tls.client.certFile}; give one signed by a CA of ` +
            "etcd's --trusted-ca-file");
    case 'unreachable':
      return () =>
        `etcd did not answer (${refusal.detail}); check that etcd runs there and answers` +
        (tls === undefined ? ', without TLS (for TLS, give https:// URLs)' : '');
  }
}
