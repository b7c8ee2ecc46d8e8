// Experiment, not part of `npm run bench`: how fast can the core's SHA-256 compression be
// in AssemblyScript? Generates two variants next to a copy of the core's current one,
// compiles them with the core's release options, checks they agree, and times each in a
// loop inside Wasm (no JS call per compression).
//   node bench/experiments/sha256-variants.js
//
//   current   the core's compress (assembly/sha256.ts): message schedule in linear memory,
//             64-round loop that shifts eight variables each round
//   unrolled  all 64 rounds unrolled with the variables renamed instead of shifted, the
//             message schedule in 16 rolling locals, round constants inline
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { ROOT, table } from '../lib/common.js';

// The round constants, read from the core's own source rather than copied.
const CORE_SHA256 = readFileSync(join(ROOT, 'assembly', 'sha256.ts'), 'utf8');
const K = [...CORE_SHA256.slice(CORE_SHA256.indexOf('const K: usize'), CORE_SHA256.indexOf(']);')).matchAll(/0x[0-9a-f]{8}/g)].map((m) =>
  Number(m[0]),
);
if (K.length !== 64) throw new Error(`expected 64 round constants in assembly/sha256.ts, found ${K.length}`);
const hex = (n) => `0x${n.toString(16).padStart(8, '0')}`;

function unrolled() {
  const V = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
  const lines = [];
  for (let i = 0; i < 16; i++) lines.push(`  let w${i} = bswap<u32>(load<u32>(block, ${i * 4}));`);
  for (let i = 0; i < 8; i++) lines.push(`  let ${V[i]} = load<u32>(state, ${i * 4});`);
  for (let i = 0; i < 64; i++) {
    const r = (k) => V[(((k - i) % 8) + 8) % 8];
    const [a, b, c, d, e, f, g, h] = [0, 1, 2, 3, 4, 5, 6, 7].map(r);
    if (i >= 16) {
      const j = i % 16;
      lines.push(`  w${j} += SIG1(w${(i - 2) % 16}) + w${(i - 7) % 16} + SIG0(w${(i - 15) % 16});`);
    }
    lines.push(`  ${h} += EP1(${e}) + (${g} ^ (${e} & (${f} ^ ${g}))) + ${hex(K[i])} + w${i % 16};`);
    lines.push(`  ${d} += ${h};`);
    lines.push(`  ${h} += EP0(${a}) + ((${a} & ${b}) | (${c} & (${a} | ${b})));`);
  }
  for (let i = 0; i < 8; i++) lines.push(`  store<u32>(state, load<u32>(state, ${i * 4}) + ${V[i]}, ${i * 4});`);
  return `function compressUnrolled(state: usize, block: usize): void {\n${lines.join('\n')}\n}`;
}

function source() {
  // The core's current compression, copied verbatim from assembly/sha256.ts.
  const core = CORE_SHA256;
  const start = core.indexOf('export function compress(');
  const end = core.indexOf('\n}\n', start) + 3;
  const current = core.slice(start, end).replace('export function compress(', 'function compressCurrent(');
  const kStart = core.indexOf('const K: usize');
  const kEnd = core.indexOf(']);', kStart) + 3;
  const helpers = core.slice(core.indexOf('// @ts-ignore: decorator\n@inline function CH'), core.indexOf('/** Sets a hash state'));
  return `
${core.slice(kStart, kEnd)}
const W: usize = memory.data(64 * 4, 16);
${helpers}
${current}
${unrolled()}
export const STATE: usize = memory.data(32, 16);
export const BLOCK: usize = memory.data(64, 16);
export function stateAt(): usize { return STATE; }
export function blockAt(): usize { return BLOCK; }
export function run(variant: i32, n: i32): u32 {
  if (variant == 0) for (let i = 0; i < n; i++) compressCurrent(STATE, BLOCK);
  else for (let i = 0; i < n; i++) compressUnrolled(STATE, BLOCK);
  return load<u32>(STATE);
}
`;
}

const dir = mkdtempSync(join(tmpdir(), 'api-auth-sha-'));
try {
  const src = join(dir, 'variants.ts');
  const out = join(dir, 'variants.wasm');
  writeFileSync(src, source());
  execFileSync(join(ROOT, 'node_modules', '.bin', 'asc'), [src, '-O3', '--noAssert', '--runtime', 'stub', '--converge', '-o', out], {
    stdio: 'inherit',
  });
  const { instance } = await WebAssembly.instantiate(readFileSync(out), {
    env: {
      abort() {
        throw new Error('abort');
      },
    },
  });
  const x = instance.exports;
  const mem = () => new Uint8Array(x.memory.buffer);
  const H0 = Buffer.from('6a09e667bb67ae853c6ef372a54ff53a510e527f9b05688c1f83d9ab5be0cd19', 'hex');
  const setState = () => {
    // Native-endian words, as the core keeps them.
    const s = new DataView(x.memory.buffer, x.stateAt(), 32);
    for (let i = 0; i < 8; i++) s.setUint32(i * 4, H0.readUInt32BE(i * 4), true);
  };
  const digest = () => {
    const s = new DataView(x.memory.buffer, x.stateAt(), 32);
    const d = Buffer.alloc(32);
    for (let i = 0; i < 8; i++) d.writeUInt32BE(s.getUint32(i * 4, true), i * 4);
    return d.toString('hex');
  };
  // Agreement: one padded block of a short message against node:crypto.
  for (let t = 0; t < 200; t++) {
    const msg = randomBytes(t % 56);
    const block = Buffer.alloc(64);
    msg.copy(block);
    block[msg.length] = 0x80;
    block.writeUInt32BE(msg.length * 8, 60);
    const want = createHash('sha256').update(msg).digest('hex');
    for (const variant of [0, 1]) {
      mem().set(block, x.blockAt());
      setState();
      x.run(variant, 1);
      if (digest() !== want) throw new Error(`variant ${variant} disagrees with node:crypto`);
    }
  }
  const N = 2_000_000;
  const results = [];
  for (let round = 0; round < 5; round++) {
    for (const [variant, name] of [
      [0, 'current (assembly/sha256.ts)'],
      [1, 'unrolled, schedule in locals'],
    ]) {
      x.run(variant, 20_000);
      const t0 = process.hrtime.bigint();
      x.run(variant, N);
      const nsPer = Number(process.hrtime.bigint() - t0) / N;
      (results[variant] ??= { name, samples: [] }).samples.push(nsPer);
    }
  }
  const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
  const base = median(results[0].samples);
  process.stdout.write(
    `${table(
      ['SHA-256 compression in Wasm', 'ns per block (median of 5)', 'vs current'],
      results.map((r) => [r.name, median(r.samples).toFixed(1), `${(median(r.samples) / base).toFixed(2)}x`]),
    )}\n`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
