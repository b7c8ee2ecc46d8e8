// A data folder's state, or a fleet's seed, whose password checks cost next to nothing, for
// the tests that make many of them (startServer's and serveInProcess's cheapChecks, the
// fleet test's fleets). Its own module, loaded only by them: hash-wasm, etcd3 and the state
// codec are not every test's to load.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { argon2id } from 'hash-wasm';
import { encodeRecord } from '../../build/host/password/hash.js';
import { encodeState } from '../../build/host/state/codec.js';

/** argon2id at its smallest cost: a record of these takes a fraction of a millisecond to check. */
export const CHEAP_ARGON2ID = { memorySize: 8, iterations: 1, parallelism: 1 } as const;

/**
 * Writes, into the empty data folder `dataDir`, the state file of a node that has issued
 * nothing yet, whose password is `password` as an argon2id record of CHEAP_ARGON2ID (the
 * node checks a password against its record's own parameters). For a test that makes
 * many password checks and is not about the first start or the cost of hashing: each
 * check then takes a fraction of a millisecond instead of tens. The server still makes
 * every record of its own (a password change, a changed password file) at its production
 * cost.
 */
export async function writeCheapState(dataDir: string, password: string): Promise<void> {
  const record = await cheapRecord(password);
  writeFileSync(
    join(dataDir, 'state'),
    encodeState({
      key: randomBytes(32),
      generation: 0,
      password: record,
      filePassword: record,
      maxLifetime: 0,
      serialCeiling: 0,
      floor: 0,
      grants: [],
      revocations: new Map(),
      journal: undefined,
    }),
    { mode: 0o600 },
  );
}

/**
 * Seeds the empty fleet `cluster` in the etcd at `url` as its first gateway would (a new
 * token key, the password's record, no serial yet), with `password`'s record of
 * CHEAP_ARGON2ID: the gateways then join a fleet whose password checks cost next to nothing.
 */
export async function seedCheapFleet(url: string, password: string, cluster = 'api-auth'): Promise<void> {
  const record = await cheapRecord(password);
  // etcd3 (gRPC) takes about 0.2 s of CPU to load: only the fleet's tests pay it.
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts: url });
  try {
    await client.put(`/${cluster}/key`).value(randomBytes(32).toString('base64'));
    await client.put(`/${cluster}/password`).value(JSON.stringify({ record, generation: 0 }));
    await client.put(`/${cluster}/serials`).value('0');
  } finally {
    client.close();
  }
}

/** `password`'s argon2id record of CHEAP_ARGON2ID, in the PHC string format the state and the fleet keep. */
async function cheapRecord(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await argon2id({ password, salt, ...CHEAP_ARGON2ID, hashLength: 32, outputType: 'binary' });
  return encodeRecord({ algorithm: 'argon2id', ...CHEAP_ARGON2ID, salt, hash });
}
