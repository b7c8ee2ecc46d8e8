// The head of a request the proxy sends upstream: the request line, Host and keep-alive,
// then the header lines forwarding.ts chose (written by upstream/request-head.ts, as the
// WebSocket handshake's are). The client's Content-Length is left out (forwarding.ts
// judged the framing as received): the framing line is written from the body sent.
import { headerLines, isToken, UnwritableField } from '../upstream/request-head.js';

/** What requestHead returns for a request that cannot be written. */
export class Unwritable {
  constructor(readonly why: string) {}
}

const framingLine = (name: string): boolean => name === 'content-length';
/** A split batch's answer is merged with the refusals, so it must come as JSON text: the request asks for no coding. */
const framingOrCoding = (name: string): boolean => name === 'content-length' || name === 'accept-encoding';

/**
 * The request line and header lines of a request (`target` from upstreamTarget,
 * `hostLines` the Host and Connection lines, `headers` from upstreamHeaders), as one
 * Latin-1 string, without the framing of its body and the empty line; or why it cannot
 * be written. `identity`: without the client's Accept-Encoding, for an answer that must
 * come uncompressed.
 */
export function requestHead(
  method: string,
  target: string,
  hostLines: string,
  headers: readonly string[],
  identity = false,
): string | Unwritable {
  if (method !== '' && !isToken(method)) return new Unwritable('its method is not a token');
  const lines = headerLines(headers, identity ? framingOrCoding : framingLine, true);
  if (lines instanceof UnwritableField) {
    return new Unwritable(
      lines.part === 'name' ? 'a header name is not a token' : `the value of header ${lines.name} holds a control byte`,
    );
  }
  return `${method} ${target} ${hostLines}${lines}`;
}

/** The head and the body of a request, in one buffer: one write. */
export function withBody(head: string, body: Uint8Array): Buffer {
  const lines = `${head}content-length: ${body.length}\r\n\r\n`;
  const bytes = Buffer.allocUnsafe(lines.length + body.length);
  bytes.write(lines, 0, 'latin1');
  bytes.set(body, lines.length);
  return bytes;
}
