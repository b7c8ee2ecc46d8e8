// One schema of options for the library and the command line (flags, the environment,
// a config file): each option's flag, kind, default, limits, parser and doc in one
// entry, checked once, at start, so that nothing on the request path parses options.
// Messages name options as the library does (`passwordFile`); the command line names
// them as they were given (cli/flags.ts).
import { availableParallelism, homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { systemClock } from './clock.js';
import { NEVER, NEVER_SECONDS, parseDuration } from './duration.js';
import type { Clock } from './clock.js';
import { PATH_RULES } from './core/core.js';
import type { Core } from './core/core.js';
import { badOption, OptionError } from './errors.js';
import type { Text } from './errors.js';
import { trustedProxies } from './addresses.js';
import type { TrustedProxies } from './addresses.js';
import { STDOUT } from './ops/line-writer.js';
import { LEVELS } from './ops/log.js';
import type { Level, Logger } from './ops/log.js';
import { allowedOrigins } from './origins.js';
import type { AllowedOrigins } from './origins.js';
import { AUTH_PATH, MAX_BODY_BYTES, OWN_PATHS } from './own-endpoints.js';
import type { TlsFiles } from './pem.js';
import { sessionBytes } from './session-memory.js';

/** --ws-max-sessions when it is left out and the memory budget holds as many. */
const MAX_SESSIONS = 10_000;

/** How an option is written: its flag's syntax, how its text from the environment or a config file is read, its placeholder in --help. */
export type OptionKind = 'boolean' | 'integer' | 'duration' | 'size' | 'text' | 'path' | 'list';

/** The bounds of a number, or of a duration in seconds, or of a size in bytes. */
export interface Limits {
  readonly min: number;
  readonly max: number;
}

/** Checks a value given for `option` (bounded by `limits`) and returns what the service runs with. Throws OptionError. */
export type OptionParser<V> = (value: unknown, option: string, limits: Limits | undefined) => V;

/** One option of startServer, and of the command line: everything about it, in one place. */
export interface OptionSpec<I, V> {
  /** The flag without its dashes: also the config file's key, and API_AUTH_ and the rest in upper snake case in the environment. */
  readonly flag: string;
  readonly kind: OptionKind;
  /** The placeholder in --help (`--http-port PORT`); the kind's own by default. */
  readonly arg?: string;
  /** The value when left out, as the option takes it; none when absent. */
  readonly default?: I;
  /** The default as the docs show it, where the value itself would not say it (every core, ~/.api-auth). */
  readonly shownDefault?: string;
  readonly limits?: Limits;
  readonly parse: OptionParser<V>;
  /** One line for --help and the docs' table of flags. */
  readonly doc: string;
  /** The docs' section that says more (host/cli/help.ts, SEE_PAGES, names its page). */
  readonly see?: string;
  /** Means something only with this option on: refused without it, never ignored. */
  readonly within?: 'upstream' | 'clusterEtcd' | 'tlsEnabled';
}

/** An entry of the schema: `I` what the option takes, `V` what it gives once checked, `D` whether it has a default. */
export interface OptionEntry<I, V, D extends boolean> extends OptionSpec<I, V> {
  /** Never set: carries I and D for the types derived from the schema. */
  readonly types?: { input: I; defaulted: D };
}

/** An entry of the schema, typed: one with a default always has a value once checked. */
function option<I, V>(spec: OptionSpec<I, V> & { readonly default: I }): OptionEntry<I, V, true>;
function option<I, V>(spec: OptionSpec<I, V>): OptionEntry<I, V, false>;
function option<I, V>(spec: OptionSpec<I, V>): OptionEntry<I, V, boolean> {
  return spec;
}

/** The default ceiling of expiresIn: the contract's 12 h lifetime. */
const DEFAULT_CEILING = 12 * 3600;
/** The longest ceiling short of never: 100 years, in seconds. */
const MAX_CEILING = 876_000 * 3600;

/**
 * startServer's options, and the command line's: each one's flag, kind, default, limits,
 * parser and doc. ServerOptions, the flags, the environment's names, the config file's
 * keys, --help and the README's table of flags all come from here.
 */
export const SCHEMA = {
  host: option<string, string>({
    flag: 'http-host', kind: 'text', arg: 'HOST', default: '127.0.0.1', parse: host,
    doc: 'address to listen on',
  }),
  port: option<number | string, number>({
    flag: 'http-port', kind: 'integer', arg: 'PORT', default: 9650, limits: { min: 0, max: 65535 }, parse: port,
    doc: 'port to listen on, 0 to 65535; 0 picks a free one (logged). api-auth listens on it alone: a port another program listens on is refused',
  }),
  httpThreads: option<number | string, number>({
    flag: 'http-threads', kind: 'integer', default: Math.min(availableParallelism(), 256), shownDefault: 'every core the process may use',
    limits: { min: 1, max: 256 }, parse: count('threads serving HTTP'),
    doc: 'threads serving HTTP, 1 to 256; the main thread then accepts the connections and owns the state', see: 'Threads',
  }),
  tlsEnabled: option<boolean, boolean>({
    flag: 'http-tls-enabled', kind: 'boolean', default: false, parse: flag,
    doc: 'serve HTTPS with the two files below; SIGHUP reloads them, open connections stay', see: 'TLS',
  }),
  tlsCertFile: option<string, string>({
    flag: 'http-tls-cert-file', kind: 'path', parse: file('the path of the certificate chain\'s PEM file'), within: 'tlsEnabled',
    doc: 'the certificate chain\'s PEM file (required with TLS on)',
  }),
  tlsKeyFile: option<string, string>({
    flag: 'http-tls-key-file', kind: 'path', parse: file('the path of the private key\'s PEM file'), within: 'tlsEnabled',
    doc: 'the private key\'s PEM file, unencrypted (required with TLS on)',
  }),
  allowedOrigins: option<string | readonly string[], AllowedOrigins>({
    flag: 'http-allowed-origins', kind: 'text', arg: 'ORIGINS', default: '*', parse: origins,
    doc: 'origins whose browser pages may call, and open WebSocket sessions (an upgrade from another page is 403), separated by ' +
      'spaces or commas: exact (https://wallet.example), with one * (https://*.example), or * for every one (the node\'s default)',
    see: 'CORS for browser dapps',
  }),
  authRequired: option<boolean, boolean>({
    flag: 'api-auth-required', kind: 'boolean', default: false, parse: flag,
    doc: 'require a token on every endpoint but /ext/auth, which exists only then',
  }),
  passwordFile: option<string, string>({
    flag: 'api-auth-password-file', kind: 'path', parse: file('the path of the password file'),
    doc: 'the service password\'s file (required with auth on); white space around the password is trimmed; generated (mode 0600) when missing',
  }),
  tokenLifetime: option<number | string, number>({
    flag: 'api-auth-token-lifetime', kind: 'duration', default: 12 * 3600, limits: { min: 1, max: 8760 * 3600 },
    parse: duration('90s, 15m, 12h or 1h30m'),
    doc: 'lifetime of new tokens that a call gives none, 1s to 8760h, such as 90s, 15m, 12h or 1h30m',
  }),
  maxTokenLifetime: option<number | string, number>({
    flag: 'max-token-lifetime', kind: 'duration', arg: 'DURATION', limits: { min: 1, max: MAX_CEILING },
    shownDefault: '12h, or --api-auth-token-lifetime when longer', parse: ceiling,
    doc: `the longest expiresIn a call may ask (auth.newToken, auth.rotateToken, token new --expires-in), 1s to ${MAX_CEILING / 3600}h, ` +
      'or never, which alone lets a call ask expiresIn "never"', see: 'Token lifetimes and rotation',
  }),
  maxTokens: option<number | string, number>({
    flag: 'api-auth-max-tokens', kind: 'integer', default: 10_000, limits: { min: 1, max: 1_000_000 }, parse: count('live tokens in the inventory'),
    // At the limit, about 1.7 MB of memory (some 165 bytes an entry) and a listTokens reply
    // of about 1.8 MB (some 175 bytes an entry with a short label and one endpoint).
    doc: 'live tokens at most, 1 to 1000000, revoked ones counted until they expire; auth.newToken past it is a resource-limit error',
  }),
  dataDir: option<string, string>({
    flag: 'data-dir', kind: 'path', default: join(homedir(), '.api-auth'), shownDefault: '~/.api-auth', parse: file('a folder path'),
    doc: 'where durable state lives: tokens\' key, revocations, password changes; created 0700 when missing, locked while open',
    see: 'The data folder',
  }),
  publicEndpoints: option<readonly string[], string[]>({
    flag: 'api-auth-public-endpoints', kind: 'list', arg: 'PATHS', default: [], shownDefault: 'none', parse: paths,
    doc: 'comma-separated exact paths that need no token, such as /ext/health', see: 'Public endpoints',
  }),
  upstream: option<string | URL, URL>({
    flag: 'upstream', kind: 'text', arg: 'URL', parse: upstream,
    doc: 'the node to protect, such as http://127.0.0.1:9652: every authorised request is proxied to the same path there; ' +
      'without it the built-in /ext/info and /ext/health answer', see: 'Protecting a real node (`--upstream`)',
  }),
  upstreamTimeout: option<number | string, number>({
    flag: 'upstream-timeout', kind: 'duration', default: 30, limits: { min: 1, max: 3600 }, parse: duration('30s or 2m'), within: 'upstream',
    doc: 'how long the upstream may take to start answering, and between parts of its answer, 1s to 1h; then 504',
  }),
  upstreamMaxBody: option<number | string, number>({
    flag: 'upstream-max-body', kind: 'size', default: 1024 * 1024, limits: { min: 1, max: 1024 * 1024 * 1024 }, parse: size, within: 'upstream',
    doc: 'largest request body proxied, 1 byte to 1024MiB: bytes, or with KiB or MiB; then 413 (/ext/auth takes at most 64KiB)',
  }),
  upstreamPipelining: option<number | string, number>({
    flag: 'upstream-pipelining', kind: 'integer', default: 1, limits: { min: 1, max: 64 }, parse: count('requests on one upstream connection at once'),
    within: 'upstream',
    doc: 'requests in flight on each upstream connection, 1 to 64; 1: no pipelining',
  }),
  queryToken: option<boolean, boolean>({
    flag: 'api-auth-query-token', kind: 'boolean', default: false, parse: flag, within: 'upstream',
    doc: 'also take a WebSocket upgrade\'s token from its access_token query parameter (RFC 6750 §2.3), for browsers; ' +
      'it is removed before the upstream sees the URL', see: 'WebSocket sessions',
  }),
  wsMaxMessage: option<number | string, number>({
    // 16 MiB by default, so that large eth_getLogs answers fit.
    flag: 'ws-max-message', kind: 'size', default: 16 * 1024 * 1024, limits: { min: 1, max: 1024 * 1024 * 1024 }, parse: size, within: 'upstream',
    doc: 'largest WebSocket message relayed either way, 1 byte to 1024MiB; a larger one ends the session (an upstream\'s with 1009; ' +
      'a client\'s is cut at its header, 1006)',
  }),
  wsIdleTimeout: option<number | string, number>({
    // uWebSockets.js takes 8 s to 960 s, counted in steps of 4 s.
    flag: 'ws-idle-timeout', kind: 'duration', default: 120, limits: { min: 8, max: 960 }, parse: duration('120s or 5m'), within: 'upstream',
    doc: 'a session side from which nothing arrives for this long, not even a pong to a ping, is gone, 8s to 960s',
  }),
  wsMaxSessions: option<number | string, number>({
    flag: 'ws-max-sessions', kind: 'integer', shownDefault: `${MAX_SESSIONS}, or as many as --ws-memory-budget holds if fewer`,
    limits: { min: 1, max: 1_000_000 }, parse: count('WebSocket sessions open at once'), within: 'upstream',
    doc: 'WebSocket sessions open at once in the process, 1 to 1000000, as many as --ws-memory-budget holds at most; past it an upgrade gets 503',
    see: 'WebSocket sessions',
  }),
  wsMemoryBudget: option<number | string, number>({
    flag: 'ws-memory-budget', kind: 'size', default: 4096 * 1024 * 1024, limits: { min: 1024 * 1024, max: 1024 * 1024 * 1024 * 1024 }, parse: size,
    within: 'upstream',
    doc: 'memory all WebSocket sessions together may hold at their worst, 1MiB to 1048576MiB: each may hold 6 x --ws-max-message + 2MiB, ' +
      'and --ws-max-sessions must fit', see: 'WebSocket sessions',
  }),
  wsMaxSessionsPerToken: option<number | string, number>({
    flag: 'ws-max-sessions-per-token', kind: 'integer', shownDefault: 'a quarter of --ws-max-sessions', limits: { min: 1, max: 1_000_000 },
    parse: count('WebSocket sessions open at once with one token'), within: 'upstream',
    doc: 'WebSocket sessions open at once in the process with one token, 1 to 1000000 and at most --ws-max-sessions; past it that token\'s upgrade gets 503',
    see: 'WebSocket sessions',
  }),
  wsMaxSessionsPerClient: option<number | string, number>({
    flag: 'ws-max-sessions-per-client', kind: 'integer', shownDefault: 'a quarter of --ws-max-sessions', limits: { min: 1, max: 1_000_000 },
    parse: count('WebSocket sessions open at once from one client address'), within: 'upstream',
    doc: 'WebSocket sessions open at once in the process from one client address (an IPv6 address\'s /64), 1 to 1000000 and at most --ws-max-sessions; ' +
      'past it that address\'s upgrade gets 503',
    see: 'WebSocket sessions',
  }),
  trustedProxies: option<readonly string[], TrustedProxies>({
    flag: 'trusted-proxies', kind: 'list', default: [], shownDefault: 'none', parse: proxies,
    doc: 'comma-separated addresses and CIDR ranges (IPv4, IPv6) of the proxies in front, whose X-Forwarded-For names the client; ' +
      'without them, forwarding headers from clients are dropped', see: 'Behind a proxy (`--trusted-proxies`)',
  }),
  metricsPath: option<string, string>({
    flag: 'metrics-path', kind: 'text', arg: 'PATH', default: '/ext/metrics', parse: metricsPath,
    doc: 'where Prometheus metrics are served, behind the gate like any endpoint', see: 'Metrics',
  }),
  logLevel: option<Level, Level>({
    flag: 'log-level', kind: 'text', arg: 'LEVEL', default: 'info', parse: level,
    doc: 'the least level logged: debug, info, warn or error', see: 'Logs',
  }),
  accessLog: option<string, string>({
    flag: 'access-log', kind: 'path', arg: 'FILE', shownDefault: 'off', parse: accessLog,
    doc: 'one JSON line per request the gate decided, appended to FILE (created 0640; SIGHUP reopens it, for logrotate), ' +
      'or written to standard output with "stdout"', see: 'The access log (`--access-log`)',
  }),
  clusterEtcd: option<string | readonly string[], URL[]>({
    flag: 'cluster-etcd', kind: 'text', arg: 'URLS', parse: etcdUrls,
    doc: 'comma-separated etcd client URLs, all http:// or all https:// (TLS), such as https://10.0.0.5:2379: ' +
      'join a fleet of gateways sharing one state (none: the data folder)', see: 'Running a fleet',
  }),
  clusterName: option<string, string>({
    flag: 'cluster-name', kind: 'text', arg: 'NAME', default: 'api-auth', parse: clusterName, within: 'clusterEtcd',
    doc: 'the fleet\'s name, its key prefix in etcd',
  }),
  clusterLease: option<number | string, number>({
    flag: 'cluster-lease', kind: 'duration', default: 10, limits: { min: 2, max: 300 }, parse: duration('10s'), within: 'clusterEtcd',
    doc: 'this gateway\'s lease in the fleet, 2s to 300s: a stopped or cut-off gateway refuses protected requests before it runs out, ' +
      'and holds up a revoke at most this long',
  }),
  fleetOutageGrace: option<number | string, number>({
    flag: 'fleet-outage-grace', kind: 'duration', default: 0, limits: { min: 0, max: 24 * 3600 }, parse: duration('0s, 30s or 5m'),
    within: 'clusterEtcd',
    doc: 'how long a gateway that etcd no longer answers keeps serving tokens on its last known state once its lease would have run out, ' +
      '0s to 24h, taking no change meanwhile; a token revoked through a gateway still in touch may work on it this long (0s: 503 at once)',
    see: 'When etcd is down',
  }),
  clusterEtcdCa: option<string, string>({
    flag: 'cluster-etcd-ca', kind: 'path', shownDefault: 'the system\'s CAs', parse: file('the path of the PEM file of the CAs that sign etcd\'s certificate'),
    within: 'clusterEtcd',
    doc: 'PEM file of the CA that signs etcd\'s certificate, for https:// URLs only',
  }),
  clusterEtcdCert: option<string, string>({
    flag: 'cluster-etcd-cert', kind: 'path', parse: file('the path of the client certificate\'s PEM file'), within: 'clusterEtcd',
    doc: 'this gateway\'s client certificate for etcd\'s --client-cert-auth (PEM; with --cluster-etcd-key; https:// only)',
  }),
  clusterEtcdKey: option<string, string>({
    flag: 'cluster-etcd-key', kind: 'path', parse: file('the path of the client key\'s PEM file'), within: 'clusterEtcd',
    doc: 'the client certificate\'s unencrypted key (PEM; with --cluster-etcd-cert; https:// only)',
  }),
  clusterEtcdUser: option<string, string>({
    flag: 'cluster-etcd-user', kind: 'text', arg: 'USER', parse: text('the name of an etcd user'), within: 'clusterEtcd',
    doc: 'the etcd user to sign in as, when etcd\'s authentication is on; its role needs readwrite on /NAME/, /NAME.throttle/ ' +
      'and /NAME.usage/ (NAME: --cluster-name)',
  }),
  clusterEtcdPasswordFile: option<string, string>({
    flag: 'cluster-etcd-password-file', kind: 'path', parse: file('the path of the etcd user\'s password file'), within: 'clusterEtcd',
    doc: 'the file holding that user\'s password (its line ending trimmed); a password is taken only from a file',
  }),
} as const;

type Schema = typeof SCHEMA;
type Key = keyof Schema;
type InputOf<E> = E extends OptionEntry<infer I, unknown, boolean> ? I : never;
type ValueOf<E> = E extends OptionEntry<unknown, infer V, boolean> ? V : never;
type Defaulted = { [K in Key]: Schema[K] extends OptionEntry<unknown, unknown, true> ? K : never }[Key];

/** startServer's options: the standalone service, as the command line runs it (SCHEMA says what each is). Every one may be left out. */
export type ServerOptions = { readonly [K in Key]?: InputOf<Schema[K]> };

/** What an option left out is, as the option takes it (seconds, bytes). */
export const DEFAULTS = Object.fromEntries(Object.entries(SCHEMA).filter(([, entry]) => 'default' in entry)
  .map(([key, entry]) => [key, (entry as OptionSpec<unknown, unknown>).default])) as { readonly [K in Defaulted]: InputOf<Schema[K]> };

/** The bounds of options, and the fixed limits beside them. */
export const LIMITS = {
  ...Object.fromEntries(Object.entries(SCHEMA).filter(([, entry]) => 'limits' in entry).map(([key, entry]) => [key, entry.limits])) as
    { readonly [K in Key]?: Limits },
  /** Bytes of a JSON-RPC body that /ext/auth and the built-in endpoints read (64 KiB). */
  rpcBody: MAX_BODY_BYTES,
} as const;

/** Every option's value, checked; undefined for one left out that has no default. */
type Values = { readonly [K in Key]: K extends Defaulted ? ValueOf<Schema[K]> : ValueOf<Schema[K]> | undefined };

/** createAuth's options: the token service embedded in a node. */
export interface AuthOptions {
  /** The service password's file; a strong password is generated into it when it is missing (its folder must exist). */
  readonly passwordFile: string;
  /** Where durable state lives (tokens' key, revocations, password changes); created 0700 when missing, locked while open. */
  readonly dataDir: string;
  /** Lifetime of new tokens: seconds, or a duration such as "90s", "15m", "12h". Default 12h. */
  readonly tokenLifetime?: ServerOptions['tokenLifetime'];
  /** The longest expiresIn a call may ask: seconds, a duration, or "never". Default 12h, or tokenLifetime when longer. */
  readonly maxTokenLifetime?: ServerOptions['maxTokenLifetime'];
  /** Live tokens at most (revoked ones count until they expire), 1 to 1000000; auth.newToken past it is a resource-limit error. Default 10000. */
  readonly maxTokens?: ServerOptions['maxTokens'];
  /** Exact paths that need no token, such as /ext/health. */
  readonly publicEndpoints?: ServerOptions['publicEndpoints'];
  /**
   * Addresses and CIDR ranges (such as "10.0.0.0/8") of the proxies in front of the node,
   * whose X-Forwarded-For names the client that /ext/auth throttles and logs. Default
   * none: the client is the connection's far end.
   */
  readonly trustedProxies?: ServerOptions['trustedProxies'];
  /** Where log lines go (audit lines included); default JSON lines on stdout, info and above. */
  readonly log?: Logger;
  /**
   * The time, in ms since the Unix epoch: what tokens expire by, the throttle counts
   * by, and the state forgets expired revocations by. Default the system's clock.
   */
  readonly clock?: Clock;
}

/** The token service's settings, validated. */
export interface AuthConfig {
  /** Absolute path. */
  readonly passwordFile: string;
  /** Absolute path. */
  readonly dataDir: string;
  /** Seconds. */
  readonly tokenLifetime: number;
  /** Seconds, at least tokenLifetime; NEVER_SECONDS for never. */
  readonly maxTokenLifetime: number;
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
  /** Seconds, at least tokenLifetime; NEVER_SECONDS for never. */
  readonly maxTokenLifetime: number;
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
  readonly upstreamPipelining: number;
  readonly trustedProxies: TrustedProxies;
  readonly metricsPath: string;
  readonly logLevel: Level;
  /** Absolute path, or STDOUT; undefined: no access log. */
  readonly accessLog: string | undefined;
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
  /** At most wsMaxSessions. */
  readonly wsMaxSessionsPerToken: number;
  /** At most wsMaxSessions. */
  readonly wsMaxSessionsPerClient: number;
  /** The fleet to join; undefined keeps the state in the data folder. */
  readonly cluster: ClusterConfig | undefined;
}

export interface ClusterConfig {
  /** etcd client URLs, all http:// or all https://. */
  readonly endpoints: readonly string[];
  readonly name: string;
  /** Seconds. */
  readonly leaseSeconds: number;
  /** How long past its lease a gateway that etcd no longer answers serves on its last known state, whole seconds (0: not at all). */
  readonly outageGraceSeconds: number;
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

/** The options' names, in the schema's order. */
const KEYS = Object.keys(SCHEMA) as Key[];

const AUTH_OPTIONS = ['passwordFile', 'dataDir', 'tokenLifetime', 'maxTokenLifetime', 'maxTokens', 'publicEndpoints', 'trustedProxies', 'log', 'clock'];

/** TLS to etcd: refused with http:// endpoints, where it would protect nothing. */
const ETCD_TLS_OPTIONS = ['clusterEtcdCa', 'clusterEtcdCert', 'clusterEtcdKey'] as const;

/** Why an option `within` another is refused without it. */
const WITHIN: Readonly<Record<NonNullable<OptionSpec<unknown, unknown>['within']>, (option: string) => Text>> = {
  // The proxy's settings mean nothing without a proxy: a flag that would change nothing is
  // a mistake to point out (a forgotten --upstream, most likely), not to ignore.
  upstream: (option) => (name) => `${name(option)} sets how requests are proxied to the node, and there is no ` +
    `${name('upstream')}: give ${name('upstream')} (such as http://127.0.0.1:9652), or leave ${name(option)} out`,
  clusterEtcd: (option) => (name) => `${name(option)} sets how this gateway joins a fleet, and there is no ` +
    `${name('clusterEtcd')}: give ${name('clusterEtcd')} (such as http://127.0.0.1:2379), or leave ${name(option)} out`,
  tlsEnabled: (option) => (name) => `${name(option)} is used only with ${name('tlsEnabled')}; add it, or leave ${name(option)} out`,
};

/** The value of `key`, checked: the one given, or its default. */
function parsed<K extends Key>(key: K, value: unknown): ValueOf<Schema[K]> {
  const entry = SCHEMA[key] as OptionSpec<unknown, ValueOf<Schema[K]>>;
  return entry.parse(value ?? entry.default, key, entry.limits);
}

/** createAuth's options, validated. Throws OptionError naming the first option at fault. */
export function resolveAuthOptions(options: AuthOptions): AuthConfig {
  known(options, AUTH_OPTIONS);
  const tokenLifetime = parsed('tokenLifetime', options.tokenLifetime);
  return {
    passwordFile: required('passwordFile', options.passwordFile, 'the path of the service password\'s file ' +
      '(a password is generated into it when it is missing)'),
    dataDir: required('dataDir', options.dataDir, 'the folder where durable state lives (created when missing)'),
    tokenLifetime,
    maxTokenLifetime: lifetimeCeiling(tokenLifetime, options.maxTokenLifetime),
    maxTokens: parsed('maxTokens', options.maxTokens),
    publicEndpoints: parsed('publicEndpoints', options.publicEndpoints),
    trustedProxies: parsed('trustedProxies', options.trustedProxies),
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

/**
 * startServer's options, validated: each by its entry in SCHEMA, then how they go
 * together. Throws OptionError naming the first option at fault. Reads no file: the
 * files the options name are read, and checked, at start.
 */
export function resolveServerOptions(options: ServerOptions): ServerConfig {
  known(options, KEYS);
  const values: Record<string, unknown> = {};
  for (const key of KEYS) values[key] = options[key] === undefined && !('default' in SCHEMA[key]) ? undefined : parsed(key, options[key]);
  for (const key of KEYS) {
    const within = SCHEMA[key].within;
    if (within !== undefined && options[key] !== undefined && !on(values[within])) throw new OptionError(key, WITHIN[within](key));
  }
  const v = values as Values;
  if (v.authRequired && v.passwordFile === undefined) {
    throw new OptionError('passwordFile', (name) => `${name('authRequired')} needs ${name('passwordFile')}, the file holding the ` +
      'service password (it is generated when missing)');
  }
  const sessions = maxSessions(v);
  return {
    host: v.host,
    port: v.port,
    authRequired: v.authRequired,
    passwordFile: v.passwordFile,
    tokenLifetime: v.tokenLifetime,
    maxTokenLifetime: lifetimeCeiling(v.tokenLifetime, options.maxTokenLifetime),
    maxTokens: v.maxTokens,
    dataDir: v.dataDir,
    publicEndpoints: v.publicEndpoints,
    upstream: v.upstream,
    upstreamTimeoutMs: v.upstreamTimeout * 1000,
    upstreamMaxBody: v.upstreamMaxBody,
    upstreamPipelining: v.upstreamPipelining,
    trustedProxies: v.trustedProxies,
    metricsPath: v.metricsPath,
    logLevel: v.logLevel,
    accessLog: v.accessLog,
    httpThreads: v.httpThreads,
    tls: tls(v),
    allowedOrigins: v.allowedOrigins,
    queryToken: v.queryToken,
    wsMaxMessage: v.wsMaxMessage,
    wsIdleTimeout: v.wsIdleTimeout,
    wsMaxSessions: sessions,
    wsMaxSessionsPerToken: share(v, sessions, 'wsMaxSessionsPerToken'),
    wsMaxSessionsPerClient: share(v, sessions, 'wsMaxSessionsPerClient'),
    cluster: cluster(v, options),
  };
}

/**
 * A token's or a client address's share of the WebSocket sessions: as given, at most
 * all of them; by default a quarter (rounded up), so that no one token or client can
 * take the sessions from everyone else.
 */
function share(v: Values, sessions: number, key: 'wsMaxSessionsPerToken' | 'wsMaxSessionsPerClient'): number {
  const given = v[key];
  if (given === undefined) return Math.ceil(sessions / 4);
  if (given > sessions) {
    throw new OptionError(key, (name) => `${name(key)} is ${given}, over ${name('wsMaxSessions')} (${sessions}), which bounds every ` +
      `share: give at most ${sessions}, or raise ${name('wsMaxSessions')}`);
  }
  return given;
}

/**
 * The WebSocket sessions of the process: as many as given, or MAX_SESSIONS, and no more
 * than the memory budget holds with each at its worst (session-memory.ts). Given more than
 * that, the start stops rather than take fewer than asked for, or break the budget.
 */
function maxSessions(v: Values): number {
  const each = sessionBytes(v.wsMaxMessage);
  const fit = Math.floor(v.wsMemoryBudget / each);
  const worst = (name: (option: string) => string) => `at ${name('wsMaxMessage')} ${formatBytes(v.wsMaxMessage)} each session may hold ` +
    `${formatBytes(each)} (6 x the message + 2MiB)`;
  if (fit < 1) {
    throw new OptionError('wsMemoryBudget', (name) => `${name('wsMemoryBudget')} is ${formatBytes(v.wsMemoryBudget)}, and ${worst(name)}: ` +
      `not one session fits. Raise ${name('wsMemoryBudget')}, or lower ${name('wsMaxMessage')}`);
  }
  const given = v.wsMaxSessions;
  if (given === undefined) return Math.min(MAX_SESSIONS, fit);
  if (given > fit) {
    throw new OptionError('wsMaxSessions', (name) => `${name('wsMaxSessions')} is ${given}, and ${worst(name)}: ${given} would hold up to ` +
      `${formatBytes(given * each)}, over ${name('wsMemoryBudget')} (${formatBytes(v.wsMemoryBudget)}). Give at most ${fit}, lower ` +
      `${name('wsMaxMessage')}, or raise ${name('wsMemoryBudget')}`);
  }
  return given;
}

/**
 * The ceiling of expiresIn: the one given, which the default lifetime may not pass, or
 * 12 h, raised to the default lifetime when that is longer (as the lifetime was the
 * ceiling before the option existed).
 */
function lifetimeCeiling(lifetime: number, given: unknown): number {
  if (given === undefined) return Math.max(DEFAULT_CEILING, lifetime);
  const max = parsed('maxTokenLifetime', given);
  if (lifetime > max) {
    throw new OptionError('tokenLifetime', (name) => `${name('tokenLifetime')} (${formatSeconds(lifetime)}) is longer than ` +
      `${name('maxTokenLifetime')} (${formatSeconds(max)}), the longest lifetime a token may have: shorten the one, or raise the other`);
  }
  return max;
}

/** A ceiling of token lifetimes: a duration within the option's limits, or "never" (NEVER_SECONDS). */
function ceiling(value: unknown, option: string, limits: Limits | undefined): number {
  if (value === NEVER) return NEVER_SECONDS;
  return duration(`12h, 720h or 8760h, or ${NEVER}`)(value, option, limits);
}

/** Whether an option that others are `within` is on: set, and not false. */
function on(value: unknown): boolean {
  return value !== undefined && value !== false;
}

/** The TLS files, when TLS is on: both named. Their content is checked at start (pem.ts, checkTlsFiles), as etcd's files are. */
function tls(v: Values): TlsFiles | undefined {
  if (!v.tlsEnabled) return undefined;
  for (const option of ['tlsCertFile', 'tlsKeyFile'] as const) {
    if (v[option] === undefined) {
      throw new OptionError(option, (name) => `${name('tlsEnabled')} needs ${name(option)}, the ${option === 'tlsCertFile' ? 'certificate chain' : 'private key'}'s PEM file`);
    }
  }
  return { certFile: v.tlsCertFile!, keyFile: v.tlsKeyFile! };
}

/** The fleet: clusterEtcd needs authRequired (a fleet shares token state), and TLS to etcd needs https:// URLs. */
function cluster(v: Values, options: ServerOptions): ClusterConfig | undefined {
  if (v.clusterEtcd === undefined) return undefined;
  if (!v.authRequired) {
    throw new OptionError('clusterEtcd', (name) => `${name('clusterEtcd')} shares the token state of a fleet, and without ` +
      `${name('authRequired')} there is none: add ${name('authRequired')}, or leave ${name('clusterEtcd')} out`);
  }
  const secure = v.clusterEtcd[0].protocol === 'https:';
  return { endpoints: v.clusterEtcd.map((url) => url.origin), name: v.clusterName, leaseSeconds: v.clusterLease,
    outageGraceSeconds: v.fleetOutageGrace, tls: etcdTls(v, options, secure),
    auth: etcdAuth(v, options) };
}

/**
 * TLS to etcd, with https:// endpoints only: a CA or a client certificate given with
 * http:// ones would leave the operator believing the connection protected. The files
 * themselves are read, and checked, when the fleet is joined (cluster/open.ts).
 */
function etcdTls(v: Values, options: ServerOptions, secure: boolean): EtcdTlsFiles | undefined {
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
  const { clusterEtcdCert: certFile, clusterEtcdKey: keyFile } = v;
  return { caFile: v.clusterEtcdCa, client: certFile !== undefined && keyFile !== undefined ? { certFile, keyFile } : undefined };
}

/** etcd's authentication: a user and its password's file, both or neither. */
function etcdAuth(v: Values, options: ServerOptions): EtcdAuthFile | undefined {
  pair('clusterEtcdUser', 'clusterEtcdPasswordFile', options, 'the file holding its password (a password is never taken on the command line)');
  pair('clusterEtcdPasswordFile', 'clusterEtcdUser', options, 'the etcd user whose password the file holds');
  return v.clusterEtcdUser === undefined ? undefined : { user: v.clusterEtcdUser, passwordFile: v.clusterEtcdPasswordFile! };
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

function required<K extends 'passwordFile' | 'dataDir'>(key: K, value: unknown, what: string): ValueOf<Schema[K]> {
  if (value === undefined) throw badOption(key, ` is required: ${what}`);
  return parsed(key, value);
}

function flag(value: unknown, option: string): boolean {
  if (typeof value !== 'boolean') throw badOption(option, ` must be true or false (or yes/no, on/off, 1/0), not ${show(value)}`);
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

/** Text that must not be empty; `what` says what it names. */
function text(what: string): OptionParser<string> {
  return (value, option) => nonEmpty(option, value, what);
}

/** A path, made absolute; `what` says what it names. */
function file(what: string): OptionParser<string> {
  return (value, option) => resolve(nonEmpty(option, value, what));
}

function nonEmpty(option: string, value: unknown, what: string): string {
  if (typeof value !== 'string') throw badOption(option, ` must be ${what}, not ${show(value)}`);
  if (value.trim() === '') throw badOption(option, ` must not be empty; give ${what}`);
  return value;
}

/** A duration in whole seconds within the option's limits, from a number of seconds or a duration's text; `examples` fit the option. */
function duration(examples: string): OptionParser<number> {
  return (value, option, limits) => {
    const { min, max } = limits!;
    const what = `a duration in whole seconds from ${formatSeconds(min)} to ${formatSeconds(max)}, such as ${examples}`;
    const seconds = typeof value === 'number' ? value : typeof value === 'string' ? parseDuration(value) : null;
    if (typeof value === 'number' && !Number.isInteger(value)) throw badOption(option, ` must be a whole number of seconds, not ${show(value)}`);
    if (seconds === null || !Number.isInteger(seconds) || seconds < min || seconds > max) throw badOption(option, ` must be ${what}, not ${show(value)}`);
    return seconds;
  };
}

/** Seconds as the docs write them: in hours when whole hours, else in seconds (1s, 960s, 8760h). */
export function formatSeconds(seconds: number): string {
  if (seconds === NEVER_SECONDS) return NEVER;
  return seconds >= 3600 && seconds % 3600 === 0 ? `${seconds / 3600}h` : `${seconds}s`;
}

const SIZE_UNITS: Record<string, number> = { '': 1, KiB: 1024, MiB: 1024 * 1024 };

function size(value: unknown, option: string, limits: Limits | undefined): number {
  const { min, max } = limits!;
  const m = typeof value === 'string' ? /^(\d{1,10})(KiB|MiB)?$/.exec(value) : null;
  const bytes = typeof value === 'number' ? value : m === null ? NaN : Number(m[1]) * SIZE_UNITS[m[2] ?? ''];
  if (!(Number.isInteger(bytes) && bytes >= min && bytes <= max)) {
    throw badOption(option, ` must be a size from ${min} byte to ${max / (1024 * 1024)}MiB: a number of bytes, or a number followed by ` +
      `KiB or MiB (such as 1MiB), not ${show(value)}`);
  }
  return bytes;
}

/** Bytes as the docs write them: in MiB or KiB when whole ones, else bytes. */
export function formatBytes(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)}MiB` : bytes % 1024 === 0 ? `${bytes / 1024}KiB` : `${bytes}`;
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
function paths(value: unknown, option: string): string[] {
  if (!Array.isArray(value)) throw badOption(option, ` must be an array of exact paths such as ["/ext/health"], not ${show(value)}`);
  const list = [...new Set(value.map((entry: unknown) => path(option, entry, '/ext/health')))];
  const own = list.find((path) => OWN_PATHS.includes(path));
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

/** Where the metrics are served: an exact path, not one of api-auth's own. */
function metricsPath(value: unknown, option: string): string {
  const metrics = path(option, value, '/ext/metrics');
  if (OWN_PATHS.includes(metrics)) throw badOption(option, ` must not be ${metrics}`);
  return metrics;
}

/**
 * The access log's file, made absolute, or STDOUT. "-" is refused rather than taken as a
 * file of that name, or as standard output, which a reader of the command might assume.
 */
function accessLog(value: unknown, option: string): string {
  if (value === STDOUT) return STDOUT;
  if (value === '-') throw badOption(option, ' must be a file\'s path, or "stdout" for standard output, not "-"');
  return file('a file\'s path, or "stdout" for standard output')(value, option, undefined);
}

function proxies(value: unknown): TrustedProxies {
  if (!Array.isArray(value)) throw badOption('trustedProxies', ' must be an array of addresses and CIDR ranges, such as ["10.0.0.0/8"]');
  try {
    return trustedProxies(value);
  } catch (error) {
    throw badOption('trustedProxies', `: ${(error as Error).message}`);
  }
}

/** A whole number within the option's limits; `what` says what it counts. */
function count(what: string): OptionParser<number> {
  return (value, option, limits) => {
    const { min, max } = limits!;
    const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : NaN;
    if (!(Number.isInteger(n) && n >= min && n <= max)) {
      throw badOption(option, ` must be a whole number from ${min} to ${max} (${what}), not ${show(value)}`);
    }
    return n;
  };
}

/** etcd's client URLs: a list, or one string separated by commas; all http:// or all https://. */
function etcdUrls(value: unknown, option: string): URL[] {
  const list = typeof value === 'string' ? value.split(',') : Array.isArray(value) ? value : null;
  if (list === null || list.length === 0) throw badOption(option, ` must be etcd client URLs such as http://127.0.0.1:2379, not ${show(value)}`);
  const urls = list.map((entry: unknown) => {
    const text = typeof entry === 'string' ? entry.trim() : '';
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.port === '' || url.pathname !== '/' ||
      url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
      // The whole value, not the entry: a password with a comma in it would leave part of itself in an entry.
      throw badOption(option, ` must be etcd client URLs, http:// or https:// with host and port, no user or password ` +
        `(--cluster-etcd-user and --cluster-etcd-password-file), such as http://127.0.0.1:2379, separated by commas; ${show(value)} is not`);
    }
    return url;
  });
  const secure = urls[0].protocol === 'https:';
  if (urls.some((url) => (url.protocol === 'https:') !== secure)) {
    throw badOption(option, ` mixes http:// and https:// URLs (${show(value)}); an etcd cluster serves its clients one way: ` +
      'give them all with https:// (TLS) or all with http://');
  }
  return urls;
}

function clusterName(value: unknown, option: string): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(value)) {
    throw badOption(option, ` must be 1 to 64 letters, digits, ".", "_" or "-", not ${show(value)}`);
  }
  return value;
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

/**
 * A refused value, for its message: never a URL's user and password (--upstream
 * http://user:secret@..., an etcd URL), which the message would put in every log that
 * keeps the start's stderr. Everything from "://" to the last "@" of the text is left out.
 */
function show(value: unknown): string {
  const text = value instanceof URL ? JSON.stringify(value.href) : JSON.stringify(value) ?? String(value);
  return text.replace(/:\/\/[^\s]*@/g, '://…@');
}
