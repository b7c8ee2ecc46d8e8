// Go for the tests that build a program of the module under go/: the go command on the
// PATH, run offline from the module cache (GOPROXY=off), which CI fills (.ci/run).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PROGRAM_ENV, ROOT } from './server.js';

/** The module's folder. */
export const GO_MODULE = join(ROOT, 'go');
/** The go command on the PATH; undefined when there is none. */
export const GO = (process.env.PATH ?? '')
  .split(':')
  .filter((d) => d !== '')
  .map((d) => join(d, 'go'))
  .find((path) => existsSync(path));
/** Offline, from the module cache: what go.sum pins, nothing fetched. */
export const GO_ENV = { ...PROGRAM_ENV, GOFLAGS: '-mod=readonly -buildvcs=false', GOPROXY: 'off', GOTOOLCHAIN: 'local' };

/** Builds the module's `packages` into `out` (a folder), without a symbol table: programs to run, not to debug. */
export function goBuild(out: string, packages: readonly string[]): Promise<void> {
  if (GO === undefined) return Promise.reject(new Error('go is not on the PATH: .ci/run installs it (the toolchain go/go.mod names)'));
  return new Promise((done, reject) => {
    execFile(
      GO,
      ['build', '-ldflags=-s -w', '-o', `${out}/`, ...packages],
      { cwd: GO_MODULE, env: GO_ENV, timeout: 600_000 },
      (error, _stdout, stderr) => (error ? reject(new Error(`go build ${packages.join(' ')} failed:\n${stderr}`)) : done()),
    );
  });
}
