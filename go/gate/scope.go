package gate

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The method check of a token with a method scope, as host/http/scope.ts makes it: the
// body, one JSON-RPC call or a batch, passes only if the grant allows the method of every
// call, and whatever cannot be read as JSON-RPC fails closed. The refusals are the
// gateway's, byte for byte. Members are read from the text itself: a call that names its
// method twice, or as "Method" (encoding/json, which most Go nodes use, matches names
// without regard to case and keeps the last), is refused rather than guessed at.

const (
	// methodShown is how many characters of a method name a refusal shows.
	methodShown = 64
	scoped      = "the provided auth token allows only some JSON-RPC methods"
	noneBody    = scoped + ": the request must carry a JSON-RPC call or batch in its body, and it has none"
	notJSON     = scoped + ": the body is not valid UTF-8 JSON"
	emptyBatch  = scoped + ": the batch is empty"
	notACall    = `is not a JSON-RPC call (an object with a "method" string)`
	namedTwice  = "names its method more than once (servers differ on which one counts)"
)

// allower is the core's method check for a grant.
type allower interface {
	MethodAllowed(grant uint32, method string) (bool, error)
}

type call struct {
	method  string
	id      string // the id's source text; "" for a notification
	problem string // why it is not a call the check can read; "" when it is
}

// scopeVerdict is what judgeScope found: nothing to refuse (the zero value), a refusal
// (text, with forbidden for a body that is not JSON-RPC: 403 rather than 200), or a
// batch of which only some calls are allowed (split).
type scopeVerdict struct {
	text      string
	forbidden bool
	split     *scopeSplit
}

// scopeSplit is a batch with some calls allowed, as host/http/scope.ts's ScopeSplit: the
// allowed calls go to the handler as one batch, each as the client wrote it, and the
// refused ones are answered in their places in the merged answer.
type scopeSplit struct {
	calls   []call
	allowed []bool
	errors  []string // errors[k]: the refusal of call k, "" when it is allowed or has no id
	forward []byte
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
		if c.id == "" {
			continue
		}
		k := key([]byte(c.id))
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

// judgeScope returns the zero verdict when every call of body is allowed, else the
// refusal's JSON text (no line feed), or the split of a batch with some calls allowed. A
// failure of the core refuses too.
func judgeScope(a allower, grant uint32, body []byte) scopeVerdict {
	allowed := func(method string) bool {
		ok, err := a.MethodAllowed(grant, method)
		return err == nil && ok
	}
	if len(body) == 0 {
		return scopeVerdict{text: rpcError(codeInsufficientScope, noneBody, "null"), forbidden: true}
	}
	// The gateway decodes with a fatal TextDecoder, which drops a leading byte order mark.
	text := bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(text) || !json.Valid(text) {
		return scopeVerdict{text: rpcError(codeInsufficientScope, notJSON, "null"), forbidden: true}
	}
	start := skipSpace(text, 0)
	if text[start] != '[' {
		c := readCall(text, start)
		if c.problem != "" {
			return scopeVerdict{text: rpcError(codeInsufficientScope, scoped+": the body "+c.problem, idOrNull(c.id)), forbidden: true}
		}
		if allowed(c.method) {
			return scopeVerdict{}
		}
		return scopeVerdict{text: rpcError(codeInsufficientScope, notAllowed(c.method), idOrNull(c.id))}
	}
	i := skipSpace(text, start+1)
	if text[i] == ']' {
		return scopeVerdict{text: rpcError(codeInsufficientScope, emptyBatch, "null"), forbidden: true}
	}
	var calls []call
	var texts [][]byte
	var ok []bool
	refused := -1
	bad := -1
	for text[i] != ']' {
		c := readCall(text, i)
		if c.problem != "" && bad < 0 {
			bad = len(calls)
		}
		end := skipValue(text, i)
		allows := bad < 0 && allowed(c.method)
		if bad < 0 && refused < 0 && !allows {
			refused = len(calls)
		}
		calls = append(calls, c)
		texts = append(texts, text[i:end])
		ok = append(ok, allows)
		i = skipSpace(text, end)
		if text[i] == ',' {
			i = skipSpace(text, i+1)
		}
	}
	if bad >= 0 {
		message := scoped + ": call " + itoa(bad) + " of the batch " + calls[bad].problem
		return scopeVerdict{text: errorsFor(calls, func(call) string { return message }, message), forbidden: true}
	}
	if refused < 0 {
		return scopeVerdict{}
	}
	split := &scopeSplit{calls: calls, allowed: ok, errors: make([]string, len(calls))}
	var forward [][]byte
	for k, c := range calls {
		if ok[k] {
			forward = append(forward, texts[k])
		} else if c.id != "" {
			split.errors[k] = rpcError(codeInsufficientScope, notAllowed(c.method), c.id)
		}
	}
	if len(forward) > 0 {
		split.forward = append(append([]byte{'['}, bytes.Join(forward, []byte{','})...), ']')
		return scopeVerdict{split: split}
	}
	// Every call refused: the handler is not asked.
	return scopeVerdict{text: errorsFor(calls, func(c call) string { return notAllowed(c.method) }, notAllowed(calls[refused].method))}
}

// errorsFor is a batch's refusal: an error for each call that has an id, or one with id
// null when none has.
func errorsFor(calls []call, message func(call) string, alone string) string {
	var out []byte
	for _, c := range calls {
		if c.id == "" {
			continue
		}
		if out == nil {
			out = append(out, '[')
		} else {
			out = append(out, ',')
		}
		out = append(out, rpcError(codeInsufficientScope, message(c), c.id)...)
	}
	if out == nil {
		return rpcError(codeInsufficientScope, alone, "null")
	}
	return string(append(out, ']'))
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

// The text is valid JSON already: the reading below finds where members and values start
// and end, and trusts the shape.

func readCall(text []byte, i int) call {
	if text[i] != '{' {
		return call{problem: notACall}
	}
	var method string
	hasMethod, methods, spelled := false, 0, true
	id := ""
	i = skipSpace(text, i+1)
	for text[i] == '"' {
		keyEnd := skipString(text, i)
		var key string
		json.Unmarshal(text[i:keyEnd], &key)
		valueStart := skipSpace(text, skipSpace(text, keyEnd)+1)
		valueEnd := skipValue(text, valueStart)
		switch {
		case len(key) == 6 && bytes.EqualFold([]byte(key), []byte("method")):
			methods++
			spelled = key == "method"
			hasMethod = text[valueStart] == '"'
			method = ""
			if hasMethod {
				json.Unmarshal(text[valueStart:valueEnd], &method)
			}
		case key == "id":
			// The source text, so the client gets back the digits it sent; the last id counts.
			switch text[valueStart] {
			case '{', '[', 't', 'f':
				id = "null"
			default:
				id = string(text[valueStart:valueEnd])
			}
		}
		i = skipSpace(text, valueEnd)
		if text[i] == ',' {
			i = skipSpace(text, i+1)
		}
	}
	switch {
	case methods > 1:
		return call{id: id, problem: namedTwice}
	case methods == 0 || !spelled || !hasMethod:
		return call{id: id, problem: notACall}
	}
	return call{method: method, id: id}
}

func skipSpace(text []byte, i int) int {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r') {
		i++
	}
	return i
}

func skipString(text []byte, i int) int {
	for i++; ; i++ {
		switch text[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

func skipValue(text []byte, i int) int {
	switch text[i] {
	case '"':
		return skipString(text, i)
	case '{', '[':
		for depth := 0; ; {
			switch text[i] {
			case '"':
				i = skipString(text, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(text) && !bytes.ContainsRune([]byte(",]} \t\n\r"), rune(text[i])) {
		i++
	}
	return i
}
