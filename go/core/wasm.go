package core

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The core, as `npm run build` makes it: a copy of build/core.wasm and
// build/core-threads.wasm, refreshed by `go generate` (test/fleet/go.test.ts fails when it is
// stale). Its hashes are pinned here, so that a copy changed without this file fails
// every load, not just a test.
//
//go:generate cp ../../build/core.wasm ../../build/core-threads.wasm wasm/
var (
	//go:embed wasm/core.wasm
	plainWasm []byte
	//go:embed wasm/core-threads.wasm
	threadsWasm []byte
)

// The SHA-256 of the embedded builds.
const (
	PlainSHA256   = "59afc1a059887ce1319dc51c35ee7957b2ea35fff0eda0e5f0210ebb35e67a15"
	ThreadsSHA256 = "a7763a8039d7b7925dbb54bb9427f21e9039a3ac4cbe4e0f00dc82e683e5e98d"
)

// ABIVersion is the core's ABI this host speaks (assembly/README.md).
const ABIVersion = 6

// Engine chooses how wazero runs the core.
type Engine int

const (
	// Auto is wazero's compiler where the platform has one (amd64, arm64), its interpreter elsewhere.
	Auto Engine = iota
	// Interpreter is wazero's interpreter everywhere: slower, and what other platforms get.
	Interpreter
)

var features = api.CoreFeaturesV2 | experimental.CoreFeaturesThreads

// Compiled modules are cached per engine for the process: compiling is the expensive step
// of an instance, and every runtime that shares the cache skips it.
var caches sync.Map // Engine -> wazero.CompilationCache

func newRuntime(ctx context.Context, engine Engine) wazero.Runtime {
	var config wazero.RuntimeConfig
	if engine == Interpreter {
		config = wazero.NewRuntimeConfigInterpreter()
	} else {
		config = wazero.NewRuntimeConfig()
	}
	cache, _ := caches.LoadOrStore(engine, wazero.NewCompilationCache())
	return wazero.NewRuntimeWithConfig(ctx, config.WithCoreFeatures(features).WithCompilationCache(cache.(wazero.CompilationCache)))
}

func checkEmbedded(wasm []byte, pinned, name string) error {
	sum := sha256.Sum256(wasm)
	if got := hex.EncodeToString(sum[:]); got != pinned {
		return newError(CodeEmbeddedCore, "the embedded %s has SHA-256 %s, not the pinned %s: run `npm run build && go generate ./...` and update the pin", name, got, pinned)
	}
	return nil
}

// abortError is what env.abort raises: a broken invariant of the core, never bad input.
type abortError struct{ line, column uint32 }

func (a abortError) Error() string {
	return "api-auth core: aborted at " + itoa(a.line) + ":" + itoa(a.column) + " (a broken invariant; this instance is unusable)"
}

func itoa(n uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// abort is env.abort: it ends the call that made it (wazero turns the panic into the
// call's error), and the instance is not used again.
func abort(_ context.Context, _ api.Module, _, _, line, column uint32) {
	panic(abortError{line, column})
}

// sharedEnv is a module named "env" that exports a shared memory of `pages` pages
// (initial = maximum, as the core's threads build requires) and re-exports the host's
// abort: wazero resolves a module's imports from one module by name, and a host module
// cannot export a memory.
func sharedEnv(pages uint32) []byte {
	leb := func(b []byte, v uint32) []byte {
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v == 0 {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	name := func(b []byte, s string) []byte { return append(leb(b, uint32(len(s))), s...) }
	section := func(b []byte, id byte, body []byte) []byte {
		return append(leb(append(b, id), uint32(len(body))), body...)
	}
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	out = section(out, 1, []byte{1, 0x60, 4, 0x7f, 0x7f, 0x7f, 0x7f, 0})
	imports := name(name([]byte{1}, "apiauth"), "abort")
	out = section(out, 2, append(imports, 0, 0))
	out = section(out, 5, leb(leb([]byte{1, 3}, pages), pages))
	exports := append(name([]byte{2}, "abort"), 0, 0)
	exports = append(name(exports, "memory"), 2, 0)
	return section(out, 7, exports)
}
