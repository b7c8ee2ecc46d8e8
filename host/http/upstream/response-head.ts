// The head of an upstream's answer (RFC 9112 §4, §5): its status line and header lines,
// read by one reader for both upstream clients, the proxy's (parser.ts, which frames the
// body on top of it) and the WebSocket handshake's (upstream-ws/socket.ts). It hands out
// offsets into the bytes it read, not strings, gathers a head cut across reads, and
// refuses, as soon as it sees them, what the grammar does not allow: a head over
// MAX_HEAD, a bare LF, a NUL or other control byte in the status line or a value, a
// folded line, a name that is not a token or not followed by its colon, a status that is
// not three digits from 100, a version other than HTTP/1.1 and HTTP/1.0.
//
// What a head says of a body (Content-Length, Transfer-Encoding, Connection) is not this
// reader's: the proxy's parser judges it, and the WebSocket client reads no body (after
// a 101 come frames; any other answer ends the connection). For an upgrade's answer,
// against ws's client, whose head llhttp reads (test/unit/upstream-ws-answers.test.ts):
// - A control byte or DEL in a value, a bare LF: refused, as llhttp refuses them (RFC 9110
//   §5.5's field-value; RFC 9112 §2.2 lets a recipient refuse a bare LF); the handshake's
//   own reader let them through before. A folded line: refused, as before and as llhttp
//   (RFC 9112 §5.2 has a gateway refuse it with a 502, or unfold it).
// - A NUL or other control byte in the reason phrase, HTTP/2.0, a status below 100 (099):
//   refused, where llhttp reads them. RFC 9112 §4's reason-phrase is HTAB, SP, VCHAR and
//   obs-text, and the reason of an error status is relayed to the client; HTTP/2 has no
//   101 (RFC 9113 §8.6); RFC 9110 §15's codes start at 100. Before, the handshake read
//   the control bytes and the 099 (as an unexpected status); HTTP/2.0 it refused too.
// - A value's padding: SP and HTAB only (RFC 9110 §5.5), as llhttp; before, the handshake
//   trimmed what JavaScript's trim() does, so `websocket` and a Latin-1 no-break space
//   passed as websocket, which ws refuses.
// - Two Content-Length, or Content-Length beside Transfer-Encoding, in a 101: read, as
//   before, where llhttp refuses them. RFC 9112 §6.3 ends a 1xx at its empty line
//   whatever its fields say: no field of it can mislead a reader about where frames start.
// - 100 Continue or 103 Early Hints before the answer: skipped, as ws does and RFC 9110
//   §15.2 asks of a client; the handshake failed on them before.
// - A status from 600 to 999: read (an unexpected status, not 101), as llhttp reads it.

/** The largest head (status line and headers) of an answer, as undici and node:http take by default. */
export const MAX_HEAD = 16 * 1024;

/** What a read returns for bytes the reader refuses; `refusal` says why. */
export const REFUSED = -1;

/** The entries of one header line in ResponseHead.fields. */
export const FIELD = 5;

export const CR = 0x0d;
export const LF = 0x0a;
const SP = 0x20;
const HTAB = 0x09;
export const COLON = 0x3a;
const HEAD_END = Buffer.from('\r\n\r\n');

/** RFC 9110 tchar: the bytes of a field name. */
export const TOKEN = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~") TOKEN[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TOKEN[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TOKEN[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) TOKEN[c] = 1;
/** The bytes of a field value or a reason phrase: HTAB, SP, VCHAR, obs-text; no other control byte. */
export const TEXT = new Uint8Array(256);
TEXT[HTAB] = 1;
for (let c = 0x20; c <= 0x7e; c++) TEXT[c] = 1;
for (let c = 0x80; c <= 0xff; c++) TEXT[c] = 1;

/** True when bytes[start, end) spell `lower` in any case; `lower` is lower-case ASCII. */
export function equalsIgnoringCase(bytes: Buffer, start: number, end: number, lower: Uint8Array): boolean {
  if (end - start !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) {
    const c = bytes[start + i];
    if ((c >= 0x41 && c <= 0x5a ? c | 0x20 : c) !== lower[i]) return false;
  }
  return true;
}

export class ResponseHead {
  /** Why the last REFUSED was returned. */
  refusal = '';
  /**
   * The bytes of the head just read whole, which its offsets point into: the read's own,
   * or the reader's copy of a head cut across reads (valid until the next read). Null
   * when the head goes on in a later read.
   */
  head: Buffer | null = null;

  // The head just read, as offsets into `head`.
  status = 0;
  /** 0 for HTTP/1.0, 1 for HTTP/1.1. */
  minor = 1;
  reasonStart = 0;
  reasonEnd = 0;
  /** The reason phrase has bytes beyond ASCII. */
  reasonWide = false;
  /**
   * Header lines read: field i's name is [fields[5i], fields[5i+1]), its value
   * [fields[5i+2], fields[5i+3]), and fields[5i+4] is 1 when the value has bytes beyond ASCII.
   */
  fieldCount = 0;
  fields = new Int32Array(FIELD * 32);

  /** A head that came in more than one read, gathered here; null until one does. */
  private held: Buffer | null = null;
  protected heldLength = 0;

  /** The name of field i, in lower case. */
  fieldName(i: number): string {
    const at = i * FIELD;
    return this.head!.toString('latin1', this.fields[at], this.fields[at + 1]).toLowerCase();
  }

  /** The value of field i, one character per byte. */
  fieldValue(i: number): string {
    const at = i * FIELD;
    return this.head!.toString('latin1', this.fields[at + 2], this.fields[at + 3]);
  }

  /** The reason phrase, one character per byte. */
  reason(): string {
    return this.head!.toString('latin1', this.reasonStart, this.reasonEnd);
  }

  protected refuse(why: string): number {
    this.refusal = why;
    return REFUSED;
  }

  /**
   * Reads a head from bytes[p, end), gathering it across reads if need be. Returns the
   * offset it read up to, just past the head when `head` is set (read the rest after it),
   * or REFUSED.
   */
  readHead(bytes: Buffer, p: number, end: number): number {
    this.head = null;
    if (this.heldLength === 0) {
      const at = bytes.indexOf(HEAD_END, p);
      if (at >= 0 && at + 4 <= end) {
        if (at + 4 - p > MAX_HEAD) return this.refuse(`the head of an answer is over ${MAX_HEAD} bytes`);
        if (this.parse(bytes, p, at + 4) < 0) return REFUSED;
        this.head = bytes;
        return at + 4;
      }
    }
    // The head goes on in a later read: gather it, at most MAX_HEAD bytes.
    const held = (this.held ??= Buffer.allocUnsafe(MAX_HEAD));
    const before = this.heldLength;
    const taken = Math.min(end - p, MAX_HEAD - before);
    bytes.copy(held, before, p, p + taken);
    this.heldLength += taken;
    const at = held.subarray(0, this.heldLength).indexOf(HEAD_END, Math.max(0, before - 3));
    if (at < 0) {
      if (this.heldLength === MAX_HEAD) return this.refuse(`the head of an answer is over ${MAX_HEAD} bytes`);
      // Refused as soon as seen, rather than at the timeout: no head may hold these.
      for (let i = Math.max(0, before - 1); i < this.heldLength; i++) {
        const c = held[i];
        if (c === 0) return this.refuse('the head of an answer holds a NUL byte');
        if (c === LF && (i === 0 || held[i - 1] !== CR)) return this.refuse('the head of an answer holds a line that does not end in CRLF');
      }
      return p + taken;
    }
    this.heldLength = 0;
    if (this.parse(held, 0, at + 4) < 0) return REFUSED;
    this.head = held;
    return p + (at + 4 - before);
  }

  /** Reads the head in b[s, e), e just past the first CRLFCRLF. Returns 0, or REFUSED. */
  private parse(b: Buffer, s: number, e: number): number {
    // "HTTP/1.x NNN" and the reason phrase, if any.
    if (
      b[s] !== 0x48 ||
      b[s + 1] !== 0x54 ||
      b[s + 2] !== 0x54 ||
      b[s + 3] !== 0x50 ||
      b[s + 4] !== 0x2f ||
      b[s + 5] !== 0x31 ||
      b[s + 6] !== 0x2e ||
      (b[s + 7] !== 0x30 && b[s + 7] !== 0x31) ||
      b[s + 8] !== SP
    ) {
      return this.refuse('an answer does not start with HTTP/1.1 or HTTP/1.0');
    }
    const d1 = b[s + 9] - 0x30;
    const d2 = b[s + 10] - 0x30;
    const d3 = b[s + 11] - 0x30;
    if (d1 < 1 || d1 > 9 || d2 < 0 || d2 > 9 || d3 < 0 || d3 > 9)
      return this.refuse("an answer's status is not three digits from 100 to 999");
    this.minor = b[s + 7] - 0x30;
    this.status = d1 * 100 + d2 * 10 + d3;
    let p = s + 12;
    if (b[p] === SP) {
      p++;
      this.reasonStart = p;
      let high = 0;
      while (TEXT[b[p]] === 1) high |= b[p++];
      this.reasonEnd = p;
      this.reasonWide = high >= 0x80;
    } else {
      this.reasonStart = this.reasonEnd = p;
      this.reasonWide = false;
    }
    if (b[p] !== CR || b[p + 1] !== LF) return this.refuse("an answer's status line holds a control byte or does not end in CRLF");
    p += 2;

    let fields = this.fields;
    let count = 0;
    while (b[p] !== CR) {
      if (b[p] === SP || b[p] === HTAB) return this.refuse('an answer holds a folded header line (obs-fold), which RFC 9112 forbids');
      const nameStart = p;
      while (TOKEN[b[p]] === 1) p++;
      if (p === nameStart || b[p] !== COLON) return this.refuse('an answer holds a header line that is not a name, a colon and a value');
      const nameEnd = p++;
      while (b[p] === SP || b[p] === HTAB) p++;
      const valueStart = p;
      let high = 0;
      while (TEXT[b[p]] === 1) high |= b[p++];
      if (b[p] !== CR || b[p + 1] !== LF)
        return this.refuse('an answer holds a header value with a control byte, or a line that does not end in CRLF');
      let valueEnd = p;
      while (valueEnd > valueStart && (b[valueEnd - 1] === SP || b[valueEnd - 1] === HTAB)) valueEnd--;
      p += 2;
      if (count * FIELD === fields.length) {
        const more = new Int32Array(fields.length * 2);
        more.set(fields);
        this.fields = fields = more;
      }
      const at = count * FIELD;
      fields[at] = nameStart;
      fields[at + 1] = nameEnd;
      fields[at + 2] = valueStart;
      fields[at + 3] = valueEnd;
      fields[at + 4] = high >> 7;
      count++;
    }
    this.fieldCount = count;
    // The line that ends the head must be the empty line found, not a CR leading a line.
    if (p + 2 !== e) return this.refuse('an answer holds a header line that is not a name, a colon and a value');
    return 0;
  }
}
