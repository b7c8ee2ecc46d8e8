// The request-level vectors (test/vectors/requests.json), which the gateway
// (test/http/gate-vectors.test.ts) and the Go gate (go/gate/requests_test.go) both run:
// the checked-in file is what generate-requests.js writes, it holds every case of
// rpc-bodies.json as a request, and every disagreement the hardening round found between
// the two gates; a case whose HTTP servers differ says which layer and why.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { generateRequests } from '../vectors/generate-requests.js';

const text = readFileSync(new URL('../vectors/requests.json', import.meta.url), 'utf8');
const vectors = JSON.parse(text) as {
  cases: {
    name: string;
    issue?: string;
    verdict?: unknown;
    layer?: string;
    why?: string;
    verdicts?: { gateway?: unknown; go?: unknown };
  }[];
};
const bodies = JSON.parse(readFileSync(new URL('../vectors/rpc-bodies.json', import.meta.url), 'utf8')) as { cases: { name: string }[] };

t.test('requests.json is what generate-requests.js writes', async (t) => {
  t.ok(generateRequests() === text, 'current (run `npm run build && node test/vectors/generate-requests.js` and check in test/vectors/)');
});

t.test('every case of rpc-bodies.json is a request, with a method scope and with limits', async (t) => {
  const names = new Set(vectors.cases.map((c) => c.name));
  for (const { name } of bodies.cases) {
    t.ok(names.has(`rpc-bodies, with a scope of every method: ${name}`) && names.has(`rpc-bodies, with limits: ${name}`), name);
  }
});

t.test('the seven disagreements found are cases, and each case has one verdict or a layer and both', async (t) => {
  const low13 = vectors.cases.filter((c) => c.issue === 'Low 13').map((c) => c.name);
  t.same(low13, [
    'byte 0xFF after the Authorization value',
    'byte 0xFF before the Authorization value',
    'a folded Authorization header',
    'a lowercase get',
    'params nested 10,050 deep, with a method scope',
    'a token with limits is served',
    'a lowercase connect',
  ]);
  for (const c of vectors.cases) {
    const layered = c.layer !== undefined && c.why !== undefined && c.verdicts?.gateway !== undefined && c.verdicts.go !== undefined;
    t.ok((c.verdict !== undefined) !== layered, `${c.name}: one verdict, or the layer, why, and each side's`);
  }
});
