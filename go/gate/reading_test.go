package gate_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"api-auth/go/gate"
)

// The shared cases of the one reading of a JSON-RPC body, which host/rpc/reading.ts runs
// too (test/unit/rpc-reading.test.ts).
const bodiesFile = "../../test/vectors/rpc-bodies.json"

type bodyCase struct {
	Name    string  `json:"name"`
	Body    *string `json:"body"`
	BodyHex string  `json:"bodyHex"`
	Read    *struct {
		Batch bool `json:"batch"`
		Calls []struct {
			Method string  `json:"method"`
			ID     *string `json:"id"`
		} `json:"calls"`
	} `json:"read"`
	Unreadable string  `json:"unreadable"`
	At         int     `json:"at"`
	ID         *string `json:"id"`
}

func bodyCases(t *testing.T) (maxDepth int, cases []bodyCase) {
	t.Helper()
	text, err := os.ReadFile(bodiesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		MaxDepth int        `json:"maxDepth"`
		Cases    []bodyCase `json:"cases"`
	}
	if err := json.Unmarshal(text, &file); err != nil {
		t.Fatal(err)
	}
	return file.MaxDepth, file.Cases
}

func (c bodyCase) bytes(t *testing.T) []byte {
	if c.Body != nil {
		return []byte(*c.Body)
	}
	b, err := hex.DecodeString(c.BodyHex)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return b
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestEveryBodyIsReadAsTheVectorsSay(t *testing.T) {
	maxDepth, cases := bodyCases(t)
	if maxDepth != gate.MaxDepth {
		t.Errorf("the vectors' depth %d, the reading's %d", maxDepth, gate.MaxDepth)
	}
	if len(cases) < 60 {
		t.Fatalf("only %d cases in %s", len(cases), bodiesFile)
	}
	for _, c := range cases {
		body := c.bytes(t)
		r := gate.ReadCalls(body)
		if c.Read == nil {
			if got, want := r.Problem.String()+"|"+strconv.Itoa(r.At)+"|"+r.ID, c.Unreadable+"|"+strconv.Itoa(c.At)+"|"+orEmpty(c.ID); got != want {
				t.Errorf("%s: not read as %q, want %q", c.Name, got, want)
			}
			continue
		}
		if r.Problem != gate.Readable {
			t.Errorf("%s: not read (%s)", c.Name, r.Problem)
			continue
		}
		if r.Batch != c.Read.Batch || len(r.Calls) != len(c.Read.Calls) {
			t.Errorf("%s: batch %v of %d calls, want %v of %d", c.Name, r.Batch, len(r.Calls), c.Read.Batch, len(c.Read.Calls))
			continue
		}
		for k, want := range c.Read.Calls {
			got := r.Calls[k]
			if got.Method != want.Method || got.ID != orEmpty(want.ID) {
				t.Errorf("%s: call %d is %q id %q, want %q id %q", c.Name, k, got.Method, got.ID, want.Method, orEmpty(want.ID))
			}
			// Each call's place in the body holds the call, as the split of a batch forwards it.
			var call struct {
				Method string `json:"method"`
			}
			if err := json.Unmarshal(body[got.Start:got.End], &call); err != nil || call.Method != got.Method {
				t.Errorf("%s: call %d's place %d..%d holds %q", c.Name, k, got.Start, got.End, body[got.Start:got.End])
			}
		}
	}
}

func TestTheVectorsShowEveryReason(t *testing.T) {
	_, cases := bodyCases(t)
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.Unreadable] = true
	}
	for u := gate.NoBody; u < gate.Compressed; u++ {
		if !seen[u.String()] {
			t.Errorf("no case is not read for %s", u)
		}
	}
}

// A body nested deeper than encoding/json's 10,000 levels is too deep, not bad JSON: the
// gateway's JSON.parse has no such limit, and both readings give the same reason.
func TestADepthPastEncodingJSONsIsTooDeep(t *testing.T) {
	const n = 10_050
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	if r := gate.ReadCalls([]byte(body)); r.Problem != gate.TooDeep {
		t.Errorf("params %d deep: %s", n, r.Problem)
	}
	if r := gate.ReadCalls([]byte(body[:len(body)-1])); r.Problem != gate.NotOneValue {
		t.Errorf("cut, %d deep: %s", n, r.Problem)
	}
}

// foldsToMethod compares ASCII letters only: that holds because no rune beyond ASCII folds
// to a letter of "method" under encoding/json's folding, either rule it has had (the least
// rune of its SimpleFold orbit since Go 1.21; ToUpper(ToLower(r)) before).
func TestNoRuneBeyondASCIIFoldsIntoMethod(t *testing.T) {
	least := func(r rune) rune {
		for {
			next := unicode.SimpleFold(r)
			if next <= r {
				return next
			}
			r = next
		}
	}
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		for _, f := range []rune{least(r), unicode.ToUpper(unicode.ToLower(r))} {
			if f < 0x80 && strings.ContainsRune("METHODmethod", f) {
				t.Errorf("%U folds to %q", r, f)
			}
		}
	}
	if r := gate.ReadCalls([]byte(`{"id":1,"method":"a","ＭETHOD":"b","meth\u00f6d":"c"}`)); r.Problem != gate.Readable || r.Calls[0].Method != "a" {
		t.Errorf("names beyond ASCII taken for method: %+v", r)
	}
}

// The reading's own scanner and encoding/json's agree on what is one JSON value, for every
// input within encoding/json's depth (go test runs the seeds; go test -fuzz explores).
func FuzzTheScannerAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `[1,2]`, `{"a":[1,{"b":null}]}`, `"\u00e9"`, `-0.5e+3`, `01`, `1.`, `[1,]`, `{"a"}`, `"\x"`,
		` true `, `tru`, `{"a":1,}`, `[[[]]]`, `"` + "\x01" + `"`, `1 2`, `nul`, `-`, `{"a":1 "b":2}`} {
		f.Add([]byte(`{"id":1,"method":"m","params":` + s + `}`))
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := gate.ReadCalls(body)
		switch r.Problem {
		case gate.NoBody, gate.NotUTF8, gate.ByteOrderMark, gate.TooDeep:
			return
		}
		if got, want := r.Problem != gate.NotOneValue, json.Valid(body); got != want {
			t.Errorf("%q: the reading takes it for one JSON value: %v; encoding/json: %v", body, got, want)
		}
	})
}
