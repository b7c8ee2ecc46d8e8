// PEM files checked by node:tls: the server's pair (--http-tls-*) and a client's
// (--cluster-etcd-cert/-key), read at start, and the same checks on bytes a reload has
// read. No uWebSockets.js here: the fleet and the server's start check files without
// reaching into the HTTP layer.
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import type { Stats } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { OptionError } from './errors.js';

/** The server's certificate chain and private key, absolute paths. */
export interface TlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

/** What each of the server's files holds, for the messages. */
export const TLS_FILE_WHAT = { tlsCertFile: 'certificate chain', tlsKeyFile: 'private key' } as const;

/**
 * Throws OptionError, naming the file at fault, unless both files can be read and node:tls
 * takes them as a certificate chain and the private key that goes with it.
 */
export function checkTlsFiles(files: TlsFiles): void {
  checkPemPair(
    { option: 'tlsCertFile', path: files.certFile, pem: readPem('tlsCertFile', files.certFile), what: TLS_FILE_WHAT.tlsCertFile },
    { option: 'tlsKeyFile', path: files.keyFile, pem: readPem('tlsKeyFile', files.keyFile) },
  );
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
    throw new OptionError(
      key.option,
      (name) =>
        `${name(key.option)} ${key.path} is encrypted; give an unencrypted key, ` +
        'readable only by this user (openssl pkey -in encrypted.key -out plain.key)',
    );
  }
  for (const [file, what, context] of [
    [key, 'private key', { key: key.pem }],
    [cert, cert.what ?? 'certificate chain', { cert: cert.pem }],
  ] as const) {
    try {
      createSecureContext(context);
    } catch (error) {
      throw new OptionError(
        file.option,
        (name) => `${name(file.option)} ${file.path} is not a PEM ${what} (${reason(error)}); ` + `give the ${what}'s PEM file`,
      );
    }
  }
  try {
    createSecureContext({ cert: cert.pem, key: key.pem });
  } catch (error) {
    throw new OptionError(
      key.option,
      (name) =>
        `${name(key.option)} ${key.path} is not the key of the certificate in ` +
        `${name(cert.option)} ${cert.path} (${reason(error)}); give the pair that belongs together`,
    );
  }
}

/** Without O_NONBLOCK, opening a FIFO waits for a writer; O_NOCTTY keeps a terminal from becoming ours. */
export const READ_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;

/** What a file that is not a regular one is, or null. */
export function notRegular(stats: Stats): string | null {
  if (stats.isFile()) return null;
  return stats.isFIFO()
    ? 'a FIFO'
    : stats.isDirectory()
      ? 'a folder'
      : stats.isSocket()
        ? 'a socket'
        : stats.isCharacterDevice() || stats.isBlockDevice()
          ? 'a device'
          : 'not a file';
}

/** The start's read: before anything serves, so it may block, but never on a FIFO, which is refused. */
function readPem(option: keyof typeof TLS_FILE_WHAT, path: string): string {
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
    throw new OptionError(
      option,
      (name) => `${name(option)} ${path} ${whyUnreadable(error)}; give the ${TLS_FILE_WHAT[option]}'s PEM file`,
    );
  }
}

/** Why a file could not be read, in a few words. */
export function whyUnreadable(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT'
    ? 'does not exist'
    : code === 'EISDIR'
      ? 'is a folder'
      : code === 'EACCES'
        ? 'is not readable by this user'
        : reason(error);
}

/** An error's message without OpenSSL's code in front. */
export function reason(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/^error:[0-9A-F]+:/i, '');
}
