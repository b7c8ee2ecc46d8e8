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
//
// uWS reads the files itself, blocking its thread, and a file can block for good: a FIFO
// with no writer, a hung network mount. At start that stops the start (a FIFO is refused
// outright); while serving it would stop every new connection, and the watchdog would
// take the owner for a hung HTTP thread. So a reload reads the pair off the event loop,
// within a bound, and hands uWS a private copy of the bytes it checked (snapshotTlsFiles).
import { X509Certificate } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, promises as fs, readFileSync } from 'node:fs';
import type { Stats } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

/** How long a reload waits for each file before it keeps the pair it has. */
export const TLS_READ_TIMEOUT_MS = 5000;

/** A pair read and checked for a reload: a private copy for uWS to load, the certificate's PEM, and the copy's removal. */
export interface TlsSnapshot {
  readonly files: TlsFiles;
  readonly cert: Buffer;
  discard(): Promise<void>;
}

/** A file whose read has not returned: a hung mount holds a libuv thread until it does, so no reload starts another. */
let pendingRead: string | null = null;

/**
 * Reads the pair without blocking the event loop, each file within `timeoutMs`, checks it,
 * and copies it to a private folder (0700, files 0600) for uWS, which takes only file
 * names. Throws an Error saying why the pair cannot be used now, with the flags' names:
 * the reload then keeps the pair it serves with.
 */
export async function snapshotTlsFiles(files: TlsFiles, timeoutMs = TLS_READ_TIMEOUT_MS): Promise<TlsSnapshot> {
  if (pendingRead !== null) {
    throw new Error(`the read of ${pendingRead} by an earlier reload has not returned (a hung mount?); fix the file system, then reload again`);
  }
  const cert = await readBounded('tlsCertFile', files.certFile, timeoutMs);
  const key = await readBounded('tlsKeyFile', files.keyFile, timeoutMs);
  try {
    checkPemPair({ option: 'tlsCertFile', path: files.certFile, pem: cert, what: WHAT.tlsCertFile },
      { option: 'tlsKeyFile', path: files.keyFile, pem: key });
  } catch (error) {
    throw new Error((error as OptionError).describe(flagOf));
  }
  const dir = await fs.mkdtemp(join(tmpdir(), 'api-auth-tls-'));
  const discard = (): Promise<void> => fs.rm(dir, { recursive: true, force: true });
  try {
    const copy = { certFile: join(dir, 'cert.pem'), keyFile: join(dir, 'key.pem') };
    await fs.writeFile(copy.certFile, cert, { mode: 0o600, flag: 'wx' });
    await fs.writeFile(copy.keyFile, key, { mode: 0o600, flag: 'wx' });
    return { files: copy, cert, discard };
  } catch (error) {
    await discard().catch(() => undefined);
    throw new Error(`cannot copy the TLS pair for loading into ${dir} (${reason(error)})`);
  }
}

/** A file's bytes, read in libuv's threads; a file that is not a regular one, or does not answer within `timeoutMs`, is refused. */
async function readBounded(option: keyof typeof WHAT, path: string, timeoutMs: number): Promise<Buffer> {
  pendingRead = path;
  const read = (async () => {
    const file = await fs.open(path, READ_FLAGS);
    try {
      const kind = notRegular(await file.stat());
      if (kind !== null) throw new Error(`is ${kind}, not a regular file`);
      return await file.readFile();
    } finally {
      await file.close();
    }
  })().finally(() => {
    if (pendingRead === path) pendingRead = null;
  });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not answer within ${timeoutMs / 1000} s (a hung mount?)`)), timeoutMs);
  });
  try {
    return await Promise.race([read, late]);
  } catch (error) {
    // A read given up on may still fail later: nobody is left to hear it.
    read.catch(() => undefined);
    throw new Error(`${flagOf(option)} ${path} ${whyUnreadable(error)}; give the ${WHAT[option]}'s PEM file`);
  } finally {
    clearTimeout(timer);
  }
}

/** Without O_NONBLOCK, opening a FIFO waits for a writer; O_NOCTTY keeps a terminal from becoming ours. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;

/** What a file that is not a regular one is, or null. */
function notRegular(stats: Stats): string | null {
  if (stats.isFile()) return null;
  return stats.isFIFO() ? 'a FIFO' : stats.isDirectory() ? 'a folder' : stats.isSocket() ? 'a socket'
    : stats.isCharacterDevice() || stats.isBlockDevice() ? 'a device' : 'not a file';
}

function flagOf(option: string): string {
  return option === 'tlsCertFile' ? '--http-tls-cert-file' : '--http-tls-key-file';
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

/** What the log says of the certificate loaded (its PEM): whom it names and until when it is valid. */
export function certificateFields(pem: Buffer): { subject?: string; validTo?: string } {
  try {
    const certificate = new X509Certificate(pem);
    return { subject: certificate.subject.replace(/\n/g, ', '), validTo: new Date(certificate.validTo).toISOString() };
  } catch {
    return {};
  }
}

/** The start's read: before anything serves, so it may block, but never on a FIFO, which is refused. */
function readPem(option: keyof typeof WHAT, path: string): string {
  try {
    const fd = openSync(path, READ_FLAGS);
    try {
      const kind = notRegular(fstatSync(fd));
      if (kind !== null) throw new Error(`is ${kind}, not a regular file`);
      return readFileSync(fd, 'latin1');
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    throw new OptionError(option, (name) => `${name(option)} ${path} ${whyUnreadable(error)}; give the ${WHAT[option]}'s PEM file`);
  }
}

function whyUnreadable(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' ? 'does not exist' : code === 'EISDIR' ? 'is a folder' : code === 'EACCES' ? 'is not readable by this user' : reason(error);
}

/** An error's message without OpenSSL's code in front. */
export function reason(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/^error:[0-9A-F]+:/i, '');
}
