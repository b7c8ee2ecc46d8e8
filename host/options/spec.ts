// What an entry of the options' schema says about its option: how it is written, its
// bounds, and the parser that checks a value given for it. The schema (schema.ts) is made
// of these, and the parsers (parsers.ts) are typed by them.

/** How an option is written: its flag's syntax, how its text from the environment or a config file is read, its placeholder in --help. */
export type OptionKind = 'boolean' | 'integer' | 'duration' | 'size' | 'text' | 'path' | 'list';

/** The bounds of a number, or of a duration in seconds, or of a size in bytes. */
export interface Limits {
  readonly min: number;
  readonly max: number;
}

/** Checks a value given for `option` (bounded by `limits`) and returns what the service runs with. Throws OptionError. */
export type OptionParser<V> = (value: unknown, option: string, limits: Limits | undefined) => V;

/** One option of startServer, and of the command line: everything about it, in one place. */
export interface OptionSpec<I, V> {
  /** The flag without its dashes: also the config file's key, and API_AUTH_ and the rest in upper snake case in the environment. */
  readonly flag: string;
  readonly kind: OptionKind;
  /** The placeholder in --help (`--http-port PORT`); the kind's own by default. */
  readonly arg?: string;
  /** The value when left out, as the option takes it; none when absent. */
  readonly default?: I;
  /** The default as the docs show it, where the value itself would not say it (every core, ~/.api-auth). */
  readonly shownDefault?: string;
  readonly limits?: Limits;
  readonly parse: OptionParser<V>;
  /** One line for --help and the docs' table of flags. */
  readonly doc: string;
  /** The docs' section that says more (host/cli/help.ts, SEE_PAGES, names its page). */
  readonly see?: string;
  /** Means something only with this option on: refused without it, never ignored. */
  readonly within?: 'upstream' | 'clusterEtcd' | 'tlsEnabled';
}

/** An entry of the schema: `I` what the option takes, `V` what it gives once checked, `D` whether it has a default. */
export interface OptionEntry<I, V, D extends boolean> extends OptionSpec<I, V> {
  /** Never set: carries I and D for the types derived from the schema. */
  readonly types?: { input: I; defaulted: D };
}
