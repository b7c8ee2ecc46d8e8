// The options, resolved: each checked by its entry in the schema, then how they go
// together (an option within another, the WebSocket sessions' shares of the memory
// budget, the fleet's TLS and user), into the settings the service runs with. Checked
// once, at start, so that nothing on the request path parses options.
import { systemClock } from '../clock.js';
import type { Clock } from '../clock.js';
import { PATH_RULES } from '../core/abi.js';
import type { Core } from '../core/core.js';
import { badOption, OptionError } from '../errors.js';
import type { Text } from '../errors.js';
import type { TlsFiles } from '../pem.js';
import { sessionBytes } from '../session-memory.js';
import type { AuthConfig, AuthOptions, ClusterConfig, EtcdAuthFile, EtcdTlsFiles, ServerConfig } from './config.js';
import { formatBytes, formatSeconds, show } from './format.js';
import { MAX_SESSIONS, SCHEMA } from './schema.js';
import type { Key, Schema, ServerOptions, ValueOf, Values } from './schema.js';
import type { OptionSpec } from './spec.js';

/** The default ceiling of expiresIn: the contract's 12 h lifetime. */
const DEFAULT_CEILING = 12 * 3600;

/** The options' names, in the schema's order. */
const KEYS = Object.keys(SCHEMA) as Key[];

const AUTH_OPTIONS = [
  'passwordFile',
  'dataDir',
  'tokenLifetime',
  'maxTokenLifetime',
  'maxTokens',
  'publicEndpoints',
  'trustedProxies',
  'log',
  'clock',
];

/** The options that shape issued tokens: they mean nothing while no token is required, and say so at start. */
const TOKEN_OPTIONS = ['tokenLifetime', 'maxTokenLifetime', 'maxTokens', 'console', 'consoleSessionMaxLifetime'] as const;

/** TLS to etcd: refused with http:// endpoints, where it would protect nothing. */
const ETCD_TLS_OPTIONS = ['clusterEtcdCa', 'clusterEtcdCert', 'clusterEtcdKey'] as const;

/** Why an option `within` another is refused without it. */
const WITHIN: Readonly<Record<NonNullable<OptionSpec<unknown, unknown>['within']>, (option: string) => Text>> = {
  // The proxy's settings mean nothing without a proxy: a flag that would change nothing is
  // a mistake to point out (a forgotten --upstream, most likely), not to ignore.
  upstream: (option) => (name) =>
    `${name(option)} sets how requests are proxied to the node, and there is no ` +
    `${name('upstream')}: give ${name('upstream')} (such as http://127.0.0.1:9652), or leave ${name(option)} out`,
  clusterEtcd: (option) => (name) =>
    `${name(option)} sets how this gateway joins a fleet, and there is no ` +
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
    passwordFile: required(
      'passwordFile',
      options.passwordFile,
      "the path of the service password's file " + '(a password is generated into it when it is missing)',
    ),
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
    throw new OptionError(
      'passwordFile',
      (name) =>
        `${name('authRequired')} needs ${name('passwordFile')}, the file holding the ` + 'service password (it is generated when missing)',
    );
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
    unusedTokenOptions: v.authRequired ? [] : TOKEN_OPTIONS.filter((key) => options[key] !== undefined).map((key) => SCHEMA[key].flag),
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
    console: v.console,
    consoleSessionMaxLifetime: v.consoleSessionMaxLifetime,
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
    throw new OptionError(
      key,
      (name) =>
        `${name(key)} is ${given}, over ${name('wsMaxSessions')} (${sessions}), which bounds every ` +
        `share: give at most ${sessions}, or raise ${name('wsMaxSessions')}`,
    );
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
  const worst = (name: (option: string) => string) =>
    `at ${name('wsMaxMessage')} ${formatBytes(v.wsMaxMessage)} each session may hold ` + `${formatBytes(each)} (6 x the message + 2MiB)`;
  if (fit < 1) {
    throw new OptionError(
      'wsMemoryBudget',
      (name) =>
        `${name('wsMemoryBudget')} is ${formatBytes(v.wsMemoryBudget)}, and ${worst(name)}: ` +
        `not one session fits. Raise ${name('wsMemoryBudget')}, or lower ${name('wsMaxMessage')}`,
    );
  }
  const given = v.wsMaxSessions;
  if (given === undefined) return Math.min(MAX_SESSIONS, fit);
  if (given > fit) {
    throw new OptionError(
      'wsMaxSessions',
      (name) =>
        `${name('wsMaxSessions')} is ${given}, and ${worst(name)}: ${given} would hold up to ` +
        `${formatBytes(given * each)}, over ${name('wsMemoryBudget')} (${formatBytes(v.wsMemoryBudget)}). Give at most ${fit}, lower ` +
        `${name('wsMaxMessage')}, or raise ${name('wsMemoryBudget')}`,
    );
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
    throw new OptionError(
      'tokenLifetime',
      (name) =>
        `${name('tokenLifetime')} (${formatSeconds(lifetime)}) is longer than ` +
        `${name('maxTokenLifetime')} (${formatSeconds(max)}), the longest lifetime a token may have: shorten the one, or raise the other`,
    );
  }
  return max;
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
      throw new OptionError(
        option,
        (name) =>
          `${name('tlsEnabled')} needs ${name(option)}, the ${option === 'tlsCertFile' ? 'certificate chain' : 'private key'}'s PEM file`,
      );
    }
  }
  return { certFile: v.tlsCertFile!, keyFile: v.tlsKeyFile! };
}

/** The fleet: clusterEtcd needs authRequired (a fleet shares token state), and TLS to etcd needs https:// URLs. */
function cluster(v: Values, options: ServerOptions): ClusterConfig | undefined {
  if (v.clusterEtcd === undefined) return undefined;
  if (!v.authRequired) {
    throw new OptionError(
      'clusterEtcd',
      (name) =>
        `${name('clusterEtcd')} shares the token state of a fleet, and without ` +
        `${name('authRequired')} there is none: add ${name('authRequired')}, or leave ${name('clusterEtcd')} out`,
    );
  }
  const secure = v.clusterEtcd[0].protocol === 'https:';
  return {
    endpoints: v.clusterEtcd.map((url) => url.origin),
    name: v.clusterName,
    leaseSeconds: v.clusterLease,
    outageGraceSeconds: v.fleetOutageGrace,
    tls: etcdTls(v, options, secure),
    auth: etcdAuth(v, options),
  };
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
        throw new OptionError(
          option,
          (name) =>
            `${name(option)} sets TLS to etcd, and ${name('clusterEtcd')} names http:// URLs, ` +
            `which do not use TLS: the connection would not be protected. Give https:// URLs, or leave ${name(option)} out`,
        );
      }
    }
    return undefined;
  }
  pair('clusterEtcdCert', 'clusterEtcdKey', options, "its private key's PEM file (mutual TLS needs both)");
  pair('clusterEtcdKey', 'clusterEtcdCert', options, "the client certificate's PEM file (mutual TLS needs both)");
  const { clusterEtcdCert: certFile, clusterEtcdKey: keyFile } = v;
  return { caFile: v.clusterEtcdCa, client: certFile !== undefined && keyFile !== undefined ? { certFile, keyFile } : undefined };
}

/** etcd's authentication: a user and its password's file, both or neither. */
function etcdAuth(v: Values, options: ServerOptions): EtcdAuthFile | undefined {
  pair(
    'clusterEtcdUser',
    'clusterEtcdPasswordFile',
    options,
    'the file holding its password (a password is never taken on the command line)',
  );
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
