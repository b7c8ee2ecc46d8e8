// The shell blocks of the docs (README.md, CONTRIBUTING.md and docs/**/*.md), read the way
// test/docs/readme.test.ts runs them. The convention (stated in the README too, in a
// comment near its top):
//
// - Every ```sh block of a file is run, in document order, in one shell session of its own.
// - A block is a series of commands. A command is a line, with the lines it continues
//   (a trailing `\`, or a quoted string still open) and the lines of its here-documents
//   (`<<'EOF'` ... `EOF`).
// - The `# ` lines directly under a command, with no blank line between, are its output:
//   the whole of what it prints on stdout, line for line. `...` in such a line matches any
//   text (a token, a time, a serial); a line that is only `...` matches any number of lines.
//   Every other comment line is prose about the command that follows.
// - A command shown without output lines is not checked beyond its exit status.
// - Every command must succeed (exit 0). A command that starts a server (see `startsServer`)
//   is run in the background until the next one does, or its file ends. A command that puts
//   itself in the background (it ends in `&`) runs until its file ends.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './server.js';

export interface Command {
  /** The shell text, continuation and here-document lines included. */
  text: string;
  /** The output lines the docs show for it, without their `# `. */
  output: string[];
  /** The file's line number (1-based) of its first line. */
  line: number;
}

export interface Block {
  /** The heading the block sits under. */
  heading: string;
  /** The file's line number (1-based) of its opening fence. */
  line: number;
  commands: Command[];
}

/** Every ```sh block of `markdown` (the file `name`), in order, its commands and their output lines. */
export function shellBlocks(markdown: string, name = 'README.md'): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const h = /^#{1,6} (.*)$/.exec(lines[i]);
    if (h) heading = h[1];
    const fence = /^(\s*)```sh\s*$/.exec(lines[i]);
    if (!fence) continue;
    const indent = fence[1].length;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i].slice(indent));
    if (i === lines.length) throw new Error(`${name} line ${start + 1}: the sh block under "${heading}" is never closed`);
    blocks.push({ heading, line: start + 1, commands: commands(body, start + 2, name) });
  }
  return blocks;
}

function commands(body: string[], firstLine: number, name: string): Command[] {
  const found: Command[] = [];
  let last: Command | undefined;
  for (let i = 0; i < body.length; i++) {
    const line = body[i];
    if (line.trim() === '') {
      last = undefined;
      continue;
    }
    if (line.startsWith('#')) {
      // Directly under a command: its output. Anywhere else: prose.
      if (last) last.output.push(line.replace(/^# ?/, ''));
      continue;
    }
    const start = i;
    const text = [line];
    const heredocs: string[] = [];
    const collectHeredocs = (l: string): void => {
      for (const m of l.matchAll(/<<-?\s*(['"]?)([A-Za-z_]+)\1/g)) heredocs.push(m[2]);
    };
    collectHeredocs(line);
    while ((text[text.length - 1].endsWith('\\') || quoteOpen(text.join('\n'))) && i + 1 < body.length) {
      text.push(body[++i]);
      collectHeredocs(body[i]);
    }
    for (const end of heredocs) {
      do {
        if (i + 1 >= body.length) throw new Error(`${name} line ${firstLine + start}: the here-document ${end} is never ended`);
        text.push(body[++i]);
      } while (text[text.length - 1] !== end);
    }
    last = { text: text.join('\n'), output: [], line: firstLine + start };
    found.push(last);
  }
  return found;
}

/** Whether shell text ends inside a quoted string (its command goes on on the next line). */
function quoteOpen(text: string): boolean {
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") {
      if (c === "'") quote = '';
    } else if (quote === '"') {
      if (c === '\\') i++;
      else if (c === '"') quote = '';
    } else if (c === '\\') {
      i++;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '#' && (i === 0 || /\s/.test(text[i - 1]))) {
      const nl = text.indexOf('\n', i);
      if (nl < 0) break;
      i = nl;
    }
  }
  return quote !== '';
}

/**
 * The documentation's Markdown files, as paths from the checkout's root, in the order the
 * docs test runs them: README.md (its first command installs), CONTRIBUTING.md, then
 * every file under docs/, by path.
 */
export function docFiles(): string[] {
  const below = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? below(`${dir}/${entry.name}`) : entry.name.endsWith('.md') ? [`${dir}/${entry.name}`] : [],
    );
  return ['README.md', 'CONTRIBUTING.md', ...below('docs').sort()];
}

/** The shell blocks of one documentation file (a path from the checkout's root). */
export function docBlocks(file: string): Block[] {
  return shellBlocks(readFileSync(join(ROOT, file), 'utf8'), file);
}

/**
 * Whether `actual` (the lines a command printed) is what the docs show: the same
 * lines, `...` in a line matching any text and a line of only `...` any number of lines.
 * Returns undefined when it is, or the first difference.
 */
export function outputDiffers(expected: readonly string[], actual: readonly string[]): string | undefined {
  const line = (pattern: string): RegExp =>
    new RegExp(
      '^' +
        pattern
          .split('...')
          .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
          .join('.*') +
        '$',
      's',
    );
  const matches = (e: number, a: number): boolean => {
    if (e === expected.length) return a === actual.length;
    if (expected[e] === '...') {
      for (let skip = a; skip <= actual.length; skip++) if (matches(e + 1, skip)) return true;
      return false;
    }
    return a < actual.length && line(expected[e]).test(actual[a]) && matches(e + 1, a + 1);
  };
  if (matches(0, 0)) return undefined;
  let n = 0;
  while (n < expected.length && n < actual.length && expected[n] !== '...' && line(expected[n]).test(actual[n])) n++;
  return (
    `line ${n + 1} differs: the docs show ${JSON.stringify(expected[n] ?? '(nothing more)')}, the command printed ${JSON.stringify(actual[n] ?? '(nothing more)')}` +
    `\nthe whole output:\n${actual.join('\n')}`
  );
}

/** Whether a command puts itself in the background (its last line ends in a lone `&`). */
export function backgrounds(text: string): boolean {
  const last = text
    .split('\n')
    .at(-1)!
    .replace(/\s+#.*$/, '');
  return /(^|[^&])&\s*$/.test(last);
}

/**
 * Whether a command starts a server that runs until stopped: api-auth in the foreground
 * (`npm start`, or `node build/host/main.js`, `api-auth` or `npx api-auth` with flags other
 * than --help and --version, the first also with none; its operator commands `token` and
 * `password` are clients of a server and end by themselves).
 * One that puts itself in the background is not: it runs beside the next.
 */
export function startsServer(text: string): boolean {
  if (backgrounds(text)) return false;
  const commandWord = String.raw`(?:^|[;&|(])\s*(?:sudo\s+)?`;
  return new RegExp(
    `${commandWord}(?:npm start|(?:node build/host/main\\.js|(?:npx\\s+)?api-auth)\\s+--(?!help\\b|version\\b)|node build/host/main\\.js\\s*$)`,
    'm',
  ).test(text.replace(/\$\([^)]*\)/g, ''));
}

/** The unit a command starts through systemd (`systemctl start`, `restart`, `enable --now`), if any. */
export function startsUnit(text: string): string | undefined {
  const m = /systemctl\s+(?:(?:start|restart)|enable\s+--now)\s+([\w@.-]+)/.exec(text);
  return m?.[1];
}

/** The port a server command listens on: its --http-port, else api-auth's default. */
export function serverPort(text: string): number {
  const m = /--http-port[ =](\d+)/.exec(text);
  return m ? Number(m[1]) : 9650;
}
