// What the resolver gives: the token service's and the standalone service's settings,
// validated, and createAuth's options, which are a few of startServer's.
import type { TrustedProxies } from '../addresses.js';
import type { Clock } from '../clock.js';
import type { Level, Logger } from '../ops/log.js';
import type { AllowedOrigins } from '../origins.js';
import type { TlsFiles } from '../pem.js';
import type { ServerOptions } from './schema.js';

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
  /** The token options given while no token is required (tokenLifetime, maxTokenLifetime, maxTokens): each warned about at start. */
  readonly unusedTokenOptions: readonly string[];
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
  /** --console: the operator's console at /ext/auth/console. */
  readonly console: boolean;
  /** --console-session-max-lifetime, seconds: the longest a console session's renewals run from its sign-in. */
  readonly consoleSessionMaxLifetime: number;
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

export type { TlsFiles } from '../pem.js';
