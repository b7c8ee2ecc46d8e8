// The memory map in numbers: the sizes `init` lays the heap out with (layout.ts says where
// each part lives), and so the size of the shared memory a host makes for the threads
// build. Plain TypeScript as much as AssemblyScript (each is an i32 here), like
// results.ts: the TypeScript host imports this very file (host/core/memory.ts), and
// scripts/go-memory-map.mjs writes it out for Go (go/core/memory_map.go, by `go generate`),
// so that no host works the map out on its own. A host sizes a threads build's memory from
// these numbers, so changing one changes the ABI.
//
// The heap, from HEAP_BASE: the grant index, the revocation ring, the page expiries, then,
// from the next multiple of TABLE_ALIGN, the limits table and the usage table, then the
// grant lists; in the threads build the slots of attached instances follow, one each.

/** A Wasm page. */
export const PAGE_BYTES = 65536;
/** Where the heap starts in both builds: the data (slot 0 included) fits below. */
export const HEAP_BASE = 2 * PAGE_BYTES;
/** How many grants the index holds. */
export const MAX_GRANTS = 65536;
/** Bytes of a grant's index entry. */
export const GRANT_INDEX_ENTRY_BYTES = 16;
/** Room for every grant's list. */
export const MAX_GRANT_BYTES = 16 << 20;
/** The revocation window is 2^windowLog2 serials, windowLog2 from MIN_WINDOW_LOG2 to MAX_WINDOW_LOG2. */
export const MIN_WINDOW_LOG2 = 12;
export const MAX_WINDOW_LOG2 = 30;
/** The ring holds one bit per serial: 2^RING_BYTE_LOG2 serials a byte. */
export const RING_BYTE_LOG2 = 3;
/** The page expiries: one of EXPIRY_BYTES per page of 2^EXPIRY_PAGE_LOG2 serials. */
export const EXPIRY_PAGE_LOG2 = 12;
export const EXPIRY_BYTES = 8;
/** Where the limits table starts: the next multiple of this after the page expiries. */
export const TABLE_ALIGN = 64;
/** The limits table and the usage table: 2^LIMIT_SLOTS_LOG2 slots of LIMIT_SLOT_BYTES each. */
export const LIMIT_SLOTS_LOG2 = 16;
export const LIMIT_SLOT_BYTES = 64;
/** Bytes of an attached instance's slot in the threads build (slots.ts). */
export const SLOT_BYTES = 96 << 10;
/** The threads build's memory at most, in pages (2 GiB: asconfig.json's maximumMemory). */
export const MAX_PAGES = 32768;
