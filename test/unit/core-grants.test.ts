// host/core/grants.ts on its own: the bytes `grantAdd` reads, what the encoding refuses
// before the core sees it, and the GrantError each of the core's refusals becomes. The
// core's own verdicts on the same lists are core.test.ts's.
import t from 'tap';
import { CoreResult } from '../../build/host/errors.js';
import { GrantError, MAX_ENDPOINT_LENGTH } from '../../build/host/core/abi.js';
import { encodeGrant, grantEntries, grantRefusal } from '../../build/host/core/grants.js';

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const refused = (f: () => unknown): GrantError => {
  try {
    f();
  } catch (error) {
    if (error instanceof GrantError) return error;
    throw error;
  }
  throw new Error('not refused');
};

t.test('the encoding: sorted, no duplicates, each entry ending in a line feed, an empty entry before methods and limits', async (t) => {
  t.equal(text(encodeGrant(['/b', '/a', '/b'], undefined, undefined, 1024).bytes), '/a\n/b\n');
  t.equal(text(encodeGrant(['/a'], ['net_version', 'eth_*'], undefined, 1024).bytes), '/a\n\neth_*\nnet_version\n');
  const limited = encodeGrant(['/a'], undefined, ['rate 5/s'], 1024);
  t.equal(text(limited.bytes), '/a\n\n\nrate 5/s\n', 'limits without methods: two empty entries');
  t.equal(text(encodeGrant(['/a'], ['x'], ['burst 2'], 1024).bytes), '/a\n\nx\n\nburst 2\n');
  const both = encodeGrant(['*', '/a'], ['*', 'x'], undefined, 1024);
  t.same(
    [both.endpoints, both.patterns],
    [
      ['*', '/a'],
      ['*', 'x'],
    ],
    'every entry goes to the core, `*` among them',
  );
  t.same(grantEntries(['*', '/a'], ['*', 'x']), ['*', '', '*'], 'while the stored form keeps `*` alone');
});

t.test('what the encoding cannot carry is refused before the core sees it', async (t) => {
  t.match(
    refused(() => encodeGrant(['/a', '/b\nc'], undefined, undefined, 1024)),
    { code: 'bad-entry', entry: 1 },
  );
  t.match(
    refused(() => encodeGrant(['/a'], ['x', ''], undefined, 1024)),
    { code: 'bad-method', entry: 1, message: /^methods\[1\] "":/ },
  );
  t.match(
    refused(() => encodeGrant(['/a'], undefined, ['rate 1/s\n'], 1024)),
    { code: 'bad-limit' },
  );
  t.match(
    refused(() => encodeGrant(['/abc'], undefined, undefined, 4)),
    { code: 'too-many-entries', message: /more than 4 bytes/ },
  );
  t.equal(encodeGrant(['/ab'], undefined, undefined, 4).bytes.length, 4, 'a list of exactly the capacity fits');
});

t.test("each of the core's refusals becomes its GrantError, the entry named by the index the core left", async (t) => {
  const methods = ['zz', 'eth_*', 'bad method'];
  const limits = ['rate 5/s', 'burst x'];
  const grant = encodeGrant(['/b', '/a'], methods, limits, 4096);
  t.match(grantRefusal(CoreResult.GRANT_BAD_ENTRY, 1, grant, methods, limits), {
    code: 'bad-entry',
    entry: 1,
    message: /^endpoint "\/b" is not one of/,
  });
  t.match(grantRefusal(CoreResult.GRANT_ENTRY_TOO_LONG, 0, grant, methods, limits), {
    code: 'entry-too-long',
    entry: 0,
    message: `endpoint "/a" is longer than ${MAX_ENDPOINT_LENGTH} bytes`,
  });
  // The core's index counts the sorted patterns; the error names the place in `methods` as given.
  t.same(grant.patterns, ['bad method', 'eth_*', 'zz']);
  t.match(grantRefusal(CoreResult.GRANT_BAD_METHOD, 0, grant, methods, limits), {
    code: 'bad-method',
    entry: 2,
    message: /^methods\[2\] "bad method": not /,
  });
  t.match(grantRefusal(CoreResult.GRANT_METHOD_TOO_LONG, 2, grant, methods, limits), { code: 'method-too-long', entry: 0 });
  t.match(grantRefusal(CoreResult.GRANT_BAD_LIMIT, 1, grant, methods, limits), {
    code: 'bad-limit',
    entry: 1,
    message: /^limit entry "burst x" is not canonical/,
  });
  const plain: Array<[number, string]> = [
    [CoreResult.GRANT_EMPTY, 'empty'],
    [CoreResult.GRANT_TOO_MANY_ENTRIES, 'too-many-entries'],
    [CoreResult.GRANT_TABLE_FULL, 'table-full'],
    [CoreResult.GRANT_TOO_MANY_METHODS, 'too-many-methods'],
    [CoreResult.GRANT_NO_METHODS, 'no-methods'],
    [CoreResult.GRANT_TOO_MANY_CLIENTS, 'too-many-clients'],
  ];
  for (const [code, name] of plain) {
    const error = grantRefusal(code, 7, grant, methods, limits);
    t.equal(error.code, name, `${code}: ${name}`);
    t.equal(error.entry, undefined, `${code} names no entry`);
  }
  t.match(grantRefusal(-99, 0, grant, methods, limits), { code: 'table-full', message: 'grant refused (-99)' }, 'a code unknown here');
});
