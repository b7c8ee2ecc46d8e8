// The result record: where a call of the core leaves what it found, as byte offsets into
// the result buffer (resultBuffer(), RESULT_BYTES long), little-endian. Plain TypeScript as
// much as AssemblyScript, like memory-map.ts: the core writes at these offsets, the
// TypeScript host reads them from this very file (host/core/abi.ts), and
// scripts/go-memory-map.mjs writes them out for Go (go/core/result_record.go, by
// `go generate`) and for the C host (test/c-host/result-record.h), so that no host keeps
// offsets of its own. Which call fills which field: assembly/README.md, "Buffers".
//
// Each kind of call has fields of its own, none overlapping another's: a check's record
// stays as the check left it through `admit`, `usage` and `quota` calls for its token, so
// a host may read it after them and find the check's values, never another call's.

/** Bytes of the result buffer. */
export const RESULT_BYTES = 128;
/** A token's serial (u64): a Limited check's, and the claims of issue, revoke and inspect. */
export const RESULT_SERIAL = 0;
/** A token's expiry (u64, Unix seconds): a Limited check's, and the claims'. */
export const RESULT_EXPIRY = 8;
/** The claims' password generation (u32). */
export const RESULT_GENERATION = 16;
/** A Scoped or Limited check's grant id (u32), and the claims'. */
export const RESULT_GRANT = 20;
/** A Scoped or Limited check's scope flag (u32: 1 when the grant has a method scope, always for Scoped). */
export const RESULT_SCOPED = 24;
/** admit's wait (u64, ns): past the rate, or to a quota's reset; 0 for any other answer. */
export const RESULT_WAIT = 32;
/** admit's quota reset (u64, Unix ns); 0 for any answer but a spent quota. */
export const RESULT_RESET = 40;
/** usage's calls let through (u64). */
export const RESULT_REQUESTS = 48;
/** usage's last call (u64, Unix ns). */
export const RESULT_LAST_USED = 56;
/** quota's calls counted here (u64). */
export const RESULT_HERE = 64;
/** quota's calls counted by the other gateways, as last given (u64). */
export const RESULT_OTHERS = 72;
/** quota's window (u32: days or months since 1970, UTC). */
export const RESULT_WINDOW = 80;
/** grantAdd's and grantFind's refused entry or pattern (u32: its index). */
export const RESULT_REFUSED_ENTRY = 84;
/** sha256's and hmacSha256's digest (32 bytes). */
export const RESULT_DIGEST = 96;
