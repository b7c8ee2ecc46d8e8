// The flag syntax both commands share, read by node:util's parseArgs: `--name value`,
// `--name=value`, and for true/false flags a bare `--name`, `=true` or `=false`. A
// mistake gets the same message whichever command it is made on.
import { parseArgs } from 'node:util';
import { closest } from '../closest.js';
import { UsageError } from '../errors.js';

/** A flag's kind: it takes a value, or it is true/false. */
export type FlagKinds = Readonly<Record<string, 'string' | 'boolean'>>;

/** What a command line holds, in order: a flag given twice is there twice. */
export type Arg =
  | { readonly kind: 'flag'; readonly name: string; readonly value: string | boolean }
  | { readonly kind: 'positional'; readonly value: string };

export interface ReadOptions {
  /** How the command's help is asked for ("api-auth", "api-auth token"), for the messages. */
  readonly command: string;
  /**
   * Flags that end the reading where they appear, set: a later mistake does not hide
   * the help. (A mistake before them is still one.)
   */
  readonly stopAt?: readonly string[];
  /** Flags refused with a reason of their own: the message, or undefined for a flag like any other. */
  readonly refuse?: (name: string) => string | undefined;
}

/** What a true/false flag's or variable's text may say, either way: systemd's words, in any case, but its one-letter ones. */
const TRUE_WORDS: readonly string[] = ['true', 'yes', 'on', '1'];
const FALSE_WORDS: readonly string[] = ['false', 'no', 'off', '0'];

/** The truth `text` says, or undefined when it says none. */
export function truth(text: string): boolean | undefined {
  const word = text.toLowerCase();
  return TRUE_WORDS.includes(word) ? true : FALSE_WORDS.includes(word) ? false : undefined;
}

/** Reads `args` against `kinds`. Throws UsageError for a flag the command does not take, or a flag's value that is missing or malformed. */
export function readArgs(args: readonly string[], kinds: FlagKinds, options: ReadOptions): Arg[] {
  const config = Object.fromEntries(Object.entries(kinds).map(([name, type]) => [name, { type }]));
  const { tokens } = parseArgs({ args: [...args], options: config, strict: false, allowPositionals: true, tokens: true });
  const read: Arg[] = [];
  // A bare true/false flag just before: "--flag true" is almost always meant as --flag=true.
  let bareBoolean: string | null = null;
  let terminated = false;
  for (const token of tokens) {
    if (token.kind === 'option-terminator') {
      terminated = true;
      continue;
    }
    if (token.kind === 'positional') {
      if (!terminated && bareBoolean !== null && truth(token.value) !== undefined) {
        throw new UsageError(`unexpected argument ${JSON.stringify(token.value)}; write --${bareBoolean}=${token.value}`);
      }
      bareBoolean = null;
      read.push({ kind: 'positional', value: token.value });
      continue;
    }
    bareBoolean = null;
    const { name, rawName } = token;
    if (!rawName.startsWith('--')) {
      // Up to its "=" only: -api-auth-password=... would otherwise echo the password.
      throw new UsageError(
        `unknown flag ${args[token.index].split('=')[0]}; flags start with two dashes (run ${options.command} --help to list them)`,
      );
    }
    const refused = options.refuse?.(name);
    if (refused !== undefined) throw new UsageError(refused);
    const kind = kinds[name];
    if (kind === undefined) {
      // Only a flag's name is suggested, never the text given: that may be a secret pasted in the wrong place.
      const likely = closest(name, Object.keys(kinds));
      throw new UsageError(
        `unknown flag --${name}${likely === undefined ? '' : ` (did you mean --${likely}?)`}; run ${options.command} --help to list the flags`,
      );
    }
    let value: string | boolean;
    if (kind === 'boolean') {
      const said = token.value === undefined ? true : truth(token.value);
      if (token.value === undefined) bareBoolean = name;
      else if (said === undefined) {
        throw new UsageError(`--${name} takes no value, or =true or =false (or yes/no, on/off, 1/0), not ${JSON.stringify(token.value)}`);
      }
      value = said!;
    } else {
      // A flag where the value should be is almost always a forgotten value; a value
      // that really starts with "--" can still be given as --name=--value.
      if (token.value === undefined || (!token.inlineValue && token.value.startsWith('--'))) throw needsValue(name);
      value = token.value;
    }
    read.push({ kind: 'flag', name, value });
    if (value === true && options.stopAt?.includes(name)) break;
  }
  return read;
}

function needsValue(name: string): UsageError {
  return new UsageError(`--${name} needs a value: --${name} <value> or --${name}=<value>`);
}

/** The value of a flag that must not be empty. */
export function nonEmpty(name: string, value: string): string {
  if (value.trim() === '') throw new UsageError(`--${name} must not be empty`);
  return value;
}
