// `api-auth fleet delete-key KEY [flags]`: deletes one damaged key that no gateway needs
// to verify tokens (an inventory entry under tokens/, a member key, a usage key), which
// the gateways skip and report (cluster/fleet.ts). It reaches etcd as a gateway does,
// with the gateway's own flags, environment or --config-file (--cluster-etcd and its TLS
// and user), so it needs no etcdctl and no other credentials. It deletes a key only while
// it holds the damaged value it read, and never a key that is whole, nor one that
// verification needs (that one is repaired from a backup: docs/guides/fleet.md).
//
// Exit codes: 0 deleted; 1 nothing deleted (no such key, a whole key, one verification
// needs, or one changed meanwhile); 2 a bad command line; 3 etcd could not be reached.
import type { IKeyValue } from 'etcd3';
import { EtcdConnection } from '../cluster/etcd.js';
import { DamagedKeyError, FleetKeys, fleetValue, verifiesWith } from '../cluster/keys.js';
import { readEtcdAccess } from '../cluster/open.js';
import { decodeFleetUsage } from '../cluster/usage.js';
import { ApiAuthError, FleetError, OperatorExitCode as ExitCode, OptionError, UsageError } from '../errors.js';
import { createLogger } from '../ops/log.js';
import { resolveServerOptions } from '../options.js';
import type { ClusterConfig } from '../options.js';
import { readCommand } from './flags.js';
import type { Environment } from './flags.js';
import type { CommandIo } from './io.js';

export const FLEET_USAGE = `Usage:
  api-auth fleet delete-key KEY [the gateway's flags]
                    delete a damaged key of the fleet that no gateway needs to
                    verify tokens: an inventory entry (/NAME/tokens/...), a
                    member key (/NAME/members/...) or a usage key (/NAME.usage/...)

The gateways log such a key once, name this command, count it in
api_auth_fleet_damaged_keys, and skip it. The command reaches etcd as the gateway
does: give it the gateway's --cluster-etcd, --cluster-name, etcd TLS and etcd user
flags, its API_AUTH_* environment, or its --config-file. It deletes the key only
while it holds the damaged value it read. A damaged key that verification needs
(the token key, the password, grants, serial blocks, revocations, the serial
counter) fences the gateways until it is repaired: write its value back from a
backup of etcd, as docs/guides/fleet.md says; this command refuses it.

Exit codes: 0 deleted; 1 nothing deleted (no such key, the key is whole, or
verification needs it); 2 a bad command line; 3 etcd could not be reached.
`;

class NothingDeleted extends ApiAuthError {
  readonly code = 'API_AUTH_NOTHING_DELETED';
}

/** Runs `api-auth fleet ...` to its end; resolves with the exit code. */
export async function runFleetCommand(args: readonly string[], env: Environment, io: CommandIo): Promise<number> {
  try {
    const [, verb, key, ...flags] = args;
    if (verb === '--help' || (verb === 'delete-key' && (key === '--help' || flags.includes('--help')))) {
      io.stdout(FLEET_USAGE);
      return ExitCode.Ok;
    }
    if (verb !== 'delete-key')
      throw new UsageError(`unknown command "fleet ${verb ?? ''}"; did you mean "fleet delete-key"? (run api-auth fleet --help)`);
    if (key === undefined || !key.startsWith('/')) {
      throw new UsageError(
        "fleet delete-key needs the KEY to delete, as the gateway's log names it, such as /api-auth/tokens/0000000000000007",
      );
    }
    const cluster = clusterOf(flags, env);
    io.stdout(`${await deleteDamagedKey(cluster, key)}\n`);
    return ExitCode.Ok;
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`api-auth: ${error.message}\n`);
      return ExitCode.Usage;
    }
    if (error instanceof NothingDeleted) {
      io.stderr(`api-auth: nothing deleted: ${error.message}\n`);
      return ExitCode.Refused;
    }
    if (error instanceof FleetError) {
      // The cause is in the JSON warning before this line (cluster/etcd.ts).
      io.stderr("api-auth: etcd could not be reached through the gateway's --cluster-etcd; nothing deleted; retry once it answers\n");
      return ExitCode.Unreachable;
    }
    io.stderr(`api-auth: unexpected failure: ${error instanceof Error ? error.message : String(error)}\n`);
    return ExitCode.Failed;
  }
}

/** The fleet's etcd as the gateway's own flags, environment and config file name it. */
function clusterOf(flags: readonly string[], env: Environment): ClusterConfig {
  const { command, name } = readCommand(flags, env);
  if (command.action !== 'serve') throw new UsageError("fleet delete-key takes the gateway's flags (run api-auth fleet --help)");
  let cluster: ClusterConfig | undefined;
  try {
    cluster = resolveServerOptions(command.options).cluster;
  } catch (error) {
    if (error instanceof OptionError) throw new UsageError(error.describe(name));
    throw error;
  }
  if (cluster === undefined) {
    throw new UsageError(
      "fleet delete-key reaches etcd as the gateway does: give the gateway's --cluster-etcd (and its --api-auth-required, " +
        'etcd TLS and user flags), its API_AUTH_* environment, or its --config-file',
    );
  }
  return cluster;
}

/** Deletes `key` if it is a damaged key that no gateway needs to verify; says what it did, or throws NothingDeleted saying why not. */
async function deleteDamagedKey(cluster: ClusterConfig, key: string): Promise<string> {
  const keys = new FleetKeys(cluster.name);
  const inState = key.startsWith(keys.prefix);
  if (!inState && !key.startsWith(keys.usagePrefix)) {
    throw new UsageError(`${key} is no key of the fleet ${cluster.name}: its keys start with ${keys.prefix} or ${keys.usagePrefix}`);
  }
  // Warnings (an etcd password file others can read) as the gateway gives them: JSON, on stderr.
  const log = createLogger((line) => process.stderr.write(line), 'warn');
  let access: Awaited<ReturnType<typeof readEtcdAccess>>;
  try {
    access = await readEtcdAccess(cluster, log);
  } catch (error) {
    if (error instanceof OptionError) throw new UsageError(error.describe((option) => option));
    throw error;
  }
  const etcd = new EtcdConnection({ endpoints: cluster.endpoints, leaseSeconds: cluster.leaseSeconds, access }, log);
  try {
    const found = await etcd.call((client) => client.get(key).exec());
    const kv: IKeyValue | undefined = found.kvs[0];
    if (kv === undefined) throw new NothingDeleted(`etcd holds no key ${key}`);
    const value = kv.value.toString('utf8');
    if (inState) {
      try {
        fleetValue(keys, key, value);
        throw new NothingDeleted(`${key} is not damaged: the gateways use it as it is`);
      } catch (error) {
        if (!(error instanceof DamagedKeyError)) throw error;
        if (verifiesWith(error.kind)) {
          throw new NothingDeleted(
            `${key} is damaged (${error.why}), and the gateways need it to verify tokens: deleting it could lose a ` +
              'revocation or the token key; write its value back from a backup of etcd (docs/guides/fleet.md, "A damaged key")',
          );
        }
      }
    } else if (decodeFleetUsage(value) !== undefined) {
      throw new NothingDeleted(`${key} is not damaged: it holds usage counts`);
    }
    const deleted = await etcd.call((client) => client.if(key, 'Mod', '==', kv.mod_revision).then(client.delete().key(key)).commit());
    if (!deleted.succeeded) throw new NothingDeleted(`${key} changed meanwhile; run the command again`);
    return `deleted the damaged key ${key}`;
  } finally {
    etcd.close();
  }
}
