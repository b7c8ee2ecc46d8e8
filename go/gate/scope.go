package gate

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The method check of a token with a method scope, as host/http/scope.ts makes it, on
// the body's one reading (reading.go): the body, one JSON-RPC call or a batch, passes only
// if the grant allows the method of every call. A body that cannot be read was refused
// before this (Wrap). The refusals are the gateway's, byte for byte.

// methodShown is how many characters of a method name a refusal shows.
const methodShown = 64

// allower is the core's method check for a grant.
type allower interface {
	MethodAllowed(grant uint32, method string) (bool, error)
}

// scopeVerdict is what judgeScope found: every call allowed (the zero value), a refusal of
// every call (text: 200, as a method's error is), or a batch of which only some calls are
// allowed (split).
type scopeVerdict struct {
	text  string
	split *scopeSplit
}

// scopeSplit is a batch with some calls allowed, as host/http/scope.ts's ScopeSplit: the
// allowed calls go to the handler as one batch, each as the client wrote it, and the
// refused ones are answered in their places in the merged answer.
type scopeSplit struct {
	calls   []Call
	allowed []bool
	errors  []string // errors[k]: the refusal of call k, "" when it is allowed or has no id
	forward []byte
	// forwarded is how many calls forward holds: what a token's limits count.
	forwarded int
}

// merge returns the handler's answer to forward merged with the refusals, in the calls'
// order, matching answers to calls by id as JSON values; false when answer is not a
// batch's (an array), which then goes to the client as it is.
func (s *scopeSplit) merge(answer []byte) ([]byte, bool) {
	var answers []json.RawMessage
	if len(bytes.TrimSpace(answer)) == 0 {
		answers = nil
	} else if err := json.Unmarshal(answer, &answers); err != nil {
		return nil, false
	}
	key := func(id []byte) string {
		var v any
		if json.Unmarshal(id, &v) != nil {
			return "null"
		}
		k, _ := json.Marshal(v)
		return string(k)
	}
	byID := map[string][][]byte{}
	var order []string
	for _, one := range answers {
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(one, &head)
		k := "null"
		if len(head.ID) > 0 {
			k = key(head.ID)
		}
		var compact bytes.Buffer
		if json.Compact(&compact, one) != nil {
			return nil, false
		}
		if _, seen := byID[k]; !seen {
			order = append(order, k)
		}
		byID[k] = append(byID[k], compact.Bytes())
	}
	var merged [][]byte
	for i, c := range s.calls {
		if !s.allowed[i] {
			if s.errors[i] != "" {
				merged = append(merged, []byte(s.errors[i]))
			}
			continue
		}
		if c.ID == "" {
			continue
		}
		k := key([]byte(c.ID))
		if queue := byID[k]; len(queue) > 0 {
			merged = append(merged, queue[0])
			byID[k] = queue[1:]
		}
	}
	for _, k := range order {
		merged = append(merged, byID[k]...)
	}
	if len(merged) == 0 {
		return answer, true
	}
	return append(append([]byte{'['}, bytes.Join(merged, []byte{','})...), ']'), true
}

// judgeScope returns the zero verdict when the grant allows every call of a body read,
// else the refusal's JSON text (no line feed), or the split of a batch with some calls
// allowed. A failure of the core refuses too.
func judgeScope(a allower, grant uint32, r Reading, body []byte) scopeVerdict {
	allowed := func(method string) bool {
		ok, err := a.MethodAllowed(grant, method)
		return err == nil && ok
	}
	if !r.Batch {
		c := r.Calls[0]
		if allowed(c.Method) {
			return scopeVerdict{}
		}
		return scopeVerdict{text: rpcError(codeInsufficientScope, notAllowed(c.Method), idOrNull(c.ID))}
	}
	ok := make([]bool, len(r.Calls))
	refused := -1
	for k, c := range r.Calls {
		ok[k] = allowed(c.Method)
		if !ok[k] && refused < 0 {
			refused = k
		}
	}
	if refused < 0 {
		return scopeVerdict{}
	}
	split := &scopeSplit{calls: r.Calls, allowed: ok, errors: make([]string, len(r.Calls))}
	var forward [][]byte
	var answers []string
	for k, c := range r.Calls {
		if ok[k] {
			forward = append(forward, body[c.Start:c.End])
		} else if c.ID != "" {
			split.errors[k] = rpcError(codeInsufficientScope, notAllowed(c.Method), c.ID)
			answers = append(answers, split.errors[k])
		}
	}
	if len(forward) > 0 {
		split.forward = append(append([]byte{'['}, bytes.Join(forward, []byte{','})...), ']')
		split.forwarded = len(forward)
		return scopeVerdict{split: split}
	}
	// Every call refused: the handler is not asked. A batch of notifications only gets the
	// one error without an id.
	if len(answers) == 0 {
		return scopeVerdict{text: rpcError(codeInsufficientScope, notAllowed(r.Calls[refused].Method), "null")}
	}
	return scopeVerdict{text: "[" + strings.Join(answers, ",") + "]"}
}

func idOrNull(id string) string {
	if id == "" {
		return "null"
	}
	return id
}

func notAllowed(method string) string {
	return "the provided auth token does not allow method " + quoted(method)
}

// quoted shows a method as the gateway does: JSON text, cut after 64 characters with "…"
// when it is longer than 64 UTF-16 units (JavaScript's length).
func quoted(method string) string {
	units := 0
	for _, r := range method {
		units++
		if r >= 0x10000 {
			units++
		}
	}
	if units <= methodShown {
		return quote(method)
	}
	n := 0
	for i := range method {
		if n == methodShown {
			return quote(method[:i] + "…")
		}
		n++
	}
	return quote(method + "…")
}

func itoa(n int) string {
	return string(appendInt(nil, n))
}

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}
