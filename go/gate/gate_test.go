package gate

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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
		{`{"method":`, e(scopedText+`: the body is not valid UTF-8 JSON`, "null"), true},
		{`[]`, e(scopedText+`: the batch is empty`, "null"), true},
		{`{"method":"eth_blockNumber","Method":"eth_sendRawTransaction","id":2}`, e(scopedText+`: the body names its method more than once (servers differ on which one counts)`, "2"), true},
		{`{"Method":"eth_blockNumber","id":3}`, e(scopedText+`: the body is not a JSON-RPC call (an object with a \"method\" string)`, "3"), true},
		{`[{"method":"eth_blockNumber","id":1},5]`, "[" + e(scopedText+`: call 1 of the batch is not a JSON-RPC call (an object with a \"method\" string)`, "1") + "]", true},
		{`{"method":"` + strings.Repeat("x", 70) + `","id":1}`, e(`the provided auth token does not allow method \"`+strings.Repeat("x", 64)+`…\"`, "1"), false},
		{"\ufeff" + `{"method":"eth_call","id":[1]}`, e(`the provided auth token does not allow method \"eth_call\"`, "null"), false},
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

// This gateway keeps no buckets: a token with limits (issue 25) is refused, never served
// as if it had none, and the answer says why rather than that the node is fenced.
func TestATokenWithLimitsIsRefusedHere(t *testing.T) {
	f := newFixture(t)
	owner := f.shared.Owner()
	limited, err := owner.AddGrant([]string{rpcPath, "", "", "rate 100/s", "burst 100"})
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := owner.Issue(limited, f.now.Unix(), 3600)
	if err != nil {
		t.Fatal(err)
	}
	want := answer{403, "", `{"jsonrpc":"2.0","error":{"code":-32047,"message":"` + limitedReason + `"},"id":1}` + "\n", "application/json"}
	if got := f.do(t, "POST", rpcPath, "Bearer "+token, `{"jsonrpc":"2.0","method":"eth_call","id":1}`); got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if len(f.served) != 0 {
		t.Errorf("a token with limits reached the handler: %v", f.served)
	}
}
