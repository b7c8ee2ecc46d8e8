// One table of a token's limit refusals for every way in (http/refusals.ts limitRefusal,
// through the admission's second half, http/body-admission.ts): a request over HTTP and a
// WebSocket message meet the same answer for the same refusal. The core's limits table
// full was -32046 over HTTP and -32005 over WebSocket.
import t from 'tap';
import { Core } from '../../build/host/core/core.js';
import { coreModule } from '../../build/host/core/module.js';
import { BodyAdmission } from '../../build/host/http/body-admission.js';
import { Gate } from '../../build/host/http/gate.js';
import { Metrics } from '../../build/host/ops/metrics.js';

const NOW = 1_700_000_000;
const RPC = '/ext/bc/C/rpc';
const CLIENT = Buffer.from('00000000000000000000ffffc0000207', 'hex');
const CALL = Buffer.from('{"jsonrpc":"2.0","id":9,"method":"eth_chainId"}');

/** Serials whose slot in the limits table starts at the same place: as assembly/limits.ts hashes them. */
function collidingSerials(count: number): number[] {
  const home = (s: bigint) => ((s * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn) >> 48n;
  const found = [1];
  for (let s = 2n; found.length < count; s++) if (home(s) === home(1n)) found.push(Number(s));
  return found;
}

t.test('a full limits table: the same 503 and -32046 for a request and for a WebSocket message', async (t) => {
  const core = new Core(coreModule(), { windowLog2: 22 });
  core.setKey(new Uint8Array(32).fill(7));
  const metrics = new Metrics();
  const bodies = new BodyAdmission(core, new Gate(core, metrics, () => NOW * 1000), metrics);
  const grant = core.addGrant([RPC], undefined, ['rate 1/s', 'burst 5']);
  const serials = collidingSerials(65);
  const ticket = (serial: number) => ({ grant: -1, limited: { serial, expiry: NOW + 3600, grant, client: CLIENT } });
  for (const serial of serials.slice(0, 64))
    t.equal(bodies.judge(ticket(serial), CALL, true, 'http').refusal, null, `serial ${serial} has a slot`);
  const http = bodies.judge(ticket(serials[64]), CALL, true, 'http').refusal;
  const message = bodies.judge(ticket(serials[64]), CALL, false, 'websocket').refusal;
  t.match(http, { status: 503, retryAfter: 1 }, 'over HTTP: 503, Retry-After 1');
  t.match(JSON.parse(http!.text), { error: { code: -32046, message: /tracks as many tokens with limits as it can/ }, id: 9 });
  t.equal(message?.text, http?.text, 'a WebSocket message gets the same error');
  t.equal(metrics.limitRefusals[2], 2, 'both counted as "table full"');

  const rate = bodies.judge(
    ticket(serials[0]),
    Buffer.from(JSON.stringify(Array.from({ length: 5 }, (_, id) => ({ id, method: 'eth_chainId' })))),
    false,
    'websocket',
  );
  t.match(
    JSON.parse(rate.refusal!.text),
    { error: { code: -32005, message: /past its rate limit; retry in 1 s/ }, id: null },
    'past the rate: -32005',
  );
  t.equal(rate.refusal!.status, 429);
});
