// The server's command line: flags in, the library's options out, validated by the
// library's own resolver (options.ts), so that the command and the library share one
// set of defaults, limits and checks. Messages show the flags where the library names
// its options.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { OptionError, UsageError } from '../errors.js';
import type { Namer } from '../errors.js';
import { DEFAULTS, resolveServerOptions } from '../options.js';
import type { ServerOptions } from '../options.js';
import { readArgs } from './args.js';
import type { FlagKinds } from './args.js';

export type Command =
  | { readonly action: 'serve'; readonly options: ServerOptions }
  | { readonly action: 'help' }
  | { readonly action: 'version' };

type Option = keyof ServerOptions;

/** Each flag: the option it sets, its kind, and how its text becomes the option's value (as is, by default). */
const FLAGS: Readonly<Record<string, { option: Option; kind: 'string' | 'boolean'; value?: (text: string) => unknown }>> = {
  'http-host': { option: 'host', kind: 'string' },
  'http-port': { option: 'port', kind: 'string' },
  'api-auth-required': { option: 'authRequired', kind: 'boolean' },
  'api-auth-password-file': { option: 'passwordFile', kind: 'string' },
  'api-auth-token-lifetime': { option: 'tokenLifetime', kind: 'string' },
  'api-auth-max-tokens': { option: 'maxTokens', kind: 'string' },
  'data-dir': { option: 'dataDir', kind: 'string', value: expandHome },
  'api-auth-public-endpoints': { option: 'publicEndpoints', kind: 'string', value: (text) => list(text).map((path) => path.trim()) },
  'upstream': { option: 'upstream', kind: 'string' },
  'upstream-timeout': { option: 'upstreamTimeout', kind: 'string' },
  'upstream-max-body': { option: 'upstreamMaxBody', kind: 'string' },
  'upstream-pipelining': { option: 'upstreamPipelining', kind: 'string' },
  'trusted-proxies': { option: 'trustedProxies', kind: 'string', value: list },
  'metrics-path': { option: 'metricsPath', kind: 'string' },
  'log-level': { option: 'logLevel', kind: 'string' },
  'http-threads': { option: 'httpThreads', kind: 'string' },
  'http-tls-enabled': { option: 'tlsEnabled', kind: 'boolean' },
  'http-tls-cert-file': { option: 'tlsCertFile', kind: 'string', value: expandHome },
  'http-tls-key-file': { option: 'tlsKeyFile', kind: 'string', value: expandHome },
  'http-allowed-origins': { option: 'allowedOrigins', kind: 'string' },
  'api-auth-query-token': { option: 'queryToken', kind: 'boolean' },
  'ws-max-message': { option: 'wsMaxMessage', kind: 'string' },
  'ws-idle-timeout': { option: 'wsIdleTimeout', kind: 'string' },
  'ws-max-sessions': { option: 'wsMaxSessions', kind: 'string' },
  'cluster-etcd': { option: 'clusterEtcd', kind: 'string' },
  'cluster-name': { option: 'clusterName', kind: 'string' },
  'cluster-lease': { option: 'clusterLease', kind: 'string' },
  'cluster-etcd-ca': { option: 'clusterEtcdCa', kind: 'string', value: expandHome },
  'cluster-etcd-cert': { option: 'clusterEtcdCert', kind: 'string', value: expandHome },
  'cluster-etcd-key': { option: 'clusterEtcdKey', kind: 'string', value: expandHome },
  'cluster-etcd-user': { option: 'clusterEtcdUser', kind: 'string' },
  'cluster-etcd-password-file': { option: 'clusterEtcdPasswordFile', kind: 'string', value: expandHome },
};

const KINDS: FlagKinds = {
  ...Object.fromEntries(Object.entries(FLAGS).map(([flag, { kind }]) => [flag, kind])),
  help: 'boolean',
  version: 'boolean',
};

const FLAG_OF: ReadonlyMap<string, string> = new Map(Object.entries(FLAGS).map(([flag, { option }]) => [option, `--${flag}`]));

/** Names options by their flags, for the messages of the command line. */
export const flagName: Namer = (option) => FLAG_OF.get(option) ?? option;

/** Parses the arguments after the program name. Throws UsageError, with the line to show. */
export function parseArgs(args: readonly string[]): Command {
  const options: Record<string, unknown> = {};
  // In order, like Go's flag package: --help and --version act where they appear.
  for (const arg of readArgs(args, KINDS, { command: 'api-auth', stopAt: ['help', 'version'] })) {
    if (arg.kind === 'positional') {
      throw new UsageError(`unexpected argument ${JSON.stringify(arg.value)}; api-auth takes only flags (run api-auth --help to list them)`);
    }
    if (arg.name === 'help' || arg.name === 'version') {
      if (arg.value === true) return { action: arg.name };
      continue;
    }
    const flag = FLAGS[arg.name];
    options[flag.option] = flag.value === undefined || typeof arg.value !== 'string' ? arg.value : flag.value(arg.value);
  }
  try {
    resolveServerOptions(options);
  } catch (error) {
    if (error instanceof OptionError) throw new UsageError(error.describe(flagName));
    throw error;
  }
  return { action: 'serve', options };
}

/** An empty list for an empty flag; the entries are the resolver's to check. */
function list(text: string): string[] {
  return text.trim() === '' ? [] : text.split(',');
}

// The shell expands "~" only at the start of a word, so `--data-dir=~/x` arrives unexpanded.
function expandHome(path: string): string {
  return path === '~' || path.startsWith('~/') ? join(homedir(), path.slice(1)) : path;
}

export const USAGE = `Usage: api-auth [flags]

A node's authorization token service: JSON-RPC 2.0 at POST /ext/auth, and a bearer-token
check in front of every other endpoint.

Flags:
  --http-host HOST                    address to listen on (default ${DEFAULTS.host})
  --http-port PORT                    port to listen on, 0 picks a free one (default ${DEFAULTS.port})
  --http-threads N                    threads serving HTTP, 1 to 256 (default: every core
                                      the process may use, here ${DEFAULTS.httpThreads})
  --http-tls-enabled[=true|false]     serve HTTPS with the two files below (default false);
                                      SIGHUP reloads them, open connections stay
  --http-tls-cert-file PATH           the certificate chain's PEM file
  --http-tls-key-file PATH            the private key's PEM file
  --http-allowed-origins ORIGINS      origins whose browser pages may call (CORS), separated
                                      by spaces or commas: https://wallet.example,
                                      https://*.example, or * for every origin (default
                                      ${DEFAULTS.allowedOrigins}); preflights are answered without a token
  --api-auth-required[=true|false]    require a token on every endpoint but /ext/auth
                                      (default false)
  --api-auth-password-file PATH       file holding the service password; required with
                                      --api-auth-required; generated (mode 0600) if it
                                      does not exist
  --api-auth-token-lifetime DURATION  lifetime of new tokens: 90s, 15m, 12h, 1h30m
                                      (1s to 8760h; default 12h); also the longest
                                      expiresIn a token may be issued with
  --api-auth-max-tokens N             live tokens at most, revoked ones until they expire
                                      (1 to 1000000; default ${DEFAULTS.maxTokens})
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
  --upstream-pipelining N             requests sent on one upstream connection before
                                      their answers (1 to 64; default ${DEFAULTS.upstreamPipelining}: none pipelined)
  --trusted-proxies LIST              comma-separated addresses and CIDR ranges of proxies
                                      in front (such as 10.0.0.0/8,2001:db8::1) whose
                                      X-Forwarded-For names the client (default none:
                                      forwarding headers from clients are dropped)
  --api-auth-query-token[=true|false] also take the token of a WebSocket upgrade without
                                      an Authorization header from its access_token query
                                      parameter, removed before the upstream (default
                                      false: URLs end up in histories and proxies' logs)
  --ws-max-message SIZE               largest WebSocket message relayed either way: bytes,
                                      or with KiB or MiB; a larger one closes the session
                                      with 1009 (default 16MiB)
  --ws-idle-timeout DURATION          a WebSocket session whose client or upstream sends
                                      nothing, not even a pong to a ping, for this long
                                      is closed (8s to 960s; default 120s)
  --ws-max-sessions N                 WebSocket sessions open at once; past it an upgrade
                                      gets 503 (default ${DEFAULTS.wsMaxSessions})
  --cluster-etcd URLS                 join a fleet of gateways sharing one state through etcd:
                                      its client URLs, comma-separated, all http:// or all
                                      https:// (TLS), such as https://10.0.0.5:2379
                                      (default none: the data folder)
  --cluster-name NAME                 the fleet's name, its key prefix in etcd (default ${DEFAULTS.clusterName})
  --cluster-lease DURATION            this gateway's lease in the fleet, 2s to 300s: a stopped
                                      or cut-off gateway refuses protected requests before it
                                      runs out, and holds up a revoke at most this long
                                      (default ${DEFAULTS.clusterLease}s)
  --cluster-etcd-ca PATH              PEM file of the CA that signs etcd's certificate
                                      (default: the system's CAs); https:// only
  --cluster-etcd-cert PATH            this gateway's client certificate for etcd (PEM), for
  --cluster-etcd-key PATH             etcd's --client-cert-auth, and its unencrypted key;
                                      both or neither; https:// only
  --cluster-etcd-user USER            the etcd user to connect as, when etcd's authentication
                                      is enabled; its role needs readwrite on the key
                                      prefixes /${DEFAULTS.clusterName}/ and /${DEFAULTS.clusterName}.throttle/ (the
                                      --cluster-name's)
  --cluster-etcd-password-file PATH   the file holding that user's password (its line ending
                                      trimmed); never the password on the command line
  --metrics-path PATH                 where Prometheus metrics are served, protected like
                                      any endpoint (default ${DEFAULTS.metricsPath})
  --log-level LEVEL                   debug, info, warn or error (default ${DEFAULTS.logLevel})
  --help                              print this help and exit
  --version                           print the version and exit

Flags take "--name value" or "--name=value"; true/false flags also take a bare "--name".

Operator commands talk to a running node's /ext/auth (run "api-auth token --help"):
  api-auth token new --endpoints /ext/info,/ext/bc/X [--label TEXT] [--expires-in 1h]
                     [--methods eth_*] [--password-file PATH]
  api-auth token list [--json] [--password-file PATH]
  api-auth token revoke --token-file PATH|--token-stdin|--id ID [--password-file PATH]
  api-auth password change [--password-file PATH] [--new-password-file PATH]
`;
