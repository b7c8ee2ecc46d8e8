// The reader of the upstream's answers: a state machine over bytes, as llhttp is, that
// hands out offsets rather than strings. Its heads are read by response-head.ts, which
// the WebSocket handshake shares; on top of them it frames what a JSON-RPC node sends (a
// body framed by Content-Length, by chunks, or by the connection's close, none for HEAD,
// 204, 304 and 1xx) and refuses the rest outright, where llhttp would sometimes guess: a
// repeated or malformed Content-Length, Content-Length beside Transfer-Encoding, a
// transfer coding other than chunked, a chunk extension, a 204 or 304 that announces a
// body, trailers over MAX_HEAD (and whatever response-head.ts refuses in a head). An
// answer it refuses is never relayed, and its connection is never used again: the
// upstream and the gateway no longer agree on where answers end.
import { COLON, CR, equalsIgnoringCase, FIELD, LF, MAX_HEAD, ResponseHead, TEXT, TOKEN } from './response-head.js';

/** How an answer's body ends. */
export const enum Framing {
  /** No body: HEAD, 1xx, 204, 304, or Content-Length: 0. */
  None,
  Length,
  Chunked,
  /** No Content-Length, no Transfer-Encoding: the body ends when the connection does. */
  UntilClose,
}

/** What a parser hands its answers to, in order: a head, its body's bytes, its end. */
export interface AnswerHandler {
  /** The head of a final answer: read `parser`'s fields now, as `bytes` is reused after the call. */
  onHead(parser: ResponseParser, bytes: Buffer): void;
  /** Body bytes: `bytes` from `start` to `end`, valid only during the call. */
  onBody(bytes: Buffer, start: number, end: number): void;
  /** The answer is whole. */
  onEnd(): void;
}

/** What `execute` returns when an answer switches protocols (101), which api-auth does not relay. */
export const SWITCHED = -2;

/** The value of each hex digit, 16 for any other byte. */
const HEX = new Uint8Array(256).fill(16);
for (let c = 0; c < 10; c++) HEX[0x30 + c] = c;
for (let c = 0; c < 6; c++) HEX[0x41 + c] = HEX[0x61 + c] = 10 + c;

// Body states; HEAD is between answers.
const HEAD = 0;
const LENGTH = 1;
const UNTIL_CLOSE = 2;
const CHUNK_SIZE = 3;
const CHUNK_SIZE_LF = 4;
const CHUNK_DATA = 5;
const CHUNK_DATA_CR = 6;
const CHUNK_DATA_LF = 7;
const TRAILER_START = 8;
const TRAILER_NAME = 9;
const TRAILER_VALUE = 10;
const TRAILER_LF = 11;
const END_LF = 12;

/** 2^52: a Content-Length or chunk size beyond it cannot be counted exactly in a double. */
const MAX_LENGTH = 2 ** 52;

const CONTENT_LENGTH = Buffer.from('content-length');
const TRANSFER_ENCODING = Buffer.from('transfer-encoding');
const CONNECTION = Buffer.from('connection');
const CHUNKED_CODING = Buffer.from('chunked');
const KEEP_ALIVE = Buffer.from('keep-alive');
const CLOSE = Buffer.from('close');

/**
 * The head's fields (status, reason, header lines) are ResponseHead's, read by onHead;
 * they hold the final answer's, the informational ones before it skipped.
 */
export class ResponseParser extends ResponseHead {
  /** Set by the connection before each answer: the request was HEAD, so the answer has no body. */
  noBody = false;
  /** Answers read whole so far: a caller sees an answer end by this changing. */
  answers = 0;
  framing = Framing.None;
  /** The Content-Length, for Framing.Length. */
  length = 0;
  /** Whether the connection may carry another answer after this one. */
  keepAlive = true;
  /** The Connection field's values other than keep-alive and close, comma-joined; null for none. */
  connection: string | null = null;

  private state = HEAD;
  /** Body bytes still to come: of a Content-Length body, or of the chunk under way. */
  private remaining = 0;
  private digits = 0;
  /** Bytes of a trailer section read so far, bounded by MAX_HEAD. */
  private trailerBytes = 0;
  /** The answer just read ended with its head. */
  private whole = false;

  /** True between answers, with no byte of the next one read. */
  idle(): boolean {
    return this.state === HEAD && this.heldLength === 0;
  }

  /**
   * Reads bytes[start, end). Returns the offset it read up to: `end`, or the offset just
   * past an answer's end (call again for the rest, after preparing the next answer);
   * REFUSED or SWITCHED otherwise.
   */
  execute(bytes: Buffer, start: number, end: number, handler: AnswerHandler): number {
    let p = start;
    while (p < end) {
      const state = this.state;
      if (state === HEAD) {
        p = this.readHead(bytes, p, end);
        if (p < 0) return p;
        const head = this.head;
        if (head === null) return p;
        const framed = this.frame(head, handler);
        if (framed < 0) return framed;
        if (this.whole) {
          // A bodiless answer: whole with its head.
          this.whole = false;
          return p;
        }
      } else if (state === LENGTH) {
        const n = Math.min(this.remaining, end - p);
        handler.onBody(bytes, p, p + n);
        p += n;
        this.remaining -= n;
        if (this.remaining === 0) return this.ended(p, handler);
      } else if (state === UNTIL_CLOSE) {
        handler.onBody(bytes, p, end);
        return end;
      } else if (state === CHUNK_DATA) {
        const n = Math.min(this.remaining, end - p);
        handler.onBody(bytes, p, p + n);
        p += n;
        this.remaining -= n;
        if (this.remaining === 0) this.state = CHUNK_DATA_CR;
      } else {
        p = this.chunkFraming(bytes, p, end, handler);
        if (p < 0) return p;
        if (this.state === HEAD) return p;
      }
    }
    return p;
  }

  /** The connection ended: true when that ends the answer under way, whose body runs to the close. */
  finish(handler: AnswerHandler): boolean {
    if (this.state !== UNTIL_CLOSE) return false;
    this.ended(0, handler);
    return true;
  }

  private ended(p: number, handler: AnswerHandler): number {
    this.state = HEAD;
    this.answers++;
    handler.onEnd();
    return p;
  }

  /**
   * Frames the answer whose head was just read, from its fields in `b`. Hands a final
   * answer's head to the handler; an informational one is skipped. Returns 0, or REFUSED
   * or SWITCHED.
   */
  private frame(b: Buffer, handler: AnswerHandler): number {
    const fields = this.fields;
    const status = this.status;
    let length = -1;
    let chunked = false;
    let close = false;
    let keepAlive = false;
    let connection: string | null = null;
    for (let at = 0, last = this.fieldCount * FIELD; at < last; at += FIELD) {
      const nameStart = fields[at];
      const nameEnd = fields[at + 1];
      const valueStart = fields[at + 2];
      const valueEnd = fields[at + 3];
      const nameLength = nameEnd - nameStart;
      if (nameLength === 14 && equalsIgnoringCase(b, nameStart, nameEnd, CONTENT_LENGTH)) {
        if (length !== -1) return this.refuse('an answer holds two Content-Length headers');
        if (valueEnd === valueStart || valueEnd - valueStart > 15) return this.refuse("an answer's Content-Length is not a number");
        length = 0;
        for (let i = valueStart; i < valueEnd; i++) {
          const digit = b[i] - 0x30;
          if (digit < 0 || digit > 9) return this.refuse("an answer's Content-Length is not a number");
          length = length * 10 + digit;
        }
        if (length > MAX_LENGTH) return this.refuse("an answer's Content-Length is too large");
      } else if (nameLength === 17 && equalsIgnoringCase(b, nameStart, nameEnd, TRANSFER_ENCODING)) {
        if (chunked) return this.refuse('an answer holds two Transfer-Encoding headers');
        if (!equalsIgnoringCase(b, valueStart, valueEnd, CHUNKED_CODING)) {
          return this.refuse('an answer\'s Transfer-Encoding is not "chunked", the one coding api-auth reads');
        }
        chunked = true;
      } else if (nameLength === 10 && equalsIgnoringCase(b, nameStart, nameEnd, CONNECTION)) {
        if (equalsIgnoringCase(b, valueStart, valueEnd, KEEP_ALIVE)) {
          keepAlive = true;
        } else if (equalsIgnoringCase(b, valueStart, valueEnd, CLOSE)) {
          close = true;
        } else {
          // A list: rare, so read as text.
          const text = b.toString('latin1', valueStart, valueEnd);
          connection = connection === null ? text : `${connection},${text}`;
        }
      }
    }
    if (connection !== null) {
      for (const token of connection.split(',')) {
        const name = token.trim().toLowerCase();
        if (name === 'close') close = true;
        else if (name === 'keep-alive') keepAlive = true;
      }
    }
    // HTTP/1.0 closes after each answer unless it says otherwise.
    if (this.minor === 0 && !keepAlive) close = true;

    if (length !== -1 && chunked) {
      return this.refuse('an answer holds both Content-Length and Transfer-Encoding, which RFC 9112 forbids a server to send');
    }
    if (status < 200) {
      if (status === 101) return SWITCHED;
      // 100 Continue, 103 Early Hints: the final answer follows on the same connection.
      return 0;
    }
    if (status === 204 && (chunked || length > 0)) return this.refuse('a 204 answer announces a body');
    if (status === 304 && chunked) return this.refuse('a 304 answer announces a chunked body');
    this.connection = connection;
    if (this.noBody || status === 204 || status === 304) {
      this.framing = Framing.None;
    } else if (chunked) {
      this.framing = Framing.Chunked;
    } else if (length !== -1) {
      this.framing = length === 0 ? Framing.None : Framing.Length;
      this.length = length;
    } else {
      this.framing = Framing.UntilClose;
      close = true;
    }
    this.keepAlive = !close;
    handler.onHead(this, b);
    switch (this.framing) {
      case Framing.None:
        this.answers++;
        handler.onEnd();
        this.whole = true;
        break;
      case Framing.Length:
        this.state = LENGTH;
        this.remaining = length;
        break;
      case Framing.Chunked:
        this.state = CHUNK_SIZE;
        this.digits = 0;
        this.remaining = 0;
        break;
      case Framing.UntilClose:
        this.state = UNTIL_CLOSE;
        break;
    }
    return 0;
  }

  /** The bytes around chunk data: sizes, the CRLF after data, trailers. */
  private chunkFraming(b: Buffer, p: number, end: number, handler: AnswerHandler): number {
    while (p < end) {
      const c = b[p];
      switch (this.state) {
        case CHUNK_SIZE: {
          const digit = HEX[c];
          if (digit < 16) {
            if (++this.digits > 13) return this.refuse("an answer's chunk size is too large");
            this.remaining = this.remaining * 16 + digit;
          } else if (c === CR && this.digits > 0) {
            this.state = CHUNK_SIZE_LF;
          } else if (c === 0x3b) {
            return this.refuse("an answer's chunk has an extension, which api-auth does not read");
          } else {
            return this.refuse("an answer's chunk size is not a hexadecimal number ending in CRLF");
          }
          break;
        }
        case CHUNK_SIZE_LF:
          if (c !== LF) return this.refuse("an answer's chunk size is not a hexadecimal number ending in CRLF");
          if (this.remaining === 0) {
            this.state = TRAILER_START;
            this.trailerBytes = 0;
          } else {
            this.state = CHUNK_DATA;
            return p + 1;
          }
          break;
        case CHUNK_DATA_CR:
          if (c !== CR) return this.refuse("an answer's chunk is longer than its size");
          this.state = CHUNK_DATA_LF;
          break;
        case CHUNK_DATA_LF:
          if (c !== LF) return this.refuse("an answer's chunk is longer than its size");
          this.state = CHUNK_SIZE;
          this.digits = 0;
          this.remaining = 0;
          break;
        case TRAILER_START:
          if (c === CR) {
            this.state = END_LF;
          } else if (TOKEN[c] === 1) {
            this.state = TRAILER_NAME;
          } else {
            return this.refuse('an answer holds a trailer line that is not a name, a colon and a value');
          }
          break;
        case TRAILER_NAME:
          if (c === COLON) this.state = TRAILER_VALUE;
          else if (TOKEN[c] !== 1) return this.refuse('an answer holds a trailer line that is not a name, a colon and a value');
          break;
        case TRAILER_VALUE:
          if (c === CR) this.state = TRAILER_LF;
          else if (TEXT[c] !== 1) return this.refuse('an answer holds a trailer value with a control byte');
          break;
        case TRAILER_LF:
          if (c !== LF) return this.refuse('an answer holds a trailer line that does not end in CRLF');
          this.state = TRAILER_START;
          break;
        case END_LF:
          if (c !== LF) return this.refuse("an answer's chunked body does not end in CRLF");
          return this.ended(p + 1, handler);
      }
      p++;
      if (this.state >= TRAILER_START && ++this.trailerBytes > MAX_HEAD)
        return this.refuse(`the trailers of an answer are over ${MAX_HEAD} bytes`);
    }
    return p;
  }
}
