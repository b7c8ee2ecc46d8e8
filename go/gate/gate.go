// Package gate guards a net/http handler with api-auth's tokens, as the original node's
// WrapHandler did and as api-auth's gateway does: `Authorization: Bearer <token>`, the
// token's endpoints and its method scope, every refusal answered exactly as the gateway
// answers it (statuses, JSON-RPC bodies, WWW-Authenticate). A check is one call into the
// core in this process: no network hop.
package gate

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"api-auth/go/core"
)

// Checker checks tokens: a core.Verifier (many goroutines at once), or a fleet follower's.
type Checker interface {
	Authorize(header, path string, now int64) (core.Result, error)
	MethodAllowed(grant uint32, method string) (bool, error)
}

// Fence tells whether the node may serve protected requests at a time: a fleet follower
// answers false once its lease may have lapsed, before etcd can expire it.
type Fence interface {
	Serving(now time.Time) bool
}

// DefaultMaxBody is the gateway's default --upstream-max-body: the largest body a scoped
// token's request may carry.
const DefaultMaxBody = 1 << 20

// Options configure a Gate.
type Options struct {
	// Checker is required.
	Checker Checker
	// Fence, when set, makes every protected request 503 while it is closed.
	Fence Fence
	// Clock is the time of each request (default time.Now): tests move it instead of waiting.
	Clock func() time.Time
	// MaxBody bounds the body of a scoped token's request (default DefaultMaxBody); a larger one is 413.
	MaxBody int64
	// PublicPaths are exact request paths that need no token.
	PublicPaths []string
}

// Gate checks requests before a handler sees them.
type Gate struct {
	checker     Checker
	fence       Fence
	clock       func() time.Time
	maxBody     int64
	publicPaths map[string]bool
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
	g := &Gate{checker: opts.Checker, fence: opts.Fence, clock: opts.Clock, maxBody: opts.MaxBody, publicPaths: map[string]bool{}}
	if g.clock == nil {
		g.clock = time.Now
	}
	if g.maxBody == 0 {
		g.maxBody = DefaultMaxBody
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

// Wrap guards next: it sees only requests whose token grants their path and, for a
// token with a method scope, whose every JSON-RPC call is allowed.
func (g *Gate) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			refusals[unavailable].write(w)
			return
		}
		result, err := g.checker.Authorize(firstHeader(r.Header, "Authorization"), path, now.Unix())
		if err != nil {
			// A core that failed cannot vouch for the token.
			refusals[unavailable].write(w)
			return
		}
		switch result.Outcome {
		case core.Valid:
			next.ServeHTTP(w, r)
		case core.Scoped:
			g.scoped(w, r, next, result.Grant)
		default:
			refusals[result.Outcome].write(w)
		}
	})
}

func firstHeader(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// scoped reads the whole body (bounded), checks its calls, and hands the handler the same bytes.
func (g *Gate) scoped(w http.ResponseWriter, r *http.Request, next http.Handler, grant uint32) {
	if r.ContentLength > g.maxBody {
		g.tooLarge.write(w)
		return
	}
	var body []byte
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, g.maxBody+1))
		if err != nil {
			return
		}
		if int64(len(body)) > g.maxBody {
			w.Header().Set("Connection", "close")
			g.tooLarge.write(w)
			return
		}
	}
	verdict := judgeScope(g.checker, grant, body)
	if verdict.split != nil {
		g.splitBatch(w, r, next, verdict.split)
		return
	}
	if verdict.text != "" {
		// A refused call is a JSON-RPC error of a well-formed request, which Ethereum
		// clients read only from a 200; a body that is not JSON-RPC has no call to answer.
		h := w.Header()
		h["Content-Type"] = contentTypeJSON
		status := http.StatusOK
		if verdict.forbidden {
			h["Www-Authenticate"] = []string{insufficientScope}
			status = http.StatusForbidden
		}
		h["Content-Length"] = []string{strconv.Itoa(len(verdict.text) + 1)}
		w.WriteHeader(status)
		io.WriteString(w, verdict.text+"\n")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	next.ServeHTTP(w, r)
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
