// The service password's file: read once at start, or created with a generated password
// on the first run. Every problem with it is the option's (OptionError, exit 2), reported
// with the path and what to do.
import { constants, promises as fs } from 'node:fs';
import { dirname } from 'node:path';
import { OptionError } from '../errors.js';
import type { Logger } from '../ops/log.js';
import { untrustedFile } from '../file-rules.js';

export const MAX_PASSWORD_LENGTH = 1024;

// Far more than a 1024-character password plus white space; stops a wrong path (a log, a
// disk image) from being read whole into memory.
const MAX_FILE_BYTES = 64 * 1024;

/**
 * The password in the file at `path`, trimmed of leading and trailing white space. When
 * the file does not exist but its folder does, writes a password from `generate` there
 * first (mode 0600, never replacing a file) and logs the path.
 */
export async function loadPasswordFile(path: string, generate: () => string, log: Logger): Promise<string> {
  const existing = await readPasswordFile(path, log);
  if (existing !== undefined) return existing;
  const password = generate();
  if (await createPasswordFile(path, password)) {
    log.info('generated a password file', { path });
    return password;
  }
  // Another process created it between our read and our create: its password wins.
  const created = await readPasswordFile(path, log);
  if (created === undefined) throw problem(path, 'the file vanished while it was being created; start again');
  return created;
}

/** The trimmed password, or undefined when the file does not exist. */
async function readPasswordFile(path: string, log: Logger): Promise<string | undefined> {
  let file: fs.FileHandle;
  try {
    // Never through a link, never waiting on a FIFO: whoever could change either would choose the password.
    file = await fs.open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    if (errno(error) === 'ENOENT') return undefined;
    if (errno(error) === 'ELOOP') {
      throw problem(
        path,
        'the file is a symbolic link, which api-auth does not follow: whoever can change the link chooses the password; ' +
          'put the file itself in its place',
      );
    }
    throw fileError(path, error);
  }
  const buffer = Buffer.alloc(MAX_FILE_BYTES + 1);
  try {
    const stat = await file.stat();
    if (stat.isDirectory()) throw problem(path, 'this is a folder; name the file that holds the password');
    if (!stat.isFile())
      throw problem(path, 'this is not a regular file (a FIFO, a socket or a device); name the file that holds the password');
    const untrusted = untrustedFile(
      path,
      stat,
      await fs.stat(dirname(path)),
      'the password file',
      'choose the password adopted at the next start',
    );
    if (untrusted !== null) throw new OptionError('passwordFile', (name) => `${name('passwordFile')}: ${untrusted}`);
    if (process.platform !== 'win32' && (stat.mode & 0o044) !== 0) {
      log.warn('password file is readable by other users', { path, mode: (stat.mode & 0o777).toString(8).padStart(4, '0') });
    }
    let size = 0;
    for (;;) {
      const { bytesRead } = await file.read(buffer, size, buffer.length - size, null);
      if (bytesRead === 0) break;
      size += bytesRead;
      if (size > MAX_FILE_BYTES) {
        throw problem(
          path,
          `the file is larger than ${MAX_FILE_BYTES} bytes; it must hold only the password (1 to ${MAX_PASSWORD_LENGTH} characters)`,
        );
      }
    }
    const password = decodeUtf8(buffer.subarray(0, size), path).trim();
    if (password === '')
      throw problem(path, 'the file is empty (or only white space); write the service password in it, or delete it to have one generated');
    const length = countCodePoints(password);
    if (length > MAX_PASSWORD_LENGTH) {
      throw problem(path, `the password is ${length} characters long; at most ${MAX_PASSWORD_LENGTH} are allowed`);
    }
    return password;
  } catch (error) {
    throw error instanceof OptionError ? error : fileError(path, error);
  } finally {
    buffer.fill(0);
    await file.close();
  }
}

/** Writes a new password file; false when one appeared meanwhile. */
async function createPasswordFile(path: string, password: string): Promise<boolean> {
  const folder = dirname(path);
  let file: fs.FileHandle;
  try {
    file = await fs.open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  } catch (error) {
    const code = errno(error);
    if (code === 'EEXIST') return false;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw problem(
        path,
        `the file does not exist, and neither does its folder ${folder}; create the folder (a password is then generated) or name another file`,
      );
    }
    throw problem(path, `cannot create the file (${reason(error)}); create it yourself or name another file`);
  }
  try {
    await file.writeFile(password + '\n');
    await file.sync();
  } catch (error) {
    await file.close();
    // A half-written file would be read as the password at the next start.
    await fs.unlink(path).catch(() => undefined);
    throw problem(path, `cannot write the file (${reason(error)})`);
  }
  await file.close();
  await syncFolder(folder);
  return true;
}

// The new directory entry is durable only once the folder itself is flushed.
async function syncFolder(folder: string): Promise<void> {
  if (process.platform === 'win32') return;
  const handle = await fs.open(folder, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function fileError(path: string, error: unknown): OptionError {
  switch (errno(error)) {
    case 'EISDIR':
      return problem(path, 'this is a folder; name the file that holds the password');
    case 'EACCES':
    case 'EPERM':
      return problem(path, 'cannot read the file: permission denied; let the user running api-auth read it');
    case 'ENOTDIR':
      return problem(path, 'cannot read the file: a part of its path is not a folder');
    default:
      return problem(path, `cannot read the file (${reason(error)})`);
  }
}

function problem(path: string, what: string): OptionError {
  return new OptionError('passwordFile', (name) => `${name('passwordFile')} ${path}: ${what}`);
}

function errno(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function decodeUtf8(bytes: Uint8Array, path: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw problem(path, 'the file is not UTF-8 text; save the password as UTF-8');
  }
}

/**
 * Whether `text` is valid Unicode, that is without a lone surrogate (\ud800 to \udfff
 * outside a pair): UTF-8 has no form for one, and encoders write U+FFFD in its place.
 */
export function isWellFormed(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

// With the u flag a pair is one code point, never of category Cs: only lone ones match.
const LONE_SURROGATE = /\p{Cs}/u;

/** Length in Unicode code points, the unit of the password length limits. */
export function countCodePoints(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}
