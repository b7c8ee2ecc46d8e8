// The result record: where a call of the core leaves what it found, as byte offsets into
// the result buffer (resultBuffer(), RESULT_BYTES long), little-endian. Plain TypeScript as
// much as AssemblyScript, like memory-map.ts: the core writes at these offsets, the
// TypeScript host reads them from this very file (host/core/abi.ts), and
// scripts/go-memory-map.mjs writes them out for Go (go/core/result_record.go, by
// `go generate`) and for the C host (test/c-host/result-record.h), so that no host keeps
// offsets of its own. Which call fills which field: assembly/README.md, "Buffers".

/** Bytes of the result buffer. */
export const RESULT_BYTES = 64;
/** A Limited check's serial (u64); a Valid inspect's claims start here too. */
export const RESULT_SERIAL = 0;
/** A Limited check's expiry (u64, Unix seconds). */
export const RESULT_EXPIRY = 8;
/** The claims' password generation (u32). */
export const RESULT_GENERATION = 16;
/** A Scoped or Limited check's grant id (u32). */
export const RESULT_GRANT = 20;
/** A Limited check's scope flag (u32: 1 when the grant also has a method scope). */
export const RESULT_SCOPED = 24;
/** admit's wait (u64, ns): past the rate, or to a quota's reset. */
export const RESULT_WAIT = 0;
/** admit's quota reset (u64, Unix ns). */
export const RESULT_RESET = 8;
/** usage's calls let through (u64). */
export const RESULT_REQUESTS = 0;
/** usage's last call (u64, Unix ns). */
export const RESULT_LAST_USED = 8;
/** quota's calls counted here (u64). */
export const RESULT_HERE = 0;
/** quota's calls counted by the other gateways, as last given (u64). */
export const RESULT_OTHERS = 8;
/** quota's window (u32: days or months since 1970, UTC). */
export const RESULT_WINDOW = 16;
/** grantAdd's and grantFind's refused entry or pattern (u32: its index). */
export const RESULT_REFUSED_ENTRY = 0;
/** sha256's and hmacSha256's digest (32 bytes). */
export const RESULT_DIGEST = 0;
