package core

import (
	"context"
	"testing"
)

// Per-call cost of a check through wazero, beside Node's (bench/experiments/go.js runs
// both in one run): a repeated valid token (the core's tag cache answers) and tokens in
// turn, more than the cache holds (the HMAC computed).

const benchPath = "/ext/health"

func benchFixture(b *testing.B, engine Engine) (*Shared, string, []string) {
	ctx := context.Background()
	s, err := NewShared(ctx, SharedOptions{Readers: 1, Engine: engine})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(ctx) })
	owner := s.Owner()
	owner.SetKey([]byte("0123456789abcdef0123456789abcdef"))
	grant, _ := owner.AddGrant([]string{benchPath})
	many := make([]string, 4096)
	for i := range many {
		token, _, err := owner.Issue(grant, 1_800_000_000, 43200)
		if err != nil {
			b.Fatal(err)
		}
		many[i] = "Bearer " + token
	}
	return s, many[0], many
}

func benchAuthorize(b *testing.B, engine Engine, repeated bool) {
	s, header, many := benchFixture(b, engine)
	v := s.Verifier()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := header
		if !repeated {
			h = many[i&4095]
		}
		if r, _ := v.Authorize(h, benchPath, 1_800_000_001); r.Outcome != Valid {
			b.Fatal(r)
		}
	}
}

func BenchmarkAuthorizeRepeated(b *testing.B)            { benchAuthorize(b, Auto, true) }
func BenchmarkAuthorizeInTurn(b *testing.B)              { benchAuthorize(b, Auto, false) }
func BenchmarkAuthorizeRepeatedInterpreter(b *testing.B) { benchAuthorize(b, Interpreter, true) }
func BenchmarkAuthorizeInTurnInterpreter(b *testing.B)   { benchAuthorize(b, Interpreter, false) }
