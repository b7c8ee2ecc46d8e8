// The opening handshake of RFC 6455 §4.1, client side: the upgrade request, written
// byte for byte, and the check of the server's answer, whose head the proxy's reader
// reads (upstream/response-head.ts: what it refuses, and what of a 101 it leaves alone).
import { createHash, randomBytes } from 'node:crypto';
import { headerLines, isToken, UnwritableField } from '../upstream/request-head.js';
import type { ResponseHead } from '../upstream/response-head.js';
import { UpstreamWsCode, UpstreamWsError } from './errors.js';

/** RFC 6455 §1.3: what the server appends to the key before hashing it. */
const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** What a request target may hold, as Node's HTTP client has it. */
const TARGET = /^[\u0021-\u00ff]+$/;
/** The handshake's own fields, which only this module writes. */
const OWN_FIELDS = new Set(['host', 'connection', 'upgrade']);
const ownField = (name: string): boolean => OWN_FIELDS.has(name) || name.startsWith('sec-websocket-');

/** A new Sec-WebSocket-Key: 16 random bytes. */
export function newKey(): string {
  return randomBytes(16).toString('base64');
}

/** The Sec-WebSocket-Accept a server must answer `key` with. */
export function acceptFor(key: string): string {
  return createHash('sha1')
    .update(key + GUID)
    .digest('base64');
}

/**
 * The upgrade request's head, as Latin-1 text (one character per byte). `headers` is a
 * flat [name, value, ...] list of lower-case names; the handshake's own fields in it
 * (Host, Connection, Upgrade, Sec-WebSocket-*) are left out, as this module writes
 * them. Throws a BadRequest error for a target, subprotocol or header that cannot be
 * sent as it is.
 */
export function requestHead(host: string, target: string, protocols: readonly string[], headers: readonly string[], key: string): string {
  if (!TARGET.test(target))
    throw new UpstreamWsError(UpstreamWsCode.BadRequest, 'the request target holds a character that cannot be sent');
  for (let i = 0; i < protocols.length; i++) {
    if (!isToken(protocols[i]) || protocols.indexOf(protocols[i]) !== i) {
      throw new UpstreamWsError(
        UpstreamWsCode.BadRequest,
        `the subprotocol ${JSON.stringify(protocols[i])} is not a token, or is offered twice`,
      );
    }
  }
  const lines = headerLines(headers, ownField, false);
  if (lines instanceof UnwritableField) {
    const why =
      lines.part === 'name'
        ? `the header name ${JSON.stringify(lines.name)} is not a token`
        : `the value of header ${lines.name} holds a control character`;
    throw new UpstreamWsError(UpstreamWsCode.BadRequest, why);
  }
  let head = `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${lines}`;
  head += `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n`;
  if (protocols.length > 0) head += `Sec-WebSocket-Protocol: ${protocols.join(',')}\r\n`;
  return `${head}\r\n`;
}

/** A server's answer: its status, its reason phrase, and its header fields by lower-case name (repeated ones joined by ", "). */
export interface Answer {
  readonly status: number;
  readonly message: string;
  readonly fields: ReadonlyMap<string, string>;
  /** Names that came more than once. */
  readonly repeated: ReadonlySet<string>;
}

/** The answer whose head `reader` has just read whole. */
export function answerOf(reader: ResponseHead): Answer {
  const fields = new Map<string, string>();
  const repeated = new Set<string>();
  for (let i = 0; i < reader.fieldCount; i++) {
    const name = reader.fieldName(i);
    const value = reader.fieldValue(i);
    const seen = fields.get(name);
    if (seen !== undefined) repeated.add(name);
    fields.set(name, seen === undefined ? value : `${seen}, ${value}`);
  }
  return { status: reader.status, message: reader.reason(), fields, repeated };
}

/** What is wrong with a 101 answer to the request with `key` and `protocols` (RFC 6455 §4.1, the client's checks), or null. */
export function answerProblem(answer: Answer, key: string, protocols: readonly string[]): string | null {
  const { fields } = answer;
  if (fields.get('upgrade')?.toLowerCase() !== 'websocket') return 'its Upgrade header is not websocket';
  const connection = fields.get('connection');
  if (connection === undefined || !connection.split(',').some((token) => token.trim().toLowerCase() === 'upgrade')) {
    return 'its Connection header does not name Upgrade';
  }
  if (answer.repeated.has('sec-websocket-accept') || fields.get('sec-websocket-accept') !== acceptFor(key)) {
    return 'its Sec-WebSocket-Accept is not the one its key asks for';
  }
  if (fields.has('sec-websocket-extensions')) return 'it names an extension, and none was offered';
  const chosen = fields.get('sec-websocket-protocol');
  if (chosen === undefined) return protocols.length > 0 ? 'it chose no subprotocol of those offered' : null;
  if (answer.repeated.has('sec-websocket-protocol') || !protocols.includes(chosen)) return 'it chose a subprotocol that was not offered';
  return null;
}
