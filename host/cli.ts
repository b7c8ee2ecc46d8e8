// The command line: flags in, a validated Options object out. Everything a request will
// need from the flags is checked and converted here, once, so nothing on the request
// path parses options.
import { availableParallelism, homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { NO_TRUSTED_PROXIES, trustedProxies } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import { LEVELS } from './log.js';
import type { Level } from './log.js';

/** What the program runs with, validated. */
export interface Options {
  httpHost: string;
  httpPort: number;
  /** Threads serving HTTP, 1 to MAX_HTTP_THREADS. */
  httpThreads: number;
  apiAuthRequired: boolean;
  /** Absolute path; set whenever apiAuthRequired is. */
  apiAuthPasswordFile: string | undefined;
  /** Seconds. */
  apiAuthTokenLifetime: number;
  /** Absolute path. */
  dataDir: string;
  /** Paths that need no token (exact paths, checked against the path rules at start). */
  apiAuthPublicEndpoints: string[];
  /** The node to protect; undefined serves the built-in node endpoints. */
  upstream: URL | undefined;
  /** Milliseconds. */
  upstreamTimeout: number;
  /** Bytes. */
  upstreamMaxBody: number;
  /** The proxies in front whose X-Forwarded-For, -Host and -Proto are believed. */
  trustedProxies: TrustedProxies;
  /** Where the Prometheus metrics are served. */
  metricsPath: string;
  logLevel: Level;
}

export const DEFAULT_UPSTREAM_TIMEOUT = 30_000;
export const DEFAULT_UPSTREAM_MAX_BODY = 1024 * 1024;
const MAX_UPSTREAM_MAX_BODY = 1024 * 1024 * 1024;

export type Command =
  | { readonly action: 'serve'; readonly options: Options }
  | { readonly action: 'help' }
  | { readonly action: 'version' };

/** A bad command line. The message is the one line to print; the process exits with `exitCode`. */
export class UsageError extends Error {
  readonly exitCode = 2;

  constructor(problem: string) {
    super(`api-auth: ${problem}`);
    this.name = 'UsageError';
  }
}

/** The most threads --http-threads takes. */
export const MAX_HTTP_THREADS = 256;

export const MIN_TOKEN_LIFETIME = 1;
export const MAX_TOKEN_LIFETIME = 8760 * 3600;

export const USAGE = `Usage: api-auth [flags]

A node's authorization token service: JSON-RPC 2.0 at POST /ext/auth, and a bearer-token
check in front of every other endpoint.

Flags:
  --http-host HOST                    address to listen on (default 127.0.0.1)
  --http-port PORT                    port to listen on, 0 picks a free one (default 9650)
  --http-threads N                    threads serving HTTP, 1 to 256 (default: every
                                      core the process may use, here ${availableParallelism()})
  --api-auth-required[=true|false]    require a token on every endpoint but /ext/auth
                                      (default false)
  --api-auth-password-file PATH       file holding the service password; required with
                                      --api-auth-required; generated (mode 0600) if it
                                      does not exist
  --api-auth-token-lifetime DURATION  lifetime of new tokens: 90s, 15m, 12h, 1h30m
                                      (1s to 8760h; default 12h)
  --data-dir PATH                     where durable state lives (default ~/.api-auth)
  --api-auth-public-endpoints PATHS   comma-separated exact paths that need no token, such
                                      as /ext/health (default none)
  --upstream URL                      the node to protect, such as http://127.0.0.1:9652:
                                      every authorised request is proxied to the same path
                                      there (default none: built-in /ext/info, /ext/health)
  --upstream-timeout DURATION         how long the upstream may take to start answering,
                                      and between parts of its answer; then 504
                                      (default 30s)
  --upstream-max-body SIZE            largest request body proxied: bytes, or with KiB or
                                      MiB (default 1MiB; /ext/auth takes at most 64 KiB)
  --trusted-proxies LIST              comma-separated addresses and CIDR ranges of proxies
                                      in front (such as 10.0.0.0/8,2001:db8::1) whose
                                      X-Forwarded-For names the client (default none:
                                      forwarding headers from clients are dropped)
  --metrics-path PATH                 where Prometheus metrics are served, protected like
                                      any endpoint (default /ext/metrics)
  --log-level LEVEL                   debug, info, warn or error (default info)
  --help                              print this help and exit
  --version                           print the version and exit

Flags take "--name value" or "--name=value"; true/false flags also take a bare "--name".

Operator commands talk to a running node's /ext/auth (run "api-auth token --help"):
  api-auth token new --endpoints /ext/info,/ext/bc/X [--password-file PATH]
  api-auth token revoke TOKEN [--password-file PATH]
  api-auth password change [--password-file PATH] [--new-password-file PATH]
`;

type Flag =
  | { readonly kind: 'bool'; readonly set: (o: Draft, value: boolean) => void }
  | { readonly kind: 'value'; readonly set: (o: Draft, value: string, name: string) => void };

interface Draft extends Options {
  help: boolean;
  version: boolean;
}

const FLAGS: ReadonlyMap<string, Flag> = new Map<string, Flag>([
  ['http-host', { kind: 'value', set: (o, v, n) => { o.httpHost = nonEmpty(v, n, 'an address such as 127.0.0.1 or 0.0.0.0'); } }],
  ['http-port', { kind: 'value', set: (o, v, n) => { o.httpPort = parsePort(v, n); } }],
  ['http-threads', { kind: 'value', set: (o, v, n) => { o.httpThreads = parseThreads(v, n); } }],
  ['api-auth-required', { kind: 'bool', set: (o, v) => { o.apiAuthRequired = v; } }],
  ['api-auth-password-file', { kind: 'value', set: (o, v, n) => { o.apiAuthPasswordFile = resolve(nonEmpty(v, n, 'the path of the password file')); } }],
  ['api-auth-token-lifetime', { kind: 'value', set: (o, v, n) => { o.apiAuthTokenLifetime = parseLifetime(v, n); } }],
  ['data-dir', { kind: 'value', set: (o, v, n) => { o.dataDir = expandHome(nonEmpty(v, n, 'a folder path')); } }],
  ['api-auth-public-endpoints', { kind: 'value', set: (o, v, n) => { o.apiAuthPublicEndpoints = parsePathList(v, n); } }],
  ['upstream', { kind: 'value', set: (o, v, n) => { o.upstream = parseUpstream(v, n); } }],
  ['upstream-timeout', { kind: 'value', set: (o, v, n) => { o.upstreamTimeout = parseTimeout(v, n); } }],
  ['upstream-max-body', { kind: 'value', set: (o, v, n) => { o.upstreamMaxBody = parseSize(v, n); } }],
  ['trusted-proxies', { kind: 'value', set: (o, v, n) => { o.trustedProxies = parseTrustedProxies(v, n); } }],
  ['metrics-path', { kind: 'value', set: (o, v, n) => { o.metricsPath = parsePath(v, n); } }],
  ['log-level', { kind: 'value', set: (o, v, n) => { o.logLevel = parseLevel(v, n); } }],
  ['help', { kind: 'bool', set: (o, v) => { o.help = v; } }],
  ['version', { kind: 'bool', set: (o, v) => { o.version = v; } }],
]);

/** Parses the arguments after the program name. Throws UsageError. */
export function parseArgs(args: readonly string[]): Command {
  const o: Draft = {
    httpHost: '127.0.0.1',
    httpPort: 9650,
    httpThreads: Math.min(availableParallelism(), MAX_HTTP_THREADS),
    apiAuthRequired: false,
    apiAuthPasswordFile: undefined,
    apiAuthTokenLifetime: 12 * 3600,
    dataDir: join(homedir(), '.api-auth'),
    apiAuthPublicEndpoints: [],
    upstream: undefined,
    upstreamTimeout: DEFAULT_UPSTREAM_TIMEOUT,
    upstreamMaxBody: DEFAULT_UPSTREAM_MAX_BODY,
    trustedProxies: NO_TRUSTED_PROXIES,
    metricsPath: '/ext/metrics',
    logLevel: 'info',
    help: false,
    version: false,
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') {
      if (i + 1 < args.length) throw unexpectedArgument(args[i + 1]);
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      const previous = FLAGS.get(args[i - 1]?.slice(2) ?? '');
      if (previous?.kind === 'bool' && (arg === 'true' || arg === 'false')) {
        throw new UsageError(`unexpected argument ${JSON.stringify(arg)}; write ${args[i - 1]}=${arg}`);
      }
      throw unexpectedArgument(arg);
    }
    if (!arg.startsWith('--')) throw new UsageError(`unknown flag ${arg}; flags start with two dashes (run api-auth --help to list them)`);
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const flag = FLAGS.get(name);
    if (flag === undefined) throw new UsageError(`unknown flag --${name}; run api-auth --help to list the flags`);
    const inline = eq < 0 ? undefined : arg.slice(eq + 1);
    if (flag.kind === 'bool') {
      flag.set(o, parseBool(inline, name));
    } else {
      let value = inline;
      if (value === undefined) {
        const next = args[i + 1];
        // A flag where the value should be is almost always a forgotten value; a value
        // that really starts with "--" can still be given as --name=--value.
        if (next === undefined || next.startsWith('--')) {
          throw new UsageError(`--${name} needs a value: --${name} <value> or --${name}=<value>`);
        }
        value = next;
        i++;
      }
      flag.set(o, value, name);
    }
    // Like Go's flag package: --help and --version act where they appear, so a later
    // mistake does not hide the help.
    if (o.help) return { action: 'help' };
    if (o.version) return { action: 'version' };
  }
  if (o.apiAuthRequired && o.apiAuthPasswordFile === undefined) {
    throw new UsageError('--api-auth-required needs --api-auth-password-file <path>, the file holding the service password (it is generated when missing)');
  }
  const { help: _help, version: _version, ...options } = o;
  return { action: 'serve', options };
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

function parseLifetime(text: string, name: string): number {
  const seconds = parseDuration(text);
  if (seconds === null) {
    throw new UsageError(`--${name} must be a duration in whole seconds such as 90s, 15m, 12h or 1h30m, not ${JSON.stringify(text)}`);
  }
  if (seconds < MIN_TOKEN_LIFETIME || seconds > MAX_TOKEN_LIFETIME) {
    throw new UsageError(`--${name} must be from 1s to 8760h (one year), not ${JSON.stringify(text)}`);
  }
  return seconds;
}

function parseTimeout(text: string, name: string): number {
  const seconds = parseDuration(text);
  if (seconds === null || seconds < 1 || seconds > 3600) {
    throw new UsageError(`--${name} must be a duration in whole seconds from 1s to 1h, such as 30s or 2m, not ${JSON.stringify(text)}`);
  }
  return seconds * 1000;
}

const SIZE_UNITS: Record<string, number> = { '': 1, KiB: 1024, MiB: 1024 * 1024 };

function parseSize(text: string, name: string): number {
  const m = /^(\d{1,10})(KiB|MiB)?$/.exec(text);
  const bytes = m === null ? NaN : Number(m[1]) * SIZE_UNITS[m[2] ?? ''];
  if (!(bytes >= 1 && bytes <= MAX_UPSTREAM_MAX_BODY)) {
    throw new UsageError(`--${name} must be a size from 1 byte to 1024MiB: a number of bytes, or a number followed by KiB or MiB (such as 1MiB), not ${JSON.stringify(text)}`);
  }
  return bytes;
}

/**
 * The node to proxy to: an http or https origin. A path would be ambiguous (the request's
 * path is sent as it came), so none is taken.
 */
function parseUpstream(text: string, name: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--${name} must be a URL such as http://127.0.0.1:9652, not ${JSON.stringify(text)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`--${name} must be an http:// or https:// URL, not ${JSON.stringify(text)}`);
  }
  if (url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    throw new UsageError(`--${name} must be just scheme, host and port, such as http://127.0.0.1:9652 (requests keep their own path), not ${JSON.stringify(text)}`);
  }
  return url;
}

/**
 * A comma-separated list of exact request paths. The path rules themselves (dot segments,
 * encodings) are the core's, checked when the server starts.
 */
function parsePathList(text: string, name: string): string[] {
  if (text.trim() === '') return [];
  return [...new Set(text.split(',').map((entry) => parsePath(entry.trim(), name)))];
}

function parseTrustedProxies(text: string, name: string): TrustedProxies {
  if (text.trim() === '') return NO_TRUSTED_PROXIES;
  try {
    return trustedProxies(text.split(','));
  } catch (error) {
    throw new UsageError(`--${name}: ${(error as Error).message}`);
  }
}

function parsePath(path: string, name: string): string {
  if (!path.startsWith('/') || path.includes('*') || path.includes('?')) {
    throw new UsageError(`--${name} takes exact absolute paths such as /ext/health (no "*", no query), not ${JSON.stringify(path)}`);
  }
  return path;
}

function parseLevel(text: string, name: string): Level {
  if (!(LEVELS as readonly string[]).includes(text)) throw new UsageError(`--${name} must be one of ${LEVELS.join(', ')}, not ${JSON.stringify(text)}`);
  return text as Level;
}

function parsePort(text: string, name: string): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port <= 65535)) throw new UsageError(`--${name} must be a whole number from 0 to 65535 (0 picks a free port), not ${JSON.stringify(text)}`);
  return port;
}

function parseThreads(text: string, name: string): number {
  const threads = /^\d{1,3}$/.test(text) ? Number(text) : NaN;
  if (!(threads >= 1 && threads <= MAX_HTTP_THREADS)) {
    throw new UsageError(`--${name} must be a whole number from 1 to ${MAX_HTTP_THREADS} (threads serving HTTP), not ${JSON.stringify(text)}`);
  }
  return threads;
}

function parseBool(text: string | undefined, name: string): boolean {
  if (text === undefined || text === 'true') return true;
  if (text === 'false') return false;
  throw new UsageError(`--${name} takes no value, or =true or =false, not ${JSON.stringify(text)}`);
}

function nonEmpty(text: string, name: string, what: string): string {
  if (text.trim() === '') throw new UsageError(`--${name} must not be empty; give ${what}`);
  return text;
}

// The shell expands "~" only at the start of a word, so `--data-dir=~/x` arrives unexpanded.
function expandHome(path: string): string {
  return resolve(path === '~' || path.startsWith('~/') ? join(homedir(), path.slice(1)) : path);
}

function unexpectedArgument(arg: string): UsageError {
  return new UsageError(`unexpected argument ${JSON.stringify(arg)}; api-auth takes only flags (run api-auth --help to list them)`);
}
