// The shared core vectors (test/vectors/): the checked-in files are what the core generates
// now, they show every outcome, and the runner that every JavaScript host uses fails a
// case whose expectation is wrong. test/system/runtimes.test.ts runs them in every host. The
// threads build (core-threads.wasm) generates and passes the same vectors in Node.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { coreModule, coreThreadsModule } from '../../build/host/core/module.js';
import { Outcome } from '../../build/host/core/abi.js';
import { generateVectors } from '../vectors/generate.js';
import { runVectors } from '../vectors/run-vectors.js';

const read = (name: string) => readFileSync(new URL(`../vectors/${name}`, import.meta.url), 'utf8');
const json = read('core-vectors.json');
const text = read('core-vectors.txt');
const vectors = JSON.parse(json);
const REGENERATE = 'the core changed: run `npm run build && node test/vectors/generate.js` and check in test/vectors/';

t.test('the checked-in vectors are exactly what the core generates now', async (t) => {
  const fresh = generateVectors(coreModule());
  t.ok(fresh.json === json, `core-vectors.json is current (${REGENERATE})`);
  t.ok(fresh.text === text, `core-vectors.txt is current (${REGENERATE})`);
  t.ok(generateVectors(coreModule()).json === fresh.json, 'generating twice gives the same bytes');
});

t.test('the vectors show every outcome and every kind of case', async (t) => {
  const checks = vectors.cases.filter((c: { kind: string }) => c.kind === 'tokens').flatMap((c: { checks: unknown[] }) => c.checks);
  for (const name of Object.keys(Outcome).filter((k) => Number.isNaN(Number(k)))) {
    t.ok(
      checks.some((check: { outcome: string }) => check.outcome === name),
      `a check expects ${name}`,
    );
  }
  const kinds = new Set(vectors.cases.map((c: { kind: string }) => c.kind));
  t.same([...kinds].sort(), ['hmacSha256', 'password', 'sha256', 'tokens']);
  const textCases = text
    .split('\n')
    .filter((line) => line.startsWith('case '))
    .map((line) => line.slice(5));
  t.same(
    textCases,
    vectors.cases.map((c: { name: string }) => c.name),
    'the text file holds the same cases in the same order',
  );
});

t.test('the runner passes the file and fails a case whose expectation is wrong', async (t) => {
  const module = coreModule();
  const result = await runVectors(module, vectors);
  t.same(result, { total: vectors.cases.length, passed: vectors.cases.length, failed: 0, failures: [] });

  const broken = JSON.parse(json);
  const revoked = broken.cases.find((c: { name: string }) => c.name.startsWith('Revoked: revoked tokens'));
  revoked.checks[0].code = Outcome.Valid;
  revoked.checks[0].outcome = 'Valid';
  const password = broken.cases.find((c: { kind: string }) => c.kind === 'password');
  password.password = password.password.replace(/^./, (c: string) => (c === 'A' ? 'B' : 'A'));
  const scoped = broken.cases.find((c: { name: string }) => c.name.startsWith('Scoped: '));
  const scopedCheck = scoped.checks.find((c: { outcome: string }) => c.outcome === 'Scoped');
  scopedCheck.grant += 1;
  const methods = broken.cases.find((c: { name: string }) => c.name.startsWith('methods: '));
  const methodCheck = methods.checks.find((c: { grant: number; result: number }) => c.grant === 1 && c.result === 1);
  methodCheck.result = 0;
  const failing = await runVectors(module, broken);
  t.equal(failing.failed, 4);
  t.same(
    failing.failures.map((f) => f.name),
    [password.name, revoked.name, scoped.name, methods.name],
  );
  t.match(failing.failures[1].problems, [/check 0 \(authorize\): Revoked, not Valid/]);
  t.match(failing.failures[2].problems, [/Scoped with grant 1, not 2/]);
  t.match(failing.failures[3].problems, [/methodAllowed 1\): 1, not 0/]);
});

t.test('the threads build generates the same vectors and passes them', async (t) => {
  const fresh = generateVectors(coreThreadsModule());
  t.ok(fresh.json === json, 'core-threads.wasm generates core-vectors.json');
  t.ok(fresh.text === text, 'and core-vectors.txt');
  const result = await runVectors(coreThreadsModule(), vectors);
  t.same(result, { total: vectors.cases.length, passed: vectors.cases.length, failed: 0, failures: [] });
});
