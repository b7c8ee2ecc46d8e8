// Package core runs api-auth's token core (build/core.wasm, or core-threads.wasm over a
// shared memory) in Go through wazero, and speaks its ABI (assembly/README.md) as
// host/core/core.ts does for Node: the same calls, the same outcomes, the same codes.
//
// A Core is one instance and is not safe for concurrent use. For a server, NewShared
// makes one state that an owner changes while a Verifier's readers check tokens on any
// number of goroutines at once.
package core

import (
	"context"
	"errors"

	"github.com/tetratelabs/wazero"
)

// DefaultWindowLog2 sizes the revocation window as api-auth does: 2^22 live tokens.
const DefaultWindowLog2 = 22

// TokenLength is the length of every token, in bytes.
const TokenLength = 76

// Options configure a Core.
type Options struct {
	// WindowLog2 sizes the revocation window: 2^WindowLog2 tokens may be live at once
	// (12..30; 0 means DefaultWindowLog2).
	WindowLog2 uint32
	Engine     Engine
}

func (o Options) window() (uint32, error) {
	w := o.WindowLog2
	if w == 0 {
		w = DefaultWindowLog2
	}
	if w < minWindowLog2 || w > maxWindowLog2 {
		return 0, newError(CodeBadOptions, "WindowLog2 must be %d to %d, not %d", minWindowLog2, maxWindowLog2, w)
	}
	return w, nil
}

// Claims are what a token carries: its serial, expiry (Unix seconds), password
// generation and grant.
type Claims struct {
	Serial     uint64
	Expiry     uint64
	Generation uint32
	Grant      uint32
}

// Core is one instance of the core: with New, the plain build with its own state; from
// NewShared, the owner of a shared state, the only instance that changes it.
type Core struct {
	rt wazero.Runtime
	in *instance
	// owned: the runtime goes with this Core (New); a Shared closes its own.
	owned bool
}

// New makes an instance of the plain build (core.wasm) with an empty state: set a key,
// then add grants and issue or verify tokens.
func New(ctx context.Context, opts Options) (*Core, error) {
	w, err := opts.window()
	if err != nil {
		return nil, err
	}
	if err := checkEmbedded(plainWasm, PlainSHA256, "core.wasm"); err != nil {
		return nil, err
	}
	rt := newRuntime(ctx, opts.Engine)
	c, err := newPlain(ctx, rt, w)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	c.owned = true
	return c, nil
}

func newPlain(ctx context.Context, rt wazero.Runtime, w uint32) (*Core, error) {
	if _, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().WithFunc(abort).Export("abort").Instantiate(ctx); err != nil {
		return nil, err
	}
	compiled, err := rt.CompileModule(ctx, plainWasm)
	if err != nil {
		return nil, err
	}
	in, err := instantiate(ctx, rt, compiled)
	if err != nil {
		return nil, err
	}
	c := &Core{rt: rt, in: in}
	return c, c.init(w)
}

func (c *Core) init(w uint32) error {
	r, err := c.in.call(fnInit, uint64(w))
	if err != nil {
		return err
	}
	if int32(r) != 0 {
		return newError(CodeBadOptions, "init(%d) failed: the memory is too small or set up already", w)
	}
	return c.in.buffers()
}

// Close frees the instance (and with New, its runtime).
func (c *Core) Close(ctx context.Context) error {
	if c.owned {
		return c.rt.Close(ctx)
	}
	return c.in.mod.Close(ctx)
}

// SetKey sets the token key (1 to 64 bytes; api-auth's are 32 random bytes).
func (c *Core) SetKey(key []byte) error {
	if len(key) < 1 || len(key) > 64 {
		return newError(CodeBadKey, "a key is 1 to 64 bytes, not %d", len(key))
	}
	r, err := c.in.call(fnSetKey, c.in.putBytes(c.in.io, c.in.ioCap, key))
	if err == nil && int32(r) != 0 {
		err = newError(CodeBadKey, "setKey refused a key of %d bytes", len(key))
	}
	return err
}

// Generation is the password generation.
func (c *Core) Generation() (uint32, error) {
	v, err := c.in.call(fnGeneration)
	return uint32(v), err
}

// SetGeneration sets the password generation: tokens of any other are EarlierGeneration.
func (c *Core) SetGeneration(g uint32) error {
	_, err := c.in.call(fnSetGeneration, uint64(g))
	return err
}

// BumpGeneration moves to the next generation and returns it.
func (c *Core) BumpGeneration() (uint32, error) {
	v, err := c.in.call(fnBumpGeneration)
	return uint32(v), err
}

func (c *Core) grant(fn int, entries []string) (uint32, error) {
	in := c.in
	n := 0
	for _, e := range entries {
		n += len(e) + 1
	}
	if n > int(in.ioCap) {
		return 0, newError(CodeGrantTooManyEntries, "the grant list is %d bytes, over the core's %d", n, in.ioCap)
	}
	list := make([]byte, 0, n)
	for _, e := range entries {
		list = append(append(list, e...), '\n')
	}
	r, err := in.call(fn, in.putBytes(in.io, in.ioCap, list))
	if err != nil {
		return 0, err
	}
	if id := int32(r); id < 0 {
		return 0, grantError(id, int(in.u32(in.result+resultRefusedEntry)))
	}
	return uint32(r), nil
}

// AddGrant adds a grant and returns its id (an existing grant's id when it is known).
// The entries are the endpoints, then for a method scope "" and the patterns, each list
// canonical (sorted, no duplicates, "*" alone): api-auth's grantEntries.
func (c *Core) AddGrant(entries []string) (uint32, error) { return c.grant(fnGrantAdd, entries) }

// FindGrant is the id AddGrant would give the entries (GrantCount when new), adding nothing.
func (c *Core) FindGrant(entries []string) (uint32, error) { return c.grant(fnGrantFind, entries) }

// GrantCount is the number of grants.
func (c *Core) GrantCount() (uint32, error) {
	v, err := c.in.call(fnGrantCount)
	return uint32(v), err
}

func (c *Core) claims() Claims {
	p := c.in.result
	return Claims{Serial: c.in.u64(p + resultSerial), Expiry: c.in.u64(p + resultExpiry), Generation: c.in.u32(p + resultGeneration),
		Grant: c.in.u32(p + resultGrant)}
}

// Issue issues a token of grant, valid from now for lifetime seconds, under the core's own next serial.
func (c *Core) Issue(grant uint32, now int64, lifetime uint32) (string, Claims, error) {
	return c.issued(c.in.call(fnIssue, uint64(grant), uint64(now), uint64(lifetime)))
}

// IssueSerial issues a token under a serial of a block reserved with ReserveSerials.
func (c *Core) IssueSerial(serial uint64, grant uint32, now int64, lifetime uint32) (string, Claims, error) {
	return c.issued(c.in.call(fnIssueSerial, serial, uint64(grant), uint64(now), uint64(lifetime)))
}

func (c *Core) issued(r uint64, err error) (string, Claims, error) {
	if err != nil {
		return "", Claims{}, err
	}
	if n := int32(r); n != TokenLength {
		return "", Claims{}, issueError(n)
	}
	return string(c.in.read(c.in.token, TokenLength)), c.claims(), nil
}

// Revoke revokes a token: Valid when this call revoked a token valid now, Revoked when it
// already was (with its claims for both); any other outcome changed nothing.
func (c *Core) Revoke(token string, now int64) (Outcome, Claims, error) {
	return c.revoke(fnRevoke, token, now)
}

// Inspect is what Revoke would answer, revoking nothing.
func (c *Core) Inspect(token string, now int64) (Outcome, Claims, error) {
	return c.revoke(fnInspect, token, now)
}

func (c *Core) revoke(fn int, token string, now int64) (Outcome, Claims, error) {
	r, err := c.in.call(fn, c.in.put(c.in.token, c.in.tokenCap, token), uint64(now))
	o := Outcome(uint32(r))
	if err != nil || (o != Valid && o != Revoked) {
		return o, Claims{}, err
	}
	return o, c.claims(), nil
}

// RevokeSerial marks a serial revoked: a stored revocation, or one the fleet recorded.
// It reports false when the serial is below the floor (expired: nothing to keep), and
// ErrRevokeNeverIssued when no token can have it.
func (c *Core) RevokeSerial(serial uint64) (bool, error) {
	r, err := c.in.call(fnRevokeSerial, serial)
	if err != nil {
		return false, err
	}
	switch int32(r) {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, newError(CodeRevokeNeverIssued, "serial %d was never issued", serial)
}

// RestoreSerials sets the live range [floor, next) on a restart, tokens of it expiring by expiryBound.
func (c *Core) RestoreSerials(floor, next, expiryBound uint64) error {
	r, err := c.in.call(fnRestoreSerials, floor, next, expiryBound)
	if err == nil && int32(r) != 0 {
		err = newError(CodeRestoreOutOfWindow, "serials %d..%d do not fit the revocation window", floor, next)
	}
	return err
}

// ReserveSerials learns a block [start, end) that some issuer reserved, whose tokens expire
// by expiryBound. It reports false when the whole block is below the floor.
func (c *Core) ReserveSerials(start, end, expiryBound uint64) (bool, error) {
	r, err := c.in.call(fnReserveSerials, start, end, expiryBound)
	if err != nil {
		return false, err
	}
	switch int32(r) {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, newError(CodeReserveOutOfWindow, "serials %d..%d are empty or reach past the revocation window", start, end)
}

// Sweep forgets the revocations of tokens that have all expired by now.
func (c *Core) Sweep(now int64) error {
	_, err := c.in.call(fnSweep, uint64(now))
	return err
}

// NextSerial is the serial counter, the end of the live range.
func (c *Core) NextSerial() (uint64, error) { return c.in.call(fnNextSerial) }

// Floor is the lowest serial the revocation window still tracks.
func (c *Core) Floor() (uint64, error) { return c.in.call(fnFloor) }

// Authorize checks an Authorization header's value for a request path (no query).
func (c *Core) Authorize(header, path string, now int64) (Result, error) {
	return c.in.check(fnAuthorize, header, path, now)
}

// Verify checks a token's text for a request path (no query).
func (c *Core) Verify(token, path string, now int64) (Result, error) {
	return c.in.check(fnVerify, token, path, now)
}

// MethodAllowed tells whether a Scoped token's grant lets the JSON-RPC method through
// (always, for a grant without a method scope).
func (c *Core) MethodAllowed(grant uint32, method string) (bool, error) {
	return methodAllowed(c.in, grant, method)
}

// Admit is one request of `calls` calls (0: the client alone is checked, nothing counted)
// by a Limited token (Result.Serial, Result.Expiry, Result.Grant), from `client` (16
// bytes, IPv4 as IPv4-mapped), at nowNs (Unix nanoseconds).
func (c *Core) Admit(serial, expiry uint64, grant, calls uint32, client [16]byte, nowNs int64) (Admission, error) {
	return c.in.admit(serial, expiry, grant, calls, client, nowNs)
}

// SetLimitShare says how many gateways share each token's rate: each then lets through
// rate / members and burst / members (rounded up, at least 1). 0 or 1: this one alone.
func (c *Core) SetLimitShare(members uint32) error {
	_, err := c.in.call(fnSetLimitShare, uint64(members))
	return err
}

// Usage is what Admit let through for a token; false when it has counted nothing for it.
func (c *Core) Usage(serial uint64) (Usage, bool, error) {
	return c.in.usage(serial)
}

func methodAllowed(in *instance, grant uint32, method string) (bool, error) {
	r, err := in.methodAllowed(grant, method)
	if err != nil {
		return false, err
	}
	if r < 0 {
		return false, newError(CodeUnknownGrant, "no grant %d", grant)
	}
	return r == 1, nil
}

// SHA256 is the core's SHA-256 of msg (at most 65,536 bytes).
func (c *Core) SHA256(msg []byte) ([32]byte, error) {
	var d [32]byte
	if len(msg) > int(c.in.ioCap) {
		return d, newError(CodeBadOptions, "the message is over %d bytes", c.in.ioCap)
	}
	if _, err := c.in.call(fnSha256, c.in.putBytes(c.in.io, c.in.ioCap, msg)); err != nil {
		return d, err
	}
	copy(d[:], c.in.read(c.in.result+resultDigest, 32))
	return d, nil
}

// HMACSHA256 is the core's HMAC-SHA-256 of msg under key (together at most 65,536 bytes).
func (c *Core) HMACSHA256(key, msg []byte) ([32]byte, error) {
	var d [32]byte
	if len(key)+len(msg) > int(c.in.ioCap) {
		return d, newError(CodeBadOptions, "the key and message are over %d bytes", c.in.ioCap)
	}
	c.in.mem.Write(c.in.io, key)
	c.in.mem.Write(c.in.io+uint32(len(key)), msg)
	if _, err := c.in.call(fnHmacSha256, uint64(len(key)), uint64(len(msg))); err != nil {
		return d, err
	}
	copy(d[:], c.in.read(c.in.result+resultDigest, 32))
	return d, nil
}

// ErrNeedEntropy is GeneratePasswordFrom's answer when the draw ran out before the password was complete.
var ErrNeedEntropy = errors.New("api-auth core: the entropy ran out; call again with fresh bytes")

// GeneratePasswordFrom makes a password of length letters and digits from one draw of
// entropy (at least length bytes from a CSPRNG); ErrNeedEntropy asks for a fresh draw.
func (c *Core) GeneratePasswordFrom(draw []byte, length int) (string, error) {
	r, err := c.in.call(fnGeneratePassword, c.in.putBytes(c.in.io, c.in.ioCap, draw), uint64(length))
	if err != nil {
		return "", err
	}
	switch n := int32(r); {
	case n == -1:
		return "", ErrNeedEntropy
	case n < 0:
		return "", newError(CodeBadOptions, "a password length of %d, or a draw of %d bytes, is out of range", length, len(draw))
	default:
		return string(c.in.read(c.in.token, uint32(n))), nil
	}
}
