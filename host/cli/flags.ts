// The server's command line: its flags, the environment and a config file in, the
// library's options out, validated by the library's own resolver (options.ts), so that
// the command and the library share one schema of defaults, limits and checks. A flag
// beats the environment, which beats the file, which beats the default. Messages name
// each option as it was given: --http-port, API_AUTH_HTTP_PORT (environment), or
// "http-port" (config file PATH).
import { OptionError, UsageError } from '../errors.js';
import type { Namer } from '../errors.js';
import { resolveServerOptions, SCHEMA } from '../options.js';
import type { ServerOptions } from '../options.js';
import { nonEmpty, readArgs } from './args.js';
import type { FlagKinds } from './args.js';
import {
  CONFIG_FILE,
  envName,
  envSource,
  expandHome,
  fileSource,
  fromConfigFile,
  fromEnvironment,
  fromText,
  OPTION_OF_FLAG,
  SECRETS,
} from './sources.js';
import type { Environment, Found, OptionKey } from './sources.js';

export { USAGE } from './help.js';
export type { Environment } from './sources.js';

export type Command =
  | { readonly action: 'serve'; readonly options: ServerOptions }
  | { readonly action: 'help' }
  | { readonly action: 'version' };

const KINDS: FlagKinds = {
  ...Object.fromEntries(Object.values(SCHEMA).map(({ flag, kind }) => [flag, kind === 'boolean' ? 'boolean' : 'string'])),
  [CONFIG_FILE.flag]: 'string',
  help: 'boolean',
  version: 'boolean',
};

/** Names options by their flags: how the command line names an option given nowhere. */
export const flagName: Namer = (option) => {
  const entry = (SCHEMA as Record<string, { flag: string } | undefined>)[option];
  return entry === undefined ? option : `--${entry.flag}`;
};

/**
 * Parses the arguments after the program name, with the API_AUTH_ variables of `env`
 * (none by default) and the config file that either names. Throws UsageError, with the
 * line to show.
 */
export function parseArgs(args: readonly string[], env: Environment = {}): Command {
  return readCommand(args, env).command;
}

/** The command, and how its messages name each option: as it was given. Throws UsageError, with the line to show. */
export function readCommand(args: readonly string[], env: Environment): { command: Command; name: Namer } {
  const flags: Found = {};
  let configFile: string | undefined;
  // In order, like Go's flag package: --help and --version act where they appear.
  for (const arg of readArgs(args, KINDS, { command: 'api-auth', stopAt: ['help', 'version'], refuse: refuseSecret })) {
    if (arg.kind === 'positional') {
      // Not shown: a word that is no flag's may be a password pasted in the wrong place.
      throw new UsageError(
        'unexpected argument (not shown: it may be a secret); api-auth takes only flags, each --name value ' +
          'or --name=value (run api-auth --help to list them)',
      );
    }
    if (arg.name === 'help' || arg.name === 'version') {
      if (arg.value === true) return { command: { action: arg.name }, name: flagName };
      continue;
    }
    if (arg.name === CONFIG_FILE.flag) {
      configFile = expandHome(nonEmpty(arg.name, String(arg.value)));
      continue;
    }
    const key = OPTION_OF_FLAG.get(arg.name)!;
    flags[key] = typeof arg.value === 'string' ? fromText(key, arg.value) : arg.value;
  }
  const environment = fromEnvironment(env);
  const file = configFile ?? environment.configFile;
  const named = configFile !== undefined ? `--${CONFIG_FILE.flag}` : envSource(envName(CONFIG_FILE.flag));
  const inFile = file === undefined ? {} : fromConfigFile(file, named);
  const options: Record<string, unknown> = {};
  const given = new Map<string, string>();
  for (const key of Object.keys(SCHEMA) as OptionKey[]) {
    const { flag } = SCHEMA[key];
    if (key in flags) options[key] = flags[key];
    else if (key in environment.found) {
      options[key] = environment.found[key];
      given.set(key, envSource(envName(flag)));
    } else if (key in inFile) {
      options[key] = inFile[key];
      given.set(key, fileSource(flag, file!));
    }
  }
  const name: Namer = (option) => given.get(option) ?? flagName(option);
  try {
    resolveServerOptions(options);
  } catch (error) {
    if (error instanceof OptionError) throw new UsageError(error.describe(name));
    throw error;
  }
  return { command: { action: 'serve', options }, name };
}

/** A password's own flag: refused with the way to give it. */
function refuseSecret(flag: string): string | undefined {
  const file = SECRETS.get(flag);
  return file === undefined
    ? undefined
    : `--${flag} is refused: a password on the command line can be read by every user of the machine; ` +
        `write it in a file only this user may read, and give --${file}`;
}
