// The upstream's answer head as the client gets it: its status line (the standard
// reasons made once), and its header lines but those api-auth writes itself or never
// relays. The names are compared as bytes, in the read buffer the parser hands over
// (upstream/parser.ts), so that a relayed header costs no string it does not need.
import { STATUS_CODES } from 'node:http';
import type { HttpResponse, RecognizedString } from 'uWebSockets.js';
import { equalsIgnoringCase, FIELD } from '../upstream/response-head.js';
import type { ResponseParser } from '../upstream/parser.js';

const CONTENT_LENGTH = Buffer.from('content-length');

// Status lines with the standard reason, made once per status.
const STATUS_LINES: string[] = [];
const STANDARD_REASONS: Buffer[] = [];

/** The status line of an answer for uWS: `code` and `message`, or the standard reason when `message` is that or absent. */
export function statusLine(code: number, message: string | undefined): string {
  const standard = STATUS_CODES[code];
  if (message && message !== standard) return `${code} ${message}`;
  return (STATUS_LINES[code] ??= `${code} ${standard || ''}`);
}

/** The status line of an upstream answer, for uWS: its code and reason phrase, the standard ones made once. */
export function answerStatusLine(parser: ResponseParser, bytes: Buffer): RecognizedString {
  const { status, reasonStart, reasonEnd } = parser;
  const standard = (STANDARD_REASONS[status] ??= Buffer.from(STATUS_CODES[status] ?? '', 'latin1'));
  if (reasonEnd === reasonStart || bytes.compare(standard, 0, standard.length, reasonStart, reasonEnd) === 0)
    return statusLine(status, undefined);
  // A JavaScript string would reach uWS as UTF-8: a reason beyond ASCII goes as its bytes.
  if (parser.reasonWide) return Buffer.concat([Buffer.from(`${status} `), bytes.subarray(reasonStart, reasonEnd)]);
  return statusLine(status, bytes.toString('latin1', reasonStart, reasonEnd));
}

/** The writer of upstream answer heads, made once per proxy. */
export class AnswerHeads {
  /** The names `dropped` holds, and Content-Length (dropped from answers with a body), as bytes by their length. */
  private readonly byLength: Buffer[][] = [];

  /**
   * `dropped`: the lower-case names never relayed; `listed`: the names an answer's
   * Connection value (its tokens other than keep-alive and close) adds to them, null for none.
   */
  constructor(
    dropped: ReadonlySet<string>,
    private readonly listed: (connection: string) => ReadonlySet<string> | null,
  ) {
    for (const name of [...dropped, 'content-length']) (this.byLength[name.length] ??= []).push(Buffer.from(name));
  }

  /**
   * Writes the status line and header lines of the answer `parser` read from `bytes`;
   * call it corked. `bodiless`: the answer has no body, and keeps the upstream's Content-Length.
   */
  write(res: HttpResponse, parser: ResponseParser, bytes: Buffer, bodiless: boolean): void {
    res.writeStatus(answerStatusLine(parser, bytes));
    const listed = parser.connection === null ? null : this.listed(parser.connection);
    const fields = parser.fields;
    for (let i = 0, end = parser.fieldCount * FIELD; i < end; i += FIELD) {
      const nameStart = fields[i];
      const nameEnd = fields[i + 1];
      if (this.dropped(bytes, nameStart, nameEnd)) {
        // uWS writes Content-Length itself from the body it sends; a bodiless answer keeps the upstream's.
        if (!bodiless || !equalsIgnoringCase(bytes, nameStart, nameEnd, CONTENT_LENGTH)) continue;
      }
      const name = bytes.toString('latin1', nameStart, nameEnd);
      if (listed?.has(name.toLowerCase())) continue;
      // A JavaScript string would reach uWS as UTF-8: bytes beyond ASCII go as they are.
      res.writeHeader(
        name,
        fields[i + 4] === 1 ? bytes.subarray(fields[i + 2], fields[i + 3]) : bytes.toString('latin1', fields[i + 2], fields[i + 3]),
      );
    }
  }

  /** Whether the name in bytes[start, end) is a dropped one, or Content-Length. */
  private dropped(bytes: Buffer, start: number, end: number): boolean {
    // A name of a length no dropped name has passes as it is; only the others are compared.
    const candidates = this.byLength[end - start];
    if (candidates === undefined) return false;
    for (const name of candidates) if (equalsIgnoringCase(bytes, start, end, name)) return true;
    return false;
  }
}
