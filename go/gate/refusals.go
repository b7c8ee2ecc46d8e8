package gate

import (
	"net/http"
	"strconv"

	"api-auth/go/core"
)

// The JSON-RPC codes of the gateway's refusals (host/errors.ts, RpcCode).
const (
	codeInvalidRequest    = -32600
	codeUnavailable       = -32046
	codeInsufficientScope = -32047
)

// insufficientScope is the challenge of a refused scope (RFC 6750 §3.1).
const insufficientScope = `Bearer error="insufficient_scope"`

// pathRules is host/core/core.ts's PATH_RULES: what a BadPath refusal tells the client.
const pathRules = `dot or empty segments, "\", and encoded "/", "\", ".", "%", ";", "?", "#", controls, look-alikes ` +
	`or malformed UTF-8 are refused`

// fencedReason is host/cluster/fence.ts's FENCED_REASON, the 503 of a node whose fleet lease lapsed.
const fencedReason = `this api-auth gateway has lost touch with its fleet (etcd) and cannot vouch that it holds every ` +
	`revocation; it serves again by itself once it has caught up; meanwhile use another gateway`

// refusal is one encoded answer: built once, so that a refusal costs the request no JSON work.
type refusal struct {
	status    int
	challenge string
	body      []byte
	length    string
}

func newRefusal(status int, challenge string, body string) refusal {
	return refusal{status, challenge, []byte(body), strconv.Itoa(len(body))}
}

// rpcError is the gateway's JSON-RPC error line: {"jsonrpc":"2.0","error":{"code","message"},"id":<idJSON>}.
func rpcError(code int, message, idJSON string) string {
	return `{"jsonrpc":"2.0","error":{"code":` + strconv.Itoa(code) + `,"message":` + quote(message) + `},"id":` + idJSON + `}`
}

// refusals is host/http/refusals.ts's table, by outcome: the status, the challenge and the
// body the gateway sends. The original node answered id 1 whatever the request.
var refusals = func() [core.Limited + 2]refusal {
	var r [core.Limited + 2]refusal
	unauthorized := func(o core.Outcome, reason string) {
		r[o] = newRefusal(http.StatusUnauthorized, "Bearer", rpcError(codeInvalidRequest, reason, "1")+"\n")
	}
	unauthorized(core.NoToken, "auth token not provided")
	unauthorized(core.BadHeader, `couldn't parse auth token. Header "Authorization" should be "Bearer TOKEN.GOES.HERE"`)
	unauthorized(core.Malformed, "the provided auth token is invalid")
	unauthorized(core.BadSignature, "the provided auth token is invalid: signature mismatch")
	unauthorized(core.Expired, "the provided auth token is expired")
	unauthorized(core.Revoked, "the provided auth token was revoked")
	unauthorized(core.EarlierGeneration, "the provided auth token is invalid: issued under a previous password")
	unauthorized(core.NotGranted, "the provided auth token does not allow access to this endpoint")
	r[core.BadPath] = newRefusal(http.StatusBadRequest, "", rpcError(codeInvalidRequest, "invalid request path: "+pathRules, "1")+"\n")
	// This gateway keeps no buckets and sees no client ranges: a token with limits is refused
	// rather than let through unlimited (issue 25; api-auth itself enforces them).
	r[core.Limited] = newRefusal(http.StatusForbidden, "", rpcError(codeInsufficientScope, limitedReason, "1")+"\n")
	r[unavailable] = newRefusal(http.StatusServiceUnavailable, "", rpcError(codeUnavailable, fencedReason, "1")+"\n")
	return r
}()

// unavailable is not an outcome of the core: the answer while a fleet node is fenced.
const unavailable = core.Limited + 1

const limitedReason = "the provided auth token has limits (a rate or client ranges) that this gateway does not enforce: " +
	"use it through api-auth itself"

func (r *refusal) write(w http.ResponseWriter) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	if r.challenge != "" {
		h["Www-Authenticate"] = []string{r.challenge}
	}
	h["Content-Length"] = []string{r.length}
	w.WriteHeader(r.status)
	w.Write(r.body)
}

var contentTypeJSON = []string{"application/json"}

// quote is JSON.stringify of a string, so that the bodies are the gateway's byte for byte:
// unlike encoding/json it leaves <, >, &, U+2028 and U+2029 as they are.
func quote(s string) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
