// Package gate guards a net/http handler with api-auth's tokens, as the original node's
// WrapHandler did and as api-auth's gateway does: `Authorization: Bearer <token>`, the
// token's endpoints, its method scope and its limits, every refusal answered exactly as
// the gateway answers it (statuses, JSON-RPC bodies, WWW-Authenticate, Retry-After). A
// check is one call into the core in this process: no network hop.
//
// One admission step, as the gateway's (host/http/admission.ts): CONNECT in any spelling
// is refused; then the token. A token with limits has its client checked against its
// ranges before anything of its body is read. A token with limits or a method scope has
// its body read once (reading.go), and a body of which that reading cannot know the calls
// is refused; the scope then lets calls through, splits a batch or refuses it, and the
// calls that go on to the handler are what the token's bucket counts, all at once. A
// token with neither reaches the handler with its body unread.
package gate

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"api-auth/go/core"
)

// Checker checks tokens and admits the calls of tokens with limits: a core.Verifier (many
// goroutines at once), or a fleet follower's.
type Checker interface {
	Authorize(header, path string, now int64) (core.Result, error)
	MethodAllowed(grant uint32, method string) (bool, error)
	Admit(serial, expiry uint64, grant, calls uint32, client [16]byte, nowNs int64) (core.Admission, error)
}

// Fence tells whether the node may serve protected requests at a time: a fleet follower
// answers false once its lease may have lapsed, before etcd can expire it.
type Fence interface {
	Serving(now time.Time) bool
}

// DefaultMaxBody is the gateway's default --upstream-max-body: the largest body the
// request of a token with a method scope or limits may carry.
const DefaultMaxBody = 1 << 20

// Options configure a Gate.
type Options struct {
	// Checker is required.
	Checker Checker
	// Fence, when set, makes every protected request 503 while it is closed.
	Fence Fence
	// Clock is the time of each request (default time.Now): tests move it instead of waiting.
	Clock func() time.Time
	// MaxBody bounds the body of the request of a token with a method scope or limits,
	// which is read whole (default DefaultMaxBody); a larger one is 413.
	MaxBody int64
	// PublicPaths are exact request paths that need no token.
	PublicPaths []string
	// ClientAddress is the client a request comes from, which a token's allowedClients
	// are matched against (default: the address of r.RemoteAddr, the connection's far
	// end). Behind a proxy, return the address the proxy vouches for, never one read from
	// a header the client can write. An invalid address is no client a token with limits
	// may be used from: over a Unix socket, say who the client is.
	ClientAddress func(r *http.Request) netip.Addr
}

// Gate checks requests before a handler sees them.
type Gate struct {
	checker     Checker
	fence       Fence
	clock       func() time.Time
	maxBody     int64
	publicPaths map[string]bool
	client      func(*http.Request) netip.Addr
	tooLarge    refusal
}

// Error is a configuration the gate refuses, with a stable code.
type Error struct{ Code, Message string }

func (e *Error) Error() string { return "api-auth gate: " + e.Message + " (" + e.Code + ")" }

// New validates the options once; the request path does no parsing it could have done here.
func New(opts Options) (*Gate, error) {
	if opts.Checker == nil {
		return nil, &Error{"GATE_NO_CHECKER", "Options.Checker is required: a core.Verifier or a fleet follower's"}
	}
	if opts.MaxBody < 0 {
		return nil, &Error{"GATE_BAD_MAX_BODY", "Options.MaxBody must be positive (0 for the default, 1 MiB)"}
	}
	g := &Gate{checker: opts.Checker, fence: opts.Fence, clock: opts.Clock, maxBody: opts.MaxBody, publicPaths: map[string]bool{},
		client: opts.ClientAddress}
	if g.clock == nil {
		g.clock = time.Now
	}
	if g.maxBody == 0 {
		g.maxBody = DefaultMaxBody
	}
	if g.client == nil {
		g.client = remoteAddress
	}
	for _, p := range opts.PublicPaths {
		if r, err := opts.Checker.Authorize("", p, 0); err != nil || r.Outcome == core.BadPath {
			return nil, &Error{"GATE_BAD_PUBLIC_PATH", "public path " + strconv.Quote(p) + " breaks the path rules (assembly/README.md, Paths)"}
		}
		g.publicPaths[p] = true
	}
	g.tooLarge = newRefusal(http.StatusRequestEntityTooLarge, "", rpcError(codeInvalidRequest, "request body exceeds "+strconv.FormatInt(g.maxBody, 10)+" bytes", "null")+"\n")
	return g, nil
}

// Wrap guards next: it sees only requests whose token grants their path, whose every
// JSON-RPC call a token's method scope allows, and whose calls a token's limits admit.
func (g *Gate) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Some servers take methods without regard to case: no spelling of CONNECT reaches
		// a handler that might open a tunnel, on any path, public or not.
		if strings.EqualFold(r.Method, http.MethodConnect) {
			// Whatever follows the head may be a tunnel's bytes, not a next request.
			w.Header()["Connection"] = []string{"close"}
			connectRefused.write(w)
			return
		}
		// The path as it came on the wire, up to its first "?": the path the core judges is
		// the path the handler serves.
		path := r.RequestURI
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		if g.publicPaths[path] {
			next.ServeHTTP(w, r)
			return
		}
		now := g.clock()
		if g.fence != nil && !g.fence.Serving(now) {
			g.refuse(w, r, unavailable)
			return
		}
		result, err := g.checker.Authorize(headerValue(r.Header, "Authorization"), path, now.Unix())
		if err != nil {
			// A core that failed cannot vouch for the token.
			refusals[unavailable].write(w)
			return
		}
		switch result.Outcome {
		case core.Valid:
			next.ServeHTTP(w, r)
		case core.Scoped:
			g.admit(w, r, next, admission{grant: result.Grant, scoped: true, now: now})
		case core.Limited:
			g.admit(w, r, next, admission{grant: result.Grant, serial: result.Serial, expiry: result.Expiry, scoped: result.Scoped, limited: true, now: now})
		default:
			g.refuse(w, r, result.Outcome)
		}
	})
}

// refuseReadMax is how much of a refused request's body is read for its call's id, as the
// gateway reads (host/http/admission.ts, MAX_BODY_BYTES); past it, the refusal keeps id 1.
const refuseReadMax = 64 * 1024

// refuse writes the refusal of `outcome`. For a POST whose body is one JSON-RPC call, the
// answer carries that call's id, as the gateway's does: the body is read first, by the one
// reading (ReadCalls). Without one call (no body, a batch, a notification, a body that is
// not a call, one past refuseReadMax), the original node's body with id 1.
func (g *Gate) refuse(w http.ResponseWriter, r *http.Request, outcome core.Outcome) {
	refusal := &refusals[outcome]
	if r.Method != http.MethodPost || r.ContentLength == 0 || !identityEncoding(r.Header) {
		refusal.write(w)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, refuseReadMax+1))
	if err != nil || len(body) > refuseReadMax {
		// The rest of the body is not read: the connection cannot carry another request.
		w.Header()["Connection"] = []string{"close"}
		refusal.write(w)
		return
	}
	reading := ReadCalls(body)
	id := reading.ID
	if reading.Problem == Readable {
		id = ""
		if !reading.Batch {
			id = reading.Calls[0].ID
		}
	}
	refusal.writeWithID(w, id)
}

// identityEncoding is whether the body is sent as it is (no Content-Encoding, or identity):
// only such a body is read for its id, as the gateway reads it.
func identityEncoding(h http.Header) bool {
	v := headerValue(h, "Content-Encoding")
	return v == "" || strings.EqualFold(strings.TrimSpace(v), "identity")
}

// headerValue is a header's first value as the gateway's HTTP layer (uWebSockets.js) hands
// it over: without the bytes it trims off both ends, space, tab and every byte from 0x80
// to 0xFF, where net/http trims only space and tab. No token, scheme or coding name holds
// such a byte, so the trim changes what no credential means; the gateway, which sees only
// the trimmed value, could not refuse those bytes, so the Go gate takes the value as the
// gateway does, and both judge the same bytes alike.
func headerValue(h http.Header, name string) string {
	v := h[name]
	if len(v) == 0 {
		return ""
	}
	return trimValue(v[0])
}

func trimValue(s string) string {
	for len(s) > 0 && trimmed(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && trimmed(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func trimmed(b byte) bool { return b == ' ' || b == '\t' || b >= 0x80 }

// remoteAddress is the connection's far end: ClientAddress's default.
func remoteAddress(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return addr.WithZone("")
}

// admission is a request of a token with a method scope or limits, admitted by its path.
type admission struct {
	grant           uint32
	serial          uint64
	expiry          uint64
	scoped, limited bool
	client          [16]byte
	now             time.Time
}

// admit reads the whole body (bounded), checks its calls against the scope and the
// limits, and hands the handler the same bytes, or the allowed calls of a split batch.
func (g *Gate) admit(w http.ResponseWriter, r *http.Request, next http.Handler, a admission) {
	if a.limited {
		// The client first, before anything of the body is read or judged: from a client
		// its ranges do not hold, a token learns nothing more.
		addr := g.client(r)
		if !addr.IsValid() {
			refusals[core.Limited].write(w)
			return
		}
		// IPv4 as IPv4-mapped, as the core takes it (host/http/client-address.ts, addressBytes).
		a.client = addr.As16()
		if !g.admitCalls(w, a, 0, "null") {
			return
		}
	}
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		if a.scoped {
			g.unreadable(w, a, Reading{Problem: NoBody, At: -1})
		} else if g.admitCalls(w, a, 1, "null") {
			next.ServeHTTP(w, r)
		}
		return
	}
	if r.ContentLength > g.maxBody {
		g.tooLarge.write(w)
		return
	}
	if compressed(r.Header) {
		g.unreadable(w, a, Reading{Problem: Compressed, At: -1})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, g.maxBody+1))
	if err != nil {
		// A body that ended before its framing did (a cut chunk, a connection gone): what
		// follows on the connection is no request.
		w.Header()["Connection"] = []string{"close"}
		bodyUnreadable.write(w)
		return
	}
	if int64(len(body)) > g.maxBody {
		w.Header().Set("Connection", "close")
		g.tooLarge.write(w)
		return
	}
	reading := ReadCalls(body)
	if reading.Problem != Readable {
		g.unreadable(w, a, reading)
		return
	}
	calls := len(reading.Calls)
	var verdict scopeVerdict
	if a.scoped {
		verdict = judgeScope(g.checker, a.grant, reading, body)
		if verdict.text != "" {
			// A refused call is a JSON-RPC error of a well-formed request, which Ethereum
			// clients read only from a 200. No call reaches the node, so none is counted.
			writeJSON(w, http.StatusOK, "", verdict.text+"\n")
			return
		}
		if verdict.split != nil {
			calls = verdict.split.forwarded
		}
	}
	if a.limited {
		id := "null"
		if !reading.Batch {
			id = idOrNull(reading.Calls[0].ID)
		}
		// A batch counts as its calls, all at once: one of more calls than the burst is
		// never let through, and spends nothing.
		if !g.admitCalls(w, a, uint32(calls), id) {
			return
		}
	}
	if verdict.split != nil {
		g.splitBatch(w, r, next, verdict.split)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	next.ServeHTTP(w, r)
}

// admitCalls counts calls (0: only the client is checked) against the token's limits,
// and answers a refusal with id (JSON text); whether they were admitted.
func (g *Gate) admitCalls(w http.ResponseWriter, a admission, calls uint32, id string) bool {
	admitted, err := g.checker.Admit(a.serial, a.expiry, a.grant, calls, a.client, a.now.UnixNano())
	if err != nil {
		refusals[unavailable].write(w)
		return false
	}
	if admitted.Result == core.Admitted {
		return true
	}
	writeLimitRefusal(w, admitted, calls, id)
	return false
}

// unreadable refuses a body of which the reading cannot know the calls: as a scope's
// refusal (403 insufficient_scope) when the token has a method scope, else as a request
// its limits cannot count (400).
func (g *Gate) unreadable(w http.ResponseWriter, a admission, reading Reading) {
	id := idOrNull(reading.ID)
	if a.scoped {
		writeJSON(w, http.StatusForbidden, insufficientScope, rpcError(codeInsufficientScope, scopedPrefix+unreadableReason(reading), id)+"\n")
		return
	}
	writeJSON(w, http.StatusBadRequest, "", rpcError(codeInvalidRequest, limitedPrefix+unreadableReason(reading), id)+"\n")
}

// compressed tells whether a request's Content-Encoding names any coding but identity:
// the gate reads no body that the node would decode into other calls.
func compressed(h http.Header) bool {
	for _, line := range h["Content-Encoding"] {
		for _, coding := range strings.Split(line, ",") {
			if coding = trimValue(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return true
			}
		}
	}
	return false
}

// splitBatch hands the handler the allowed calls of a batch, as one batch, and answers
// with its answer merged with the refusals; an answer that is not a 2xx batch goes to the
// client as the handler wrote it.
func (g *Gate) splitBatch(w http.ResponseWriter, r *http.Request, next http.Handler, split *scopeSplit) {
	r.Body = io.NopCloser(bytes.NewReader(split.forward))
	r.ContentLength = int64(len(split.forward))
	r.Header.Del("Content-Length")
	r.Header.Del("Accept-Encoding")
	answer := &heldAnswer{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(answer, r)
	encoding := answer.header.Get("Content-Encoding")
	if answer.status >= 200 && answer.status < 300 && (encoding == "" || encoding == "identity") {
		if merged, ok := split.merge(answer.body.Bytes()); ok {
			h := w.Header()
			h["Content-Type"] = contentTypeJSON
			h["Content-Length"] = []string{strconv.Itoa(len(merged) + 1)}
			w.WriteHeader(http.StatusOK)
			w.Write(append(merged, '\n'))
			return
		}
	}
	for name, values := range answer.header {
		w.Header()[name] = values
	}
	w.WriteHeader(answer.status)
	w.Write(answer.body.Bytes())
}

// heldAnswer is a handler's answer held whole, to be merged before it is written.
type heldAnswer struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (a *heldAnswer) Header() http.Header { return a.header }

func (a *heldAnswer) WriteHeader(status int) {
	if !a.wrote {
		a.status, a.wrote = status, true
	}
}

func (a *heldAnswer) Write(p []byte) (int, error) {
	a.wrote = true
	return a.body.Write(p)
}
