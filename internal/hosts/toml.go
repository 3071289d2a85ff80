package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// tomlEditor edits Codex's config.toml. A server is a table
// [mcp_servers.NAME] (the name bare or quoted), or the same keys written
// dotted under a parent table (fs.command = "npx" below [mcp_servers], or
// mcp_servers.fs.command at the top), or an inline table; all of them are
// the same key paths to go-toml's position-aware parser (its unstable
// package), which is what this editor reads offsets from. Values are
// decoded with go-toml proper, which also catches what the syntax alone
// allows (a key defined twice) and checks every edit afterwards.
//
// A server with a command but no args gets an args line right after the
// command line (or ", args = [...]" after the command in an inline table);
// Unwrap recognizes that exact text and removes it again. Filling an
// existing empty array ends it with a trailing comma, which is what keeps
// the two apart.
//
// # Caveats
//
// An [[mcp_servers]] array of tables is refused: Codex has none. A byte
// order mark, which go-toml refuses, is read as blanks and kept. Syntax
// error columns count bytes, as go-toml does.
type tomlEditor struct{}

var _ Editor = tomlEditor{}

// tomlValue is where one value is in the source, with what it holds.
type tomlValue struct {
	kind       unstable.Kind
	start, end int // the value's bytes; for an array from '[' through ']'
	str        string
	elems      []tomlValue // of an array
}

// tomlField is one key = value of a server, as written.
type tomlField struct {
	inline   bool // inside an inline table, not an expression of its own line
	keyStart int  // the key's first byte (dotted keys: of the first part)
	// lastStart and lastEnd delimit the key's last part: the field's own
	// name, which a new sibling key replaces.
	lastStart, lastEnd int
	val                tomlValue
}

type tomlServer struct {
	name   string
	fields map[string]*tomlField
}

// tomlDoc is a parsed config.toml: the servers at one Schema's path.
type tomlDoc struct {
	src     []byte
	path    []string
	servers []*tomlServer
}

func (tomlEditor) List(src []byte, s Schema) ([]Server, error) {
	d, err := parseTOMLDoc(src, s)
	if err != nil {
		return nil, err
	}
	var out []Server
	for _, srv := range d.servers {
		out = append(out, srv.server(s))
	}
	return out, nil
}

// server decodes a server for List.
func (srv *tomlServer) server(s Schema) Server {
	out := Server{Name: srv.name}
	for _, k := range remoteKeys {
		if srv.fields[k] != nil {
			out.Remote = true
		}
	}
	if t := srv.fields["type"]; t != nil && t.val.kind == unstable.String && remoteTypes[t.val.str] {
		out.Remote = true
	}
	cmd := srv.fields[s.Command]
	if cmd == nil || cmd.val.kind != unstable.String {
		out.NoCommand = true
		return out
	}
	out.Command = cmd.val.str
	if a := srv.fields[s.Args]; a != nil && a.val.kind == unstable.Array {
		for _, e := range a.val.elems {
			out.Args = append(out.Args, e.str)
		}
	}
	return out
}

func (tomlEditor) Wrap(src []byte, s Schema, name, exe string, prefix []string) ([]byte, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	d, err := parseTOMLDoc(src, s)
	if err != nil {
		return nil, err
	}
	cmd, args, err := d.stdio(s, name)
	if err != nil {
		return nil, err
	}
	cmdText := string(src[cmd.val.start:cmd.val.end])
	literal := tomlLiteralStyle(cmdText)
	if args != nil && len(args.val.elems) > 0 {
		literal = tomlLiteralStyle(string(src[args.val.elems[0].start:args.val.elems[0].end]))
	}
	var elems []string
	for _, p := range prefix {
		elems = append(elems, tomlQuote(p, literal))
	}
	elems = append(elems, cmdText)

	edits := []edit{{cmd.val.start, cmd.val.end, tomlQuote(exe, tomlLiteralStyle(cmdText))}}
	switch {
	case args == nil:
		at, text := d.newArgs(cmd, s.Args, elems)
		edits = append(edits, edit{at, at, text})
	case len(args.val.elems) == 0:
		// The trailing comma sets this apart from an args line Wrap adds.
		at := args.val.start + 1
		edits = append(edits, edit{at, at, strings.Join(elems, ", ") + ","})
	default:
		sep := d.elemSep(args.val)
		at := args.val.elems[0].start
		edits = append(edits, edit{at, at, strings.Join(elems, sep) + sep})
	}
	return spliceVerified(src, edits, decodeTOML, s, name, wrapChange(s, exe, prefix))
}

func (tomlEditor) Unwrap(src []byte, s Schema, name string) ([]byte, error) {
	d, err := parseTOMLDoc(src, s)
	if err != nil {
		return nil, err
	}
	cmd, args, err := d.stdio(s, name)
	if err != nil {
		return nil, err
	}
	var strs []string
	if args != nil {
		for _, e := range args.val.elems {
			strs = append(strs, e.str)
		}
	}
	dash, err := wrappedSplit(name, cmd.val.str, strs)
	if err != nil {
		return nil, err
	}
	el := args.val.elems
	orig := el[dash+1]
	edits := []edit{{cmd.val.start, cmd.val.end, string(src[orig.start:orig.end])}}
	added := false
	switch {
	case dash+2 < len(el):
		edits = append(edits, edit{el[0].start, el[dash+2].start, ""})
	default:
		var at int
		if at, added = d.addedArgs(cmd, args, s.Args); added {
			edits = append(edits, edit{at, argsEnd(src, args), ""})
		} else {
			end := orig.end
			if end < len(src) && src[end] == ',' {
				end++
			}
			edits = append(edits, edit{el[0].start, end, ""})
		}
	}
	return spliceVerified(src, edits, decodeTOML, s, name, unwrapChange(s, dash, added))
}

// argsEnd is where an added args field ends: the end of its line, or of
// its value in an inline table.
func argsEnd(src []byte, args *tomlField) int {
	if args.inline {
		return args.val.end
	}
	return contentEnd(src, args.val.end)
}

// stdio finds server name's command field and its args field (nil if
// absent), refusing what has no process to wrap.
func (d *tomlDoc) stdio(s Schema, name string) (cmd, args *tomlField, err error) {
	if s.Args == "" {
		return nil, nil, fmt.Errorf("server %q: a TOML command must be a string with its own %q field", name, "args")
	}
	var srv *tomlServer
	for _, x := range d.servers {
		if x.name == name {
			srv = x
		}
	}
	if srv == nil {
		return nil, nil, fmt.Errorf("server %q: not found in %s", name, strings.Join(d.path, "."))
	}
	if l := srv.server(s); l.Remote {
		return nil, nil, fmt.Errorf("server %q: a remote server has no command to wrap", name)
	}
	cmd = srv.fields[s.Command]
	if cmd == nil {
		return nil, nil, fmt.Errorf("server %q: no %s", name, s.Command)
	}
	if cmd.val.kind != unstable.String {
		return nil, nil, fmt.Errorf("server %q: %s is not a string", name, s.Command)
	}
	args = srv.fields[s.Args]
	if args != nil && args.val.kind != unstable.Array {
		return nil, nil, fmt.Errorf("server %q: %s is not an array", name, s.Args)
	}
	if args != nil {
		for i, e := range args.val.elems {
			if e.kind != unstable.String {
				return nil, nil, fmt.Errorf("server %q: %s[%d] is not a string", name, s.Args, i)
			}
		}
	}
	return cmd, args, nil
}

// newArgs renders an args field holding elems, to follow the command: a
// line of its own after the command's line, with the command line's
// indentation and key prefix (fs. in a dotted form) and its " = "; in an
// inline table, ", args = [...]" right after the command's value.
func (d *tomlDoc) newArgs(cmd *tomlField, key string, elems []string) (int, string) {
	assign := string(d.src[cmd.lastEnd:cmd.val.start])
	field := tomlKey(key) + assign + "[" + strings.Join(elems, ", ") + "]"
	if cmd.inline {
		return cmd.val.end, ", " + field
	}
	at := contentEnd(d.src, cmd.val.end)
	nl := breakAt(d.src, at)
	if nl == "" {
		nl = lineBreak(d.src)
	}
	return at, nl + string(d.src[lineStartAt(d.src, cmd.keyStart):cmd.lastStart]) + field
}

// addedArgs recognizes an args field that Wrap added (newArgs's exact text
// with the elements args holds now) and says where it starts.
func (d *tomlDoc) addedArgs(cmd, args *tomlField, key string) (int, bool) {
	if cmd.inline != args.inline {
		return 0, false
	}
	var elems []string
	for _, e := range args.val.elems {
		elems = append(elems, string(d.src[e.start:e.end]))
	}
	at, text := d.newArgs(cmd, key, elems)
	if !strings.HasPrefix(string(d.src[at:]), text) || at+len(text) != argsEnd(d.src, args) {
		return 0, false
	}
	return at, true
}

// elemSep is what goes after each new element: the separator between the
// first two elements when that is only a comma and blanks; else one
// element per line when the first one has a line of its own; else ", ".
func (d *tomlDoc) elemSep(arr tomlValue) string {
	el := arr.elems
	before := d.src[arr.start+1 : el[0].start]
	if i := strings.LastIndexByte(string(before), '\n'); i >= 0 {
		nl := "\n"
		if i > 0 && before[i-1] == '\r' {
			nl = "\r\n"
		}
		return "," + nl + string(before[i+1:])
	}
	if len(el) > 1 {
		between := d.src[el[0].end:el[1].start]
		if len(between) > 0 && between[0] == ',' && isBlanks(between[1:]) {
			return string(between)
		}
	}
	return ", "
}

// parseTOMLDoc parses src and collects the servers at s.Path in file order.
func parseTOMLDoc(src []byte, s Schema) (*tomlDoc, error) {
	body := tomlNoBOM(src)
	var tree map[string]any
	if err := toml.Unmarshal(body, &tree); err != nil {
		return nil, tomlSyntaxError(src, err)
	}
	d := &tomlDoc{src: src, path: s.Path}
	byName := map[string]*tomlServer{}
	var p unstable.Parser
	p.Reset(body)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = tomlKeyParts(e.Key())
			if e.Kind == unstable.ArrayTable && equalKeys(table, s.Path) {
				return nil, fmt.Errorf("%s: an array of tables is not a server map", strings.Join(s.Path, "."))
			}
			d.touch(byName, table)
		case unstable.KeyValue:
			if err := d.keyValue(&p, byName, e, table, false); err != nil {
				return nil, err
			}
		}
	}
	if err := p.Error(); err != nil {
		return nil, tomlSyntaxError(body, err)
	}
	return d, nil
}

// tomlNoBOM is src with a byte order mark (which go-toml refuses, and
// Notepad writes) turned into blanks, so that offsets stay the same.
func tomlNoBOM(src []byte) []byte {
	if !bytes.HasPrefix(src, []byte("\uFEFF")) {
		return src
	}
	return append([]byte("   "), src[3:]...)
}

// touch registers the server a key path goes through, in order of first
// appearance.
func (d *tomlDoc) touch(byName map[string]*tomlServer, key []string) *tomlServer {
	n := len(d.path)
	if len(key) <= n || !equalKeys(key[:n], d.path) {
		return nil
	}
	srv := byName[key[n]]
	if srv == nil {
		srv = &tomlServer{name: key[n], fields: map[string]*tomlField{}}
		byName[key[n]] = srv
		d.servers = append(d.servers, srv)
	}
	return srv
}

// keyValue records a key = value below table, going into inline tables.
func (d *tomlDoc) keyValue(p *unstable.Parser, byName map[string]*tomlServer, kv *unstable.Node, table []string, inline bool) error {
	key := append(append([]string(nil), table...), tomlKeyParts(kv.Key())...)
	srv := d.touch(byName, key)
	v := kv.Value()
	if v.Kind == unstable.InlineTable {
		it := v.Children()
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				if err := d.keyValue(p, byName, c, key, true); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if srv == nil || len(key) != len(d.path)+2 {
		return nil
	}
	it := kv.Key()
	it.Next()
	f := &tomlField{inline: inline, keyStart: int(it.Node().Raw.Offset)}
	for last := it.Node(); ; {
		f.lastStart, f.lastEnd = int(last.Raw.Offset), int(last.Raw.Offset+last.Raw.Length)
		if !it.Next() {
			break
		}
		last = it.Node()
	}
	f.val = tomlValueOf(p, kv, f.lastEnd)
	srv.fields[key[len(key)-1]] = f
	return nil
}

// tomlValueOf locates kv's value. The parser gives no range for an array,
// but kv's own range ends with it, and it starts after the "=".
func tomlValueOf(p *unstable.Parser, kv *unstable.Node, keyEnd int) tomlValue {
	v := kv.Value()
	out := tomlValue{kind: v.Kind, start: int(v.Raw.Offset), end: int(v.Raw.Offset + v.Raw.Length)}
	switch v.Kind {
	case unstable.String:
		out.str = string(v.Data)
	case unstable.Array:
		src := p.Data()
		out.end = int(kv.Raw.Offset + kv.Raw.Length)
		out.start = keyEnd
		for out.start < out.end && src[out.start] != '[' {
			out.start++
		}
		it := v.Children()
		for it.Next() {
			e := it.Node()
			if e.Kind == unstable.Comment {
				continue
			}
			el := tomlValue{kind: e.Kind, start: int(e.Raw.Offset), end: int(e.Raw.Offset + e.Raw.Length)}
			if e.Kind == unstable.String {
				el.str = string(e.Data)
			}
			out.elems = append(out.elems, el)
		}
	}
	return out
}

func tomlKeyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

func equalKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// tomlSyntaxError turns go-toml's error into a *SyntaxError.
func tomlSyntaxError(src []byte, err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		if line == 1 && bytes.HasPrefix(src, []byte("\uFEFF")) {
			col = max(col-3, 1)
		}
		return &SyntaxError{Line: line, Col: col, Msg: strings.TrimPrefix(de.Error(), "toml: ")}
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) {
		// The highlight is a slice of src: its capacity tells where.
		off := min(max(cap(src)-cap(pe.Highlight), 0), len(src))
		line := 1 + strings.Count(string(src[:off]), "\n")
		return &SyntaxError{Line: line, Col: off - lineStartAt(src, off) + 1, Msg: pe.Message}
	}
	return &SyntaxError{Line: 1, Col: 1, Msg: err.Error()}
}

// tomlLiteralStyle: raw is a 'literal string', which new strings copy when
// they can.
func tomlLiteralStyle(raw string) bool {
	return strings.HasPrefix(raw, "'") && !strings.HasPrefix(raw, "'''")
}

// tomlQuote renders s as a TOML string: a 'literal' one when literal is set
// and s fits in one, else a "basic" one with escapes.
func tomlQuote(s string, literal bool) string {
	if literal && !strings.ContainsFunc(s, func(r rune) bool {
		return r == '\'' || r == 0x7f || (r < 0x20 && r != '\t') || r == '\uFFFD'
	}) {
		return "'" + s + "'"
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlKey renders a key: bare when it can be.
func tomlKey(k string) string {
	if k != "" && !strings.ContainsFunc(k, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		return k
	}
	return tomlQuote(k, false)
}

// decodeTOML decodes a whole TOML file for spliceVerified.
func decodeTOML(b []byte) (any, error) {
	var m map[string]any
	if err := toml.Unmarshal(tomlNoBOM(b), &m); err != nil {
		return nil, err
	}
	return m, nil
}
