package core

import "fmt"

// Code names an error of the core or of this host, stably: callers and tests match codes,
// never messages. The core's negative results (assembly/results.ts) each have one.
type Code string

// The codes.
const (
	CodeGrantEmpty          Code = "GRANT_EMPTY"
	CodeGrantTooManyEntries Code = "GRANT_TOO_MANY_ENTRIES"
	CodeGrantTableFull      Code = "GRANT_TABLE_FULL"
	CodeGrantBadEntry       Code = "GRANT_BAD_ENTRY"
	CodeGrantEntryTooLong   Code = "GRANT_ENTRY_TOO_LONG"
	CodeGrantBadMethod      Code = "GRANT_BAD_METHOD"
	CodeGrantMethodTooLong  Code = "GRANT_METHOD_TOO_LONG"
	CodeGrantTooManyMethods Code = "GRANT_TOO_MANY_METHODS"
	CodeGrantNoMethods      Code = "GRANT_NO_METHODS"
	CodeGrantBadLimit       Code = "GRANT_BAD_LIMIT"
	CodeGrantTooManyClients Code = "GRANT_TOO_MANY_CLIENTS"
	CodeGrantMismatch       Code = "GRANT_MISMATCH"
	CodeIssueUnknownGrant   Code = "ISSUE_UNKNOWN_GRANT"
	CodeIssueWindowFull     Code = "ISSUE_WINDOW_FULL"
	CodeIssueBadTime        Code = "ISSUE_BAD_TIME"
	CodeIssueNoKey          Code = "ISSUE_NO_KEY"
	CodeIssueBadSerial      Code = "ISSUE_BAD_SERIAL"
	CodeRevokeNeverIssued   Code = "REVOKE_NEVER_ISSUED"
	CodeReserveOutOfWindow  Code = "RESERVE_OUT_OF_WINDOW"
	CodeRestoreOutOfWindow  Code = "RESTORE_OUT_OF_WINDOW"
	CodeBadKey              Code = "BAD_KEY"
	CodeBadOptions          Code = "BAD_OPTIONS"
	CodeABI                 Code = "ABI_MISMATCH"
	CodeEmbeddedCore        Code = "EMBEDDED_CORE_MISMATCH"
	CodeNoSlot              Code = "NO_FREE_SLOT"
	CodeUnknownGrant        Code = "UNKNOWN_GRANT"
	CodeTrap                Code = "CORE_TRAP"
	CodeClosed              Code = "CLOSED"
)

// Error is an error of the core with its stable code. errors.Is matches two Errors by code,
// so `errors.Is(err, core.ErrGrantBadEntry)` holds for any bad entry, whatever its index.
type Error struct {
	Code Code
	// Index is the refused entry's (or method pattern's) index for the grant codes that
	// name one, else -1.
	Index   int
	Message string
}

func (e *Error) Error() string { return "api-auth core: " + e.Message + " (" + string(e.Code) + ")" }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels to match with errors.Is.
var (
	ErrGrantBadEntry     = &Error{Code: CodeGrantBadEntry}
	ErrGrantBadMethod    = &Error{Code: CodeGrantBadMethod}
	ErrUnknownGrant      = &Error{Code: CodeUnknownGrant}
	ErrIssueBadSerial    = &Error{Code: CodeIssueBadSerial}
	ErrRevokeNeverIssued = &Error{Code: CodeRevokeNeverIssued}
	ErrTrap              = &Error{Code: CodeTrap}
	ErrClosed            = &Error{Code: CodeClosed}
)

func newError(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Index: -1, Message: fmt.Sprintf(format, args...)}
}

// grantError turns grantAdd's negative result into its error; index is at resultRefusedEntry for
// the codes that name an entry or a pattern.
func grantError(result int32, index int) *Error {
	switch result {
	case -1:
		return newError(CodeGrantEmpty, "a grant needs at least one endpoint")
	case -2:
		return newError(CodeGrantTooManyEntries, "a grant holds at most 128 endpoints")
	case -3:
		return newError(CodeGrantTableFull, "the grant table is full (65,536 grants or 16 MiB)")
	case -4:
		return &Error{CodeGrantBadEntry, index, fmt.Sprintf("endpoint %d is neither \"*\" nor a path the core allows (assembly/README.md, Paths)", index)}
	case -5:
		return &Error{CodeGrantEntryTooLong, index, fmt.Sprintf("endpoint %d is over 1024 bytes", index)}
	case -6:
		return &Error{CodeGrantBadMethod, index, fmt.Sprintf("method pattern %d is not 1 to 128 visible ASCII bytes with \"*\" only at its end", index)}
	case -7:
		return &Error{CodeGrantMethodTooLong, index, fmt.Sprintf("method pattern %d is over 128 bytes", index)}
	case -8:
		return newError(CodeGrantTooManyMethods, "a method scope holds at most 128 patterns")
	case -9:
		return newError(CodeGrantNoMethods, "a method scope needs at least one pattern")
	case -10:
		return &Error{CodeGrantBadLimit, index, fmt.Sprintf("limit entry %d is not \"rate N/U\", \"burst B\" or \"client HEX/PREFIX\" in canonical form and order", index)}
	case -11:
		return newError(CodeGrantTooManyClients, "limits hold at most 64 client ranges")
	}
	return newError(CodeTrap, "grantAdd answered %d, which this host does not know", result)
}

func issueError(result int32) *Error {
	switch result {
	case -1:
		return newError(CodeIssueUnknownGrant, "no such grant")
	case -2:
		return newError(CodeIssueWindowFull, "the revocation window holds as many live tokens as it can")
	case -3:
		return newError(CodeIssueBadTime, "a lifetime of 0 or a time before 1970")
	case -4:
		return newError(CodeIssueNoKey, "no key is set")
	case -5:
		return newError(CodeIssueBadSerial, "the serial is not reserved, is revoked, or its block ends before the token would")
	}
	return newError(CodeTrap, "issue answered %d, which this host does not know", result)
}
