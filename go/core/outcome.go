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
)

var outcomeNames = [...]string{"Valid", "Malformed", "BadSignature", "Expired", "Revoked", "EarlierGeneration",
	"NotGranted", "NoToken", "BadHeader", "BadPath", "Scoped"}

// String is the outcome's name as the core's documentation and the vectors spell it.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// Result is a check's answer: the outcome and, when it is Scoped, the token's grant, to
// ask MethodAllowed about.
type Result struct {
	Outcome Outcome
	Grant   uint32
}
