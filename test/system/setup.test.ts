// The README's test command sets up a fresh machine by itself: its set-up,
// scripts/setup-tests.sh, installs with apt-get what the tests need and the machine lacks,
// and nothing when nothing is missing, so running it again changes nothing. Here it runs
// on a PATH that is the machine's own with some tools taken out, and an apt-get that
// writes down what it was asked to do: the packages the tests need are all on this
// machine (the suite needs them), so hiding one is how it goes missing.
import t from 'tap';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { GO } from '../helpers/go.js';
import { PROGRAM_ENV, ROOT, tempDir } from '../helpers/server.js';

const run = promisify(execFile);
const SETUP = join(ROOT, 'scripts', 'setup-tests.sh');
const SYSTEM_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

// The tests at once: each runs the set-up on a PATH and an apt-get of its own, and the
// set-up's Go builds of one module at the same time share Go's build cache, which locks.
t.jobs = 3;

/**
 * A folder to be the whole PATH: a link to every program of the system's PATH, node's
 * folder and go's, but those in `hidden`, and, when `aptGet`, an apt-get and a sudo that
 * record their arguments in `calls` (one line per call) and succeed.
 */
function path(hidden: readonly string[], aptGet: boolean): { bin: string; calls: string } {
  const dir = tempDir(t);
  const bin = join(dir, 'bin');
  const calls = join(dir, 'calls');
  mkdirSync(bin);
  writeFileSync(calls, '');
  const skip = new Set([...hidden, 'apt-get', 'sudo']);
  for (const folder of [dirname(process.execPath), ...(GO === undefined ? [] : [dirname(GO)]), ...SYSTEM_PATH]) {
    if (!existsSync(folder)) continue;
    for (const name of readdirSync(folder)) {
      if (!skip.has(name) && !existsSync(join(bin, name))) symlinkSync(join(folder, name), join(bin, name));
    }
  }
  if (aptGet) {
    writeFileSync(join(bin, 'apt-get'), `#!/bin/sh\necho "apt-get $*" >> ${calls}\n`, { mode: 0o755 });
    writeFileSync(join(bin, 'sudo'), `#!/bin/sh\necho "sudo $1" >> ${calls}\nexec "$@"\n`, { mode: 0o755 });
  }
  return { bin, calls };
}

async function setup(bin: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return run('bash', [SETUP], { cwd: ROOT, env: { ...PROGRAM_ENV, PATH: bin }, maxBuffer: 16 << 20, timeout: 600_000 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({
      code: error.code ?? -1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? '',
    }),
  );
}

/** The apt-get calls recorded, without the sudo in front of them when not root. */
const aptCalls = (calls: string): string[] =>
  readFileSync(calls, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('apt-get '));

t.test('with nothing missing, the set-up installs nothing and succeeds', async (t) => {
  const { bin, calls } = path([], true);
  const result = await setup(bin);
  t.equal(result.code, 0, `exit 0 ${result.stderr}`);
  t.match(result.stdout, /^setup: the system packages are installed$/m, 'it says the system packages are there');
  t.same(aptCalls(calls), [], 'apt-get is not run');
  t.match(result.stdout, /^go version go/m, 'and it reaches Go, then npm');
  t.match(result.stdout, /^v\d+\.\d+\.\d+$/m, 'node --version');
});

t.test('a missing tool is installed with apt-get, by its Debian package', async (t) => {
  const { bin, calls } = path(['jq', 'etcd', 'caddy', 'promtool'], true);
  const result = await setup(bin);
  t.equal(result.code, 0, `exit 0 ${result.stderr}`);
  t.match(result.stdout, /^setup: installing caddy jq etcd-server prometheus$/m, 'it names what it installs');
  t.same(
    aptCalls(calls),
    ['apt-get update -qq', 'apt-get install -y -qq --no-install-recommends caddy jq etcd-server prometheus'],
    'apt-get updates its lists, then installs those packages and only those',
  );
});

t.test('with no apt-get, a missing tool stops the set-up with one line naming its package', async (t) => {
  const { bin, calls } = path(['jq'], false);
  const result = await setup(bin);
  t.equal(result.code, 1, 'exit 1');
  const said = result.stderr.split('\n').filter((line) => line !== '');
  t.equal(said.length, 1, `one line: ${said.join(' | ')}`);
  t.match(said[0], /^setup: missing jq /, 'naming the package');
  t.same(aptCalls(calls), [], 'nothing is run');
});
