package gate_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"api-auth/go/core"
	"api-auth/go/gate"
)

// The request-level vectors (test/vectors/requests.json, written by
// test/vectors/generate-requests.js), which test/http/gate-vectors.test.ts sends to the
// gateway: the same bytes on a raw connection to net/http with the gate in front of a
// handler that records what it got, and the same verdict.
const requestsFile = "../../test/vectors/requests.json"

type requestVerdict struct {
	Forwarded *struct {
		Method  string  `json:"method"`
		Target  string  `json:"target"`
		Body    *string `json:"body"`
		BodyHex string  `json:"bodyHex"`
	} `json:"forwarded"`
	Status     int    `json:"status"`
	Code       int    `json:"code"`
	RetryAfter *bool  `json:"retryAfter"`
	Answer     string `json:"answer"`
}

type requestCase struct {
	Name     string                    `json:"name"`
	Token    string                    `json:"token"`
	Head     []string                  `json:"head"`
	Body     *string                   `json:"body"`
	BodyHex  string                    `json:"bodyHex"`
	Raw      string                    `json:"raw"`
	Before   int                       `json:"before"`
	Verdict  *requestVerdict           `json:"verdict"`
	Layer    string                    `json:"layer"`
	Verdicts map[string]requestVerdict `json:"verdicts"`
}

// latin1 is the bytes a vector's text stands for: each character one byte.
func latin1(t *testing.T, s string) []byte {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			t.Fatalf("%q is not Latin-1", s)
		}
		b = append(b, byte(r))
	}
	return b
}

func (c requestCase) bytes(t *testing.T, token string) []byte {
	if c.Raw != "" {
		return latin1(t, strings.ReplaceAll(c.Raw, "{token}", token))
	}
	var body []byte
	if c.Body != nil {
		body = []byte(*c.Body)
	} else if c.BodyHex != "" {
		var err error
		if body, err = hex.DecodeString(c.BodyHex); err != nil {
			t.Fatal(err)
		}
	}
	head := append([]string{}, c.Head...)
	framed := false
	for _, line := range head {
		lower := strings.ToLower(line)
		framed = framed || strings.HasPrefix(lower, "content-length:") || strings.HasPrefix(lower, "transfer-encoding:")
	}
	if (c.Body != nil || c.BodyHex != "") && !framed {
		head = append(head, "Content-Length: "+strconv.Itoa(len(body)))
	}
	text := latin1(t, strings.ReplaceAll(strings.Join(head, "\r\n"), "{token}", token))
	return append(append(text, "\r\n\r\n"...), body...)
}

type seenRequest struct {
	method, target string
	body           []byte
}

func TestTheRequestVectorsOnTheGoGate(t *testing.T) {
	text, err := os.ReadFile(requestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Path   string `json:"path"`
		Tokens map[string]struct {
			Entries []string `json:"entries"`
		} `json:"tokens"`
		Cases []requestCase `json:"cases"`
	}
	if err := json.Unmarshal(text, &file); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := core.NewShared(ctx, core.SharedOptions{WindowLog2: 12, Readers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	owner := s.Owner()
	if err := owner.SetKey([]byte("0123456789abcdef0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	grants := map[string]uint32{}
	for kind, token := range file.Tokens {
		if grants[kind], err = owner.AddGrant(token.Entries); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	var mu sync.Mutex
	var seen []seenRequest
	g, err := gate.New(gate.Options{Checker: s.Verifier()})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, seenRequest{r.Method, r.RequestURI, body})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","result":"0x1","id":1}`)
	})))
	defer server.Close()
	taken := func() []seenRequest {
		mu.Lock()
		defer mu.Unlock()
		got := seen
		seen = nil
		return got
	}

	for _, c := range file.Cases {
		want := c.Verdict
		if want == nil {
			v, ok := c.Verdicts["go"]
			if !ok || c.Layer == "" {
				t.Errorf("%s: no verdict for the Go gate, or verdicts without a layer", c.Name)
				continue
			}
			want = &v
		}
		token := ""
		if c.Token != "none" {
			grant, ok := grants[c.Token]
			if !ok {
				t.Fatalf("%s: no token kind %q", c.Name, c.Token)
			}
			if token, _, err = owner.Issue(grant, time.Now().Unix(), 3600); err != nil {
				t.Fatal(err)
			}
		}
		request := c.bytes(t, token)
		method := strings.SplitN(string(request), " ", 2)[0]
		for k := 0; k < c.Before; k++ {
			if a := exchangeRaw(t, server.Listener.Addr().String(), request, method); a.status != http.StatusOK || len(taken()) != 1 {
				t.Errorf("%s: request %d before it was not forwarded: %+v", c.Name, k+1, a)
			}
		}
		got := exchangeRaw(t, server.Listener.Addr().String(), request, method)
		forwarded := taken()
		if msg := judge(*want, got, forwarded); msg != "" {
			t.Errorf("%s: %s", c.Name, msg)
		}
	}
}

type rawAnswer struct {
	none       bool
	status     int
	retryAfter bool
	body       []byte
}

// exchangeRaw writes request on a fresh connection and reads one answer, or none when the
// server closes the connection without one.
func exchangeRaw(t *testing.T, addr string, request []byte, method string) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(request); err != nil {
		t.Fatal(err)
	}
	reader := bufio.NewReader(conn)
	var res *http.Response
	// An interim answer (100 Continue) is not the verdict: the final one follows it.
	for res == nil || res.StatusCode >= 100 && res.StatusCode < 200 {
		res, err = http.ReadResponse(reader, &http.Request{Method: method})
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return rawAnswer{none: true}
		}
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return rawAnswer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After") != "", body: body}
}

// judge is "" when the answer and what the handler got are the verdict, else what differs.
func judge(want requestVerdict, got rawAnswer, forwarded []seenRequest) string {
	switch {
	case want.Answer == "none":
		if !got.none || len(forwarded) > 0 {
			return "want no answer; got " + describe(got, forwarded)
		}
	case want.Forwarded != nil:
		f := want.Forwarded
		body := []byte{}
		if f.Body != nil {
			body = []byte(*f.Body)
		} else if f.BodyHex != "" {
			body, _ = hex.DecodeString(f.BodyHex)
		}
		if got.status != http.StatusOK || len(forwarded) != 1 || forwarded[0].method != f.Method || forwarded[0].target != f.Target ||
			string(forwarded[0].body) != string(body) {
			return "want forwarded as " + f.Method + " " + f.Target + " " + strconv.Quote(short(body)) + "; got " + describe(got, forwarded)
		}
	default:
		if got.none || got.status != want.Status || len(forwarded) > 0 {
			return "want " + strconv.Itoa(want.Status) + "; got " + describe(got, forwarded)
		}
		if want.Code != 0 {
			if code := rpcCode(got.body); code != want.Code {
				return "want JSON-RPC code " + strconv.Itoa(want.Code) + "; got " + strconv.Itoa(code) + " in " + strconv.Quote(short(got.body))
			}
		}
		if want.RetryAfter != nil && *want.RetryAfter != got.retryAfter {
			return "want Retry-After " + strconv.FormatBool(*want.RetryAfter) + "; got " + strconv.FormatBool(got.retryAfter)
		}
	}
	return ""
}

// rpcCode is the JSON-RPC error code of an answer (a lone error, or a batch's first), 0 for none.
func rpcCode(body []byte) int {
	var one struct {
		Error struct{ Code int } `json:"error"`
	}
	if json.Unmarshal(body, &one) == nil {
		return one.Error.Code
	}
	var many []struct {
		Error struct{ Code int } `json:"error"`
	}
	if json.Unmarshal(body, &many) == nil && len(many) > 0 {
		return many[0].Error.Code
	}
	return 0
}

func describe(got rawAnswer, forwarded []seenRequest) string {
	if got.none {
		return "no answer, " + strconv.Itoa(len(forwarded)) + " forwarded"
	}
	s := strconv.Itoa(got.status) + " " + strconv.Quote(short(got.body))
	for _, f := range forwarded {
		s += "; forwarded " + f.method + " " + f.target + " " + strconv.Quote(short(f.body))
	}
	return s
}

func short(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}
