// One schema of options for the library and the command line (flags, the environment,
// a config file): each option's flag, kind, default, limits, parser and doc in one
// entry, checked once, at start, so that nothing on the request path parses options.
// Messages name options as the library does (`passwordFile`); the command line names
// them as they were given (cli/flags.ts).
import { availableParallelism, homedir } from 'node:os';
import { join } from 'node:path';
import type { TrustedProxies } from '../addresses.js';
import type { Level } from '../ops/log.js';
import type { AllowedOrigins } from '../origins.js';
import { MAX_BODY_BYTES } from '../own-endpoints.js';
import {
  accessLog,
  ceiling,
  clusterName,
  count,
  duration,
  etcdUrls,
  file,
  flag,
  host,
  level,
  metricsPath,
  origins,
  paths,
  port,
  proxies,
  size,
  text,
  upstream,
} from './parsers.js';
import type { Limits, OptionEntry, OptionSpec } from './spec.js';

/** --ws-max-sessions when it is left out and the memory budget holds as many. */
export const MAX_SESSIONS = 10_000;

/** An entry of the schema, typed: one with a default always has a value once checked. */
function option<I, V>(spec: OptionSpec<I, V> & { readonly default: I }): OptionEntry<I, V, true>;
function option<I, V>(spec: OptionSpec<I, V>): OptionEntry<I, V, false>;
function option<I, V>(spec: OptionSpec<I, V>): OptionEntry<I, V, boolean> {
  return spec;
}

/** The longest ceiling short of never: 100 years, in seconds. */
const MAX_CEILING = 876_000 * 3600;

/**
 * startServer's options, and the command line's: each one's flag, kind, default, limits,
 * parser and doc. ServerOptions, the flags, the environment's names, the config file's
 * keys, --help and the README's table of flags all come from here.
 */
export const SCHEMA = {
  host: option<string, string>({
    flag: 'http-host',
    kind: 'text',
    arg: 'HOST',
    default: '127.0.0.1',
    parse: host,
    doc: 'address to listen on',
  }),
  port: option<number | string, number>({
    flag: 'http-port',
    kind: 'integer',
    arg: 'PORT',
    default: 9650,
    limits: { min: 0, max: 65535 },
    parse: port,
    doc: 'port to listen on, 0 to 65535; 0 picks a free one (logged). api-auth listens on it alone: a port another program listens on is refused',
  }),
  httpThreads: option<number | string, number>({
    flag: 'http-threads',
    kind: 'integer',
    default: Math.min(availableParallelism(), 256),
    shownDefault: 'every core the process may use',
    limits: { min: 1, max: 256 },
    parse: count('threads serving HTTP'),
    doc: 'threads serving HTTP, 1 to 256; the main thread then accepts the connections and owns the state',
    see: 'Threads',
  }),
  tlsEnabled: option<boolean, boolean>({
    flag: 'http-tls-enabled',
    kind: 'boolean',
    default: false,
    parse: flag,
    doc: 'serve HTTPS with the two files below; SIGHUP reloads them, open connections stay',
    see: 'TLS',
  }),
  tlsCertFile: option<string, string>({
    flag: 'http-tls-cert-file',
    kind: 'path',
    parse: file("the path of the certificate chain's PEM file"),
    within: 'tlsEnabled',
    doc: "the certificate chain's PEM file (required with TLS on)",
  }),
  tlsKeyFile: option<string, string>({
    flag: 'http-tls-key-file',
    kind: 'path',
    parse: file("the path of the private key's PEM file"),
    within: 'tlsEnabled',
    doc: "the private key's PEM file, unencrypted (required with TLS on)",
  }),
  allowedOrigins: option<string | readonly string[], AllowedOrigins>({
    flag: 'http-allowed-origins',
    kind: 'text',
    arg: 'ORIGINS',
    default: '*',
    parse: origins,
    doc:
      'origins whose browser pages may call, and open WebSocket sessions (an upgrade from another page is 403), separated by ' +
      "spaces or commas: exact (https://wallet.example), with one * (https://*.example), or * for every one (the node's default)",
    see: 'CORS for browser dapps',
  }),
  authRequired: option<boolean, boolean>({
    flag: 'api-auth-required',
    kind: 'boolean',
    default: false,
    parse: flag,
    doc: 'require a token on every endpoint but /ext/auth, which exists only then',
  }),
  passwordFile: option<string, string>({
    flag: 'api-auth-password-file',
    kind: 'path',
    parse: file('the path of the password file'),
    doc: "the service password's file (required with auth on); white space around the password is trimmed; generated (mode 0600) when missing",
  }),
  tokenLifetime: option<number | string, number>({
    flag: 'api-auth-token-lifetime',
    kind: 'duration',
    default: 12 * 3600,
    limits: { min: 1, max: 8760 * 3600 },
    parse: duration('90s, 15m, 12h or 1h30m'),
    doc: 'lifetime of new tokens that a call gives none, 1s to 8760h, such as 90s, 15m, 12h or 1h30m',
  }),
  maxTokenLifetime: option<number | string, number>({
    flag: 'max-token-lifetime',
    kind: 'duration',
    arg: 'DURATION',
    limits: { min: 1, max: MAX_CEILING },
    shownDefault: '12h, or --api-auth-token-lifetime when longer',
    parse: ceiling,
    doc:
      `the longest expiresIn a call may ask (auth.newToken, auth.rotateToken, token new --expires-in), 1s to ${MAX_CEILING / 3600}h, ` +
      'or never, which alone lets a call ask expiresIn "never"',
    see: 'Token lifetimes and rotation',
  }),
  maxTokens: option<number | string, number>({
    flag: 'api-auth-max-tokens',
    kind: 'integer',
    default: 10_000,
    limits: { min: 1, max: 1_000_000 },
    parse: count('live tokens in the inventory'),
    // At the limit, about 1.7 MB of memory (some 165 bytes an entry) and a listTokens reply
    // of about 1.8 MB (some 175 bytes an entry with a short label and one endpoint).
    doc: 'live tokens at most, 1 to 1000000, revoked ones counted until they expire; auth.newToken past it is a resource-limit error',
  }),
  console: option<boolean, boolean>({
    flag: 'console',
    kind: 'boolean',
    default: false,
    parse: flag,
    doc:
      "serve the operator's console, a browser page to issue, list, rotate and revoke tokens, at /ext/auth/console " +
      '(with --api-auth-required; sign in with the password)',
    see: "The operator's console",
  }),
  consoleSessionMaxLifetime: option<number | string, number>({
    flag: 'console-session-max-lifetime',
    kind: 'duration',
    default: 12 * 3600,
    limits: { min: 60, max: 720 * 3600 },
    parse: duration('15m, 12h or 1h30m'),
    doc:
      'the longest a console session runs from its sign-in, renewals and all, 60s to 720h, such as 8h or 12h; past it ' +
      'auth.renewSession is refused and the operator signs in again',
    see: "The operator's console",
  }),
  dataDir: option<string, string>({
    flag: 'data-dir',
    kind: 'path',
    default: join(homedir(), '.api-auth'),
    shownDefault: '~/.api-auth',
    parse: file('a folder path'),
    doc: "where durable state lives: tokens' key, revocations, password changes; created 0700 when missing, locked while open",
    see: 'The data folder',
  }),
  publicEndpoints: option<readonly string[], string[]>({
    flag: 'api-auth-public-endpoints',
    kind: 'list',
    arg: 'PATHS',
    default: [],
    shownDefault: 'none',
    parse: paths,
    doc: 'comma-separated exact paths that need no token, such as /ext/health',
    see: 'Public endpoints',
  }),
  upstream: option<string | URL, URL>({
    flag: 'upstream',
    kind: 'text',
    arg: 'URL',
    parse: upstream,
    doc:
      'the node to protect, such as http://127.0.0.1:9652: every authorised request is proxied to the same path there; ' +
      'without it the built-in /ext/info and /ext/health answer',
    see: 'Protecting a real node (`--upstream`)',
  }),
  upstreamTimeout: option<number | string, number>({
    flag: 'upstream-timeout',
    kind: 'duration',
    default: 30,
    limits: { min: 1, max: 3600 },
    parse: duration('30s or 2m'),
    within: 'upstream',
    doc: 'how long the upstream may take to start answering, and between parts of its answer, 1s to 1h; then 504',
  }),
  upstreamMaxBody: option<number | string, number>({
    flag: 'upstream-max-body',
    kind: 'size',
    default: 1024 * 1024,
    limits: { min: 1, max: 1024 * 1024 * 1024 },
    parse: size,
    within: 'upstream',
    doc: 'largest request body proxied, 1 byte to 1024MiB: bytes, or with KiB or MiB; then 413 (/ext/auth takes at most 64KiB)',
  }),
  upstreamPipelining: option<number | string, number>({
    flag: 'upstream-pipelining',
    kind: 'integer',
    default: 1,
    limits: { min: 1, max: 64 },
    parse: count('requests on one upstream connection at once'),
    within: 'upstream',
    doc: 'requests of one event-loop turn batched on one upstream connection, 1 to 64; 1: no pipelining',
  }),
  queryToken: option<boolean, boolean>({
    flag: 'api-auth-query-token',
    kind: 'boolean',
    default: false,
    parse: flag,
    within: 'upstream',
    doc:
      "also take a WebSocket upgrade's token from its access_token query parameter (RFC 6750 §2.3), for browsers; " +
      'it is removed before the upstream sees the URL',
    see: 'WebSocket sessions',
  }),
  wsMaxMessage: option<number | string, number>({
    // 16 MiB by default, so that large eth_getLogs answers fit.
    flag: 'ws-max-message',
    kind: 'size',
    default: 16 * 1024 * 1024,
    limits: { min: 1, max: 1024 * 1024 * 1024 },
    parse: size,
    within: 'upstream',
    doc:
      "largest WebSocket message relayed either way, 1 byte to 1024MiB; a larger one ends the session (an upstream's with 1009; " +
      "a client's is cut at its header, 1006)",
  }),
  wsIdleTimeout: option<number | string, number>({
    // uWebSockets.js takes 8 s to 960 s, counted in steps of 4 s.
    flag: 'ws-idle-timeout',
    kind: 'duration',
    default: 120,
    limits: { min: 8, max: 960 },
    parse: duration('120s or 5m'),
    within: 'upstream',
    doc: 'a session side from which nothing arrives for this long, not even a pong to a ping, is gone, 8s to 960s',
  }),
  wsMaxSessions: option<number | string, number>({
    flag: 'ws-max-sessions',
    kind: 'integer',
    shownDefault: `${MAX_SESSIONS}, or as many as --ws-memory-budget holds if fewer`,
    limits: { min: 1, max: 1_000_000 },
    parse: count('WebSocket sessions open at once'),
    within: 'upstream',
    doc: 'WebSocket sessions open at once in the process, 1 to 1000000, as many as --ws-memory-budget holds at most; past it an upgrade gets 503',
    see: 'WebSocket sessions',
  }),
  wsMemoryBudget: option<number | string, number>({
    flag: 'ws-memory-budget',
    kind: 'size',
    default: 4096 * 1024 * 1024,
    limits: { min: 1024 * 1024, max: 1024 * 1024 * 1024 * 1024 },
    parse: size,
    within: 'upstream',
    doc:
      'memory all WebSocket sessions together may hold at their worst, 1MiB to 1048576MiB: each may hold 6 x --ws-max-message + 2MiB, ' +
      'and --ws-max-sessions must fit',
    see: 'WebSocket sessions',
  }),
  wsMaxSessionsPerToken: option<number | string, number>({
    flag: 'ws-max-sessions-per-token',
    kind: 'integer',
    shownDefault: 'a quarter of --ws-max-sessions',
    limits: { min: 1, max: 1_000_000 },
    parse: count('WebSocket sessions open at once with one token'),
    within: 'upstream',
    doc: "WebSocket sessions open at once in the process with one token, 1 to 1000000 and at most --ws-max-sessions; past it that token's upgrade gets 503",
    see: 'WebSocket sessions',
  }),
  wsMaxSessionsPerClient: option<number | string, number>({
    flag: 'ws-max-sessions-per-client',
    kind: 'integer',
    shownDefault: 'a quarter of --ws-max-sessions',
    limits: { min: 1, max: 1_000_000 },
    parse: count('WebSocket sessions open at once from one client address'),
    within: 'upstream',
    doc:
      "WebSocket sessions open at once in the process from one client address (an IPv6 address's /64), 1 to 1000000 and at most --ws-max-sessions; " +
      "past it that address's upgrade gets 503",
    see: 'WebSocket sessions',
  }),
  trustedProxies: option<readonly string[], TrustedProxies>({
    flag: 'trusted-proxies',
    kind: 'list',
    default: [],
    shownDefault: 'none',
    parse: proxies,
    doc:
      'comma-separated addresses and CIDR ranges (IPv4, IPv6) of the proxies in front, whose X-Forwarded-For names the client; ' +
      'without them, forwarding headers from clients are dropped',
    see: 'Behind a proxy (`--trusted-proxies`)',
  }),
  metricsPath: option<string, string>({
    flag: 'metrics-path',
    kind: 'text',
    arg: 'PATH',
    default: '/ext/metrics',
    parse: metricsPath,
    doc: 'where Prometheus metrics are served, behind the gate like any endpoint',
    see: 'Metrics',
  }),
  logLevel: option<Level, Level>({
    flag: 'log-level',
    kind: 'text',
    arg: 'LEVEL',
    default: 'info',
    parse: level,
    doc: 'the least level logged: debug, info, warn or error',
    see: 'Logs',
  }),
  accessLog: option<string, string>({
    flag: 'access-log',
    kind: 'path',
    arg: 'FILE',
    shownDefault: 'off',
    parse: accessLog,
    doc:
      'one JSON line per request the gate decided, appended to FILE (created 0640; SIGHUP reopens it, for logrotate), ' +
      'or written to standard output with "stdout"',
    see: 'The access log (`--access-log`)',
  }),
  clusterEtcd: option<string | readonly string[], URL[]>({
    flag: 'cluster-etcd',
    kind: 'text',
    arg: 'URLS',
    parse: etcdUrls,
    doc:
      'comma-separated etcd client URLs, all http:// or all https:// (TLS), such as https://10.0.0.5:2379: ' +
      'join a fleet of gateways sharing one state (none: the data folder)',
    see: 'Running a fleet',
  }),
  clusterName: option<string, string>({
    flag: 'cluster-name',
    kind: 'text',
    arg: 'NAME',
    default: 'api-auth',
    parse: clusterName,
    within: 'clusterEtcd',
    doc: "the fleet's name, its key prefix in etcd",
  }),
  clusterLease: option<number | string, number>({
    flag: 'cluster-lease',
    kind: 'duration',
    default: 10,
    limits: { min: 2, max: 300 },
    parse: duration('10s'),
    within: 'clusterEtcd',
    doc:
      "this gateway's lease in the fleet, 2s to 300s: a stopped or cut-off gateway refuses protected requests before it runs out, " +
      'and holds up a revoke at most this long',
  }),
  fleetOutageGrace: option<number | string, number>({
    flag: 'fleet-outage-grace',
    kind: 'duration',
    default: 0,
    limits: { min: 0, max: 24 * 3600 },
    parse: duration('0s, 30s or 5m'),
    within: 'clusterEtcd',
    doc:
      'how long a gateway that etcd no longer answers keeps serving tokens on its last known state once its lease would have run out, ' +
      '0s to 24h, taking no change meanwhile; a token revoked through a gateway still in touch may work on it this long (0s: 503 at once)',
    see: 'When etcd is down',
  }),
  clusterEtcdCa: option<string, string>({
    flag: 'cluster-etcd-ca',
    kind: 'path',
    shownDefault: "the system's CAs",
    parse: file("the path of the PEM file of the CAs that sign etcd's certificate"),
    within: 'clusterEtcd',
    doc: "PEM file of the CA that signs etcd's certificate, for https:// URLs only",
  }),
  clusterEtcdCert: option<string, string>({
    flag: 'cluster-etcd-cert',
    kind: 'path',
    parse: file("the path of the client certificate's PEM file"),
    within: 'clusterEtcd',
    doc: "this gateway's client certificate for etcd's --client-cert-auth (PEM; with --cluster-etcd-key; https:// only)",
  }),
  clusterEtcdKey: option<string, string>({
    flag: 'cluster-etcd-key',
    kind: 'path',
    parse: file("the path of the client key's PEM file"),
    within: 'clusterEtcd',
    doc: "the client certificate's unencrypted key (PEM; with --cluster-etcd-cert; https:// only)",
  }),
  clusterEtcdUser: option<string, string>({
    flag: 'cluster-etcd-user',
    kind: 'text',
    arg: 'USER',
    parse: text('the name of an etcd user'),
    within: 'clusterEtcd',
    doc:
      "the etcd user to sign in as, when etcd's authentication is on; its role needs readwrite on /NAME/, /NAME.throttle/, " +
      '/NAME.usage/ and /NAME.usage-history/ (NAME: --cluster-name)',
  }),
  clusterEtcdPasswordFile: option<string, string>({
    flag: 'cluster-etcd-password-file',
    kind: 'path',
    parse: file("the path of the etcd user's password file"),
    within: 'clusterEtcd',
    doc: "the file holding that user's password (its line ending trimmed); a password is taken only from a file",
  }),
} as const;

export type Schema = typeof SCHEMA;
export type Key = keyof Schema;
type InputOf<E> = E extends OptionEntry<infer I, unknown, boolean> ? I : never;
export type ValueOf<E> = E extends OptionEntry<unknown, infer V, boolean> ? V : never;
type Defaulted = { [K in Key]: Schema[K] extends OptionEntry<unknown, unknown, true> ? K : never }[Key];

/** startServer's options: the standalone service, as the command line runs it (SCHEMA says what each is). Every one may be left out. */
export type ServerOptions = { readonly [K in Key]?: InputOf<Schema[K]> };

/** What an option left out is, as the option takes it (seconds, bytes). */
export const DEFAULTS = Object.fromEntries(
  Object.entries(SCHEMA)
    .filter(([, entry]) => 'default' in entry)
    .map(([key, entry]) => [key, (entry as OptionSpec<unknown, unknown>).default]),
) as { readonly [K in Defaulted]: InputOf<Schema[K]> };

/** The bounds of options, and the fixed limits beside them. */
export const LIMITS = {
  ...(Object.fromEntries(
    Object.entries(SCHEMA)
      .filter(([, entry]) => 'limits' in entry)
      .map(([key, entry]) => [key, entry.limits]),
  ) as { readonly [K in Key]?: Limits }),
  /** Bytes of a JSON-RPC body that /ext/auth and the built-in endpoints read (64 KiB). */
  rpcBody: MAX_BODY_BYTES,
} as const;

/** Every option's value, checked; undefined for one left out that has no default. */
export type Values = { readonly [K in Key]: K extends Defaulted ? ValueOf<Schema[K]> : ValueOf<Schema[K]> | undefined };
