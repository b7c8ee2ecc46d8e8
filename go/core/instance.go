package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The exports a host calls, looked up once per instance.
const (
	fnInit = iota
	fnSetKey
	fnGeneration
	fnSetGeneration
	fnBumpGeneration
	fnGrantAdd
	fnGrantFind
	fnGrantCount
	fnMethodAllowed
	fnIssue
	fnIssueSerial
	fnVerify
	fnAuthorize
	fnCheckPath
	fnRevoke
	fnInspect
	fnRevokeSerial
	fnNextSerial
	fnFloor
	fnRestoreSerials
	fnReserveSerials
	fnSweep
	fnGeneratePassword
	fnSha256
	fnHmacSha256
	fnAttach
	fnDetach
	fnSlots
	fnAdmit
	fnUsage
	fnSetLimitShare
	fnCount
)

var exportNames = [fnCount]string{"init", "setKey", "generation", "setGeneration", "bumpGeneration", "grantAdd",
	"grantFind", "grantCount", "methodAllowed", "issue", "issueSerial", "verify", "authorize", "checkPath", "revoke",
	"inspect", "revokeSerial", "nextSerial", "floor", "restoreSerials", "reserveSerials", "sweep", "generatePassword",
	"sha256", "hmacSha256", "attach", "detach", "slots", "admit", "usage", "setLimitShare"}

// instance is one instance of the core and the only code here that touches its memory.
// It is single-threaded, as the core's instances are: one goroutine at a time.
type instance struct {
	ctx    context.Context
	mod    api.Module
	mem    api.Memory
	fns    [fnCount]api.Function
	stack  [5]uint64
	broken error

	token, tokenCap, path, pathCap, io, ioCap, result uint32
}

func instantiate(ctx context.Context, r wazero.Runtime, compiled wazero.CompiledModule) (*instance, error) {
	mod, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("api-auth core: cannot instantiate: %w", err)
	}
	in := &instance{ctx: ctx, mod: mod, mem: mod.Memory()}
	for i, name := range exportNames {
		in.fns[i] = mod.ExportedFunction(name)
	}
	abi := mod.ExportedFunction("abiVersion")
	if abi == nil {
		mod.Close(ctx)
		return nil, newError(CodeABI, "the module exports no abiVersion: it is not the api-auth core")
	}
	got, err := abi.Call(ctx)
	if err != nil || got[0] != ABIVersion {
		mod.Close(ctx)
		return nil, newError(CodeABI, "the core speaks ABI %v, this host ABI %d", got, ABIVersion)
	}
	return in, nil
}

// buffers reads the exchange buffers' addresses, which are fixed once init or attach returned.
func (in *instance) buffers() error {
	get := func(name string) uint32 {
		v, err := in.mod.ExportedFunction(name).Call(in.ctx)
		if err != nil {
			in.broken = err
			return 0
		}
		return uint32(v[0])
	}
	in.token, in.tokenCap = get("tokenBuffer"), get("tokenCapacity")
	in.path, in.pathCap = get("pathBuffer"), get("pathCapacity")
	in.io, in.ioCap = get("ioBuffer"), get("ioCapacity")
	in.result = get("resultBuffer")
	return in.broken
}

// call runs an export with its arguments in the instance's own stack, allocating nothing,
// and returns its first result. A trap (env.abort) ends the instance.
func (in *instance) call(fn int, args ...uint64) (uint64, error) {
	if in.broken != nil {
		return 0, in.broken
	}
	f := in.fns[fn]
	if f == nil {
		return 0, newError(CodeABI, "the core does not export %s", exportNames[fn])
	}
	copy(in.stack[:], args)
	if err := f.CallWithStack(in.ctx, in.stack[:]); err != nil {
		var a abortError
		if errors.As(err, &a) {
			in.broken = &Error{Code: CodeTrap, Index: -1, Message: a.Error()}
		} else {
			in.broken = &Error{Code: CodeTrap, Index: -1, Message: "the core trapped: " + err.Error()}
		}
		return 0, in.broken
	}
	return in.stack[0], nil
}

// put writes what fits of s at ptr and returns its whole length: the core refuses a
// length over a buffer's capacity from the length alone.
func (in *instance) put(ptr, capacity uint32, s string) uint64 {
	n := len(s)
	if n > int(capacity) {
		s = s[:capacity]
	}
	in.mem.WriteString(ptr, s)
	return uint64(n)
}

func (in *instance) putBytes(ptr, capacity uint32, b []byte) uint64 {
	n := len(b)
	if n > int(capacity) {
		b = b[:capacity]
	}
	in.mem.Write(ptr, b)
	return uint64(n)
}

func (in *instance) u32(ptr uint32) uint32 {
	v, _ := in.mem.ReadUint32Le(ptr)
	return v
}

func (in *instance) u64(ptr uint32) uint64 {
	v, _ := in.mem.ReadUint64Le(ptr)
	return v
}

func (in *instance) read(ptr, n uint32) []byte {
	b, _ := in.mem.Read(ptr, n)
	return append([]byte(nil), b...)
}

// check is authorize (header) or verify (token): the outcome, and what a Scoped or
// Limited check left in the result record, read before any other call can write it.
func (in *instance) check(fn int, text, path string, now int64) (Result, error) {
	textLen := in.put(in.token, in.tokenCap, text)
	pathLen := in.put(in.path, in.pathCap, path)
	o, err := in.call(fn, textLen, pathLen, uint64(now))
	if err != nil {
		return Result{}, err
	}
	r := Result{Outcome: Outcome(uint32(o))}
	if r.Outcome == Scoped || r.Outcome == Limited {
		r.Grant = in.u32(in.result + resultGrant)
		r.Scoped = in.u32(in.result+resultScoped) == 1
	}
	if r.Outcome == Limited {
		r.Serial = in.u64(in.result + resultSerial)
		r.Expiry = in.u64(in.result + resultExpiry)
	}
	return r, nil
}

// admit is one call of a Limited token's (assembly/README.md, "Limits"): the client's
// 16 bytes go to the io buffer, and a RateLimited or QuotaSpent wait comes back in the
// result record (resultWait, and resultReset for a quota), apart from the check's fields.
func (in *instance) admit(serial, expiry uint64, grant, calls uint32, client [16]byte, nowNs int64) (Admission, error) {
	in.mem.Write(in.io, client[:])
	v, err := in.call(fnAdmit, serial, expiry, uint64(grant), uint64(calls), uint64(nowNs))
	if err != nil {
		return Admission{}, err
	}
	r := AdmitResult(int32(uint32(v)))
	if r == -2 {
		return Admission{}, newError(CodeUnknownGrant, "no grant %d", grant)
	}
	a := Admission{Result: r}
	if r == RateLimited || r == QuotaSpent {
		a.WaitNs = in.u64(in.result + resultWait)
	}
	if r == QuotaSpent {
		a.ResetNs = int64(in.u64(in.result + resultReset))
	}
	return a, nil
}

func (in *instance) usage(serial uint64) (Usage, bool, error) {
	v, err := in.call(fnUsage, serial)
	if err != nil || uint32(v) != 1 {
		return Usage{}, false, err
	}
	return Usage{Requests: in.u64(in.result + resultRequests), LastNs: int64(in.u64(in.result + resultLastUsed))}, true, nil
}

func (in *instance) methodAllowed(grant uint32, method string) (int32, error) {
	v, err := in.call(fnMethodAllowed, uint64(grant), in.put(in.path, in.pathCap, method))
	return int32(v), err
}
