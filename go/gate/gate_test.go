package gate

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"api-auth/go/core"
)

const rpcPath = "/ext/bc/C/rpc"

type fixture struct {
	shared        *core.Shared
	now           time.Time
	open          bool
	token, scoped string
	server        *httptest.Server
	served        []string
}

func (f *fixture) Serving(now time.Time) bool { return f.open }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	s, err := core.NewShared(ctx, core.SharedOptions{WindowLog2: 12, Readers: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	f := &fixture{shared: s, now: time.Unix(1_800_000_000, 0), open: true}
	owner := s.Owner()
	if err := owner.SetKey([]byte("0123456789abcdef0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	plain, _ := owner.AddGrant([]string{rpcPath})
	methods, _ := owner.AddGrant([]string{rpcPath, "", "eth_blockNumber", "eth_get*"})
	f.token, _, _ = owner.Issue(plain, f.now.Unix(), 3600)
	f.scoped, _, _ = owner.Issue(methods, f.now.Unix(), 3600)
	g, err := New(Options{Checker: s.Verifier(), Fence: f, Clock: func() time.Time { return f.now }, PublicPaths: []string{"/ext/health"}, MaxBody: 4096})
	if err != nil {
		t.Fatal(err)
	}
	f.server = httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.served = append(f.served, r.URL.Path+" "+string(body))
		if len(body) > 0 && body[0] == '[' {
			// A batch: each call with an id answered with its method, in the reverse order.
			var calls []struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
			}
			json.Unmarshal(body, &calls)
			var answers []string
			for i := len(calls) - 1; i >= 0; i-- {
				if calls[i].ID != nil {
					answers = append(answers, `{"jsonrpc":"2.0","result":"`+calls[i].Method+`","id":`+string(calls[i].ID)+`}`)
				}
			}
			io.WriteString(w, "["+strings.Join(answers, ",")+"]")
			return
		}
		io.WriteString(w, `{"jsonrpc":"2.0","result":"0x1","id":1}`)
	})))
	t.Cleanup(f.server.Close)
	return f
}

type answer struct {
	status          int
	challenge, body string
	contentType     string
}

func (f *fixture) do(t *testing.T, method, path, authorization, body string) answer {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.server.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := f.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header.Get("WWW-Authenticate"), string(b), res.Header.Get("Content-Type")}
}

func unauthorized(message string) answer {
	return answer{401, "Bearer", `{"jsonrpc":"2.0","error":{"code":-32600,"message":"` + message + `"},"id":1}` + "\n", "application/json"}
}

func TestAGrantedTokenReachesTheHandler(t *testing.T) {
	f := newFixture(t)
	a := f.do(t, "POST", rpcPath+"?x=1", "Bearer "+f.token, `{"jsonrpc":"2.0","method":"eth_call","id":1}`)
	if a.status != 200 || len(f.served) != 1 || f.served[0] != rpcPath+` {"jsonrpc":"2.0","method":"eth_call","id":1}` {
		t.Fatalf("%+v %v", a, f.served)
	}
	if a := f.do(t, "GET", "/ext/health", "", ""); a.status != 200 {
		t.Errorf("a public path: %+v", a)
	}
}

func TestEachRefusalIsTheGatewaysAnswer(t *testing.T) {
	f := newFixture(t)
	forged := f.token[:70] + map[bool]string{true: "AAAAAA", false: "BBBBBB"}[f.token[70:] != "AAAAAA"]
	cases := []struct {
		name, method, path, authorization string
		want                              answer
	}{
		{"no token", "POST", rpcPath, "", unauthorized("auth token not provided")},
		{"not Bearer", "POST", rpcPath, "Basic " + f.token, unauthorized(`couldn't parse auth token. Header \"Authorization\" should be \"Bearer TOKEN.GOES.HERE\"`)},
		{"malformed", "POST", rpcPath, "Bearer abc", unauthorized("the provided auth token is invalid")},
		{"forged", "POST", rpcPath, "Bearer " + forged, unauthorized("the provided auth token is invalid: signature mismatch")},
		{"not granted", "POST", "/ext/info", "Bearer " + f.token, unauthorized("the provided auth token does not allow access to this endpoint")},
		{"bad path", "POST", "/ext/bc/%2e%2e/rpc", "Bearer " + f.token, answer{400, "", `{"jsonrpc":"2.0","error":{"code":-32600,"message":"invalid request path: dot or empty segments, \"\\\", and encoded \"/\", \"\\\", \".\", \"%\", \";\", \"?\", \"#\", controls, look-alikes or malformed UTF-8 are refused"},"id":1}` + "\n", "application/json"}},
	}
	for _, c := range cases {
		if got := f.do(t, c.method, c.path, c.authorization, ""); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	f.now = f.now.Add(3600 * time.Second)
	if got, want := f.do(t, "POST", rpcPath, "Bearer "+f.token, ""), unauthorized("the provided auth token is expired"); got != want {
		t.Errorf("expired: %+v", got)
	}
	f.now = f.now.Add(-1800 * time.Second)
	if _, _, err := f.shared.Owner().Revoke(f.token, f.now.Unix()); err != nil {
		t.Fatal(err)
	}
	if got, want := f.do(t, "POST", rpcPath, "Bearer "+f.token, ""), unauthorized("the provided auth token was revoked"); got != want {
		t.Errorf("revoked: %+v", got)
	}
	f.shared.Owner().BumpGeneration()
	if got, want := f.do(t, "POST", rpcPath, "Bearer "+f.scoped, ""), unauthorized("the provided auth token is invalid: issued under a previous password"); got != want {
		t.Errorf("earlier generation: %+v", got)
	}
	if len(f.served) != 0 {
		t.Errorf("refused requests reached the handler: %v", f.served)
	}
}

func TestAHeadRefusalHasNoBody(t *testing.T) {
	f := newFixture(t)
	if a := f.do(t, "HEAD", rpcPath, "", ""); a.status != 401 || a.body != "" || a.challenge != "Bearer" {
		t.Errorf("%+v", a)
	}
}

func TestAFencedNodeAnswers503(t *testing.T) {
	f := newFixture(t)
	f.open = false
	want := answer{503, "", `{"jsonrpc":"2.0","error":{"code":-32046,"message":"this api-auth gateway has lost touch with its fleet (etcd) and cannot vouch that it holds every revocation; it serves again by itself once it has caught up; meanwhile use another gateway"},"id":1}` + "\n", "application/json"}
	if got := f.do(t, "POST", rpcPath, "Bearer "+f.token, ""); got != want {
		t.Errorf("%+v", got)
	}
	f.open = true
	if got := f.do(t, "POST", rpcPath, "Bearer "+f.token, `{}`); got.status != 200 {
		t.Errorf("the fence opened again: %+v", got)
	}
}

// scopeRefusal is the answer to a body that is not JSON-RPC; callRefusal, to calls the scope does not allow.
func scopeRefusal(text string) answer {
	return answer{403, `Bearer error="insufficient_scope"`, text + "\n", "application/json"}
}

func callRefusal(text string) answer {
	return answer{200, "", text + "\n", "application/json"}
}

const scopedText = `the provided auth token allows only some JSON-RPC methods`

func TestMethodScopesInSingleCallsAndBatches(t *testing.T) {
	f := newFixture(t)
	auth := "Bearer " + f.scoped
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"eth_blockNumber","id":1}`,
		`{"jsonrpc":"2.0","method":"eth_getBalance","params":["0x0","latest"],"id":"a"}`,
		`[{"jsonrpc":"2.0","method":"eth_getCode","id":1},{"jsonrpc":"2.0","method":"eth_blockNumber"}]`,
	} {
		if a := f.do(t, "POST", rpcPath, auth, body); a.status != 200 {
			t.Errorf("%s: %+v", body, a)
		}
	}
	if len(f.served) != 3 || !strings.HasSuffix(f.served[2], `"eth_blockNumber"}]`) {
		t.Errorf("the handler got other bodies: %v", f.served)
	}
	e := func(message, id string) string {
		return `{"jsonrpc":"2.0","error":{"code":-32047,"message":"` + message + `"},"id":` + id + `}`
	}
	// A batch with some calls allowed: only those reach the handler, as one batch, and
	// the answers come back merged with the refusals, in the calls' order.
	split := `[{"jsonrpc":"2.0","method":"eth_blockNumber","id":1},{"jsonrpc":"2.0","method":"debug_traceTransaction","id":"x"},` +
		`{"jsonrpc":"2.0","method":"eth_call"},{"jsonrpc":"2.0","method":"eth_getCode","id":2.0}]`
	wantSplit := `[{"jsonrpc":"2.0","result":"eth_blockNumber","id":1},` + e(`the provided auth token does not allow method \"debug_traceTransaction\"`, `"x"`) +
		`,{"jsonrpc":"2.0","result":"eth_getCode","id":2.0}]`
	if got := f.do(t, "POST", rpcPath, auth, split); got != callRefusal(wantSplit) {
		t.Errorf("a split batch:\n got %+v\nwant %+v", got, callRefusal(wantSplit))
	}
	if len(f.served) != 4 || !strings.HasSuffix(f.served[3], `[{"jsonrpc":"2.0","method":"eth_blockNumber","id":1},{"jsonrpc":"2.0","method":"eth_getCode","id":2.0}]`) {
		t.Errorf("the handler got other than the allowed calls: %v", f.served)
	}
	refused := []struct {
		body, want string
		forbidden  bool
	}{
		{`{"jsonrpc":"2.0","method":"eth_sendRawTransaction","id":7}`, e(`the provided auth token does not allow method \"eth_sendRawTransaction\"`, "7"), false},
		{`[{"jsonrpc":"2.0","method":"debug_traceTransaction","id":"x"},{"jsonrpc":"2.0","method":"eth_call"}]`,
			"[" + e(`the provided auth token does not allow method \"debug_traceTransaction\"`, `"x"`) + "]", false},
		{`[{"jsonrpc":"2.0","method":"eth_call"}]`, e(`the provided auth token does not allow method \"eth_call\"`, "null"), false},
		{``, e(scopedText+`: the request must carry a JSON-RPC call or batch in its body, and it has none`, "null"), true},
		{`{"method":`, e(scopedText+`: the body is not one JSON value alone (nothing may follow it)`, "null"), true},
		{`{"method":"eth_blockNumber","id":1} []`, e(scopedText+`: the body is not one JSON value alone (nothing may follow it)`, "null"), true},
		{`[]`, e(scopedText+`: the batch is empty`, "null"), true},
		{`{"method":"eth_blockNumber","Method":"eth_sendRawTransaction","id":2}`, e(scopedText+`: the body names its method more than once (servers differ on which one counts)`, "2"), true},
		{`{"Method":"eth_blockNumber","id":3}`, e(scopedText+`: the body is not a JSON-RPC call (an object with a \"method\" string)`, "3"), true},
		{`[{"method":"eth_blockNumber","id":1},5]`, e(scopedText+`: call 1 of the batch is not a JSON-RPC call (an object with a \"method\" string)`, "null"), true},
		{`{"method":"` + strings.Repeat("x", 70) + `","id":1}`, e(`the provided auth token does not allow method \"`+strings.Repeat("x", 64)+`…\"`, "1"), false},
		{"\ufeff" + `{"method":"eth_blockNumber","id":1}`, e(scopedText+`: the body starts with a byte order mark, which nodes read differently`, "null"), true},
		{`{"method":"eth_call","id":[1]}`, e(`the provided auth token does not allow method \"eth_call\"`, "null"), false},
		{`{"method":"a<b` + "\u2028" + `\u0001😀","id":1.50}`, e(`the provided auth token does not allow method \"a<b`+"\u2028"+`\\u0001😀\"`, "1.50"), false},
		{`{"method":"` + strings.Repeat("😀", 40) + `","id":1}`, e(`the provided auth token does not allow method \"`+strings.Repeat("😀", 40)+`…\"`, "1"), false},
	}
	for _, c := range refused {
		want := callRefusal(c.want)
		if c.forbidden {
			want = scopeRefusal(c.want)
		}
		if got := f.do(t, "POST", rpcPath, auth, c.body); got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.body, got, want)
		}
	}
	if len(f.served) != 4 {
		t.Errorf("refused bodies reached the handler: %v", f.served[4:])
	}
	big := `{"method":"eth_blockNumber","id":1,"pad":"` + strings.Repeat("x", 5000) + `"}`
	if got := f.do(t, "POST", rpcPath, auth, big); got.status != 413 || got.body != `{"jsonrpc":"2.0","error":{"code":-32600,"message":"request body exceeds 4096 bytes"},"id":null}`+"\n" {
		t.Errorf("a body over MaxBody: %+v", got)
	}
}

func TestOptionsAreCheckedOnce(t *testing.T) {
	f := newFixture(t)
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "GATE_NO_CHECKER") {
		t.Errorf("no checker: %v", err)
	}
	if _, err := New(Options{Checker: f.shared.Verifier(), PublicPaths: []string{"/a/../b"}}); err == nil || !strings.Contains(err.Error(), "GATE_BAD_PUBLIC_PATH") {
		t.Errorf("a bad public path: %v", err)
	}
}

// issue makes a token of a grant of entries (api-auth's grantEntries: endpoints, then ""
// and the methods, then "" and the limits), valid for an hour from the fixture's now.
func (f *fixture) issue(t *testing.T, entries ...string) string {
	t.Helper()
	owner := f.shared.Owner()
	grant, err := owner.AddGrant(entries)
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := owner.Issue(grant, f.now.Unix(), 86400)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// The gateway's answers to a token's limits (host/http/refusals.ts).
func rateLimited(seconds, id string) answer {
	return answer{429, "", `{"jsonrpc":"2.0","error":{"code":-32005,"message":"the provided auth token is past its rate limit; retry in ` + seconds + ` s"},"id":` + id + "}\n", "application/json"}
}

func overBurst(calls, id string) answer {
	return answer{429, "", `{"jsonrpc":"2.0","error":{"code":-32005,"message":"the provided auth token's burst is smaller than these ` + calls + ` calls at once; send fewer calls at a time"},"id":` + id + "}\n", "application/json"}
}

var clientNotAllowed = answer{403, "", `{"jsonrpc":"2.0","error":{"code":-32048,"message":"the provided auth token may not be used from this client"},"id":1}` + "\n", "application/json"}

func limitsRefusal(reason, id string) answer {
	return answer{400, "", `{"jsonrpc":"2.0","error":{"code":-32600,"message":"the provided auth token has limits, so its request must be one JSON-RPC call or a batch that api-auth reads exactly: ` + reason + `"},"id":` + id + "}\n", "application/json"}
}

func batchOf(n int, method string) string {
	calls := make([]string, n)
	for k := range calls {
		calls[k] = `{"jsonrpc":"2.0","method":"` + method + `","id":` + strconv.Itoa(k+1) + `}`
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// A token with limits is served, its calls counted by the core's bucket as the node runs
// them: a lone call one, a batch its calls, a request without a body one; past the rate,
// 429 with the wait in whole seconds, and the call's id.
func TestATokenWithLimitsIsAdmittedByItsBucket(t *testing.T) {
	f := newFixture(t)
	auth := "Bearer " + f.issue(t, rpcPath, "", "", "rate 1/h", "burst 4")
	if a := f.do(t, "POST", rpcPath, auth, `{"jsonrpc":"2.0","method":"eth_call","id":"a"}`); a.status != 200 {
		t.Fatalf("the first call: %+v", a)
	}
	if a := f.do(t, "POST", rpcPath, auth, batchOf(2, "eth_chainId")); a.status != 200 {
		t.Fatalf("a batch of 2: %+v", a)
	}
	if a := f.do(t, "GET", rpcPath, auth, ""); a.status != 200 {
		t.Fatalf("a request without a body: %+v", a)
	}
	// Four calls spent in an hour's bucket of four: the next waits one interval, 3600 s.
	if got, want := f.do(t, "POST", rpcPath, auth, `{"jsonrpc":"2.0","method":"eth_call","id":12345678901234567890}`), rateLimited("3600", "12345678901234567890"); got != want {
		t.Errorf("past the rate:\n got %+v\nwant %+v", got, want)
	}
	if got, want := f.do(t, "POST", rpcPath, auth, batchOf(1, "eth_call")), rateLimited("3600", "null"); got != want {
		t.Errorf("a batch past the rate:\n got %+v\nwant %+v", got, want)
	}
	if got, want := f.do(t, "GET", rpcPath, auth, ""), rateLimited("3600", "null"); got != want {
		t.Errorf("a request without a body past the rate:\n got %+v\nwant %+v", got, want)
	}
	f.now = f.now.Add(1800 * time.Second)
	if got, want := f.do(t, "POST", rpcPath, auth, batchOf(1, "eth_call")), rateLimited("1800", "null"); got != want {
		t.Errorf("half the wait later:\n got %+v\nwant %+v", got, want)
	}
	f.now = f.now.Add(1800*time.Second - time.Millisecond)
	if got, want := f.do(t, "POST", rpcPath, auth, batchOf(1, "eth_call")), rateLimited("1", "null"); got != want {
		t.Errorf("a millisecond before: the wait rounds up to a second:\n got %+v\nwant %+v", got, want)
	}
	f.now = f.now.Add(time.Millisecond)
	if a := f.do(t, "POST", rpcPath, auth, `{"jsonrpc":"2.0","method":"eth_call","id":1}`); a.status != 200 {
		t.Errorf("an interval later: %+v", a)
	}
	if len(f.served) != 4 {
		t.Errorf("the handler served %d requests, want 4: %v", len(f.served), f.served)
	}
	if f.served[1] != rpcPath+" "+batchOf(2, "eth_chainId") {
		t.Errorf("the batch reached the handler as %q", f.served[1])
	}
}

// A quota counts calls per calendar day (UTC) in the same core as the gateway's: past it,
// 429 with the reset's time in the message and data.resetsAt, byte for byte the
// gateway's answer; a refused batch spends nothing, and the next day counts from 0.
func TestAQuotaRefusesPastItsDayUntilMidnight(t *testing.T) {
	f := newFixture(t)
	auth := "Bearer " + f.issue(t, rpcPath, "", "", "quota 3/day")
	if a := f.do(t, "POST", rpcPath, auth, batchOf(2, "eth_call")); a.status != 200 {
		t.Fatalf("a batch of 2 of 3: %+v", a)
	}
	// 2027-01-15T08:00:00Z: the day resets at 2027-01-16T00:00:00Z.
	spent := func(id string) answer {
		return answer{429, "", `{"jsonrpc":"2.0","error":{"code":-32005,"message":"the provided auth token's quota for this period is spent; ` +
			`it resets at 2027-01-16T00:00:00Z","data":{"resetsAt":"2027-01-16T00:00:00Z"}},"id":` + id + "}\n", "application/json"}
	}
	if got, want := f.do(t, "POST", rpcPath, auth, batchOf(2, "eth_call")), spent("null"); got != want {
		t.Errorf("a batch of 2 with 1 left:\n got %+v\nwant %+v", got, want)
	}
	if a := f.do(t, "POST", rpcPath, auth, `{"jsonrpc":"2.0","method":"eth_call","id":7}`); a.status != 200 {
		t.Errorf("the refused batch spent nothing: %+v", a)
	}
	if got, want := f.do(t, "POST", rpcPath, auth, `{"jsonrpc":"2.0","method":"eth_call","id":8}`), spent("8"); got != want {
		t.Errorf("spent:\n got %+v\nwant %+v", got, want)
	}
	f.now = time.Unix(1_800_057_600, 0)
	if a := f.do(t, "POST", rpcPath, auth, batchOf(3, "eth_call")); a.status != 200 {
		t.Errorf("the next day: %+v", a)
	}
	if len(f.served) != 3 {
		t.Errorf("served: %v", f.served)
	}
}

// A batch of more calls than the burst can never pass: it is told so, with no
// Retry-After, and spends nothing, as the gateway does.
func TestABatchOverTheBurstSpendsNothing(t *testing.T) {
	f := newFixture(t)
	auth := "Bearer " + f.issue(t, rpcPath, "", "", "rate 1/h", "burst 3")
	if got, want := f.do(t, "POST", rpcPath, auth, batchOf(4, "eth_call")), overBurst("4", "null"); got != want {
		t.Errorf("4 calls on a burst of 3:\n got %+v\nwant %+v", got, want)
	}
	if a := f.do(t, "POST", rpcPath, auth, batchOf(3, "eth_call")); a.status != 200 {
		t.Errorf("3 calls after it: %+v", a)
	}
	if len(f.served) != 1 {
		t.Errorf("served: %v", f.served)
	}
}

// A body whose calls the reading cannot know is refused for a token with limits, before
// anything is counted: a batch with a byte after it is not one call, though a node that
// reads only the first JSON value would execute every call in it.
func TestATokenWithLimitsSendsOnlyBodiesReadExactly(t *testing.T) {
	f := newFixture(t)
	auth := "Bearer " + f.issue(t, rpcPath, "", "", "rate 1/h", "burst 3")
	for _, c := range []struct {
		body string
		want answer
	}{
		{batchOf(20, "eth_blockNumber") + "x", limitsRefusal("the body is not one JSON value alone (nothing may follow it)", "null")},
		{batchOf(20, "eth_blockNumber") + "]", limitsRefusal("the body is not one JSON value alone (nothing may follow it)", "null")},
		{batchOf(20, "eth_blockNumber") + " []", limitsRefusal("the body is not one JSON value alone (nothing may follow it)", "null")},
		{"\xef\xbb\xbf" + batchOf(1, "eth_call"), limitsRefusal("the body starts with a byte order mark, which nodes read differently", "null")},
		{"{\"jsonrpc\":\"2.0\",\"method\":\"eth_call\",\"id\":\"\xff\"}", limitsRefusal("the body is not UTF-8", "null")},
		{`[]`, limitsRefusal("the batch is empty", "null")},
		{`{"jsonrpc":"2.0","Method":"eth_call","id":7}`, limitsRefusal(`the body is not a JSON-RPC call (an object with a \"method\" string)`, "7")},
		{`[{"method":"a","id":1},{"method":"b","METHOD":"c","id":2}]`, limitsRefusal("call 1 of the batch names its method more than once (servers differ on which one counts)", "null")},
		{`{"method":"m","id":1,"params":` + strings.Repeat("[", 129) + strings.Repeat("]", 129) + `}`, limitsRefusal("the body nests deeper than 128", "null")},
	} {
		if got := f.do(t, "POST", rpcPath, auth, c.body); got != c.want {
			t.Errorf("%.40q:\n got %+v\nwant %+v", c.body, got, c.want)
		}
	}
	chunked := f.doChunked(t, auth, "")
	if want := limitsRefusal("the request must carry a JSON-RPC call or batch in its body, and it has none", "null"); chunked != want {
		t.Errorf("a chunked body of no bytes:\n got %+v\nwant %+v", chunked, want)
	}
	gzip := f.doEncoded(t, auth, "gzip", batchOf(1, "eth_call"))
	if want := limitsRefusal("the body is compressed (Content-Encoding), which api-auth does not read", "null"); gzip != want {
		t.Errorf("a gzip body:\n got %+v\nwant %+v", gzip, want)
	}
	if a := f.doEncoded(t, auth, "Identity", batchOf(1, "eth_call")); a.status != 200 {
		t.Errorf("Content-Encoding: identity: %+v", a)
	}
	if a := f.do(t, "POST", rpcPath, auth, batchOf(2, "eth_call")); a.status != 200 {
		t.Errorf("nothing was spent by the refusals: %+v", a)
	}
	if len(f.served) != 2 {
		t.Errorf("served: %v", f.served)
	}
}

func (f *fixture) doChunked(t *testing.T, authorization, body string) answer {
	t.Helper()
	req, err := http.NewRequest("POST", f.server.URL+rpcPath, io.NopCloser(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	req.Header.Set("Authorization", authorization)
	return f.send(t, req)
}

func (f *fixture) doEncoded(t *testing.T, authorization, encoding, body string) answer {
	t.Helper()
	req, err := http.NewRequest("POST", f.server.URL+rpcPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Content-Encoding", encoding)
	return f.send(t, req)
}

func (f *fixture) send(t *testing.T, req *http.Request) answer {
	t.Helper()
	res, err := f.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header.Get("WWW-Authenticate"), string(b), res.Header.Get("Content-Type")}
}

// allowedClients are matched against the connection's far end (IPv4 as IPv4-mapped, as
// the core takes it), or against the address Options.ClientAddress names; a client they
// do not hold is refused before its body is read, naming neither.
func TestAllowedClientsHoldTheClientAddress(t *testing.T) {
	f := newFixture(t)
	loopback := "Bearer " + f.issue(t, rpcPath, "", "", "client 00000000000000000000ffff7f000001/128")
	elsewhere := "Bearer " + f.issue(t, rpcPath, "", "", "client 00000000000000000000ffffc0000200/120")
	if a := f.do(t, "POST", rpcPath, loopback, batchOf(1, "eth_call")); a.status != 200 {
		t.Errorf("127.0.0.1 from 127.0.0.1: %+v", a)
	}
	if got := f.do(t, "POST", rpcPath, elsewhere, `{"method":`); got != clientNotAllowed {
		t.Errorf("192.0.2.0/24 from 127.0.0.1, a body that is not JSON:\n got %+v\nwant %+v", got, clientNotAllowed)
	}
	var seen string
	g, err := New(Options{Checker: f.shared.Verifier(), Clock: func() time.Time { return f.now }, ClientAddress: func(r *http.Request) netip.Addr {
		seen = r.RemoteAddr
		return netip.MustParseAddr("192.0.2.7")
	}})
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	server := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ })))
	defer server.Close()
	for token, want := range map[string]int{elsewhere: 200, loopback: 403} {
		req, _ := http.NewRequest("POST", server.URL+rpcPath, strings.NewReader(batchOf(1, "eth_call")))
		req.Header.Set("Authorization", token)
		res, err := server.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("from 192.0.2.7 as ClientAddress says: %d, want %d", res.StatusCode, want)
		}
	}
	if served != 1 || seen == "" {
		t.Errorf("served %d, ClientAddress saw %q", served, seen)
	}
	unknown, err := New(Options{Checker: f.shared.Verifier(), ClientAddress: func(*http.Request) netip.Addr { return netip.Addr{} }})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", rpcPath, strings.NewReader(batchOf(1, "eth_call")))
	req.Header.Set("Authorization", "Bearer "+f.issue(t, rpcPath, "", "", "rate 10/s", "burst 10"))
	unknown.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })).ServeHTTP(rec, req)
	if rec.Code != 403 || served != 1 {
		t.Errorf("a client that has no address: %d, served %d", rec.Code, served)
	}
}

// With a method scope and limits, the scope judges first, and only the calls that go on
// to the handler are counted: a split batch counts its allowed calls, a refused one none.
func TestScopeAndLimitsCountTheCallsForwarded(t *testing.T) {
	f := newFixture(t)
	auth := "Bearer " + f.issue(t, rpcPath, "", "eth_blockNumber", "eth_get*", "", "rate 1/h", "burst 3")
	split := `[{"jsonrpc":"2.0","method":"eth_blockNumber","id":1},{"jsonrpc":"2.0","method":"eth_sendRawTransaction","id":2},{"jsonrpc":"2.0","method":"eth_getCode","id":3}]`
	if a := f.do(t, "POST", rpcPath, auth, split); a.status != 200 || !strings.Contains(a.body, `does not allow method \"eth_sendRawTransaction\"`) {
		t.Fatalf("a split batch: %+v", a)
	}
	if a := f.do(t, "POST", rpcPath, auth, `{"jsonrpc":"2.0","method":"eth_sendRawTransaction","id":4}`); a.status != 200 || !strings.Contains(a.body, `"code":-32047`) {
		t.Errorf("a refused call: %+v", a)
	}
	want := answer{403, `Bearer error="insufficient_scope"`, `{"jsonrpc":"2.0","error":{"code":-32047,"message":"the provided auth token allows only some JSON-RPC methods: the body is not one JSON value alone (nothing may follow it)"},"id":null}` + "\n", "application/json"}
	if got := f.do(t, "POST", rpcPath, auth, batchOf(1, "eth_blockNumber")+"x"); got != want {
		t.Errorf("a body not read, with a scope:\n got %+v\nwant %+v", got, want)
	}
	if a := f.do(t, "POST", rpcPath, auth, `{"jsonrpc":"2.0","method":"eth_blockNumber","id":5}`); a.status != 200 || a.body != `{"jsonrpc":"2.0","result":"0x1","id":1}` {
		t.Errorf("the third call counted: %+v", a)
	}
	if got, want := f.do(t, "POST", rpcPath, auth, `{"jsonrpc":"2.0","method":"eth_blockNumber","id":6}`), rateLimited("3600", "6"); got != want {
		t.Errorf("the fourth:\n got %+v\nwant %+v", got, want)
	}
	if len(f.served) != 2 || f.served[0] != rpcPath+` [{"jsonrpc":"2.0","method":"eth_blockNumber","id":1},{"jsonrpc":"2.0","method":"eth_getCode","id":3}]` {
		t.Errorf("served: %v", f.served)
	}
}

// When the core's limits table has no slot for a token, its request gets 503 with
// Retry-After 1, as on the gateway.
func TestAFullLimitsTableAnswers503(t *testing.T) {
	ctx := context.Background()
	s, err := core.NewShared(ctx, core.SharedOptions{WindowLog2: 17, Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	owner := s.Owner()
	owner.SetKey([]byte("0123456789abcdef0123456789abcdef"))
	grant, err := owner.AddGrant([]string{rpcPath, "", "", "rate 10/s", "burst 10"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	var full string
	for n := 0; full == "" && n < 1<<17; n++ {
		token, claims, err := owner.Issue(grant, now.Unix(), 3600)
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.Verifier().Admit(claims.Serial, claims.Expiry, grant, 1, netip.MustParseAddr("127.0.0.1").As16(), now.UnixNano())
		if err != nil {
			t.Fatal(err)
		}
		if a.Result == core.LimitTableFull {
			full = token
		}
	}
	if full == "" {
		t.Fatal("the limits table never filled")
	}
	g, err := New(Options{Checker: s.Verifier(), Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", rpcPath, strings.NewReader(batchOf(1, "eth_call")))
	req.Header.Set("Authorization", "Bearer "+full)
	g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("served") })).ServeHTTP(rec, req)
	want := `{"jsonrpc":"2.0","error":{"code":-32046,"message":"this api-auth gateway tracks as many tokens with limits as it can; retry later, or use a token without limits"},"id":1}` + "\n"
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || rec.Body.String() != want {
		t.Errorf("%d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}

// No spelling of CONNECT reaches the handler, on any path (the gateway's 405).
func TestConnectIsRefusedInAnySpelling(t *testing.T) {
	f := newFixture(t)
	want := answer{405, "", `{"jsonrpc":"2.0","error":{"code":-32600,"message":"HTTP method CONNECT is not allowed: api-auth forwards requests, it opens no tunnels"},"id":null}` + "\n", "application/json"}
	for _, method := range []string{"CONNECT", "connect", "Connect"} {
		for _, path := range []string{rpcPath, "/ext/health"} {
			if got := f.do(t, method, path, "Bearer "+f.token, ""); got != want {
				t.Errorf("%s %s:\n got %+v\nwant %+v", method, path, got, want)
			}
		}
	}
	if len(f.served) != 0 {
		t.Errorf("served: %v", f.served)
	}
}

// A refusal of a request whose body is one JSON-RPC call carries that call's id, as the
// gateway's does (test/http/refusal-ids.test.ts); without one call, the original node's id 1.
func TestARefusalEchoesTheCallsID(t *testing.T) {
	f := newFixture(t)
	invalid := func(id string) answer {
		return answer{401, "Bearer", `{"jsonrpc":"2.0","error":{"code":-32600,"message":"the provided auth token is invalid"},"id":` + id + `}` + "\n", "application/json"}
	}
	cases := []struct{ name, method, body, id string }{
		{"a string id", "POST", `{"jsonrpc":"2.0","id":"req-7","method":"eth_chainId"}`, `"req-7"`},
		{"a number's digits as sent", "POST", `{"jsonrpc":"2.0","method":"eth_chainId","id":12345678901234567890}`, `12345678901234567890`},
		{"an exponent as written", "POST", `{"jsonrpc":"2.0","id":1e2,"method":"eth_chainId"}`, `1e2`},
		{"an id of null", "POST", `{"jsonrpc":"2.0","id":null,"method":"eth_chainId"}`, `null`},
		{"a batch", "POST", `[{"jsonrpc":"2.0","id":5,"method":"eth_chainId"}]`, `1`},
		{"a notification", "POST", `{"jsonrpc":"2.0","method":"eth_chainId"}`, `1`},
		{"not JSON", "POST", `{"jsonrpc":"2.0","id":5,`, `1`},
		{"two values", "POST", `{"jsonrpc":"2.0","id":5,"method":"a"}{"jsonrpc":"2.0","id":6,"method":"b"}`, `1`},
		{"past 64 KiB", "POST", `{"jsonrpc":"2.0","id":"big","method":"eth_call","params":["` + strings.Repeat("a", 70_000) + `"]}`, `1`},
		{"a GET", "GET", "", `1`},
	}
	for _, c := range cases {
		if a := f.do(t, c.method, rpcPath, "Bearer abc", c.body); a != invalid(c.id) {
			t.Errorf("%s: %+v, want id %s", c.name, a, c.id)
		}
	}
	if a := f.do(t, "POST", "/ext/bc/%2e%2e/rpc", "Bearer "+f.token, `{"jsonrpc":"2.0","id":"p","method":"eth_chainId"}`); a.status != 400 || !strings.HasSuffix(a.body, `,"id":"p"}`+"\n") {
		t.Errorf("a bad path: %+v", a)
	}
}
