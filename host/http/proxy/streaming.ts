// A request body sent as the client sends it. The common case, a body in one piece,
// goes whole behind the head in one write; a body in several pieces streams with
// backpressure both ways: a slow upstream pauses the reading of the client's body, and
// the parts that come before the request has a connection are held, at most the body
// limit. uWS stops reading only some way after pause(), so what a body may hold in
// memory is bounded by the limit rather than by the pause. The answer streams back as
// streamed.ts has it.
import type { HttpResponse } from 'uWebSockets.js';
import { BodyTooLargeError } from '../../errors.js';
import type { Connection } from '../upstream/connection.js';
import type { Relay } from './exchange.js';
import { withBody } from './head.js';
import { StreamedExchange } from './streamed.js';

const LAST_CHUNK = Buffer.from('0\r\n\r\n');

export class StreamingExchange extends StreamedExchange {
  /** The client sent no Content-Length: the body goes on chunked. */
  private chunked = false;
  /** Body bytes received so far. */
  private received = 0;
  /** Parts held until there is a connection, and whether the last of them ends the body. */
  private held: Buffer[] | null = null;
  private lastHeld = false;
  /** This exchange paused the reading of the client's body. */
  private readingPaused = false;

  /**
   * `requestHead`: the request's head without its framing line and the empty line
   * (head.ts); `declared`: the client's Content-Length, '' for none.
   */
  constructor(
    relay: Relay,
    res: HttpResponse,
    head: boolean,
    idempotent: boolean,
    allowOrigin: string,
    private readonly requestHead: string,
    private readonly declared: string,
  ) {
    super(relay, res, head, idempotent, allowOrigin);
  }

  /** A chunk of the body, as uWS hands it over. */
  requestData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.closed) return;
    this.received += chunk.byteLength;
    if (this.received > this.relay.maxBody) {
      this.refuseBody();
      return;
    }
    if (!this.streaming) {
      if (isLast) {
        // The common case, a body in one piece: copied once, behind the head, from uWS's
        // memory, which it reuses once this callback returns.
        const bytes = withBody(this.requestHead, new Uint8Array(chunk));
        this.bodyAt = bytes.length - chunk.byteLength;
        this.send(bytes);
        return;
      }
      this.streaming = true;
      this.chunked = this.declared === '';
      const framing = this.chunked ? 'transfer-encoding: chunked\r\n' : `content-length: ${this.declared}\r\n`;
      this.send(Buffer.concat([Buffer.from(`${this.requestHead}${framing}\r\n`, 'latin1'), this.frame(chunk, false)]));
      if (this.connection === null) this.pauseReading();
      return;
    }
    const framed = this.frame(chunk, isLast);
    const connection = this.connection;
    if (connection === null) {
      // No connection yet: held (at most the body limit), and the client paused meanwhile.
      (this.held ??= []).push(framed);
      this.lastHeld = isLast;
      this.pauseReading();
      return;
    }
    if (isLast) {
      connection.endBody(framed, this);
    } else if (!connection.writeBody(framed)) {
      this.pauseReading();
      connection.drained(() => this.resumeReading());
    }
  }

  onSent(connection: Connection): void {
    this.connection = connection;
    const held = this.held;
    if (held === null) {
      if (this.streaming) this.resumeReading();
      return;
    }
    this.held = null;
    const last = this.lastHeld ? held.pop()! : null;
    for (const part of held) connection.writeBody(part);
    if (last !== null) connection.endBody(last, this);
    else this.resumeReading();
  }

  /** A copy of a chunk of a streaming body, framed as a chunk when the client sent it chunked. */
  private frame(chunk: ArrayBuffer, isLast: boolean): Buffer {
    const bytes = new Uint8Array(chunk);
    if (!this.chunked) return Buffer.from(bytes);
    if (bytes.length === 0) return isLast ? LAST_CHUNK : Buffer.alloc(0);
    const size = `${bytes.length.toString(16)}\r\n`;
    const framed = Buffer.allocUnsafe(size.length + bytes.length + 2 + (isLast ? LAST_CHUNK.length : 0));
    framed.write(size, 0, 'latin1');
    framed.set(bytes, size.length);
    framed.write(isLast ? '\r\n0\r\n\r\n' : '\r\n', size.length + bytes.length, 'latin1');
    return framed;
  }

  private pauseReading(): void {
    if (this.readingPaused || this.closed) return;
    this.readingPaused = true;
    this.res.pause();
  }

  private resumeReading(): void {
    if (!this.readingPaused || this.closed) return;
    this.readingPaused = false;
    this.res.resume();
  }

  private refuseBody(): void {
    const started = this.started;
    this.closed = true;
    this.abandonUpstream();
    // A chunked body that outgrew the limit: answer now and drop the rest with the connection.
    if (started) this.res.close();
    else this.res.cork(() => this.relay.tooLarge(this.res));
    this.relay.settle(new BodyTooLargeError());
  }
}
