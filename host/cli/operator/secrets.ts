// The secrets an operator command sends (a password, a new password, a token): read from
// a file, from stdin, or from the terminal without echo; never from the command line,
// where other users could read them in the process list.
import { readFile } from 'node:fs/promises';
import { UsageError } from '../../errors.js';
import { MAX_PASSWORD_LENGTH, countCodePoints } from '../../password/file.js';
import type { CommandIo } from '../io.js';

// Far more than a 1024-character password; stops a wrong path from being read whole.
const MAX_SECRET_BYTES = 64 * 1024;

/** The new password of password change: from its file or stdin, or typed twice at the prompt. */
export async function readNewPassword(file: string | undefined, stdin: boolean, io: CommandIo): Promise<string> {
  let password: string;
  if (file !== undefined || stdin) {
    password = await readSecret(file, stdin, '', '--new-password', io);
  } else {
    password = await readSecret(undefined, false, 'New password: ', '--new-password', io);
    const again = await readSecret(undefined, false, 'New password again: ', '--new-password', io);
    if (again !== password) throw new UsageError('the two new passwords differ; nothing was changed');
  }
  const length = countCodePoints(password);
  if (length > MAX_PASSWORD_LENGTH)
    throw new UsageError(`the new password is ${length} characters long; at most ${MAX_PASSWORD_LENGTH} are allowed`);
  return password;
}

/**
 * A password (or a token) from its file (trimmed), from stdin (a password without its
 * line break, a token trimmed), or from a no-echo prompt. Text that is not UTF-8 is
 * refused: decoding it would put U+FFFD in place of the bad bytes, and send a secret
 * other than the one meant.
 */
export async function readSecret(
  file: string | undefined,
  stdin: boolean,
  prompt: string,
  flag: string,
  io: CommandIo,
  what: 'password' | 'token' = 'password',
  named = `${flag}-file`,
): Promise<string> {
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
      if (bytes.length > MAX_SECRET_BYTES)
        throw new UsageError(`${source}: the file is larger than ${MAX_SECRET_BYTES} bytes; it must hold only the ${what}`);
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
function promptHidden(prompt: string, io: CommandIo): Promise<string> {
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
