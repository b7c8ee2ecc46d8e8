// The Wasm core through its exports: published vectors, the token format, every outcome,
// the revocation window, grants and password generation. Time and generations are plain
// numbers; nothing here waits.
import fc from 'fast-check';
import t from 'tap';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Core } from '../../build/host/core/core.js';
import {
  ADMIT_OK,
  ADMIT_QUOTA,
  ADMIT_RATE,
  admitRecord,
  checkRecord,
  GrantError,
  IssueError,
  MAX_METHODS,
  Outcome,
  OUTCOME_NAMES,
  RESULT,
} from '../../build/host/core/abi.js';
import { canonicalMethods, grantEntries, splitGrantEntries } from '../../build/host/core/grants.js';
import { coreModule } from '../../build/host/core/module.js';
import { badPath, checkProperty, refusedCodePoint } from '../helpers/fuzz.js';

const NOW = 1_700_000_000;
const HOUR = 3600;
const KEY = Buffer.alloc(32, 7);
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const wasmBytes = readFileSync(new URL('../../build/core.wasm', import.meta.url));

function keyedCore(options: { windowLog2?: number } = {}): Core {
  const core = new Core(coreModule(), options);
  core.setKey(KEY);
  return core;
}

/** A token with any payload, signed with KEY the way the format says. */
function forge(fields: { version?: number; generation?: number; serial?: bigint; expiry?: bigint; grant?: number }): string {
  const raw = Buffer.alloc(25);
  raw[0] = fields.version ?? 1;
  raw.writeUInt32BE(fields.generation ?? 0, 1);
  raw.writeBigUInt64BE(fields.serial ?? 0n, 5);
  raw.writeBigUInt64BE(fields.expiry ?? BigInt(NOW + HOUR), 13);
  raw.writeUInt32BE(fields.grant ?? 0, 21);
  const tag = createHmac('sha256', KEY).update(raw).digest();
  return Buffer.concat([raw, tag]).toString('base64url');
}

t.test('the module imports nothing but abort', async (t) => {
  const imports = WebAssembly.Module.imports(new WebAssembly.Module(wasmBytes));
  t.same(
    imports.map((i) => `${i.module}.${i.name}`),
    ['env.abort'],
  );
});

t.test("the module exports the ABI of assembly/README.md, none of the threads build's calls", async (t) => {
  const exports = WebAssembly.Module.exports(new WebAssembly.Module(wasmBytes)).map((e) => e.name);
  t.same(exports.sort(), [
    'abiVersion',
    'admit',
    'authorize',
    'bumpGeneration',
    'checkPath',
    'countUsage',
    'floor',
    'generatePassword',
    'generation',
    'grantAdd',
    'grantCount',
    'grantFind',
    'hmacSha256',
    'init',
    'inspect',
    'ioBuffer',
    'ioCapacity',
    'issue',
    'issueSerial',
    'memory',
    'methodAllowed',
    'nextSerial',
    'pathBuffer',
    'pathCapacity',
    'quota',
    'reserveSerials',
    'restoreSerials',
    'restoreUsage',
    'resultBuffer',
    'revoke',
    'revokeSerial',
    'setGeneration',
    'setKey',
    'setLimitShare',
    'setQuota',
    'sha256',
    'standing',
    'sweep',
    'tokenBuffer',
    'tokenCapacity',
    'usage',
    'usageMisses',
    'verify',
  ]);
});

t.test('SHA-256 matches the FIPS 180-4 examples', async (t) => {
  const core = new Core(coreModule());
  const vectors: Array<[string, string]> = [
    ['', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'],
    ['abc', 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'],
    ['abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq', '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1'],
    [
      'abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu',
      'cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1',
    ],
  ];
  for (const [message, digest] of vectors) t.equal(hex(core.sha256(Buffer.from(message))), digest, JSON.stringify(message));
});

t.test('SHA-256 agrees with node:crypto at every length around the block boundaries', async (t) => {
  const core = new Core(coreModule());
  for (let len = 0; len <= 200; len++) {
    const data = randomBytes(len);
    const expected = createHash('sha256').update(data).digest('hex');
    if (hex(core.sha256(data)) !== expected) t.fail(`length ${len}`);
  }
  const big = randomBytes(65536);
  t.equal(hex(core.sha256(big)), createHash('sha256').update(big).digest('hex'), '64 KiB');
});

t.test('HMAC-SHA256 matches RFC 4231 test cases 1 to 7', async (t) => {
  const core = new Core(coreModule());
  const fill = (n: number, b: number) => Buffer.alloc(n, b);
  const cases: Array<[string, Buffer, Buffer, string]> = [
    ['1', fill(20, 0x0b), Buffer.from('Hi There'), 'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7'],
    [
      '2',
      Buffer.from('Jefe'),
      Buffer.from('what do ya want for nothing?'),
      '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
    ],
    ['3', fill(20, 0xaa), fill(50, 0xdd), '773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe'],
    [
      '4',
      Buffer.from(Array.from({ length: 25 }, (_, i) => i + 1)),
      fill(50, 0xcd),
      '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b',
    ],
    ['5', fill(20, 0x0c), Buffer.from('Test With Truncation'), 'a3b6167473100ee06e0c796c2955552b'],
    [
      '6',
      fill(131, 0xaa),
      Buffer.from('Test Using Larger Than Block-Size Key - Hash Key First'),
      '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54',
    ],
    [
      '7',
      fill(131, 0xaa),
      Buffer.from(
        'This is a test using a larger than block-size key and a larger than block-size data. ' +
          'The key needs to be hashed before being used by the HMAC algorithm.',
      ),
      '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2',
    ],
  ];
  for (const [name, key, message, tag] of cases) {
    // Case 5 publishes only the first 128 bits.
    t.equal(hex(core.hmacSha256(key, message)).slice(0, tag.length), tag, `case ${name}`);
  }
});

t.test('a token is 76 base64url characters: version, generation, serial, expiry, grant, HMAC tag', async (t) => {
  const core = keyedCore();
  core.generation = 3;
  core.addGrant(['/ext/info']);
  const grant = core.addGrant(['/ext/bc/X']);
  const { token, claims } = core.issue(grant, NOW, 12 * HOUR);
  t.match(token, /^[A-Za-z0-9_-]{76}$/);
  const raw = Buffer.from(token, 'base64url');
  t.equal(raw.length, 57);
  t.equal(raw[0], 1, 'version');
  t.equal(raw.readUInt32BE(1), 3, 'generation');
  t.equal(raw.readBigUInt64BE(5), 0n, 'serial');
  t.equal(raw.readBigUInt64BE(13), BigInt(NOW + 12 * HOUR), 'expiry');
  t.equal(raw.readUInt32BE(21), grant, 'grant');
  t.same(raw.subarray(25), createHmac('sha256', KEY).update(raw.subarray(0, 25)).digest(), 'tag');
  t.same(claims, { serial: 0, expiry: NOW + 12 * HOUR, generation: 3, grant });
  t.equal(core.issue(grant, NOW, HOUR).claims.serial, 1, 'serials count up');
});

t.test('a valid token grants its endpoints until the second it expires', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['/ext/info']), NOW, HOUR);
  t.equal(core.verify(token, '/ext/info', NOW), Outcome.Valid);
  t.equal(core.verify(token, '/ext/info', NOW + HOUR - 1), Outcome.Valid);
  t.equal(core.verify(token, '/ext/info', NOW + HOUR), Outcome.Expired);
  t.equal(core.authorize(`Bearer ${token}`, '/ext/info', NOW), Outcome.Valid);
  t.equal(core.authorize(`bEaReR ${token}`, '/ext/info', NOW), Outcome.Valid, 'the scheme is case-insensitive');
});

t.test('malformed tokens: wrong length, foreign characters, padding, unknown version or grant', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['*']), NOW, HOUR);
  const variants = [
    '',
    token.slice(1),
    token + 'A',
    token + '=',
    token.slice(0, 75) + '=',
    token.slice(0, 75) + '+',
    token.slice(0, 75) + '/',
    token.slice(0, 40) + '.' + token.slice(41),
    `${token.slice(0, 38)} ${token.slice(39)}`,
    token.slice(0, 75) + '\u00c1',
    forge({ version: 2 }),
    forge({ grant: 5 }),
  ];
  for (const v of variants) t.equal(core.verify(v, '/ext/info', NOW), Outcome.Malformed, JSON.stringify(v));
});

t.test('every single-byte change to a token is refused', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['*']), NOW, HOUR);
  // Checked once, the token sits in the cache of checked tags: every variant must still
  // be checked in full.
  t.equal(core.verify(token, '/x', NOW), Outcome.Valid);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  let tried = 0;
  for (let i = 0; i < token.length; i++) {
    for (const c of alphabet) {
      if (c === token[i]) continue;
      const changed = token.slice(0, i) + c + token.slice(i + 1);
      tried++;
      const outcome = core.verify(changed, '/x', NOW);
      if (outcome === Outcome.Valid) t.fail(`position ${i} -> ${c} verified`);
    }
  }
  t.equal(tried, 76 * 63);
  t.comment(`${tried} variants refused`);
});

t.test('a token under another key or a tampered payload has a bad signature', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant(['*']);
  const other = new Core(coreModule());
  other.setKey(Buffer.alloc(32, 8));
  other.addGrant(['*']);
  t.equal(core.verify(other.issue(grant, NOW, HOUR).token, '/x', NOW), Outcome.BadSignature, 'another key');
  const raw = Buffer.from(core.issue(grant, NOW, HOUR).token, 'base64url');
  raw.writeBigUInt64BE(BigInt(NOW + 100 * HOUR), 13);
  t.equal(core.verify(raw.toString('base64url'), '/x', NOW), Outcome.BadSignature, 'extended expiry');
  t.equal(new Core(coreModule()).verify(forge({}), '/x', NOW), Outcome.BadSignature, 'a core with no key verifies nothing');
});

t.test('a token checked before is checked again once the key changes', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['*']), NOW, HOUR);
  t.equal(core.verify(token, '/x', NOW), Outcome.Valid);
  t.equal(core.verify(token, '/x', NOW), Outcome.Valid, 'again, from the cache');
  core.setKey(Buffer.alloc(32, 9));
  t.equal(core.verify(token, '/x', NOW), Outcome.BadSignature);
  core.setKey(KEY);
  t.equal(core.verify(token, '/x', NOW), Outcome.Valid);
});

t.test('a cached token still expires, and is still revoked', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['/ext/info']), NOW, HOUR);
  t.equal(core.verify(token, '/ext/info', NOW), Outcome.Valid);
  t.equal(core.verify(token, '/ext/bc/X', NOW), Outcome.NotGranted);
  t.equal(core.verify(token, '/ext/info', NOW + HOUR), Outcome.Expired);
  t.equal(core.revoke(token, NOW).outcome, Outcome.Valid);
  t.equal(core.verify(token, '/ext/info', NOW), Outcome.Revoked);
});

t.test('a token of an earlier (or unknown later) generation never verifies', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant(['*']);
  const { token } = core.issue(grant, NOW, HOUR);
  t.equal(core.bumpGeneration(), 1);
  t.equal(core.verify(token, '/x', NOW), Outcome.EarlierGeneration);
  t.equal(core.verify(core.issue(grant, NOW, HOUR).token, '/x', NOW), Outcome.Valid, 'new tokens verify');
  t.equal(core.verify(forge({ generation: 9, serial: 0n }), '/x', NOW), Outcome.EarlierGeneration);
});

t.test('revoking sets the token bit; revoked tokens are refused, others are not', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant(['*']);
  const a = core.issue(grant, NOW, HOUR).token;
  const b = core.issue(grant, NOW, HOUR).token;
  const first = core.revoke(a, NOW);
  t.equal(first.outcome, Outcome.Valid);
  t.equal(first.claims?.serial, 0);
  t.equal(core.verify(a, '/x', NOW), Outcome.Revoked);
  t.equal(core.verify(b, '/x', NOW), Outcome.Valid);
  const again = core.revoke(a, NOW);
  t.equal(again.outcome, Outcome.Revoked, 'a second revoke changes nothing');
  t.equal(again.claims?.serial, 0, 'but says which serial, so the host can make sure it is recorded');
  t.equal(core.revoke(a + '=', NOW).outcome, Outcome.Malformed);
  t.equal(core.revoke(b, NOW + HOUR).outcome, Outcome.Expired, 'expired tokens are not recorded');
  t.equal(core.revokeSerial(1), 0, 'a stored revocation replays');
  t.equal(core.verify(b, '/x', NOW), Outcome.Revoked);
  t.equal(core.verify(forge({ serial: 2n }), '/x', NOW), Outcome.Revoked, 'a serial never issued fails closed');
  t.equal(core.revokeSerial(2), -1, 'a serial never issued cannot be revoked');
});

t.test('endpoint matching: exact, "*", and "/a/*" subtrees', async (t) => {
  const core = keyedCore();
  const token = (endpoints: string[]) => core.issue(core.addGrant(endpoints), NOW, HOUR).token;
  const info = token(['/ext/info']);
  const subtree = token(['/ext/bc/*']);
  const star = token(['*']);
  const cases: Array<[string, string, Outcome]> = [
    [info, '/ext/info', Outcome.Valid],
    [info, '/ext/info/', Outcome.NotGranted],
    [info, '/ext/info/foo', Outcome.NotGranted],
    [info, '/x/ext/info', Outcome.NotGranted],
    [info, '/ext/inf', Outcome.NotGranted],
    [info, '/', Outcome.NotGranted],
    [subtree, '/ext/bc/X', Outcome.Valid],
    [subtree, '/ext/bc/X/events', Outcome.Valid],
    [subtree, '/ext/bc/', Outcome.NotGranted],
    [subtree, '/ext/bc', Outcome.NotGranted],
    [subtree, '/ext/bcd', Outcome.NotGranted],
    [star, '/', Outcome.Valid],
    [star, '/anything/at/all', Outcome.Valid],
  ];
  for (const [tok, path, outcome] of cases) t.equal(core.verify(tok, path, NOW), outcome, `${path}`);
  const several = token(['/ext/info', '/ext/bc/X', '/ext/keystore/*']);
  for (const p of ['/ext/info', '/ext/bc/X', '/ext/keystore/a']) t.equal(core.verify(several, p, NOW), Outcome.Valid, p);
  t.equal(core.verify(several, '/ext/bc/Y', NOW), Outcome.NotGranted);
});

t.test('endpoint "/" grants the root alone, where Ethereum nodes serve JSON-RPC', async (t) => {
  const core = keyedCore();
  const root = core.issue(core.addGrant(['/']), NOW, HOUR).token;
  t.equal(core.verify(root, '/', NOW), Outcome.Valid, '/');
  for (const path of ['/x', '/ext/info', '/x/']) t.equal(core.verify(root, path, NOW), Outcome.NotGranted, path);
  t.equal(core.verify(root, '//', NOW), Outcome.BadPath, '// is no root: an empty segment');
  t.equal(core.addGrant(['/', '/']), core.addGrant(['/']), 'one grant, however often "/" is named');
  const both = core.issue(core.addGrant(['/', '/ext/info']), NOW, HOUR).token;
  for (const path of ['/', '/ext/info']) t.equal(core.verify(both, path, NOW), Outcome.Valid, `beside another entry: ${path}`);
  const error = t.throws(() => core.addGrant(['//'])) as GrantError;
  t.match(error.message, /"\/" \(the root alone, where Ethereum nodes serve JSON-RPC\)/, 'a bad entry\'s message suggests "/"');
});

t.test('the gate refuses bad paths before it looks at the header', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['*']), NOW, HOUR);
  const bad = [
    '',
    'ext/info',
    '//ext/info',
    '/ext//info',
    '/ext/./info',
    '/ext/../info',
    '/ext/info/.',
    '/ext/info/..',
    '/.',
    '/..',
    '/ext%2Finfo',
    '/ext%2finfo',
    '/ext/%2E%2E/x',
    '/ext/%2e',
    '/ext/%25',
    '/ext/%',
    '/ext/%4',
    '/ext/%zz',
    '/ext\\info',
    '/ext/info#x',
    '/ext/in fo',
    '/ext/\u00e9',
    '/' + 'a'.repeat(9000),
  ];
  for (const p of bad) {
    t.equal(core.authorize('', p, NOW), Outcome.BadPath, JSON.stringify(p.slice(0, 40)));
    t.equal(core.authorize(`Bearer ${token}`, p, NOW), Outcome.BadPath);
    t.notOk(core.pathAllowed(p));
  }
  for (const p of ['/', '/ext/info', '/ext/info/', '/ext/bc/X/rpc', '/ext/%41bc', '/ext/a.b', '/ext/..x/.y', "/a-b_c~d!$&'()*+,;=:@"])
    t.ok(core.pathAllowed(p), p);
});

// Before path checks of their own, with a grant of /ext/bc/X/*, these reached the upstream, which may
// read them as a path outside the subtree.
const ESCAPES_FROM_SUBTREE = [
  '/ext/bc/X/..;/..;/admin',
  '/ext/bc/X/..%5c..%5cadmin',
  '/ext/bc/X/..%5C..%5Cadmin',
  '/ext/bc/X/%c0%ae%c0%ae/admin',
  '/ext/bc/X/..%00/admin',
];

/** Paths every host must serve: the node's own, and the characters RFC 3986 allows in a segment. */
const NODE_PATHS = [
  '/ext/bc/C/rpc',
  '/ext/bc/C/ws',
  '/ext/bc/X/events',
  '/ext/bc/2q9e4r6Mu3U68nU1fYjgbR6JvwrRx36CohpAX5UQxse55x1Q5/rpc',
  '/ext/info',
  '/ext/health',
  '/ext/index/X/tx',
  '/ext/bc/X/caf%C3%A9',
  '/ext/bc/X/%e6%97%a5%e6%9c%ac',
  '/ext/bc/X/%F0%9F%98%80',
  '/ext/bc/X/a:b@c~d-e_f',
  '/ext/bc/X/a.b',
  '/ext/bc/X/.well-known',
  '/ext/bc/X/..x',
  '/ext/bc/X/x..',
  '/ext/bc/X/a;v=1',
  '/ext/bc/X/a%20b',
  '/ext/bc/X/%2A',
  '/ext/bc/X/a+b',
  '/ext/bc/X/',
];

t.test('a subtree grant holds: "..;", "\\" encoded, overlong UTF-8 and "%00" are bad paths, node paths are granted', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['/ext/bc/X/*']), NOW, HOUR);
  for (const p of ESCAPES_FROM_SUBTREE) {
    t.equal(core.authorize(`Bearer ${token}`, p, NOW), Outcome.BadPath, p);
    t.equal(core.verify(token, p, NOW), Outcome.BadPath, `verify ${p}`);
    t.notOk(core.pathAllowed(p), `checkPath ${p}`);
  }
  for (const p of NODE_PATHS.filter((p) => p.startsWith('/ext/bc/X/') && p !== '/ext/bc/X/'))
    t.equal(core.authorize(`Bearer ${token}`, p, NOW), Outcome.Valid, p);
  for (const p of NODE_PATHS) t.ok(core.pathAllowed(p), p);
});

t.test('a segment whose name (before any ";") is empty or only dots and spaces is a bad path', async (t) => {
  const core = keyedCore();
  const names = ['', '.', '..', '...', '....', '+', '%20', '%2B', '%2b', '..%20', '.%20', '%20..', '..+', '.+.', '..%2B', '.%20.'];
  const params = ['', ';', ';x', ';x=1', ';..', ';a;b'];
  for (const name of names) {
    for (const param of params) {
      const segment = name + param;
      for (const p of [`/${segment}/x`, `/a/${segment}/b`, `/a/${segment}`]) {
        // A final segment that is empty stays allowed: "/a/".
        if (p === '/a/') continue;
        t.notOk(core.pathAllowed(p), JSON.stringify(p));
      }
    }
  }
  for (const p of [
    '/a/',
    '/',
    '/a;x/b',
    '/a;/b',
    '/x.;/b',
    '/.x;/b',
    '/a/..b',
    '/a/b..',
    '/a/.%20x',
    '/a/%20x',
    '/a/b;..',
    '/a/b;;',
    '/a/x+',
  ])
    t.ok(core.pathAllowed(p), p);
});

t.test('an escape of a control or of "/", "\\", ".", "%", ";", "?", "#" is a bad path; of other ASCII, not', async (t) => {
  const core = keyedCore();
  const refused = new Set([...'/\\.%;?#'].map((c) => c.charCodeAt(0)));
  for (let byte = 0; byte < 0x80; byte++) {
    const hex = byte.toString(16).padStart(2, '0');
    const control = byte < 0x20 || byte === 0x7f;
    for (const encoded of [`%${hex}`, `%${hex.toUpperCase()}`]) {
      t.equal(core.pathAllowed(`/a${encoded}b`), !(control || refused.has(byte)), `/a${encoded}b`);
    }
  }
});

/** `bytes`, each percent-encoded, in the case asked for. */
const escaped = (bytes: readonly number[], upper = true) =>
  bytes
    .map((b) => `%${b.toString(16).padStart(2, '0')}`)
    .join('')
    [upper ? 'toUpperCase' : 'toLowerCase']();

t.test('escaped bytes past ASCII must be well-formed UTF-8: no overlong forms, surrogates, F5-FF, cut sequences', async (t) => {
  const core = keyedCore();
  const bad = [
    [0xc0, 0xae],
    [0xc0, 0xaf],
    [0xc1, 0x9c],
    [0xe0, 0x80, 0xae],
    [0xf0, 0x80, 0x80, 0xae],
    [0xe0, 0x9f, 0xbf],
    [0xf0, 0x8f, 0xbf, 0xbf],
    [0xed, 0xa0, 0x80],
    [0xed, 0xbf, 0xbf],
    [0xf4, 0x90, 0x80, 0x80],
    [0xf5, 0x80, 0x80, 0x80],
    [0xf8, 0x88, 0x80, 0x80, 0x80],
    [0xff],
    [0xfe],
    [0x80],
    [0xbf],
    [0xc3],
    [0xe2, 0x82],
    [0xf0, 0x9f, 0x98],
    [0xc3, 0xc3],
    [0xc3, 0x41],
    [0xe2, 0x41, 0xac],
  ];
  for (const bytes of bad) {
    for (const upper of [true, false]) t.notOk(core.pathAllowed(`/a/${escaped(bytes, upper)}/b`), escaped(bytes, upper));
  }
  for (const cut of ['/a/%C3', '/a/%C3/', '/a/%C3x', '/a/%E2%82', '/a/%E2%82;x', '/a/%C3%']) t.notOk(core.pathAllowed(cut), cut);
  t.notOk(core.pathAllowed('/a/\u00e9'), 'raw UTF-8 (every byte of a character is escaped)');
  const good = [
    [0xc2, 0xa9],
    [0xc3, 0xa9],
    [0xdf, 0xbf],
    [0xe0, 0xa0, 0x80],
    [0xed, 0x9f, 0xbf],
    [0xee, 0x80, 0x80],
    [0xef, 0xbf, 0xbd],
    [0xf0, 0x90, 0x80, 0x80],
    [0xf4, 0x8f, 0xbf, 0xbf],
    [0xe6, 0x97, 0xa5],
  ];
  for (const bytes of good) t.ok(core.pathAllowed(`/a/${escaped(bytes)}/b`), escaped(bytes));

  // Every sequence of up to four escaped bytes drawn from the edges of the UTF-8 tables,
  // against the platform's strict decoder.
  const edges = [0x41, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf3, 0xf4, 0xf5, 0xff];
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const mismatches: string[] = [];
  let checked = 0;
  const visit = (bytes: number[]) => {
    if (bytes.length > 0) {
      let text: string | undefined;
      try {
        text = decoder.decode(Uint8Array.from(bytes));
      } catch {
        text = undefined;
      }
      const expected = text !== undefined && ![...text].some((ch) => ch.codePointAt(0)! >= 0x80 && refusedCodePoint(ch));
      const p = `/a/x${escaped(bytes)}`;
      checked++;
      if (core.pathAllowed(p) !== expected) mismatches.push(`${p}: ${expected ? 'refused' : 'allowed'}`);
    }
    if (bytes.length < 4) for (const b of edges) visit([...bytes, b]);
  };
  visit([]);
  t.comment(`${checked} sequences`);
  t.same(mismatches.slice(0, 20), [], 'the core agrees with a strict UTF-8 decoder on every one');
});

t.test(
  'a well-formed code point is refused exactly when it is a control, a separator, ignorable, or NFKC folds it into ./\\%;?#',
  async (t) => {
    const core = keyedCore();
    const mismatches: string[] = [];
    let refused = 0;
    for (let cp = 0x80; cp <= 0x10ffff; cp++) {
      if (cp === 0xd800) cp = 0xe000;
      const ch = String.fromCodePoint(cp);
      const expected = !refusedCodePoint(ch);
      const p = `/a${encodeURIComponent(ch)}`;
      if (!expected) refused++;
      // A code point this Node's Unicode does not know yet may be one the core's table
      // (Unicode 17.0) knows: no claim either way.
      if (core.pathAllowed(p) !== expected && !/\p{Cn}/u.test(ch))
        mismatches.push(`U+${cp.toString(16).toUpperCase()} ${expected ? 'refused' : 'allowed'}`);
    }
    t.comment(`${refused} refused code points by Node ${process.versions.node}'s Unicode ${process.versions.unicode}`);
    t.same(mismatches.slice(0, 40), [], 'the table in assembly/paths.ts matches (a mismatch: update REFUSED_CODE_POINTS)');
    for (const [p, what] of [
      ['%E2%80%A5', '\u2025 (NFKC "..")'],
      ['%EF%BC%8E', 'fullwidth "."'],
      ['%EF%BC%8F', 'fullwidth "/"'],
      ['%EF%BC%BC', 'fullwidth "\\"'],
      ['%EF%B9%A8', 'small "\\"'],
      ['%EF%B8%B0', '\uFE30 (NFKC "..")'],
      ['%C2%A0', 'no-break space'],
      ['%E2%80%8B', 'zero-width space'],
      ['%C2%85', 'next line (C1)'],
      ['%EF%BB%BF', 'BOM'],
      ['%E2%84%80', '\u2100 (NFKC "a/c")'],
    ]) {
      t.notOk(core.pathAllowed(`/ext/bc/X/.${p}./admin`), what);
    }
  },
);

t.test('endpoint entries obey the same path rules', async (t) => {
  const core = keyedCore();
  for (const entry of [
    ...ESCAPES_FROM_SUBTREE,
    '/ext/bc/X/..;/*',
    '/ext/bc/X/;/*',
    '/ext/.../x',
    '/ext/..%20',
    '/ext/%5C',
    '/ext/%3b',
    '/ext/%3F',
    '/ext/%23',
    '/ext/%0a',
    '/ext/%7F',
    '/ext/%C0%AE',
    '/ext/%ED%A0%80',
    '/ext/%E2%80%A5',
    '/ext/%C3',
  ]) {
    t.throws(() => core.addGrant(['/a', entry]), { code: 'bad-entry', entry: 1 }, entry);
  }
  for (const entry of NODE_PATHS.filter((p) => !p.endsWith('/'))) t.type(core.addGrant([entry]), 'number', entry);
  t.type(core.addGrant(['/ext/bc/2q9e4r6Mu3U68nU1fYjgbR6JvwrRx36CohpAX5UQxse55x1Q5/*']), 'number');
});

/** Pieces of paths that some server rewrites, folds, cuts or decodes. */
const PATH_PIECES = [
  'a',
  'bc',
  'X',
  '/',
  '.',
  '..',
  ';',
  ';x=1',
  '+',
  '%20',
  '%2B',
  '%2e',
  '%2F',
  '%25',
  '%5C',
  '%5c',
  '\\',
  '%00',
  '%0a',
  '%7f',
  '%3B',
  '%3F',
  '%23',
  '#',
  '%41',
  '%C3%A9',
  '%C3',
  '%A9',
  '%c0%ae',
  '%c1%9c',
  '%E2%80%A5',
  '%ED%A0%80',
  '%F0%9F%98%80',
  '%F4%90%80%80',
  '%EF%BC%8F',
  '%E2%80%8B',
  '%',
  '%4',
  '%g1',
  '*',
  ':',
  '@',
  '~',
  '\u00e9',
  ' ',
];

t.test('the core and the model of the path rules agree on generated paths', async (t) => {
  const core = keyedCore();
  const pathArb = fc.array(fc.constantFrom(...PATH_PIECES), { maxLength: 10 }).map((pieces) => `/${pieces.join('')}`);
  await checkProperty(
    t,
    'checkPath is the model',
    fc.asyncProperty(pathArb, async (p) => {
      // The model reads one character per byte, as the gate hands paths over.
      if (core.pathAllowed(p) === badPath(Buffer.from(p, 'utf8').toString('latin1')))
        throw new Error(`${JSON.stringify(p)}: the core and the model differ`);
    }),
    { numRuns: 20_000 },
  );
});

t.test('verify applies the path rules too', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['*']), NOW, HOUR);
  t.equal(core.verify(token, '/ext/../info', NOW), Outcome.BadPath);
  t.equal(core.verify(token, '/ext/inf\u00f6', NOW), Outcome.BadPath);
  t.equal(core.verify(token, '/' + 'a'.repeat(9000), NOW), Outcome.BadPath);
  t.equal(core.verify('A'.repeat(600), '/ext/info', NOW), Outcome.Malformed);
});

t.test('the gate tells a missing header from a bad scheme', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['*']), NOW, HOUR);
  t.equal(core.authorize('', '/ext/info', NOW), Outcome.NoToken);
  for (const h of ['Basic abc', 'Bearer', 'Bearer\t' + token, 'Bearer_' + token, token, 'Beare ' + token, 'Bearer\u00e9' + token])
    t.equal(core.authorize(h, '/ext/info', NOW), Outcome.BadHeader, JSON.stringify(h.slice(0, 12)));
  t.equal(core.authorize('Bearer ', '/ext/info', NOW), Outcome.Malformed);
  t.equal(core.authorize(`Bearer  ${token}`, '/ext/info', NOW), Outcome.Malformed);
  t.equal(core.authorize(`Bearer ${'A'.repeat(600)}`, '/ext/info', NOW), Outcome.Malformed, 'too long for any token');
  t.equal(core.authorize(`bearer ${'A'.repeat(600)}`, '/ext/info', NOW), Outcome.Malformed, 'the scheme of a long header is read');
  t.equal(core.authorize(`Basic ${'A'.repeat(600)}`, '/ext/info', NOW), Outcome.BadHeader, 'and may be wrong');
  t.equal(
    core.authorize(`Bearer ${token.slice(0, 70)}\u0141${token.slice(71)}`, '/ext/info', NOW),
    Outcome.Malformed,
    'a character past ASCII never stands in for a token character',
  );
});

t.test('grants: validated, canonical, interned, bounded', async (t) => {
  const core = keyedCore();
  const a = core.addGrant(['/ext/bc/X', '/ext/info']);
  t.equal(core.addGrant(['/ext/info', '/ext/bc/X', '/ext/info']), a, 'order and duplicates do not matter');
  const star = core.addGrant(['/ext/info', '*']);
  t.equal(core.addGrant(['*']), star, '"*" anywhere is just "*"');
  t.throws(() => core.addGrant(['*', '/ext/../x']), { code: 'bad-entry', entry: 1 }, 'but its neighbours are checked all the same');
  t.throws(() => core.addGrant(['', '*']), { code: 'bad-entry', entry: 0 });
  t.equal(core.grantCount, 2);
  for (const ok of ['/*', '/ext/*', '/ext/bc/X/*', '/ext/a.b', '/ext/%41']) t.type(core.addGrant([ok]), 'number', ok);
  const bad = [
    '',
    'ext/info',
    '//',
    '/ext/info/',
    '//ext',
    '/ext//info',
    '/ext/./info',
    '/ext/..',
    '/ext/*/x',
    '/ext*',
    '/ext/x*',
    '**',
    '/ext/%2F',
    '/ext/in fo',
    '/ext/é',
    '/ext\\x',
    '/a\nb',
  ];
  for (const entry of bad) {
    t.throws(() => core.addGrant(['/ext/info', entry]), GrantError, JSON.stringify(entry));
  }
  t.throws(() => core.addGrant([]), { message: 'endpoints must not be empty' });
  const many = Array.from({ length: 129 }, (_, i) => `/ext/bc/${i}`);
  t.throws(() => core.addGrant(many), { message: /at most 128/ });
  t.type(core.addGrant(many.slice(0, 128)), 'number', '128 entries are fine');
  t.throws(() => core.addGrant(['/' + 'a'.repeat(1024)]), { message: /longer than 1024/ });
  t.type(core.addGrant(['/' + 'a'.repeat(1023)]), 'number', '1024 bytes are fine');
  const error = t.throws(() => core.addGrant(['/a', '/b/', '/c'])) as GrantError;
  t.equal(error.entry, 1, 'the error names the bad entry');
  t.equal(error.code, 'bad-entry');
  t.match(error.message, '"/b/"');
});

t.test('the revocation window is fixed; expired pages are swept and reused', async (t) => {
  const core = keyedCore({ windowLog2: 12 });
  const grant = core.addGrant(['*']);
  const first = core.issue(grant, NOW, HOUR).token;
  t.equal(core.revoke(first, NOW).outcome, Outcome.Valid);
  for (let i = 1; i < 4096; i++) core.issue(grant, NOW, HOUR);
  t.throws(() => core.issue(grant, NOW, HOUR), { name: 'IssueError', code: 'window-full' }, 'a full window refuses new tokens');
  t.equal(core.verify(first, '/x', NOW), Outcome.Revoked);
  // Once every token of the page has expired, the next issue sweeps it.
  const later = core.issue(grant, NOW + HOUR, HOUR);
  t.equal(later.claims.serial, 4096);
  t.equal(core.floor, 4096);
  t.equal(core.verify(later.token, '/x', NOW + HOUR), Outcome.Valid, 'the reused bit is clear');
  t.equal(core.verify(first, '/x', NOW + HOUR), Outcome.Expired);
  t.equal(core.revokeSerial(5000), -1, 'not issued');
  t.equal(core.revokeSerial(0), 1, 'below the floor: accepted and dropped');
});

t.test('restored serials keep old tokens and revocations, and new serials continue', async (t) => {
  const core = keyedCore({ windowLog2: 13 });
  const grant = core.addGrant(['*']);
  const old = forge({ serial: 4100n, grant });
  core.restoreSerials(4100, 4200, NOW + HOUR);
  t.equal(core.floor, 4096);
  t.equal(core.verify(old, '/x', NOW), Outcome.Valid);
  t.equal(core.revokeSerial(4100), 0);
  t.equal(core.verify(old, '/x', NOW), Outcome.Revoked);
  t.equal(core.issue(grant, NOW, HOUR).claims.serial, 4200);
  t.throws(() => core.restoreSerials(0, 10_000, NOW), /outside the revocation window/);
});

t.test('issuing needs a key, a known grant and a positive lifetime', async (t) => {
  const core = new Core(coreModule());
  t.throws(() => core.issue(0, NOW, HOUR), { name: 'IssueError', code: 'no-key' });
  core.setKey();
  t.throws(() => core.issue(0, NOW, HOUR), { code: 'unknown-grant', message: 'unknown endpoint grant' });
  const grant = core.addGrant(['*']);
  t.throws(() => core.issue(grant, NOW, 0), { code: 'bad-time', message: /lifetime/ });
  t.throws(() => core.issue(grant, -1, HOUR), IssueError);
  t.throws(() => core.setKey(new Uint8Array(65)), /1 to 64 bytes/);
  t.throws(() => new Core(coreModule(), { windowLog2: 31 }), /init failed/);
});

t.test('generated passwords: 32 letters and digits, all different', async (t) => {
  const core = new Core(coreModule());
  const seen = new Set<string>();
  const counts = new Map<string, number>();
  for (let i = 0; i < 2000; i++) {
    const p = core.generatePassword();
    t.equal(p.length, 32);
    if (!/^[A-Za-z0-9]{32}$/.test(p)) t.fail(p);
    seen.add(p);
    for (const c of p) counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  t.equal(seen.size, 2000);
  t.equal(counts.size, 62, 'every letter and digit occurs');
  // 64000 characters over 62 letters: about 1032 each; the bound is many deviations wide.
  for (const [c, n] of counts) if (n < 800 || n > 1300) t.fail(`${c} occurs ${n} times`);
});

t.test('keys and passwords come from the random source the host gives', async (t) => {
  const fixed = (into: Uint8Array) => into.fill(61);
  const a = new Core(coreModule(), { random: fixed });
  const b = new Core(coreModule(), { random: fixed });
  t.equal(a.generatePassword(), '9'.repeat(32), 'byte 61 is the 62nd letter');
  a.setKey();
  b.setKey(Buffer.alloc(32, 61));
  const grant = a.addGrant(['*']);
  b.addGrant(['*']);
  t.equal(a.issue(grant, NOW, HOUR).token, b.issue(grant, NOW, HOUR).token, 'the drawn key is the given bytes');
});

t.test('password generation samples by rejection from the entropy it is given', async (t) => {
  const { instance } = await WebAssembly.instantiate(wasmBytes, {
    env: {
      abort: () => {
        throw new Error('abort');
      },
    },
  });
  const x = instance.exports as unknown as {
    memory: WebAssembly.Memory;
    ioBuffer(): number;
    tokenBuffer(): number;
    generatePassword(e: number, n: number): number;
  };
  const mem = () => new Uint8Array(x.memory.buffer);
  mem().set([0, 61, 62, 248, 255, 247, 25, 26], x.ioBuffer());
  t.equal(x.generatePassword(8, 6), 6);
  t.equal(Buffer.from(mem().subarray(x.tokenBuffer(), x.tokenBuffer() + 6)).toString(), 'A9A9Za', 'bytes 248 and 255 are skipped');
  t.equal(x.generatePassword(8, 7), -1, 'not enough accepted bytes');
  t.equal(x.generatePassword(8, 0), -2);
});

t.test("the wrapper keeps working when the core's memory grows", async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['/ext/info']), NOW, HOUR);
  t.equal(core.authorize(`Bearer ${token}`, '/ext/info', NOW), Outcome.Valid);
  const memory = (core as unknown as { x: { memory: WebAssembly.Memory } }).x.memory;
  const before = memory.buffer.byteLength;
  // Large distinct endpoint lists fill the grant heap until the memory must grow.
  for (let i = 0; memory.buffer.byteLength === before; i++) {
    core.addGrant(Array.from({ length: 100 }, (_, j) => `/ext/bc/${i}-${j}-${'x'.repeat(500)}`));
  }
  t.ok(memory.buffer.byteLength > before, 'the memory grew');
  t.equal(core.authorize(`Bearer ${token}`, '/ext/info', NOW), Outcome.Valid);
  t.equal(core.authorize(`Bearer ${token}`, '/ext/bc/X', NOW), Outcome.NotGranted);
  t.equal(core.verify(token, '/ext/info', NOW), Outcome.Valid);
});

t.test('verification leaves memory as it was', async (t) => {
  const core = keyedCore();
  const { token } = core.issue(core.addGrant(['/ext/info']), NOW, HOUR);
  const header = `Bearer ${token}`;
  const memory = (core as unknown as { x: { memory: WebAssembly.Memory } }).x.memory;
  const before = memory.buffer.byteLength;
  for (let i = 0; i < 100_000; i++) core.authorize(header, i % 2 ? '/ext/info' : '/ext/bc/X', NOW);
  t.equal(memory.buffer.byteLength, before);
});

// Method scopes: a grant's endpoints, then an empty entry and its JSON-RPC method patterns.

interface RawCore {
  memory: WebAssembly.Memory;
  init(windowLog2: number): number;
  abiVersion(): number;
  ioBuffer(): number;
  tokenBuffer(): number;
  pathBuffer(): number;
  pathCapacity(): number;
  resultBuffer(): number;
  setKey(len: number): number;
  grantAdd(len: number): number;
  grantFind(len: number): number;
  grantCount(): number;
  methodAllowed(grant: number, len: number): number;
  issue(grant: number, now: bigint, lifetime: number): number;
  authorize(headerLen: number, pathLen: number, now: bigint): number;
  admit(serial: bigint, expiry: bigint, grant: number, n: number, now: bigint): number;
  usage(serial: bigint): number;
  quota(serial: bigint, grant: number, now: bigint): number;
}

/** The plain build straight from its exports, set up, for what the Core class does not show. */
function rawCore(): RawCore {
  const abort = () => {
    throw new Error('core abort');
  };
  const x = new WebAssembly.Instance(new WebAssembly.Module(wasmBytes), { env: { abort } }).exports as unknown as RawCore;
  x.init(12);
  return x;
}

/** Writes `text` (latin1: one byte per character) at `ptr`; its length. */
function put(x: RawCore, ptr: number, text: string): number {
  new Uint8Array(x.memory.buffer).set(Buffer.from(text, 'latin1'), ptr);
  return text.length;
}

const resultWord = (x: RawCore) => new DataView(x.memory.buffer).getUint32(x.resultBuffer() + RESULT.REFUSED_ENTRY, true);

t.test('the core speaks ABI 6', async (t) => {
  t.equal(rawCore().abiVersion(), 6);
});

t.test("a check's record in the result buffer outlives the admit, usage and quota calls for its token", async (t) => {
  const x = rawCore();
  new Uint8Array(x.memory.buffer).fill(7, x.ioBuffer(), x.ioBuffer() + 32);
  t.equal(x.setKey(32), 0);
  const now = BigInt(NOW);
  const nowNs = now * 1_000_000_000n;
  const view = () => new DataView(x.memory.buffer);
  const at = (field: number) => x.resultBuffer() + field;
  const record = () => ({
    serial: view().getBigUint64(at(RESULT.SERIAL), true),
    expiry: view().getBigUint64(at(RESULT.EXPIRY), true),
    grant: view().getUint32(at(RESULT.GRANT), true),
    scoped: view().getUint32(at(RESULT.SCOPED), true),
  });
  const cases: Array<[string, string, number]> = [
    // The rate's refusal writes a wait; the quota's a wait and a reset.
    ['past the rate', '/ext/info\n\n\nrate 1/h\nburst 1\n', ADMIT_RATE],
    ['past the quota', '/ext/info\n\neth_*\n\nquota 1/day\n', ADMIT_QUOTA],
  ];
  for (const [name, list, refused] of cases) {
    const grant = x.grantAdd(put(x, x.ioBuffer(), list));
    t.ok(grant >= 0, `${name}: the grant`);
    const len = x.issue(grant, now, HOUR);
    const token = Buffer.from(new Uint8Array(x.memory.buffer, x.tokenBuffer(), len)).toString('latin1');
    const issued = record();
    t.equal(x.authorize(put(x, x.tokenBuffer(), `Bearer ${token}`), put(x, x.pathBuffer(), '/ext/info'), now), Outcome.Limited);
    const checked = record();
    t.same(checked, { ...issued, scoped: refused === ADMIT_QUOTA ? 1 : 0 }, `${name}: the check's serial, expiry, grant and scope`);
    new Uint8Array(x.memory.buffer).set(Buffer.from('00000000000000000000ffffc0000207', 'hex'), x.ioBuffer());
    t.equal(x.admit(checked.serial, checked.expiry, grant, 1, nowNs), ADMIT_OK);
    t.equal(x.admit(checked.serial, checked.expiry, grant, 1, nowNs), refused);
    t.ok(view().getBigUint64(at(RESULT.WAIT), true) > 0n, `${name}: a wait`);
    t.equal(x.usage(checked.serial), 1);
    t.equal(view().getBigUint64(at(RESULT.REQUESTS), true), 1n);
    t.equal(x.quota(checked.serial, grant, nowNs), refused === ADMIT_QUOTA ? 1 : 0);
    t.same(record(), checked, `${name}: the check's record is as the check left it`);
  }
});

t.test('Core hands each check and admit its record, which nothing after it changes', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant(['/ext/info'], ['eth_*'], ['quota 1/day']);
  const { token, claims } = core.issue(grant, NOW, HOUR);
  const plain = core.issue(core.addGrant(['/ext/info']), NOW, HOUR).token;
  const client = Buffer.from('00000000000000000000ffffc0000207', 'hex');
  const checked = checkRecord();
  const admitted = admitRecord();
  t.equal(core.authorize(`Bearer ${token}`, '/ext/info', NOW, checked), Outcome.Limited);
  const want = { grant, serial: claims.serial, expiry: claims.expiry, scoped: true };
  t.same(checked, want);
  t.equal(core.admit(checked.serial, checked.expiry, checked.grant, 1, client, NOW * 1000, admitted), ADMIT_OK);
  t.equal(core.admit(checked.serial, checked.expiry, checked.grant, 1, client, NOW * 1000, admitted), ADMIT_QUOTA);
  const spent = { waitMs: 6_400_000, resetMs: 1_700_006_400_000 };
  t.same(admitted, spent);
  t.same(core.usage(claims.serial), { requests: 1, lastUsedMs: NOW * 1000 });
  t.same(core.quota(claims.serial, grant, NOW * 1000), { here: 1, others: 0, window: 19_675 });
  t.equal(core.authorize(`Bearer ${plain}`, '/ext/info', NOW), Outcome.Valid, 'a check without a record');
  t.same(checked, want, "the check's record holds through every call after it");
  t.same(admitted, spent, "and admit's");
});

t.test('grantAdd takes a method scope after an empty entry, and refuses bad patterns with their index', async (t) => {
  const x = rawCore();
  const add = (list: string) => x.grantAdd(put(x, x.ioBuffer(), list));
  const find = (list: string) => x.grantFind(put(x, x.ioBuffer(), list));
  const refusals: Array<[string, number, number | undefined]> = [
    ['/a\n\n', -9, undefined],
    // A second empty entry starts the limits (ABI 3): none after it is a bad limit.
    ['/a\n\n\n', -10, 0],
    ['/a\n\neth_call\n\n', -10, 0],
    ['/a\n\neth call\n', -6, 0],
    ['/a\n\neth_call\neth_*x\n', -6, 1],
    ['/a\n\n*eth\n', -6, 0],
    ['/a\n\n**\n', -6, 0],
    ['/a\n\neth\x7f\n', -6, 0],
    ['/a\n\neth\x00\n', -6, 0],
    ['/a\n\n\xc3\xa9\n', -6, 0],
    ['/a\n\nm\n' + 'n'.repeat(129) + '\n', -7, 1],
    ['/a\n\n' + Array.from({ length: 129 }, (_, i) => `m${i}\n`).join(''), -8, undefined],
    ['/a\n\neth_call', -4, 0],
    ['\neth_call\n', -4, 0],
    ['/a/../b\n\neth_call\n', -4, 0],
  ];
  for (const [list, code, index] of refusals) {
    t.equal(find(list), code, `grantFind ${JSON.stringify(list.slice(0, 30))}`);
    t.equal(add(list), code, `grantAdd ${JSON.stringify(list.slice(0, 30))}`);
    if (index !== undefined) t.equal(resultWord(x), index, 'the index of the refused entry or pattern');
  }
  t.equal(x.grantCount(), 0, 'a refused grant adds nothing');

  t.equal(add('/a\n'), 0);
  t.equal(find('/a\n\neth_call\n'), 1, 'the same endpoints with methods are a new grant');
  t.equal(x.grantCount(), 1, 'which grantFind does not add');
  t.equal(add('/a\n\neth_call\n'), 1);
  t.equal(add('/a\n\neth_call\n'), 1, 'interned');
  t.equal(add('/a\n'), 0, 'and the grant without methods is still the one it was');
  t.equal(add('/a\n\neth_call\neth_chainId\n'), 2, 'other methods are another grant');
  t.equal(add('/a\n\neth_chainId\n'), 3);
  t.equal(add('/a\n\n*\n'), 4, '"*" is a scope of its own: every method, but a method all the same');
  t.equal(add('/a\n\neth_call\n*\n'), 4, '"*" among patterns is "*" alone');
  t.equal(add('/b\n*\n\neth_*\n'), 5);
  t.equal(add('*\n\neth_*\n'), 5, 'and "*" among endpoints is "*" alone, with the scope kept');
  t.equal(add('*\n\n*\n'), 6);
  t.equal(add('/a\n*\n\nx\n*\n'), 6, 'both at once');
  t.equal(add('/a\n\n' + 'n'.repeat(128) + '\n'), 7, 'a pattern of 128 bytes');
  t.equal(add('/a\n\n' + Array.from({ length: 128 }, (_, i) => `m${i}\n`).join('')), 8, '128 patterns');
  t.equal(add('/a\n\n!~\n'), 9, 'any visible ASCII');
});

t.test('Core.addGrant takes methods: canonical, interned apart from the endpoints alone, errors that name methods[i]', async (t) => {
  const core = keyedCore();
  const plain = core.addGrant(['/ext/bc/C/rpc']);
  const scoped = core.addGrant(['/ext/bc/C/rpc'], ['eth_getBalance', 'eth_call']);
  t.not(scoped, plain);
  t.equal(core.addGrant(['/ext/bc/C/rpc'], ['eth_call', 'eth_getBalance', 'eth_call']), scoped, 'order and duplicates do not matter');
  t.equal(core.findGrant(['/ext/bc/C/rpc']), plain);
  t.equal(core.findGrant(['/ext/bc/C/rpc'], ['net_version']), core.grantCount, 'a new scope is a new grant');
  const any = core.addGrant(['/ext/bc/C/rpc'], ['*']);
  t.equal(core.addGrant(['/ext/bc/C/rpc'], ['eth_call', '*']), any, '"*" anywhere is just "*"');
  t.not(any, plain, 'and still a scope: the grant of a token limited to JSON-RPC calls');

  const refused = (methods: string[], code: string, entry: number | undefined, message: RegExp | string) => {
    const error = t.throws(() => core.findGrant(['/ext/bc/C/rpc'], methods)) as GrantError;
    t.equal(error.name, 'GrantError');
    t.equal(error.code, code, JSON.stringify(methods).slice(0, 40));
    t.equal(error.entry, entry);
    t.match(error.message, message);
  };
  refused([], 'no-methods', undefined, 'methods must hold at least one pattern; leave methods out for a token that allows every method');
  refused(
    ['net_version', 'eth_*x'],
    'bad-method',
    1,
    /^methods\[1\] "eth_\*x": not a JSON-RPC method name of 1 to 128 visible ASCII characters/,
  );
  refused(['eth_call', ''], 'bad-method', 1, /^methods\[1\] "": not/);
  refused(['eth call'], 'bad-method', 0, 'methods[0] "eth call": not');
  refused(['eth_caf\u00e9'], 'bad-method', 0, 'methods[0] "eth_café"');
  refused(['a\nb'], 'bad-method', 0, 'methods[0] "a\\nb"');
  refused(['a', 'm'.repeat(129)], 'method-too-long', 1, /^methods\[1\] "m{64}…": longer than 128 bytes$/);
  refused(['\u00e9'.repeat(65)], 'method-too-long', 0, /longer than 128 bytes/);
  refused(
    Array.from({ length: 129 }, (_, i) => `m${i}`),
    'too-many-methods',
    undefined,
    'methods may hold at most 128 patterns',
  );
  t.throws(() => core.findGrant(['/ext/../x'], ['eth_*x']), { code: 'bad-entry', entry: 0 }, 'the endpoints are checked first');
  t.throws(() => core.findGrant([''], ['eth_call']), { code: 'bad-entry', entry: 0 }, 'an empty endpoint is a bad endpoint, not a scope');
  t.equal(core.grantCount, 3, 'nothing refused was added');
});

t.test('grantEntries and splitGrantEntries: the stored form of a grant, and back', async (t) => {
  t.same(grantEntries(['/b', '/a', '/b']), ['/a', '/b']);
  t.same(grantEntries(['/b', '/a'], ['net_version', 'eth_*', 'net_version']), ['/a', '/b', '', 'eth_*', 'net_version']);
  t.same(grantEntries(['*', '/a'], ['x', '*']), ['*', '', '*']);
  t.same(canonicalMethods(['b', 'a', 'b']), ['a', 'b']);
  t.same(splitGrantEntries(['/a', '/b', '', 'eth_*']), { endpoints: ['/a', '/b'], methods: ['eth_*'] });
  t.same(splitGrantEntries(['/a', '/b']), { endpoints: ['/a', '/b'] });
  t.same(splitGrantEntries(['/a', '']), { endpoints: ['/a'], methods: [] }, 'an empty scope, which addGrant refuses');
  t.same(splitGrantEntries(['', 'x']), { endpoints: ['', 'x'] }, 'an empty first entry is a bad endpoint, which addGrant refuses');
  t.equal(MAX_METHODS, 128);
  // The stored form is the core's list: adding it back gives the same grant.
  const core = keyedCore();
  const id = core.addGrant(['/ext/info', '/ext/bc/C/rpc'], ['eth_call']);
  const { endpoints, methods } = splitGrantEntries(grantEntries(['/ext/info', '/ext/bc/C/rpc'], ['eth_call']));
  t.equal(core.addGrant(endpoints, methods), id);
});

t.test('a valid token of a scoped grant is Scoped with its grant id; refusals and unscoped grants are as before', async (t) => {
  const core = keyedCore();
  const RPC = '/ext/bc/C/rpc';
  const plain = core.issue(core.addGrant([RPC]), NOW, HOUR).token;
  const grant = core.addGrant([RPC, '/ext/bc/X/*'], ['eth_call']);
  const scoped = core.issue(grant, NOW, HOUR).token;
  t.equal(core.authorize(`Bearer ${plain}`, RPC, NOW), Outcome.Valid);
  const checked = checkRecord();
  t.equal(core.authorize(`Bearer ${scoped}`, RPC, NOW, checked), Outcome.Scoped);
  t.same(checked, { grant, serial: 0, expiry: 0, scoped: true });
  t.equal(core.authorize(`Bearer ${plain}`, RPC, NOW, checked), Outcome.Valid);
  t.same(checked, { grant: -1, serial: 0, expiry: 0, scoped: false }, 'a Valid check leaves none of the last one');
  t.equal(core.verify(scoped, '/ext/bc/X/rpc', NOW, checked), Outcome.Scoped);
  t.equal(checked.grant, grant);
  t.equal(core.authorize(`Bearer ${scoped}`, '/ext/info', NOW), Outcome.NotGranted, 'the endpoints still bound it');
  t.equal(core.authorize(`Bearer ${scoped}`, RPC, NOW + HOUR), Outcome.Expired);
  t.equal(core.authorize(`Bearer ${scoped}`, '/ext/bc/C/../rpc', NOW), Outcome.BadPath);
  t.equal(core.authorize(`Bearer ${forge({ grant, serial: 1n, generation: 1 })}`, RPC, NOW), Outcome.EarlierGeneration);
  // inspect and revoke are about the token, not a request: a live scoped token is Valid there.
  t.same(core.inspect(scoped, NOW), { outcome: Outcome.Valid, claims: { serial: 1, expiry: NOW + HOUR, generation: 0, grant } });
  t.equal(core.revoke(scoped, NOW).outcome, Outcome.Valid);
  t.equal(core.authorize(`Bearer ${scoped}`, RPC, NOW), Outcome.Revoked);
  t.equal(OUTCOME_NAMES[Outcome.Scoped], 'scoped');
  t.equal(Outcome.Scoped, 10, 'the next free code: older hosts refuse it as not Valid');
});

t.test('methodAllowed: equal bytes, a prefix for "x*", any name for "*", every name without a scope', async (t) => {
  const core = keyedCore();
  const plain = core.addGrant(['/ext/bc/C/rpc']);
  const some = core.addGrant(['/ext/bc/C/rpc'], ['eth_*', 'net_version', 'avax.getHeight']);
  const any = core.addGrant(['/ext/bc/C/rpc'], ['*']);
  const table: Array<[string, boolean]> = [
    ['eth_call', true],
    ['eth_', true],
    ['eth', false],
    ['Eth_call', false],
    ['eth-call', false],
    ['net_version', true],
    ['net_versio', false],
    ['net_version2', false],
    ['NET_VERSION', false],
    ['avax.getHeight', true],
    ['', false],
    [' net_version', false],
    ['net_version ', false],
    ['\u00e9', false],
    ['eth_\u00e9', true],
    ['net_version\u0000', false],
    [`eth_${'x'.repeat(10_000)}`, true],
    [`net_version${'x'.repeat(10_000)}`, false],
  ];
  for (const [method, allowed] of table) {
    t.equal(core.methodAllowed(some, method), allowed, JSON.stringify(method.slice(0, 20)));
    t.equal(core.methodAllowed(any, method), true);
    t.equal(core.methodAllowed(plain, method), true);
  }
  t.throws(() => core.methodAllowed(core.grantCount, 'eth_call'), RangeError, 'an unknown grant is a bug of the host');

  // Through the raw export: the name in the path buffer; one longer than the buffer with its true length.
  const x = rawCore();
  t.equal(x.grantAdd(put(x, x.ioBuffer(), '/a\n\neth_*\nnet_version\n')), 0);
  const name = (text: string, len = text.length) => {
    put(x, x.pathBuffer(), text);
    return x.methodAllowed(0, len);
  };
  t.equal(name('eth_call'), 1);
  t.equal(name('net_version'), 1);
  t.equal(name('net'), 0);
  t.equal(name('eth_', x.pathCapacity() + 100), 1, 'a prefix is read from what was written');
  t.equal(name('net_version', x.pathCapacity() + 100), 0);
  t.equal(name('', 0), 0);
  t.equal(x.methodAllowed(1, 0), -1, 'unknown grant');
});

t.test('methodAllowed agrees with a model of the patterns on generated names', async (t) => {
  const core = keyedCore();
  const PIECES = ['eth', '_', 'call', 'get', '*', 'net', 'a', '.'];
  const pattern = fc
    .array(fc.constantFrom(...PIECES.filter((p) => p !== '*')), { minLength: 1, maxLength: 3 })
    .chain((parts) => fc.boolean().map((star) => parts.join('') + (star ? '*' : '')));
  const name = fc.array(fc.constantFrom(...PIECES, 'é', ' '), { maxLength: 5 }).map((parts) => parts.join(''));
  const model = (patterns: string[], method: string) =>
    patterns.some((p) => (p.endsWith('*') ? method.startsWith(p.slice(0, -1)) : p === method));
  const cases = fc.tuple(fc.array(pattern, { minLength: 1, maxLength: 4 }), fc.array(name, { maxLength: 8 }));
  await checkProperty(
    t,
    'methodAllowed is the model',
    fc.asyncProperty(cases, async ([patterns, names]) => {
      const grant = core.addGrant(['/a'], patterns);
      return names.every((n) => core.methodAllowed(grant, n) === model(patterns, n));
    }),
    { numRuns: 500 },
  );
});

t.test('Scoped checks and methodAllowed leave memory as it was', async (t) => {
  const core = keyedCore();
  const grant = core.addGrant(['/ext/info'], ['eth_*', 'net_version']);
  const header = `Bearer ${core.issue(grant, NOW, HOUR).token}`;
  const memory = (core as unknown as { x: { memory: WebAssembly.Memory } }).x.memory;
  const before = memory.buffer.byteLength;
  const grantsBefore = core.grantCount;
  const checked = checkRecord();
  for (let i = 0; i < 100_000; i++) {
    if (core.authorize(header, '/ext/info', NOW, checked) !== Outcome.Scoped) throw new Error('not Scoped');
    core.methodAllowed(checked.grant, i % 2 ? 'eth_call' : 'web3_sha3');
  }
  t.equal(memory.buffer.byteLength, before);
  t.equal(core.grantCount, grantsBefore);
});

t.test("a quota counts here and at the other gateways: quota reads both, setQuota adds here and replaces the others' sum", async (t) => {
  const core = keyedCore();
  const grant = core.addGrant(['/'], undefined, ['quota 10/day']);
  const plain = core.addGrant(['/ext/info']);
  const { claims } = core.issue(grant, NOW, HOUR);
  const client = Buffer.from('00000000000000000000ffffc0000207', 'hex');
  const nowMs = NOW * 1000;
  // 2023-11-14 is day 19,675 since 1970-01-01.
  t.equal(core.quota(claims.serial, grant, nowMs), undefined, 'no slot before the first call');
  t.equal(core.admit(claims.serial, claims.expiry, grant, 4, client, nowMs), ADMIT_OK);
  t.same(core.quota(claims.serial, grant, nowMs), { here: 4, others: 0, window: 19_675 });
  t.ok(core.setQuota(claims.serial, claims.expiry, 19_675, 5, false), "the others' sum");
  t.ok(core.setQuota(claims.serial, claims.expiry, 19_675, 1, true), 'added here (a restore)');
  t.same(core.quota(claims.serial, grant, nowMs), { here: 5, others: 5, window: 19_675 });
  const admitted = admitRecord();
  t.equal(core.admit(claims.serial, claims.expiry, grant, 1, client, nowMs, admitted), ADMIT_QUOTA, 'here 5 + others 5 spend 10');
  t.same(admitted, { waitMs: 6_400_000, resetMs: 1_700_006_400_000 }, 'it resets at the next UTC midnight');
  t.ok(core.setQuota(claims.serial, claims.expiry, 19_675, 4, false), "the others' sum replaced, not added");
  t.equal(core.admit(claims.serial, claims.expiry, grant, 1, client, nowMs, admitted), ADMIT_OK);
  t.same(admitted, { waitMs: 0, resetMs: 0 }, 'an answer with no wait fills none');
  t.ok(core.setQuota(claims.serial, claims.expiry, 19_674, 100, true), 'a count of an earlier window than the one held');
  t.same(core.quota(claims.serial, grant, nowMs), { here: 6, others: 4, window: 19_675 }, 'leaves the later one');
  t.same(core.quota(claims.serial, grant, nowMs + 86_400_000), { here: 0, others: 0, window: 19_676 }, 'the next day counts from 0');
  t.equal(core.quota(claims.serial, plain, nowMs), undefined, 'a grant without a quota has none');
});
