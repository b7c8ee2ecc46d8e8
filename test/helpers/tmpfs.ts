// A data folder on a disk that really fills up: a small tmpfs, filled to the last page by
// a filler file, for the tests of failed writes. Mounting needs root (CI runs as root):
// those tests are skipped, saying so, when not root (helpers/root.ts); as root, a refused
// mount fails them.
import type { Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, randomPassword, type Server } from './server.js';

/** A folder with a 1 MiB tmpfs mounted at `<folder>/data`, unmounted and removed when `t` ends. */
export function tmpfsDataDir(t: Test): { root: string; dataDir: string } {
  const root = mkdtempSync(join(tmpdir(), 'api-auth-tmpfs-'));
  const dataDir = join(root, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  // Throws (the test fails, it is not skipped) where tmpfs cannot be mounted.
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'api-auth-test', dataDir]);
  t.teardown(() => {
    // Lazy: the server may still hold files there until its own teardown kills it.
    execFileSync('umount', ['-l', dataDir]);
    rmSync(root, { recursive: true, force: true });
  });
  return { root, dataDir };
}

/** Writes a file in `dir` until the file system is full; returns its path. */
export function fillUp(dir: string): string {
  const path = join(dir, 'filler');
  const fd = openSync(path, 'w', 0o600);
  const page = Buffer.alloc(4096, 0x5a);
  try {
    for (;;) writeSync(fd, page);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
  return path;
}

/**
 * Starts the CLI with its data folder at `dataDir` (a tmpfs of `tmpfsDataDir`) and a fresh
 * password file in `root` (off the tmpfs, so that filling the disk leaves it readable),
 * `args` after the defaults; waits for its `listening` line.
 */
export async function startOnTmpfs(t: Test, root: string, dataDir: string, args: readonly string[] = []): Promise<Server> {
  const password = randomPassword();
  const passwordFile = join(root, 'password');
  writeFileSync(passwordFile, password, { mode: 0o600 });
  const all = ['--http-port', '0', '--data-dir', dataDir, '--api-auth-required', '--api-auth-password-file', passwordFile, ...args];
  const run = launch(t, all);
  const listening = await run.waitForLog((l) => l.msg === 'listening');
  const port = Number(listening.port);
  return { ...run, url: `http://127.0.0.1:${port}`, port, password, passwordFile, dir: root, dataDir, args: all, listening };
}
