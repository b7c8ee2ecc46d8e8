package core

import (
	"context"
	"sync"

	"github.com/tetratelabs/wazero"
)

// The threads build's memory map is memory_map.go, generated from the file the core and
// the TypeScript host compile (assembly/memory-map.ts); SharedMemoryPages lays it out as
// the core's init does, and as sharedMemoryPages in host/core/memory.ts does.
//
//go:generate node ../../scripts/go-memory-map.mjs

// stateBytes is the size of the state init lays out for a window of 2^windowLog2 serials:
// from the memory's start to the end of the grant area, where the slots of attached
// instances begin.
func stateBytes(windowLog2 uint32) uint64 {
	ring := uint64(1) << (windowLog2 - ringByteLog2)
	expiries := uint64(expiryBytes) << (windowLog2 - expiryPageLog2)
	tables := (heapBase + maxGrants*grantIndexEntryBytes + ring + expiries + tableAlign - 1) / tableAlign * tableAlign
	return tables + 2*(limitSlotBytes<<limitSlotsLog2) + maxGrantBytes
}

// SharedMemoryPages is the size, in 64 KiB pages, of a shared memory for a revocation
// window of 2^windowLog2 serials and instances instances (the owner's included).
func SharedMemoryPages(windowLog2 uint32, instances int) (uint32, error) {
	if windowLog2 < minWindowLog2 || windowLog2 > maxWindowLog2 || instances < 1 {
		return 0, newError(CodeBadOptions, "WindowLog2 must be %d to %d and instances at least 1, not %d and %d",
			minWindowLog2, maxWindowLog2, windowLog2, instances)
	}
	pages := (stateBytes(windowLog2) + uint64(instances-1)*slotBytes + pageBytes - 1) / pageBytes
	if pages > maxPages {
		return 0, newError(CodeBadOptions, "%d instances with WindowLog2 %d need more than the threads build's 2 GiB", instances, windowLog2)
	}
	return uint32(pages), nil
}

// SharedOptions configure a shared state.
type SharedOptions struct {
	// WindowLog2 sizes the revocation window (12..30; 0 means DefaultWindowLog2).
	WindowLog2 uint32
	// Readers is how many goroutines may check tokens at once (0 means 8). Each has an
	// instance of its own, 96 KiB of the shared memory.
	Readers int
	Engine  Engine
}

// Shared is one state of the threads build (core-threads.wasm) in one shared memory: its
// owner (a Core) makes every change, and its Verifier checks tokens on many goroutines at
// once. A check that starts after an owner's call returned sees that change
// (assembly/README.md, "Memory ordering"): a revoke is in force for every goroutine as
// soon as Revoke or RevokeSerial returns.
type Shared struct {
	rt       wazero.Runtime
	owner    *Core
	verifier *Verifier
}

// NewShared makes a fresh shared memory, its owner, and the Verifier's readers.
func NewShared(ctx context.Context, opts SharedOptions) (*Shared, error) {
	w, err := Options{WindowLog2: opts.WindowLog2}.window()
	if err != nil {
		return nil, err
	}
	readers := opts.Readers
	if readers == 0 {
		readers = 8
	}
	pages, err := SharedMemoryPages(w, readers+1)
	if err != nil {
		return nil, err
	}
	if err := checkEmbedded(threadsWasm, ThreadsSHA256, "core-threads.wasm"); err != nil {
		return nil, err
	}
	rt := newRuntime(ctx, opts.Engine)
	s, err := newShared(ctx, rt, w, pages, readers)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	return s, nil
}

func newShared(ctx context.Context, rt wazero.Runtime, w, pages uint32, readers int) (*Shared, error) {
	if _, err := rt.NewHostModuleBuilder("apiauth").NewFunctionBuilder().WithFunc(abort).Export("abort").Instantiate(ctx); err != nil {
		return nil, err
	}
	if _, err := rt.InstantiateWithConfig(ctx, sharedEnv(pages), wazero.NewModuleConfig().WithName("env")); err != nil {
		return nil, err
	}
	compiled, err := rt.CompileModule(ctx, threadsWasm)
	if err != nil {
		return nil, err
	}
	in, err := instantiate(ctx, rt, compiled)
	if err != nil {
		return nil, err
	}
	owner := &Core{rt: rt, in: in}
	if err := owner.init(w); err != nil {
		return nil, err
	}
	v := &Verifier{readers: make(chan *instance, readers), closed: make(chan struct{})}
	for slot := 1; slot <= readers; slot++ {
		r, err := instantiate(ctx, rt, compiled)
		if err != nil {
			return nil, err
		}
		if got, err := r.call(fnAttach, uint64(slot)); err != nil || int32(got) != 0 {
			return nil, newError(CodeNoSlot, "cannot attach reader %d to the shared memory (attach answered %d, %v)", slot, int32(got), err)
		}
		if err := r.buffers(); err != nil {
			return nil, err
		}
		v.readers <- r
	}
	return &Shared{rt: rt, owner: owner, verifier: v}, nil
}

// Owner is the instance that changes the state. It is not safe for concurrent use: one
// goroutine (a fleet follower, say) makes every change.
func (s *Shared) Owner() *Core { return s.owner }

// Verifier checks tokens against the state on any goroutine.
func (s *Shared) Verifier() *Verifier { return s.verifier }

// Close frees the memory and every instance. No call may be running or made after.
func (s *Shared) Close(ctx context.Context) error {
	s.verifier.once.Do(func() { close(s.verifier.closed) })
	return s.rt.Close(ctx)
}

// Verifier checks tokens on many goroutines at once, each call on a reader instance of its
// own: as many calls run at once as the Shared has readers; more wait for one. It
// allocates nothing per call.
type Verifier struct {
	readers chan *instance
	closed  chan struct{}
	once    sync.Once
}

func (v *Verifier) take() (*instance, error) {
	select {
	case r := <-v.readers:
		return r, nil
	case <-v.closed:
		return nil, ErrClosed
	}
}

// Authorize checks an Authorization header's value (`Bearer <token>`, any case, one
// space) for a request path (the target up to its first `?`, as on the wire) at now (Unix
// seconds).
func (v *Verifier) Authorize(header, path string, now int64) (Result, error) {
	r, err := v.take()
	if err != nil {
		return Result{}, err
	}
	defer func() { v.readers <- r }()
	return r.check(fnAuthorize, header, path, now)
}

// Verify checks a token's text for a request path at now (Unix seconds).
func (v *Verifier) Verify(token, path string, now int64) (Result, error) {
	r, err := v.take()
	if err != nil {
		return Result{}, err
	}
	defer func() { v.readers <- r }()
	return r.check(fnVerify, token, path, now)
}

// MethodAllowed tells whether a Scoped token's grant lets the JSON-RPC method through.
func (v *Verifier) MethodAllowed(grant uint32, method string) (bool, error) {
	r, err := v.take()
	if err != nil {
		return false, err
	}
	defer func() { v.readers <- r }()
	return methodAllowed(r, grant, method)
}

// Admit is Core.Admit on a reader: every reader's calls share the token's one bucket.
func (v *Verifier) Admit(serial, expiry uint64, grant, calls uint32, client [16]byte, nowNs int64) (Admission, error) {
	r, err := v.take()
	if err != nil {
		return Admission{}, err
	}
	defer func() { v.readers <- r }()
	return r.admit(serial, expiry, grant, calls, client, nowNs)
}

// Usage is Core.Usage on a reader.
func (v *Verifier) Usage(serial uint64) (Usage, bool, error) {
	r, err := v.take()
	if err != nil {
		return Usage{}, false, err
	}
	defer func() { v.readers <- r }()
	return r.usage(serial)
}
