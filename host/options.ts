// One resolver of options for the library and the command line: the defaults, the
// limits and the checks, each in one place and done once, at start, so that nothing on
// the request path parses options. Messages name options as the library does
// (`passwordFile`); the command line shows its flags in their place (cli/flags.ts).
import { availableParallelism, homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { systemClock } from './clock.js';
import type { Clock } from './clock.js';
import { PATH_RULES } from './core/core.js';
import type { Core } from './core/core.js';
import { badOption, OptionError } from './errors.js';
import { NO_TRUSTED_PROXIES, trustedProxies } from './http/client-address.js';
import type { TrustedProxies } from './http/client-address.js';
import { allowedOrigins } from './http/cors.js';
import type { AllowedOrigins } from './http/cors.js';
import { LEVELS } from './ops/log.js';
import type { Level, Logger } from './ops/log.js';
import type { TlsFiles } from './pem.js';

/** Where the token service answers; never a path for anything else. */
export const AUTH_PATH = '/ext/auth';
/** api-auth's own readiness, for load balancers; no token. */
export const HEALTH_PATH = '/ext/auth/health';
/** The gate's verdict for a request a proxy in front names (nginx auth_request, Caddy forward_auth); no token. */
export const CHECK_PATH = '/ext/auth/check';

/** What an option left out is. */
export const DEFAULTS = {
  host: '127.0.0.1',
  port: 9650,
  authRequired: false,
  /** Seconds: 12 h. */
  tokenLifetime: 12 * 3600,
  dataDir: join(homedir(), '.api-auth'),
  /** Seconds. */
  upstreamTimeout: 30,
  /** Bytes: 1 MiB. */
  upstreamMaxBody: 1024 * 1024,
  metricsPath: '/ext/metrics',
  logLevel: 'info',
  /** Every core the process may use, up to the limit. */
  httpThreads: Math.min(availableParallelism(), 256),
  /** The node's own default: every origin. */
  allowedOrigins: '*',
  queryToken: false,
  /** Bytes: 16 MiB, so that large eth_getLogs answers fit. */
  wsMaxMessage: 16 * 1024 * 1024,
  /** Seconds. */
  wsIdleTimeout: 120,
  /** WebSocket sessions open at once, in the whole process. */
  wsMaxSessions: 10_000,
  /**
   * Live tokens in the inventory: at the limit, about 1.7 MB of memory (some 165 bytes an
   * entry) and a listTokens reply of about 1.8 MB (some 175 bytes an entry with a short
   * label and one endpoint); README, "Token inventory".
   */
  maxTokens: 10_000,
  clusterName: 'api-auth',
  /** Seconds: the fleet lease's TTL (README, Running a fleet). */
  clusterLease: 10,
} as const;

/** The bounds of options, and the fixed limits beside them. */
export const LIMITS = {
  /** Seconds: 1 s to 8760 h (a year). */
  tokenLifetime: { min: 1, max: 8760 * 3600 },
  /** Seconds: 1 s to 1 h. */
  upstreamTimeout: { min: 1, max: 3600 },
  /** Bytes: 1 to 1024 MiB. */
  upstreamMaxBody: { min: 1, max: 1024 * 1024 * 1024 },
  /** Bytes of a JSON-RPC body that /ext/auth and the built-in endpoints read (64 KiB). */
  rpcBody: 65536,
  /** Threads serving HTTP. */
  httpThreads: { min: 1, max: 256 },
  /** Bytes: 1 to 1024 MiB. */
  wsMaxMessage: { min: 1, max: 1024 * 1024 * 1024 },
  /** Seconds: uWebSockets.js takes 8 s to 960 s, counted in steps of 4 s. */
  wsIdleTimeout: { min: 8, max: 960 },
  wsMaxSessions: { min: 1, max: 1_000_000 },
  maxTokens: { min: 1, max: 1_000_000 },
  /** Seconds: the fleet lease's TTL; a revoke waits at most about this long for a stopped gateway. */
  clusterLease: { min: 2, max: 300 },
} as const;

/** createAuth's options: the token service embedded in a node. */
export interface AuthOptions {
  /** The service password's file; a strong password is generated into it when it is missing (its folder must exist). */
  readonly passwordFile: string;
  /** Where durable state lives (tokens' key, revocations, password changes); created 0700 when missing, locked while open. */
  readonly dataDir: string;
  /** Lifetime of new tokens: seconds, or a duration such as "90s", "15m", "12h". Default 12h. */
  readonly tokenLifetime?: number | string;
  /** Live tokens at most (revoked ones count until they expire), 1 to 1000000; auth.newToken past it is a resource-limit error. Default 10000. */
  readonly maxTokens?: number | string;
  /** Exact paths that need no token, such as /ext/health. */
  readonly publicEndpoints?: readonly string[];
  /**
   * Addresses and CIDR ranges (such as "10.0.0.0/8") of the proxies in front of the node,
   * whose X-Forwarded-For names the client that /ext/auth throttles and logs. Default
   * none: the client is the connection's far end.
   */
  readonly trustedProxies?: readonly string[];
  /** Where log lines go (audit lines included); default JSON lines on stdout, info and above. */
  readonly log?: Logger;
  /**
   * The time, in ms since the Unix epoch: what tokens expire by, the throttle counts
   * by, and the state forgets expired revocations by. Default the system's clock.
   */
  readonly clock?: Clock;
}

/** startServer's options: the standalone service, as the command line runs it. Every one may be left out. */
export interface ServerOptions {
  /** Address to listen on. Default 127.0.0.1. */
  readonly host?: string;
  /** Port to listen on, 0 for a free one. Default 9650. */
  readonly port?: number | string;
  /** Tokens are required on every endpoint but /ext/auth, which exists only then. Default false. */
  readonly authRequired?: boolean;
  /** The service password's file; required with authRequired, generated when missing. */
  readonly passwordFile?: string;
  /** Lifetime of new tokens: seconds, or a duration such as "90s", "15m", "12h". Default 12h. */
  readonly tokenLifetime?: number | string;
  /** Live tokens at most (revoked ones count until they expire), 1 to 1000000; auth.newToken past it is a resource-limit error. Default 10000. */
  readonly maxTokens?: number | string;
  /** Where durable state lives. Default ~/.api-auth. */
  readonly dataDir?: string;
  /** Exact paths that need no token, such as /ext/health. */
  readonly publicEndpoints?: readonly string[];
  /** The node to protect, such as http://127.0.0.1:9652; without it the built-in node endpoints are served. */
  readonly upstream?: string | URL;
  /** How long the upstream may take to start answering, and between parts of its answer: seconds, or a duration. Default 30s. */
  readonly upstreamTimeout?: number | string;
  /** The largest request body proxied: bytes, or a size such as "1MiB" or "512KiB". Default 1MiB. */
  readonly upstreamMaxBody?: number | string;
  /** Addresses and CIDR ranges of the proxies in front, whose X-Forwarded-For names the client. Default none. */
  readonly trustedProxies?: readonly string[];
  /** Where the Prometheus metrics are served, protected like any endpoint. Default /ext/metrics. */
  readonly metricsPath?: string;
  /** The least level logged: debug, info, warn or error. Default info. */
  readonly logLevel?: Level;
  /**
   * Threads serving HTTP, 1 to 256; the main thread then accepts the connections and owns
   * the state. Default every core the process may use (os.availableParallelism()).
   */
  readonly httpThreads?: number | string;
  /** Serve HTTPS with tlsCertFile and tlsKeyFile (PEM); SIGHUP reloads them. Default false. */
  readonly tlsEnabled?: boolean;
  /** The certificate chain's PEM file; required with tlsEnabled. */
  readonly tlsCertFile?: string;
  /** The private key's PEM file; required with tlsEnabled. */
  readonly tlsKeyFile?: string;
  /**
   * Origins whose browser pages may call the node (CORS): exact origins such as
   * "https://wallet.example", their subdomains as "https://*.wallet.example", or "*"
   * for every one; as a list, or one string separated by spaces or commas. Default "*".
   */
  readonly allowedOrigins?: string | readonly string[];
  /**
   * Also accept the token as the access_token query parameter of a WebSocket upgrade
   * without an Authorization header (RFC 6750 §2.3), for browsers, which cannot set
   * headers on a WebSocket. The parameter is removed before the upstream sees the URL.
   * Default false: the parameter means nothing to the gate and is forwarded as any other.
   */
  readonly queryToken?: boolean;
  /** The largest WebSocket message relayed either way: bytes, or a size such as "16MiB". Default 16MiB. */
  readonly wsMaxMessage?: number | string;
  /** How long a side of a WebSocket session may send nothing, not even a pong to a ping: seconds (8 to 960), or a duration. Default 120s. */
  readonly wsIdleTimeout?: number | string;
  /** WebSocket sessions open at once in the process, past which an upgrade gets 503. Default 10000. */
  readonly wsMaxSessions?: number | string;
  /** etcd client URLs (a list, or one string separated by commas): join a fleet of gateways that share one state. */
  readonly clusterEtcd?: string | readonly string[];
  /** The fleet's name, which keeps fleets apart on one etcd (its key prefix). Default api-auth. */
  readonly clusterName?: string;
  /** The fleet lease's TTL: seconds (2 to 300), or a duration. Default 10s. */
  readonly clusterLease?: number | string;
  /** PEM file of the CAs that may sign etcd's certificate (https:// endpoints). Default the system's CAs, as Node's. */
  readonly clusterEtcdCa?: string;
  /** PEM file of this gateway's client certificate for etcd (mutual TLS); needs clusterEtcdKey and https:// endpoints. */
  readonly clusterEtcdCert?: string;
  /** PEM file of clusterEtcdCert's private key, unencrypted. */
  readonly clusterEtcdKey?: string;
  /** etcd user (etcd's authentication, RBAC) the gateway connects as; needs clusterEtcdPasswordFile. */
  readonly clusterEtcdUser?: string;
  /** The file holding clusterEtcdUser's password (trailing newline trimmed): never the password itself, which would be in argv. */
  readonly clusterEtcdPasswordFile?: string;
}

/** The token service's settings, validated. */
export interface AuthConfig {
  /** Absolute path. */
  readonly passwordFile: string;
  /** Absolute path. */
  readonly dataDir: string;
  /** Seconds. */
  readonly tokenLifetime: number;
  readonly maxTokens: number;
  /** Exact paths, without duplicates; still to be checked against the core's path rules (servedPaths). */
  readonly publicEndpoints: readonly string[];
  readonly trustedProxies: TrustedProxies;
  readonly clock: Clock;
}

/** The standalone service's settings, validated. */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  readonly authRequired: boolean;
  /** Absolute path; set whenever authRequired is. */
  readonly passwordFile: string | undefined;
  /** Seconds. */
  readonly tokenLifetime: number;
  readonly maxTokens: number;
  /** Absolute path. */
  readonly dataDir: string;
  /** Exact paths, without duplicates; still to be checked against the core's path rules (servedPaths). */
  readonly publicEndpoints: readonly string[];
  /** The upstream's origin; undefined serves the built-in node endpoints. */
  readonly upstream: URL | undefined;
  /** Milliseconds. */
  readonly upstreamTimeoutMs: number;
  /** Bytes. */
  readonly upstreamMaxBody: number;
  readonly trustedProxies: TrustedProxies;
  readonly metricsPath: string;
  readonly logLevel: Level;
  readonly httpThreads: number;
  /** Absolute paths of the PEM files, checked once at start; undefined serves plain HTTP. */
  readonly tls: TlsFiles | undefined;
  readonly allowedOrigins: AllowedOrigins;
  readonly queryToken: boolean;
  /** Bytes. */
  readonly wsMaxMessage: number;
  /** Seconds. */
  readonly wsIdleTimeout: number;
  readonly wsMaxSessions: number;
  /** The fleet to join; undefined keeps the state in the data folder. */
  readonly cluster: ClusterConfig | undefined;
}

export interface ClusterConfig {
  /** etcd client URLs, all http:// or all https://. */
  readonly endpoints: readonly string[];
  readonly name: string;
  /** Seconds. */
  readonly leaseSeconds: number;
  /** Absolute paths of the PEM files for TLS to etcd; set whenever the endpoints are https://, and only then. */
  readonly tls: EtcdTlsFiles | undefined;
  /** etcd's own authentication: the user and the absolute path of its password's file; undefined connects as nobody. */
  readonly auth: EtcdAuthFile | undefined;
}

export interface EtcdTlsFiles {
  /** The CAs that may sign etcd's certificate; undefined trusts the system's. */
  readonly caFile: string | undefined;
  /** The client certificate and its key (mutual TLS); both or neither. */
  readonly client: TlsFiles | undefined;
}

export interface EtcdAuthFile {
  readonly user: string;
  readonly passwordFile: string;
}

export type { TlsFiles } from './pem.js';

/** Options that only the proxy uses: refused without `upstream`. */
const PROXY_OPTIONS = ['upstreamTimeout', 'upstreamMaxBody', 'wsMaxMessage', 'wsIdleTimeout', 'wsMaxSessions', 'queryToken'] as const;

const AUTH_OPTIONS = ['passwordFile', 'dataDir', 'tokenLifetime', 'maxTokens', 'publicEndpoints', 'trustedProxies', 'log', 'clock'];
const SERVER_OPTIONS = ['host', 'port', 'authRequired', 'passwordFile', 'tokenLifetime', 'maxTokens', 'dataDir', 'publicEndpoints', 'upstream',
  'upstreamTimeout', 'upstreamMaxBody', 'trustedProxies', 'metricsPath', 'logLevel', 'httpThreads', 'tlsEnabled', 'tlsCertFile', 'tlsKeyFile',
  'allowedOrigins', 'queryToken', 'wsMaxMessage', 'wsIdleTimeout', 'wsMaxSessions', 'clusterEtcd', 'clusterName', 'clusterLease',
  'clusterEtcdCa', 'clusterEtcdCert', 'clusterEtcdKey', 'clusterEtcdUser', 'clusterEtcdPasswordFile'];

/** How this gateway joins a fleet, beyond clusterEtcd: refused without it. */
const FLEET_OPTIONS = ['clusterName', 'clusterLease', 'clusterEtcdCa', 'clusterEtcdCert', 'clusterEtcdKey', 'clusterEtcdUser',
  'clusterEtcdPasswordFile'] as const;
/** TLS to etcd: refused with http:// endpoints, where it would protect nothing. */
const ETCD_TLS_OPTIONS = ['clusterEtcdCa', 'clusterEtcdCert', 'clusterEtcdKey'] as const;

/** createAuth's options, validated. Throws OptionError naming the first option at fault. */
export function resolveAuthOptions(options: AuthOptions): AuthConfig {
  known(options, AUTH_OPTIONS);
  return {
    passwordFile: required('passwordFile', options.passwordFile, passwordFile, 'the path of the service password\'s file ' +
      '(a password is generated into it when it is missing)'),
    dataDir: required('dataDir', options.dataDir, dataDir, 'the folder where durable state lives (created when missing)'),
    tokenLifetime: tokenLifetime(options.tokenLifetime),
    maxTokens: count('maxTokens', options.maxTokens ?? DEFAULTS.maxTokens, 'live tokens in the inventory'),
    publicEndpoints: paths('publicEndpoints', options.publicEndpoints),
    trustedProxies: proxies(options.trustedProxies),
    clock: resolveClock(options.clock),
  };
}

/** A clock option: a function giving the time in ms since the epoch; the system's when left out. */
export function resolveClock(value: unknown): Clock {
  if (value === undefined) return systemClock;
  if (typeof value !== 'function') {
    throw badOption('clock', ` must be a function that returns the time in ms since the Unix epoch, not ${show(value)}`);
  }
  return value as Clock;
}

/** startServer's options, validated. Throws OptionError naming the first option at fault. */
export function resolveServerOptions(options: ServerOptions): ServerConfig {
  known(options, SERVER_OPTIONS);
  const authRequired = flag('authRequired', options.authRequired ?? DEFAULTS.authRequired);
  const file = options.passwordFile === undefined ? undefined : passwordFile(options.passwordFile);
  if (authRequired && file === undefined) {
    throw new OptionError('passwordFile', (name) => `${name('authRequired')} needs ${name('passwordFile')}, the file holding the ` +
      'service password (it is generated when missing)');
  }
  const metricsPath = path('metricsPath', options.metricsPath ?? DEFAULTS.metricsPath, DEFAULTS.metricsPath);
  if (metricsPath === AUTH_PATH || metricsPath === HEALTH_PATH || metricsPath === CHECK_PATH) {
    throw badOption('metricsPath', ` must not be ${metricsPath}`);
  }
  const config: ServerConfig = {
    host: host(options.host ?? DEFAULTS.host),
    port: port(options.port ?? DEFAULTS.port),
    authRequired,
    passwordFile: file,
    tokenLifetime: tokenLifetime(options.tokenLifetime),
    maxTokens: count('maxTokens', options.maxTokens ?? DEFAULTS.maxTokens, 'live tokens in the inventory'),
    dataDir: dataDir(options.dataDir ?? DEFAULTS.dataDir),
    publicEndpoints: paths('publicEndpoints', options.publicEndpoints),
    upstream: options.upstream === undefined ? undefined : upstream(options.upstream),
    upstreamTimeoutMs: upstreamTimeout(options.upstreamTimeout ?? DEFAULTS.upstreamTimeout) * 1000,
    upstreamMaxBody: size('upstreamMaxBody', options.upstreamMaxBody ?? DEFAULTS.upstreamMaxBody, LIMITS.upstreamMaxBody),
    trustedProxies: proxies(options.trustedProxies),
    metricsPath,
    logLevel: level(options.logLevel ?? DEFAULTS.logLevel),
    httpThreads: count('httpThreads', options.httpThreads ?? DEFAULTS.httpThreads, 'threads serving HTTP'),
    tls: tls(options),
    allowedOrigins: origins(options.allowedOrigins ?? DEFAULTS.allowedOrigins),
    queryToken: flag('queryToken', options.queryToken ?? DEFAULTS.queryToken),
    wsMaxMessage: size('wsMaxMessage', options.wsMaxMessage ?? DEFAULTS.wsMaxMessage, LIMITS.wsMaxMessage),
    wsIdleTimeout: idleTimeout(options.wsIdleTimeout ?? DEFAULTS.wsIdleTimeout),
    wsMaxSessions: count('wsMaxSessions', options.wsMaxSessions ?? DEFAULTS.wsMaxSessions, 'WebSocket sessions open at once'),
    cluster: cluster(options, authRequired),
  };
  // The proxy's settings mean nothing without a proxy: a flag that would change nothing is
  // a mistake to point out (a forgotten --upstream, most likely), not to ignore.
  if (config.upstream === undefined) {
    for (const option of PROXY_OPTIONS) {
      if (options[option] !== undefined) {
        throw new OptionError(option, (name) => `${name(option)} sets how requests are proxied to the node, and there is no ` +
          `${name('upstream')}: give ${name('upstream')} (such as http://127.0.0.1:9652), or leave ${name(option)} out`);
      }
    }
  }
  return config;
}

/** The fleet's options: all of them need clusterEtcd, which needs authRequired (a fleet shares token state). */
function cluster(options: ServerOptions, authRequired: boolean): ClusterConfig | undefined {
  if (options.clusterEtcd === undefined) {
    for (const option of FLEET_OPTIONS) {
      if (options[option] !== undefined) {
        throw new OptionError(option, (name) => `${name(option)} sets how this gateway joins a fleet, and there is no ` +
          `${name('clusterEtcd')}: give ${name('clusterEtcd')} (such as http://127.0.0.1:2379), or leave ${name(option)} out`);
      }
    }
    return undefined;
  }
  if (!authRequired) {
    throw new OptionError('clusterEtcd', (name) => `${name('clusterEtcd')} shares the token state of a fleet, and without ` +
      `${name('authRequired')} there is none: add ${name('authRequired')}, or leave ${name('clusterEtcd')} out`);
  }
  const raw = options.clusterEtcd;
  const list = typeof raw === 'string' ? raw.split(',') : Array.isArray(raw) ? raw : null;
  if (list === null || list.length === 0) throw badOption('clusterEtcd', ` must be etcd client URLs such as http://127.0.0.1:2379, not ${show(raw)}`);
  const urls = list.map((entry) => {
    const text = typeof entry === 'string' ? entry.trim() : '';
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.port === '' || url.pathname !== '/' ||
      url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
      throw badOption('clusterEtcd', ` must be etcd client URLs, http:// or https:// with host and port, such as http://127.0.0.1:2379, ` +
        `separated by commas; ${show(entry)} is not one`);
    }
    return url;
  });
  const secure = urls[0].protocol === 'https:';
  if (urls.some((url) => (url.protocol === 'https:') !== secure)) {
    throw badOption('clusterEtcd', ` mixes http:// and https:// URLs (${show(raw)}); an etcd cluster serves its clients one way: ` +
      'give them all with https:// (TLS) or all with http://');
  }
  const name = options.clusterName ?? DEFAULTS.clusterName;
  if (typeof name !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(name)) {
    throw badOption('clusterName', ` must be 1 to 64 letters, digits, ".", "_" or "-", not ${show(name)}`);
  }
  const { min, max } = LIMITS.clusterLease;
  const what = `a duration in whole seconds from ${min}s to ${max}s, such as 10s`;
  const leaseSeconds = wholeSeconds('clusterLease', options.clusterLease ?? DEFAULTS.clusterLease, what);
  if (leaseSeconds < min || leaseSeconds > max) throw badOption('clusterLease', ` must be ${what}, not ${show(options.clusterLease)}`);
  return { endpoints: urls.map((url) => url.origin), name, leaseSeconds, tls: etcdTls(options, secure), auth: etcdAuth(options) };
}

/**
 * TLS to etcd, with https:// endpoints only: a CA or a client certificate given with
 * http:// ones would leave the operator believing the connection protected. The files
 * themselves are read, and checked, when the fleet is joined (cluster/open.ts).
 */
function etcdTls(options: ServerOptions, secure: boolean): EtcdTlsFiles | undefined {
  if (!secure) {
    for (const option of ETCD_TLS_OPTIONS) {
      if (options[option] !== undefined) {
        throw new OptionError(option, (name) => `${name(option)} sets TLS to etcd, and ${name('clusterEtcd')} names http:// URLs, ` +
          `which do not use TLS: the connection would not be protected. Give https:// URLs, or leave ${name(option)} out`);
      }
    }
    return undefined;
  }
  pair('clusterEtcdCert', 'clusterEtcdKey', options, 'its private key\'s PEM file (mutual TLS needs both)');
  pair('clusterEtcdKey', 'clusterEtcdCert', options, 'the client certificate\'s PEM file (mutual TLS needs both)');
  const file = (option: 'clusterEtcdCa' | 'clusterEtcdCert' | 'clusterEtcdKey', what: string): string | undefined =>
    options[option] === undefined ? undefined : resolve(nonEmpty(option, options[option], `the path of ${what}`));
  const certFile = file('clusterEtcdCert', 'the client certificate\'s PEM file');
  const keyFile = file('clusterEtcdKey', 'the client key\'s PEM file');
  return {
    caFile: file('clusterEtcdCa', 'the PEM file of the CAs that sign etcd\'s certificate'),
    client: certFile !== undefined && keyFile !== undefined ? { certFile, keyFile } : undefined,
  };
}

/** etcd's authentication: a user and its password's file, both or neither. */
function etcdAuth(options: ServerOptions): EtcdAuthFile | undefined {
  pair('clusterEtcdUser', 'clusterEtcdPasswordFile', options, 'the file holding its password (a password is never taken on the command line)');
  pair('clusterEtcdPasswordFile', 'clusterEtcdUser', options, 'the etcd user whose password the file holds');
  if (options.clusterEtcdUser === undefined) return undefined;
  return {
    user: nonEmpty('clusterEtcdUser', options.clusterEtcdUser, 'the name of an etcd user'),
    passwordFile: resolve(nonEmpty('clusterEtcdPasswordFile', options.clusterEtcdPasswordFile, 'the path of the etcd user\'s password file')),
  };
}

/** Refuses `option` without `needed`, which `what` describes. */
function pair(option: keyof ServerOptions, needed: keyof ServerOptions, options: ServerOptions, what: string): void {
  if (options[option] !== undefined && options[needed] === undefined) {
    throw new OptionError(needed, (name) => `${name(option)} needs ${name(needed)}, ${what}`);
  }
}

/**
 * Throws OptionError unless the core's path rules allow every path of `option`: a path
 * the gate refuses could never be served, so naming it is a mistake.
 */
export function servedPaths(core: Core, option: string, paths: readonly string[]): void {
  for (const path of paths) {
    if (!core.pathAllowed(path)) {
      throw badOption(option, `: ${JSON.stringify(path)} is not a path the gate serves (refused: ${PATH_RULES})`);
    }
  }
}

function known(options: object, names: readonly string[]): void {
  if (typeof options !== 'object' || options === null) throw badOption('options', ` must be an object, not ${show(options)}`);
  for (const name of Object.keys(options)) {
    if (!names.includes(name)) throw badOption(name, ` is not an option; the options are ${names.join(', ')}`);
  }
}

function required<T>(option: string, value: unknown, check: (value: unknown) => T, what: string): T {
  if (value === undefined) throw badOption(option, ` is required: ${what}`);
  return check(value);
}

function flag(option: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw badOption(option, ` must be true or false, not ${show(value)}`);
  return value;
}

function host(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw badOption('host', value === '' ? ' must not be empty; give an address such as 127.0.0.1 or 0.0.0.0'
      : ` must be an address such as 127.0.0.1 or 0.0.0.0, not ${show(value)}`);
  }
  return value;
}

function port(value: unknown): number {
  const port = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (!(Number.isInteger(port) && port >= 0 && port <= 65535)) {
    throw badOption('port', ` must be a whole number from 0 to 65535 (0 picks a free port), not ${show(value)}`);
  }
  return port;
}

function passwordFile(value: unknown): string {
  return resolve(nonEmpty('passwordFile', value, 'the path of the password file'));
}

function dataDir(value: unknown): string {
  return resolve(nonEmpty('dataDir', value, 'a folder path'));
}

function nonEmpty(option: string, value: unknown, what: string): string {
  if (typeof value !== 'string') throw badOption(option, ` must be ${what}, not ${show(value)}`);
  if (value.trim() === '') throw badOption(option, ` must not be empty; give ${what}`);
  return value;
}

function tokenLifetime(value: unknown): number {
  if (value === undefined) return DEFAULTS.tokenLifetime;
  const { min, max } = LIMITS.tokenLifetime;
  const seconds = wholeSeconds('tokenLifetime', value, 'a duration in whole seconds such as 90s, 15m, 12h or 1h30m');
  if (seconds < min || seconds > max) throw badOption('tokenLifetime', ` must be from 1s to 8760h (one year), not ${show(value)}`);
  return seconds;
}

function idleTimeout(value: unknown): number {
  const { min, max } = LIMITS.wsIdleTimeout;
  const what = `a duration in whole seconds from ${min}s to ${max}s, such as 120s or 5m`;
  const seconds = wholeSeconds('wsIdleTimeout', value, what);
  if (seconds < min || seconds > max) throw badOption('wsIdleTimeout', ` must be ${what}, not ${show(value)}`);
  return seconds;
}

function upstreamTimeout(value: unknown): number {
  const { min, max } = LIMITS.upstreamTimeout;
  const what = 'a duration in whole seconds from 1s to 1h, such as 30s or 2m';
  const seconds = wholeSeconds('upstreamTimeout', value, what);
  if (seconds < min || seconds > max) throw badOption('upstreamTimeout', ` must be ${what}, not ${show(value)}`);
  return seconds;
}

/** Whole seconds from a number of them, or from a duration's text. */
function wholeSeconds(option: string, value: unknown, what: string): number {
  const seconds = typeof value === 'number' ? value : typeof value === 'string' ? parseDuration(value) : null;
  if (seconds === null || !Number.isInteger(seconds)) {
    throw badOption(option, typeof value === 'number' ? ` must be a whole number of seconds, not ${show(value)}` : ` must be ${what}, not ${show(value)}`);
  }
  return seconds;
}

const SIZE_UNITS: Record<string, number> = { '': 1, KiB: 1024, MiB: 1024 * 1024 };

function size(option: string, value: unknown, { min, max }: { min: number; max: number }): number {
  const m = typeof value === 'string' ? /^(\d{1,10})(KiB|MiB)?$/.exec(value) : null;
  const bytes = typeof value === 'number' ? value : m === null ? NaN : Number(m[1]) * SIZE_UNITS[m[2] ?? ''];
  if (!(Number.isInteger(bytes) && bytes >= min && bytes <= max)) {
    throw badOption(option, ` must be a size from ${min} byte to ${max / (1024 * 1024)}MiB: a number of bytes, or a number followed by ` +
      `KiB or MiB (such as 1MiB), not ${show(value)}`);
  }
  return bytes;
}

/**
 * The node to proxy to: an http or https origin. A path would be ambiguous (the request's
 * path is sent as it came), so none is taken.
 */
function upstream(value: unknown): URL {
  const notUrl = () => badOption('upstream', ` must be a URL such as http://127.0.0.1:9652, not ${show(value)}`);
  if (typeof value !== 'string' && !(value instanceof URL)) throw notUrl();
  let url: URL;
  try {
    url = new URL(String(value));
  } catch {
    throw notUrl();
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw badOption('upstream', ` must be an http:// or https:// URL, not ${show(value)}`);
  if (url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    throw badOption('upstream', ' must be just scheme, host and port, such as http://127.0.0.1:9652 (requests keep their own path), ' +
      `not ${show(value)}`);
  }
  // A node listens on a port of its own (9650 by default), never on the scheme's. A URL
  // without one would go to port 80 or 443: most likely a forgotten port. The URL parser
  // drops a port equal to the scheme's default, so the text says whether one was written.
  if (!/^[a-z][a-z0-9+.-]*:\/\/(\[[^\]]*\]|[^/?#:]*):\d+(?:[/?#]|$)/i.test(String(value))) {
    throw badOption('upstream', ` must name the node's port, such as http://127.0.0.1:9652 (write :${url.protocol === 'https:' ? 443 : 80} ` +
      `if that port is really meant), not ${show(value)}`);
  }
  return url;
}

/**
 * A list of exact request paths, without duplicates. The path rules themselves (dot
 * segments, encodings) are the core's: servedPaths. The token service's own path needs no
 * token already, so naming it as public would change nothing: a mistake, refused.
 */
function paths(option: string, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw badOption(option, ` must be an array of exact paths such as ["/ext/health"], not ${show(value)}`);
  const list = [...new Set(value.map((entry: unknown) => path(option, entry, '/ext/health')))];
  const own = list.find((path) => path === AUTH_PATH || path === HEALTH_PATH || path === CHECK_PATH);
  if (own !== undefined) {
    throw badOption(option, `: ${own} needs no token already (${own === AUTH_PATH ? 'it is where tokens are had, behind the password'
      : 'it is api-auth\'s own'}); leave it out`);
  }
  return list;
}

/** An exact absolute path; `example` is one that fits the option. */
function path(option: string, value: unknown, example: string): string {
  if (typeof value !== 'string' || !value.startsWith('/') || value.includes('*') || value.includes('?')) {
    throw badOption(option, ` takes exact absolute paths such as ${example} (no "*", no query), not ${show(value)}`);
  }
  return value;
}

function proxies(value: unknown): TrustedProxies {
  if (value === undefined) return NO_TRUSTED_PROXIES;
  if (!Array.isArray(value)) throw badOption('trustedProxies', ' must be an array of addresses and CIDR ranges, such as ["10.0.0.0/8"]');
  try {
    return trustedProxies(value);
  } catch (error) {
    throw badOption('trustedProxies', `: ${(error as Error).message}`);
  }
}

/** A whole number within the option's LIMITS; `what` says what it counts. */
function count(option: 'httpThreads' | 'wsMaxSessions' | 'maxTokens', value: unknown, what: string): number {
  const { min, max } = LIMITS[option];
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : NaN;
  if (!(Number.isInteger(n) && n >= min && n <= max)) {
    throw badOption(option, ` must be a whole number from ${min} to ${max} (${what}), not ${show(value)}`);
  }
  return n;
}

/** The TLS files, when TLS is on: both named. Their content is checked at start (pem.ts, checkTlsFiles), as etcd's files are. */
function tls(options: ServerOptions): TlsFiles | undefined {
  const enabled = options.tlsEnabled ?? false;
  if (typeof enabled !== 'boolean') throw badOption('tlsEnabled', ` must be true or false, not ${show(enabled)}`);
  if (!enabled) {
    for (const option of ['tlsCertFile', 'tlsKeyFile'] as const) {
      if (options[option] !== undefined) {
        throw new OptionError(option, (name) => `${name(option)} is used only with ${name('tlsEnabled')}; add it, or leave ${name(option)} out`);
      }
    }
    return undefined;
  }
  for (const option of ['tlsCertFile', 'tlsKeyFile'] as const) {
    if (options[option] === undefined) {
      throw new OptionError(option, (name) => `${name('tlsEnabled')} needs ${name(option)}, the ${option === 'tlsCertFile' ? 'certificate chain' : 'private key'}'s PEM file`);
    }
  }
  const files = {
    certFile: resolve(nonEmpty('tlsCertFile', options.tlsCertFile, 'the path of the certificate chain\'s PEM file')),
    keyFile: resolve(nonEmpty('tlsKeyFile', options.tlsKeyFile, 'the path of the private key\'s PEM file')),
  };
  return files;
}

function origins(value: unknown): AllowedOrigins {
  const list = typeof value === 'string' ? value.split(/[\s,]+/).filter((entry) => entry !== '') : value;
  if (!Array.isArray(list) || !list.every((entry) => typeof entry === 'string')) {
    throw badOption('allowedOrigins', ` must be origins such as "https://wallet.example https://*.example", or "*", not ${show(value)}`);
  }
  try {
    return allowedOrigins(list);
  } catch (error) {
    throw badOption('allowedOrigins', `: ${(error as Error).message}`);
  }
}

function level(value: unknown): Level {
  if (!(LEVELS as readonly unknown[]).includes(value)) throw badOption('logLevel', ` must be one of ${LEVELS.join(', ')}, not ${show(value)}`);
  return value as Level;
}

function show(value: unknown): string {
  if (value instanceof URL) return JSON.stringify(value.href);
  return JSON.stringify(value) ?? String(value);
}

/**
 * A Go-style duration (`90s`, `15m`, `12h`, `1h30m`, `1.5h`; units ns, us, µs, ms, s, m, h)
 * in whole seconds. Null when the text is not a duration or not a whole number of seconds.
 */
export function parseDuration(text: string): number | null {
  if (text === '') return null;
  const part = /(\d+)(?:\.(\d*))?(ns|us|µs|μs|ms|h|m|s)/y;
  let nanos = 0n;
  let at = 0;
  while (at < text.length) {
    part.lastIndex = at;
    const m = part.exec(text);
    if (m === null) return null;
    const unit = UNIT_NANOS[m[3]];
    const fraction = m[2] ?? '';
    nanos += BigInt(m[1]) * unit;
    if (fraction !== '') nanos += (BigInt(fraction) * unit) / 10n ** BigInt(fraction.length);
    at = part.lastIndex;
  }
  return nanos % NANOS_PER_SECOND === 0n ? Number(nanos / NANOS_PER_SECOND) : null;
}

const NANOS_PER_SECOND = 1_000_000_000n;

const UNIT_NANOS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  'µs': 1_000n,
  'μs': 1_000n,
  ms: 1_000_000n,
  s: NANOS_PER_SECOND,
  m: 60n * NANOS_PER_SECOND,
  h: 3600n * NANOS_PER_SECOND,
};
