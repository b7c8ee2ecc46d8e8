// One schema of options: each option's flag, kind, default, limits, parser
// and doc is one entry of SCHEMA (host/options.ts), and what is said of the options
// elsewhere must agree with it: the docs' table of flags (docs/reference/command-line.md), --help, the library's
// list of options, the limits the docs state. A flag added, renamed or re-bounded in
// the schema alone fails here until the docs follow.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { startServer } from '../../build/host/index.js';
import { anchor, flagTable, SEE_PAGES } from '../../build/host/cli/help.js';
import { SCHEMA } from '../../build/host/options.js';
import type { OptionSpec } from '../../build/host/options.js';
import { ROOT, runCli } from '../helpers/server.js';

const ENTRIES = Object.entries(SCHEMA) as [string, OptionSpec<unknown, unknown>][];
const TABLE_PAGE = 'docs/reference/command-line.md';
const PAGE = readFileSync(join(ROOT, TABLE_PAGE), 'utf8');

/** The option's own check of a value; what it throws, as an Error. */
function check(key: string, value: unknown): unknown {
  const entry = (SCHEMA as Record<string, OptionSpec<unknown, unknown>>)[key];
  return entry.parse(value, key, entry.limits);
}

/** The environment's name of a flag, as the command line's reference, "The environment and a config file", states the rule. */
function envName(flag: string): string {
  return `API_AUTH_${flag
    .replace(/^api-auth-/, '')
    .toUpperCase()
    .replace(/-/g, '_')}`;
}

/** The docs' table of flags: the lines after its "Written from the options' schema" comment, to the blank line. */
function docsTable(): string[] {
  const lines = PAGE.split('\n');
  const start = lines.findIndex((line) => line.startsWith("<!-- Written from the options' schema"));
  t.ok(start > 0, `${TABLE_PAGE} marks its table of flags`);
  const end = lines.indexOf('', start);
  return lines.slice(start + 1, end);
}

/** A default as the docs write it (`12h`, `~/.api-auth`, `false`), read back as the option's text is. */
function readBack(text: string): unknown {
  return text === 'true' || text === 'false' ? text === 'true' : text.startsWith('~/') ? join(homedir(), text.slice(2)) : text;
}

t.test("the docs' table of flags is the schema's: every option in its order, its variable, its default and its doc", async (t) => {
  const table = docsTable();
  t.equal(
    `${table.join('\n')}\n`,
    flagTable(),
    'the table is the one written from the schema (print it with: ' +
      'node -e "import(\'./build/host/cli/help.js\').then((m) => process.stdout.write(m.flagTable()))")',
  );
  const rows = table.slice(2).map((line) =>
    line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((cell) => cell.trim()),
  );
  t.same(
    rows.map(([flag]) => flag),
    [...ENTRIES.map(([, entry]) => `\`--${entry.flag}\``), '`--config-file`', '`--help`, `--version`'],
    "one row per flag, in the schema's order, then the command's own",
  );
  for (const [key, entry] of ENTRIES) {
    const [, env, shown, meaning] = rows.find(([flag]) => flag === `\`--${entry.flag}\``)!;
    t.equal(env, `\`${envName(entry.flag)}\``, `${entry.flag}: its variable`);
    t.ok(meaning.replace(/\\(.)/g, '$1').startsWith(entry.doc), `${entry.flag}: its doc`);
    const literal = /^`(.*)`$/.exec(shown);
    if (literal !== null) {
      t.same(
        check(key, readBack(literal[1])),
        check(key, entry.default),
        `${entry.flag}: the default shown, ${literal[1]}, is the default`,
      );
    } else if (shown === 'none') {
      t.ok(entry.default === undefined || (Array.isArray(entry.default) && entry.default.length === 0), `${entry.flag}: no default`);
    } else {
      t.equal(shown.replace(/\\(.)/g, '$1'), entry.shownDefault, `${entry.flag}: the default described`);
    }
  }
  for (const [, entry] of ENTRIES) {
    if (entry.see === undefined) continue;
    const page = SEE_PAGES[entry.see];
    t.ok(page, `${entry.flag}: the page of "${entry.see}" is known`);
    if (page === undefined) continue;
    const headings = readFileSync(join(ROOT, dirname(TABLE_PAGE), page), 'utf8')
      .split('\n')
      .filter((line) => /^#{1,6} /.test(line))
      .map((line) => anchor(line.replace(/^#+ /, '')));
    t.ok(headings.includes(anchor(entry.see)), `${entry.flag}: "${entry.see}" is a section of ${page}`);
  }
});

t.test('--help names every flag of the schema and no other, each with its doc and its default', async (t) => {
  const help = await runCli(t, ['--help']);
  t.equal(help.code, 0);
  const flagsSection = help.stdout.slice(help.stdout.indexOf('Flags:\n'), help.stdout.indexOf('\n\n', help.stdout.indexOf('Flags:\n')));
  const blocks = flagsSection
    .split(/\n(?= {2}--)/)
    .slice(1)
    .map((block) => block.replace(/\s+/g, ' ').trim());
  t.same(
    blocks.map((block) => /^--([a-z-]+)/.exec(block)?.[1]),
    [...ENTRIES.map(([, entry]) => entry.flag), 'config-file', 'help', 'version'],
    "the schema's flags, in its order, then the command's own",
  );
  for (const [key, entry] of ENTRIES) {
    const block = blocks.find((b) => b.startsWith(`--${entry.flag} `) || b.startsWith(`--${entry.flag}[`))!;
    t.ok(block.includes(entry.doc), `${entry.flag}: its doc`);
    t.ok(
      block.startsWith(entry.kind === 'boolean' ? `--${entry.flag}[=true|false] ` : `--${entry.flag} ${entry.arg ?? ''}`),
      `${entry.flag}: its syntax`,
    );
    const shown = /\(default (.+?)(?:, here (.+))?\)$/.exec(block);
    const defaulted = entry.default !== undefined && !(Array.isArray(entry.default) && entry.default.length === 0);
    if (!defaulted) {
      t.ok(
        shown === null || shown[1] === 'none' || shown[1] === entry.shownDefault,
        `${entry.flag}: no default shown but "none" or its description`,
      );
      continue;
    }
    t.ok(shown, `${entry.flag}: its default is shown`);
    if (shown === null) continue;
    const value = shown[2] ?? shown[1];
    t.same(check(key, readBack(value)), check(key, entry.default), `${entry.flag}: the default shown, ${value}, is the default`);
  }
});

t.test('the limits the docs state are the limits the options are checked with', async (t) => {
  for (const [key, entry] of ENTRIES) {
    if (entry.limits === undefined) continue;
    const { min, max } = entry.limits;
    const range = /(\d+[a-zA-Z]*)(?: byte)? to (\d+[a-zA-Z]*)/.exec(entry.doc);
    t.ok(range, `${entry.flag}: its doc states its range`);
    if (range === null) continue;
    t.equal(check(key, range[1]), min, `${entry.flag}: ${range[1]} is its least`);
    t.equal(check(key, range[2]), max, `${entry.flag}: ${range[2]} is its most`);
    t.throws(() => check(key, min - 1), { code: 'API_AUTH_BAD_OPTION', option: key }, `${entry.flag}: below it, refused`);
    t.throws(() => check(key, max + 1), { code: 'API_AUTH_BAD_OPTION', option: key }, `${entry.flag}: above it, refused`);
  }
});

t.test("startServer takes exactly the schema's options; each flag, variable and key names one of them", async (t) => {
  await t.rejects(startServer({ nope: 1 } as never), {
    code: 'API_AUTH_BAD_OPTION',
    option: 'nope',
    message: `nope is not an option; the options are ${ENTRIES.map(([key]) => key).join(', ')}`,
  });
  const flags = ENTRIES.map(([, entry]) => entry.flag);
  t.equal(new Set(flags).size, flags.length, 'no two options share a flag');
  t.equal(new Set(flags.map(envName)).size, flags.length, 'no two options share a variable');
  t.notOk(
    flags.some((flag) => envName(flag) === envName('config-file')),
    "none is the config file's variable",
  );
});
