package core

import "strconv"

// Outcome is what a check of a token says about a request (assembly/README.md,
// "Outcomes"). The numbers are the core's own: assembly/outcome.ts defines them once.
type Outcome uint32

// The outcomes, in the order the core checks them: a forged token is never told it expired.
const (
	Valid Outcome = iota
	Malformed
	BadSignature
	Expired
	Revoked
	EarlierGeneration
	NotGranted
	NoToken
	BadHeader
	BadPath
	// Scoped is valid for the path, but the token's grant has a method scope: serve the
	// request only when MethodAllowed says so for its JSON-RPC method.
	Scoped
	// Limited is valid for the path, but the token's grant has limits (a rate, client
	// ranges): serve the request only when Admit lets it through, and, when the grant also
	// has a method scope, for a method MethodAllowed lets through.
	Limited
)

var outcomeNames = [...]string{"Valid", "Malformed", "BadSignature", "Expired", "Revoked", "EarlierGeneration",
	"NotGranted", "NoToken", "BadHeader", "BadPath", "Scoped", "Limited"}

// String is the outcome's name as the core's documentation and the vectors spell it.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// Result is a check's answer, copied out of the core's result record as the check
// returns, so that no later call changes it: the outcome and, when it is Scoped or
// Limited, the token's grant, to ask MethodAllowed about, and whether the grant has a
// method scope (Scoped: always for a Scoped token), whose calls MethodAllowed judges; when
// it is Limited, the token's serial and expiry (Unix seconds), for Admit.
type Result struct {
	Outcome Outcome
	Grant   uint32
	Serial  uint64
	Expiry  uint64
	Scoped  bool
}

// AdmitResult is what Admit decided (assembly/README.md, "Limits").
type AdmitResult int32

// The results of Admit.
const (
	// Admitted: let through, and counted.
	Admitted AdmitResult = 0
	// ClientNotAllowed: the client's address is in none of the token's ranges.
	ClientNotAllowed AdmitResult = 1
	// RateLimited: past the token's rate; Admission.WaitNs says for how long.
	RateLimited AdmitResult = 2
	// OverBurst: more calls at once than the token's burst: never let through.
	OverBurst AdmitResult = 3
	// QuotaSpent: past the token's quota for its calendar day or month (UTC);
	// Admission.WaitNs says how long until it resets, Admission.ResetNs when.
	QuotaSpent AdmitResult = 4
	// LimitTableFull: the core's limits table has no slot for the token.
	LimitTableFull AdmitResult = -1
)

// Admission is Admit's answer: the result, for RateLimited and QuotaSpent the wait in
// nanoseconds, and for QuotaSpent the time the quota resets (Unix ns).
type Admission struct {
	Result  AdmitResult
	WaitNs  uint64
	ResetNs int64
}

// Usage is what Admit let through for a token: its calls, and the last one's time (Unix ns).
type Usage struct {
	Requests uint64
	LastNs   int64
}
