// TLS with the node's flags: the certificate and key files, checked by node:tls before
// anything listens (uWebSockets.js says only "App construction failed"), and the apps
// that serve with them.
//
// A reload without dropping connections: the listening app accepts and hands each
// connection to a child SSLApp (the child app descriptors that the HTTP threads use
// too), and the TLS handshake happens in the child. The listening app must be an SSLApp
// as well (acceptorApp): uWS takes a child for an app of the acceptor's own kind, and a
// plain App acceptor adopts each connection into the SSL child as a plain socket, too
// small for the TLS state the child then writes into it (heap corruption). A reload makes
// a new SSLApp from the files as they are now and puts it in the old one's place: new
// connections get the new certificate, connections already open stay with the app that
// took them. uWS has no other way: an SSLApp reads its files once, and addServerName
// only serves clients that send that name (SNI), never those that dial an address.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { App, SSLApp } from 'uWebSockets.js';
import type { TemplatedApp } from 'uWebSockets.js';
import { OptionError } from '../errors.js';
import type { TlsFiles } from '../options.js';

const WHAT = { tlsCertFile: 'certificate chain', tlsKeyFile: 'private key' } as const;

/**
 * Throws OptionError, naming the file at fault, unless both files can be read and node:tls
 * takes them as a certificate chain and the private key that goes with it.
 */
export function checkTlsFiles(files: TlsFiles): void {
  checkPemPair({ option: 'tlsCertFile', path: files.certFile, pem: readPem('tlsCertFile', files.certFile), what: WHAT.tlsCertFile },
    { option: 'tlsKeyFile', path: files.keyFile, pem: readPem('tlsKeyFile', files.keyFile) });
}

/** A PEM file's text as read, and the option that named it (its library name). */
export interface PemFile {
  readonly option: string;
  readonly path: string;
  readonly pem: string | Buffer;
  /** What the file should hold, for the messages: "certificate chain" by default. */
  readonly what?: string;
}

/**
 * Throws OptionError, naming the file at fault, unless node:tls takes `cert` as a
 * certificate chain and `key` as the unencrypted private key that goes with it: the
 * check of the server's pair (--http-tls-*) and of a client's (--cluster-etcd-cert/-key).
 */
export function checkPemPair(cert: PemFile, key: PemFile): void {
  // uWS would ask for the passphrase on the terminal, and a service has none to answer.
  if (/-----BEGIN [A-Z ]*ENCRYPTED|Proc-Type: 4,ENCRYPTED/.test(key.pem.toString())) {
    throw new OptionError(key.option, (name) => `${name(key.option)} ${key.path} is encrypted; give an unencrypted key, ` +
      'readable only by this user (openssl pkey -in encrypted.key -out plain.key)');
  }
  for (const [file, what, context] of [[key, 'private key', { key: key.pem }], [cert, cert.what ?? 'certificate chain', { cert: cert.pem }]] as const) {
    try {
      createSecureContext(context);
    } catch (error) {
      throw new OptionError(file.option, (name) => `${name(file.option)} ${file.path} is not a PEM ${what} (${reason(error)}); ` +
        `give the ${what}'s PEM file`);
    }
  }
  try {
    createSecureContext({ cert: cert.pem, key: key.pem });
  } catch (error) {
    throw new OptionError(key.option, (name) => `${name(key.option)} ${key.path} is not the key of the certificate in ` +
      `${name(cert.option)} ${cert.path} (${reason(error)}); give the pair that belongs together`);
  }
}

/** Why the files cannot be used now, or null: the check of a reload, which must keep the old pair rather than fail. */
export function tlsFilesProblem(files: TlsFiles): string | null {
  try {
    checkTlsFiles(files);
    return null;
  } catch (error) {
    return (error as OptionError).describe((option) => option === 'tlsCertFile' ? '--http-tls-cert-file' : '--http-tls-key-file');
  }
}

/** An app serving TLS with the files; throws when uWS cannot load them (they changed since they were checked). */
export function tlsApp(files: TlsFiles): TemplatedApp {
  try {
    return SSLApp({ cert_file_name: files.certFile, key_file_name: files.keyFile });
  } catch {
    throw new Error(`uWebSockets.js could not load the TLS certificate ${files.certFile} and key ${files.keyFile}`);
  }
}

/**
 * The app that listens and hands each connection to a child app (an HTTP thread's, or a
 * TLS reload's): of the children's kind, an SSLApp with the files when they serve TLS.
 * Its own handlers answer only a connection taken while no child is registered.
 */
export function acceptorApp(files: TlsFiles | undefined): TemplatedApp {
  return files === undefined ? App() : tlsApp(files);
}

/** The child app calls of uWebSockets.js: the package has them, its typings not. */
export interface ChildApps {
  addChildAppDescriptor(descriptor: number): void;
  removeChildAppDescriptor(descriptor: number): void;
}

export function descriptorOf(app: TemplatedApp): number {
  return (app as unknown as { getDescriptor(): number }).getDescriptor();
}

/** What the log says of the certificate loaded: whom it names and until when it is valid. */
export function certificateFields(files: TlsFiles): { subject?: string; validTo?: string } {
  try {
    const certificate = new X509Certificate(readFileSync(files.certFile));
    return { subject: certificate.subject.replace(/\n/g, ', '), validTo: new Date(certificate.validTo).toISOString() };
  } catch {
    return {};
  }
}

function readPem(option: keyof typeof WHAT, path: string): string {
  try {
    return readFileSync(path, 'latin1');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'does not exist' : code === 'EISDIR' ? 'is a folder' : code === 'EACCES' ? 'is not readable by this user' : reason(error);
    throw new OptionError(option, (name) => `${name(option)} ${path} ${why}; give the ${WHAT[option]}'s PEM file`);
  }
}

/** An error's message without OpenSSL's code in front. */
export function reason(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/^error:[0-9A-F]+:/i, '');
}
