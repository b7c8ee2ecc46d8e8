// The core's result codes, beside the Outcome of a token check (outcome.ts): what its
// calls return when they cannot do what was asked. Plain TypeScript as much as
// AssemblyScript (each is an i32 here), so that the host imports this very file
// (host/core/core.ts) and the two sides cannot drift apart. The numbers are part of the
// ABI (README.md beside this file): append, never renumber.

/** grantAdd, grantFind: the endpoint list is empty. */
export const GRANT_EMPTY = -1;
/** grantAdd, grantFind: more than 128 entries. */
export const GRANT_TOO_MANY_ENTRIES = -2;
/** grantAdd, grantFind: the table holds 65,536 lists or 16 MiB already. */
export const GRANT_TABLE_FULL = -3;
/** grantAdd, grantFind: an entry is not "*" or an allowed absolute path (its index at RESULT_REFUSED_ENTRY). */
export const GRANT_BAD_ENTRY = -4;
/** grantAdd, grantFind: an entry is over 1024 bytes (its index at RESULT_REFUSED_ENTRY). */
export const GRANT_ENTRY_TOO_LONG = -5;
/**
 * grantAdd, grantFind: a method pattern is empty, holds a byte outside visible ASCII, or
 * `*` before its end (its index among the patterns at RESULT_REFUSED_ENTRY).
 */
export const GRANT_BAD_METHOD = -6;
/** grantAdd, grantFind: a method pattern is over 128 bytes (its index among the patterns at RESULT_REFUSED_ENTRY). */
export const GRANT_METHOD_TOO_LONG = -7;
/** grantAdd, grantFind: more than 128 method patterns. */
export const GRANT_TOO_MANY_METHODS = -8;
/** grantAdd, grantFind: the list has the empty entry that starts a method scope, and no pattern after it. */
export const GRANT_NO_METHODS = -9;

/**
 * grantAdd, grantFind: a limit entry is not `rate N/U`, `burst B` or `client HEX/PREFIX` in
 * canonical form and order, or the limits section is empty (its index among the limit
 * entries at RESULT_REFUSED_ENTRY).
 */
export const GRANT_BAD_LIMIT = -10;
/** grantAdd, grantFind: more than 64 client ranges. */
export const GRANT_TOO_MANY_CLIENTS = -11;

/** issue: no such grant. */
export const ISSUE_UNKNOWN_GRANT = -1;
/** issue: the revocation window holds as many live tokens as it can. */
export const ISSUE_WINDOW_FULL = -2;
/** issue: a lifetime of 0, or a time before 1970. */
export const ISSUE_BAD_TIME = -3;
/** issue: no key set. */
export const ISSUE_NO_KEY = -4;
/** issueSerial: the serial is not reserved, is revoked, or its block's expiry bound ends before the token would. */
export const ISSUE_BAD_SERIAL = -5;

/** revokeSerial: marked revoked. */
export const REVOKE_MARKED = 0;
/** revokeSerial: below the floor, so expired already: nothing to keep. */
export const REVOKE_EXPIRED = 1;
/** revokeSerial: never issued. */
export const REVOKE_NEVER_ISSUED = -1;

/** generatePassword: the entropy ran out first; call again with more. */
export const PASSWORD_NEEDS_ENTROPY = -1;
/** generatePassword: a length of 0 or over the token buffer, or entropy over the io buffer. */
export const PASSWORD_BAD_LENGTH = -2;

/** attach: no init has finished on this memory, or this instance has a slot already. */
export const ATTACH_NOT_READY = -1;
/** attach: no such slot. */
export const ATTACH_BAD_SLOT = -2;
/** attach: another instance holds the slot. */
export const ATTACH_TAKEN = -3;

/** reserveSerials: the range is empty, or reaching its end would take the ceiling past the window. */
export const RESERVE_OUT_OF_WINDOW = -1;
/** reserveSerials: the whole range is below the floor (its tokens have all expired): nothing to do. */
export const RESERVE_EXPIRED = 1;

/** admit: the call is let through (and counted). */
export const ADMIT_OK = 0;
/** admit: the client's address is in none of the token's ranges. */
export const ADMIT_CLIENT = 1;
/** admit: past the token's rate; the wait in nanoseconds is at RESULT_WAIT (u64). */
export const ADMIT_RATE = 2;
/** admit: more calls at once than the token's burst: never let through. */
export const ADMIT_OVER_BURST = 3;
/** admit: the token's quota for this window (day or month, UTC) is spent; the nanoseconds until it resets are at RESULT_WAIT (u64), the reset's time (Unix ns) at RESULT_RESET. */
export const ADMIT_QUOTA = 4;
/** admit: the limits table has no slot for the token (see "Limits"). */
export const ADMIT_TABLE_FULL = -1;
/** admit: no such grant. */
export const ADMIT_UNKNOWN_GRANT = -2;
