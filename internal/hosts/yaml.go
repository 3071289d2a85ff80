package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"
)

// yamlEditor edits Continue's config.yaml (mcpServers: a list of maps named
// by "name") and Goose's (extensions: a map keyed by name, with cmd and
// args). go-yaml's node tree gives the line and column where every value
// starts; the editor finds where a scalar ends itself (its quotes, or the
// end of a one-line plain scalar) and splices text there. Values are
// decoded with go-yaml proper, which also checks every edit afterwards.
//
// New strings copy the quoting of their neighbours (the first argument, or
// the command) and are double-quoted when plain would not do. A server
// with a command but no args gets an args block sequence right after the
// command's line (in a {flow} entry, ", args: [...]" after the command);
// Unwrap recognizes that exact text and removes it again. Elements put
// into an existing empty [] stay inline, so the two cannot be confused
// (in a {flow} entry they end with a trailing comma instead).
//
// # Caveats
//
// Multi-line plain and block (| >) scalars, and aliases, are refused where
// the editor would have to move or replace them. A command that cannot move
// as written (a quoted scalar over several lines, or a plain one with a
// comma or bracket going into a flow sequence) moves double-quoted, so
// Unwrap gives it back quoted. Two Continue servers with one name are
// refused (Wrap and Unwrap find servers by name). Only the first document
// of a stream is read. Syntax error columns count characters, as go-yaml
// does.
type yamlEditor struct{}

var _ Editor = yamlEditor{}

// yamlDoc is a parsed YAML file: the servers at one Schema's path.
type yamlDoc struct {
	src     []byte
	lines   []int // where each line starts, as go-yaml counts lines
	bom     int   // go-yaml does not count a byte order mark as a column
	path    []string
	servers []yamlServer
}

type yamlServer struct {
	name  string
	entry *yaml.Node
}

// yamlEntry is a stdio server's fields.
type yamlEntry struct {
	flow         bool // the entry is a {flow mapping}
	cmdK, cmdV   *yaml.Node
	argsK, argsV *yaml.Node // nil without args
}

func (yamlEditor) List(src []byte, s Schema) ([]Server, error) {
	d, err := parseYAMLDoc(src, s)
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
func (srv yamlServer) server(s Schema) Server {
	out := Server{Name: srv.name}
	entry := yamlDeref(srv.entry)
	if entry == nil || entry.Kind != yaml.MappingNode {
		out.NoCommand = true
		return out
	}
	for _, k := range remoteKeys {
		if _, v := yamlMember(entry, k); v != nil && !yamlNull(v) {
			out.Remote = true
		}
	}
	for _, k := range []string{"type", "transportType"} {
		if _, v := yamlMember(entry, k); v != nil && v.Kind == yaml.ScalarNode && remoteTypes[v.Value] {
			out.Remote = true
		}
	}
	_, cmd := yamlMember(entry, s.Command)
	if cmd == nil || cmd.Kind != yaml.ScalarNode || yamlNull(cmd) {
		out.NoCommand = true
		return out
	}
	out.Command = cmd.Value
	if _, args := yamlMember(entry, s.Args); args != nil && args.Kind == yaml.SequenceNode {
		for _, e := range args.Content {
			out.Args = append(out.Args, yamlDeref(e).Value)
		}
	}
	return out
}

func (yamlEditor) Wrap(src []byte, s Schema, name, exe string, prefix []string) ([]byte, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	d, err := parseYAMLDoc(src, s)
	if err != nil {
		return nil, err
	}
	e, err := d.stdio(s, name)
	if err != nil {
		return nil, err
	}
	cs, ce, err := d.scalarRange(e.cmdV, e.flow)
	if err != nil {
		return nil, err
	}
	flowArgs := e.flow
	hint := e.cmdV.Style
	if e.argsV != nil {
		flowArgs = e.argsV.Style&yaml.FlowStyle != 0
		if len(e.argsV.Content) > 0 {
			hint = e.argsV.Content[0].Style
		}
	}
	var elems []string
	for _, p := range prefix {
		elems = append(elems, yamlQuote(p, hint, flowArgs))
	}
	elems = append(elems, yamlMoved(string(src[cs:ce]), e.cmdV, flowArgs))

	edits := []edit{{cs, ce, yamlQuote(exe, e.cmdV.Style, e.flow)}}
	switch {
	case e.argsV == nil:
		at, text := d.newArgs(e, yamlQuote(s.Args, e.cmdK.Style, e.flow), d.seqIndent(s), elems, ce)
		edits = append(edits, edit{at, at, text})
	case flowArgs && len(e.argsV.Content) == 0:
		at, err := d.flowOpen(e.argsV)
		if err != nil {
			return nil, err
		}
		text := strings.Join(elems, ", ")
		if e.flow {
			text += "," // else it would read as added by Wrap
		}
		edits = append(edits, edit{at + 1, at + 1, text})
	case flowArgs:
		sep := d.elemSep(e.argsV)
		at := d.offset(e.argsV.Content[0])
		edits = append(edits, edit{at, at, strings.Join(elems, sep) + sep})
	default:
		at, text, err := d.blockInsert(e.argsV, elems)
		if err != nil {
			return nil, err
		}
		edits = append(edits, edit{at, at, text})
	}
	return spliceVerified(src, edits, decodeYAML, s, name, wrapChange(s, exe, prefix))
}

func (yamlEditor) Unwrap(src []byte, s Schema, name string) ([]byte, error) {
	d, err := parseYAMLDoc(src, s)
	if err != nil {
		return nil, err
	}
	e, err := d.stdio(s, name)
	if err != nil {
		return nil, err
	}
	var strs []string
	if e.argsV != nil {
		for _, a := range e.argsV.Content {
			strs = append(strs, a.Value)
		}
	}
	dash, err := wrappedSplit(name, e.cmdV.Value, strs)
	if err != nil {
		return nil, err
	}
	cs, ce, err := d.scalarRange(e.cmdV, e.flow)
	if err != nil {
		return nil, err
	}
	el := e.argsV.Content
	flowArgs := e.argsV.Style&yaml.FlowStyle != 0
	ms, me, err := d.scalarRange(el[dash+1], flowArgs)
	if err != nil {
		return nil, err
	}
	edits := []edit{{cs, ce, yamlMoved(string(src[ms:me]), el[dash+1], e.flow)}}
	added := false
	switch {
	case dash+2 < len(el) && flowArgs:
		edits = append(edits, edit{d.offset(el[0]), d.offset(el[dash+2]), ""})
	case dash+2 < len(el):
		from, _, err := d.dashOf(el[0])
		if err != nil {
			return nil, err
		}
		to, _, err := d.dashOf(el[dash+2])
		if err != nil {
			return nil, err
		}
		edits = append(edits, edit{from, to, ""})
	default:
		var at, end int
		if at, end, added = d.addedArgs(e, ce); added {
			edits = append(edits, edit{at, end, ""})
		} else if flowArgs {
			if me < len(src) && src[me] == ',' {
				me++
			}
			edits = append(edits, edit{d.offset(el[0]), me, ""})
		} else {
			// A block sequence with nothing left: make it [].
			_, ke, err := d.scalarRange(e.argsK, false)
			if err != nil {
				return nil, err
			}
			colon := ke + bytes.IndexByte(src[ke:], ':')
			edits = append(edits, edit{colon + 1, contentEnd(src, me), " []"})
		}
	}
	return spliceVerified(src, edits, decodeYAML, s, name, unwrapChange(s, dash, added))
}

// stdio finds server name's command and args, refusing what has no
// process to wrap or is written in a way the editor does not edit.
func (d *yamlDoc) stdio(s Schema, name string) (*yamlEntry, error) {
	if s.Args == "" {
		return nil, fmt.Errorf("server %q: a YAML command must be a string with its own %q field", name, "args")
	}
	var srv *yamlServer
	for i := range d.servers {
		if d.servers[i].name == name {
			srv = &d.servers[i]
			break
		}
	}
	if srv == nil {
		return nil, fmt.Errorf("server %q: not found in %s", name, strings.Join(d.path, "."))
	}
	if srv.server(s).Remote {
		return nil, fmt.Errorf("server %q: a remote server has no command to wrap", name)
	}
	entry := srv.entry
	switch {
	case entry == nil || entry.Kind == yaml.AliasNode:
		return nil, fmt.Errorf("server %q: an alias; edit it by hand", name)
	case entry.Kind != yaml.MappingNode:
		return nil, fmt.Errorf("server %q: not a mapping", name)
	}
	e := &yamlEntry{flow: entry.Style&yaml.FlowStyle != 0}
	e.cmdK, e.cmdV = yamlMember(entry, s.Command)
	switch {
	case e.cmdV == nil || yamlNull(e.cmdV):
		return nil, fmt.Errorf("server %q: no %s", name, s.Command)
	case e.cmdV.Kind == yaml.AliasNode:
		return nil, fmt.Errorf("server %q: %s is an alias; edit it by hand", name, s.Command)
	case e.cmdV.Kind != yaml.ScalarNode:
		return nil, fmt.Errorf("server %q: %s is not a string", name, s.Command)
	}
	e.argsK, e.argsV = yamlMember(entry, s.Args)
	if e.argsV == nil {
		return e, nil
	}
	if e.argsV.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("server %q: %s is not a list", name, s.Args)
	}
	for i, a := range e.argsV.Content {
		if a.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("server %q: %s[%d] is not a string", name, s.Args, i)
		}
	}
	return e, nil
}

// newArgs renders an args field holding elems, to follow the command whose
// value ends at ce: a block sequence on the lines after the command's
// line, the key at the command key's column; in a {flow} entry,
// ", args: [...]" right after the command.
func (d *yamlDoc) newArgs(e *yamlEntry, key, seqIndent string, elems []string, ce int) (int, string) {
	if e.flow {
		return ce, ", " + key + ": [" + strings.Join(elems, ", ") + "]"
	}
	at := contentEnd(d.src, ce)
	nl := breakAt(d.src, at)
	if nl == "" {
		nl = lineBreak(d.src)
	}
	indent := strings.Repeat(" ", e.cmdK.Column-1)
	var b strings.Builder
	b.WriteString(nl + indent + key + ":")
	for _, el := range elems {
		b.WriteString(nl + indent + seqIndent + "- " + el)
	}
	return at, b.String()
}

// addedArgs recognizes args that Wrap added (newArgs's exact text with the
// elements the args hold now) and says where they are.
func (d *yamlDoc) addedArgs(e *yamlEntry, ce int) (int, int, bool) {
	flowArgs := e.argsV.Style&yaml.FlowStyle != 0
	if flowArgs != e.flow {
		return 0, 0, false
	}
	var elems []string
	for _, a := range e.argsV.Content {
		s, end, err := d.scalarRange(a, flowArgs)
		if err != nil {
			return 0, 0, false
		}
		elems = append(elems, string(d.src[s:end]))
	}
	ks, ke, err := d.scalarRange(e.argsK, e.flow)
	if err != nil {
		return 0, 0, false
	}
	seqIndent := ""
	if !flowArgs {
		_, dash, err := d.dashOf(e.argsV.Content[0])
		n := d.column(dash) - e.cmdK.Column
		if err != nil || n < 0 {
			return 0, 0, false
		}
		seqIndent = strings.Repeat(" ", n)
	}
	at, text := d.newArgs(e, string(d.src[ks:ke]), seqIndent, elems, ce)
	end := at + len(text)
	if !bytes.HasPrefix(d.src[at:], []byte(text)) || (!e.flow && contentEnd(d.src, end) != end) {
		return 0, 0, false
	}
	return at, end, true
}

// seqIndent is how far the dashes of a new block sequence go past its key:
// as in the first server with block args, else two spaces.
func (d *yamlDoc) seqIndent(s Schema) string {
	for _, srv := range d.servers {
		if srv.entry == nil || srv.entry.Kind != yaml.MappingNode {
			continue
		}
		k, v := yamlMember(srv.entry, s.Args)
		if v == nil || v.Kind != yaml.SequenceNode || v.Style&yaml.FlowStyle != 0 || len(v.Content) == 0 {
			continue
		}
		if _, dash, err := d.dashOf(v.Content[0]); err == nil && d.column(dash) >= k.Column {
			return strings.Repeat(" ", d.column(dash)-k.Column)
		}
	}
	return "  "
}

// blockInsert renders elems as lines going in front of a block sequence's
// first element, with its indentation and the blanks after its dash.
func (d *yamlDoc) blockInsert(seq *yaml.Node, elems []string) (int, string, error) {
	ls, dash, err := d.dashOf(seq.Content[0])
	if err != nil {
		return 0, "", err
	}
	indent := string(d.src[ls:dash])
	gap := d.src[dash+1 : d.offset(seq.Content[0])]
	if len(gap) == 0 || !isBlanks(gap) {
		gap = []byte(" ")
	}
	nl := breakAt(d.src, contentEnd(d.src, dash))
	if nl == "" {
		nl = lineBreak(d.src)
	}
	var b strings.Builder
	for _, el := range elems {
		b.WriteString(indent + "-" + string(gap) + el + nl)
	}
	return ls, b.String(), nil
}

// dashOf finds the "-" in front of a block sequence element: the start of
// its line and its offset. Only blanks may come before it on its line.
func (d *yamlDoc) dashOf(n *yaml.Node) (int, int, error) {
	i := d.offset(n) - 1
	for i >= 0 && isSpace(d.src[i:i+1]) {
		i--
	}
	if i < 0 || d.src[i] != '-' {
		return 0, 0, fmt.Errorf("line %d: a list item written in a way this editor does not edit", n.Line)
	}
	ls := lineStartAt(d.src, i)
	if !isBlanks(d.src[ls:i]) {
		return 0, 0, fmt.Errorf("line %d: a list item written in a way this editor does not edit", n.Line)
	}
	return ls, i, nil
}

// flowOpen is the offset of a flow sequence's "[" (after a tag or anchor).
func (d *yamlDoc) flowOpen(seq *yaml.Node) (int, error) {
	i := d.offset(seq)
	for i < len(d.src) && d.src[i] != '[' {
		i++
	}
	if i == len(d.src) {
		return 0, fmt.Errorf("line %d: cannot find the list's [", seq.Line)
	}
	return i, nil
}

// elemSep is what goes after each new element of a flow sequence: the
// separator between its first two elements when that is only a comma and
// blanks; else one element per line when the first one has a line of its
// own; else ", ".
func (d *yamlDoc) elemSep(seq *yaml.Node) string {
	el := seq.Content
	first := d.offset(el[0])
	open, err := d.flowOpen(seq)
	if err == nil && open < first {
		before := string(d.src[open+1 : first])
		if i := strings.LastIndexByte(before, '\n'); i >= 0 && isBlanks([]byte(before[i+1:])) {
			nl := "\n"
			if i > 0 && before[i-1] == '\r' {
				nl = "\r\n"
			}
			return "," + nl + before[i+1:]
		}
	}
	if len(el) > 1 {
		if _, end, err := d.scalarRange(el[0], true); err == nil {
			between := d.src[end:d.offset(el[1])]
			if len(between) > 0 && between[0] == ',' && isBlanks(between[1:]) {
				return string(between)
			}
		}
	}
	return ", "
}

// offset converts a node's line and column (counted in characters) to a
// byte offset.
func (d *yamlDoc) offset(n *yaml.Node) int {
	if n.Line < 1 || n.Line > len(d.lines) {
		return len(d.src)
	}
	i := d.lines[n.Line-1]
	if n.Line == 1 {
		i += d.bom
	}
	for c := 1; c < n.Column && i < len(d.src); c++ {
		_, w := utf8.DecodeRune(d.src[i:])
		i += w
	}
	return i
}

// column is the 1-based column (in characters) of offset off.
func (d *yamlDoc) column(off int) int {
	return utf8.RuneCount(d.src[lineStartAt(d.src, off):off]) + 1
}

// scalarRange is where a scalar's text is: from its tag or anchor, if any,
// through its closing quote or the last character of a plain scalar.
func (d *yamlDoc) scalarRange(n *yaml.Node, flow bool) (int, int, error) {
	src := d.src
	start := d.offset(n)
	p := start
	for p < len(src) && (src[p] == '!' || src[p] == '&') {
		for p < len(src) && !isSpace(src[p:p+1]) {
			p++
		}
		for p < len(src) && (src[p] == ' ' || src[p] == '\t') {
			p++
		}
	}
	unsupported := fmt.Errorf("line %d: %q is written in a way this editor does not edit (make it one line)", n.Line, n.Value)
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		if p == len(src) || src[p] != '"' {
			return 0, 0, unsupported
		}
		for i := p + 1; i < len(src); i++ {
			switch src[i] {
			case '\\':
				i++
			case '"':
				return start, i + 1, nil
			}
		}
	case n.Style&yaml.SingleQuotedStyle != 0:
		if p == len(src) || src[p] != '\'' {
			return 0, 0, unsupported
		}
		for i := p + 1; i < len(src); i++ {
			if src[i] == '\'' {
				if i+1 < len(src) && src[i+1] == '\'' {
					i++
					continue
				}
				return start, i + 1, nil
			}
		}
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
	default:
		i := p
	scan:
		for ; i < len(src); i++ {
			c := src[i]
			switch {
			case c == '\n' || c == '\r':
				break scan
			case c == '#' && i > p && (src[i-1] == ' ' || src[i-1] == '\t'):
				break scan
			case flow && strings.IndexByte(",[]{}", c) >= 0:
				break scan
			case c == ':' && (i+1 == len(src) || isSpace(src[i+1:i+2]) || flow && strings.IndexByte(",[]{}", src[i+1]) >= 0):
				break scan
			}
		}
		for i > p && (src[i-1] == ' ' || src[i-1] == '\t') {
			i--
		}
		if string(src[p:i]) == n.Value {
			return start, i, nil
		}
	}
	return 0, 0, unsupported
}

// parseYAMLDoc parses src and collects the servers at s.Path in file order.
func parseYAMLDoc(src []byte, s Schema) (*yamlDoc, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, yamlSyntaxError(err)
	}
	// Decoding catches what the node tree lets through (a key twice).
	var tree any
	if err := yaml.Unmarshal(src, &tree); err != nil {
		return nil, yamlSyntaxError(err)
	}
	d := &yamlDoc{src: src, path: s.Path, lines: yamlLines(src)}
	if bytes.HasPrefix(src, []byte("\uFEFF")) {
		d.bom = 3
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return d, nil
	}
	n := doc.Content[0]
	for i, k := range s.Path {
		n = yamlDeref(n)
		if yamlNull(n) {
			return d, nil
		}
		if n.Kind != yaml.MappingNode {
			if i == 0 {
				return nil, errors.New("the top-level value is not a mapping")
			}
			return nil, fmt.Errorf("%s: not a mapping", strings.Join(s.Path[:i], "."))
		}
		if _, n = yamlMember(n, k); n == nil {
			return d, nil
		}
	}
	where := strings.Join(s.Path, ".")
	switch {
	case n.Kind == yaml.AliasNode:
		return nil, fmt.Errorf("%s: an alias; edit it by hand", where)
	case yamlNull(n):
	case s.List:
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("%s: not a list", where)
		}
		seen := map[string]bool{}
		for _, item := range n.Content {
			if item.Kind != yaml.MappingNode {
				continue
			}
			if _, v := yamlMember(item, "name"); v != nil && v.Kind == yaml.ScalarNode {
				// Wrap and Unwrap find a server by name: two would be one.
				if seen[v.Value] {
					return nil, fmt.Errorf("%s: two servers are named %q (line %d)", where, v.Value, v.Line)
				}
				seen[v.Value] = true
				d.servers = append(d.servers, yamlServer{v.Value, item})
			}
		}
	default:
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: not a mapping", where)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode {
				d.servers = append(d.servers, yamlServer{k.Value, n.Content[i+1]})
			}
		}
	}
	return d, nil
}

// yamlLines finds where lines start, breaking them where go-yaml (after
// libyaml) does: at \r\n, \n, \r, and U+0085, U+2028, U+2029.
func yamlLines(src []byte) []int {
	lines := []int{0}
	for i := 0; i < len(src); {
		switch {
		case src[i] == '\r' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
		case src[i] == '\n' || src[i] == '\r':
			i++
		case bytes.HasPrefix(src[i:], []byte("\u0085")) || bytes.HasPrefix(src[i:], []byte("\u2028")) || bytes.HasPrefix(src[i:], []byte("\u2029")):
			_, w := utf8.DecodeRune(src[i:])
			i += w
		default:
			i++
			continue
		}
		lines = append(lines, i)
	}
	return lines
}

// yamlMember returns the key and value of key in mapping m (the first, as
// go-yaml refuses a key twice when decoding).
func yamlMember(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return k, m.Content[i+1]
		}
	}
	return nil, nil
}

func yamlDeref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func yamlNull(n *yaml.Node) bool {
	n = yamlDeref(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// yamlSyntaxError turns go-yaml's error into a *SyntaxError.
func yamlSyntaxError(err error) error {
	var le *yaml.LoadError
	if !errors.As(err, &le) {
		return &SyntaxError{Line: 1, Col: 1, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	se := &SyntaxError{Line: max(le.Mark.Line, 1), Col: max(le.Mark.Column, 1), Msg: le.Message}
	if le.ContextMsg != "" && le.ContextMark.Line > 0 {
		se.Msg += fmt.Sprintf(" (%s at line %d, column %d)", le.ContextMsg, le.ContextMark.Line, le.ContextMark.Column)
	}
	return se
}

// yamlMoved is a scalar's text to go where a command or argument moves:
// as written, unless a flow sequence would read it differently or it
// spans lines (then double-quoted).
func yamlMoved(raw string, n *yaml.Node, flow bool) string {
	plain := n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0
	if strings.ContainsAny(raw, "\r\n") || flow && plain && strings.ContainsAny(raw, ",[]{}") {
		return yamlDouble(n.Value)
	}
	return raw
}

// yamlQuote renders s like its neighbour hint: 'single-quoted' or
// "double-quoted" as hint is, else plain when that reads back as the same
// string (in flow context too, if flow), else double-quoted.
func yamlQuote(s string, hint yaml.Style, flow bool) string {
	switch {
	case hint&yaml.SingleQuotedStyle != 0 && !strings.ContainsFunc(s, yamlUnprintable):
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	case hint&yaml.DoubleQuotedStyle == 0 && yamlPlain(s, flow):
		return s
	}
	return yamlDouble(s)
}

func yamlUnprintable(r rune) bool {
	return r == utf8.RuneError || r != ' ' && !unicode.IsPrint(r)
}

// yamlPlain: s can be a plain scalar, read back as this string by YAML 1.1
// and 1.2 readers alike.
func yamlPlain(s string, flow bool) bool {
	switch {
	case s == "" || strings.TrimSpace(s) != s || strings.ContainsFunc(s, yamlUnprintable):
		return false
	case strings.ContainsRune("?:,[]{}#&*!|>'\"%@`", rune(s[0])):
		return false
	case s[0] == '-' && (len(s) == 1 || s[1] == ' ' || strings.HasPrefix(s, "---")):
		return false
	case strings.Contains(s, ": ") || strings.Contains(s, " #") || strings.HasSuffix(s, ":"):
		return false
	case flow && strings.ContainsAny(s, ",[]{}:"):
		return false
	}
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~":
		return false
	}
	digit := func(c byte) bool { return c >= '0' && c <= '9' }
	if digit(s[0]) || strings.IndexByte("+-.", s[0]) >= 0 && len(s) > 1 && (digit(s[1]) || s[1] == '.') {
		return false
	}
	var back []any
	return yaml.Unmarshal([]byte("- "+s), &back) == nil && len(back) == 1 && back[0] == s
}

// yamlDouble renders s as a double-quoted scalar.
func yamlDouble(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == ' ' || unicode.IsPrint(r) && r != utf8.RuneError:
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02X`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// decodeYAML decodes a whole YAML file for spliceVerified.
func decodeYAML(b []byte) (any, error) {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}
