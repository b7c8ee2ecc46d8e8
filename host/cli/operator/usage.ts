// `api-auth token --help` and `api-auth password --help`: the operator commands' help text.
import { DEFAULT_URI } from './args.js';

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
  --quota N/PERIOD           token new: calls the token may make per calendar day
                             or month, UTC: N/day or N/month (N from 1 to
                             1000000000), counted across a fleet
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
