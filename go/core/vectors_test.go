package core

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The shared conformance vectors (test/vectors/core-vectors.txt, assembly/README.md
// "Conformance vectors"), as every other host runs them: each case on a fresh instance.

const vectorsFile = "../../test/vectors/core-vectors.txt"

// vectorHost is one case's core: the plain build, or a shared state whose owner makes the
// changes while a reader (the Verifier) answers the checks.
type vectorHost struct {
	owner *Core
	check interface {
		Authorize(header, path string, now int64) (Result, error)
		Verify(token, path string, now int64) (Result, error)
		MethodAllowed(grant uint32, method string) (bool, error)
		Admit(serial, expiry uint64, grant, calls uint32, client [16]byte, nowNs int64) (Admission, error)
		Usage(serial uint64) (Usage, bool, error)
	}
	close func()
}

type build struct {
	name string
	open func(ctx context.Context, w uint32) (*vectorHost, error)
}

func builds(engine Engine) []build {
	return []build{
		{"core.wasm", func(ctx context.Context, w uint32) (*vectorHost, error) {
			c, err := New(ctx, Options{WindowLog2: w, Engine: engine})
			if err != nil {
				return nil, err
			}
			return &vectorHost{c, c, func() { c.Close(ctx) }}, nil
		}},
		{"core-threads.wasm", func(ctx context.Context, w uint32) (*vectorHost, error) {
			s, err := NewShared(ctx, SharedOptions{WindowLog2: w, Readers: 1, Engine: engine})
			if err != nil {
				return nil, err
			}
			return &vectorHost{s.Owner(), s.Verifier(), func() { s.Close(ctx) }}, nil
		}},
	}
}

func TestVectors(t *testing.T) {
	for _, engine := range []struct {
		name   string
		engine Engine
	}{{"auto", Auto}, {"interpreter", Interpreter}} {
		for _, b := range builds(engine.engine) {
			t.Run(engine.name+"/"+b.name, func(t *testing.T) {
				passed, failures := runVectors(t, b.open, vectorsFile)
				for _, f := range failures {
					t.Error(f)
				}
				if passed < 50 {
					t.Errorf("only %d cases passed", passed)
				}
				t.Logf("%d passed, %d failed", passed, len(failures))
			})
		}
	}
}

// A runner that cannot fail proves nothing: a wrong expectation must fail its case.
func TestVectorsFailAWrongExpectation(t *testing.T) {
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	broken := map[string]bool{}
	var name string
	for i, line := range lines {
		if strings.HasPrefix(line, "case ") {
			name = line[5:]
		}
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(name, "Revoked: revoked tokens") && len(f) >= 5 && f[0] == "authorize" && f[4] == "4" && !broken[name]:
			f[4] = "0"
		case strings.HasPrefix(name, "Scoped: ") && len(f) == 6 && f[0] == "authorize" && f[4] == "10" && !broken[name]:
			f[5] = strconv.FormatInt(atoi(f[5])+1, 10)
		case strings.HasPrefix(name, "methods: ") && len(f) == 4 && f[0] == "method" && f[3] == "1" && !broken[name]:
			f[3] = "0"
		default:
			continue
		}
		broken[name] = true
		lines[i] = strings.Join(f, " ")
	}
	if len(broken) != 3 {
		t.Fatalf("found %d of the 3 cases to break: %v", len(broken), broken)
	}
	path := t.TempDir() + "/broken.txt"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, b := range builds(Auto) {
		_, failures := runVectors(t, b.open, path)
		if len(failures) != 3 {
			t.Errorf("%s: %d failures, not 3: %v", b.name, len(failures), failures)
		}
		for _, f := range failures {
			ok := false
			for n := range broken {
				ok = ok || strings.HasPrefix(f, "FAIL "+n)
			}
			if !ok {
				t.Errorf("%s: an unexpected failure: %s", b.name, f)
			}
		}
	}
}

func atoi(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

func unhex(s string) string {
	if s == "-" {
		return ""
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// codeNumbers are the core's negative results for the codes the vectors name.
var codeNumbers = map[Code]int64{
	CodeGrantEmpty: -1, CodeGrantTooManyEntries: -2, CodeGrantTableFull: -3, CodeGrantBadEntry: -4,
	CodeGrantEntryTooLong: -5, CodeGrantBadMethod: -6, CodeGrantMethodTooLong: -7, CodeGrantTooManyMethods: -8,
	CodeGrantNoMethods: -9, CodeGrantBadLimit: -10, CodeGrantTooManyClients: -11, CodeIssueUnknownGrant: -1, CodeIssueWindowFull: -2, CodeIssueBadTime: -3,
	CodeIssueNoKey: -4, CodeIssueBadSerial: -5,
}

func runVectors(t *testing.T, open func(context.Context, uint32) (*vectorHost, error), path string) (int, []string) {
	ctx := context.Background()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	scan := bufio.NewScanner(file)
	scan.Buffer(make([]byte, 1<<20), 1<<24)
	var failures, problems []string
	passed, declared, ran := 0, -1, 0
	var h *vectorHost
	var name string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	expect := func(got, want int64, what string) {
		if got != want {
			fail("%s: %d, not %d", what, got, want)
		}
	}
	for scan.Scan() {
		line := scan.Text()
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		switch f[0] {
		case "abi":
			expect(ABIVersion, atoi(f[1]), "abi")
			continue
		case "cases":
			declared = int(atoi(f[1]))
			continue
		case "case":
			name, problems, h = line[5:], nil, nil
			continue
		case "end":
			ran++
			if h != nil {
				h.close()
			}
			if len(problems) == 0 {
				passed++
			} else {
				failures = append(failures, "FAIL "+name+"\n  "+strings.Join(problems, "\n  "))
			}
			continue
		case "init":
			if h, err = open(ctx, uint32(atoi(f[1]))); err != nil {
				fail("init: %v", err)
			}
			continue
		}
		if h == nil {
			continue
		}
		vectorCommand(h, f, fail, expect)
	}
	if declared != ran {
		failures = append(failures, fmt.Sprintf("the file declares %d cases, %d ran", declared, ran))
	}
	return passed, failures
}

func vectorCommand(h *vectorHost, f []string, fail func(string, ...any), expect func(int64, int64, string)) {
	c := h.owner
	claims := func(got Claims, want []string, what string) {
		if len(want) < 4 {
			return
		}
		if fmt.Sprint(got.Serial, got.Expiry, got.Generation, got.Grant) != strings.Join(want[:4], " ") {
			fail("%s: claims %+v, not %v", what, got, want[:4])
		}
	}
	code := func(err error) int64 {
		var e *Error
		if errors.As(err, &e) {
			if n, ok := codeNumbers[e.Code]; ok {
				return n
			}
		}
		fail("an error without a vector code: %v", err)
		return 0
	}
	scoped := func(r Result, err error, what string) {
		if err != nil {
			fail("%s: %v", what, err)
			return
		}
		expect(int64(r.Outcome), atoi(f[4]), what)
		if len(f) > 5 {
			expect(int64(r.Grant), atoi(f[5]), what+": Scoped or Limited grant")
		}
		if len(f) > 6 {
			expect(int64(r.Serial), atoi(f[6]), what+": Limited serial")
		}
		if len(f) > 7 {
			expect(int64(r.Expiry), atoi(f[7]), what+": Limited expiry")
		}
	}
	switch f[0] {
	case "key":
		if err := c.SetKey([]byte(unhex(f[1]))); err != nil {
			fail("setKey: %v", err)
		}
	case "generation":
		if err := c.SetGeneration(uint32(atoi(f[1]))); err != nil {
			fail("setGeneration: %v", err)
		}
	case "grant", "grant-refused":
		var entries []string
		if list := unhex(f[1]); list != "" {
			entries = strings.Split(strings.TrimSuffix(list, "\n"), "\n")
		}
		id, err := c.AddGrant(entries)
		if err == nil {
			expect(int64(id), atoi(f[2]), "grantAdd")
			return
		}
		expect(code(err), atoi(f[2]), "grantAdd refused")
		if len(f) > 3 && f[3] != "-" {
			var e *Error
			errors.As(err, &e)
			expect(int64(e.Index), atoi(f[3]), "refused entry")
		}
	case "issue", "issue-refused":
		token, got, err := c.Issue(uint32(atoi(f[1])), atoi(f[2]), uint32(atoi(f[3])))
		if f[0] == "issue-refused" {
			expect(code(err), atoi(f[4]), "issue refused")
		} else if err != nil || token != f[4] {
			fail("issue: %q %v, not the token %s", token, err, f[4])
		} else {
			claims(got, f[5:], "issue")
		}
	case "revoke":
		o, got, err := c.Revoke(unhex(f[1]), atoi(f[2]))
		if err != nil {
			fail("revoke: %v", err)
		}
		expect(int64(o), atoi(f[3]), "revoke")
		claims(got, f[4:], "revoke")
	case "bump":
		g, err := c.BumpGeneration()
		if err != nil {
			fail("bumpGeneration: %v", err)
		}
		expect(int64(g), atoi(f[1]), "bumpGeneration")
	case "restore":
		r := int64(0)
		if err := c.RestoreSerials(uint64(atoi(f[1])), uint64(atoi(f[2])), uint64(atoi(f[3]))); err != nil {
			r = -1
		}
		expect(r, atoi(f[4]), "restoreSerials")
	case "revoke-serial":
		marked, err := c.RevokeSerial(uint64(atoi(f[1])))
		r := map[bool]int64{true: 0, false: 1}[marked]
		if errors.Is(err, ErrRevokeNeverIssued) {
			r = -1
		}
		expect(r, atoi(f[2]), "revokeSerial")
	case "sweep":
		if err := c.Sweep(atoi(f[1])); err != nil {
			fail("sweep: %v", err)
		}
	case "authorize":
		r, err := h.check.Authorize(unhex(f[1]), unhex(f[2]), atoi(f[3]))
		scoped(r, err, "authorize")
	case "verify":
		r, err := h.check.Verify(unhex(f[1]), unhex(f[2]), atoi(f[3]))
		scoped(r, err, "verify")
	case "admit":
		var client [16]byte
		copy(client[:], unhex(f[6]))
		a, err := h.check.Admit(uint64(atoi(f[1])), uint64(atoi(f[2])), uint32(atoi(f[3])), uint32(atoi(f[4])), client, atoi(f[5]))
		if err != nil {
			fail("admit: %v", err)
		}
		expect(int64(a.Result), atoi(f[7]), "admit")
		expect(int64(a.WaitNs), atoi(f[8]), "admit: wait")
	case "share":
		if err := c.SetLimitShare(uint32(atoi(f[1]))); err != nil {
			fail("setLimitShare: %v", err)
		}
	case "usage":
		u, found, err := h.check.Usage(uint64(atoi(f[1])))
		if err != nil {
			fail("usage: %v", err)
		}
		expect(map[bool]int64{true: 1, false: 0}[found], atoi(f[2]), "usage: found")
		expect(int64(u.Requests), atoi(f[3]), "usage: requests")
		expect(u.LastNs, atoi(f[4]), "usage: last")
	case "method":
		allowed, err := h.check.MethodAllowed(uint32(atoi(f[1])), unhex(f[2]))
		r := map[bool]int64{true: 1, false: 0}[allowed]
		if err != nil {
			r = -1
		}
		expect(r, atoi(f[3]), "methodAllowed")
	case "sha256":
		d, err := c.SHA256([]byte(unhex(f[1])))
		if err != nil || hex.EncodeToString(d[:]) != f[2] {
			fail("sha256: %x %v, not %s", d, err, f[2])
		}
	case "hmac":
		d, err := c.HMACSHA256([]byte(unhex(f[1])), []byte(unhex(f[2])))
		if err != nil || hex.EncodeToString(d[:]) != f[3] {
			fail("hmacSha256: %x %v, not %s", d, err, f[3])
		}
	case "password":
		length := int(atoi(f[1]))
		for i := 3; i < len(f); i++ {
			p, err := c.GeneratePasswordFrom([]byte(unhex(f[i])), length)
			if i < len(f)-1 {
				if !errors.Is(err, ErrNeedEntropy) {
					fail("generatePassword with draw %d: %q %v, not ErrNeedEntropy", i-2, p, err)
				}
			} else if err != nil || p != f[2] {
				fail("generatePassword: %q %v, not %s", p, err, f[2])
			}
		}
	default:
		fail("unknown command %s", f[0])
	}
}
