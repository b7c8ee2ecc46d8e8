// The gateway's traffic: one JSON-RPC call POSTed to a node path, and the upstream's
// answer to it, a JSON-RPC result padded to an exact size.
export const RPC_PATH = '/ext/bc/C/rpc';
export const RPC_REQUEST = JSON.stringify({ jsonrpc: '2.0', method: 'eth_blockNumber', params: [], id: 1 });
export const CONTENT_TYPE = 'application/json';

const HEAD = '{"jsonrpc":"2.0","result":"0x';
const TAIL = '","id":1}\n';

/** The smallest answer: an empty hex string. */
export const MIN_RESULT_BYTES = Buffer.byteLength(HEAD + TAIL);
export const MAX_RESULT_BYTES = 64 * 1048576;

/** A JSON-RPC result of exactly `bytes` bytes (a hex string as long as it takes). */
export function rpcResult(bytes) {
  if (!Number.isInteger(bytes) || bytes < MIN_RESULT_BYTES || bytes > MAX_RESULT_BYTES) {
    throw new RangeError(`a response size must be a whole number of bytes from ${MIN_RESULT_BYTES} to ${MAX_RESULT_BYTES}, not ${bytes}`);
  }
  return Buffer.from(HEAD + '0'.repeat(bytes - MIN_RESULT_BYTES) + TAIL);
}
