// The server's help and the docs' table of flags (docs/reference/command-line.md), both
// written from the options' schema (options.ts), so that neither can name a flag, a
// default or a limit the service does not have.
import { InvariantError } from '../api-auth-error.js';
import { formatBytes, formatSeconds, SCHEMA } from '../options.js';
import type { OptionSpec } from '../options.js';
import { CONFIG_FILE, envName } from './sources.js';

/** Every option's entry, in the schema's order. */
const ENTRIES = Object.values(SCHEMA) as readonly OptionSpec<unknown, unknown>[];

const PLACEHOLDERS = {
  boolean: '[=true|false]',
  integer: 'N',
  duration: 'DURATION',
  size: 'SIZE',
  text: 'TEXT',
  path: 'PATH',
  list: 'LIST',
} as const;

/** How --help shows the flag: `--http-port PORT`, `--api-auth-required[=true|false]`. */
function synopsis(entry: OptionSpec<unknown, unknown>): string {
  return entry.kind === 'boolean' ? `--${entry.flag}${PLACEHOLDERS.boolean}` : `--${entry.flag} ${entry.arg ?? PLACEHOLDERS[entry.kind]}`;
}

/** The default as written (12h, 1MiB, false), or undefined for an option without one. */
export function shownValue(entry: OptionSpec<unknown, unknown>): string | undefined {
  const value = entry.default;
  if (value === undefined) return undefined;
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.join(',');
  if (typeof value === 'number')
    return entry.kind === 'duration' ? formatSeconds(value) : entry.kind === 'size' ? formatBytes(value) : String(value);
  return String(value);
}

/** The default as the docs show it; undefined for none. */
export function shownDefault(entry: OptionSpec<unknown, unknown>): string | undefined {
  return entry.shownDefault ?? shownValue(entry);
}

const WIDTH = 100;

/** `text` wrapped at WIDTH, its lines after the first indented by `indent`. */
function wrap(text: string, indent: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && indent + line.length + 1 + word.length > WIDTH) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

/** --help's rows: the options, then the flags of the command itself. */
function rows(): [string, string][] {
  const options = ENTRIES.map((entry): [string, string] => {
    const shown = shownDefault(entry);
    const value = shownValue(entry);
    // Where the docs' default is a rule (every core), this machine's value beside it.
    const here = shown !== undefined && value !== undefined && shown !== value ? `, here ${value}` : '';
    return [synopsis(entry), shown === undefined ? entry.doc : `${entry.doc} (default ${shown}${here})`];
  });
  return [
    ...options,
    [`--${CONFIG_FILE.flag} PATH`, CONFIG_FILE.doc],
    ['--help', 'print this help and exit'],
    ['--version', 'print the version and exit'],
  ];
}

function usage(): string {
  const table = rows();
  const column = Math.max(...table.map(([flag]) => flag.length)) + 4;
  const flags = table.map(([flag, doc]) => `  ${flag.padEnd(column - 2)}${wrap(doc, column)}`).join('\n');
  return `Usage: api-auth [flags]

A node's authorization token service: JSON-RPC 2.0 at POST /ext/auth, and a bearer-token
check in front of every other endpoint.

Flags:
${flags}

Flags take "--name value" or "--name=value"; true/false flags also take a bare "--name".
Each flag may also be given in the environment, as API_AUTH_ and its name in upper snake
case (--http-port: API_AUTH_HTTP_PORT; a leading "api-auth-" is not repeated, so
--api-auth-required: API_AUTH_REQUIRED), or as a key of the --config-file, its name
without the dashes ({"http-port": 9650, "api-auth-required": true}). A flag beats the
environment, the environment beats the file, the file beats the default. A password is
taken only from its file (--api-auth-password-file, --cluster-etcd-password-file).

Operator commands talk to a running node's /ext/auth (run "api-auth token --help"):
  api-auth token new --endpoints /ext/info,/ext/bc/X [--label TEXT] [--expires-in 1h]
                     [--methods eth_*] [--rate-limit 10/s] [--burst 20]
                     [--allowed-clients 10.0.0.0/8] [--password-file PATH]
  api-auth token list [--json] [--password-file PATH]
  api-auth token revoke --token-file PATH|--token-stdin|--id ID [--password-file PATH]
  api-auth password change [--password-file PATH] [--new-password-file PATH]

The fleet's repair talks to etcd with the gateway's flags ("api-auth fleet --help"):
  api-auth fleet delete-key KEY [--cluster-etcd URLS ...|--config-file PATH]
`;
}

/** What `api-auth --help` prints. */
export const USAGE = usage();

/** A Markdown heading's anchor, as GitHub makes it. */
export function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/**
 * The docs page that holds each section an option's `see` names, from docs/reference/,
 * where the table of flags is: the schema names a section, and the page is the docs'
 * layout, which the schema need not know.
 */
export const SEE_PAGES: Readonly<Record<string, string>> = {
  Threads: '../explanation/threads.md',
  TLS: '../guides/tls.md',
  'CORS for browser dapps': '../guides/cors.md',
  'The data folder': 'data-folder.md',
  'Public endpoints': '../guides/protect-a-node.md',
  'Protecting a real node (`--upstream`)': '../guides/protect-a-node.md',
  'WebSocket sessions': '../guides/websocket.md',
  'Behind a proxy (`--trusted-proxies`)': '../guides/behind-a-proxy.md',
  Metrics: 'metrics.md',
  Logs: 'logs.md',
  'The access log (`--access-log`)': 'access-log.md',
  'Running a fleet': '../guides/fleet.md',
  'When etcd is down': '../guides/fleet.md',
  'Token lifetimes and rotation': 'tokens.md',
  "The operator's console": '../guides/console.md',
};

/** The link to the section an option's `see` names. */
function seeLink(see: string): string {
  const page = SEE_PAGES[see];
  if (page === undefined)
    throw new InvariantError(`no docs page is known for the section "${see}": add it to SEE_PAGES in host/cli/help.ts`);
  return `[${see.replace(/`/g, '')}](${page}#${anchor(see)})`;
}

/** Text in a Markdown table cell: nothing in it may end the cell or start emphasis. */
function cell(text: string): string {
  return text.replace(/[\\|*_`]/g, (c) => `\\${c}`);
}

/** The table of flags of docs/reference/command-line.md, in Markdown. */
export function flagTable(): string {
  const lines = ['| flag | environment | default | meaning |', '|---|---|---|---|'];
  for (const entry of ENTRIES) {
    const value = shownValue(entry);
    const shown = entry.shownDefault !== undefined ? cell(entry.shownDefault) : value === undefined ? 'none' : `\`${value}\``;
    const see = entry.see === undefined ? '' : ` (${seeLink(entry.see)})`;
    lines.push(`| \`--${entry.flag}\` | \`${envName(entry.flag)}\` | ${shown} | ${cell(entry.doc)}${see} |`);
  }
  lines.push(`| \`--${CONFIG_FILE.flag}\` | \`${envName(CONFIG_FILE.flag)}\` | none | ${cell(CONFIG_FILE.doc)} |`);
  lines.push('| `--help`, `--version` | | | print and exit 0 |');
  return `${lines.join('\n')}\n`;
}
