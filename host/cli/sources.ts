// Where the server's options come from besides its flags: the environment (API_AUTH_*)
// and a config file (--config-file), both keyed by the flags' names (options.ts, SCHEMA)
// and read as the flags' text is. A password comes from none of them: only from the
// file a *-password-file option names.
import { closeSync, constants, fstatSync, openSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { UsageError } from '../errors.js';
import { truth } from './args.js';
import { SCHEMA } from '../options.js';
import { untrustedFile } from '../file-rules.js';
import type { OptionSpec } from '../options.js';

export type OptionKey = keyof typeof SCHEMA;

/** The environment, as process.env is. */
export type Environment = Readonly<Record<string, string | undefined>>;

/** Options found in one place: each value as the option takes it. */
export type Found = Partial<Record<OptionKey, unknown>>;

/** The command's own flag that names a config file; not an option of startServer. */
export const CONFIG_FILE = {
  flag: 'config-file',
  doc:
    'read options from this JSON object, whose keys are the flags without their dashes ({"http-port": 9650}); ' +
    'flags and the environment override it',
} as const;

const ENV_PREFIX = 'API_AUTH_';

/** A flag's name in the environment: API_AUTH_ and the flag in upper snake case, its own "api-auth-" not repeated. */
export function envName(flag: string): string {
  return (
    ENV_PREFIX +
    flag
      .replace(/^api-auth-/, '')
      .toUpperCase()
      .replace(/-/g, '_')
  );
}

const ENTRIES = Object.entries(SCHEMA) as [OptionKey, OptionSpec<unknown, unknown>][];

/** Each option by its flag. */
export const OPTION_OF_FLAG: ReadonlyMap<string, OptionKey> = new Map(ENTRIES.map(([key, entry]) => [entry.flag, key]));

/**
 * The names a password itself would have, beside each option that names its file
 * (api-auth-password for api-auth-password-file): refused in every place, with the way
 * to give it. A password in argv is readable by every user of the machine, and one in
 * the environment is passed on to every child process.
 */
export const SECRETS: ReadonlyMap<string, string> = new Map(
  ENTRIES.filter(([, entry]) => entry.flag.endsWith('-password-file')).map(([, entry]) => [
    entry.flag.slice(0, -'-file'.length),
    entry.flag,
  ]),
);

/** A flag's text, or a variable's, as the option takes it. */
export function fromText(key: OptionKey, text: string): unknown {
  switch (SCHEMA[key].kind) {
    case 'boolean': {
      // The words systemd's own settings take, as a unit's Environment= lines write them;
      // anything else is for the option's check to refuse, naming where it came from.
      return truth(text) ?? text;
    }
    case 'path':
      return expandHome(text);
    case 'list':
      return text.trim() === '' ? [] : text.split(',').map((entry) => entry.trim());
    default:
      return text;
  }
}

// The shell expands "~" only at the start of a word, so `--data-dir=~/x` arrives unexpanded.
export function expandHome(path: string): string {
  return path === '~' || path.startsWith('~/') ? join(homedir(), path.slice(1)) : path;
}

/** How a message names a variable of the environment. */
export function envSource(name: string): string {
  return `${name} (environment)`;
}

/** How a message names a key of a config file. */
export function fileSource(key: string, path: string): string {
  return `"${key}" (config file ${path})`;
}

/** The options the environment sets, and the config file it names. Throws UsageError for a password in it. */
export function fromEnvironment(env: Environment): { found: Found; configFile: string | undefined } {
  for (const [secret, file] of SECRETS) {
    const name = envName(secret);
    if (env[name] !== undefined) {
      throw new UsageError(
        `${envSource(name)} is refused: a password in the environment is passed on to every child process; ` +
          `write it in a file only this user may read, and give ${envName(file)} or --${file}`,
      );
    }
  }
  const found: Found = {};
  for (const [key, entry] of ENTRIES) {
    const text = env[envName(entry.flag)];
    if (text !== undefined) found[key] = fromText(key, text);
  }
  const configFile = env[envName(CONFIG_FILE.flag)];
  if (configFile?.trim() === '')
    throw new UsageError(`${envSource(envName(CONFIG_FILE.flag))} must not be empty; give the path of a JSON config file, or unset it`);
  return { found, configFile: configFile === undefined ? undefined : expandHome(configFile) };
}

/** The API_AUTH_ variables that are no option's: a misspelt one would otherwise change nothing unseen. */
export function unknownEnvironment(env: Environment): string[] {
  const known = new Set([...ENTRIES.map(([, entry]) => envName(entry.flag)), envName(CONFIG_FILE.flag)]);
  return Object.keys(env)
    .filter((name) => name.startsWith(ENV_PREFIX) && !known.has(name))
    .sort();
}

/**
 * The options of a config file: one JSON object whose keys are the flags without their
 * dashes, as the node's own --config-file takes them. A string is read as the flag's
 * text; a number, true/false or an array is the value as startServer takes it (durations
 * in seconds, sizes in bytes). `named` is how the file was given, for the messages.
 * Throws UsageError naming the file, and the key at fault.
 */
export function fromConfigFile(path: string, named: string): Found {
  const text = readConfigFile(path, named);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    // Only where, never V8's message: it quotes the text, which may be a password (a password file named by mistake).
    const at = /at position (\d+)/.exec((error as Error).message);
    throw new UsageError(
      `config file ${path} is not JSON${at === null ? '' : ` (at byte ${at[1]})`}; write one JSON object, such as {"http-port": 9650}`,
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(
      `config file ${path} must hold one JSON object, such as {"http-port": 9650}, not ${Array.isArray(parsed) ? 'an array' : parsed === null ? 'null' : `a ${typeof parsed}`}`,
    );
  }
  const found: Found = {};
  for (const [name, value] of Object.entries(parsed)) {
    const where = fileSource(name, path);
    const secretFile = SECRETS.get(name);
    if (secretFile !== undefined) {
      throw new UsageError(
        `${where} is refused: a password is taken only from a file of its own, which only this user may read; ` +
          `write it in one and give "${secretFile}"`,
      );
    }
    if (name === CONFIG_FILE.flag) throw new UsageError(`${where} is not an option: a config file cannot name another`);
    const key = OPTION_OF_FLAG.get(name);
    if (key === undefined) {
      throw new UsageError(
        `${where} is not an option; the keys are the flags without their dashes, such as "http-port" ` +
          '(run api-auth --help to list them)',
      );
    }
    if (value === null) throw new UsageError(`${where} is null; give a value, or leave the key out`);
    found[key] = typeof value === 'string' ? fromText(key, value) : value;
  }
  return found;
}

/**
 * The config file's text: a regular file, never through a link, that only root or this
 * user can change, in a folder likewise (state/data-folder.ts, untrustedFile): whoever
 * can write it could turn auth off or send the requests to a node of theirs. Read at
 * start, before anything serves; O_NONBLOCK keeps a FIFO from holding the start.
 */
function readConfigFile(path: string, named: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') {
      throw new UsageError(
        `${named} ${path} is a symbolic link, which api-auth does not follow: whoever can change the link chooses the options; ` +
          'name the file itself',
      );
    }
    throw new UsageError(`${named} ${path} ${whyUnreadable(error)}; give the path of a JSON config file`);
  }
  try {
    const file = fstatSync(fd);
    if (file.isDirectory()) throw new UsageError(`${named} ${path} is a folder; give the path of a JSON config file`);
    if (!file.isFile())
      throw new UsageError(`${named} ${path} is not a regular file (a FIFO, a socket or a device); give the path of a JSON config file`);
    const problem = untrustedFile(path, file, statSync(dirname(path)), 'config file', 'turn auth off or redirect the upstream');
    if (problem !== null) throw new UsageError(problem);
    return readFileSync(fd, 'utf8');
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`${named} ${path} ${whyUnreadable(error)}; give the path of a JSON config file`);
  } finally {
    closeSync(fd);
  }
}

function whyUnreadable(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT'
    ? 'does not exist'
    : code === 'EISDIR'
      ? 'is a folder'
      : code === 'EACCES' || code === 'EPERM'
        ? 'is not readable by this user'
        : `cannot be read (${(error as Error).message})`;
}
