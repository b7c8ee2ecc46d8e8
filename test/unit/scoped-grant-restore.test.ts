// A grant with a method scope survives a restart: the state file keeps its entries as the
// core holds them (grantEntries), and the restore gives it back its id and its methods.
import t from 'tap';
import { checkRecord, Outcome } from '../../build/host/core/abi.js';
import { grantEntries } from '../../build/host/core/grants.js';
import { newCore } from '../../build/host/core/module.js';
import { decodeState, encodeState } from '../../build/host/state/codec.js';
import { restoreCore } from '../../build/host/state/store.js';
import type { ServiceState } from '../../build/host/state/store.js';

const NOW = 1_700_000_000;
const HOUR = 3600;
const RPC = '/ext/bc/C/rpc';

t.test('a stored scoped grant restores with its id and its methods, beside grants without scope', async (t) => {
  const key = new Uint8Array(32).fill(9);
  const before = newCore({ windowLog2: 12 });
  before.setKey(key);
  t.same([before.addGrant([RPC]), before.addGrant([RPC], ['net_version', 'eth_*']), before.addGrant(['*'], ['*'])], [0, 1, 2]);
  // What the token service records for each new grant.
  const stored = [grantEntries([RPC]), grantEntries([RPC], ['net_version', 'eth_*']), grantEntries(['*'], ['*'])];
  t.same(stored[1], [RPC, '', 'eth_*', 'net_version']);
  const scoped = before.issue(1, NOW, HOUR).token;

  // Through the state file's own encoding, as a restart reads it.
  const file = encodeState({
    key,
    generation: 0,
    password: 'p',
    filePassword: 'f',
    maxLifetime: HOUR,
    serialCeiling: 4096,
    floor: 0,
    grants: stored,
    revocations: new Map(),
    journal: undefined,
  });
  const persisted = decodeState(file, 'state');
  t.same(persisted.grants, stored, 'the file keeps the entries, the empty one included');

  const after = newCore({ windowLog2: 12 });
  // The password records play no part in rebuilding the core.
  restoreCore(after, persisted as unknown as ServiceState, NOW, 'state');
  t.equal(after.grantCount, 3);
  t.equal(after.findGrant([RPC], ['eth_*', 'net_version']), 1, 'the scoped grant has its id again');
  t.equal(after.findGrant([RPC]), 0);
  t.equal(after.findGrant(['*'], ['*']), 2);
  const checked = checkRecord();
  t.equal(after.authorize(`Bearer ${scoped}`, RPC, NOW, checked), Outcome.Scoped, 'a token issued before the restart is still scoped');
  t.equal(checked.grant, 1);
  t.equal(after.methodAllowed(1, 'eth_call'), true);
  t.equal(after.methodAllowed(1, 'avax.getHeight'), false);
});
