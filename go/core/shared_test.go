package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTheEmbeddedBuildsAreThePinnedOnes(t *testing.T) {
	for _, b := range []struct {
		wasm   []byte
		pinned string
	}{{plainWasm, PlainSHA256}, {threadsWasm, ThreadsSHA256}} {
		sum := sha256.Sum256(b.wasm)
		if got := hex.EncodeToString(sum[:]); got != b.pinned {
			t.Errorf("embedded SHA-256 %s, pinned %s", got, b.pinned)
		}
	}
	if err := checkEmbedded(append([]byte{0}, plainWasm...), PlainSHA256, "core.wasm"); !errors.Is(err, &Error{Code: CodeEmbeddedCore}) {
		t.Errorf("a changed copy passes the pin: %v", err)
	}
}

// The threads build over one shared memory: goroutines verify in tight loops while the
// owner revokes; once Revoke returned, no goroutine ever sees that token Valid.
func TestNoReaderSeesValidAfterTheRevokeReturned(t *testing.T) {
	ctx := context.Background()
	const readers, tokens, now = 4, 200, int64(1_800_000_000)
	s, err := NewShared(ctx, SharedOptions{WindowLog2: 16, Readers: readers})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	owner := s.Owner()
	if err := owner.SetKey(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	grant, err := owner.AddGrant([]string{"/ext/bc/C/rpc"})
	if err != nil {
		t.Fatal(err)
	}
	issued := make([]string, tokens)
	for i := range issued {
		if issued[i], _, err = owner.Issue(grant, now, 3600); err != nil {
			t.Fatal(err)
		}
	}
	var revokedBelow atomic.Int64
	var checks, stale atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	v := s.Verifier()
	for g := 0; g < readers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; ; i = (i + 7) % tokens {
				select {
				case <-stop:
					return
				default:
				}
				before := revokedBelow.Load()
				r, err := v.Verify(issued[i], "/ext/bc/C/rpc", now+1)
				if err != nil {
					t.Error(err)
					return
				}
				checks.Add(1)
				if int64(i) < before && r.Outcome != Revoked {
					stale.Add(1)
				}
				if int64(i) >= before && r.Outcome != Valid && r.Outcome != Revoked {
					t.Errorf("token %d: %v", i, r.Outcome)
				}
			}
		}(g)
	}
	for i := range issued {
		if o, _, err := owner.Revoke(issued[i], now+1); err != nil || o != Valid {
			t.Fatalf("revoke %d: %v %v", i, o, err)
		}
		revokedBelow.Store(int64(i + 1))
		for c := checks.Load(); checks.Load() < c+readers; {
		}
	}
	close(stop)
	wg.Wait()
	if stale.Load() != 0 {
		t.Errorf("%d checks saw a token valid after its revoke returned", stale.Load())
	}
	if checks.Load() < tokens*readers {
		t.Errorf("only %d checks ran", checks.Load())
	}
}

func TestAVerifierAllocatesNothingPerCall(t *testing.T) {
	ctx := context.Background()
	s, err := NewShared(ctx, SharedOptions{WindowLog2: 12, Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	owner := s.Owner()
	owner.SetKey(make([]byte, 32))
	grant, _ := owner.AddGrant([]string{"/ext/bc/C/rpc", "", "eth_*"})
	token, _, _ := owner.Issue(grant, 1_800_000_000, 3600)
	header := "Bearer " + token
	v := s.Verifier()
	allocs := testing.AllocsPerRun(1000, func() {
		r, _ := v.Authorize(header, "/ext/bc/C/rpc", 1_800_000_001)
		if r.Outcome != Scoped {
			t.Fatal(r)
		}
		if ok, _ := v.MethodAllowed(r.Grant, "eth_call"); !ok {
			t.Fatal("eth_call refused")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per check", allocs)
	}
}

// SharedMemoryPages, from the generated memory map, is what the core's init and attach
// need: its pages hold the state and every reader's slot, and a page less does not.
func TestSharedMemoryPagesIsWhatTheCoreNeeds(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		windowLog2 uint32
		instances  int
	}{{12, 1}, {12, 4}, {16, 2}, {22, 3}} {
		pages, err := SharedMemoryPages(c.windowLog2, c.instances)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []uint32{pages, pages - 1} {
			rt := newRuntime(ctx, Auto)
			s, err := newShared(ctx, rt, c.windowLog2, p, c.instances-1)
			if (err == nil) != (p == pages) {
				t.Errorf("windowLog2 %d, %d instances, %d pages (SharedMemoryPages says %d): %v", c.windowLog2, c.instances, p, pages, err)
			}
			if s != nil {
				s.Close(ctx)
			} else {
				rt.Close(ctx)
			}
		}
	}
	if pages, _ := SharedMemoryPages(22, 1); pages != 411 {
		t.Errorf("the default window with one instance takes %d pages, not 411 (host/core/memory.ts's figure)", pages)
	}
	if _, err := SharedMemoryPages(11, 1); !errors.Is(err, &Error{Code: CodeBadOptions}) {
		t.Errorf("windowLog2 11: %v", err)
	}
	if _, err := SharedMemoryPages(22, 30_000); !errors.Is(err, &Error{Code: CodeBadOptions}) {
		t.Errorf("30,000 instances: %v", err)
	}
}
