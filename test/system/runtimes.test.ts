// One core, every runtime: the same build/core.wasm passes the whole vector file
// (test/vectors/) in Node, Deno, Bun, headless Chromium and a C program built with
// wasm2c. The JavaScript hosts share one runner (test/vectors/run-vectors.js) over the
// portable loader (build/host/core/core.js). A runtime missing from the machine fails its test:
// .ci/run installs them (Deno and Bun from npm, Chromium and wabt from Debian).
import t from 'tap';
import type { Test } from 'tap';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { coreModule } from '../../build/host/core/module.js';
import { Core } from '../../build/host/core/core.js';
import { Outcome } from '../../build/host/core/abi.js';
import { runVectors } from '../vectors/run-vectors.js';
import type { VectorResult } from '../vectors/run-vectors.js';
import { CHROMIUM, launchChromium } from '../helpers/browser.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const VECTORS = JSON.parse(readFileSync(join(ROOT, 'test/vectors/core-vectors.json'), 'utf8'));
const TOTAL: number = VECTORS.cases.length;
const WASM2C_RUNTIME = '/usr/share/wabt/wasm2c';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to its end; never rejects for a non-zero exit (the test reads `code`). */
function run(file: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((done, reject) => {
    execFile(file, args, { cwd: ROOT, env: { ...process.env, ...env }, timeout: 30_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== 'number') reject(new Error(`${file} ${args.join(' ')}: ${error.message}\n${stderr}`));
      else done({ code: error ? Number(error.code) : 0, stdout, stderr });
    });
  });
}

/** The missing pieces of a host, named with how to get them. */
function needs(t: Test, pieces: Array<[path: string, install: string]>): boolean {
  const missing = pieces.filter(([path]) => !existsSync(path));
  for (const [path, install] of missing) t.fail(`${path} is missing: ${install}`);
  return missing.length === 0;
}

function onPath(program: string): string {
  const dir = (process.env.PATH ?? '').split(':').find((d) => d && existsSync(join(d, program)));
  return dir ? join(dir, program) : program;
}

/** What a runtime's entry script reports: the README snippet's answers, then the runner's. */
type HostResult = VectorResult & { error?: string; snippet?: { outcome: string; password: number } };

function allPassed(t: Test, host: string, result: HostResult): void {
  t.notOk(result.error, `${host} ran the runner`, { error: result.error });
  t.same(result.snippet, { outcome: 'Valid', password: 32 }, `${host}: a random key, a token, a generated password`);
  t.equal(result.total, TOTAL, `${host} ran all ${TOTAL} cases`);
  t.equal(result.failed, 0, `${host}: no case failed`, { failures: result.failures?.slice(0, 5) });
  t.equal(result.passed, TOTAL, `${host}: ${TOTAL} of ${TOTAL} passed`);
}

/** The runner's result: the last line a runtime's entry script printed. */
function lastJsonLine(t: Test, host: string, { code, stdout, stderr }: Run): HostResult | undefined {
  t.equal(code, 0, `${host} exited 0`, { stderr });
  const line = stdout.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line);
  } catch {
    t.fail(`${host} printed no result`, { stdout, stderr });
    return undefined;
  }
}

async function timed<T>(t: Test, what: string, work: () => Promise<T>): Promise<T> {
  const start = performance.now();
  try {
    return await work();
  } finally {
    t.comment(`${what}: ${Math.round(performance.now() - start)} ms`);
  }
}

t.test('Node: the runner in this process, the module from core/module.ts', async (t) => {
  const core = new Core(coreModule());
  core.setKey();
  const now = Math.floor(Date.now() / 1000);
  const { token } = core.issue(core.addGrant(['/ext/info']), now, 3600);
  const snippet = { outcome: Outcome[core.authorize(`Bearer ${token}`, '/ext/info', now)], password: core.generatePassword().length };
  const result = await timed(t, 'node', () => runVectors(coreModule(), VECTORS));
  allPassed(t, 'node', { snippet, ...result });
});

t.test('Deno (npm package deno): the loader through an import map', async (t) => {
  const deno = join(ROOT, 'node_modules/.bin/deno');
  if (!needs(t, [[deno, 'run `npm ci` (devDependency "deno")']])) return;
  const denoDir = mkdtempSync(join(tmpdir(), 'api-auth-deno-'));
  t.teardown(() => rmSync(denoDir, { recursive: true, force: true }));
  // --no-config and --no-npm: the bare specifier resolves through the import map only,
  // as in a browser; reading the repository is the only permission.
  const output = await timed(t, 'deno', () =>
    run(
      deno,
      [
        'run',
        '--no-config',
        '--no-npm',
        '--no-remote',
        '--no-prompt',
        `--allow-read=${ROOT}`,
        '--import-map=test/vectors/hosts/import-map.json',
        'test/vectors/hosts/deno.js',
      ],
      { DENO_DIR: denoDir, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' },
    ),
  );
  const result = lastJsonLine(t, 'deno', output);
  if (result) allPassed(t, 'deno', result);
});

t.test('Bun (npm package bun): the loader resolved from node_modules', async (t) => {
  const bun = join(ROOT, 'node_modules/.bin/bun');
  if (!needs(t, [[bun, 'run `npm ci` (devDependency "bun")']])) return;
  const output = await timed(t, 'bun', () => run(bun, ['--no-install', 'test/vectors/hosts/bun.js'], { DO_NOT_TRACK: '1' }));
  const result = lastJsonLine(t, 'bun', output);
  if (result) allPassed(t, 'bun', result);
});

t.test("headless Chromium (Debian's chromium via playwright-core): the page's own import map", async (t) => {
  if (!needs(t, [[CHROMIUM, 'install it: apt-get install -y --no-install-recommends chromium']])) return;
  const served = ['/build/', '/test/vectors/', '/node_modules/@assemblyscript/loader/'];
  const types: Record<string, string> = {
    '.html': 'text/html; charset=utf-8',
    '.js': 'text/javascript',
    '.json': 'application/json',
    '.wasm': 'application/wasm',
  };
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const file = join(ROOT, path);
    if (req.method !== 'GET' || !served.some((p) => path.startsWith(p)) || !file.startsWith(ROOT) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  t.teardown(() => new Promise<void>((closed) => server.close(() => closed())));
  const browser = await timed(t, 'chromium start', () => launchChromium(t));
  const page = browser.pages()[0] ?? (await browser.newPage());
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  const { port } = server.address() as AddressInfo;
  const result = await timed(t, 'chromium vectors', async () => {
    await page.goto(`http://127.0.0.1:${port}/test/vectors/hosts/browser.html`);
    await page.waitForFunction(() => 'vectorResult' in window, null, { timeout: 20_000 });
    return page.evaluate(() => (window as unknown as { vectorResult: HostResult }).vectorResult);
  });
  t.same(errors, [], 'the page logged no error');
  allPassed(t, 'chromium', result);
});

t.test("C (wasm2c from Debian's wabt): the vectors through the raw exports", async (t) => {
  const present = needs(t, [
    [onPath('wasm2c'), 'install it: apt-get install -y --no-install-recommends wabt'],
    [join(WASM2C_RUNTIME, 'wasm-rt-impl.c'), 'install it: apt-get install -y --no-install-recommends wabt'],
    [onPath('cc'), 'install a C compiler: apt-get install -y --no-install-recommends gcc libc6-dev'],
    [onPath('make'), 'install it: apt-get install -y --no-install-recommends make'],
  ]);
  if (!present) return;
  const build = await timed(t, 'c build', () => run('make', ['-s', '-C', 'test/c-host']));
  t.equal(build.code, 0, 'make -C test/c-host builds it', { stderr: build.stderr });
  if (build.code !== 0) return;
  const host = join(ROOT, 'build/c-host/core-vectors');
  const output = await timed(t, 'c vectors', () => run(host, ['test/vectors/core-vectors.txt']));
  t.equal(output.code, 0, 'it exits 0', { stderr: output.stderr });
  t.equal(output.stdout, `${TOTAL} passed, 0 failed\n`, `c: ${TOTAL} of ${TOTAL} passed`, { stderr: output.stderr });

  // The same host fails a case whose expectation is wrong, and says which.
  const dir = t.testdir();
  const text = readFileSync(join(ROOT, 'test/vectors/core-vectors.txt'), 'utf8');
  const wrong = text.replace(/^(authorize \S+ \S+ \d+) 4$/m, '$1 0');
  t.not(wrong, text, 'an expectation was changed');
  writeFileSync(join(dir, 'wrong.txt'), wrong);
  const failing = await run(host, [join(dir, 'wrong.txt')]);
  t.equal(failing.code, 1);
  t.equal(failing.stdout, `${TOTAL - 1} passed, 1 failed\n`);
  t.match(failing.stderr, /FAIL Revoked: .*\n {2}authorize: 4, not 0/);
});
