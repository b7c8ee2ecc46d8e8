// What the relay reads in a message or a close, apart from the sessions that carry them:
// the calls a message counts for its token's usage, and the close codes that may be sent.
import { callCount, readCalls } from '../../rpc/reading.js';

/** How long a closed session's upstream may take to answer the close frame and end its connection. */
export const UPSTREAM_CLOSE_MS = 2000;

/**
 * The calls a message of a token without limits or scope holds, as its usage counts them:
 * a batch its number, anything else (a lone call, or a message that cannot be read) 1.
 * Only a message that starts with "[" is read, so that a session of single calls pays no
 * reading for its usage.
 */
export function callsIn(data: ArrayBuffer): number {
  const bytes = new Uint8Array(data);
  let i = 0;
  // JSON's whitespace: space, tab, line feed, carriage return.
  while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x09 || bytes[i] === 0x0a || bytes[i] === 0x0d)) i++;
  return bytes[i] === 0x5b ? callCount(readCalls(bytes)) : 1;
}

/** Whether a close code may go in a close frame (RFC 6455 §7.4): 1000-1003, 1007-1014, 3000-4999. */
export function sendable(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}
