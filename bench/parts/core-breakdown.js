// Where the time of one `Core.authorize` goes, and what the alternatives to the host's
// copy loop would cost. Runs on the same Core instance as the gate; reads the Core's
// (TypeScript-private, plain JS) fields to reach the Wasm exports and buffers, so it never
// needs host/core/core.ts changed. Everything here is measurement: nothing is used by the host.
import { pathToFileURL } from 'node:url';
import { do_not_optimize, measure } from 'mitata';
import { fixture, loadCore } from './core-verify.js';
import { log, ns, table, wireCopies, wireString } from '../lib/common.js';

const PATH = '/ext/health';
const COPIES = 1024;

async function time(name, fn, opts) {
  fn();
  const stats = await measure(fn, { min_cpu_time: opts.cpuTimeNs });
  log(`  ${name.padEnd(60)} ${ns(stats.avg).padStart(10)}`);
  return { name, avgNs: stats.avg, p99Ns: stats.p99 };
}

export async function runCoreBreakdown(opts = {}) {
  const options = { cpuTimeNs: (opts.cpuTimeMs ?? 300) * 1e6 };
  const { newCore, Outcome } = await loadCore();
  const f = fixture(newCore, Outcome);
  const { core, now } = f;
  const x = core.x;
  if (!x || typeof x.authorize !== 'function' || typeof core.tokenPtr !== 'number') {
    log('  breakdown skipped: Core internals not reachable');
    return null;
  }
  log('part core: where the time of Core.authorize goes');
  const memory = x.memory;
  const tokenPtr = core.tokenPtr;
  const pathPtr = core.pathPtr;
  const ioPtr = core.ioPtr;
  const header = `Bearer ${f.valid}`;
  const headers = wireCopies(header, COPIES);
  const paths = wireCopies(PATH, COPIES);
  const mask = COPIES - 1;
  let i = 0;
  const nowBig = BigInt(now);
  const rows = [];

  rows.push(
    await time(
      'whole: Core.authorize, valid, repeated (tag cache hit)',
      () => {
        i = (i + 1) & mask;
        return core.authorize(headers[i], paths[i], now);
      },
      options,
    ),
  );
  const manyHeaders = f.many.map((t) => wireString(`Bearer ${t}`));
  let j = 0;
  rows.push(
    await time(
      `whole: Core.authorize, valid, ${manyHeaders.length} tokens in turn (tag computed)`,
      () => {
        j = (j + 1) & (manyHeaders.length - 1);
        return core.authorize(manyHeaders[j], paths[j & mask], now);
      },
      options,
    ),
  );

  // Bytes already in place: the Wasm call alone (path rules, Bearer, base64url decode,
  // tag check, generation, expiry, revocation, endpoint match).
  const u8w = () => new Uint8Array(memory.buffer);
  const place = (h) => {
    u8w().set(Buffer.from(h, 'latin1'), tokenPtr);
    u8w().set(Buffer.from(PATH, 'latin1'), pathPtr);
  };
  place(header);
  if (x.authorize(header.length, PATH.length, nowBig) !== Outcome.Valid) throw new Error('wasm-only call not valid');
  rows.push(
    await time('wasm only: x.authorize, valid, repeated (tag cache hit)', () => x.authorize(header.length, PATH.length, nowBig), options),
  );
  // A forged tag is never cached: the HMAC runs on every call, as for a token not seen yet.
  const forgedHeader = `Bearer ${f.forged}`;
  place(forgedHeader);
  if (x.authorize(forgedHeader.length, PATH.length, nowBig) !== Outcome.BadSignature) throw new Error('forged token not refused');
  rows.push(
    await time(
      'wasm only: x.authorize, forged tag (HMAC every call)',
      () => x.authorize(forgedHeader.length, PATH.length, nowBig),
      options,
    ),
  );
  place(header);

  // The host's copy today (encodeInto through its fit(), with the view checks of tokens()
  // and paths()), when the build has it.
  if (typeof core.fit === 'function' && typeof core.tokens === 'function' && typeof core.paths === 'function') {
    rows.push(
      await time(
        'copy: host fit(header, tokens()) + fit(path, paths())',
        () => {
          i = (i + 1) & mask;
          return core.fit(headers[i], core.tokens()) + core.fit(paths[i], core.paths());
        },
        options,
      ),
    );
  }

  // SHA-256 compression cost, from the exported hash: 55 bytes = 1 block, 119 = 2 blocks.
  const bytes = () => new Uint8Array(memory.buffer);
  bytes().fill(0x61, ioPtr, ioPtr + 200);
  const one = await time('wasm sha256 of 55 bytes (1 compression)', () => x.sha256(55), options);
  const two = await time('wasm sha256 of 119 bytes (2 compressions)', () => x.sha256(119), options);
  const five = await time('wasm sha256 of 311 bytes (5 compressions)', () => x.sha256(311), options);
  rows.push(one, two, five);
  const perCompression = (five.avgNs - one.avgNs) / 4;
  rows.push({ name: 'derived: one SHA-256 compression in Wasm', avgNs: perCompression });
  const emptyCall = await time('wasm call overhead: x.generation()', () => x.generation(), options);
  rows.push(emptyCall);

  // The host's first copy: a charCodeAt loop (copyAscii), on header + path.
  let u8 = new Uint8Array(memory.buffer);
  const copyLoop = (text, ptr) => {
    const n = text.length;
    for (let k = 0; k < n; k++) {
      const c = text.charCodeAt(k);
      if (c > 0x7f) return -1;
      u8[ptr + k] = c;
    }
    return n;
  };
  rows.push(
    await time(
      "copy: charCodeAt loop (the host's first copyAscii), header + path",
      () => {
        i = (i + 1) & mask;
        return copyLoop(headers[i], tokenPtr) + copyLoop(paths[i], pathPtr);
      },
      options,
    ),
  );

  // The wrapper's view check: `view.buffer !== this.x.memory.buffer` before each copy (twice
  // per authorize). The WebAssembly.Memory#buffer getter is a runtime call; a detached
  // view (memory grew) reads byteLength 0, which V8 checks inline.
  rows.push(
    await time(
      'view check: 2x (view.buffer !== memory.buffer), as tokens()/paths() do',
      () => {
        let k = 0;
        if (u8.buffer !== memory.buffer) k++;
        if (u8.buffer !== memory.buffer) k++;
        return k;
      },
      options,
    ),
  );
  rows.push(
    await time(
      'view check: 2x (view.byteLength === 0), the detached test',
      () => {
        let k = 0;
        if (u8.byteLength === 0) k++;
        if (u8.byteLength === 0) k++;
        return k;
      },
      options,
    ),
  );

  // Alternative 1: Buffer#latin1Write straight into Wasm memory. latin1 keeps one byte
  // per char, so a non-ASCII check is still needed: here a regex test on the string.
  let buf = Buffer.from(memory.buffer);
  const nonAscii = /[^\x00-\x7f]/;
  rows.push(
    await time(
      'alt copy: Buffer.latin1Write + /[^\\x00-\\x7f]/ test',
      () => {
        i = (i + 1) & mask;
        const h = headers[i];
        const p = paths[i];
        if (nonAscii.test(h) || nonAscii.test(p)) return -1;
        return buf.latin1Write(h, tokenPtr, h.length) + buf.latin1Write(p, pathPtr, p.length);
      },
      options,
    ),
  );
  rows.push(
    await time(
      'alt copy: Buffer.latin1Write, no ASCII check',
      () => {
        i = (i + 1) & mask;
        return buf.latin1Write(headers[i], tokenPtr, headers[i].length) + buf.latin1Write(paths[i], pathPtr, paths[i].length);
      },
      options,
    ),
  );

  // Alternative 2: TextEncoder.encodeInto. UTF-8, so a non-ASCII string shows up as
  // written !== read or read < length: the check comes free.
  const enc = new TextEncoder();
  let tokView = new Uint8Array(memory.buffer, tokenPtr, 512);
  let pathView = new Uint8Array(memory.buffer, pathPtr, 8192);
  rows.push(
    await time(
      'alt copy: TextEncoder.encodeInto (prebuilt subarray views)',
      () => {
        i = (i + 1) & mask;
        const a = enc.encodeInto(headers[i], tokView);
        const b = enc.encodeInto(paths[i], pathView);
        return a.written === headers[i].length && b.written === paths[i].length ? a.written + b.written : -1;
      },
      options,
    ),
  );

  // Alternative 3: Buffer#write(ascii) (Node's own fast path) + length check.
  rows.push(
    await time(
      "alt copy: Buffer.write(str, off, 'ascii')",
      () => {
        i = (i + 1) & mask;
        return buf.write(headers[i], tokenPtr, 'ascii') + buf.write(paths[i], pathPtr, 'ascii');
      },
      options,
    ),
  );

  // Whole gate with the best copy in place of the loop (same Wasm call).
  const altAuthorize = (h, p) => {
    if (p.length > 8192 || h.length > 512) return -1;
    // read === length: nothing left over; written === length: every char was one byte.
    const b = enc.encodeInto(p, pathView);
    if (b.read !== p.length || b.written !== p.length) return Outcome.BadPath;
    const a = enc.encodeInto(h, tokView);
    if (a.read !== h.length || a.written !== h.length) return -1;
    return x.authorize(a.written, b.written, nowBig);
  };
  rows.push(
    await time(
      'alt whole: encodeInto (read & written checked) + x.authorize',
      () => {
        i = (i + 1) & mask;
        return altAuthorize(headers[i], paths[i]);
      },
      options,
    ),
  );
  const altLatin = (h, p) => {
    if (p.length > 8192 || h.length > 512 || nonAscii.test(p) || nonAscii.test(h)) return -1;
    return x.authorize(buf.latin1Write(h, tokenPtr, h.length), buf.latin1Write(p, pathPtr, p.length), nowBig);
  };
  rows.push(
    await time(
      'alt whole: latin1Write + regex ASCII check + x.authorize',
      () => {
        i = (i + 1) & mask;
        return altLatin(headers[i], paths[i]);
      },
      options,
    ),
  );

  // BigInt: the wrapper caches BigInt(now) per second; the cost it avoids.
  rows.push(
    await time(
      'BigInt(now) per call (what the per-second cache saves)',
      () => {
        i = (i + 1) & mask;
        return BigInt(now + (i & 1));
      },
      options,
    ),
  );

  // A verified-token cache in front of the core: Map<header, {expiry, path}>. The key
  // must be a fresh string per call (uWS makes one per request, and V8 caches a string's
  // hash in the string), so the string is made here each time and that cost is shown
  // on its own line to subtract.
  const headerBytes = Buffer.from(header, 'latin1');
  const cache = new Map();
  cache.set(header, { expiry: now + 3600, path: PATH });
  const make = await time(
    'fresh header string per call (Buffer#latin1Slice), to subtract',
    () => headerBytes.latin1Slice(0, headerBytes.length),
    options,
  );
  rows.push(make);
  const hit = await time(
    'fresh header string + verified-token Map hit + expiry + path ===',
    () => {
      i = (i + 1) & mask;
      const e = cache.get(headerBytes.latin1Slice(0, headerBytes.length));
      return e !== undefined && e.expiry > now && e.path === paths[i];
    },
    options,
  );
  rows.push(hit);
  rows.push({ name: 'derived: verified-token Map cache hit on a fresh string', avgNs: hit.avgNs - make.avgNs });

  do_not_optimize(u8);
  u8 = null;
  buf = null;
  tokView = null;
  pathView = null;
  return { rows, perCompressionNs: perCompression };
}

export function coreBreakdownMarkdown(result) {
  if (!result) return '';
  return [
    '### Where the time of `Core.authorize` goes (header 83 chars, path 11 chars), and measured alternatives',
    '',
    table(
      ['stage / alternative', 'avg'],
      result.rows.map((r) => [r.name, ns(r.avgNs)]),
    ),
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runCoreBreakdown();
  process.stdout.write(`${coreBreakdownMarkdown(result)}\n`);
}
