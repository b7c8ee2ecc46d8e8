// The header lines of an HTTP/1.1 request to the upstream, written by one function for
// both upstream clients: the proxy's (proxy.ts) and the WebSocket handshake's
// (upstream-ws/handshake.ts). Each says which fields it writes itself and leaves out of
// the list it is handed; what cannot go on the wire as it is (a name that is not a
// token, a value with a control byte) is refused, never cleaned, and the caller says why
// in its own words.

/** RFC 9110's token: a method, a header name, a subprotocol. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What a field value may hold: HTAB, SP, VCHAR and obs-text; no other control byte (as Node's HTTP client has it). */
const NOT_FIELD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** Whether `text` is a token: a method, a header name, a subprotocol. */
export function isToken(text: string): boolean {
  return TOKEN.test(text);
}

/** What headerLines returns for a field that cannot be written: its name, and which part of it is wrong. */
export class UnwritableField {
  constructor(
    readonly name: string,
    readonly part: 'name' | 'value',
  ) {}
}

/**
 * The header lines of `headers`, a flat [name, value, ...] list of lower-case names, as
 * Latin-1 text (one character per byte), each `name: value` and CRLF, in the order given;
 * or the first field that cannot be written. `omit` names the fields the caller writes
 * itself, or not at all: they are left out. `checkOmitted`: whether an omitted field must
 * still be writable (the proxy refuses a request whose framing line it rewrites but could
 * not have written as received); otherwise it is dropped without a look (the handshake's
 * own fields).
 */
export function headerLines(headers: readonly string[], omit: (name: string) => boolean, checkOmitted: boolean): string | UnwritableField {
  let lines = '';
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i];
    const omitted = omit(name);
    if (omitted && !checkOmitted) continue;
    if (!TOKEN.test(name)) return new UnwritableField(name, 'name');
    const value = headers[i + 1];
    if (NOT_FIELD_VALUE.test(value)) return new UnwritableField(name, 'value');
    if (!omitted) lines += `${name}: ${value}\r\n`;
  }
  return lines;
}
