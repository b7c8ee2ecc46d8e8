// RFC 6455 framing, client side: the frames a client writes (masked, header and payload
// in one buffer, for one write) and a strict reader of the frames a server sends.
//
// The reader takes bytes as they are read, cut anywhere, and hands on whole messages.
// A frame that arrived whole is handed on in place, from the read buffer, without a
// copy; only a frame cut across reads is gathered into a buffer of its own, of the size
// its header announced (bounded by the largest message), and only a message in several
// frames is joined, into one buffer that grows with it: a frame costs its bytes and no
// object of its own, so that a flood of tiny or empty fragments holds no more memory
// than the bytes it carries. How finely a message may be cut is bounded too (see
// maxFragments), and an empty continuation right after an empty frame, which no writer
// has a reason to send, is refused. Anything RFC 6455 forbids a server to send ends the reading with
// the close code the RFC gives it: no extension was negotiated, so every RSV bit must be
// clear; a server never masks; control frames are final and at most 125 bytes; text and
// close reasons are UTF-8.
import { isUtf8 } from 'node:buffer';
import { randomFillSync } from 'node:crypto';
import { createRequire } from 'node:module';
import { UpstreamWsCode, UpstreamWsError } from './errors.js';

/** bufferutil's mask (it ships no types): `source[0, length)` XOR the 4-byte `mask`, into `output` from `offset`. */
const { mask: applyMask } = createRequire(import.meta.url)('bufferutil') as {
  mask(source: Uint8Array, mask: Uint8Array, output: Uint8Array, offset: number, length: number): void;
};

export const Opcode = { Continuation: 0, Text: 1, Binary: 2, Close: 8, Ping: 9, Pong: 10 } as const;

const FIN = 0x80;
const RSV1 = 0x40;
const RSV2_3 = 0x30;
const MASK = 0x80;
/** A close frame's reason: 125 bytes of payload less the code's 2. */
export const MAX_CLOSE_REASON = 123;
/** Below this, a loop masks faster than a call into bufferutil (ws's threshold). */
const NATIVE_MASK_FROM = 48;
const EMPTY = Buffer.alloc(0);
/** A joined message's buffer starts at this size (or the message limit, if smaller), and doubles as it fills. */
const JOIN_START = 16 * 1024;
/** The frames any message may come in, whatever the limit. */
export const MIN_FRAGMENTS = 1024;
/** Past MIN_FRAGMENTS, the frames of a message carry this many bytes each on average, at least. */
export const FRAGMENT_BYTES = 512;

/**
 * The most frames a message of at most `maxMessage` bytes may come in: 1024, or one per
 * 512 bytes of the limit (32,768 at the default 16 MiB). RFC 6455 sets no bound, so the
 * bound is set by what servers write: geth writes through gorilla/websocket with a 1 KiB
 * write buffer, and gorilla cuts a message it is handed piece by piece into frames of
 * that buffer (handed a large one whole, it writes one frame and an empty last one);
 * gorilla's default buffer is 4 KiB, and ws, uWebSockets and tungstenite write a message
 * as one frame. A message of the whole limit in geth's smallest frames is half the bound.
 */
export function maxFragments(maxMessage: number): number {
  return Math.max(MIN_FRAGMENTS, Math.ceil(maxMessage / FRAGMENT_BYTES));
}

/** Masking keys, drawn from the CSPRNG a block at a time: RFC 6455 §5.3 wants each unpredictable. */
const keys = Buffer.allocUnsafe(8192);
let keyAt = keys.length;

/** One masked frame of `payload`: header, key and masked payload in one new buffer. */
export function frame(opcode: number, payload: Uint8Array): Buffer {
  const length = payload.length;
  const header = length < 126 ? 6 : length < 0x10000 ? 8 : 14;
  const out = Buffer.allocUnsafe(header + length);
  out[0] = FIN | opcode;
  if (length < 126) {
    out[1] = MASK | length;
  } else if (length < 0x10000) {
    out[1] = MASK | 126;
    out.writeUInt16BE(length, 2);
  } else {
    out[1] = MASK | 127;
    out.writeUInt32BE(Math.floor(length / 0x100000000), 2);
    out.writeUInt32BE(length >>> 0, 6);
  }
  if (keyAt === keys.length) {
    randomFillSync(keys);
    keyAt = 0;
  }
  const at = header - 4;
  out[at] = keys[keyAt];
  out[at + 1] = keys[keyAt + 1];
  out[at + 2] = keys[keyAt + 2];
  out[at + 3] = keys[keyAt + 3];
  keyAt += 4;
  if (length >= NATIVE_MASK_FROM) {
    applyMask(payload, out.subarray(at, header), out, header, length);
  } else {
    for (let i = 0; i < length; i++) out[header + i] = payload[i] ^ out[at + (i & 3)];
  }
  return out;
}

/** A close frame: `code` 1005 sends none (an empty close), as 1005 only describes such a close. */
export function closeFrame(code: number, reason: string): Buffer {
  if (code === 1005) return frame(Opcode.Close, EMPTY);
  if (!closeCodeValid(code)) throw new RangeError(`close code ${code} may not be sent (RFC 6455 §7.4)`);
  const length = Buffer.byteLength(reason);
  if (length > MAX_CLOSE_REASON) throw new RangeError(`a close reason is at most ${MAX_CLOSE_REASON} bytes, not ${length}`);
  const payload = Buffer.allocUnsafe(2 + length);
  payload.writeUInt16BE(code, 0);
  payload.write(reason, 2);
  return frame(Opcode.Close, payload);
}

/** Whether a close frame may carry `code` (RFC 6455 §7.4): 1000-1003, 1007-1014, 3000-4999. */
export function closeCodeValid(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

/** Where the reader's messages go. Each call may stop the reader (stop()); it then hands on nothing more. */
export interface FrameSink {
  /** A whole message; `data` may be the read buffer itself, valid only during the call. */
  message(data: Buffer, binary: boolean): void;
  /** `data` is valid only during the call. */
  ping(data: Buffer): void;
  pong(): void;
  /** The server's close: 1005 when it gave no code. Nothing is read after it. */
  close(code: number, reason: string): void;
  /** The server broke RFC 6455; nothing is read after it. */
  fail(error: UpstreamWsError): void;
}

export class FrameReader {
  /** A header cut across reads: at most 2 + 8 bytes (a masked frame is refused at its second byte). */
  private readonly head = Buffer.allocUnsafe(10);
  private headLength = 0;
  /** The frame being read. */
  private fin = false;
  private opcode = 0;
  private length = 0;
  /** Its payload, gathered when it was cut across reads. */
  private body: Buffer | null = null;
  private bodyAt = 0;
  /**
   * A message in several frames: its opcode (0: none), its payload so far in `joined[0,
   * joinedLength)` (null until a byte came), its frames so far, and whether the last was empty.
   */
  private fragmented = 0;
  private joined: Buffer | null = null;
  private joinedLength = 0;
  private fragments = 0;
  private lastEmpty = false;
  private readonly maxFragments: number;
  private stopped = false;

  constructor(
    private readonly maxMessage: number,
    private readonly sink: FrameSink,
  ) {
    this.maxFragments = maxFragments(maxMessage);
  }

  /** Hands on nothing more; what comes is ignored. */
  stop(): void {
    this.stopped = true;
    this.body = null;
    this.joined = null;
  }

  /** Reads `data[at, end)`; the bytes need not outlive the call. */
  read(data: Buffer, at: number, end: number): void {
    while (at < end && !this.stopped) {
      const body = this.body;
      if (body !== null) {
        const n = Math.min(end - at, body.length - this.bodyAt);
        data.copy(body, this.bodyAt, at, at + n);
        this.bodyAt += n;
        at += n;
        if (this.bodyAt === body.length) {
          this.body = null;
          this.payload(body, true);
        }
        continue;
      }
      if (this.headLength === 0 && end - at >= 2 && end - at >= headerLength(data[at + 1])) {
        at = this.header(data, at);
      } else {
        at = this.gather(data, at, end);
        if (this.headLength !== 0) continue;
        this.header(this.head, 0);
      }
      if (this.stopped) return;
      if (end - at >= this.length) {
        this.payload(data.subarray(at, at + this.length), false);
        at += this.length;
      } else {
        this.body = Buffer.allocUnsafe(this.length);
        this.bodyAt = 0;
      }
    }
  }

  /** Gathers a header cut across reads; headLength is back to 0 once it is whole in `head`. */
  private gather(data: Buffer, at: number, end: number): number {
    const head = this.head;
    while (this.headLength < 2 && at < end) head[this.headLength++] = data[at++];
    if (this.headLength < 2) return at;
    const need = headerLength(head[1]);
    while (this.headLength < need && at < end) head[this.headLength++] = data[at++];
    if (this.headLength === need) this.headLength = 0;
    return at;
  }

  /** Reads and checks a whole header at `source[at]`; the offset after it. */
  private header(source: Buffer, at: number): number {
    const first = source[at];
    const second = source[at + 1];
    if ((first & RSV1) !== 0) return this.fail(UpstreamWsCode.Protocol, 'RSV1 must be clear: no extension was negotiated', 1002);
    if ((first & RSV2_3) !== 0) return this.fail(UpstreamWsCode.Protocol, 'RSV2 and RSV3 must be clear: no extension was negotiated', 1002);
    const fin = (first & FIN) !== 0;
    const opcode = first & 0x0f;
    let length = second & 0x7f;
    if (opcode === Opcode.Continuation) {
      if (this.fragmented === 0)
        return this.fail(UpstreamWsCode.Protocol, 'invalid opcode 0: a continuation frame with no message to continue', 1002);
      if (this.fragments === this.maxFragments) {
        return this.fail(
          UpstreamWsCode.Protocol,
          `a message in over ${this.maxFragments} frames: no server cuts a message that finely`,
          1002,
        );
      }
      if (length === 0 && this.lastEmpty)
        return this.fail(UpstreamWsCode.Protocol, 'an empty continuation frame right after an empty frame', 1002);
    } else if (opcode === Opcode.Text || opcode === Opcode.Binary) {
      if (this.fragmented !== 0)
        return this.fail(UpstreamWsCode.Protocol, `invalid opcode ${opcode}: a new message before the last frame of the one begun`, 1002);
    } else if (opcode === Opcode.Close || opcode === Opcode.Ping || opcode === Opcode.Pong) {
      if (!fin) return this.fail(UpstreamWsCode.Protocol, 'FIN must be set: a control frame cannot be fragmented', 1002);
      if (length > 125) return this.fail(UpstreamWsCode.Protocol, "a control frame's payload is at most 125 bytes", 1002);
    } else {
      return this.fail(UpstreamWsCode.Protocol, `invalid opcode ${opcode}`, 1002);
    }
    if ((second & MASK) !== 0) return this.fail(UpstreamWsCode.Protocol, 'MASK must be clear: a server never masks its frames', 1002);
    at += 2;
    if (length === 126) {
      length = source.readUInt16BE(at);
      at += 2;
    } else if (length === 127) {
      const high = source.readUInt32BE(at);
      if (high >= 0x80000000)
        return this.fail(UpstreamWsCode.Protocol, 'the most significant bit of a 64-bit payload length must be 0', 1002);
      // Past 2^53 a length is no longer exact as a number; no message is that large anyway.
      if (high > 0x1fffff) return this.fail(UpstreamWsCode.TooBig, "a frame's payload length is over 2^53 - 1 bytes", 1009);
      length = high * 0x100000000 + source.readUInt32BE(at + 4);
      at += 8;
    }
    if (opcode < Opcode.Close && this.joinedLength + length > this.maxMessage) {
      return this.fail(UpstreamWsCode.TooBig, `a message over ${this.maxMessage} bytes`, 1009);
    }
    if (opcode === Opcode.Continuation || (opcode < Opcode.Close && !fin)) {
      this.fragments++;
      this.lastEmpty = length === 0;
    }
    this.fin = fin;
    this.opcode = opcode;
    this.length = length;
    return at;
  }

  /** A whole payload; `owned`: a buffer of its own, which may be kept, rather than the read buffer. */
  private payload(data: Buffer, owned: boolean): void {
    const opcode = this.opcode;
    if (opcode >= Opcode.Close) return this.control(opcode, data);
    if (opcode !== Opcode.Continuation && this.fin) return this.deliver(data, opcode === Opcode.Binary);
    if (opcode !== Opcode.Continuation) this.fragmented = opcode;
    this.join(data, owned);
    if (!this.fin) return;
    const message = this.joined === null ? EMPTY : this.joined.subarray(0, this.joinedLength);
    const binary = this.fragmented === Opcode.Binary;
    this.fragmented = 0;
    this.joined = null;
    this.joinedLength = 0;
    this.fragments = 0;
    this.lastEmpty = false;
    this.deliver(message, binary);
  }

  /**
   * Adds a frame's payload to the message begun. A first payload in a buffer of its own is
   * kept as it is: a large message written as one frame and an empty last one (gorilla's
   * way) is then never copied. The buffer otherwise doubles, up to the message limit,
   * which header() has checked the message stays within.
   */
  private join(data: Buffer, owned: boolean): void {
    const length = data.length;
    if (length === 0) return;
    let joined = this.joined;
    if (joined === null && owned) {
      this.joined = data;
      this.joinedLength = length;
      return;
    }
    const need = this.joinedLength + length;
    if (joined === null || joined.length < need) {
      const grown = Buffer.allocUnsafe(Math.min(this.maxMessage, Math.max(need, 2 * (joined?.length ?? 0), JOIN_START)));
      joined?.copy(grown, 0, 0, this.joinedLength);
      this.joined = joined = grown;
    }
    data.copy(joined, this.joinedLength);
    this.joinedLength = need;
  }

  private deliver(data: Buffer, binary: boolean): void {
    if (!binary && !isUtf8(data)) {
      this.fail(UpstreamWsCode.NotUtf8, 'a text message that is not UTF-8', 1007);
      return;
    }
    this.sink.message(data, binary);
  }

  private control(opcode: number, data: Buffer): void {
    if (opcode === Opcode.Ping) return this.sink.ping(data);
    if (opcode === Opcode.Pong) return this.sink.pong();
    if (data.length === 0) {
      this.stop();
      return this.sink.close(1005, '');
    }
    if (data.length === 1) {
      this.fail(UpstreamWsCode.Protocol, "a close frame's payload of 1 byte: a code takes 2", 1002);
      return;
    }
    const code = data.readUInt16BE(0);
    if (!closeCodeValid(code)) {
      this.fail(UpstreamWsCode.Protocol, `invalid close code ${code}`, 1002);
      return;
    }
    if (!isUtf8(data.subarray(2))) {
      this.fail(UpstreamWsCode.NotUtf8, 'a close reason that is not UTF-8', 1007);
      return;
    }
    this.stop();
    this.sink.close(code, data.toString('utf8', 2));
  }

  /** Stops the reader and tells the sink why; -1, for header() to return. */
  private fail(code: UpstreamWsCode, message: string, closeCode: number): number {
    this.stop();
    this.sink.fail(new UpstreamWsError(code, message, closeCode));
    return -1;
  }
}

/** A header's length from its second byte: 2, and the extended length's 2 or 8. */
function headerLength(second: number): number {
  const length = second & 0x7f;
  return length === 126 ? 4 : length === 127 ? 10 : 2;
}
