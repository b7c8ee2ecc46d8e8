// The memory and disk cost of the usage history (host/service/usage-history.ts) at its
// bound: 65,536 live tokens, each counting calls in every one of the 168 hours it keeps.
// Fills the history as the owner does (a sample per hour of the tokens' rising counts),
// then prints, as one JSON line per case, the memory it holds (heap and ArrayBuffers, after a
// full GC), the time to encode it, the bytes
// of the data folder's `usage-history` file, what one save appends to its journal when
// every token counted calls since the last (`usage-history.journal`: the bytes, and the
// time to encode them), and a fleet gateway's published parts (the largest, against
// etcd's 1.5 MiB request limit). Not part of `npm run bench`:
//   npm run build && node --expose-gc bench/tools/usage-history-cost.js [tokens]
import { HISTORY_HOURS, HOUR_MS, UsageHistory } from '../../build/host/service/usage-history.js';
import { BLOCK_SERIALS } from '../../build/host/cluster/usage-history.js';

if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
const TOKENS = Number(process.argv[2] ?? 65_536);

function heap() {
  globalThis.gc();
  globalThis.gc();
  // The rings are typed arrays: their bytes are the ArrayBuffers', outside heapUsed.
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

/** A history of TOKENS tokens, each counting `perHour(serial, hour)` calls in each of the 168 hours. */
function filled(perHour) {
  let now = Date.UTC(2030, 0, 1);
  const counts = new Map();
  const tokens = Array.from({ length: TOKENS }, (_, serial) => ({ serial }));
  const before = heap();
  const history = new UsageHistory({ usage: (serial) => ({ requests: counts.get(serial) ?? 0, lastUsedMs: 0 }) }, () => now);
  history.begin(() => tokens);
  history.stop();
  return (async () => {
    for (let hour = 0; hour < HISTORY_HOURS; hour++) {
      for (const { serial } of tokens) counts.set(serial, (counts.get(serial) ?? 0) + perHour(serial, hour));
      await history.sample();
      now += HOUR_MS;
    }
    now -= HOUR_MS;
    counts.clear();
    const bytes = heap() - before;
    const started = performance.now();
    const file = Buffer.byteLength(await history.encodeText({ version: 1 }));
    const encodeMs = Math.round(performance.now() - started);
    // One save of the journal: every token counted calls in the current hour since the last save.
    history.takeJournal();
    // (A count lower than the last sample's is counted whole, as a slot counted anew.)
    for (const { serial } of tokens) counts.set(serial, perHour(serial, HISTORY_HOURS));
    await history.sample();
    const journalStarted = performance.now();
    const journalBytes = Buffer.byteLength(history.takeJournal());
    const journalMs = Math.round(performance.now() - journalStarted);
    const parts = new Map();
    for (const serial of history.serials()) parts.set(serial - (serial % BLOCK_SERIALS), true);
    const sizes = [...parts.keys()].map((block) =>
      Buffer.byteLength(JSON.stringify({ tokens: history.encodeBlock(block, BLOCK_SERIALS) })),
    );
    const node = Buffer.byteLength(JSON.stringify(history.encodeNode()));
    return {
      tokens: history.size,
      heapBytes: bytes,
      fileBytes: file,
      encodeMs,
      journalBytes,
      journalMs,
      fleetParts: sizes.length + 1,
      largestPartBytes: Math.max(node, ...sizes),
      nodePartBytes: node,
    };
  })();
}

// Calls per hour of 1 to 999 (a busy token), and of 2^32 - 1 (the slot's most: the longest numbers, the bound).
const typical = await filled((serial, hour) => 1 + ((serial * 7919 + hour * 104_729) % 999));
console.log(JSON.stringify({ case: '1 to 999 calls per token-hour', ...typical }));
const worst = await filled(() => 2 ** 32 - 1);
console.log(JSON.stringify({ case: '2^32 - 1 calls per token-hour (the bound)', ...worst }));
