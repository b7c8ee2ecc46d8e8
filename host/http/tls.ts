// TLS with the node's flags: the apps that serve with the certificate and key files,
// which the start has checked with node:tls (../pem.ts) before anything listens
// (uWebSockets.js says only "App construction failed").
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
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, SSLApp } from 'uWebSockets.js';
import type { TemplatedApp } from 'uWebSockets.js';
import type { OptionError } from '../errors.js';
import { checkPemPair, notRegular, READ_FLAGS, reason, TLS_FILE_WHAT as WHAT, whyUnreadable } from '../pem.js';
import type { TlsFiles } from '../pem.js';

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
    throw new Error(
      `the read of ${pendingRead} by an earlier reload has not returned (a hung mount?); fix the file system, then reload again`,
    );
  }
  const cert = await readBounded('tlsCertFile', files.certFile, timeoutMs);
  const key = await readBounded('tlsKeyFile', files.keyFile, timeoutMs);
  try {
    checkPemPair(
      { option: 'tlsCertFile', path: files.certFile, pem: cert, what: WHAT.tlsCertFile },
      { option: 'tlsKeyFile', path: files.keyFile, pem: key },
    );
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

/** What the log says of the certificate loaded (its PEM): whom it names and until when it is valid. */
export function certificateFields(pem: Buffer): { subject?: string; validTo?: string } {
  try {
    const certificate = new X509Certificate(pem);
    return { subject: certificate.subject.replace(/\n/g, ', '), validTo: new Date(certificate.validTo).toISOString() };
  } catch {
    return {};
  }
}
