// An answer streamed to the client as it comes, with backpressure: a slow client pauses
// the upstream's connection, and the answer is never held whole in memory. The request
// went whole (no body, or a body in hand); streaming.ts adds a body that streams too.
import { Framing } from '../upstream/parser.js';
import type { ResponseParser } from '../upstream/parser.js';
import { Exchange } from './exchange.js';

const NO_BODY = -2;
const CHUNKED = -1;

export class StreamedExchange extends Exchange {
  /** The body's length as the upstream announced it, or CHUNKED, or NO_BODY. */
  private total = CHUNKED;
  /** A chunk uWS could not take whole yet (a copy), and the write offset it started at. */
  private pending: Buffer | null = null;
  private pendingOffset = 0;
  /** The answer's end came while `pending` waited for the client. */
  private ended = false;
  /** The answer's head, held until its first body bytes, its end, or the end of the read it came in. */
  private parser: ResponseParser | null = null;
  private headBytes: Buffer | null = null;
  /** The body's parts in the read under way: offsets into readBytes, start and end by twos. */
  private readBytes: Buffer | null = null;
  private ranges: number[] | null = null;
  private bodiless = false;
  /** The writable handler is set. */
  private watching = false;

  onHead(parser: ResponseParser, bytes: Buffer): void {
    if (this.closed) return;
    this.answered(parser);
    this.bodiless = this.head || parser.status === 204 || parser.status === 304;
    this.total =
      parser.framing === Framing.Length ? parser.length : this.bodiless ? NO_BODY : parser.framing === Framing.None ? 0 : CHUNKED;
    // The head is written with the first body bytes (or the end), so that a small answer
    // leaves in one write rather than two; at the latest when the read it came in ends,
    // as `bytes` is then reused.
    this.parser = parser;
    this.headBytes = bytes;
  }

  onReadEnd(): void {
    if (this.closed || (this.headBytes === null && this.readBytes === null)) return;
    this.res.cork(() => this.flush());
  }

  onBody(bytes: Buffer, start: number, end: number): void {
    if (this.closed || this.total === NO_BODY) return;
    // Held until the read is all parsed (or the answer ends in it): an answer refused
    // further on in the same read is then still a clean 502, and the parts a read holds
    // leave with the head in one send.
    this.readBytes = bytes;
    (this.ranges ??= []).push(start, end);
  }

  onEnd(): void {
    if (this.closed) return;
    // The whole answer is read: the connection may go on with the next one.
    this.resumeUpstream();
    this.connection = null;
    const res = this.res;
    res.cork(() => {
      this.flush();
      if (this.closed) return;
      if (this.pending !== null) {
        // The end came before the client took the last bytes; writable() completes it.
        this.ended = true;
        return;
      }
      if (this.total === NO_BODY) res.endWithoutBody();
      else if (this.total === CHUNKED || this.total === 0) res.end();
      // Fewer bytes than announced: the client must not take a cut body for a whole one.
      else res.close();
      this.complete();
    });
  }

  onError(error: Error): void {
    // What the read held of the answer is not relayed: the answer is refused, or cut.
    this.readBytes = null;
    super.onError(error);
  }

  protected relayed(): boolean {
    return this.started && this.headBytes === null;
  }

  /** Writes the status line and headers if they are still held; call it corked. */
  private writeHead(): void {
    const bytes = this.headBytes;
    const parser = this.parser;
    if (bytes === null || parser === null) return;
    this.headBytes = null;
    this.parser = null;
    this.relay.heads.write(this.res, parser, bytes, this.bodiless);
    if (this.allowOrigin !== '') this.relay.cors(this.res, this.allowOrigin);
  }

  /** Writes what the read so far holds of the answer: its head, if held, and its body's parts; call it corked. */
  private flush(): void {
    this.writeHead();
    const bytes = this.readBytes;
    const ranges = this.ranges;
    if (bytes === null || ranges === null) return;
    this.readBytes = null;
    for (let i = 0; i < ranges.length; i += 2) this.writeBody(bytes.subarray(ranges[i], ranges[i + 1]));
    ranges.length = 0;
  }

  /** Writes a part of the body, or holds it (copied: the read buffer is reused) while the client cannot take it; call it corked. */
  private writeBody(chunk: Buffer): void {
    if (this.closed) return;
    if (this.pending !== null) {
      this.pending = Buffer.concat([this.pending, chunk]);
      return;
    }
    const res = this.res;
    if (this.total === CHUNKED) {
      if (!res.write(chunk)) this.waitForClient();
      return;
    }
    const offset = res.getWriteOffset();
    const [ok, done] = res.tryEnd(chunk, this.total);
    if (done) {
      this.complete();
    } else if (!ok) {
      // uWS took part of the chunk; the rest waits for the client to read.
      this.pending = Buffer.from(chunk);
      this.pendingOffset = offset;
      this.waitForClient();
    }
  }

  /**
   * Holds the upstream's answer until the client reads. The writable handler is set only
   * here, the first time: most answers never need it, and it would cost each a closure.
   */
  private waitForClient(): void {
    if (!this.paused) {
      this.paused = true;
      this.connection?.pause();
    }
    if (this.watching) return;
    this.watching = true;
    this.res.onWritable((offset) => this.writable(offset));
  }

  /** uWS can take more: the rest of a pending chunk, or (chunked) whatever comes next. */
  private writable(offset: number): boolean {
    if (this.closed) return true;
    const pending = this.pending;
    if (pending === null) {
      this.resumeUpstream();
      return true;
    }
    const [ok, done] = this.res.tryEnd(pending.subarray(offset - this.pendingOffset), this.total);
    if (done) {
      this.complete();
    } else if (ok) {
      this.pending = null;
      if (this.ended) {
        this.res.close();
        this.complete();
      } else {
        this.resumeUpstream();
      }
    }
    return ok;
  }
}
