// The operator commands' command line: the flags table, each flag's value checked for its
// form, the command's words, and which flags belong to which command. The node checks
// what only it can (an endpoint, a lifetime against its maximum, a rate).
import { closest } from '../../closest.js';
import { UsageError } from '../../errors.js';
import { NEVER, parseDuration } from '../../duration.js';
import { nonEmpty, readArgs } from '../args.js';
import type { FlagKinds } from '../args.js';
import { CONFIG_FILE, expandHome } from '../sources.js';

export const DEFAULT_URI = 'http://127.0.0.1:9650';
const DEFAULT_TIMEOUT_MS = 30_000;

/** What the command line says, then the node's settings where no flag gave a value (node-settings.ts). */
export interface OperatorOptions {
  uri: string;
  endpoints: string[];
  label: string | undefined;
  expiresIn: string | undefined;
  overlap: string | undefined;
  methods: string[];
  rateLimit: string | undefined;
  burst: number | undefined;
  quota: { requests: number; per: string } | undefined;
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

export type Action = 'token new' | 'token list' | 'token revoke' | 'token rotate' | 'password change';

const ACTIONS: readonly string[] = ['token new', 'token list', 'token revoke', 'token rotate', 'password change'];

/** The commands that take a token (or its --id). */
const TAKES_TOKEN: readonly string[] = ['token revoke', 'token rotate'];

/** --burst: a whole number; the node checks its range. */
function parseBurst(value: string): number {
  if (!/^[0-9]{1,16}$/.test(value))
    throw new UsageError(`--burst must be a whole number (the calls the token may make at once), not ${JSON.stringify(value)}`);
  return Number(value);
}

/** --quota N/day or N/month: the node checks N's range. */
function parseQuota(value: string): { requests: number; per: string } {
  const match = /^([0-9]{1,16})\/(day|month)$/.exec(value);
  if (match === null)
    throw new UsageError(
      `--quota must be N/day or N/month (the calls the token may make per calendar day or month, UTC), not ${JSON.stringify(value)}`,
    );
  return { requests: Number(match[1]), per: match[2] };
}

// Each flag: its kind, and where its value goes.
const FLAGS: Readonly<
  Record<
    string,
    | { kind: 'string'; set: (o: OperatorOptions, value: string) => void }
    | { kind: 'boolean'; set: (o: OperatorOptions, value: boolean) => void }
  >
> = {
  uri: {
    kind: 'string',
    set: (o, v) => {
      o.uri = parseUri(v);
      o.uriGiven = true;
    },
  },
  endpoints: {
    kind: 'string',
    set: (o, v) => {
      o.endpoints.push(
        ...v
          .split(',')
          .map((e) => e.trim())
          .filter((e) => e !== ''),
      );
    },
  },
  label: {
    kind: 'string',
    set: (o, v) => {
      o.label = v;
    },
  },
  'expires-in': {
    kind: 'string',
    set: (o, v) => {
      o.expiresIn = parseExpiresIn(v);
    },
  },
  overlap: {
    kind: 'string',
    set: (o, v) => {
      o.overlap = parseOverlap(v);
    },
  },
  methods: {
    kind: 'string',
    set: (o, v) => {
      o.methods.push(
        ...v
          .split(',')
          .map((m) => m.trim())
          .filter((m) => m !== ''),
      );
    },
  },
  'rate-limit': {
    kind: 'string',
    set: (o, v) => {
      o.rateLimit = v;
    },
  },
  burst: {
    kind: 'string',
    set: (o, v) => {
      o.burst = parseBurst(v);
    },
  },
  quota: {
    kind: 'string',
    set: (o, v) => {
      o.quota = parseQuota(v);
    },
  },
  'allowed-clients': {
    kind: 'string',
    set: (o, v) => {
      o.allowedClients.push(
        ...v
          .split(',')
          .map((c) => c.trim())
          .filter((c) => c !== ''),
      );
    },
  },
  id: {
    kind: 'string',
    set: (o, v) => {
      o.id = v;
    },
  },
  'password-file': {
    kind: 'string',
    set: (o, v) => {
      o.passwordFile = v;
    },
  },
  'password-stdin': {
    kind: 'boolean',
    set: (o, v) => {
      o.passwordStdin = v;
    },
  },
  'new-password-file': {
    kind: 'string',
    set: (o, v) => {
      o.newPasswordFile = v;
    },
  },
  'new-password-stdin': {
    kind: 'boolean',
    set: (o, v) => {
      o.newPasswordStdin = v;
    },
  },
  'token-file': {
    kind: 'string',
    set: (o, v) => {
      o.tokenFile = v;
    },
  },
  'token-stdin': {
    kind: 'boolean',
    set: (o, v) => {
      o.tokenStdin = v;
    },
  },
  json: {
    kind: 'boolean',
    set: (o, v) => {
      o.json = v;
    },
  },
  timeout: {
    kind: 'string',
    set: (o, v) => {
      o.timeoutMs = parseTimeout(v);
    },
  },
  cacert: {
    kind: 'string',
    set: (o, v) => {
      o.cacert = v;
    },
  },
  [CONFIG_FILE.flag]: {
    kind: 'string',
    set: (o, v) => {
      o.configFile = expandHome(v);
    },
  },
  help: {
    kind: 'boolean',
    set: (o, v) => {
      o.help = v;
    },
  },
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
  return safe === undefined
    ? undefined
    : `--${name} is not taken: a password on the command line is visible to other users; use ${safe}, or let the command prompt`;
}

/** The command line after the program name: the command, its options (the defaults where no flag gave one), its other words. */
export function parseOperatorArgs(args: readonly string[]): { action: Action; options: OperatorOptions; positional: string[] } {
  const options: OperatorOptions = {
    uri: DEFAULT_URI,
    endpoints: [],
    label: undefined,
    expiresIn: undefined,
    overlap: undefined,
    methods: [],
    rateLimit: undefined,
    burst: undefined,
    quota: undefined,
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
    // The word is shown only when it is a slip of a command's (a password pasted after
    // "api-auth token" must not be echoed): then the command it is likely a slip of.
    const likely =
      verb === undefined
        ? undefined
        : closest(
            verb,
            ACTIONS.filter((a) => a.startsWith(`${group} `)).map((a) => a.slice(group.length + 1)),
          );
    const what =
      verb === undefined
        ? `"${group}" needs a command`
        : likely === undefined
          ? 'unknown command (not shown: it may be a secret)'
          : `unknown command "${action}" (did you mean "${group} ${likely}"?)`;
    throw new UsageError(`${what}; the commands are ${known} (run api-auth ${group} --help)`);
  }
  return { action: action as Action, options, positional };
}

export function parseUri(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--uri must be a URL such as ${DEFAULT_URI}, not ${JSON.stringify(text)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError(`--uri must be an http:// or https:// URL, not ${JSON.stringify(text)}`);
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new UsageError(`--uri must be the node's base URL such as ${DEFAULT_URI}, without query, fragment or credentials`);
  }
  return url.href.replace(/\/+$/, '');
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
  if (parseDuration(text) === null)
    throw new UsageError(`--overlap must be a duration such as 0s, 10m or 24h, not ${JSON.stringify(text)}`);
  return text;
}

function parseTimeout(text: string): number {
  const seconds = parseDuration(text);
  if (seconds === null || seconds < 1 || seconds > 3600)
    throw new UsageError(`--timeout must be a duration from 1s to 1h such as 30s, not ${JSON.stringify(text)}`);
  return seconds * 1000;
}

/**
 * Which flags belong to which command, and that each secret comes one way; "-" in place
 * of the token is --token-stdin. Returns the positional words left (the token, if any).
 */
export function checkFlagsOf(action: Action, options: OperatorOptions, positional: string[]): string[] {
  if (!TAKES_TOKEN.includes(action) && (options.tokenFile !== undefined || options.tokenStdin)) {
    throw new UsageError(
      `--token-file and --token-stdin belong to "api-auth token revoke" and "api-auth token rotate", not "api-auth ${action}"`,
    );
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
    options.passwordStdin && '--password-stdin',
    options.newPasswordStdin && '--new-password-stdin',
    options.tokenStdin && '--token-stdin',
  ].filter((flag) => flag !== false);
  if (stdinUsers.length > 1) throw new UsageError(`${stdinUsers.join(' and ')} cannot both read stdin; give one of them as a file`);
  if (options.passwordStdin && options.passwordFile !== undefined)
    throw new UsageError('give --password-file or --password-stdin, not both');
  if (options.newPasswordStdin && options.newPasswordFile !== undefined)
    throw new UsageError('give --new-password-file or --new-password-stdin, not both');
  if (options.tokenStdin && options.tokenFile !== undefined) throw new UsageError('give --token-file or --token-stdin, not both');
  for (const [flag, given] of [
    ['--endpoints', options.endpoints.length > 0],
    ['--label', options.label !== undefined],
    ['--expires-in', options.expiresIn !== undefined],
    ['--methods', options.methods.length > 0],
    ['--rate-limit', options.rateLimit !== undefined],
    ['--burst', options.burst !== undefined],
    ['--quota', options.quota !== undefined],
    ['--allowed-clients', options.allowedClients.length > 0],
  ] as const) {
    if (action !== 'token new' && given) throw new UsageError(`${flag} belongs to "api-auth token new", not "api-auth ${action}"`);
  }
  if (!TAKES_TOKEN.includes(action) && options.id !== undefined) {
    throw new UsageError(`--id belongs to "api-auth token revoke" and "api-auth token rotate", not "api-auth ${action}"`);
  }
  if (action !== 'token rotate' && options.overlap !== undefined)
    throw new UsageError(`--overlap belongs to "api-auth token rotate", not "api-auth ${action}"`);
  return positional;
}

/** At most `max` positional arguments: the token of token revoke, none for the others. */
export function expectPositional(positional: string[], max: number, action: Action): void {
  if (positional.length <= max) return;
  // Not shown: a word in the wrong place may be a token or a password.
  throw new UsageError(
    `unexpected argument (not shown: it may be a secret); api-auth ${action} takes ${max === 0 ? 'no argument' : 'one argument, the token'} ` +
      `(run api-auth ${action} --help)`,
  );
}
