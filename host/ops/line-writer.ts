// Whole lines to a file opened for appending, or to standard output, buffered and written
// off the request's path: a line is encoded where it is made into a buffer the writer
// reuses (a held string would outlive a scavenge or two and cost the garbage collector
// more than the line itself), and the filled buffers go out in one writev(2) when one is
// full, or every FLUSH_MS, in libuv's thread pool. Several writers (one per HTTP thread) share the file, each with its own
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
// way rather than held without bound. Standard output is non-blocking (libuv makes a pipe
// so): a pipe whose reader pauses answers EAGAIN, which is back-pressure, not a failure;
// the write is tried again every RETRY_MS while the lines wait, within the same bound. A
// stop writes what is left, waiting for such a pipe: a clean stop loses no line; a kill -9
// loses what was not yet written (FLUSH_MS of lines at most, and a write under way).
//
// logrotate renames the file and sends SIGHUP: the owner of the process bumps a word
// every writer shares (`reopen`, line-target.ts), and each writer opens the path again
// at its next tick, FLUSH_MS at most later, as nginx's workers do on USR1.
import { closeSync, writev } from 'node:fs';
import { openTarget, STDOUT } from './line-target.js';
import type { LineTarget } from './line-target.js';
import { errorFields } from './log.js';
import type { Logger } from './log.js';

/** Lines written at once; also the held size that starts a write before the tick. */
export const FLUSH_BYTES = 64 * 1024;
/** The longest a line waits to be written. */
export const FLUSH_MS = 200;
/** Bytes held unwritten past which new lines are lost: a disk that takes nothing must not fill the memory. */
const MAX_HELD = FLUSH_BYTES * 64;
/** How soon a write a full pipe refused (EAGAIN) is tried again. */
const RETRY_MS = 20;
/** The largest write(2) a pipe takes whole (Linux). */
const PIPE_BUF = 4096;
/** What a writer reports: its lost lines, counted; its failures, logged. */
export interface LineCounts {
  /** Lines that a failed write or a full buffer lost. */
  accessLinesLost: number;
  /** Writes (and reopens) that failed. */
  accessWriteErrors: number;
}

export class LineWriter {
  /** The buffer lines are encoded into as they come, and how much of it they fill. */
  private current: Buffer;
  private used = 0;
  /** Filled buffers waiting for the write under way, each of whole lines. */
  private full: Buffer[] = [];
  private fullBytes = 0;
  /** Written buffers, for the next lines (encoded at once, lines hold no string for the garbage collector to move). */
  private readonly spare: Buffer[] = [];
  /** Bytes one buffer holds: what one write(2) may take whole. */
  private readonly size: number;
  /** A write(2) is under way: the next waits for it, and the descriptor stays. */
  private writing = false;
  private failing = false;
  /** The file ends in part of a line (a write failed after it had written some): the next line starts with a line feed. */
  private cut = false;
  private generation: number;
  private readonly timer: NodeJS.Timeout;
  private stopped: Promise<void> | null = null;
  /** A reopen under way, and the descriptor it made, for the next write. */
  private reopening: Promise<void> | null = null;
  private opened: number | null = null;
  private written: (() => void) | null = null;

  /** `fd`: the target opened already (openTarget); this writer owns it from now on. */
  constructor(
    private readonly target: LineTarget,
    private fd: number,
    private readonly counts: LineCounts,
    private readonly log: Logger,
  ) {
    this.generation = Atomics.load(target.reopen, 0);
    this.size = target.path === STDOUT ? PIPE_BUF : FLUSH_BYTES;
    this.current = Buffer.allocUnsafe(this.size);
    this.timer = setInterval(() => this.flush(), FLUSH_MS).unref();
  }

  /** Adds a whole line, with its line feed, to be written soon. */
  line(text: string): void {
    if (this.fullBytes > MAX_HELD || this.stopped !== null) {
      this.counts.accessLinesLost++;
      return;
    }
    if (this.cut) {
      this.cut = false;
      this.append('\n');
    }
    this.append(text);
    if (this.fullBytes > 0) this.flush();
  }

  /** Encodes `text` into the current buffer, or, when it does not fit, into the next. */
  private append(text: string): void {
    // Three bytes a UTF-16 unit at most: most lines fit without being measured.
    const room = this.current.length - this.used;
    if (text.length * 3 > room) {
      const bytes = Buffer.byteLength(text);
      if (bytes > room) this.next(bytes);
    }
    this.used += this.current.write(text, this.used);
  }

  /** The current buffer goes to be written; lines go on in a spare one, or a new one of at least `bytes`. */
  private next(bytes: number): void {
    if (this.used > 0) {
      this.full.push(this.current.subarray(0, this.used));
      this.fullBytes += this.used;
    }
    this.current = bytes <= this.size ? (this.spare.pop() ?? Buffer.allocUnsafe(this.size)) : Buffer.allocUnsafe(bytes);
    this.used = 0;
  }

  /** Writes what is held, synchronously once a write under way is done, and closes the file. */
  close(): Promise<void> {
    this.stopped ??= this.closeNow();
    return this.stopped;
  }

  private async closeNow(): Promise<void> {
    clearInterval(this.timer);
    if (this.writing) await this.settled();
    // A reopen under way is waited for (bounded): what is held goes to the new file, as it would have.
    await this.reopening;
    this.swap();
    this.next(0);
    // Written as any other: a pipe that takes nothing for now is waited for, not given up.
    if (this.full.length > 0) {
      this.writing = true;
      const done = this.settled();
      this.write(this.take());
      await done;
    }
    if (this.target.path !== STDOUT) closeSync(this.fd);
  }

  /** Resolves once the write under way, and those it goes on to, are done. */
  private settled(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.written = resolve;
    });
  }

  /** The filled buffers, to write in order. */
  private take(): Buffer[] {
    const full = this.full;
    this.full = [];
    this.fullBytes = 0;
    return full;
  }

  private flush(): void {
    if (this.writing || this.stopped !== null) return;
    const generation = Atomics.load(this.target.reopen, 0);
    if (generation !== this.generation) this.reopen(generation);
    // Lines held while the path opens go to the new file, as lines after the rename should.
    if (this.reopening !== null) return;
    this.swap();
    if (this.used > 0) this.next(0);
    if (this.full.length === 0) return;
    this.writing = true;
    this.write(this.take());
  }

  /**
   * Writes `buffers` in order: to a file all in one writev(2), which O_APPEND keeps whole;
   * to standard output one write(2) each, at most PIPE_BUF bytes, which a pipe keeps whole.
   */
  private write(buffers: Buffer[]): void {
    if (buffers.length === 0) {
      this.writing = false;
      const written = this.written;
      if (written !== null) {
        this.written = null;
        written();
      } else if (this.fullBytes > 0) {
        this.flush();
      }
      return;
    }
    const batch = this.target.path === STDOUT ? buffers.slice(0, 1) : buffers;
    writev(this.fd, batch, null, (error, count) => {
      if (error !== null && error.code === 'EAGAIN') {
        // A pipe whose reader is slow (standard output is non-blocking, libuv's): back-pressure,
        // not a failure. The write is tried again, and lines are held meanwhile, MAX_HELD at most.
        setTimeout(() => this.write(buffers), RETRY_MS);
        return;
      }
      if (error !== null) {
        // The rest of a buffer a short write began: the file ends in part of its first line.
        if (batch[0].byteOffset > 0) this.cut = true;
        for (const lost of batch) this.failed(error, lost);
        this.write(buffers.slice(batch.length));
        return;
      }
      if (this.failing) {
        this.failing = false;
        this.log.info('the access log is written again', { path: this.target.path });
      }
      // A short write (the disk filling up) goes on from where it stopped.
      let left = count;
      let done = 0;
      while (done < buffers.length && left >= buffers[done].length) {
        left -= buffers[done].length;
        this.recycle(buffers[done++]);
      }
      const rest = buffers.slice(done);
      if (left > 0) rest[0] = rest[0].subarray(left);
      this.write(rest);
    });
  }

  /** A written buffer of the standard size (its own memory: larger than Buffer's pool takes) is kept for the next lines; two at most. */
  private recycle(bytes: Buffer): void {
    if (this.spare.length < 2 && bytes.buffer.byteLength === this.size) this.spare.push(Buffer.from(bytes.buffer, 0, this.size));
  }

  /** A write failed: its lines are lost and counted, and the first failure of a run is logged. */
  private failed(error: unknown, lost: Buffer): void {
    this.counts.accessWriteErrors++;
    this.counts.accessLinesLost += countLines(lost);
    if (this.failing) return;
    this.failing = true;
    this.log.error('the access log cannot be written; its lines are lost until it can (api_auth_access_log_lines_lost_total)', {
      path: this.target.path,
      ...errorFields(error),
    });
  }

  /**
   * Opens the path again (it was renamed away), off the event loop: lines are held (up to
   * MAX_HELD) until the new file is open and checked, then written there; when it cannot
   * be (a FIFO, a link, another's file, a hung mount: OPEN_TIMEOUT_MS at most), that is
   * logged and they go on to the file opened before.
   */
  private reopen(generation: number): void {
    this.generation = generation;
    if (this.target.path === STDOUT || this.reopening !== null) return;
    this.reopening = openTarget(this.target.path)
      .then(
        (fd) => {
          // A stop under way waits for this, and then writes what is held here.
          this.opened = fd;
        },
        (error: unknown) => {
          this.counts.accessWriteErrors++;
          this.log.warn('the access log cannot be opened again; lines go on to the file opened before', {
            path: this.target.path,
            ...errorFields(error),
          });
        },
      )
      .finally(() => {
        this.reopening = null;
        // What was held goes out now (and another SIGHUP that came meanwhile opens the path again).
        if (this.stopped === null) this.flush();
      });
  }

  /** The descriptor a reopen made takes the old one's place, between writes. */
  private swap(): void {
    if (this.opened === null) return;
    closeSync(this.fd);
    this.fd = this.opened;
    this.opened = null;
  }
}

function countLines(bytes: Buffer): number {
  let lines = 0;
  for (let i = bytes.indexOf(10); i !== -1; i = bytes.indexOf(10, i + 1)) lines++;
  return lines;
}
