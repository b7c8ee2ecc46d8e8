// The state owner of a fleet gateway, opened: what it shows etcd (TLS files, the etcd
// user's password), the password file (generated when missing), the hashing thread, the
// fleet (etcd) the state lives in, and the token service over them. Where openAuth
// (service/open.ts) keeps the state in the data folder, this one keeps it in etcd only:
// the data folder is not used.
import { webcrypto, X509Certificate } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import type { Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import type { ClusterConfig, EtcdAuthFile, EtcdTlsFiles } from '../options.js';
import { checkPemPair, reason } from '../pem.js';
import { loadPasswordFile } from '../password/file.js';
import { Argon2idVerifier } from '../password/hash.js';
import { loggedEndpoint } from '../rpc/jsonrpc.js';
import type { TokenServiceLink } from '../service/link.js';
import type { OpenedAuth } from '../service/open.js';
import type { PasswordThrottle } from '../service/throttle.js';
import { TokenService } from '../service/token-service.js';
import { OptionError, StateError } from '../errors.js';
import type { Text } from '../errors.js';
import { etcdRefusal, Fleet, FleetError } from './fleet.js';
import type { EtcdAccess } from './fleet.js';
import { FleetInventory } from './inventory.js';

export interface FleetAuthSettings {
  readonly passwordFile: string;
  /** Seconds. */
  readonly tokenLifetime: number;
  readonly cluster: ClusterConfig;
  readonly throttle?: PasswordThrottle;
  /** The fence the gates read (cluster/fence.ts). */
  readonly fence: Uint32Array;
  /** Live tokens at most, fleet-wide (--api-auth-max-tokens). */
  readonly maxTokens: number;
}


/**
 * Joins the fleet and opens the token service over it. Throws OptionError for a bad
 * password file or etcd TLS or password file, StateError when the fleet cannot be joined
 * (etcd unreachable, or refusing this gateway: the message says why).
 */
export async function openFleetAuth(core: Core, settings: FleetAuthSettings, log: Logger, metrics: Metrics, clock: Clock): Promise<OpenedAuth> {
  const { cluster } = settings;
  // Before the password file, which may be generated: a bad etcd file changes nothing.
  const access = await readEtcdAccess(cluster, log);
  const password = await loadPasswordFile(settings.passwordFile, () => core.generatePassword(), log);
  const verifier = new Argon2idVerifier();
  let fleet: Fleet;
  try {
    fleet = await Fleet.join(core, { endpoints: cluster.endpoints, name: cluster.name, leaseSeconds: cluster.leaseSeconds,
      tokenLifetime: settings.tokenLifetime, fence: settings.fence, access },
    async () => ({ key: webcrypto.getRandomValues(new Uint8Array(32)), record: await verifier.hash(password) }),
    (record) => verifier.verify(password, record), log, clock);
  } catch (error) {
    await verifier.close();
    if (error instanceof FleetError) {
      const why = joinProblem(error, cluster);
      throw new StateError((name) => `cannot join the fleet ${cluster.name} through ${name('clusterEtcd')} ` +
        `${cluster.endpoints.join(',')}: ${why(name)}`);
    }
    throw error;
  }
  fleet.registerMetrics(metrics.registry);
  const inventory = new FleetInventory(fleet, core, clock);
  const service = new TokenService({ core, store: fleet, inventory, maxTokens: settings.maxTokens, verifier, tokenLifetime: settings.tokenLifetime,
    log, metrics, clock, throttle: settings.throttle });
  const endpoint = loggedEndpoint(service.methods(), log);
  const link: TokenServiceLink = {
    throttled: (address) => service.throttled(address),
    handle: (body, context) => Promise.resolve(endpoint.handle(body, context)),
  };
  return {
    link,
    close: async () => {
      await fleet.close();
      await verifier.close();
    },
  };
}

/** Why joining failed, with what to do: etcd's refusal when it said one (etcdRefusal), else the fleet's own words. */
function joinProblem(error: FleetError, cluster: ClusterConfig): Text {
  if (error.cause === undefined) return () => error.message;
  const refusal = etcdRefusal(error.cause);
  const { auth, tls } = cluster;
  const prefixes = `/${cluster.name}/ and /${cluster.name}.throttle/`;
  switch (refusal.kind) {
    case 'authentication-failed':
      return (name) => `etcd refused the user ${JSON.stringify(auth?.user)} with the password in ${name('clusterEtcdPasswordFile')} ` +
        `${auth?.passwordFile} (authentication failed); check the user name and the password the file holds`;
    case 'authentication-required':
      return (name) => `etcd's authentication is enabled, and no etcd user was given; give ${name('clusterEtcdUser')} and ` +
        `${name('clusterEtcdPasswordFile')}, a user whose role has readwrite on the key prefixes ${prefixes}`;
    case 'authentication-disabled':
      return (name) => `${name('clusterEtcdUser')} is given, and etcd's authentication is not enabled, so it would protect nothing; ` +
        `enable it (etcdctl auth enable), or leave ${name('clusterEtcdUser')} and ${name('clusterEtcdPasswordFile')} out`;
    case 'permission-denied':
      return () => `etcd denied ${auth === undefined ? 'this gateway' : `the user ${JSON.stringify(auth.user)}`} access to the fleet's ` +
        `keys; grant its role readwrite on the key prefixes ${prefixes} (etcdctl role grant-permission ROLE --prefix=true readwrite ` +
        `/${cluster.name}/, and the same for /${cluster.name}.throttle/)`;
    case 'server-untrusted':
      return (name) => `etcd's certificate is not trusted (${refusal.detail}); ` + (tls?.caFile === undefined
        ? `give ${name('clusterEtcdCa')}, the PEM file of the CA that signed it`
        : `check that ${name('clusterEtcdCa')} ${tls.caFile} holds the CA that signed it, and that it names the host of ${name('clusterEtcd')}`);
    case 'client-refused':
      return (name) => `etcd refused the TLS handshake (${refusal.detail}): ` + (tls?.client === undefined
        ? `it asks for a client certificate; give ${name('clusterEtcdCert')} and ${name('clusterEtcdKey')}, signed by a CA of etcd's --trusted-ca-file`
        : `it does not accept the client certificate in ${name('clusterEtcdCert')} ${tls.client.certFile}; give one signed by a CA of ` +
          'etcd\'s --trusted-ca-file');
    case 'unreachable':
      return () => `etcd did not answer (${refusal.detail}); check that etcd runs there and answers` +
        (tls === undefined ? ', without TLS (for TLS, give https:// URLs)' : '');
  }
}

/** Far more than any PEM bundle or password a file should hold; stops a wrong path (a log, a disk image) from being read whole. */
const MAX_FILE_BYTES = 1024 * 1024;

const FILES = {
  clusterEtcdCa: 'the PEM file of the CA that signs etcd\'s certificate',
  clusterEtcdCert: 'the PEM file of this gateway\'s client certificate',
  clusterEtcdKey: 'the PEM file of the client certificate\'s key',
  clusterEtcdPasswordFile: 'the file holding the etcd user\'s password',
} as const;

type FileOption = keyof typeof FILES;

/**
 * What this gateway shows etcd, read from the files the options name, once, at start.
 * Throws OptionError naming the flag and the file when one cannot be read or used.
 */
async function readEtcdAccess(cluster: ClusterConfig, log: Logger): Promise<EtcdAccess> {
  return {
    tls: cluster.tls && await readTls(cluster.tls),
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
  checkPemPair({ option: 'clusterEtcdCert', path: certFile, pem: cert, what: 'certificate' }, { option: 'clusterEtcdKey', path: keyFile, pem: key });
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
    if (password === '') throw fileProblem('clusterEtcdPasswordFile', auth.passwordFile, `is empty; write the password of the etcd user ${JSON.stringify(auth.user)} in it`);
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
  const why = code === 'ENOENT' ? `does not exist; give ${FILES[option]}` : code === 'EISDIR' ? `is a folder; give ${FILES[option]}`
    : code === 'EACCES' || code === 'EPERM' ? 'is not readable by this user; let the user running api-auth read it'
      : `cannot be read (${reason(error)})`;
  return fileProblem(option, path, why);
}

function fileProblem(option: FileOption, path: string, what: string): OptionError {
  return new OptionError(option, (name) => `${name(option)} ${path} ${what}`);
}

