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

// judgeScope returns "" when every call of body is allowed, else the refusal's JSON text
// (no line feed). A failure of the core refuses too.
func judgeScope(a allower, grant uint32, body []byte) string {
	allowed := func(method string) bool {
		ok, err := a.MethodAllowed(grant, method)
		return err == nil && ok
	}
	if len(body) == 0 {
		return rpcError(codeInsufficientScope, noneBody, "null")
	}
	// The gateway decodes with a fatal TextDecoder, which drops a leading byte order mark.
	text := bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(text) || !json.Valid(text) {
		return rpcError(codeInsufficientScope, notJSON, "null")
	}
	start := skipSpace(text, 0)
	if text[start] != '[' {
		c := readCall(text, start)
		if c.problem != "" {
			return rpcError(codeInsufficientScope, scoped+": the body "+c.problem, idOrNull(c.id))
		}
		if allowed(c.method) {
			return ""
		}
		return rpcError(codeInsufficientScope, notAllowed(c.method), idOrNull(c.id))
	}
	i := skipSpace(text, start+1)
	if text[i] == ']' {
		return rpcError(codeInsufficientScope, emptyBatch, "null")
	}
	var calls []call
	refused := -1
	bad := -1
	for text[i] != ']' {
		c := readCall(text, i)
		if c.problem != "" && bad < 0 {
			bad = len(calls)
		}
		if bad < 0 && refused < 0 && !allowed(c.method) {
			refused = len(calls)
		}
		calls = append(calls, c)
		i = skipSpace(text, skipValue(text, i))
		if text[i] == ',' {
			i = skipSpace(text, i+1)
		}
	}
	if bad >= 0 {
		message := scoped + ": call " + itoa(bad) + " of the batch " + calls[bad].problem
		return errorsFor(calls, func(call) string { return message }, message)
	}
	if refused < 0 {
		return ""
	}
	also := "not forwarded: this batch also calls " + quoted(calls[refused].method) + ", which the provided auth token does not allow"
	return errorsFor(calls, func(c call) string {
		if allowed(c.method) {
			return also
		}
		return notAllowed(c.method)
	}, notAllowed(calls[refused].method))
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
