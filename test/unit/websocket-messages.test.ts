// What the WebSocket relay reads in a message and a close (host/http/websocket/messages.ts):
// the calls a message counts in its token's usage, and the close codes that may be sent.
import t from 'tap';
import { callsIn, sendable } from '../../build/host/http/websocket/messages.js';

const bytes = (text: string): ArrayBuffer => new TextEncoder().encode(text).buffer;

t.test('a message counts its calls: a batch its number, anything else one', async (t) => {
  const call = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}';
  t.equal(callsIn(bytes(call)), 1, 'a lone call');
  t.equal(callsIn(bytes(`[${call},${call},${call}]`)), 3, 'a batch of three');
  t.equal(callsIn(bytes(` \t\r\n[${call},${call}]`)), 2, 'JSON whitespace before the batch');
  t.equal(callsIn(bytes('[{"jsonrpc":')), 1, 'a batch that cannot be read counts as one');
  t.equal(callsIn(bytes('not json')), 1, 'a message that is not JSON');
  t.equal(callsIn(bytes('')), 1, 'an empty message');
});

t.test('close codes that may go in a close frame (RFC 6455 §7.4)', async (t) => {
  for (const code of [1000, 1001, 1002, 1003, 1007, 1011, 1014, 3000, 4999]) t.ok(sendable(code), `${code} is sent`);
  for (const code of [0, 999, 1004, 1005, 1006, 1015, 2999, 5000]) t.notOk(sendable(code), `${code} is not`);
});
