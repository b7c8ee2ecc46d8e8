// Where whole lines go (line-writer.ts): a file opened for appending, or standard
// output, as every writer of the process shares it. Every open (openTarget) runs in
// libuv's thread pool, within OPEN_TIMEOUT_MS, never through a link and never blocking on
// a FIFO, and takes only a regular file nobody but root or this user can change: the
// event loop never waits on the path, and a local user cannot send the lines elsewhere.
import { close, constants, fstat, open } from 'node:fs';
import type { Stats } from 'node:fs';
import { writersOf } from '../file-rules.js';

/** The option's value that names standard output rather than a file. */
export const STDOUT = 'stdout';
/** Created readable by the group (the log shipper's), as nginx's logs are, less what the umask takes. */
const FILE_MODE = 0o640;

/** Where lines go, as every writer of the process shares it. */
export interface LineTarget {
  /** An absolute path, or STDOUT. */
  readonly path: string;
  /** Word 0 is bumped by `reopenLines`; a writer that sees it change opens the path again. */
  readonly reopen: Int32Array;
}

/** The target of `path`, with a new reopen word. */
export function lineTarget(path: string): LineTarget {
  return { path, reopen: new Int32Array(new SharedArrayBuffer(4)) };
}

/** How long an open of the access log may take before it is given up (a hung mount): the start's, and each reopen's. */
export const OPEN_TIMEOUT_MS = 5000;

/**
 * Never a link (someone who can write the folder would send the lines into a file of
 * theirs, or api-auth's own state), never blocking (a FIFO with no reader is refused at
 * once, ENXIO, instead of holding the thread), never a terminal of ours.
 */
const OPEN_FLAGS =
  constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/** Why an access log's path cannot be used, in words for a start error or a warning. */
export class LineTargetError extends Error {
  constructor(
    readonly path: string,
    readonly why: string,
    readonly code?: string,
  ) {
    super(`${path} ${why}`);
  }
}

/**
 * Opens the target's file for appending, off the event loop and within `timeoutMs`,
 * creating it (FILE_MODE) when missing; standard output's descriptor for STDOUT. Only a
 * regular file is taken, never through a link, owned by root or this process's user and
 * writable by nobody else (the data folder's rules, state/data-folder.ts): a file others
 * can write lets them forge lines. Throws LineTargetError saying why, and the repair.
 */
export async function openTarget(path: string, timeoutMs = OPEN_TIMEOUT_MS): Promise<number> {
  if (path === STDOUT) return 1;
  // The callback forms: a plain descriptor, which the writer owns (a FileHandle would close it when collected).
  const opening = new Promise<number>((resolve, reject) => {
    open(path, OPEN_FLAGS, FILE_MODE, (error, fd) => {
      if (error !== null) {
        reject(refusedOpen(path, error));
        return;
      }
      fstat(fd, (statError, st) => {
        try {
          if (statError !== null) throw refusedOpen(path, statError);
          checkLogFile(path, st);
          resolve(fd);
        } catch (refusal) {
          close(fd, () => undefined);
          reject(refusal as Error);
        }
      });
    });
  });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new LineTargetError(path, `did not open within ${timeoutMs / 1000} s (a hung mount?)`, 'ETIMEDOUT')),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([opening, late]);
  } catch (error) {
    // An open given up on may still succeed later: its descriptor is closed then.
    opening.then(
      (fd) => close(fd, () => undefined),
      () => undefined,
    );
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

function refusedOpen(path: string, error: unknown): LineTargetError {
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ELOOP':
      return new LineTargetError(path, 'is a symbolic link, and api-auth never follows one there; name the file itself', code);
    case 'ENXIO':
      return new LineTargetError(path, 'is a FIFO, not a regular file; remove it, or name a regular file', code);
    case 'EISDIR':
      return new LineTargetError(path, 'cannot be opened for appending (EISDIR): it is a folder; name a file in it, or "stdout"', code);
    case 'ENOENT':
      return new LineTargetError(
        path,
        'cannot be opened for appending (ENOENT): its folder does not exist; create the folder, or name another file',
        code,
      );
    case 'EACCES':
    case 'EPERM':
      return new LineTargetError(
        path,
        `cannot be opened for appending (${code}); let the user api-auth runs as write the file and its folder`,
        code,
      );
    default:
      return new LineTargetError(path, `cannot be opened for appending (${code ?? (error as Error).message})`, code);
  }
}

/** Throws LineTargetError unless `st` is a regular file that only root or this process's user can change. */
function checkLogFile(path: string, st: Stats): void {
  if (!st.isFile()) {
    const kind = st.isFIFO()
      ? 'a FIFO'
      : st.isSocket()
        ? 'a socket'
        : st.isCharacterDevice() || st.isBlockDevice()
          ? 'a device'
          : 'not a regular file';
    throw new LineTargetError(path, `is ${kind}, not a regular file; remove it, or name a regular file`, 'EINVAL');
  }
  const user = process.geteuid?.();
  if (user !== undefined && st.uid !== 0 && st.uid !== user) {
    throw new LineTargetError(
      path,
      `belongs to user ${st.uid}, not to root or the user api-auth runs as (${user}), who could then forge its lines; ` +
        `chown ${user} ${path}`,
      'EPERM',
    );
  }
  if ((st.mode & 0o022) !== 0) {
    throw new LineTargetError(
      path,
      `can be written by ${writersOf(st.mode)} (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}), who could then forge its lines; ` +
        `chmod ${(st.mode & 0o7777 & ~0o022).toString(8)} ${path}`,
      'EPERM',
    );
  }
}

/** Asks every writer of `target` to open its path again (SIGHUP, after logrotate renamed the file). */
export function reopenLines(target: LineTarget): void {
  Atomics.add(target.reopen, 0, 1);
}
