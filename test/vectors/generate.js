// Writes the shared core vectors: core-vectors.json (every JavaScript host) and
// core-vectors.txt (the same cases, one command per line, for hosts without a JSON
// parser). Run `node test/vectors/generate.js` after `npm run build` when the core
// changes; test/unit/vectors.test.ts fails while the checked-in files differ from what the
// core generates now.
//
// Every expectation below is recorded from the core, and also stated here: the generator
// refuses to write a file in which the core disagrees with what a case says it shows.
// Digests, tags and every issued token are checked against node:crypto as well.
import { createHash, createHmac } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Core } from '../../build/host/core/core.js';
import { ABI_VERSION, Outcome, admitRecord, checkRecord } from '../../build/host/core/abi.js';
import { grantEntries, splitGrantEntries } from '../../build/host/core/grants.js';
import { coreModule } from '../../build/host/core/module.js';
import { addressBytes } from '../../build/host/addresses.js';
import { clientRange } from '../../build/host/service/token-params.js';
import { CLIENT_RANGES } from './client-ranges.js';
import { fixedEntropy, toHex } from './run-vectors.js';

const NOW = 1_700_000_000;
const HOUR = 3600;
/** Fixed keys: tokens depend only on the key and the inputs, never on the clock or chance. */
const KEY = Uint8Array.from({ length: 32 }, (_, i) => i);
const OTHER_KEY = new Uint8Array(32).fill(0xa5);
const LONG_KEY = Uint8Array.from({ length: 64 }, (_, i) => 255 - i);
const ISSUE_REFUSALS = { [-1]: 'unknown-grant', [-2]: 'window-full', [-3]: 'bad-time', [-4]: 'no-key' };
const GRANT_REFUSALS = {
  empty: -1,
  'too-many-entries': -2,
  'table-full': -3,
  'bad-entry': -4,
  'entry-too-long': -5,
  'bad-method': -6,
  'method-too-long': -7,
  'too-many-methods': -8,
  'no-methods': -9,
  'bad-limit': -10,
  'too-many-clients': -11,
};
/** The client address of an admit step: 16 bytes, IPv4 as IPv4-mapped. */
const V4_MAPPED = '00000000000000000000ffff';
const ipv4 = (a, b, c, d) => V4_MAPPED + [a, b, c, d].map((x) => x.toString(16).padStart(2, '0')).join('');
const NOW_MS = NOW * 1000;
/** The expiry of a token issued at NOW for an HOUR, as admit takes it. */
const LIVE = NOW + HOUR;
const YEAR = 365 * 24 * HOUR;

/** `count` serials whose slots in the core's limits and usage tables start at the same place, as assembly/limits.ts hashes them. */
function collidingSerials(count) {
  const home = (s) => ((s * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn) >> 48n;
  const found = [];
  for (let s = 1n; found.length < count; s++) if (home(s) === home(1n)) found.push(Number(s));
  return found;
}

/** @param {WebAssembly.Module} module build/core.wasm */
export function generateVectors(module = coreModule()) {
  const cases = [];
  const names = new Set();
  const add = (vector) => {
    if (names.has(vector.name)) throw new Error(`two cases are named ${vector.name}`);
    names.add(vector.name);
    cases.push(vector);
  };
  const core = () => new Core(module, { windowLog2: 12 });

  // SHA-256: the FIPS 180-4 examples, and lengths around the 64-byte block and its padding.
  const sha = (name, message) => {
    const digest = toHex(core().sha256(message));
    if (digest !== createHash('sha256').update(message).digest('hex')) throw new Error(`core SHA-256 is wrong: ${name}`);
    add({ name: `sha256: ${name}`, kind: 'sha256', message: toHex(message), digest });
  };
  const ascii = (text) => new TextEncoder().encode(text);
  const pattern = (n) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + 7) & 0xff);
  sha('empty', new Uint8Array(0));
  sha('"abc"', ascii('abc'));
  sha('448 bits', ascii('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq'));
  sha(
    '896 bits',
    ascii('abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu'),
  );
  for (const n of [55, 56, 63, 64, 65, 119, 120, 1000]) sha(`${n} bytes`, pattern(n));

  // HMAC-SHA256: RFC 4231 test cases 1 to 7 (case 5 publishes 128 bits; the full tag is kept).
  const hmac = (name, key, message, published) => {
    const tag = toHex(core().hmacSha256(key, message));
    if (tag !== createHmac('sha256', key).update(message).digest('hex') || !tag.startsWith(published)) {
      throw new Error(`core HMAC-SHA256 is wrong: ${name}`);
    }
    add({ name: `hmacSha256: ${name}`, kind: 'hmacSha256', key: toHex(key), message: toHex(message), tag });
  };
  const fill = (n, b) => new Uint8Array(n).fill(b);
  hmac('RFC 4231 case 1', fill(20, 0x0b), ascii('Hi There'), 'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7');
  hmac(
    'RFC 4231 case 2',
    ascii('Jefe'),
    ascii('what do ya want for nothing?'),
    '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
  );
  hmac('RFC 4231 case 3', fill(20, 0xaa), fill(50, 0xdd), '773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe');
  hmac(
    'RFC 4231 case 4',
    Uint8Array.from({ length: 25 }, (_, i) => i + 1),
    fill(50, 0xcd),
    '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b',
  );
  hmac('RFC 4231 case 5', fill(20, 0x0c), ascii('Test With Truncation'), 'a3b6167473100ee06e0c796c2955552b');
  hmac(
    'RFC 4231 case 6',
    fill(131, 0xaa),
    ascii('Test Using Larger Than Block-Size Key - Hash Key First'),
    '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54',
  );
  hmac(
    'RFC 4231 case 7',
    fill(131, 0xaa),
    ascii(
      'This is a test using a larger than block-size key and a larger than ' +
        'block-size data. The key needs to be hashed before being used by the HMAC algorithm.',
    ),
    '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2',
  );

  // Generated passwords: fixed entropy gives a fixed password. Bytes of 248 and above are
  // skipped; when a draw runs out, the host draws again.
  const password = (name, length, draws) => {
    const value = new Core(module, { windowLog2: 12, random: fixedEntropy(draws) }).generatePassword(length);
    if (!new RegExp(`^[A-Za-z0-9]{${length}}$`).test(value)) throw new Error(`bad password: ${name}`);
    add({ name: `password: ${name}`, kind: 'password', length, entropy: draws.map(toHex), password: value });
  };
  const sha256Chain = (seed, n) => {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 32)
      out.set(
        createHash('sha256')
          .update(`${seed}/${i / 32}`)
          .digest()
          .subarray(0, Math.min(32, n - i)),
        i,
      );
    return out;
  };
  const firstDraw = sha256Chain('api-auth password', 64);
  firstDraw[0] = 0xff;
  firstDraw[5] = 0xf8;
  firstDraw[6] = 0xf7; // skipped, skipped, kept
  password('32 characters from one draw, skipping bytes 248 and above', 32, [firstDraw]);
  const starved = sha256Chain('api-auth starved', 64).map((b, i) => (i % 3 === 0 ? b : 0xf8 | (b & 7)));
  password('a draw that runs out, then a second one', 32, [starved, sha256Chain('api-auth second draw', 64)]);
  password('one character', 1, [Uint8Array.of(0xfe, 61)]);

  const tokens = (name, options, build) => add(tokenCase(module, name, options, build));
  const ONE_HOUR = { key: KEY, grants: [['/ext/info']] };

  // Valid, and how far a grant reaches.
  tokens('valid: an exact endpoint, until the second before expiry', ONE_HOUR, (c) => {
    const t = c.issue(0, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/ext/info', NOW + HOUR - 1, 'Valid');
    c.authorize(`bearer ${t}`, '/ext/info', NOW, 'Valid');
    c.authorize(`BEARER ${t}`, '/ext/info', NOW, 'Valid');
    c.authorize(`bEaReR ${t}`, '/ext/info', NOW, 'Valid');
    c.verify(t, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/ext/info/', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/info/x', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/infox', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/INFO', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext', NOW, 'NotGranted');
    c.verify(t, '/ext/health', NOW, 'NotGranted');
  });
  tokens('valid: "*" grants every path', { key: KEY, grants: [['*']] }, (c) => {
    const t = c.issue(0, NOW, HOUR);
    for (const path of ['/', '/ext/info', '/ext/bc/X/rpc', '/a/b/c/', '/ext/%41', '/~user', `/${'a'.repeat(8191)}`]) {
      c.authorize(`Bearer ${t}`, path, NOW, 'Valid');
    }
  });
  tokens('valid: "/ext/bc/*" grants the paths below /ext/bc/ only', { key: KEY, grants: [['/ext/bc/*']] }, (c) => {
    const t = c.issue(0, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/ext/bc/X', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/ext/bc/X/events', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/ext/bc/X/', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/ext/bc', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/bc/', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/bcd', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/b', NOW, 'NotGranted');
  });
  tokens('valid: "/*" grants every path but "/"', { key: KEY, grants: [['/*']] }, (c) => {
    const t = c.issue(0, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/x', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/', NOW, 'NotGranted');
  });
  tokens('valid: "/" grants the root alone', { key: KEY, grants: [['/']] }, (c) => {
    const t = c.issue(0, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/x', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/x/', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '//', NOW, 'BadPath');
  });
  tokens(
    'valid: a list of entries, each token scoped to its own grant',
    { key: KEY, grants: [['/ext/bc/*', '/ext/info'], ['/ext/health']] },
    (c) => {
      const both = c.issue(0, NOW, HOUR);
      const health = c.issue(1, NOW, HOUR);
      c.authorize(`Bearer ${both}`, '/ext/info', NOW, 'Valid');
      c.authorize(`Bearer ${both}`, '/ext/bc/C/rpc', NOW, 'Valid');
      c.authorize(`Bearer ${both}`, '/ext/health', NOW, 'NotGranted');
      c.authorize(`Bearer ${health}`, '/ext/health', NOW, 'Valid');
      c.authorize(`Bearer ${health}`, '/ext/info', NOW, 'NotGranted');
    },
  );
  tokens('valid: an equal list is interned once, a new one gets the next id', ONE_HOUR, (c) => {
    c.addGrant(['/ext/info'], 0);
    c.addGrant(['/ext/bc/*', '/ext/info'], 1);
    c.addGrant(['/ext/bc/*', '/ext/info'], 1);
    const t = c.issue(1, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/ext/bc/P', NOW, 'Valid');
  });
  tokens(
    'valid: a 64-byte key, the default 2^22 window, generation 41',
    { key: LONG_KEY, windowLog2: 22, generation: 41, grants: [['*']] },
    (c) => {
      const t = c.issue(0, NOW, 12 * HOUR);
      c.authorize(`Bearer ${t}`, '/ext/info', NOW + 12 * HOUR - 1, 'Valid');
      c.authorize(`Bearer ${t}`, '/ext/info', NOW + 12 * HOUR, 'Expired');
    },
  );
  tokens('valid: a 1-byte key, a 1-second lifetime, a token issued at time 0', { key: Uint8Array.of(7), grants: [['*']] }, (c) => {
    const early = c.issue(0, 0, 1);
    const t = c.issue(0, NOW, 1);
    c.verify(early, '/x', 0, 'Valid');
    c.verify(early, '/x', 1, 'Expired');
    c.verify(t, '/x', NOW, 'Valid');
    c.verify(t, '/x', NOW + 1, 'Expired');
  });

  // Each refusal.
  tokens('Malformed: not 76 base64url characters, another version, an unknown grant', ONE_HOUR, (c) => {
    const t = c.issue(0, NOW, HOUR);
    const malformed = [
      t.slice(1),
      `${t}A`,
      `${t}=`,
      `${t.slice(0, 75)}=`,
      `${t.slice(0, 75)}+`,
      `${t.slice(0, 75)}/`,
      `${t.slice(0, 40)}.${t.slice(41)}`,
      `${t.slice(0, 38)} ${t.slice(39)}`,
      'A'.repeat(76),
      '='.repeat(76),
      c.forge({ version: 0 }),
      c.forge({ version: 2 }),
      c.forge({ grant: 1 }),
      c.forge({ grant: 0xffffffff }),
    ];
    for (const m of malformed) c.authorize(`Bearer ${m}`, '/ext/info', NOW, 'Malformed');
    c.authorize('Bearer ', '/ext/info', NOW, 'Malformed');
    c.authorize(`Bearer  ${t}`, '/ext/info', NOW, 'Malformed');
    c.authorize(`Bearer ${t} `, '/ext/info', NOW, 'Malformed');
    c.authorize(`Bearer ${t.slice(0, 75)}\u00e9`, '/ext/info', NOW, 'Malformed');
    c.authorize(`Bearer ${'A'.repeat(505)}`, '/ext/info', NOW, 'Malformed');
    c.authorize(`Bearer ${'A'.repeat(600)}`, '/ext/info', NOW, 'Malformed');
    c.verify('', '/ext/info', NOW, 'Malformed');
    c.verify(t.slice(0, 75), '/ext/info', NOW, 'Malformed');
    c.verify('x'.repeat(600), '/ext/info', NOW, 'Malformed');
  });
  tokens('BadSignature: another key, any changed byte, no key set', ONE_HOUR, (c) => {
    const t = c.issue(0, NOW, HOUR);
    const last = t[75] === 'A' ? 'B' : 'A';
    c.authorize(`Bearer ${t.slice(0, 75)}${last}`, '/ext/info', NOW, 'BadSignature');
    c.authorize(`Bearer ${t.slice(0, 10)}${t[10] === 'A' ? 'B' : 'A'}${t.slice(11)}`, '/ext/info', NOW, 'BadSignature');
    c.authorize(`Bearer ${c.forge({ key: OTHER_KEY })}`, '/ext/info', NOW, 'BadSignature');
    c.authorize(`Bearer ${c.tamper(t, { expiry: NOW + 100 * HOUR })}`, '/ext/info', NOW, 'BadSignature');
    c.authorize(`Bearer ${c.tamper(t, { grant: 0, generation: 1 })}`, '/ext/info', NOW, 'BadSignature');
    c.verify(c.forge({ key: OTHER_KEY }), '/ext/info', NOW, 'BadSignature');
  });
  tokens('BadSignature: a core without a key verifies nothing and issues nothing', { key: null, grants: [['*']] }, (c) => {
    c.issueRefused(0, NOW, HOUR, -4);
    c.authorize(`Bearer ${c.forge({})}`, '/ext/info', NOW, 'BadSignature');
    c.verify(c.forge({}), '/ext/info', NOW, 'BadSignature');
    c.verify(c.forge({ version: 2 }), '/ext/info', NOW, 'Malformed');
  });
  tokens('Expired: from the expiry second on', ONE_HOUR, (c) => {
    const t = c.issue(0, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/ext/info', NOW + HOUR, 'Expired');
    c.authorize(`Bearer ${t}`, '/ext/info', NOW + 365 * 24 * HOUR, 'Expired');
    c.verify(t, '/ext/info', NOW + HOUR, 'Expired');
    c.verify(c.forge({ expiry: 2n ** 63n }), '/ext/info', NOW, 'Expired');
  });
  tokens('Revoked: revoked tokens, serials never issued', ONE_HOUR, (c) => {
    const t = c.issue(0, NOW, HOUR);
    const kept = c.issue(0, NOW, HOUR);
    c.revoke(t, NOW + 1, 'Valid');
    c.revoke(t, NOW + 2, 'Revoked');
    c.authorize(`Bearer ${t}`, '/ext/info', NOW + 3, 'Revoked');
    c.verify(t, '/ext/info', NOW + 3, 'Revoked');
    c.authorize(`Bearer ${kept}`, '/ext/info', NOW + 3, 'Valid');
    c.authorize(`Bearer ${c.forge({ serial: 2n })}`, '/ext/info', NOW, 'Revoked');
    c.authorize(`Bearer ${c.forge({ serial: 2n ** 40n })}`, '/ext/info', NOW, 'Revoked');
  });
  tokens('Revoked: a revocation changes nothing for a token that is not valid now', ONE_HOUR, (c) => {
    const t = c.issue(0, NOW, HOUR);
    c.revoke(t, NOW + HOUR, 'Expired');
    c.revoke(t.slice(1), NOW, 'Malformed');
    c.revoke(c.forge({ key: OTHER_KEY }), NOW, 'BadSignature');
    c.revoke(c.forge({ generation: 3 }), NOW, 'EarlierGeneration');
    c.authorize(`Bearer ${t}`, '/ext/info', NOW, 'Valid');
  });
  tokens('EarlierGeneration: tokens of another password generation', { key: KEY, generation: 7, grants: [['/ext/info']] }, (c) => {
    const old = c.issue(0, NOW, HOUR);
    c.bumpGeneration(8);
    const fresh = c.issue(0, NOW, HOUR);
    c.authorize(`Bearer ${old}`, '/ext/info', NOW, 'EarlierGeneration');
    c.verify(old, '/ext/info', NOW, 'EarlierGeneration');
    c.authorize(`Bearer ${fresh}`, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${c.forge({ generation: 9, serial: 1n })}`, '/ext/info', NOW, 'EarlierGeneration');
    c.authorize(`Bearer ${c.forge({ generation: 0, serial: 1n })}`, '/ext/info', NOW, 'EarlierGeneration');
  });
  tokens('NotGranted: a valid token on a path outside its grant', { key: KEY, grants: [['/ext/info'], ['/ext/bc/X/*']] }, (c) => {
    const t = c.issue(1, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/ext/info', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/bc/X', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/bc/Y/rpc', NOW, 'NotGranted');
    c.authorize(`Bearer ${t}`, '/ext/bc/X/rpc', NOW, 'Valid');
  });
  tokens('NoToken: an empty header; the path is checked first', ONE_HOUR, (c) => {
    c.authorize('', '/ext/info', NOW, 'NoToken');
    c.authorize('', '/', NOW, 'NoToken');
    c.authorize('', '/ext/../info', NOW, 'BadPath');
  });
  tokens('BadHeader: not "Bearer", one space, then the token', ONE_HOUR, (c) => {
    const t = c.issue(0, NOW, HOUR);
    const headers = [
      t,
      `Basic ${t}`,
      `Token ${t}`,
      `Bearer:${t}`,
      `Bearer\t${t}`,
      `Bearer_${t}`,
      `Bearer${t}`,
      ` Bearer ${t}`,
      'Bearer',
      'B',
      'Bearé x',
      `Basic ${'A'.repeat(600)}`,
      'x'.repeat(513),
    ];
    for (const header of headers) c.authorize(header, '/ext/info', NOW, 'BadHeader');
  });
  tokens('BadPath: paths refused before any token check', { key: KEY, grants: [['*']] }, (c) => {
    const t = c.issue(0, NOW, HOUR);
    const paths = [
      '',
      'ext/info',
      '*',
      '//',
      '/ext//info',
      '/ext/info//',
      '/.',
      '/./x',
      '/ext/.',
      '/..',
      '/ext/../info',
      '/ext/info/..',
      '/ext/%2Finfo',
      '/ext/%2finfo',
      '/ext/%2E',
      '/ext/%2e%2e/x',
      '/ext/%25',
      '/ext/%2541',
      '/ext/%',
      '/ext/%4',
      '/ext/%zz',
      '/ext/%4G',
      '/a b',
      '/a\tb',
      '/a\u0000b',
      '/a\u007fb',
      '/a\\b',
      '/a#b',
      '/caf\u00e9',
      `/${'a'.repeat(8192)}`,
    ];
    for (const path of paths) c.authorize(`Bearer ${t}`, path, NOW, 'BadPath');
    c.authorize('Basic x', '/a/./b', NOW, 'BadPath');
    c.authorize(`Bearer ${'A'.repeat(600)}`, '/a//b', NOW, 'BadPath');
    c.authorize(`Bearer ${t}`, '/ext/%2a', NOW, 'Valid');
    c.authorize(`Bearer ${t}`, '/ext/..x/.y', NOW, 'Valid');
  });
  // Paths some server behind the gate could read as another, out of a subtree: the path
  // rules (assembly/README.md, "Paths").
  tokens('BadPath: paths a server could read as another, under a subtree grant', { key: KEY, grants: [['/ext/bc/X/*']] }, (c) => {
    const t = c.issue(0, NOW, HOUR);
    const paths = [
      // Names of dots (or nothing) once ";" parameters are stripped, or trailing dots and spaces trimmed.
      '/ext/bc/X/..;/..;/admin',
      '/ext/bc/X/..;x=1/a',
      '/ext/bc/X/.;/a',
      '/ext/bc/X/;/a',
      '/ext/bc/X/a/;',
      '/ext/bc/X/...',
      '/ext/bc/X/..%20/a',
      '/ext/bc/X/..+/a',
      '/ext/bc/X/..%2B/a',
      '/ext/bc/X/%20',
      // Encoded "\", ";", "?", "#" and controls.
      '/ext/bc/X/..%5c..%5cadmin',
      '/ext/bc/X/..%5C',
      '/ext/bc/X/..%3B',
      '/ext/bc/X/..%3f',
      '/ext/bc/X/..%23',
      '/ext/bc/X/..%00/a',
      '/ext/bc/X/%0A',
      '/ext/bc/X/%1f',
      '/ext/bc/X/%7F',
      // Malformed UTF-8: overlong, surrogates, past U+10FFFF, stray or cut bytes.
      '/ext/bc/X/%c0%ae%c0%ae/admin',
      '/ext/bc/X/%C1%9C',
      '/ext/bc/X/%E0%80%AE',
      '/ext/bc/X/%E0%9F%BF',
      '/ext/bc/X/%ED%A0%80',
      '/ext/bc/X/%F0%8F%BF%BF',
      '/ext/bc/X/%F4%90%80%80',
      '/ext/bc/X/%F5%80%80%80',
      '/ext/bc/X/%FF',
      '/ext/bc/X/%80',
      '/ext/bc/X/%C3',
      '/ext/bc/X/%C3x',
      '/ext/bc/X/%E2%82',
      '/ext/bc/X/%C3%C3%A9',
      // Well-formed, but a control, a space, invisible, or folded by NFKC into "..", ".", "/" or "\".
      '/ext/bc/X/%E2%80%A5/admin',
      '/ext/bc/X/%EF%BC%8E%EF%BC%8E/admin',
      '/ext/bc/X/..%EF%BC%8Fadmin',
      '/ext/bc/X/..%EF%BC%BCadmin',
      '/ext/bc/X/.%E2%80%8B.',
      '/ext/bc/X/%C2%A0',
      '/ext/bc/X/%C2%85',
      '/ext/bc/X/%EF%BB%BF',
      '/ext/bc/X/%F3%A0%80%81',
    ];
    for (const path of paths) c.authorize(`Bearer ${t}`, path, NOW, 'BadPath');
    c.verify(t, '/ext/bc/X/..;/admin', NOW, 'BadPath');
    for (const path of [
      '/ext/bc/X/rpc',
      '/ext/bc/X/ws',
      '/ext/bc/X/caf%C3%A9',
      '/ext/bc/X/caf%c3%a9',
      '/ext/bc/X/%E6%97%A5',
      '/ext/bc/X/%F0%9F%98%80',
      '/ext/bc/X/%F4%8F%BF%BF',
      '/ext/bc/X/%C2%A9',
      '/ext/bc/X/a;v=1',
      '/ext/bc/X/a:b@c~d-e_f',
      '/ext/bc/X/..x',
      '/ext/bc/X/a%20b',
      '/ext/bc/X/a+b',
    ]) {
      c.authorize(`Bearer ${t}`, path, NOW, 'Valid');
    }
  });
  tokens('order: format, tag, generation, expiry, revocation, endpoint', ONE_HOUR, (c) => {
    const revoked = c.issue(0, NOW, HOUR);
    c.issue(0, NOW, HOUR);
    c.revoke(revoked, NOW, 'Valid');
    c.authorize(`Bearer ${revoked}`, '/ext/health', NOW, 'Revoked');
    c.authorize(`Bearer ${revoked}`, '/ext/info', NOW + HOUR, 'Expired');
    c.authorize(`Bearer ${c.forge({ key: OTHER_KEY, generation: 5, expiry: 1n })}`, '/ext/health', NOW, 'BadSignature');
    c.authorize(`Bearer ${c.forge({ generation: 5, expiry: 1n, serial: 9n })}`, '/ext/health', NOW, 'EarlierGeneration');
    c.authorize(`Bearer ${c.forge({ expiry: 1n, serial: 9n })}`, '/ext/health', NOW, 'Expired');
    c.authorize(`Bearer ${c.forge({ serial: 9n, grant: 7 })}`, '/ext/health', NOW, 'Revoked');
    c.authorize(`Bearer ${c.forge({ serial: 1n, grant: 7 })}`, '/ext/health', NOW, 'Malformed');
  });

  // The core remembers tags it checked lately; what it remembers must never outlive a
  // revocation, a new generation, the expiry or the key.
  tokens('cache: a token checked before is judged afresh after expiry, revocation, a new generation', ONE_HOUR, (c) => {
    const [first, second, third] = [c.issue(0, NOW, HOUR), c.issue(0, NOW, HOUR), c.issue(0, NOW, HOUR)];
    for (const t of [first, second, third]) c.authorizeBefore(`Bearer ${t}`, '/ext/info', NOW, 'Valid');
    c.authorizeBefore(`Bearer ${third}`, '/ext/info', NOW + HOUR, 'Expired');
    c.revoke(second, NOW, 'Valid');
    c.authorizeBefore(`Bearer ${second}`, '/ext/info', NOW, 'Revoked');
    c.bumpGeneration(1);
    const fresh = c.issue(0, NOW, HOUR);
    c.authorizeBefore(`Bearer ${fresh}`, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${first}`, '/ext/info', NOW, 'EarlierGeneration');
    c.authorize(`Bearer ${second}`, '/ext/info', NOW, 'EarlierGeneration');
    c.authorize(`Bearer ${fresh}`, '/ext/info', NOW + HOUR, 'Expired');
    c.authorize(`Bearer ${fresh}`, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${fresh}`, '/ext/health', NOW, 'NotGranted');
  });
  tokens('cache: a new key forgets every checked token', ONE_HOUR, (c) => {
    const t = c.issue(0, NOW, HOUR);
    c.authorizeBefore(`Bearer ${t}`, '/ext/info', NOW, 'Valid');
    const sameSlot = `${t.slice(0, 75)}${t[75] === 'A' ? 'B' : 'A'}`;
    c.authorizeBefore(`Bearer ${sameSlot}`, '/ext/info', NOW, 'BadSignature');
    c.authorizeBefore(`Bearer ${t}`, '/ext/info', NOW, 'Valid');
    c.setKey(OTHER_KEY);
    const next = c.issue(0, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/ext/info', NOW, 'BadSignature');
    c.authorize(`Bearer ${sameSlot}`, '/ext/info', NOW, 'BadSignature');
    c.authorize(`Bearer ${next}`, '/ext/info', NOW, 'Valid');
  });

  // Restarts: serials, revocations and the live window.
  const before = new Core(module, { windowLog2: 12 });
  before.setKey(KEY);
  before.addGrant(['/ext/info']);
  before.restoreSerials(8192, 8192, NOW + HOUR);
  const earlier = Array.from({ length: 8 }, () => before.issue(0, NOW - HOUR, 2 * HOUR).token);
  tokens('restart: restored serials keep old tokens and revocations, new serials continue', ONE_HOUR, (c) => {
    c.restoreSerials(8192, 8200, NOW + HOUR, 0);
    c.revokeSerial(8195, 0);
    c.revokeSerial(100, 1);
    c.revokeSerial(8200, -1);
    const next = c.issue(0, NOW, HOUR);
    c.authorize(`Bearer ${earlier[0]}`, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${earlier[7]}`, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${earlier[3]}`, '/ext/info', NOW, 'Revoked');
    c.authorize(`Bearer ${next}`, '/ext/info', NOW, 'Valid');
    c.authorize(`Bearer ${c.forge({ serial: 8191n })}`, '/ext/info', NOW, 'Revoked');
    c.authorize(`Bearer ${c.forge({ serial: 8201n })}`, '/ext/info', NOW, 'Revoked');
  });
  tokens('restart: a range that does not fit the window is refused', ONE_HOUR, (c) => {
    c.restoreSerials(0, 4097, NOW + HOUR, -1);
    c.restoreSerials(8192, 100, NOW + HOUR, -1);
    c.restoreSerials(4100, 5000, NOW + HOUR, 0);
    c.issue(0, NOW, HOUR);
  });
  tokens('window: a full window refuses new tokens until its first page has expired', ONE_HOUR, (c) => {
    c.restoreSerials(0, 4096, NOW + HOUR, 0);
    c.issueRefused(0, NOW, HOUR, -2);
    c.sweep(NOW + HOUR - 1);
    c.issueRefused(0, NOW + HOUR - 1, HOUR, -2);
    c.sweep(NOW + HOUR);
    c.revokeSerial(4095, 1);
    const t = c.issue(0, NOW + HOUR, HOUR);
    c.authorize(`Bearer ${t}`, '/ext/info', NOW + HOUR, 'Valid');
  });
  tokens('issue: refused for an unknown grant and a bad lifetime or time', ONE_HOUR, (c) => {
    c.issueRefused(1, NOW, HOUR, -1);
    c.issueRefused(0, NOW, 0, -3);
    c.issueRefused(0, -1, HOUR, -3);
    const longest = c.issue(0, NOW, 0xffffffff);
    c.authorize(`Bearer ${longest}`, '/ext/info', NOW + 0xfffffffe, 'Valid');
  });

  // Endpoint lists the core refuses (already canonical: sorted, no duplicates, no "*" with others).
  tokens('grants: endpoint lists the core refuses, and the entry it names', { key: KEY, grants: [] }, (c) => {
    c.addGrantRefused([], 'empty', undefined);
    c.addGrantRefused(
      Array.from({ length: 129 }, (_, i) => `/e/${String(i).padStart(3, '0')}`),
      'too-many-entries',
      undefined,
    );
    for (const [endpoints, entry] of [
      [[''], 0],
      [['ext/info'], 0],
      [['/a', '/b/../c'], 1],
      [['/a/'], 0],
      [['/a/*/b'], 0],
      [['/a*'], 0],
      [['**'], 0],
      [['//'], 0],
      [['//a'], 0],
      [['/a/.'], 0],
      [['/a', '/b', '/c%2F'], 2],
      [['/a b'], 0],
      [['/a/*/*'], 0],
      [['/ext/info/*/'], 0],
      [['/a', '/ext/bc/X/..;/*'], 1],
      [['/a/%5C'], 0],
      [['/a/%C0%AE'], 0],
      [['/a/..%00'], 0],
      [['/a/%E2%80%A5'], 0],
      [['/a/...'], 0],
    ])
      c.addGrantRefused(endpoints, 'bad-entry', entry);
    c.addGrantRefused(['/a', `/${'b'.repeat(1024)}`], 'entry-too-long', 1);
    c.addGrant(
      Array.from({ length: 128 }, (_, i) => `/e/${String(i).padStart(3, '0')}`),
      0,
    );
    c.addGrant([`/${'b'.repeat(1023)}`], 1);
    const t = c.issue(1, NOW, HOUR);
    c.authorize(`Bearer ${t}`, `/${'b'.repeat(1023)}`, NOW, 'Valid');
  });

  // Method scopes: a grant's entries are its endpoints, then "" and its method patterns.
  const RPC = '/ext/bc/C/rpc';
  tokens(
    'Scoped: a grant with methods answers Scoped and its grant id; without methods, Valid as before',
    { key: KEY, grants: [[RPC], [RPC, '', 'eth_call', 'eth_get*'], ['*', '', '*']] },
    (c) => {
      const plain = c.issue(0, NOW, HOUR);
      const scoped = c.issue(1, NOW, HOUR);
      const any = c.issue(2, NOW, HOUR);
      const revoked = c.issue(1, NOW, HOUR);
      c.revoke(revoked, NOW, 'Valid');
      c.authorize(`Bearer ${plain}`, RPC, NOW, 'Valid');
      c.verify(plain, RPC, NOW, 'Valid');
      c.authorize(`Bearer ${scoped}`, RPC, NOW, 'Scoped', 1);
      c.verify(scoped, RPC, NOW, 'Scoped', 1);
      c.authorize(`Bearer ${any}`, '/ext/info', NOW, 'Scoped', 2);
      c.authorize(`Bearer ${plain}`, RPC, NOW, 'Valid');
      // Every refusal comes first: Scoped is only ever a token valid for the path.
      c.authorize(`Bearer ${scoped}`, '/ext/info', NOW, 'NotGranted');
      c.authorize(`Bearer ${scoped}`, RPC, NOW + HOUR, 'Expired');
      c.authorize(`Bearer ${revoked}`, RPC, NOW, 'Revoked');
      c.authorize(`Bearer ${scoped}`, '/ext/bc/C/../rpc', NOW, 'BadPath');
      c.authorize(`Bearer ${c.tamper(scoped, { grant: 0 })}`, RPC, NOW, 'BadSignature');
    },
  );
  tokens(
    'methods: exact names, prefixes ending in "*", "*", and a grant without methods',
    { key: KEY, grants: [[RPC], [RPC, '', 'avax.getHeight', 'eth_*', 'net_version'], [RPC, '', '*']] },
    (c) => {
      for (const [method, exact, any] of [
        ['eth_call', 1, 1],
        ['eth_getBalance', 1, 1],
        ['eth_', 1, 1],
        ['eth', 0, 1],
        ['Eth_call', 0, 1],
        ['eth-call', 0, 1],
        ['net_version', 1, 1],
        ['net_versio', 0, 1],
        ['net_version2', 0, 1],
        ['NET_VERSION', 0, 1],
        ['avax.getHeight', 1, 1],
        ['', 0, 1],
        [' eth_call', 0, 1],
        ['\u00e9', 0, 1],
        ['eth_\u00e9', 1, 1],
        ['net_version\u0000', 0, 1],
        [`eth_${'x'.repeat(9000)}`, 1, 1],
        [`net_version${'x'.repeat(9000)}`, 0, 1],
      ]) {
        c.methodAllowed(0, method, 1);
        c.methodAllowed(1, method, exact);
        c.methodAllowed(2, method, any);
      }
      c.methodAllowed(3, 'eth_call', -1);
    },
  );
  tokens('grants: the same endpoints with other methods are another grant', { key: KEY, grants: [] }, (c) => {
    c.addGrant([RPC], 0);
    c.addGrant([RPC, '', 'eth_call'], 1);
    c.addGrant([RPC, '', 'eth_call'], 1);
    c.addGrant([RPC, '', 'eth_call', 'eth_chainId'], 2);
    c.addGrant([RPC, '', 'eth_chainId'], 3);
    c.addGrant([RPC, '', '*'], 4);
    c.addGrant(['*', '', 'eth_call'], 5);
    c.addGrant([RPC], 0);
    c.addGrant([RPC, '/ext/info', '', 'eth_call'], 6);
    c.addGrant(
      Array.from({ length: 128 }, (_, i) => `/e/${String(i).padStart(3, '0')}`).concat([
        '',
        ...Array.from({ length: 128 }, (_, i) => `m${String(i).padStart(3, '0')}`),
      ]),
      7,
    );
    c.addGrant([RPC, '', 'm'.repeat(128)], 8);
    const t = c.issue(6, NOW, HOUR);
    c.authorize(`Bearer ${t}`, '/ext/info', NOW, 'Scoped', 6);
    c.methodAllowed(6, 'eth_call', 1);
    c.methodAllowed(6, 'eth_chainId', 0);
    c.methodAllowed(5, 'eth_call', 1);
    c.methodAllowed(5, 'eth_chainId', 0);
    c.methodAllowed(4, 'eth_chainId', 1);
    c.methodAllowed(8, 'm'.repeat(128), 1);
    c.methodAllowed(8, 'm'.repeat(127), 0);
  });
  tokens('grants: method scopes the core refuses, and the pattern it names', { key: KEY, grants: [] }, (c) => {
    c.addGrantRefused([RPC, ''], 'no-methods', undefined);
    for (const [methods, entry] of [
      [['eth call'], 0],
      [['*eth'], 0],
      [['eth**'], 0],
      [['e*th'], 0],
      [['eth_*', 'net_*x'], 1],
      [['\u00e9'], 0],
      [['eth\tcall'], 0],
      [['eth_call', 'eth\u007f'], 1],
      [['a', 'b', 'c\u0000'], 2],
    ])
      c.addGrantRefused([RPC, '', ...methods], 'bad-method', entry);
    c.addGrantRefused([RPC, '', 'a', 'm'.repeat(129)], 'method-too-long', 1);
    c.addGrantRefused([RPC, '', ...Array.from({ length: 129 }, (_, i) => `m${String(i).padStart(3, '0')}`)], 'too-many-methods', undefined);
    // The endpoints are checked first, and an empty first entry is a bad endpoint, not a scope.
    c.addGrantRefused(['/a/../b', '', '\u00e9'], 'bad-entry', 0);
    c.addGrantRefused(['', 'eth_call'], 'bad-entry', 0);
    c.addGrant([RPC, '', 'eth_call'], 0);
  });

  // Limits: a grant's limit entries, the bucket (GCRA, time in ns) and the client ranges.
  const RATE = [RPC, '', '', 'rate 2/s', 'burst 3'];
  tokens(
    'limits: a rate of 2/s with a burst of 3: the burst, the refusal with its wait, the refill, a batch over the burst',
    { key: KEY, grants: [RATE] },
    (c) => {
      const t = c.issue(0, NOW, HOUR);
      const client = ipv4(192, 0, 2, 7);
      for (let i = 0; i < 3; i++) c.admit(0, LIVE, 0, 1, NOW_MS, client, 0);
      // Past the burst: the next call is due 500 ms from now.
      c.admit(0, LIVE, 0, 1, NOW_MS, client, 2, 500_000_000);
      c.admit(0, LIVE, 0, 1, NOW_MS + 499, client, 2, 1_000_000);
      c.admit(0, LIVE, 0, 1, NOW_MS + 500, client, 0);
      // A batch counts as its calls; more than the burst never passes.
      c.admit(0, LIVE, 0, 4, NOW_MS + 500, client, 3);
      c.admit(0, LIVE, 0, 2, NOW_MS + 500, client, 2, 1_000_000_000);
      // Refilled: the whole burst at once.
      c.admit(0, LIVE, 0, 3, NOW_MS + 10_000, client, 0);
      c.admit(0, LIVE, 0, 1, NOW_MS + 10_000, client, 2, 500_000_000);
      // A refusal takes nothing: the bucket is where the last call let through left it.
      c.admit(0, LIVE, 0, 1, NOW_MS + 10_500, client, 0);
      c.usage(0, 3 + 1 + 3 + 1, NOW_MS + 10_500);
      c.usage(1, undefined);
      c.authorize(`Bearer ${t}`, RPC, NOW, 'Limited', 0, 0, LIVE);
      c.authorize(`Bearer ${t}`, '/ext/info', NOW, 'NotGranted');
    },
  );
  tokens(
    'limits: rates per minute and per hour, each token its own bucket',
    {
      key: KEY,
      grants: [
        [RPC, '', '', 'rate 60/m', 'burst 1'],
        [RPC, '', '', 'rate 1/h', 'burst 1'],
      ],
    },
    (c) => {
      c.issue(0, NOW, HOUR);
      c.issue(0, NOW, HOUR);
      c.issue(1, NOW, HOUR);
      const client = ipv4(127, 0, 0, 1);
      c.admit(0, LIVE, 0, 1, NOW_MS, client, 0);
      c.admit(0, LIVE, 0, 1, NOW_MS, client, 2, 1_000_000_000);
      c.admit(1, LIVE, 0, 1, NOW_MS, client, 0);
      c.admit(2, LIVE, 1, 1, NOW_MS, client, 0);
      c.admit(2, LIVE, 1, 1, NOW_MS + 1000, client, 2, 3_599_000_000_000);
    },
  );
  tokens(
    'limits: a rate shared by 3 gateways: each lets through a third of the rate and of the burst, rounded up',
    { key: KEY, grants: [[RPC, '', '', 'rate 30/s', 'burst 7']] },
    (c) => {
      c.issue(0, NOW, HOUR);
      const client = ipv4(127, 0, 0, 1);
      c.setLimitShare(3);
      // ceil(7 / 3) = 3 at once, then one every 100 ms (30/s over 3).
      for (let i = 0; i < 3; i++) c.admit(0, LIVE, 0, 1, NOW_MS, client, 0);
      // T = 10^9 / 30 in whole ns (33,333,333), times 3.
      c.admit(0, LIVE, 0, 1, NOW_MS, client, 2, 99_999_999);
      c.admit(0, LIVE, 0, 4, NOW_MS + 10_000, client, 3);
      c.admit(0, LIVE, 0, 1, NOW_MS + 100, client, 0);
      // A member left: the whole rate again, from the next call on.
      c.setLimitShare(1);
      c.admit(0, LIVE, 0, 4, NOW_MS + 10_000, client, 0);
    },
  );
  const CLIENTS = [
    '/ext/info',
    '',
    'info.*',
    '',
    `client ${V4_MAPPED}0a000000/104`,
    `client ${V4_MAPPED}c0000207/128`,
    'client 20010db8000000000000000000000000/32',
  ];
  tokens('limits: client ranges (IPv4 as IPv4-mapped, IPv6), with a method scope and no rate', { key: KEY, grants: [CLIENTS] }, (c) => {
    const t = c.issue(0, NOW, HOUR);
    c.admit(0, LIVE, 0, 0, NOW_MS, ipv4(10, 1, 2, 3), 0);
    c.admit(0, LIVE, 0, 0, NOW_MS, ipv4(11, 0, 0, 0), 1);
    c.admit(0, LIVE, 0, 0, NOW_MS, ipv4(192, 0, 2, 7), 0);
    c.admit(0, LIVE, 0, 0, NOW_MS, ipv4(192, 0, 2, 8), 1);
    c.admit(0, LIVE, 0, 1, NOW_MS, '20010db8000000000000000000000001', 0);
    c.admit(0, LIVE, 0, 1, NOW_MS, '20010db9000000000000000000000001', 1);
    // 10.0.0.0/8 as a bare IPv6 address is not the IPv4 range.
    c.admit(0, LIVE, 0, 1, NOW_MS, '0000000000000000000000000a000001', 1);
    c.usage(0, 1, NOW_MS);
    c.authorize(`Bearer ${t}`, '/ext/info', NOW, 'Limited', 0, 0, LIVE);
    c.methodAllowed(0, 'info.getNodeID', 1);
    c.methodAllowed(0, 'eth_call', 0);
  });
  // One rule for an IPv4 client, the one --trusted-proxies follows too (client-ranges.js).
  const rangeEntries = [...new Set(CLIENT_RANGES.map(({ range }) => `client ${clientRange(range)}`))];
  tokens(
    'limits: an IPv4 client is in IPv4 ranges only (also written inside ::ffff:0:0/96), never in a wider IPv6 range such as ::/0',
    { key: KEY, grants: rangeEntries.map((entry) => [RPC, '', '', entry]) },
    (c) => {
      const bytes = (client) => toHex(addressBytes(client, new Uint8Array(16)));
      for (const { range, holds, not } of CLIENT_RANGES) {
        const grant = rangeEntries.indexOf(`client ${clientRange(range)}`);
        for (const client of holds) c.admit(0, LIVE, grant, 0, NOW_MS, bytes(client), 0);
        for (const client of not) c.admit(0, LIVE, grant, 0, NOW_MS, bytes(client), 1);
      }
    },
  );
  tokens(
    'limits: a slot is taken again once its own token has expired, while an older token lives on',
    { key: KEY, grants: [[RPC, '', '', 'rate 1/h', 'burst 1']] },
    (c) => {
      const serials = collidingSerials(66);
      const client = ipv4(127, 0, 0, 1);
      // The first lives a year, the 63 after it a minute: all 64 slots within reach are held.
      serials.slice(0, 64).forEach((serial, i) => c.admit(serial, NOW + (i === 0 ? YEAR : 60), 0, 1, NOW_MS, client, 0));
      c.admit(serials[64], LIVE, 0, 1, NOW_MS + 59_999, client, -1);
      // A minute on, the 63 have expired: the next tokens take their slots, in probe order.
      c.admit(serials[64], LIVE, 0, 1, NOW_MS + 60_000, client, 0);
      c.admit(serials[65], LIVE, 0, 1, NOW_MS + 60_000, client, 0);
      // The live one kept its slot and its bucket: its next call is due an hour after its first.
      c.admit(serials[0], NOW + YEAR, 0, 1, NOW_MS + 60_000, client, 2, 3_540_000_000_000);
      c.usage(serials[64], 1, NOW_MS + 60_000);
      c.usage(serials[1], undefined);
      c.usage(serials[2], undefined);
      c.usage(serials[3], 1, NOW_MS);
      c.usage(serials[0], 1, NOW_MS);
    },
  );
  // Quotas: calls per calendar day or month, UTC. NOW is 2023-11-14T22:13:20Z: the day
  // ends 6,400 s on, the month on 2023-12-01.
  const DAY_END = 1_700_006_400;
  const MONTH_END = 1_701_388_800;
  tokens(
    'limits: a quota of 3 calls a day: spent, the wait to UTC midnight, the next day counted from 0, a batch counts its calls',
    { key: KEY, grants: [[RPC, '', '', 'quota 3/day']] },
    (c) => {
      const t = c.issue(0, NOW, HOUR);
      const client = ipv4(192, 0, 2, 7);
      c.admit(0, LIVE, 0, 2, NOW_MS, client, 0);
      // Two more would pass the quota: refused whole, nothing taken, the wait to midnight.
      c.admit(0, LIVE, 0, 2, NOW_MS, client, 4, (DAY_END - NOW) * 1e9);
      c.admit(0, LIVE, 0, 1, NOW_MS + 1000, client, 0);
      c.admit(0, LIVE, 0, 1, NOW_MS + 1000, client, 4, (DAY_END - NOW - 1) * 1e9);
      // A gateway shares a rate with the others of a fleet, never a quota: each counts the
      // others' calls instead (setQuota), so a share changes nothing here.
      c.setLimitShare(3);
      c.admit(0, LIVE, 0, 1, DAY_END * 1000 - 1, client, 4, 1_000_000);
      c.setLimitShare(1);
      c.admit(0, LIVE, 0, 3, DAY_END * 1000, client, 0);
      c.admit(0, LIVE, 0, 1, DAY_END * 1000, client, 4, 86_400 * 1e9);
      c.usage(0, 2 + 1 + 3, DAY_END * 1000);
      c.authorize(`Bearer ${t}`, RPC, NOW, 'Limited', 0, 0, LIVE);
    },
  );
  tokens(
    "limits: a quota of 2 calls a month beside a rate: a call the rate refuses spends no quota; the months end on the calendar's days",
    { key: KEY, grants: [[RPC, '', '', 'rate 1/s', 'burst 1', 'quota 2/month']] },
    (c) => {
      const client = ipv4(192, 0, 2, 7);
      const expiry = NOW + 2 * YEAR;
      c.admit(0, expiry, 0, 1, NOW_MS, client, 0);
      c.admit(0, expiry, 0, 1, NOW_MS, client, 2, 1e9);
      c.admit(0, expiry, 0, 1, NOW_MS + 1000, client, 0);
      c.admit(0, expiry, 0, 1, NOW_MS + 2000, client, 4, (MONTH_END - NOW - 2) * 1e9);
      // December counts from 0, and ends with the year, on 2024-01-01.
      c.admit(0, expiry, 0, 1, MONTH_END * 1000, client, 0);
      c.admit(0, expiry, 0, 1, MONTH_END * 1000 + 1000, client, 0);
      c.admit(0, expiry, 0, 1, MONTH_END * 1000 + 2000, client, 4, (1_704_067_200 - MONTH_END - 2) * 1e9);
      // February of a leap year ends on the 29th: from 2024-02-29T12:00:00Z, 12 hours.
      c.admit(1, expiry, 0, 1, 1_709_208_000_000, client, 0);
      c.admit(1, expiry, 0, 1, 1_709_208_001_000, client, 0);
      c.admit(1, expiry, 0, 1, 1_709_208_002_000, client, 4, (43_200 - 2) * 1e9);
      // December's end is the year's: 2024-12-31T23:59:59Z, one second.
      c.admit(2, expiry, 0, 1, 1_735_689_598_000, client, 0);
      c.admit(2, expiry, 0, 1, 1_735_689_599_000, client, 0);
      c.admit(2, expiry, 0, 1, 1_735_689_599_999, client, 4, 1_000_000);
      c.admit(2, expiry, 0, 1, 1_735_689_600_000, client, 0);
    },
  );
  tokens(
    'usage: a token without limits counts each check that lets it through, to the second; a refused check counts nothing',
    { key: KEY, grants: [[RPC], [RPC, '', 'eth_call']] },
    (c) => {
      const plain = c.issue(0, NOW, HOUR);
      const scoped = c.issue(1, NOW, HOUR);
      c.usage(0, undefined);
      c.authorize(`Bearer ${plain}`, RPC, NOW, 'Valid');
      c.verify(plain, RPC, NOW + 5, 'Valid');
      c.authorize(`Bearer ${plain}`, '/ext/info', NOW + 9, 'NotGranted');
      c.authorize(`Bearer ${plain}`, RPC, NOW + HOUR, 'Expired');
      c.usage(0, 2, (NOW + 5) * 1000);
      c.authorize(`Bearer ${scoped}`, RPC, NOW + 7, 'Scoped', 1);
      c.usage(1, 1, (NOW + 7) * 1000);
    },
  );
  tokens('grants: limits the core refuses, and the entry it names', { key: KEY, grants: [] }, (c) => {
    // Two empty entries in a row start limits without a scope (before ABI 3, an empty pattern), so none after them is a bad limit.
    for (const [limits, entry] of [
      [[], 0],
      [['rate 0/s', 'burst 1'], 0],
      [['rate 1000001/s', 'burst 1'], 0],
      [['rate 1/d', 'burst 1'], 0],
      [['rate 01/s', 'burst 1'], 0],
      [['rate 5/s'], 1],
      [['burst 3'], 0],
      [['rate 5/s', 'burst 0'], 1],
      [['rate 5/s', 'burst 1000001'], 1],
      [['rate  5/s', 'burst 1'], 0],
      [[`client ${V4_MAPPED}0a000001/104`], 0],
      [[`client ${V4_MAPPED}0a000000/129`], 0],
      [[`client ${V4_MAPPED}0A000000/104`], 0],
      [[`client ${V4_MAPPED}c0000207/128`, `client ${V4_MAPPED}0a000000/104`], 1],
      [[`client ${V4_MAPPED}0a000000/104`, 'rate 1/s', 'burst 1'], 1],
      [[`client ${V4_MAPPED}0a000000/104`, `client ${V4_MAPPED}0a000000/104`], 1],
      [['limit 5'], 0],
      [['quota 0/day'], 0],
      [['quota 1000000001/day'], 0],
      [['quota 5/week'], 0],
      [['quota 5/Day'], 0],
      [['quota 05/day'], 0],
      [['quota 5'], 0],
      [['quota /day'], 0],
      [['quota 5/day', 'rate 1/s', 'burst 1'], 1],
      [['quota 5/day', 'quota 5/month'], 1],
      [[`client ${V4_MAPPED}0a000000/104`, 'quota 5/day'], 1],
      [['rate 1/s', 'quota 5/day'], 1],
    ])
      c.addGrantRefused([RPC, '', '', ...limits], 'bad-limit', entry);
    const many = Array.from({ length: 65 }, (_, i) => `client ${V4_MAPPED}0a0000${i.toString(16).padStart(2, '0')}/128`);
    c.addGrantRefused([RPC, '', '', ...many], 'too-many-clients', undefined);
    c.addGrant([RPC, '', '', ...many.slice(0, 64)], 0);
    c.addGrant([RPC, '', '', 'rate 1/s', 'burst 1'], 1);
    c.addGrant([RPC, '', '', 'rate 1/s', 'burst 2'], 2);
    c.addGrant([RPC, '', 'eth_call', '', 'rate 1/s', 'burst 1'], 3);
    c.addGrant([RPC], 4);
    c.addGrant([RPC, '', '', 'rate 1/s', 'burst 1'], 1);
    c.addGrant([RPC, '', '', `client ${V4_MAPPED}00000000/96`], 5);
    c.addGrant([RPC, '', '', 'client 00000000000000000000000000000000/0'], 6);
  });

  for (const name of Object.keys(Outcome).filter((k) => Number.isNaN(Number(k)))) {
    const seen = cases.some((v) => v.kind === 'tokens' && v.checks.some((check) => check.outcome === name));
    if (!seen) throw new Error(`no case shows the outcome ${name}`);
  }
  const vectors = {
    about:
      'api-auth core conformance vectors: every host of build/core.wasm must pass them all. ' +
      'Generated by test/vectors/generate.js; the format is in assembly/README.md.',
    abiVersion: ABI_VERSION,
    outcomes: Object.fromEntries(
      Object.keys(Outcome)
        .filter((k) => Number.isNaN(Number(k)))
        .map((k) => [k, Outcome[k]]),
    ),
    cases,
  };
  return { json: formatJson(vectors), text: formatText(vectors) };
}

/**
 * One `tokens` case: a fresh core with a key, a window, a generation and grants; setup
 * steps that change its state; then checks that only read it.
 */
function tokenCase(module, name, { key, windowLog2 = 12, generation = 0, grants }, build) {
  const core = new Core(module, { windowLog2 });
  if (key !== null) core.setKey(key);
  core.generation = generation;
  grants.forEach((entries, id) => {
    canonical(entries);
    if (addGrant(core, entries) !== id) throw new Error(`${name}: grant ${id} got another id`);
  });
  let signingKey = key ?? KEY;
  const setup = [];
  const checks = [];
  const step = (entry) => {
    if (checks.length > 0) throw new Error(`${name}: setup steps go before checks`);
    setup.push(entry);
  };
  const outcome = (got, expected, what) => {
    if (Outcome[got] !== expected) throw new Error(`${name}: ${what} gave ${Outcome[got]}, the case says ${expected}`);
    return { outcome: Outcome[got], code: got };
  };
  const payloadOf = (fields) => {
    const raw = new Uint8Array(25);
    const view = new DataView(raw.buffer);
    raw[0] = fields.version ?? 1;
    view.setUint32(1, fields.generation ?? generation);
    view.setBigUint64(5, fields.serial ?? 0n);
    view.setBigUint64(13, fields.expiry ?? BigInt(NOW + HOUR));
    view.setUint32(21, fields.grant ?? 0);
    return raw;
  };
  // What each check and admit found besides its answer.
  const checked = checkRecord();
  const admitted = admitRecord();
  const scoped = (got, grant, serial, expiry) => {
    const names = got.code === Outcome.Scoped || got.code === Outcome.Limited;
    if (names !== (grant !== undefined)) throw new Error(`${name}: a Scoped or Limited check, and only one, names its grant`);
    if (grant === undefined) return {};
    if (checked.grant !== grant) throw new Error(`${name}: ${got.outcome} with grant ${checked.grant}, the case says ${grant}`);
    const limited = got.code === Outcome.Limited;
    if (limited !== (serial !== undefined) || limited !== (expiry !== undefined)) {
      throw new Error(`${name}: a Limited check, and only one, names its serial and expiry`);
    }
    if (serial === undefined) return { grant };
    if (checked.serial !== serial) throw new Error(`${name}: Limited with serial ${checked.serial}, the case says ${serial}`);
    if (checked.expiry !== expiry) throw new Error(`${name}: Limited with expiry ${checked.expiry}, the case says ${expiry}`);
    return { grant, serial, expiry };
  };
  const sign = (payload, tagKey) => {
    const tag = new Core(module, { windowLog2: 12 }).hmacSha256(tagKey, payload);
    return Buffer.concat([payload, tag]).toString('base64url');
  };
  const c = {
    issue(grant, now, lifetime) {
      const { token, claims } = core.issue(grant, now, lifetime);
      const raw = Buffer.from(token, 'base64url');
      if (
        raw.length !== 57 ||
        !createHmac('sha256', signingKey).update(raw.subarray(0, 25)).digest().equals(raw.subarray(25)) ||
        raw.readBigUInt64BE(5) !== BigInt(claims.serial) ||
        raw.readBigUInt64BE(13) !== BigInt(now + lifetime)
      ) {
        throw new Error(`${name}: the core issued a token that does not match the format`);
      }
      step({ op: 'issue', grant, now, lifetime, token, claims });
      return token;
    },
    issueRefused(grant, now, lifetime, code) {
      try {
        core.issue(grant, now, lifetime);
      } catch (error) {
        if (error.name !== 'IssueError' || error.code !== ISSUE_REFUSALS[code]) throw error;
        step({ op: 'issue', grant, now, lifetime, refused: code });
        return;
      }
      throw new Error(`${name}: issue was not refused`);
    },
    revoke(token, now, expected) {
      const { outcome: got, claims } = core.revoke(token, now);
      step({ op: 'revoke', token, now, ...outcome(got, expected, 'revoke'), ...(claims ? { claims } : {}) });
    },
    bumpGeneration(expected) {
      const got = core.bumpGeneration();
      if (got !== expected) throw new Error(`${name}: bumpGeneration gave ${got}`);
      step({ op: 'bumpGeneration', generation: got });
    },
    restoreSerials(floor, next, expiryBound, expected) {
      let result = 0;
      try {
        core.restoreSerials(floor, next, expiryBound);
      } catch {
        result = -1;
      }
      if (result !== expected) throw new Error(`${name}: restoreSerials gave ${result}`);
      step({ op: 'restoreSerials', floor, next, expiryBound, result });
    },
    revokeSerial(serial, expected) {
      const result = core.revokeSerial(serial);
      if (result !== expected) throw new Error(`${name}: revokeSerial(${serial}) gave ${result}`);
      step({ op: 'revokeSerial', serial, result });
    },
    sweep(now) {
      core.sweep(now);
      step({ op: 'sweep', now });
    },
    addGrant(entries, expected) {
      canonical(entries);
      const id = addGrant(core, entries);
      if (id !== expected) throw new Error(`${name}: addGrant gave ${id}`);
      step({ op: 'addGrant', entries, id });
    },
    addGrantRefused(entries, code, entry) {
      canonical(entries);
      try {
        addGrant(core, entries);
      } catch (error) {
        if (error.name !== 'GrantError' || error.code !== code || error.entry !== entry) throw error;
        step({ op: 'addGrant', entries, refused: GRANT_REFUSALS[code], ...(entry === undefined ? {} : { entry }) });
        return;
      }
      throw new Error(`${name}: ${JSON.stringify(entries)} was accepted`);
    },
    setKey(newKey) {
      core.setKey(newKey);
      signingKey = newKey;
      step({ op: 'setKey', key: toHex(newKey) });
    },
    /**
     * `grant`: for Scoped and Limited, the grant id the core leaves in the result buffer;
     * `serial` and `expiry`, for Limited, the token's serial and expiry.
     */
    authorize(header, path, now, expected, grant, serial, expiry) {
      const got = outcome(core.authorize(header, path, now, checked), expected, `authorize ${header.slice(0, 20)} ${path.slice(0, 20)}`);
      checks.push({ call: 'authorize', header, path, now, ...got, ...scoped(got, grant, serial, expiry) });
    },
    verify(token, path, now, expected, grant, serial, expiry) {
      const got = outcome(core.verify(token, path, now, checked), expected, `verify ${token.slice(0, 20)}`);
      checks.push({ call: 'verify', token, path, now, ...got, ...scoped(got, grant, serial, expiry) });
    },
    /**
     * One admit call (it changes the bucket: a setup step) by the token of `serial` and
     * `expiry` (Unix seconds): `client` 32 hex digits, `nowMs` whole ms (the ABI's ns are
     * nowMs · 10^6), `result` its code, `wait` (ns) for ADMIT_RATE.
     */
    admit(serial, expiry, grant, n, nowMs, client, result, wait) {
      const got = core.admit(serial, expiry, grant, n, Buffer.from(client, 'hex'), nowMs, admitted);
      const call = `admit(${serial}, ${expiry}, ${grant}, ${n}, ${nowMs}, ${client})`;
      if (got !== result) throw new Error(`${name}: ${call} gave ${got}, the case says ${result}`);
      const waited = got === 2 || got === 4 ? Math.round(admitted.waitMs * 1e6) : undefined;
      if (waited !== wait) throw new Error(`${name}: ${call} waits ${waited} ns, the case says ${wait}`);
      step({ op: 'admit', serial, expiry, grant, n, nowMs, client, result, ...(wait === undefined ? {} : { wait }) });
    },
    /** How many gateways share each token's rate (a setup step). */
    setLimitShare(members) {
      core.setLimitShare(members);
      step({ op: 'setLimitShare', members });
    },
    /** What admit counted for `serial`: `requests` and the last call's time in ms, or undefined for no slot. */
    usage(serial, requests, lastMs) {
      const got = core.usage(serial);
      if (got?.requests !== requests || got?.lastUsedMs !== lastMs) {
        throw new Error(`${name}: usage(${serial}) gave ${JSON.stringify(got)}, the case says ${requests} at ${lastMs}`);
      }
      checks.push({ call: 'usage', serial, ...(requests === undefined ? { found: false } : { found: true, requests, lastMs }) });
    },
    /** `result`: 1 allowed, 0 not, -1 no such grant. */
    methodAllowed(grant, method, result) {
      let got;
      try {
        got = core.methodAllowed(grant, method) ? 1 : 0;
      } catch (error) {
        if (!(error instanceof RangeError)) throw error;
        got = -1;
      }
      if (got !== result) throw new Error(`${name}: methodAllowed(${grant}, ${JSON.stringify(method.slice(0, 20))}) gave ${got}`);
      checks.push({ call: 'methodAllowed', grant, method, result });
    },
    /** A check between setup steps: the outcome then, before a later step changes it. */
    authorizeBefore(header, path, now, expected) {
      step({ op: 'authorize', header, path, now, ...outcome(core.authorize(header, path, now), expected, 'authorize (setup)') });
    },
    /** A token with any fields, signed with the case's key (or `key`). */
    forge(fields) {
      return sign(payloadOf(fields), fields.key ?? signingKey);
    },
    /** `token` with some fields changed and its tag kept. */
    tamper(token, fields) {
      const raw = Buffer.from(token, 'base64url');
      if (fields.expiry !== undefined) raw.writeBigUInt64BE(BigInt(fields.expiry), 13);
      if (fields.generation !== undefined) raw.writeUInt32BE(fields.generation, 1);
      if (fields.grant !== undefined) raw.writeUInt32BE(fields.grant, 21);
      return raw.toString('base64url');
    },
  };
  build(c);
  return { name, kind: 'tokens', key: key === null ? null : toHex(key), windowLog2, generation, grants, setup, checks };
}

/** A grant's entries (grantEntries: endpoints, then "" and methods for a scope) through Core.addGrant. */
function addGrant(core, entries) {
  const { endpoints, methods, limits } = splitGrantEntries(entries);
  return core.addGrant(endpoints, methods, limits);
}

/** Vectors hold grants as the host hands them to the core: canonical already. */
function canonical(entries) {
  const { endpoints, methods, limits } = splitGrantEntries(entries);
  if (JSON.stringify(grantEntries(endpoints, methods, limits)) !== JSON.stringify(entries)) {
    throw new Error(`grant ${JSON.stringify(entries).slice(0, 80)} is not canonical`);
  }
}

/** JSON with one case per block and one step or check per line, so a diff shows what changed. */
function formatJson(vectors) {
  const compact = (v) => JSON.stringify(v);
  const lines = ['{'];
  for (const key of ['about', 'abiVersion', 'outcomes']) lines.push(`  ${compact(key)}: ${compact(vectors[key])},`);
  lines.push('  "cases": [');
  vectors.cases.forEach((vector, i) => {
    const members = Object.entries(vector).map(([key, value]) => {
      if ((key === 'setup' || key === 'checks') && value.length > 0) {
        return `      ${compact(key)}: [\n${value.map((item) => `        ${compact(item)}`).join(',\n')}\n      ]`;
      }
      return `      ${compact(key)}: ${compact(value)}`;
    });
    lines.push(`    {\n${members.join(',\n')}\n    }${i < vectors.cases.length - 1 ? ',' : ''}`);
  });
  lines.push('  ]', '}', '');
  return lines.join('\n');
}

/**
 * The same cases for hosts without JSON: one command per line, fields separated by one
 * space, byte strings in lowercase hex (UTF-8 for text) or "-" when empty. See
 * assembly/README.md for the commands.
 */
function formatText(vectors) {
  const hex = (text) => (text.length === 0 ? '-' : toHex(new TextEncoder().encode(text)));
  const bytes = (h) => (h.length === 0 ? '-' : h);
  const list = (entries) => hex(entries.map((e) => `${e}\n`).join(''));
  const claims = (c) => `${c.serial} ${c.expiry} ${c.generation} ${c.grant}`;
  const lines = [
    '# api-auth core conformance vectors, generated by test/vectors/generate.js from build/core.wasm; do not edit.',
    '# The commands are described in assembly/README.md ("Conformance vectors").',
    `abi ${vectors.abiVersion}`,
    `cases ${vectors.cases.length}`,
  ];
  for (const v of vectors.cases) {
    lines.push(`case ${v.name}`, `init ${v.windowLog2 ?? 12}`);
    switch (v.kind) {
      case 'sha256':
        lines.push(`sha256 ${bytes(v.message)} ${v.digest}`);
        break;
      case 'hmacSha256':
        lines.push(`hmac ${bytes(v.key)} ${bytes(v.message)} ${v.tag}`);
        break;
      case 'password':
        lines.push(`password ${v.length} ${v.password} ${v.entropy.join(' ')}`);
        break;
      case 'tokens':
        if (v.key !== null) lines.push(`key ${v.key}`);
        lines.push(`generation ${v.generation}`);
        v.grants.forEach((entries, id) => lines.push(`grant ${list(entries)} ${id}`));
        for (const s of v.setup) {
          switch (s.op) {
            case 'addGrant':
              lines.push(
                s.refused === undefined
                  ? `grant ${list(s.entries)} ${s.id}`
                  : `grant-refused ${list(s.entries)} ${s.refused} ${s.entry ?? '-'}`,
              );
              break;
            case 'issue':
              lines.push(
                s.refused === undefined
                  ? `issue ${s.grant} ${s.now} ${s.lifetime} ${s.token} ${claims(s.claims)}`
                  : `issue-refused ${s.grant} ${s.now} ${s.lifetime} ${s.refused}`,
              );
              break;
            case 'revoke':
              lines.push(`revoke ${hex(s.token)} ${s.now} ${s.code}${s.claims ? ` ${claims(s.claims)}` : ''}`);
              break;
            case 'bumpGeneration':
              lines.push(`bump ${s.generation}`);
              break;
            case 'restoreSerials':
              lines.push(`restore ${s.floor} ${s.next} ${s.expiryBound} ${s.result}`);
              break;
            case 'revokeSerial':
              lines.push(`revoke-serial ${s.serial} ${s.result}`);
              break;
            case 'sweep':
              lines.push(`sweep ${s.now}`);
              break;
            case 'setKey':
              lines.push(`key ${s.key}`);
              break;
            case 'authorize':
              lines.push(`authorize ${hex(s.header)} ${hex(s.path)} ${s.now} ${s.code}`);
              break;
            case 'setLimitShare':
              lines.push(`share ${s.members}`);
              break;
            case 'admit':
              lines.push(`admit ${s.serial} ${s.expiry} ${s.grant} ${s.n} ${s.nowMs}000000 ${s.client} ${s.result} ${s.wait ?? 0}`);
              break;
            default:
              throw new Error(`unknown step ${s.op}`);
          }
        }
        for (const k of v.checks) {
          const grant = `${k.grant === undefined ? '' : ` ${k.grant}`}${k.serial === undefined ? '' : ` ${k.serial} ${k.expiry}`}`;
          if (k.call === 'authorize') lines.push(`authorize ${hex(k.header)} ${hex(k.path)} ${k.now} ${k.code}${grant}`);
          else if (k.call === 'verify') lines.push(`verify ${hex(k.token)} ${hex(k.path)} ${k.now} ${k.code}${grant}`);
          else if (k.call === 'usage')
            lines.push(k.found ? `usage ${k.serial} 1 ${k.requests} ${k.lastMs}000000` : `usage ${k.serial} 0 0 0`);
          else lines.push(`method ${k.grant} ${hex(k.method)} ${k.result}`);
        }
        break;
      default:
        throw new Error(`unknown kind ${v.kind}`);
    }
    lines.push('end');
  }
  return `${lines.join('\n')}\n`;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { json, text } = generateVectors();
  writeFileSync(new URL('core-vectors.json', import.meta.url), json);
  writeFileSync(new URL('core-vectors.txt', import.meta.url), text);
  console.log(`wrote ${JSON.parse(json).cases.length} cases to test/vectors/core-vectors.json and core-vectors.txt`);
}
