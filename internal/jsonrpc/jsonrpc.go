// Package jsonrpc owns the envelope of newline-delimited JSON-RPC 2.0
// messages: it finds the few values a relay routes by (id, method,
// progress tokens, cancelled request ids, resource uris) in one pass over
// the raw bytes and splices replacements into them. It never decodes
// bodies, so a 1 MiB tool result costs one scan and one copy, and what
// reaches the other side is the sender's bytes with only the spliced
// values changed.
//
// # One meaning per message
//
// A relay that passes bytes on must never forward a message the other
// side could read differently from the relay. JSON-RPC keys are
// case-sensitive, but encoding/json matches struct fields case-insensitively
// (with Unicode folding: "ID", "\u0069d", "requeſtId" all reach an id or
// requestId field), and decoders differ on which of two equal keys wins.
// So Parse refuses (ErrAmbiguous) a message whose envelope — the top-level
// keys, params' routed keys and params._meta's — has a duplicate protocol
// key, or a key that is not byte-equal to a protocol key but equal to one
// after unescaping or case folding; a method with a control character or
// an invalid code point, or one that is a method the relay routes only
// once case is folded; a message that is both request and response; a raw
// CR or LF inside the message (line readers differ on where it ends).
// Refusal keeps the relay's promise that what it forwards is the sender's
// bytes; a canonical re-encoding would have to rewrite them.
//
// Batches (a top-level array) are refused: MCP removed them in 2025-06-18.
package jsonrpc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// Span is the byte offsets of a JSON value in a message: msg[Start:End].
// Start == End == 0 means absent (no JSON value is empty).
type Span struct{ Start, End int }

// Present reports whether the span names a value.
func (s Span) Present() bool { return s.End > s.Start }

// Envelope is what a relay needs to know about one message.
type Envelope struct {
	JSONRPC       Span   // top-level "jsonrpc" value
	ID            Span   // top-level "id" value (number, string or null)
	Method        string // top-level "method", decoded ("" if absent)
	HasResult     bool   // top-level "result" present
	HasError      bool   // top-level "error" present
	ProgressToken Span   // params._meta.progressToken (in requests)
	NotifToken    Span   // params.progressToken (in notifications/progress)
	RequestID     Span   // params.requestId (in notifications/cancelled)
	URI           string // params.uri, decoded if a string (resources/subscribe, unsubscribe, notifications/resources/updated)
}

// IsRequest reports a message with a method and an id.
func (e Envelope) IsRequest() bool { return e.Method != "" && e.ID.Present() }

// IsNotification reports a message with a method and no id.
func (e Envelope) IsNotification() bool { return e.Method != "" && !e.ID.Present() }

// IsResponse reports a message with an id, a result or an error, and no method.
func (e Envelope) IsResponse() bool {
	return e.Method == "" && e.ID.Present() && (e.HasResult || e.HasError)
}

// Errors Parse wraps; test with errors.Is.
var (
	// ErrSyntax: the message is not valid JSON.
	ErrSyntax = errors.New("invalid JSON")
	// ErrBatch: the message is a JSON-RPC batch (a top-level array).
	ErrBatch = errors.New("JSON-RPC batches are not supported")
	// ErrNotObject: the message is valid JSON but neither an object nor an array.
	ErrNotObject = errors.New("a JSON-RPC message must be an object")
	// ErrEnvelope: "id" or "method" has a type JSON-RPC does not allow.
	ErrEnvelope = errors.New("invalid JSON-RPC envelope")
	// ErrAmbiguous: another decoder could read the envelope differently
	// (a duplicate, case-variant or escaped protocol key; a method with a
	// control character; a message both request and response). It is
	// also ErrEnvelope.
	ErrAmbiguous = fmt.Errorf("%w: ambiguous", ErrEnvelope)
	// ErrTooDeep: valid JSON nested deeper than the MCP SDKs accept.
	ErrTooDeep = fmt.Errorf("%w: too deeply nested", ErrEnvelope)
)

// maxDepth is the nesting the MCP SDKs accept: the Go SDK's decoder
// stops at 1000 levels (and closes the connection), Python's recursion
// near it. A relay must not forward what would kill its upstream.
const maxDepth = 1000

// Keys a relay routes by, at each level of the envelope; the bit of a key
// is its index. A message naming one of them in a way some decoder reads
// differently is refused (ErrAmbiguous).
var (
	topKeys   = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramKeys = []string{"_meta", "progressToken", "requestId", "uri", "cursor", "protocolVersion"}
	metaKeys  = []string{"progressToken", "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/subscriptionId"}
)

const (
	topID = 1 + iota
	topMethod
	topParams
	topResult
	topError
)

const (
	paramMeta = iota
	paramProgressToken
	paramRequestID
	paramURI
)

// Parse reads the envelope of one message (without its newline). It
// refuses (ErrAmbiguous) any message another decoder could read
// differently: see the package doc.
func Parse(msg []byte) (Envelope, error) {
	var e Envelope
	s := scanner{b: msg}
	s.ws()
	if s.i >= len(s.b) {
		return e, fmt.Errorf("%w: empty message", ErrSyntax)
	}
	switch s.b[s.i] {
	case '{':
	case '[':
		if err := s.value(1); err != nil {
			return e, err
		}
		if err := s.end(); err != nil {
			return e, err
		}
		return e, ErrBatch
	default:
		if err := s.value(1); err != nil {
			return e, err
		}
		if err := s.end(); err != nil {
			return e, err
		}
		return e, ErrNotObject
	}
	var method, uri Span
	var top uint8
	err := s.object(1, func(k []byte, kesc bool) error {
		i, err := s.key(k, kesc, topKeys, &top, "")
		if err != nil {
			return err
		}
		switch i {
		case 0:
			return s.capture(2, &e.JSONRPC)
		case topID:
			return s.capture(2, &e.ID)
		case topMethod:
			return s.capture(2, &method)
		case topResult:
			e.HasResult = true
			return s.value(2)
		case topError:
			e.HasError = true
			return s.value(2)
		case topParams:
			if s.peek() != '{' {
				return s.value(2)
			}
			var params uint8
			return s.object(2, func(k []byte, kesc bool) error {
				i, err := s.key(k, kesc, paramKeys, &params, "params.")
				if err != nil {
					return err
				}
				switch i {
				case paramMeta:
					if s.peek() != '{' {
						return s.value(3)
					}
					var meta uint8
					return s.object(3, func(k []byte, kesc bool) error {
						i, err := s.key(k, kesc, metaKeys, &meta, "params._meta.")
						if err != nil {
							return err
						}
						if i == 0 {
							return s.capture(4, &e.ProgressToken)
						}
						return s.value(4)
					})
				case paramProgressToken:
					return s.capture(3, &e.NotifToken)
				case paramRequestID:
					return s.capture(3, &e.RequestID)
				case paramURI:
					return s.capture(3, &uri)
				}
				return s.value(3)
			})
		}
		return s.value(2)
	})
	if err != nil {
		return Envelope{}, err
	}
	if err := s.end(); err != nil {
		return Envelope{}, err
	}
	if s.split {
		return Envelope{}, fmt.Errorf("%w: a raw CR or LF inside the message, where readers that split lines at a bare CR see several messages; end a message with LF (or CR LF) only", ErrAmbiguous)
	}
	if e.ID.Present() && !IDValue(msg[e.ID.Start:e.ID.End]) {
		return Envelope{}, fmt.Errorf("%w: id must be a number, a string or null", ErrEnvelope)
	}
	if method.Present() {
		if msg[method.Start] != '"' {
			return Envelope{}, fmt.Errorf("%w: method must be a string", ErrEnvelope)
		}
		e.Method = decodeString(msg[method.Start:method.End])
		if m, ok := foldsToRouted(e.Method); ok {
			return Envelope{}, fmt.Errorf("%w: method %q is %q to servers that match methods regardless of case; spell it %q", ErrAmbiguous, e.Method, m, m)
		}
		if !plainText(e.Method) {
			return Envelope{}, fmt.Errorf("%w: method %q holds a control character or an invalid code point, which decoders replace or cut differently; send the method name as plain text", ErrAmbiguous, e.Method)
		}
		if e.HasResult || e.HasError {
			return Envelope{}, fmt.Errorf("%w: a message with a method and a result or error is a request to some decoders and a response to others; send one or the other", ErrAmbiguous)
		}
	}
	if e.HasResult && e.HasError {
		return Envelope{}, fmt.Errorf("%w: a response with both a result and an error; send one of them", ErrAmbiguous)
	}
	if uri.Present() && msg[uri.Start] == '"' {
		e.URI = decodeString(msg[uri.Start:uri.End])
	}
	return e, nil
}

// key classifies an object key against the protocol keys names of its
// level: the index of the one it is, or -1 for any other key. A key that
// is not byte-equal to a protocol key but reads as one after unescaping
// or Unicode case folding (encoding/json matches struct fields that way,
// U+212A KELVIN SIGN and U+017F LONG S included), or a protocol key seen
// before (decoders differ on which duplicate wins), is ErrAmbiguous.
func (s *scanner) key(raw []byte, esc bool, names []string, seen *uint8, at string) (int, error) {
	if !esc {
		for i, n := range names {
			if string(raw) == n {
				if *seen&(1<<i) != 0 {
					return 0, fmt.Errorf("%w: duplicate key %q: decoders differ on which one wins; send it once", ErrAmbiguous, at+n)
				}
				*seen |= 1 << i
				return i, nil
			}
		}
		for _, n := range names {
			if foldEqual(raw, n) {
				return 0, fmt.Errorf("%w: key %q is %q to case-insensitive decoders; JSON-RPC keys are case-sensitive: spell it %q", ErrAmbiguous, at+string(raw), at+n, n)
			}
		}
		return -1, nil
	}
	q := make([]byte, 0, len(raw)+2)
	k := decodeString(append(append(append(q, '"'), raw...), '"'))
	// A decoder that stops at NUL (C strings) reads only the first part.
	cut, _, _ := strings.Cut(k, "\x00")
	for _, n := range names {
		if strings.EqualFold(k, n) || strings.EqualFold(cut, n) {
			return 0, fmt.Errorf("%w: key %q is %q once unescaped; send protocol keys unescaped", ErrAmbiguous, at+string(raw), at+n)
		}
	}
	return -1, nil
}

// foldEqual is strings.EqualFold without a copy for ASCII keys.
func foldEqual(raw []byte, name string) bool {
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			return strings.EqualFold(string(raw), name)
		}
	}
	if len(raw) != len(name) {
		return false
	}
	for i, c := range raw {
		if lower(c) != lower(name[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// routed are the methods a relay acts on (rather than passing them on):
// a message whose method is one of them in another case would mean one
// thing to the relay and another to a server that folds case.
var routed = [...]string{"initialize", "notifications/initialized", "notifications/cancelled", "notifications/progress",
	"ping", "server/discover", "subscriptions/listen", "resources/subscribe", "resources/unsubscribe",
	"tools/list", "prompts/list", "resources/list", "resources/templates/list"}

// foldsToRouted reports a method that is a routed one only once case is
// folded.
func foldsToRouted(method string) (string, bool) {
	for _, r := range routed {
		if method != r && strings.EqualFold(method, r) {
			return r, true
		}
	}
	return "", false
}

// plainText reports a string with no control character and no U+FFFD
// (what invalid UTF-8 and lone surrogates decode to here, but not in
// every decoder).
func plainText(v string) bool {
	for _, r := range v {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// IDValue reports whether v, a valid JSON value, may be a JSON-RPC id: a
// number, a string or null.
func IDValue(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	c := v[0]
	return c == '"' || c == 'n' || c == '-' || c >= '0' && c <= '9'
}

// Lookup returns the span of the value at path (object keys from the top
// level down) in msg, absent if any step is missing or not an object. It
// validates the whole message.
func Lookup(msg []byte, path ...string) (Span, error) {
	s := scanner{b: msg}
	s.ws()
	var found Span
	var walk func(depth int) error
	walk = func(depth int) error {
		if s.peek() != '{' || depth > len(path) {
			return s.value(depth)
		}
		return s.object(depth, func(k []byte, kesc bool) error {
			if keyIs(k, kesc, path[depth-1]) {
				if depth == len(path) {
					return s.capture(depth+1, &found)
				}
				// A later duplicate replaces what an earlier one held.
				found = Span{}
				return walk(depth + 1)
			}
			return s.value(depth + 1)
		})
	}
	if s.i >= len(s.b) {
		return Span{}, fmt.Errorf("%w: empty message", ErrSyntax)
	}
	if len(path) == 0 {
		if err := s.capture(1, &found); err != nil {
			return Span{}, err
		}
	} else if err := walk(1); err != nil {
		return Span{}, err
	}
	if err := s.end(); err != nil {
		return Span{}, err
	}
	return found, nil
}

// DecodeString decodes the JSON string v (with its quotes), as
// encoding/json would; ok is false if v is not a string.
func DecodeString(v []byte) (str string, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	var out string
	if err := json.Unmarshal(v, &out); err != nil {
		return "", false
	}
	return out, true
}

// decodeString decodes a string value the scanner has validated: without
// escapes and in valid UTF-8 it is the bytes themselves; otherwise
// encoding/json decides (U+FFFD for bad bytes and lone surrogates).
func decodeString(v []byte) string {
	raw := v[1 : len(v)-1]
	plain := true
	for _, c := range raw {
		if c == '\\' {
			plain = false
			break
		}
	}
	if plain && utf8.Valid(raw) {
		if m, ok := known(raw); ok {
			return m
		}
		return string(raw)
	}
	var out string
	_ = json.Unmarshal(v, &out) // validated already
	return out
}

// keyIs compares a raw key (without quotes) to name; escaped keys are
// decoded first, so "\u0069d" is "id", as encoding/json sees it.
func keyIs(raw []byte, esc bool, name string) bool {
	if !esc {
		return string(raw) == name
	}
	if len(raw) > 6*len(name) || len(raw) < len(name) {
		return false
	}
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	return decodeString(q) == name
}

// Edit replaces the bytes of Span with Value.
type Edit struct {
	Span  Span
	Value []byte
}

// Splice returns msg with each edit's span replaced by its value, in one
// copy. Edits must not overlap and may come in any order; an edit of an
// absent span is ignored. msg is not modified.
func Splice(msg []byte, edits ...Edit) []byte {
	return AppendSplice(make([]byte, 0, SplicedLen(msg, edits...)), msg, edits...)
}

// SplicedLen is the length of Splice's result.
func SplicedLen(msg []byte, edits ...Edit) int {
	n := len(msg)
	for _, e := range edits {
		if e.Span.Present() {
			n += len(e.Value) - (e.Span.End - e.Span.Start)
		}
	}
	return n
}

// AppendSplice is Splice appending to dst (a recycled buffer of
// SplicedLen bytes or more spares the allocation).
func AppendSplice(dst, msg []byte, edits ...Edit) []byte {
	out := dst
	pos := 0
	// Few edits per message: picking the next one each time beats sorting
	// a copy of the slice (no allocation, and the caller's order is kept).
	for {
		next := -1
		for i, e := range edits {
			if e.Span.Present() && e.Span.Start >= pos && (next < 0 || e.Span.Start < edits[next].Span.Start) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		e := edits[next]
		out = append(out, msg[pos:e.Span.Start]...)
		out = append(out, e.Value...)
		pos = e.Span.End
		if e.Span.End == e.Span.Start { // cannot happen for present spans; guards the loop
			break
		}
	}
	return append(out, msg[pos:]...)
}

// scanner validates and skips JSON values in place.
type scanner struct {
	b []byte
	i int
	// split: a raw CR or LF before the message's last byte. It can only
	// be whitespace in valid JSON, but readers that split lines at a bare
	// CR (Python's text streams, Node's readline) would read the rest as
	// other messages.
	split bool
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t':
			s.i++
		case '\n', '\r':
			if s.i != len(s.b)-1 {
				s.split = true
			}
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// capture skips the next value, recording where it lies in sp.
func (s *scanner) capture(depth int, sp *Span) error {
	s.ws()
	start := s.i
	if err := s.value(depth); err != nil {
		return err
	}
	*sp = Span{Start: start, End: s.i}
	return nil
}

func (s *scanner) errf(what string) error {
	if s.i >= len(s.b) {
		return fmt.Errorf("%w: unexpected end of message, %s", ErrSyntax, what)
	}
	return fmt.Errorf("%w: unexpected %q at byte %d, %s", ErrSyntax, s.b[s.i], s.i, what)
}

// end checks that only whitespace follows.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.errf("expected end of message")
	}
	return nil
}

// object scans an object at nesting depth, calling each with every raw key
// (without quotes) with the scanner positioned before its value; each
// must consume the value.
func (s *scanner) object(depth int, each func(key []byte, esc bool) error) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nesting deeper than %d levels", ErrTooDeep, maxDepth)
	}
	s.i++ // '{'
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errf("expected a key")
		}
		start := s.i
		esc, err := s.str()
		if err != nil {
			return err
		}
		key := s.b[start+1 : s.i-1]
		if s.peek() != ':' {
			return s.errf("expected ':'")
		}
		s.i++
		s.ws()
		if err := each(key, esc); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errf("expected ',' or '}'")
		}
	}
}

// value skips one value at nesting depth (of the value itself).
func (s *scanner) value(depth int) error {
	switch s.peek() {
	case '{':
		return s.object(depth, func([]byte, bool) error { return s.value(depth + 1) })
	case '[':
		if depth > maxDepth {
			return fmt.Errorf("%w: nesting deeper than %d levels", ErrTooDeep, maxDepth)
		}
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.value(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return s.errf("expected ',' or ']'")
			}
		}
	case '"':
		_, err := s.str()
		return err
	case 't':
		return s.lit("true")
	case 'f':
		return s.lit("false")
	case 'n':
		return s.lit("null")
	case 0:
		if s.i >= len(s.b) {
			return s.errf("expected a value")
		}
	}
	c := s.b[s.i]
	if c == '-' || c >= '0' && c <= '9' {
		return s.number()
	}
	return s.errf("expected a value")
}

func (s *scanner) lit(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.errf("expected " + word)
	}
	s.i += len(word)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return s.errf("expected a digit")
	}
	switch c := s.b[s.i]; {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return s.errf("expected a digit")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.errf("expected a digit after '.'")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.errf("expected a digit in the exponent")
		}
	}
	return nil
}

// str skips a string starting at its quote; esc reports backslashes.
func (s *scanner) str() (esc bool, err error) {
	s.i++ // '"'
	b := s.b
	i := s.i
	for i < len(b) {
		// Eight bytes at a time while none is a quote, a backslash or a
		// control character: tool results are long strings, and this is
		// their cost.
		for i+8 <= len(b) {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3 // the first such byte: exact
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return esc, nil
		case c == '\\':
			esc = true
			i++
			if i >= len(b) {
				s.i = i
				return esc, s.errf("expected an escape")
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 0; k < 4; k++ {
					i++
					if i >= len(b) || !isHex(b[i]) {
						s.i = i
						return esc, s.errf("expected a hex digit in \\u escape")
					}
				}
			default:
				s.i = i
				return esc, s.errf("invalid escape")
			}
		case c < 0x20:
			s.i = i
			return esc, s.errf("control character in string")
		}
		i++
	}
	s.i = len(b)
	return esc, s.errf("unterminated string")
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special marks the bytes of w (little-endian) that are '"', '\\' or
// below 0x20 with their high bit (the classic has-zero-byte and
// has-less-than tricks): zero if there are none, and the lowest mark is
// exact (a borrow only propagates upwards, past a true match).
func special(w uint64) uint64 {
	q := w ^ (lsb * '"')
	bs := w ^ (lsb * '\\')
	return ((q-lsb)&^q | (bs-lsb)&^bs | (w-lsb*0x20)&^w) & msb
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// known returns the common MCP method names without allocating a string
// per message.
func known(raw []byte) (string, bool) {
	switch string(raw) { // no allocation: the compiler compares in place
	case "tools/call":
		return "tools/call", true
	case "tools/list":
		return "tools/list", true
	case "notifications/progress":
		return "notifications/progress", true
	case "notifications/cancelled":
		return "notifications/cancelled", true
	case "notifications/message":
		return "notifications/message", true
	case "notifications/initialized":
		return "notifications/initialized", true
	case "initialize":
		return "initialize", true
	case "ping":
		return "ping", true
	case "resources/read":
		return "resources/read", true
	case "resources/list":
		return "resources/list", true
	case "prompts/get":
		return "prompts/get", true
	case "prompts/list":
		return "prompts/list", true
	}
	return "", false
}
