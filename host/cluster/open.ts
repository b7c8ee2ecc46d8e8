// The fleet as the token service's backend, opened: what this gateway shows etcd (TLS
// files, the etcd user's password), read once, and the fleet joined: seeded from this
// gateway's password when it is empty, else read whole, with the core brought up from
// it. The data folder is not used: the state lives in etcd only.
import { webcrypto, X509Certificate } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import type { ClusterConfig, EtcdAuthFile, EtcdTlsFiles } from '../options.js';
import { checkPemPair, reason } from '../pem.js';
import type { PasswordVerifier } from '../password/hash.js';
import type { Backend } from '../service/ledger.js';
import type { UsageHistory } from '../service/usage-history.js';
import { FleetError, OptionError, StateError } from '../errors.js';
import type { EtcdAccess } from './etcd.js';
import { Fleet } from './fleet.js';
import { FleetInventory } from './inventory.js';
import { etcdRefusal, joinProblem, probeTls } from './refusals.js';

/**
 * Joins the fleet `cluster` with `access` (readEtcdAccess), its fleet-wide metrics in
 * `metrics`' registry. `filePassword` seeds an empty fleet, and is checked against the
 * fleet's (a warning when they differ). Throws StateError when the fleet cannot be
 * joined (etcd unreachable, or refusing this gateway: the message says why).
 */
export async function joinFleet(
  core: Core,
  cluster: ClusterConfig,
  access: EtcdAccess,
  fence: Uint32Array,
  filePassword: string,
  verifier: PasswordVerifier,
  log: Logger,
  metrics: Metrics,
  clock: Clock,
  history?: UsageHistory,
): Promise<Backend> {
  let fleet: Fleet;
  try {
    fleet = await Fleet.join(
      core,
      {
        endpoints: cluster.endpoints,
        name: cluster.name,
        leaseSeconds: cluster.leaseSeconds,
        outageGraceSeconds: cluster.outageGraceSeconds,
        fence,
        access,
        history,
      },
      async () => ({ key: webcrypto.getRandomValues(new Uint8Array(32)), record: await verifier.hash(filePassword) }),
      (record) => verifier.verify(filePassword, record),
      log,
      clock,
    );
  } catch (error) {
    if (error instanceof FleetError) {
      // gRPC at times loses a TLS refusal and says only that it could not connect: the
      // handshake alone, then, tells why.
      const unnamed = error.cause !== undefined && etcdRefusal(error.cause).kind === 'unreachable';
      let probed: Error | undefined;
      if (unnamed && access.tls !== undefined) {
        log.info("etcd's TLS handshake is tried alone: gRPC did not say why it could not connect", { endpoint: cluster.endpoints[0] });
        probed = await probeTls(cluster.endpoints[0], access.tls);
      }
      const why = joinProblem(error, cluster, probed);
      throw new StateError(
        (name) => `cannot join the fleet ${cluster.name} through ${name('clusterEtcd')} ` + `${cluster.endpoints.join(',')}: ${why(name)}`,
      );
    }
    throw error;
  }
  fleet.registerMetrics(metrics.registry);
  return { ledger: fleet, inventory: new FleetInventory(fleet, core, clock), close: () => fleet.close() };
}

/** Far more than any PEM bundle or password a file should hold; stops a wrong path (a log, a disk image) from being read whole. */
const MAX_FILE_BYTES = 1024 * 1024;

const FILES = {
  clusterEtcdCa: "the PEM file of the CA that signs etcd's certificate",
  clusterEtcdCert: "the PEM file of this gateway's client certificate",
  clusterEtcdKey: "the PEM file of the client certificate's key",
  clusterEtcdPasswordFile: "the file holding the etcd user's password",
} as const;

type FileOption = keyof typeof FILES;

/**
 * What this gateway shows etcd, read from the files the options name, once, at start.
 * Throws OptionError naming the flag and the file when one cannot be read or used.
 */
export async function readEtcdAccess(cluster: ClusterConfig, log: Logger): Promise<EtcdAccess> {
  return {
    tls: cluster.tls && (await readTls(cluster.tls)),
    auth: cluster.auth && { user: cluster.auth.user, password: await readEtcdPassword(cluster.auth, log) },
  };
}

async function readTls(files: EtcdTlsFiles): Promise<EtcdAccess['tls']> {
  let ca: Buffer | undefined;
  if (files.caFile !== undefined) {
    ca = await readFile('clusterEtcdCa', files.caFile);
    const blocks = ca.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
    if (blocks.length === 0) throw fileProblem('clusterEtcdCa', files.caFile, `holds no PEM certificate; give ${FILES.clusterEtcdCa}`);
    for (const block of blocks) parse('clusterEtcdCa', files.caFile, 'certificate', () => new X509Certificate(block));
  }
  if (files.client === undefined) return { ca };
  const { certFile, keyFile } = files.client;
  const cert = await readFile('clusterEtcdCert', certFile);
  const key = await readFile('clusterEtcdKey', keyFile);
  checkPemPair(
    { option: 'clusterEtcdCert', path: certFile, pem: cert, what: 'certificate' },
    { option: 'clusterEtcdKey', path: keyFile, pem: key },
  );
  return { ca, client: { cert, key } };
}

/**
 * The etcd user's password: the file's text without its line ending (an editor's, or
 * echo's). A file others can read gets a warning, as the service password's does.
 */
async function readEtcdPassword(auth: EtcdAuthFile, log: Logger): Promise<string> {
  const bytes = await readFile('clusterEtcdPasswordFile', auth.passwordFile, (mode) => {
    log.warn('the etcd password file is readable by other users', { path: auth.passwordFile, mode: mode.toString(8).padStart(4, '0') });
  });
  try {
    let password: string;
    try {
      password = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw fileProblem('clusterEtcdPasswordFile', auth.passwordFile, 'is not UTF-8 text; save the password as UTF-8');
    }
    password = password.replace(/\r?\n$/, '');
    if (password === '')
      throw fileProblem(
        'clusterEtcdPasswordFile',
        auth.passwordFile,
        `is empty; write the password of the etcd user ${JSON.stringify(auth.user)} in it`,
      );
    return password;
  } finally {
    bytes.fill(0);
  }
}

/** A file's bytes; `exposed` is told the mode of a file others can read. */
async function readFile(option: FileOption, path: string, exposed?: (mode: number) => void): Promise<Buffer> {
  let file: fs.FileHandle;
  try {
    file = await fs.open(path, constants.O_RDONLY);
  } catch (error) {
    throw unreadable(option, path, error);
  }
  try {
    const stat = await file.stat();
    if (stat.isDirectory()) throw fileProblem(option, path, `is a folder; give ${FILES[option]}`);
    if (exposed !== undefined && process.platform !== 'win32' && (stat.mode & 0o044) !== 0) exposed(stat.mode & 0o777);
    // Read up to the bound, whatever the size says: a device or a pipe says 0.
    const buffer = Buffer.alloc(MAX_FILE_BYTES + 1);
    let size = 0;
    for (;;) {
      const { bytesRead } = await file.read(buffer, size, buffer.length - size, null);
      if (bytesRead === 0) break;
      size += bytesRead;
      if (size > MAX_FILE_BYTES) throw fileProblem(option, path, `is larger than ${MAX_FILE_BYTES} bytes; give ${FILES[option]}`);
    }
    return buffer.subarray(0, size);
  } catch (error) {
    throw error instanceof OptionError ? error : unreadable(option, path, error);
  } finally {
    await file.close();
  }
}

function parse<T>(option: FileOption, path: string, what: string, make: () => T): T {
  try {
    return make();
  } catch (error) {
    throw fileProblem(option, path, `is not a PEM ${what} (${reason(error)}); give the ${what}'s PEM file`);
  }
}

function unreadable(option: FileOption, path: string, error: unknown): OptionError {
  const code = (error as NodeJS.ErrnoException).code;
  const why =
    code === 'ENOENT'
      ? `does not exist; give ${FILES[option]}`
      : code === 'EISDIR'
        ? `is a folder; give ${FILES[option]}`
        : code === 'EACCES' || code === 'EPERM'
          ? 'is not readable by this user; let the user running api-auth read it'
          : `cannot be read (${reason(error)})`;
  return fileProblem(option, path, why);
}

function fileProblem(option: FileOption, path: string, what: string): OptionError {
  return new OptionError(option, (name) => `${name(option)} ${path} ${what}`);
}
