// Part 1: per-call cost of the token check, in one process, side by side.
//
// Ours: `Core.authorize(header, path, now)` from build/host/core/core.js, the gate's own call,
// fed fresh non-internalized strings the way uWebSockets.js hands over `getHeader()` and
// `getUrl()` results. Theirs, on an equivalent HS256 token for the same path: fast-jwt
// without and with its cache, jose, and a bare node:crypto HMAC-SHA256 of the same bytes
// the core signs (the floor for anything that hashes in JavaScript).
//
// Every case is of one kind, and comparisons stay within a kind: "cached" (a token seen
// before, whose check a cache shortens: the core's tag cache, fast-jwt's verified-token
// cache), "uncached" (the HMAC computed: tokens never seen, or more of them in turn than
// any cache holds, or no cache at all), "refusal", and "floor" (node:crypto alone).
//
// Timing uses mitata's `measure` (batched, warmed up, per-iteration ns).
import { createHmac, randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { do_not_optimize, measure } from 'mitata';
import { createSigner, createVerifier } from 'fast-jwt';
import { SignJWT, jwtVerify } from 'jose';
import { log, ns, pass, ratio, table, wireCopies, wireString } from '../lib/common.js';
import { loadCore } from '../lib/core.js';

const PATH = '/ext/health';
const OTHER_PATH = '/ext/info';
const LIFETIME = 12 * 3600;
const POOL = 4096; // distinct tokens for "first seen": beyond fast-jwt's default cache (1000)
const COPIES = 1024; // string copies of one token for "repeated"

export { loadCore };

/** A core with one grant for PATH and tokens in every state the gate can meet. */
export function fixture(newCore, Outcome) {
  const core = newCore();
  core.setKey();
  const now = Math.floor(Date.now() / 1000);
  const grant = core.addGrant([PATH]);
  // Issued under generation 0, then the password "changes".
  const earlier = core.issue(grant, now, LIFETIME).token;
  core.bumpGeneration();
  const expired = core.issue(grant, now - 100, 10).token;
  const revoked = core.issue(grant, now, LIFETIME).token;
  if (core.revoke(revoked, now).outcome !== Outcome.Valid) throw new Error('revoke failed');
  const valid = core.issue(grant, now, LIFETIME).token;
  const many = Array.from({ length: POOL }, () => core.issue(grant, now, LIFETIME).token);
  // Change one character inside the tag (characters 34.. encode bytes 25..57).
  const forgedChars = valid.split('');
  forgedChars[50] = forgedChars[50] === 'A' ? 'B' : 'A';
  const forged = forgedChars.join('');
  return { core, now, grant, valid, many, earlier, expired, revoked, forged };
}

/** The cases of the gate, each an (header, path, expected outcome). */
function gateCases(f, Outcome) {
  return [
    ['valid, repeated token', `Bearer ${f.valid}`, PATH, Outcome.Valid],
    ['refused: malformed', `Bearer ${f.valid.slice(0, 75)}=`, PATH, Outcome.Malformed],
    ['refused: bad signature', `Bearer ${f.forged}`, PATH, Outcome.BadSignature],
    ['refused: expired', `Bearer ${f.expired}`, PATH, Outcome.Expired],
    ['refused: revoked', `Bearer ${f.revoked}`, PATH, Outcome.Revoked],
    ['refused: earlier generation', `Bearer ${f.earlier}`, PATH, Outcome.EarlierGeneration],
    ['refused: not granted', `Bearer ${f.valid}`, OTHER_PATH, Outcome.NotGranted],
    ['refused: no token', '', PATH, Outcome.NoToken],
    ['refused: bad header', `Basic ${f.valid}`, PATH, Outcome.BadHeader],
    ['refused: bad path', `Bearer ${f.valid}`, '/ext/../health', Outcome.BadPath],
  ];
}

/**
 * Cases are registered in order, then timed in `rounds` interleaved rounds (each case
 * `cpuTimeNs` per round) and the median per case kept, so a burst of noise on the machine
 * falls on every case alike instead of skewing one.
 */
function suite(opts) {
  const cases = [];
  return {
    add(name, kind, fn, isAsync = false) {
      cases.push({ name, kind, fn, isAsync, samples: [] });
    },
    /** A row measured some other way, kept in its place. */
    fixed(row) {
      cases.push({ name: row.name, row });
    },
    async run() {
      for (const c of cases) if (!c.row) await c.fn(); // a broken case fails before any timing
      for (let round = 0; round < opts.rounds; round++) {
        for (const c of cases) {
          if (c.row) continue;
          const stats = await measure(c.fn, { min_cpu_time: opts.cpuTimeNs });
          c.samples.push(stats);
        }
      }
      return cases.map((c) => {
        if (c.row) return c.row;
        const by = (k) => [...c.samples.map((x) => x[k])].sort((a, b) => a - b)[c.samples.length >> 1];
        const row = { name: c.name, kind: c.kind, avgNs: by('avg'), p50Ns: by('p50'), p99Ns: by('p99'), minNs: by('min') };
        log(`  ${c.name.padEnd(60)} ${ns(row.avgNs).padStart(10)}  p99 ${ns(row.p99Ns)}`);
        return row;
      });
    },
  };
}

export async function runCoreVerify(opts = {}) {
  const options = { cpuTimeNs: (opts.cpuTimeMs ?? 200) * 1e6, rounds: opts.rounds ?? 3 };
  const cases = suite(options);
  const { newCore, Outcome } = await loadCore();
  const f = fixture(newCore, Outcome);
  const { core, now } = f;
  log('part core: verification per call');

  // --- ours, through the host's wrapper -------------------------------------------------
  const paths = wireCopies(PATH, COPIES);
  const validHeaders = wireCopies(`Bearer ${f.valid}`, COPIES);
  const mask = COPIES - 1;
  let i = 0;
  // What a Scoped or Limited check found: from ABI 6 on, in a record the caller owns (the
  // gate's way); builds before it left it behind getters, and ignore the record.
  const checked = { grant: -1, serial: 0, expiry: 0, scoped: false };
  const recorded = !('scopedGrant' in core);
  const grantOf = recorded ? () => checked.grant : () => core.scopedGrant;
  const serialOf = recorded ? () => checked.serial : () => core.limitedSerial;
  const expiryOf = recorded ? () => checked.expiry : () => core.limitedExpiry;
  const check = (h, p, expected, label) => {
    const got = core.authorize(h, p, now, checked);
    if (got !== expected) throw new Error(`${label}: expected outcome ${expected}, got ${got}`);
  };
  check(validHeaders[0], paths[0], Outcome.Valid, 'valid');

  cases.add('ours: Core.authorize, valid, repeated token', 'cached', () => {
    i = (i + 1) & mask;
    return core.authorize(validHeaders[i], paths[i], now);
  });

  const freshHeaders = f.many.map((t) => wireString(`Bearer ${t}`));
  const freshPaths = wireCopies(PATH, POOL);
  for (let k = 0; k < POOL; k++) check(freshHeaders[k], freshPaths[k], Outcome.Valid, 'first seen');
  let j = 0;
  cases.add(`ours: Core.authorize, valid, ${POOL} distinct tokens in turn`, 'uncached', () => {
    j = (j + 1) & (POOL - 1);
    return core.authorize(freshHeaders[j], freshPaths[j], now);
  });

  // Never seen at all: one pass over tokens issued for it and never checked before, timed
  // as a whole (no benchmark loop can repeat a first sight). Median of a few passes.
  const passes = [];
  for (let pass = 0; pass < 5; pass++) {
    const n = opts.neverSeen ?? 50_000;
    const hs = Array.from({ length: n }, () => wireString(`Bearer ${core.issue(f.grant, now, LIFETIME).token}`));
    const ps = wireCopies(PATH, 1024);
    let bad = 0;
    const t0 = process.hrtime.bigint();
    for (let k = 0; k < n; k++) if (core.authorize(hs[k], ps[k & 1023], now) !== Outcome.Valid) bad++;
    const per = Number(process.hrtime.bigint() - t0) / n;
    if (bad) throw new Error(`${bad} never-seen tokens did not verify`);
    passes.push(per);
  }
  passes.sort((a, b) => a - b);
  const neverSeen = {
    name: `ours: Core.authorize, valid, never seen before (one pass over ${opts.neverSeen ?? 50_000} new tokens)`,
    kind: 'uncached',
    avgNs: passes[2],
    p50Ns: passes[2],
    p99Ns: null,
    minNs: passes[0],
  };
  log(`  ${neverSeen.name.padEnd(52)} ${ns(neverSeen.avgNs).padStart(10)}`);
  cases.fixed(neverSeen);

  cases.add('ours: Core.authorize, valid, repeated token, clock read per call', 'cached', () => {
    i = (i + 1) & mask;
    return core.authorize(validHeaders[i], paths[i], Math.floor(Date.now() / 1000));
  });

  // A token limited to some JSON-RPC methods: the check answers Scoped, then the method
  // (as the gate takes it from the body) goes through the grant's patterns. Builds before
  // method scopes have no such case.
  if (typeof core.methodAllowed === 'function') {
    const scoped = core.issue(core.addGrant([PATH], ['eth_call', 'eth_get*', 'net_version']), now, LIFETIME).token;
    const scopedHeaders = wireCopies(`Bearer ${scoped}`, COPIES);
    const methods = wireCopies('eth_getBalance', COPIES);
    check(scopedHeaders[0], paths[0], Outcome.Scoped, 'scoped');
    cases.add('ours: Core.authorize + methodAllowed, scoped token, repeated', 'cached', () => {
      i = (i + 1) & mask;
      return core.authorize(scopedHeaders[i], paths[i], now, checked) === Outcome.Scoped && core.methodAllowed(grantOf(), methods[i]);
    });
  }

  // A token with limits: the check answers Limited, then the gate's admit (the
  // client's ranges and the GCRA bucket in shared memory). Its rate is past what any loop
  // reaches, so every call is let through and the bucket's compare-and-swap always runs;
  // a second token, past its rate, times a refusal. Builds before limits have no such case;
  // those before ABI 4 take no expiry.
  if (typeof core.admit === 'function') {
    const client = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]);
    const admit =
      core.admit.length >= 6
        ? (ms) => core.admit(serialOf(), expiryOf(), grantOf(), 1, client, ms)
        : (ms) => core.admit(serialOf(), grantOf(), 1, client, ms);
    const limitedGrant = core.addGrant([PATH], undefined, [
      'rate 1000000/s',
      'burst 1000000',
      `client 00000000000000000000ffff7f000000/104`,
    ]);
    const limited = core.issue(limitedGrant, now, LIFETIME).token;
    const limitedHeaders = wireCopies(`Bearer ${limited}`, COPIES);
    check(limitedHeaders[0], paths[0], Outcome.Limited, 'limited');
    // The bucket's clock moves with the calls, 1 µs each, so that the rate never refuses.
    let clockMs = now * 1000;
    let calls = 0;
    cases.add('ours: Core.authorize + admit, token with a rate and client ranges, repeated', 'cached', () => {
      i = (i + 1) & mask;
      if ((++calls & 1023) === 0) clockMs++;
      return core.authorize(limitedHeaders[i], paths[i], now, checked) === Outcome.Limited && admit(clockMs) === 0;
    });
    const spent = core.issue(core.addGrant([PATH], undefined, ['rate 1/h', 'burst 1']), now, LIFETIME).token;
    const spentHeaders = wireCopies(`Bearer ${spent}`, COPIES);
    check(spentHeaders[0], paths[0], Outcome.Limited, 'spent');
    admit(now * 1000);
    cases.add('ours: Core.authorize + admit, refused: past the rate', 'refusal', () => {
      i = (i + 1) & mask;
      return core.authorize(spentHeaders[i], paths[i], now, checked) === Outcome.Limited && admit(now * 1000) === 2;
    });
  }

  for (const [label, header, path, expected] of gateCases(f, Outcome).slice(1)) {
    const hs = wireCopies(header, COPIES);
    const ps = wireCopies(path, COPIES);
    check(hs[0], ps[0], expected, label);
    cases.add(`ours: Core.authorize, ${label}`, 'refusal', () => {
      i = (i + 1) & mask;
      return core.authorize(hs[i], ps[i], now);
    });
  }

  // --- an equivalent JWT ----------------------------------------------------------------
  // Same facts as our token: generation, serial, expiry and the granted endpoints (the
  // JWT carries the list itself, as the original node's tokens did), a 32-byte key.
  const key = randomBytes(32);
  const claims = { endpoints: [PATH], gen: 1, jti: '3', exp: now + LIFETIME };
  const signJwt = createSigner({ key, algorithm: 'HS256' });
  const jwt = signJwt(claims);
  const jwts = Array.from({ length: POOL }, (_, k) => signJwt({ ...claims, jti: String(10 + k) }));
  const jwtCopies = wireCopies(jwt, COPIES);
  const jwtFresh = jwts.map(wireString);

  const verifyNoCache = createVerifier({ key, algorithms: ['HS256'] });
  const verifyCache = createVerifier({ key, algorithms: ['HS256'], cache: true });
  if (verifyNoCache(jwt).gen !== 1) throw new Error('fast-jwt verify failed');

  cases.add('fast-jwt: verify, no cache', 'uncached', () => {
    i = (i + 1) & mask;
    return verifyNoCache(jwtCopies[i]);
  });

  // The gate's full job with fast-jwt: scheme, verify, granted path.
  const jwtHeaders = wireCopies(`Bearer ${jwt}`, COPIES);
  const fastJwtGate = (header, path) => {
    if (!header.startsWith('Bearer ')) return false;
    const payload = verifyNoCache(header.slice(7));
    return payload.gen === 1 && payload.endpoints.includes(path);
  };
  cases.add('fast-jwt: Bearer + verify + path check, no cache', 'uncached', () => {
    i = (i + 1) & mask;
    return fastJwtGate(jwtHeaders[i], paths[i]);
  });

  cases.add('fast-jwt: verify, cache, repeated token', 'cached', () => {
    i = (i + 1) & mask;
    return verifyCache(jwtCopies[i]);
  });

  cases.add(`fast-jwt: verify, cache, ${POOL} distinct tokens in turn`, 'uncached', () => {
    j = (j + 1) & (POOL - 1);
    return verifyCache(jwtFresh[j]);
  });

  const joseKey = new Uint8Array(key);
  const joseJwt = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(joseKey);
  const joseCopies = wireCopies(joseJwt, COPIES);
  cases.add(
    'jose: jwtVerify (async, WebCrypto)',
    'uncached',
    async () => {
      i = (i + 1) & mask;
      return jwtVerify(joseCopies[i], joseKey, { algorithms: ['HS256'] });
    },
    true,
  );

  // --- the floor: node:crypto HMAC of the same bytes ---------------------------------------
  // What the core signs is the token's 25-byte payload (decoded from the token text).
  const payload25 = Buffer.from(f.valid, 'base64url').subarray(0, 25);
  cases.add('node:crypto: createHmac(sha256) of the 25 signed bytes', 'floor', () => {
    const tag = createHmac('sha256', key).update(payload25).digest();
    do_not_optimize(tag);
    return tag;
  });
  // What the core receives is text; decoding it is part of any JS verifier's floor.
  cases.add('node:crypto: base64url decode + HMAC + timingSafe-free compare', 'floor', () => {
    i = (i + 1) & mask;
    const raw = Buffer.from(validHeaders[i].slice(7), 'base64url');
    const tag = createHmac('sha256', key).update(raw.subarray(0, 25)).digest();
    return tag[0] === raw[25];
  });
  const signingInput = jwt.slice(0, jwt.lastIndexOf('.'));
  cases.add('node:crypto: createHmac(sha256) of the JWT signing input', 'floor', () => {
    const tag = createHmac('sha256', key).update(signingInput).digest();
    do_not_optimize(tag);
    return tag;
  });

  const rows = await cases.run();
  const by = (prefix) => rows.find((r) => r.name.startsWith(prefix));
  const ours = by('ours: Core.authorize, valid, repeated token');
  const oursFresh = by(`ours: Core.authorize, valid, ${POOL} distinct`);
  const oursNever = by('ours: Core.authorize, valid, never seen');
  // Our uncached figure is the slower of the two ways to miss the tag cache.
  const oursUncached = oursFresh.avgNs >= oursNever.avgNs ? oursFresh : oursNever;
  const pairs = [
    { id: 'cached', label: 'cached: a repeated token', ours, peer: by('fast-jwt: verify, cache, repeated'), target: 3 },
    {
      id: 'uncached',
      label: 'uncached: our slower uncached case against fast-jwt without a cache',
      ours: oursUncached,
      peer: by('fast-jwt: verify, no cache'),
      target: 3,
    },
    {
      id: 'uncachedInTurn',
      label: `uncached: ${POOL} distinct tokens in turn, both caches missed`,
      ours: oursFresh,
      peer: by(`fast-jwt: verify, cache, ${POOL} distinct`),
    },
    {
      id: 'floor',
      label: 'uncached against the floor: node:crypto HMAC-SHA256 of the same 25 bytes',
      ours: oursUncached,
      peer: by('node:crypto: createHmac(sha256) of the 25'),
      target: 1,
      strictly: true,
    },
  ].map((p) => ({ ...p, ratio: p.peer.avgNs / p.ours.avgNs }));
  const targets = {};
  for (const p of pairs.filter((x) => x.target)) {
    const needed = p.strictly ? `> ${p.target}x` : `>= ${p.target}x`;
    const ok = p.strictly ? p.ratio > p.target : p.ratio >= p.target;
    targets[`core, ${p.label}: ours ${needed} faster`] = { value: p.ratio, ok, measured: ratio(p.ratio), needed };
  }
  return { rows, pairs, targets, token: { ours: f.valid.length, jwt: jwt.length } };
}

export function coreVerifyMarkdown(result) {
  return [
    '## Core verification (per call, one process; strings made the way uWebSockets.js hands them over)',
    '',
    table(
      ['comparison', 'ours', 'peer', 'peer / ours'],
      result.pairs.map((p) => [
        p.label,
        `${ns(p.ours.avgNs)} (${p.ours.name.replace('ours: ', '')})`,
        `${ns(p.peer.avgNs)} (${p.peer.name})`,
        ratio(p.ratio),
      ]),
    ),
    '',
    `Cached compares with cached and uncached with uncached: "repeated" is the same token again (our tag cache and fast-jwt's cache both hit); ` +
      `"${POOL} distinct tokens in turn" cycles more tokens than the core's tag cache (256 slots) and fast-jwt's default cache (1000) hold; ` +
      '"never seen" times one pass over new tokens. Token text: ' +
      `ours ${result.token.ours} chars, the equivalent JWT ${result.token.jwt} chars.`,
    '',
    table(
      ['case', 'kind', 'avg', 'p50', 'p99'],
      result.rows.map((r) => [r.name, r.kind, ns(r.avgNs), ns(r.p50Ns), ns(r.p99Ns)]),
    ),
    '',
    table(
      ['target', 'measured', 'needed', 'result'],
      Object.entries(result.targets).map(([k, t]) => [k, t.measured, t.needed, pass(t.ok)]),
    ),
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runCoreVerify();
  process.stdout.write(`${coreVerifyMarkdown(result)}\n`);
}
