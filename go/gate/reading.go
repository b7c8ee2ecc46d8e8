package gate

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The one reading of a JSON-RPC body, as host/rpc/reading.ts reads it: which calls the
// node will run, read once, for a token's method scope and for its limits alike. The
// cases of test/vectors/rpc-bodies.json state the rules, and both readings run them.
//
// A body is read only when it is exactly one JSON-RPC call or a non-empty batch of them,
// as every node reads it. encoding/json, which geth and most Go nodes use, reads the first
// JSON value of a body and, through json.Decoder, may leave what follows unread;
// JavaScript nodes parse the whole text. So a body with anything after its value (a second
// value, a stray byte, a BOM before it) could be read two ways, and is not read at all; nor
// is one that is not UTF-8, nests deeper than MaxDepth, or has a call whose method a node
// could take from a member other than "method". encoding/json matches member names without
// regard to case and keeps the last, JSON.parse keeps the last spelled exactly, so a call
// with two members that fold to "method", or one spelled otherwise ("Method"), is refused.
//
// The JSON is checked by a scanner of this file rather than json.Valid, which stops at
// 10,000 levels: a body nested deeper is "depth" here, as it is for the gateway, whose
// JSON.parse has no such limit, and not "json".

// MaxDepth is how deep a body's values may nest; a deeper body is not read.
const MaxDepth = 128

// Unreadable is why a body was not read; Readable when it was.
type Unreadable uint8

// The reasons, in the order the reading finds them.
const (
	Readable      Unreadable = iota
	NoBody                   // no body at all
	NotUTF8                  // bytes that are not UTF-8
	ByteOrderMark            // a byte order mark before the value
	NotOneValue              // not one JSON value alone: a syntax error, or bytes after the value
	TooDeep                  // values nested deeper than MaxDepth
	EmptyBatch               // []
	NotACall                 // a value (or batch element) that is not an object with a "method" string
	MethodTwice              // a call with more than one member a node could take as its method
	// Compressed is the gate's own, never ReadCalls': a body with a Content-Encoding other
	// than identity, which the gate does not decode, so that it reads no other bytes than
	// the node would.
	Compressed
)

var unreadableNames = [...]string{"", "none", "utf8", "bom", "json", "depth", "empty batch", "not a call", "method twice", "encoding"}

// String is the reason as host/rpc/reading.ts and the vectors spell it.
func (u Unreadable) String() string {
	if int(u) < len(unreadableNames) {
		return unreadableNames[u]
	}
	return "Unreadable(" + itoa(int(u)) + ")"
}

// Call is one call of a body that was read.
type Call struct {
	// Method is the method, as the node will take it.
	Method string
	// ID is the source text of its id ("" for a notification: no "id" member); an id that
	// is an object, an array or a boolean reads as "null", as no node echoes it.
	ID string
	// Start and End are where its object starts and ends in the body.
	Start, End int
}

// Reading is a body read: its calls in order, or why it was not read.
type Reading struct {
	// Problem is Readable when the body was read.
	Problem Unreadable
	// Batch: the body is an array (even of one call), not a lone call.
	Batch bool
	Calls []Call
	// At is, for NotACall and MethodTwice in a batch, the element's place; -1 otherwise.
	At int
	// ID is the id's source text of a lone call that was not read (for its error); "" otherwise.
	ID string
}

var bom = []byte("\xef\xbb\xbf")

// ReadCalls reads a request body: its calls, or why they cannot be known.
func ReadCalls(body []byte) Reading {
	switch {
	case len(body) == 0:
		return notRead(NoBody)
	case !utf8.Valid(body):
		return notRead(NotUTF8)
	case bytes.HasPrefix(body, bom):
		return notRead(ByteOrderMark)
	}
	ok, depth := scanJSON(body)
	if !ok {
		return notRead(NotOneValue)
	}
	if depth > MaxDepth {
		return notRead(TooDeep)
	}
	start := skipSpace(body, 0)
	if body[start] != '[' {
		c, problem := readCall(body, start)
		if problem != Readable {
			return Reading{Problem: problem, At: -1, ID: c.ID}
		}
		return Reading{Calls: []Call{c}, At: -1}
	}
	i := skipSpace(body, start+1)
	if body[i] == ']' {
		return notRead(EmptyBatch)
	}
	var calls []Call
	for {
		c, problem := readCall(body, i)
		if problem != Readable {
			return Reading{Problem: problem, At: len(calls)}
		}
		calls = append(calls, c)
		i = skipSpace(body, c.End)
		if body[i] == ']' {
			return Reading{Batch: true, Calls: calls, At: -1}
		}
		i = skipSpace(body, i+1)
	}
}

func notRead(u Unreadable) Reading { return Reading{Problem: u, At: -1} }

// readCall reads the value at i as a call. A call that is not read still gives its id,
// when it is an object, for the error a lone call gets.
func readCall(text []byte, i int) (Call, Unreadable) {
	c := Call{Start: i}
	if text[i] != '{' {
		return c, NotACall
	}
	methods := 0
	exact, isString := false, false
	i = skipSpace(text, i+1)
	for text[i] == '"' {
		keyEnd := skipString(text, i)
		valueStart := skipSpace(text, skipSpace(text, keyEnd)+1)
		valueEnd := skipValue(text, valueStart)
		key := jsonString(text[i:keyEnd])
		switch {
		case foldsToMethod(key):
			methods++
			exact = key == "method"
			isString = text[valueStart] == '"'
			if isString {
				c.Method = jsonString(text[valueStart:valueEnd])
			}
		case key == "id":
			// The source text, so that an answer carries the digits the client sent; the last id counts.
			switch text[valueStart] {
			case '{', '[', 't', 'f':
				c.ID = "null"
			default:
				c.ID = string(text[valueStart:valueEnd])
			}
		}
		i = skipSpace(text, valueEnd)
		if text[i] == ',' {
			i = skipSpace(text, i+1)
		}
	}
	c.End = i + 1
	switch {
	case methods > 1:
		return c, MethodTwice
	case methods == 0 || !exact || !isString:
		return c, NotACall
	}
	return c, Readable
}

// jsonString is the value of a JSON string's text (quotes included) that the scanner
// accepted; most have no escape, and are their bytes.
func jsonString(quoted []byte) string {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner)
	}
	var s string
	json.Unmarshal(quoted, &s)
	return s
}

// foldsToMethod tells whether encoding/json would match name to a field tagged "method".
// It folds ASCII letters to upper case and any other rune to the least of its fold orbit
// (unicode.SimpleFold; Go 1.20 and before, unicode.ToUpper(unicode.ToLower(r))): no rune
// beyond ASCII folds to a letter of "METHOD" under either rule (the four that fold into
// ASCII at all are İ, ı, ſ and K, to I, S and K), nor under JavaScript's toLowerCase then
// toUpperCase, which host/rpc/reading.ts applies. So a name folds to "METHOD" exactly
// when it is those six letters in ASCII, in any case; TestNoRuneBeyondASCIIFoldsIntoMethod
// checks every rune.
func foldsToMethod(name string) bool {
	if len(name) != 6 {
		return false
	}
	for k := 0; k < 6; k++ {
		if name[k]|0x20 != "method"[k] {
			return false
		}
	}
	return true
}

// scanJSON tells whether text is exactly one JSON value (RFC 8259, as JSON.parse and
// json.Valid take it) with only JSON whitespace around it, and how deep its arrays and
// objects nest. It keeps its own stack, so that no depth is too deep to scan.
func scanJSON(text []byte) (ok bool, depth int) {
	var open []byte
	i := skipSpace(text, 0)
	for {
		// A value starts at i.
		if i >= len(text) {
			return false, 0
		}
		switch c := text[i]; {
		case c == '{' || c == '[':
			open = append(open, c)
			depth = max(depth, len(open))
			i = skipSpace(text, i+1)
			if i < len(text) && text[i] == c+2 { // '{'+2 is '}', '['+2 is ']'
				open = open[:len(open)-1]
				i++
				break
			}
			if c == '{' {
				if i = memberStart(text, i); i < 0 {
					return false, 0
				}
			}
			continue
		case c == '"':
			if i = scanString(text, i); i < 0 {
				return false, 0
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = scanNumber(text, i); i < 0 {
				return false, 0
			}
		case c == 't' && bytes.HasPrefix(text[i:], []byte("true")), c == 'n' && bytes.HasPrefix(text[i:], []byte("null")):
			i += 4
		case c == 'f' && bytes.HasPrefix(text[i:], []byte("false")):
			i += 5
		default:
			return false, 0
		}
		// After a value: a comma and the next, the end of its array or object, or of the text.
		for {
			i = skipSpace(text, i)
			if len(open) == 0 {
				return i == len(text), depth
			}
			if i >= len(text) {
				return false, 0
			}
			top := open[len(open)-1]
			if text[i] == top+2 {
				open = open[:len(open)-1]
				i++
				continue
			}
			if text[i] != ',' {
				return false, 0
			}
			i = skipSpace(text, i+1)
			if top == '{' {
				if i = memberStart(text, i); i < 0 {
					return false, 0
				}
			}
			break
		}
	}
}

// memberStart scans a member's name and its colon from i: where its value starts, or -1.
func memberStart(text []byte, i int) int {
	if i >= len(text) || text[i] != '"' {
		return -1
	}
	if i = scanString(text, i); i < 0 {
		return -1
	}
	i = skipSpace(text, i)
	if i >= len(text) || text[i] != ':' {
		return -1
	}
	return skipSpace(text, i+1)
}

// scanString scans the string whose quote is at i: just past its closing quote, or -1.
func scanString(text []byte, i int) int {
	for i++; i < len(text); i++ {
		switch c := text[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(text) {
				return -1
			}
			switch text[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(text) {
					return -1
				}
				for _, h := range text[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// scanNumber scans the number at i: just past it, or -1.
func scanNumber(text []byte, i int) int {
	digits := func(i int) int {
		start := i
		for i < len(text) && text[i] >= '0' && text[i] <= '9' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
	if text[i] == '-' {
		i++
	}
	if i < len(text) && text[i] == '0' {
		i++
	} else if i = digits(i); i < 0 {
		return -1
	}
	if i < len(text) && text[i] == '.' {
		if i = digits(i + 1); i < 0 {
			return -1
		}
	}
	if i < len(text) && (text[i] == 'e' || text[i] == 'E') {
		i++
		if i < len(text) && (text[i] == '+' || text[i] == '-') {
			i++
		}
		if i = digits(i); i < 0 {
			return -1
		}
	}
	return i
}

// The scanners below read text that scanJSON accepted: they find where members and values
// start and end, and trust the shape.

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
