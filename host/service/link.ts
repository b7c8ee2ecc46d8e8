// What the serving side may ask of the token service, and all it may ask: the seam
// between per-request handling (http/) and the state owner (service/, state/,
// password/). Both sides share a thread today, and the link is a direct call; with
// serving threads of their own it can be a message channel to the owner's, so it
// carries only plain values.
import type { CallContext, Reply } from '../rpc/jsonrpc.js';

export interface TokenServiceLink {
  /**
   * Whole seconds the client at `address` must wait before its next password check; 0
   * when it may go ahead. Asked before the request's body is read, so it answers at once;
   * a wait counts as a throttled call.
   */
  throttled(address: string): number;
  /** The JSON-RPC answer to a body of POST /ext/auth. */
  handle(body: Uint8Array, context: CallContext): Promise<Reply>;
}
