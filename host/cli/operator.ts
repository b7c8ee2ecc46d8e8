// The operator commands: `api-auth token new`, `api-auth token list`, `api-auth token
// revoke`, `api-auth token rotate`, `api-auth password change`. Each is one call to a running node's /ext/auth. Passwords come from a file,
// from stdin, or from a prompt that does not echo; never from the command line, where
// other users could read them in the process list. A token to revoke comes the same
// ways; on the command line it is still taken, with a warning.
//
// Exit codes: 0 success; 1 the node refused (a JSON-RPC error: incorrect password,
// throttled, invalid params); 2 a bad command line; 3 the node could not be reached, or
// did not answer like an api-auth node.
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { rootCertificates } from 'node:tls';
import { NodeRefusedError, NodeUnreachableError, OperatorExitCode as ExitCode, UsageError } from '../errors.js';
import { NEVER, parseDuration } from '../duration.js';
import { reason, whyUnreadable } from '../pem.js';
import { MAX_PASSWORD_LENGTH, countCodePoints } from '../password/file.js';
import { nonEmpty, readArgs } from './args.js';
import { readCommand } from './flags.js';
import { CONFIG_FILE, expandHome, unknownEnvironment } from './sources.js';
import type { Environment } from './sources.js';
import { resolveServerOptions } from '../options.js';
import { collapseMethodSets, expandMethodSets } from '../method-sets.js';
import type { FlagKinds } from './args.js';

export const DEFAULT_URI = 'http://127.0.0.1:9650';
const DEFAULT_TIMEOUT_MS = 30_000;
// Far more than a 1024-character password; stops a wrong path from being read whole.
const MAX_SECRET_BYTES = 64 * 1024;

export const OPERATOR_USAGE = `Usage:
  api-auth token new --endpoints PATHS [flags]   issue a token; prints it
  api-auth token list [flags]                    list the live tokens (never the
                                                 tokens themselves)
  api-auth token revoke --token-file PATH [flags]
                                                 revoke a token (or --token-stdin,
                                                 or a prompt; TOKEN in place of the
                                                 flag works, with a warning)
  api-auth token revoke --id ID [flags]          revoke a token by its id, as token
                                                 new --json and token list show it
  api-auth token rotate --id ID [--overlap DURATION] [flags]
                                                 replace a token by a new one of the
                                                 same endpoints, methods, limits and
                                                 label; prints the new token (or
                                                 --token-file, --token-stdin, TOKEN)
  api-auth password change [flags]               change the service password; every
                                                 token issued before stops working

Each command calls the /ext/auth service of a running api-auth node.

Flags:
  --uri URL                  the node (default ${DEFAULT_URI})
  --endpoints PATHS          token new: comma-separated endpoints the token grants:
                             "*", exact paths, "/" for the root alone (where
                             Ethereum nodes serve), or subtrees such as /ext/bc/*
  --label TEXT               token new: a label for people, 1 to 128 characters
  --expires-in DURATION      token new: the token's lifetime, such as 90s, 15m,
                             1h30m or 720h (default the node's
                             --api-auth-token-lifetime); at most the node's
                             --max-token-lifetime; "never" only when that is never
  --methods PATTERNS         token new: comma-separated JSON-RPC methods the token
                             may call: exact names, prefixes ending in * (eth_*),
                             or * (default: every method); and named sets of
                             Ethereum methods, sent as their names: @chain,
                             @read, @send, @subscribe, @filter
  --rate-limit RATE          token new: calls the token may make, N/s, N/m or N/h
                             (N from 1 to 1000000), shared by every thread
  --burst N                  token new: calls it may make at once (default: the
                             rate per second, rounded up); only with --rate-limit
  --allowed-clients CIDRS    token new: comma-separated IPv4 or IPv6 addresses or
                             ranges (at most 64) the token works from
  --id ID                    token revoke, token rotate: the id of the token
  --overlap DURATION         token rotate: how long the old token stays valid
                             beside the new one, such as 10m or 24h (default 0s:
                             it ends at once); at most its remaining life
  --password-file PATH       read the service password from this file (white space
                             around it is trimmed, as the node does)
  --password-stdin           read the service password from stdin
  --new-password-file PATH   password change: read the new password from this file
  --new-password-stdin       password change: read the new password from stdin
  --token-file PATH          token revoke, token rotate: read the token from this
                             file
  --token-stdin              token revoke, token rotate: read the token from stdin
                             ("-" in place of TOKEN says the same)
  --json                     print the result as one JSON object (token new and
                             token rotate: with the token's id; token list:
                             {"tokens": [...]})
  --timeout DURATION         how long to wait for the node (default 30s)
  --cacert FILE              trust the CA certificate(s) in this PEM file for an
                             https:// --uri, beside the system's (a node whose
                             certificate a private CA signed, or a self-signed one)
  --config-file PATH         the node's own config file: its api-auth-password-file,
                             http-host, http-port and http-tls-enabled give the
                             defaults of --password-file and --uri (default: the
                             file API_AUTH_CONFIG_FILE names, if any)
  --help                     print this help and exit

The node's own settings give the defaults, as the node reads them: API_AUTH_PASSWORD_FILE,
API_AUTH_HTTP_HOST, API_AUTH_HTTP_PORT and API_AUTH_HTTP_TLS_ENABLED in the environment,
then the config file; a flag beats both. So a shell with the node's environment needs
no flag: API_AUTH_PASSWORD_FILE=/etc/api-auth/password api-auth token list.

Without a flag for a secret (password, new password, token), the command prompts
for it on the terminal without echo. Passwords are never taken on the command line.
A token is, but that is the weaker choice: while the command runs, any user of this
machine can read its command line (ps, /proc/PID/cmdline), and the shell keeps it in
its history. Secrets read from a file, stdin or the terminal must be UTF-8 text.

token list prints a table: id, label, endpoints, methods, rate limit and burst,
allowed clients, expiry (UTC), whether the token is revoked, the token a rotation
replaced it by (ROTATED TO), its last use (UTC, "-" for never) and the calls let
through (a rotation's new token counts its old one's too); methods that make up a
named set show as its name (@read); a revoked token is listed until it expires.

token rotate gives the new token a lifetime equal to the old one's whole lifetime,
at most the node's --max-token-lifetime. The old token works for --overlap, then
ends as if revoked, on every gateway of a fleet, across restarts.

token revoke says what happened: "token revoked", "token already revoked", or, for a
token (or id) that is not a live one of this node (mistyped, expired, of an earlier
password), that nothing was revoked.

Exit codes: 0 success (for token revoke: the token is revoked now); 1 the node refused
(incorrect password, throttled, invalid endpoints), or token revoke revoked nothing;
2 a bad command line; 3 the node could not be reached.
`;

interface OperatorOptions {
  uri: string;
  endpoints: string[];
  label: string | undefined;
  expiresIn: string | undefined;
  overlap: string | undefined;
  methods: string[];
  rateLimit: string | undefined;
  burst: number | undefined;
  allowedClients: string[];
  id: string | undefined;
  passwordFile: string | undefined;
  passwordStdin: boolean;
  newPasswordFile: string | undefined;
  newPasswordStdin: boolean;
  tokenFile: string | undefined;
  tokenStdin: boolean;
  json: boolean;
  timeoutMs: number;
  cacert: string | undefined;
  configFile: string | undefined;
  help: boolean;
  /** How the password file was named, for the messages: its flag, or the node's setting that gave it. */
  passwordFileNamed: string;
  uriGiven: boolean;
}

type Action = 'token new' | 'token list' | 'token revoke' | 'token rotate' | 'password change';

const ACTIONS: readonly string[] = ['token new', 'token list', 'token revoke', 'token rotate', 'password change'];

/** The commands that take a token (or its --id). */
const TAKES_TOKEN: readonly string[] = ['token revoke', 'token rotate'];

/** Where the command writes; the defaults are the process's own. */
export interface OperatorIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly stdin: NodeJS.ReadStream;
  /** The environment whose API_AUTH_ variables give the node's settings (default: the process's). */
  readonly env?: Environment;
}

/** Whether `args` (after the program name) is an operator command rather than server flags. */
export function isOperatorCommand(args: readonly string[]): boolean {
  return args[0] === 'token' || args[0] === 'password';
}

/** Runs an operator command to its end; resolves with the exit code. */
export async function runOperatorCommand(args: readonly string[], io: OperatorIo = processIo()): Promise<number> {
  const json = args.includes('--json') || args.includes('--json=true');
  try {
    const { action, options, positional } = parseOperatorArgs(args);
    if (options.help) {
      io.stdout(OPERATOR_USAGE);
      return ExitCode.Ok;
    }
    fromNodeSettings(options, io.env ?? process.env, io);
    return await run(action, options, positional, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`api-auth: ${error.message}\n`);
      return ExitCode.Usage;
    }
    if (error instanceof NodeRefusedError) {
      if (json) io.stdout(JSON.stringify({ error: { code: error.rpcCode, message: error.message } }) + '\n');
      else io.stderr(`api-auth: the node refused: ${error.message} (${error.rpcCode})\n`);
      return error.exitCode;
    }
    // Only a node that did not answer is "unreachable" (3): a script retries that, and
    // must not retry the command's own failure.
    const unreachable = error instanceof NodeUnreachableError;
    const message = unreachable ? error.message : `unexpected failure: ${error instanceof Error ? error.message : String(error)}`;
    if (json) io.stdout(JSON.stringify({ error: { message } }) + '\n');
    else io.stderr(`api-auth: ${message}\n`);
    return unreachable ? error.exitCode : ExitCode.Failed;
  }
}

async function run(action: Action, options: OperatorOptions, positional: string[], io: OperatorIo): Promise<number> {
  if (!TAKES_TOKEN.includes(action) && (options.tokenFile !== undefined || options.tokenStdin)) {
    throw new UsageError(`--token-file and --token-stdin belong to "api-auth token revoke" and "api-auth token rotate", not "api-auth ${action}"`);
  }
  // "-" in place of the token is stdin, as most commands read it.
  if (TAKES_TOKEN.includes(action) && positional.length === 1 && positional[0] === '-') {
    positional = [];
    if (options.tokenStdin) throw new UsageError('give --token-stdin or "-", not both');
    options.tokenStdin = true;
  }
  if (action !== 'password change' && (options.newPasswordFile !== undefined || options.newPasswordStdin)) {
    throw new UsageError(`--new-password-file and --new-password-stdin belong to "api-auth password change", not "api-auth ${action}"`);
  }
  // Past the checks above, at most two of them are left.
  const stdinUsers = [
    options.passwordStdin && '--password-stdin', options.newPasswordStdin && '--new-password-stdin', options.tokenStdin && '--token-stdin',
  ].filter((flag) => flag !== false);
  if (stdinUsers.length > 1) throw new UsageError(`${stdinUsers.join(' and ')} cannot both read stdin; give one of them as a file`);
  if (options.passwordStdin && options.passwordFile !== undefined) throw new UsageError('give --password-file or --password-stdin, not both');
  if (options.newPasswordStdin && options.newPasswordFile !== undefined) throw new UsageError('give --new-password-file or --new-password-stdin, not both');
  if (options.tokenStdin && options.tokenFile !== undefined) throw new UsageError('give --token-file or --token-stdin, not both');
  for (const [flag, given] of [['--endpoints', options.endpoints.length > 0], ['--label', options.label !== undefined],
    ['--expires-in', options.expiresIn !== undefined], ['--methods', options.methods.length > 0],
    ['--rate-limit', options.rateLimit !== undefined], ['--burst', options.burst !== undefined],
    ['--allowed-clients', options.allowedClients.length > 0]] as const) {
    if (action !== 'token new' && given) throw new UsageError(`${flag} belongs to "api-auth token new", not "api-auth ${action}"`);
  }
  if (!TAKES_TOKEN.includes(action) && options.id !== undefined) {
    throw new UsageError(`--id belongs to "api-auth token revoke" and "api-auth token rotate", not "api-auth ${action}"`);
  }
  if (action !== 'token rotate' && options.overlap !== undefined) throw new UsageError(`--overlap belongs to "api-auth token rotate", not "api-auth ${action}"`);
  let method: string;
  let params: Record<string, unknown>;
  switch (action) {
    case 'token new': {
      expectPositional(positional, 0, action);
      if (options.endpoints.length === 0) throw new UsageError('token new needs --endpoints, such as --endpoints /ext/info,/ext/bc/X, --endpoints / for a node served at the root (Ethereum nodes), or "*" for every endpoint');
      const password = await readPassword(options, 'Password: ', io);
      method = 'auth.newToken';
      params = { password, endpoints: options.endpoints };
      if (options.label !== undefined) params.label = options.label;
      if (options.expiresIn !== undefined) params.expiresIn = options.expiresIn;
      if (options.methods.length > 0) params.methods = methodsOf(options.methods);
      if (options.rateLimit !== undefined) params.rateLimit = options.rateLimit;
      if (options.burst !== undefined) params.burst = options.burst;
      if (options.allowedClients.length > 0) params.allowedClients = options.allowedClients;
      break;
    }
    case 'token list': {
      expectPositional(positional, 0, action);
      const password = await readPassword(options, 'Password: ', io);
      method = 'auth.listTokens';
      params = { password };
      break;
    }
    case 'token revoke':
    case 'token rotate': {
      expectPositional(positional, 1, action);
      method = action === 'token revoke' ? 'auth.revokeToken' : 'auth.rotateToken';
      const overlap = options.overlap === undefined ? {} : { overlap: options.overlap };
      if (options.id !== undefined) {
        if (positional.length === 1 || options.tokenFile !== undefined || options.tokenStdin) {
          throw new UsageError('give the token or its --id, not both');
        }
        const password = await readPassword(options, 'Password: ', io);
        params = { password, id: options.id, ...overlap };
        break;
      }
      let token: string;
      if (positional.length === 1) {
        if (options.tokenFile !== undefined || options.tokenStdin) throw new UsageError('give the token once: as TOKEN, or with --token-file or --token-stdin');
        token = positional[0];
        io.stderr(ARGV_TOKEN_WARNING);
      } else {
        token = await readSecret(options.tokenFile, options.tokenStdin, 'Token: ', '--token', io, 'token');
      }
      const password = await readPassword(options, 'Password: ', io);
      params = { password, token, ...overlap };
      break;
    }
    case 'password change': {
      expectPositional(positional, 0, action);
      const oldPassword = await readPassword(options, 'Current password: ', io);
      const newPassword = await readNewPassword(options, io);
      method = 'auth.changePassword';
      params = { oldPassword, newPassword };
      break;
    }
  }
  const ca = options.cacert === undefined ? undefined : await readCaFile(options.cacert, options.uri);
  const result = await call(options.uri, options.timeoutMs, method, params, ca);
  if (action === 'token revoke') return revoked(result, options.json, io, options.id !== undefined);
  if (options.json) {
    io.stdout(JSON.stringify(result) + '\n');
  } else if (action === 'token list') {
    io.stdout(table(result));
  } else if (action === 'token new' || action === 'token rotate') {
    io.stdout(`${String((result as { token?: unknown }).token)}\n`);
  } else {
    io.stdout('password changed; every token issued before no longer works\n');
  }
  return ExitCode.Ok;
}

/**
 * What a revocation did, and exit 0 only when the token is revoked now: by this call, or
 * by an earlier one. A token that was not live (mistyped, expired, of an earlier password)
 * revokes nothing: exit 1, so that a script does not take it for done. A node older than
 * the `revocation` field says only `success`, which cannot tell: that is said too.
 */
function revoked(result: unknown, json: boolean, io: OperatorIo, byId: boolean): number {
  const { revocation, reason } = (result ?? {}) as { revocation?: unknown; reason?: unknown };
  if (json) io.stdout(JSON.stringify(result) + '\n');
  switch (revocation) {
    case 'revoked':
      if (!json) io.stdout('token revoked\n');
      return ExitCode.Ok;
    case 'already revoked':
      if (!json) io.stdout('token already revoked: nothing to do\n');
      return ExitCode.Ok;
    case 'not a live token':
      io.stderr(`api-auth: nothing revoked: not a live token of this node (${typeof reason === 'string' ? reason : 'not valid'}); ` +
        (byId ? 'check the id with api-auth token list\n' : 'check that it is the whole token\n'));
      return ExitCode.Refused;
    default:
      io.stderr('api-auth: the node answered success without saying whether the token was live (an older node?); ' +
        'check with a call that uses the token\n');
      return ExitCode.Refused;
  }
}

/** The listed tokens as a table for people, one line each, columns aligned. */
function table(result: unknown): string {
  const tokens = (result as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(tokens)) throw new NodeUnreachableError(`the node's answer to auth.listTokens holds no token list: ${JSON.stringify(result).slice(0, 200)}`);
  if (tokens.length === 0) return 'no live tokens\n';
  const rows = [['ID', 'LABEL', 'ENDPOINTS', 'METHODS', 'RATE', 'CLIENTS', 'EXPIRES (UTC)', 'REVOKED', 'ROTATED TO', 'LAST USED (UTC)', 'REQUESTS']];
  const time = (value: unknown): string => (typeof value === 'string' ? shown(value).replace('T', ' ').replace(/Z$/, '') : '-');
  for (const entry of tokens as Record<string, unknown>[]) {
    const list = (value: unknown, none: string): string => (Array.isArray(value) ? shown(value.map(String).join(',')) : none);
    const rate = typeof entry.rateLimit === 'string' ? `${shown(entry.rateLimit)} (burst ${shown(entry.burst)})` : '-';
    const methods = Array.isArray(entry.methods) ? collapseMethodSets(entry.methods.map(String)) : undefined;
    rows.push([shown(entry.id), entry.label === null ? '-' : shown(entry.label), list(entry.endpoints, '?'), list(methods, '*'),
      rate, list(entry.allowedClients, '*'), time(entry.expiresAt), entry.revoked === true ? 'yes' : 'no',
      typeof entry.rotatedTo === 'string' ? shown(entry.rotatedTo) : '-', time(entry.lastUsedAt),
      typeof entry.requests === 'number' ? String(entry.requests) : '-']);
  }
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => width(r[c]))));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell + ' '.repeat(widths[c] - width(cell)))).join('  ')).join('\n') + '\n';
}

/** A value for the terminal: what could move the cursor or reorder the line (controls, separators, bidi) shows as "?". */
function shown(value: unknown): string {
  return String(value).replace(/[\p{Cc}\p{Zl}\p{Zp}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu, '?');
}

function width(text: string): number {
  return Array.from(text).length;
}

const ARGV_TOKEN_WARNING = 'api-auth: warning: a token on the command line can be read by every user of this machine while the ' +
  'command runs (ps, /proc/PID/cmdline), and stays in your shell history; use --token-file PATH or --token-stdin\n';

/** At most `max` positional arguments: the token of token revoke, none for the others. */
function expectPositional(positional: string[], max: number, action: Action): void {
  if (positional.length <= max) return;
  throw new UsageError(`unexpected argument ${JSON.stringify(positional[max])}; run api-auth ${action} --help`);
}

/**
 * The CA certificates of --cacert (PEM), each one checked readable, for an https:// node.
 * Read before the call, so that a bad file is a bad command line, not an unreachable node.
 */
async function readCaFile(path: string, uri: string): Promise<string> {
  if (!uri.startsWith('https:')) throw new UsageError(`--cacert is for a node at an https:// --uri, and ${uri} is plain HTTP; drop --cacert or use https://`);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--cacert ${path} ${whyUnreadable(error)}; give the PEM file of the CA certificate that signed the node's certificate`);
  }
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g);
  if (blocks === null) {
    throw new UsageError(`--cacert ${path} holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the CA certificate's PEM file, not its key`);
  }
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (error) {
      throw new UsageError(`--cacert ${path}: a certificate in it cannot be read (${reason(error)}); give the CA certificate's PEM file`);
    }
  }
  return blocks.join('\n');
}

// What a failed TLS handshake means, by node:tls's code, and what to do about it.
const SELF_SIGNED = new Set(['DEPTH_ZERO_SELF_SIGNED_CERT']);
const UNKNOWN_CA = new Set(['SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE']);

/** Why the TLS handshake with the node failed, for a person; undefined when `code` is not a certificate's failure. */
function tlsFailure(code: string | undefined, error: unknown, host: string, trusted: boolean): string | undefined {
  const more = trusted ? 'the CA of --cacert (and the system\'s) did not sign it' : 'give the CA certificate that signed it with --cacert FILE';
  if (code === undefined) return undefined;
  if (SELF_SIGNED.has(code)) return `the node's TLS certificate is self-signed, and not trusted: ${trusted ? 'it is not the one in --cacert' : 'give that certificate with --cacert FILE'}`;
  if (UNKNOWN_CA.has(code)) return `the node's TLS certificate is signed by a CA this command does not trust: ${more}`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `the node's TLS certificate is not for ${host} (${reason(error)}); use the name the certificate holds in --uri`;
  }
  if (code === 'CERT_HAS_EXPIRED') return 'the node\'s TLS certificate has expired: the node needs a new one';
  if (code === 'CERT_NOT_YET_VALID') return 'the node\'s TLS certificate is not valid yet: check the clocks of this machine and of the node';
  return undefined;
}

/** Calls `method` at `${uri}/ext/auth`; its result, or NodeRefusedError, or NodeUnreachableError. `ca`: --cacert's certificates. */
async function call(uri: string, timeoutMs: number, method: string, params: Record<string, unknown>, ca?: string): Promise<unknown> {
  const url = `${uri}/ext/auth`;
  let status: number;
  let text: string;
  try {
    // Loaded here, not with this module: main.js imports it for every start of the
    // server, which never calls a node, and undici is most of the main thread's loading.
    const { Agent, request } = await import('undici');
    const response = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // One call: a kept-alive connection would only hold the process open afterwards.
      reset: true,
      // node:tls's `ca` replaces the system's CAs: they are kept beside --cacert's.
      ...ca === undefined ? {} : { dispatcher: new Agent({ connect: { ca: [...rootCertificates, ca] } }) },
    });
    status = response.statusCode;
    text = await response.body.text();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const tls = tlsFailure(code, error, new URL(uri).hostname, ca !== undefined);
    if (tls !== undefined) throw new NodeUnreachableError(`cannot reach ${url}: ${tls}`);
    const why = code === 'ECONNREFUSED' ? 'connection refused'
      : code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' ? `no answer within ${timeoutMs / 1000} s`
        : error instanceof Error ? error.message : String(error);
    throw new NodeUnreachableError(`cannot reach ${url}: ${why}; is the node running there (--uri)?`);
  }
  if (status === 404) throw new NodeUnreachableError(`${url} answered 404: the node does not serve /ext/auth; is it running with --api-auth-required?`);
  let body: { result?: unknown; error?: { code?: unknown; message?: unknown } } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  // 429 and 503 carry a JSON-RPC error (throttled, busy): a refusal like any other.
  const error = body?.error;
  if (error !== undefined && typeof error.code === 'number' && typeof error.message === 'string') throw new NodeRefusedError(error.code, error.message);
  if (status !== 200 || body === undefined || body.result === undefined) {
    throw new NodeUnreachableError(`${url} gave HTTP ${status} without a JSON-RPC answer: ${JSON.stringify(text.slice(0, 200))}`);
  }
  return body.result;
}

/** The service password: from --password-file (or the node's own password file), --password-stdin, or the prompt. */
function readPassword(options: OperatorOptions, prompt: string, io: OperatorIo): Promise<string> {
  return readSecret(options.passwordFile, options.passwordStdin, prompt, '--password', io, 'password', options.passwordFileNamed);
}

/**
 * The defaults the node's own settings give, where no flag gave the value: its password
 * file, and the URL it listens at. Read as the node reads them (flags.ts, readCommand):
 * the API_AUTH_ environment, then the config file (--config-file, or the one
 * API_AUTH_CONFIG_FILE names), every value checked by the node's own rules. A listener on
 * every address (0.0.0.0, ::) is called at this machine's own.
 */
function fromNodeSettings(options: OperatorOptions, env: Environment, io: OperatorIo): void {
  const unknown = unknownEnvironment(env);
  if (unknown.length > 0) {
    io.stderr(`api-auth: warning: ${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} named like the node's settings but ` +
      'none of them, and change nothing (API_AUTH_ and a flag\'s name in upper snake case, such as API_AUTH_PASSWORD_FILE)\n');
  }
  const { command, name } = readCommand(options.configFile === undefined ? [] : [`--${CONFIG_FILE.flag}`, options.configFile], env);
  if (command.action !== 'serve') return;
  const node = resolveServerOptions(command.options);
  if (options.passwordFile === undefined && !options.passwordStdin && node.passwordFile !== undefined) {
    options.passwordFile = node.passwordFile;
    options.passwordFileNamed = name('passwordFile');
  }
  if (options.uriGiven) return;
  if (node.port === 0) {
    throw new UsageError(`${name('port')} is 0 (a port the system picks), so the node's address is not known here; give --uri`);
  }
  const host = node.host === '0.0.0.0' || node.host === '' ? '127.0.0.1' : node.host === '::' ? '::1' : node.host;
  options.uri = parseUri(`${node.tls === undefined ? 'http' : 'https'}://${host.includes(':') ? `[${host}]` : host}:${node.port}`);
}

async function readNewPassword(options: OperatorOptions, io: OperatorIo): Promise<string> {
  let password: string;
  if (options.newPasswordFile !== undefined || options.newPasswordStdin) {
    password = await readSecret(options.newPasswordFile, options.newPasswordStdin, '', '--new-password', io);
  } else {
    password = await readSecret(undefined, false, 'New password: ', '--new-password', io);
    const again = await readSecret(undefined, false, 'New password again: ', '--new-password', io);
    if (again !== password) throw new UsageError('the two new passwords differ; nothing was changed');
  }
  const length = countCodePoints(password);
  if (length > MAX_PASSWORD_LENGTH) throw new UsageError(`the new password is ${length} characters long; at most ${MAX_PASSWORD_LENGTH} are allowed`);
  return password;
}

/**
 * A password (or a token) from its file (trimmed), from stdin (a password without its
 * line break, a token trimmed), or from a no-echo prompt. Text that is not UTF-8 is
 * refused: decoding it would put U+FFFD in place of the bad bytes, and send a secret
 * other than the one meant.
 */
async function readSecret(file: string | undefined, stdin: boolean, prompt: string, flag: string, io: OperatorIo,
  what: 'password' | 'token' = 'password', named = `${flag}-file`): Promise<string> {
  let secret: string;
  let source: string;
  if (file !== undefined) {
    source = `${named} ${file}`;
    let bytes: Buffer;
    try {
      bytes = await readFile(file);
    } catch (error) {
      throw new UsageError(`${source}: cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    try {
      if (bytes.length > MAX_SECRET_BYTES) throw new UsageError(`${source}: the file is larger than ${MAX_SECRET_BYTES} bytes; it must hold only the ${what}`);
      secret = decodeUtf8(bytes, `${source}: the file`, what).trim();
    } finally {
      bytes.fill(0);
    }
  } else if (stdin) {
    source = `${flag}-stdin`;
    const text = decodeUtf8(await readAll(io.stdin, what), `${source}: stdin`, what);
    secret = what === 'token' ? text.trim() : text.replace(/\r?\n$/, '');
  } else if (io.stdin.isTTY) {
    source = 'the prompt';
    secret = await promptHidden(prompt, io);
  } else {
    throw new UsageError(`no ${what}: give ${flag}-file PATH or ${flag}-stdin, or run the command in a terminal to be prompted`);
  }
  if (secret === '') throw new UsageError(`the ${what} from ${source} is empty`);
  return secret;
}

function decodeUtf8(bytes: Uint8Array, where: string, what: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new UsageError(`${where} is not UTF-8 text; save the ${what} as UTF-8`);
  }
}

async function readAll(stream: NodeJS.ReadStream, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    size += buffer.length;
    if (size > MAX_SECRET_BYTES) throw new UsageError(`stdin holds more than ${MAX_SECRET_BYTES} bytes; it must hold only the ${what}`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

/** Reads one line from the terminal with echo off; the prompt goes to stderr, so stdout stays the result alone. */
function promptHidden(prompt: string, io: OperatorIo): Promise<string> {
  const input = io.stdin;
  // Echo off before the prompt shows, so that nothing typed after the prompt is echoed.
  input.setRawMode(true);
  io.stderr(prompt);
  // Streaming, so that a character split across two reads is whole; fatal, so that bytes
  // that are not UTF-8 (a terminal set to another encoding) are refused, not replaced.
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return new Promise((resolve, reject) => {
    let line = '';
    const done = (error?: Error): void => {
      input.setRawMode(false);
      input.pause();
      input.off('data', onData);
      io.stderr('\n');
      if (error) reject(error);
      else resolve(line);
    };
    const onData = (chunk: Buffer): void => {
      let text: string;
      try {
        text = decoder.decode(chunk, { stream: true });
      } catch {
        return done(new UsageError('what was typed is not UTF-8 text; set the terminal to UTF-8'));
      }
      for (const char of text) {
        if (char === '\r' || char === '\n') return done();
        if (char === '\u0003') return done(new UsageError('cancelled'));
        if (char === '\u0004') return line === '' ? done(new UsageError('cancelled')) : done();
        if (char === '\u007f' || char === '\b') line = Array.from(line).slice(0, -1).join('');
        else if (char >= ' ') line += char;
      }
    };
    input.on('data', onData);
    input.resume();
  });
}

/** --burst: a whole number; the node checks its range. */
function parseBurst(value: string): number {
  if (!/^[0-9]{1,16}$/.test(value)) throw new UsageError(`--burst must be a whole number (the calls the token may make at once), not ${JSON.stringify(value)}`);
  return Number(value);
}

// Each flag: its kind, and where its value goes.
const FLAGS: Readonly<Record<string, { kind: 'string'; set: (o: OperatorOptions, value: string) => void } |
  { kind: 'boolean'; set: (o: OperatorOptions, value: boolean) => void }>> = {
  'uri': { kind: 'string', set: (o, v) => { o.uri = parseUri(v); o.uriGiven = true; } },
  'endpoints': { kind: 'string', set: (o, v) => { o.endpoints.push(...v.split(',').map((e) => e.trim()).filter((e) => e !== '')); } },
  'label': { kind: 'string', set: (o, v) => { o.label = v; } },
  'expires-in': { kind: 'string', set: (o, v) => { o.expiresIn = parseExpiresIn(v); } },
  'overlap': { kind: 'string', set: (o, v) => { o.overlap = parseOverlap(v); } },
  'methods': { kind: 'string', set: (o, v) => { o.methods.push(...v.split(',').map((m) => m.trim()).filter((m) => m !== '')); } },
  'rate-limit': { kind: 'string', set: (o, v) => { o.rateLimit = v; } },
  'burst': { kind: 'string', set: (o, v) => { o.burst = parseBurst(v); } },
  'allowed-clients': { kind: 'string', set: (o, v) => { o.allowedClients.push(...v.split(',').map((c) => c.trim()).filter((c) => c !== '')); } },
  'id': { kind: 'string', set: (o, v) => { o.id = v; } },
  'password-file': { kind: 'string', set: (o, v) => { o.passwordFile = v; } },
  'password-stdin': { kind: 'boolean', set: (o, v) => { o.passwordStdin = v; } },
  'new-password-file': { kind: 'string', set: (o, v) => { o.newPasswordFile = v; } },
  'new-password-stdin': { kind: 'boolean', set: (o, v) => { o.newPasswordStdin = v; } },
  'token-file': { kind: 'string', set: (o, v) => { o.tokenFile = v; } },
  'token-stdin': { kind: 'boolean', set: (o, v) => { o.tokenStdin = v; } },
  'json': { kind: 'boolean', set: (o, v) => { o.json = v; } },
  'timeout': { kind: 'string', set: (o, v) => { o.timeoutMs = parseTimeout(v); } },
  'cacert': { kind: 'string', set: (o, v) => { o.cacert = v; } },
  [CONFIG_FILE.flag]: { kind: 'string', set: (o, v) => { o.configFile = expandHome(v); } },
  'help': { kind: 'boolean', set: (o, v) => { o.help = v; } },
};

const KINDS: FlagKinds = Object.fromEntries(Object.entries(FLAGS).map(([name, { kind }]) => [name, kind]));

// Flags that would put a secret on the command line, refused with a pointer to the safe way.
const SECRET_FLAGS: ReadonlyMap<string, string> = new Map([
  ['password', '--password-file PATH or --password-stdin'],
  ['new-password', '--new-password-file PATH or --new-password-stdin'],
  ['old-password', '--password-file PATH or --password-stdin'],
]);

function refuseSecret(name: string): string | undefined {
  const safe = SECRET_FLAGS.get(name);
  return safe === undefined ? undefined
    : `--${name} is not taken: a password on the command line is visible to other users; use ${safe}, or let the command prompt`;
}

function parseOperatorArgs(args: readonly string[]): { action: Action; options: OperatorOptions; positional: string[] } {
  const options: OperatorOptions = {
    uri: DEFAULT_URI,
    endpoints: [],
    label: undefined,
    expiresIn: undefined,
    overlap: undefined,
    methods: [],
    rateLimit: undefined,
    burst: undefined,
    allowedClients: [],
    id: undefined,
    passwordFile: undefined,
    passwordStdin: false,
    newPasswordFile: undefined,
    newPasswordStdin: false,
    tokenFile: undefined,
    tokenStdin: false,
    json: false,
    timeoutMs: DEFAULT_TIMEOUT_MS,
    cacert: undefined,
    configFile: undefined,
    help: false,
    passwordFileNamed: '--password-file',
    uriGiven: false,
  };
  const words: string[] = [];
  for (const arg of readArgs(args, KINDS, { command: `api-auth ${args[0]}`, stopAt: ['help'], refuse: refuseSecret })) {
    if (arg.kind === 'positional') {
      words.push(arg.value);
      continue;
    }
    const flag = FLAGS[arg.name];
    if (flag.kind === 'boolean') flag.set(options, arg.value === true);
    else flag.set(options, nonEmpty(arg.name, String(arg.value)));
  }
  const [group, verb, ...positional] = words;
  const action = `${group} ${verb ?? ''}`.trim();
  if (!ACTIONS.includes(action)) {
    if (options.help && verb === undefined) return { action: group === 'token' ? 'token new' : 'password change', options, positional: [] };
    const known = group === 'token' ? '"token new", "token list", "token revoke" or "token rotate"' : '"password change"';
    throw new UsageError(`unknown command "${action}"; did you mean ${known}? (run api-auth ${group} --help)`);
  }
  return { action: action as Action, options, positional };
}

function parseUri(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--uri must be a URL such as ${DEFAULT_URI}, not ${JSON.stringify(text)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--uri must be an http:// or https:// URL, not ${JSON.stringify(text)}`);
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new UsageError(`--uri must be the node's base URL such as ${DEFAULT_URI}, without query, fragment or credentials`);
  }
  return url.href.replace(/\/+$/, '');
}

/** --methods with its named sets expanded (method-sets.ts): the node gets plain names. */
function methodsOf(patterns: readonly string[]): string[] {
  try {
    return expandMethodSets(patterns);
  } catch (error) {
    throw new UsageError(`--methods: ${(error as Error).message}`);
  }
}

/** Checked for its form here; the node checks it against its --max-token-lifetime. Sent as written. */
function parseExpiresIn(text: string): string {
  if (text === NEVER) return text;
  const seconds = parseDuration(text);
  if (seconds === null || seconds < 1) {
    throw new UsageError(`--expires-in must be a duration such as 90s, 15m or 1h30m, or "${NEVER}", not ${JSON.stringify(text)}`);
  }
  return text;
}

/** Checked for its form here; the node checks it against the token's remaining life. Sent as written. */
function parseOverlap(text: string): string {
  if (parseDuration(text) === null) throw new UsageError(`--overlap must be a duration such as 0s, 10m or 24h, not ${JSON.stringify(text)}`);
  return text;
}

function parseTimeout(text: string): number {
  const seconds = parseDuration(text);
  if (seconds === null || seconds < 1 || seconds > 3600) throw new UsageError(`--timeout must be a duration from 1s to 1h such as 30s, not ${JSON.stringify(text)}`);
  return seconds * 1000;
}

function processIo(): OperatorIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    stdin: process.stdin,
  };
}
