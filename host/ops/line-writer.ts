// Whole lines to a file opened for appending, or to standard output, buffered and written
// off the request's path: a line is only appended to a list where it is made, and the
// list goes out in one write(2) when it holds FLUSH_BYTES, or every FLUSH_MS, in libuv's
// thread pool. Several writers (one per HTTP thread) share the file, each with its own
// descriptor opened O_APPEND: Linux appends each write(2) to a regular file whole, so
// lines from different threads never interleave. Standard output may be a pipe, where
// only writes of PIPE_BUF bytes at most are whole, so there the lines go in groups of up
// to that size.
//
// A write that fails (a full disk) loses its lines: they are counted, the first failure
// is logged and so is the first write that succeeds again; nothing waits or throws on
// the request's path. A disk that fills up within a write may keep the start of a line:
// the next write begins with a line feed, so that the cut line stays one line and every
// other line stays whole. Lines made while FLUSH_BYTES * 64 wait unwritten are lost the same
// way rather than held without bound. A stop writes what is left, synchronously: a clean
// stop loses no line; a kill -9 loses what was not yet written (FLUSH_MS of lines at most,
// and a write under way).
//
// logrotate renames the file and sends SIGHUP: the owner of the process bumps a word
// every writer shares (`reopen`), and each writer opens the path again at its next tick,
// FLUSH_MS at most later, as nginx's workers do on USR1.
import { closeSync, constants, openSync, write, writeSync } from 'node:fs';
import { errorFields } from './log.js';
import type { Logger } from './log.js';

/** The option's value that names standard output rather than a file. */
export const STDOUT = 'stdout';
/** Lines written at once; also the held size that starts a write before the tick. */
export const FLUSH_BYTES = 64 * 1024;
/** The longest a line waits to be written. */
export const FLUSH_MS = 200;
/** Bytes held unwritten past which new lines are lost: a disk that takes nothing must not fill the memory. */
const MAX_HELD = FLUSH_BYTES * 64;
/** The largest write(2) a pipe takes whole (Linux). */
const PIPE_BUF = 4096;
/** Created readable by the group (the log shipper's), as nginx's logs are, less what the umask takes. */
const FILE_MODE = 0o640;

/** Where lines go, as every writer of the process shares it. */
export interface LineTarget {
  /** An absolute path, or STDOUT. */
  readonly path: string;
  /** Word 0 is bumped by `reopenLines`; a writer that sees it change opens the path again. */
  readonly reopen: Int32Array;
}

/** What a writer reports: its lost lines, counted; its failures, logged. */
export interface LineCounts {
  /** Lines that a failed write or a full buffer lost. */
  accessLinesLost: number;
  /** Writes (and reopens) that failed. */
  accessWriteErrors: number;
}

/** The target of `path`, with a new reopen word. */
export function lineTarget(path: string): LineTarget {
  return { path, reopen: new Int32Array(new SharedArrayBuffer(4)) };
}

/**
 * Opens the target's file for appending, creating it (FILE_MODE) when missing; standard
 * output's descriptor for STDOUT. Throws the system's error (EACCES, ENOENT, EISDIR).
 */
export function openTarget(path: string): number {
  if (path === STDOUT) return 1;
  return openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, FILE_MODE);
}

/** Asks every writer of `target` to open its path again (SIGHUP, after logrotate renamed the file). */
export function reopenLines(target: LineTarget): void {
  Atomics.add(target.reopen, 0, 1);
}

export class LineWriter {
  private held: string[] = [];
  private heldBytes = 0;
  /** A write(2) is under way: the next waits for it, and the descriptor stays. */
  private writing = false;
  private failing = false;
  /** The file ends in part of a line (a write failed after it had written some). */
  private cut = false;
  private generation: number;
  private readonly group: number;
  private readonly timer: NodeJS.Timeout;
  private stopped: Promise<void> | null = null;
  private written: (() => void) | null = null;

  /** `fd`: the target opened already (openTarget); this writer owns it from now on. */
  constructor(private readonly target: LineTarget, private fd: number, private readonly counts: LineCounts, private readonly log: Logger) {
    this.generation = Atomics.load(target.reopen, 0);
    this.group = target.path === STDOUT ? PIPE_BUF : Infinity;
    this.timer = setInterval(() => this.flush(), FLUSH_MS).unref();
  }

  /** Adds a whole line, with its line feed, to be written soon. */
  line(text: string): void {
    if (this.heldBytes > MAX_HELD || this.stopped !== null) {
      this.counts.accessLinesLost++;
      return;
    }
    this.held.push(text);
    this.heldBytes += text.length;
    if (this.heldBytes >= FLUSH_BYTES) this.flush();
  }

  /** Writes what is held, synchronously once a write under way is done, and closes the file. */
  close(): Promise<void> {
    this.stopped ??= this.closeNow();
    return this.stopped;
  }

  private async closeNow(): Promise<void> {
    clearInterval(this.timer);
    if (this.writing) await new Promise<void>((resolve) => { this.written = resolve; });
    for (const bytes of this.take()) {
      let offset = 0;
      try {
        while (offset < bytes.length) offset += writeSync(this.fd, bytes, offset);
      } catch (error) {
        this.failed(error, bytes.subarray(offset));
      }
    }
    if (this.target.path !== STDOUT) closeSync(this.fd);
  }

  /** The held lines as the buffers to write, each of whole lines (at most PIPE_BUF bytes to a pipe, unless one line is longer). */
  private take(): Buffer[] {
    const lines = this.held;
    this.held = [];
    this.heldBytes = 0;
    if (lines.length === 0) return [];
    if (this.cut) {
      this.cut = false;
      lines[0] = `\n${lines[0]}`;
    }
    if (this.group === Infinity) return [Buffer.from(lines.join(''))];
    const buffers: Buffer[] = [];
    let part: string[] = [];
    let size = 0;
    for (const line of lines) {
      const bytes = Buffer.byteLength(line);
      if (size + bytes > this.group && part.length > 0) {
        buffers.push(Buffer.from(part.join('')));
        part = [];
        size = 0;
      }
      part.push(line);
      size += bytes;
    }
    buffers.push(Buffer.from(part.join('')));
    return buffers;
  }

  private flush(): void {
    if (this.writing || this.stopped !== null) return;
    const generation = Atomics.load(this.target.reopen, 0);
    if (generation !== this.generation) this.reopen(generation);
    if (this.held.length === 0) return;
    this.writing = true;
    this.next(this.take(), 0);
  }

  /** Writes buffers[index] from `offset`, then the rest in turn; the last one done ends the write. */
  private next(buffers: Buffer[], index: number, offset = 0): void {
    if (index === buffers.length) {
      this.writing = false;
      const written = this.written;
      if (written !== null) {
        this.written = null;
        written();
      } else if (this.heldBytes >= FLUSH_BYTES) {
        this.flush();
      }
      return;
    }
    const bytes = buffers[index];
    write(this.fd, bytes, offset, bytes.length - offset, null, (error, count) => {
      if (error !== null) {
        if (offset > 0) this.cut = true;
        this.failed(error, bytes.subarray(offset));
        this.next(buffers, index + 1);
        return;
      }
      if (this.failing) {
        this.failing = false;
        this.log.info('the access log is written again', { path: this.target.path });
      }
      // A short write (the disk filling up) goes on from where it stopped.
      if (offset + count < bytes.length) this.next(buffers, index, offset + count);
      else this.next(buffers, index + 1);
    });
  }

  /** A write failed: its lines are lost and counted, and the first failure of a run is logged. */
  private failed(error: unknown, lost: Buffer): void {
    this.counts.accessWriteErrors++;
    this.counts.accessLinesLost += countLines(lost);
    if (this.failing) return;
    this.failing = true;
    this.log.error('the access log cannot be written; its lines are lost until it can (api_auth_access_log_lines_lost_total)',
      { path: this.target.path, ...errorFields(error) });
  }

  /** Opens the path again (it was renamed away); on failure the old file is kept, and the failure logged. */
  private reopen(generation: number): void {
    this.generation = generation;
    if (this.target.path === STDOUT) return;
    let fd: number;
    try {
      fd = openTarget(this.target.path);
    } catch (error) {
      this.counts.accessWriteErrors++;
      this.log.error('the access log cannot be opened again; lines go on to the file opened before', { path: this.target.path, ...errorFields(error) });
      return;
    }
    closeSync(this.fd);
    this.fd = fd;
  }
}

function countLines(bytes: Buffer): number {
  let lines = 0;
  for (let i = bytes.indexOf(10); i !== -1; i = bytes.indexOf(10, i + 1)) lines++;
  return lines;
}
