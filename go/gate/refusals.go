package gate

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"api-auth/go/core"
)

// Every answer the gate gives of its own, in one place: the outcomes' refusals, the
// refusals of a body the reading cannot know the calls of, and those of a token's limits.

// The JSON-RPC codes of the gateway's refusals (host/errors.ts, RpcCode).
const (
	codeInvalidRequest    = -32600
	codeRateLimited       = -32005
	codeUnavailable       = -32046
	codeInsufficientScope = -32047
	codeClientNotAllowed  = -32048
)

// insufficientScope is the challenge of a refused scope (RFC 6750 §3.1).
const insufficientScope = `Bearer error="insufficient_scope"`

// pathRules is host/core/abi.ts's PATH_RULES: what a BadPath refusal tells the client.
const pathRules = `dot or empty segments, "\", and encoded "/", "\", ".", "%", ";", "?", "#", controls, look-alikes ` +
	`or malformed UTF-8 are refused`

// fencedReason is host/cluster/fence.ts's FENCED_REASON, the 503 of a node whose fleet lease lapsed.
const fencedReason = `this api-auth gateway has lost touch with its fleet (etcd) and cannot vouch that it holds every ` +
	`revocation; it serves again by itself once it has caught up; meanwhile use another gateway`

// refusal is one encoded answer: built once, so that a refusal costs the request no JSON work.
type refusal struct {
	status    int
	challenge string
	// allow and retryAfter are the Allow and Retry-After headers, "" for none.
	allow, retryAfter string
	body              []byte
	length            string
	// beforeID is the body up to its id (`...,"id":`), for an answer that echoes a call's id.
	beforeID string
}

func newRefusal(status int, challenge string, body string) refusal {
	r := refusal{status: status, challenge: challenge, body: []byte(body), length: strconv.Itoa(len(body))}
	if strings.HasSuffix(body, `"id":1}`+"\n") {
		r.beforeID = body[:len(body)-len("1}\n")]
	}
	return r
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
	// A token with limits from a client its allowedClients do not hold: the answer names
	// neither the list nor the address, so that it tells a stolen token's user nothing.
	r[core.Limited] = newRefusal(http.StatusForbidden, "", rpcError(codeClientNotAllowed, "the provided auth token may not be used from this client", "1")+"\n")
	r[unavailable] = newRefusal(http.StatusServiceUnavailable, "", rpcError(codeUnavailable, fencedReason, "1")+"\n")
	return r
}()

// unavailable is not an outcome of the core: the answer while a fleet node is fenced.
const unavailable = core.Limited + 1

// connectRefused is the gateway's answer to a CONNECT in any spelling, on every path,
// before the token (host/http/responses.ts): nothing of it reaches a handler.
var connectRefused = func() refusal {
	r := newRefusal(http.StatusMethodNotAllowed, "", rpcError(codeInvalidRequest, "HTTP method CONNECT is not allowed: api-auth forwards requests, it opens no tunnels", "null")+"\n")
	r.allow = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
	return r
}()

// bodyUnreadable answers a request whose body net/http could not read to its end.
var bodyUnreadable = newRefusal(http.StatusBadRequest, "", rpcError(codeInvalidRequest, "the request body ended before its framing did", "null")+"\n")

// The refusals of a body whose calls the reading cannot know: what goes before the reason,
// for a token with a method scope (403 insufficient_scope), and for one with limits only (400).
const (
	scopedPrefix  = "the provided auth token allows only some JSON-RPC methods: "
	limitedPrefix = "the provided auth token has limits, so its request must be one JSON-RPC call or a batch that api-auth reads exactly: "
)

// unreadableReasons says why a body was not read, by reason (host/rpc/reading.ts's
// Unreadable); NotACall and MethodTwice follow "the body " for a lone call, or "call N
// of the batch " for an element of a batch.
var unreadableReasons = [...]string{
	NoBody:        "the request must carry a JSON-RPC call or batch in its body, and it has none",
	NotUTF8:       "the body is not UTF-8",
	ByteOrderMark: "the body starts with a byte order mark, which nodes read differently",
	NotOneValue:   "the body is not one JSON value alone (nothing may follow it)",
	TooDeep:       "the body nests deeper than " + strconv.Itoa(MaxDepth),
	EmptyBatch:    "the batch is empty",
	NotACall:      `is not a JSON-RPC call (an object with a "method" string)`,
	MethodTwice:   "names its method more than once (servers differ on which one counts)",
	Compressed:    "the body is compressed (Content-Encoding), which api-auth does not read",
}

func unreadableReason(r Reading) string {
	reason := unreadableReasons[r.Problem]
	if r.Problem != NotACall && r.Problem != MethodTwice {
		return reason
	}
	if r.At >= 0 {
		return "call " + itoa(r.At) + " of the batch " + reason
	}
	return "the body " + reason
}

// The refusals of a token's limits (host/http/refusals.ts): past the rate, more calls at
// once than the burst, and no slot in the core's limits table. A client the token's ranges
// do not hold is refusals[core.Limited].
func rateLimitedMessage(retryAfter uint64) string {
	return "the provided auth token is past its rate limit; retry in " + strconv.FormatUint(retryAfter, 10) + " s"
}

func quotaSpentMessage(resetsAt string) string {
	return "the provided auth token's quota for this period is spent; it resets at " + resetsAt
}

func overBurstMessage(calls uint32) string {
	return "the provided auth token's burst is smaller than these " + strconv.FormatUint(uint64(calls), 10) +
		" calls at once; send fewer calls at a time"
}

var limitsFull = func() refusal {
	r := newRefusal(http.StatusServiceUnavailable, "", rpcError(codeUnavailable, "this api-auth gateway tracks as many tokens with limits "+
		"as it can; retry later, or use a token without limits", "1")+"\n")
	r.retryAfter = "1"
	return r
}()

// writeLimitRefusal answers a request of calls calls that Admit refused, with id (JSON
// text) as its id for the rate's refusals. Retry-After is the wait in whole seconds,
// rounded up, at least 1; an over-burst request gets none, as no wait lets it through.
func writeLimitRefusal(w http.ResponseWriter, a core.Admission, calls uint32, id string) {
	switch a.Result {
	case core.ClientNotAllowed:
		refusals[core.Limited].write(w)
	case core.RateLimited:
		seconds := max(1, (a.WaitNs+999_999_999)/1_000_000_000)
		w.Header()["Retry-After"] = []string{strconv.FormatUint(seconds, 10)}
		writeJSON(w, http.StatusTooManyRequests, "", rpcError(codeRateLimited, rateLimitedMessage(seconds), id)+"\n")
	case core.OverBurst:
		writeJSON(w, http.StatusTooManyRequests, "", rpcError(codeRateLimited, overBurstMessage(calls), id)+"\n")
	case core.QuotaSpent:
		seconds := max(1, (a.WaitNs+999_999_999)/1_000_000_000)
		resetsAt := time.Unix(0, a.ResetNs).UTC().Format("2006-01-02T15:04:05Z")
		w.Header()["Retry-After"] = []string{strconv.FormatUint(seconds, 10)}
		writeJSON(w, http.StatusTooManyRequests, "", `{"jsonrpc":"2.0","error":{"code":`+strconv.Itoa(codeRateLimited)+
			`,"message":`+quote(quotaSpentMessage(resetsAt))+`,"data":{"resetsAt":"`+resetsAt+`"}},"id":`+id+"}\n")
	default:
		limitsFull.write(w)
	}
}

// writeJSON writes a JSON answer made for this request: status, the challenge ("" for none), body.
func writeJSON(w http.ResponseWriter, status int, challenge, body string) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	if challenge != "" {
		h["Www-Authenticate"] = []string{challenge}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// writeWithID writes the refusal with `id` (a call's id as its source text) in place of
// the original node's id 1; as write when id is "" or "1", or the refusal has no id to replace.
func (r *refusal) writeWithID(w http.ResponseWriter, id string) {
	if id == "" || id == "1" || r.beforeID == "" {
		r.write(w)
		return
	}
	withID := *r
	withID.body = []byte(r.beforeID + id + "}\n")
	withID.length = strconv.Itoa(len(withID.body))
	withID.write(w)
}

func (r *refusal) write(w http.ResponseWriter) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	if r.challenge != "" {
		h["Www-Authenticate"] = []string{r.challenge}
	}
	if r.allow != "" {
		h["Allow"] = []string{r.allow}
	}
	if r.retryAfter != "" {
		h["Retry-After"] = []string{r.retryAfter}
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
