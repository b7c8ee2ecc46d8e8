// What can go wrong between the relay and its upstream WebSocket, by stable code: a
// request that cannot be sent, an answer that is not a WebSocket handshake, and frames
// that break RFC 6455 (each with the close code the RFC gives it).
import { ApiAuthError } from '../../errors.js';

export const UpstreamWsCode = {
  /** The upgrade request cannot be written as given (a subprotocol or header the client sent). */
  BadRequest: 'API_AUTH_WS_BAD_REQUEST',
  /** The upstream's answer is not HTTP/1.1, or its head is over the bound. */
  BadResponse: 'API_AUTH_WS_BAD_RESPONSE',
  /** The upstream answered 101, but not as the handshake asked. */
  BadHandshake: 'API_AUTH_WS_BAD_HANDSHAKE',
  /** A frame against RFC 6455 (close 1002). */
  Protocol: 'API_AUTH_WS_PROTOCOL',
  /** A text message or close reason that is not UTF-8 (close 1007). */
  NotUtf8: 'API_AUTH_WS_NOT_UTF8',
  /** A message over the relay's --ws-max-message, or a frame length no message may have (close 1009). */
  TooBig: 'API_AUTH_WS_TOO_BIG',
} as const;

export type UpstreamWsCode = (typeof UpstreamWsCode)[keyof typeof UpstreamWsCode];

export class UpstreamWsError extends ApiAuthError {
  override readonly name = 'UpstreamWsError';

  /** `closeCode`: what the close frame to the upstream says, for the frame errors; 0 for the others. */
  constructor(
    readonly code: UpstreamWsCode,
    message: string,
    readonly closeCode = 0,
  ) {
    super(message);
  }
}
