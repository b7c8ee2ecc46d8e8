// The one reading of a JSON-RPC body (host/rpc/reading.ts) against the shared cases of
// test/vectors/rpc-bodies.json, which the Go gate's reading runs too (go/gate): every
// case read as the file says, and the cases cover every reason a body is not read.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { MAX_DEPTH, readCalls } from '../../build/host/rpc/reading.js';
import type { Unreadable } from '../../build/host/rpc/reading.js';

interface Case {
  readonly name: string;
  readonly body?: string;
  readonly bodyHex?: string;
  readonly read?: { readonly batch: boolean; readonly calls: { readonly method: string; readonly id: string | null }[] };
  readonly unreadable?: Unreadable;
  readonly at?: number;
  readonly id?: string | null;
}

const vectors = JSON.parse(readFileSync(new URL('../vectors/rpc-bodies.json', import.meta.url), 'utf8')) as {
  maxDepth: number;
  cases: Case[];
};
const bytes = (c: Case) => (c.bodyHex !== undefined ? Buffer.from(c.bodyHex, 'hex') : Buffer.from(c.body!, 'utf8'));

t.test('every case of rpc-bodies.json is read as the file says', async (t) => {
  t.equal(vectors.maxDepth, MAX_DEPTH, 'the file and the reading agree on the depth');
  for (const c of vectors.cases) {
    const reading = readCalls(bytes(c));
    if (c.read !== undefined) {
      t.ok(reading.ok, `${c.name}: read`);
      if (!reading.ok) continue;
      t.equal(reading.batch, c.read.batch, `${c.name}: a batch or not`);
      t.same(
        reading.calls.map(({ method, id }) => ({ method, id })),
        c.read.calls,
        `${c.name}: its calls`,
      );
      for (const call of reading.calls) {
        t.same(
          JSON.parse(reading.text.slice(call.start, call.end)).method,
          call.method,
          `${c.name}: each call's place in the text holds it`,
        );
      }
    } else {
      t.same(
        reading.ok ? 'read' : { problem: reading.problem, at: reading.at, id: reading.id },
        { problem: c.unreadable, at: c.at, id: c.id },
        `${c.name}: not read (${c.unreadable})`,
      );
    }
  }
});

t.test('the cases show every reason a body is not read, and each kind of body read', async (t) => {
  const reasons: Unreadable[] = ['none', 'utf8', 'bom', 'json', 'depth', 'empty batch', 'not a call', 'method twice'];
  for (const reason of reasons)
    t.ok(
      vectors.cases.some((c) => c.unreadable === reason),
      `a case is not read for ${reason}`,
    );
  t.ok(
    vectors.cases.some((c) => c.read?.batch === true),
    'a batch is read',
  );
  t.ok(
    vectors.cases.some((c) => c.read?.batch === false),
    'a lone call is read',
  );
  t.ok(
    vectors.cases.some((c) => c.read?.calls.some((call) => call.id === null)),
    'a notification is read',
  );
  t.equal(new Set(vectors.cases.map((c) => c.name)).size, vectors.cases.length, 'every case has a name of its own');
});

t.test('a case whose expectation is wrong fails', async (t) => {
  const trailing = vectors.cases.find((c) => c.name === 'a byte after the value')!;
  t.ok(readCalls(bytes(trailing)).ok === false, 'the body with a byte after it is not read');
  const lone = vectors.cases.find((c) => c.name === 'a lone call')!;
  const reading = readCalls(bytes(lone));
  t.ok(reading.ok && reading.calls[0].method !== 'eth_chainId', 'a lone call is not read as another method');
});
