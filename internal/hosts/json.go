package hosts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tailscale/hujson"
)

// jsonEditor edits JSON and JSONC (comments, trailing commas) files. It
// parses with hujson only to learn where values start and end, then splices
// text into the original bytes, so everything it does not touch stays
// byte for byte.
type jsonEditor struct{}

var _ Editor = jsonEditor{}

// remoteKeys and remoteTypes mark a server that talks over the network:
// no process to wrap (hosts.md §1, "How remote servers are marked").
var (
	remoteKeys  = []string{"url", "httpUrl", "serverUrl", "uri"}
	remoteTypes = map[string]bool{
		"http": true, "sse": true, "streamable-http": true, "streamableHttp": true,
		"streamable_http": true, "ws": true, "remote": true,
	}
)

func (e jsonEditor) List(src []byte, s Schema) ([]Server, error) {
	lists, err := e.ListAll(src, []Schema{s})
	if err != nil || lists == nil {
		return nil, err
	}
	return lists[0], nil
}

// ListAll is List for several schemas of one file from a single parse:
// a ~/.claude.json holds one server map per project, hundreds of them.
func (jsonEditor) ListAll(src []byte, ss []Schema) ([][]Server, error) {
	root, err := parseJSON(src)
	if err != nil || root == nil {
		return nil, err
	}
	out := make([][]Server, len(ss))
	for i, s := range ss {
		servers, err := jsonAt(root, s.Path)
		if err != nil {
			return nil, err
		}
		if servers == nil {
			continue
		}
		obj, ok := servers.Value.(*hujson.Object)
		if !ok {
			return nil, fmt.Errorf("%s: not an object", strings.Join(s.Path, "."))
		}
		for j := range obj.Members {
			out[i] = append(out[i], jsonServer(&obj.Members[j], s))
		}
	}
	return out, nil
}

// jsonServer decodes one entry of a server map.
func jsonServer(m *hujson.ObjectMember, s Schema) Server {
	srv := Server{Name: jsonString(m.Name)}
	obj, ok := m.Value.Value.(*hujson.Object)
	if !ok {
		srv.NoCommand = true
		return srv
	}
	for _, k := range remoteKeys {
		if jsonMember(obj, k) != nil {
			srv.Remote = true
		}
	}
	for _, k := range []string{"type", "transportType"} {
		if t := jsonMember(obj, k); t != nil && remoteTypes[jsonString(t.Value)] {
			srv.Remote = true
		}
	}
	cmd := jsonMember(obj, s.Command)
	if cmd == nil {
		srv.NoCommand = true
		return srv
	}
	if s.Args == "" {
		arr, ok := cmd.Value.Value.(*hujson.Array)
		if !ok || len(arr.Elements) == 0 {
			srv.NoCommand = true
			return srv
		}
		srv.Command = jsonString(arr.Elements[0])
		for _, e := range arr.Elements[1:] {
			srv.Args = append(srv.Args, jsonString(e))
		}
		return srv
	}
	if lit, ok := cmd.Value.Value.(hujson.Literal); !ok || lit.Kind() != '"' {
		srv.NoCommand = true // e.g. Zed's older nested {path, args, env}
		return srv
	}
	srv.Command = jsonString(cmd.Value)
	if a := jsonMember(obj, s.Args); a != nil {
		if arr, ok := a.Value.Value.(*hujson.Array); ok {
			for _, e := range arr.Elements {
				srv.Args = append(srv.Args, jsonString(e))
			}
		}
	}
	return srv
}

func (jsonEditor) Wrap(src []byte, s Schema, name, exe string, prefix []string) ([]byte, error) {
	obj, cmd, err := jsonEntry(src, s, name)
	if err != nil {
		return nil, err
	}
	elems := []string{}
	if s.Args == "" {
		arr, ok := cmd.Value.Value.(*hujson.Array)
		if !ok || len(arr.Elements) == 0 {
			return nil, fmt.Errorf("server %q: %s is not a non-empty array", name, s.Command)
		}
		for _, p := range append([]string{exe}, prefix...) {
			elems = append(elems, jsonQuote(p))
		}
		return splice(src, arrayInsertFront(src, &cmd.Value, arr, elems))
	}
	if lit, ok := cmd.Value.Value.(hujson.Literal); !ok || lit.Kind() != '"' {
		return nil, fmt.Errorf("server %q: %s is not a string", name, s.Command)
	}
	for _, p := range prefix {
		elems = append(elems, jsonQuote(p))
	}
	elems = append(elems, string(src[cmd.Value.StartOffset:cmd.Value.EndOffset]))
	edits := []edit{{cmd.Value.StartOffset, cmd.Value.EndOffset, jsonQuote(exe)}}
	if args := jsonMember(obj, s.Args); args != nil {
		arr, ok := args.Value.Value.(*hujson.Array)
		if !ok {
			return nil, fmt.Errorf("server %q: %s is not an array", name, s.Args)
		}
		edits = append(edits, arrayInsertFront(src, &args.Value, arr, elems))
	} else {
		edits = append(edits, edit{cmd.Value.EndOffset, cmd.Value.EndOffset, newArgsMember(src, obj, cmd, s.Args, elems)})
	}
	return splice(src, edits...)
}

func (jsonEditor) Unwrap(src []byte, s Schema, name string) ([]byte, error) {
	obj, cmd, err := jsonEntry(src, s, name)
	if err != nil {
		return nil, err
	}
	field := s.Args
	arrVal := &cmd.Value
	if s.Args == "" {
		field = s.Command
	} else {
		args := jsonMember(obj, s.Args)
		if args == nil {
			return nil, fmt.Errorf("server %q: no %s to unwrap", name, s.Args)
		}
		arrVal = &args.Value
	}
	arr, ok := arrVal.Value.(*hujson.Array)
	if !ok {
		return nil, fmt.Errorf("server %q: %s is not an array", name, field)
	}
	dash := -1
	for i, e := range arr.Elements {
		if lit, ok := e.Value.(hujson.Literal); ok && lit.Kind() == '"' && lit.String() == "--" {
			dash = i
			break
		}
	}
	if dash < 0 || dash+1 >= len(arr.Elements) {
		return nil, fmt.Errorf("server %q: %s has no command after \"--\"", name, field)
	}
	first, orig := &arr.Elements[0], &arr.Elements[dash+1]
	if s.Args == "" {
		return splice(src, edit{first.StartOffset, orig.StartOffset, ""})
	}
	edits := []edit{{cmd.Value.StartOffset, cmd.Value.EndOffset, string(src[orig.StartOffset:orig.EndOffset])}}
	switch {
	case dash+2 < len(arr.Elements):
		edits = append(edits, edit{first.StartOffset, arr.Elements[dash+2].StartOffset, ""})
	case addedArgs(src, cmd, jsonMember(obj, s.Args), arr):
		edits = append(edits, edit{cmd.Value.EndOffset, arrVal.EndOffset, ""})
	default:
		edits = append(edits, edit{first.StartOffset, orig.EndOffset, ""})
	}
	return splice(src, edits...)
}

// addedArgs recognizes an args member Wrap added to an entry that had none:
// right after the command, and (unlike elements Wrap puts into an existing
// empty array, which follow the bracket directly) with whitespace before
// the first element.
func addedArgs(src []byte, cmd, args *hujson.ObjectMember, arr *hujson.Array) bool {
	if args.Name.StartOffset < cmd.Value.EndOffset {
		return false
	}
	between := bytes.TrimLeft(src[cmd.Value.EndOffset:args.Name.StartOffset], " \t\r\n")
	if len(between) == 0 || between[0] != ',' || !isSpace(between[1:]) {
		return false
	}
	b0 := arr.Elements[0].BeforeExtra
	last := arr.Elements[len(arr.Elements)-1]
	return len(b0) > 0 && isSpace(b0) && isSpace(src[last.EndOffset:args.Value.EndOffset-1])
}

// jsonEntry finds server name's object and its command member.
func jsonEntry(src []byte, s Schema, name string) (*hujson.Object, *hujson.ObjectMember, error) {
	root, err := parseJSON(src)
	if err != nil {
		return nil, nil, err
	}
	if root == nil {
		return nil, nil, fmt.Errorf("server %q: the file is empty", name)
	}
	servers, err := jsonAt(root, s.Path)
	if err != nil {
		return nil, nil, err
	}
	if servers == nil {
		return nil, nil, fmt.Errorf("server %q: no %s", name, strings.Join(s.Path, "."))
	}
	sobj, ok := servers.Value.(*hujson.Object)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not an object", strings.Join(s.Path, "."))
	}
	m := jsonMember(sobj, name)
	if m == nil {
		return nil, nil, fmt.Errorf("server %q: not found", name)
	}
	obj, ok := m.Value.Value.(*hujson.Object)
	if !ok {
		return nil, nil, fmt.Errorf("server %q: not an object", name)
	}
	cmd := jsonMember(obj, s.Command)
	if cmd == nil {
		return nil, nil, fmt.Errorf("server %q: no %s", name, s.Command)
	}
	return obj, cmd, nil
}

// parseJSON parses src; an empty (or blank) file is a nil document.
func parseJSON(src []byte) (*hujson.Value, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		return nil, nil
	}
	v, err := hujson.Parse(src)
	if err != nil {
		se := &SyntaxError{Line: 1, Col: 1, Msg: err.Error()}
		// hujson says "hujson: line L, column C: why".
		if n, _ := fmt.Sscanf(err.Error(), "hujson: line %d, column %d:", &se.Line, &se.Col); n == 2 {
			if inner := errors.Unwrap(err); inner != nil {
				se.Msg = inner.Error()
			}
		}
		return nil, se
	}
	return &v, nil
}

// jsonAt walks path from root through objects; nil when a key is missing.
func jsonAt(root *hujson.Value, path []string) (*hujson.Value, error) {
	v := root
	for i, k := range path {
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			if i == 0 {
				return nil, errors.New("the top-level value is not an object")
			}
			return nil, fmt.Errorf("%s: not an object", strings.Join(path[:i], "."))
		}
		m := jsonMember(obj, k)
		if m == nil {
			return nil, nil
		}
		v = &m.Value
	}
	return v, nil
}

// jsonKeys lists the member names of the object at path (for Claude Code's
// projects map), in file order.
func jsonKeys(src []byte, path []string) ([]string, error) {
	root, err := parseJSON(src)
	if err != nil || root == nil {
		return nil, err
	}
	v, err := jsonAt(root, path)
	if err != nil || v == nil {
		return nil, err
	}
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, m := range obj.Members {
		keys = append(keys, jsonString(m.Name))
	}
	return keys, nil
}

// jsonMember returns the member named key; the last one when a key repeats,
// as JavaScript hosts read it.
func jsonMember(obj *hujson.Object, key string) *hujson.ObjectMember {
	var found *hujson.ObjectMember
	for i := range obj.Members {
		if jsonString(obj.Members[i].Name) == key {
			found = &obj.Members[i]
		}
	}
	return found
}

func jsonString(v hujson.Value) string {
	if lit, ok := v.Value.(hujson.Literal); ok {
		return lit.String()
	}
	return ""
}

// jsonQuote renders s as a JSON string, leaving <, > and & readable.
func jsonQuote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// arrayInsertFront inserts elems in front of arr's elements in the style of
// the existing ones (one per line, or inline).
func arrayInsertFront(src []byte, v *hujson.Value, arr *hujson.Array, elems []string) edit {
	if len(arr.Elements) == 0 {
		at := v.StartOffset + 1
		return edit{at, at, strings.Join(elems, ", ")}
	}
	sep := elemSep(src, arr)
	at := arr.Elements[0].StartOffset
	return edit{at, at, strings.Join(elems, ","+sep) + "," + sep}
}

// elemSep is the whitespace between the elements of arr: what precedes the
// second element, else a line break and the first element's indentation,
// else a space.
func elemSep(src []byte, arr *hujson.Array) string {
	b := arr.Elements[0].BeforeExtra
	if len(arr.Elements) > 1 {
		b = arr.Elements[1].BeforeExtra
		if isSpace(b) {
			return string(b)
		}
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 && isSpace(b[i+1:]) {
		return lineBreak(src) + string(b[i+1:])
	}
	return " "
}

// newArgsMember renders an args member holding elems, to go right after
// the command's value: one element per line in an object laid out one
// member per line, else inline. Either way its first element follows
// whitespace, which is how Unwrap knows to remove the member again.
func newArgsMember(src []byte, obj *hujson.Object, cmd *hujson.ObjectMember, field string, elems []string) string {
	colon := string(src[cmd.Name.EndOffset:cmd.Value.StartOffset])
	before := cmd.Name.BeforeExtra
	i := bytes.LastIndexByte(before, '\n')
	if i < 0 || !isSpace(before[i+1:]) {
		return ", " + jsonQuote(field) + colon + "[ " + strings.Join(elems, ", ") + " ]"
	}
	nl := lineBreak(src)
	indent := string(before[i+1:])
	unit := indentUnit(src, obj, indent)
	var b strings.Builder
	b.WriteString("," + nl + indent + jsonQuote(field) + colon + "[")
	for j, e := range elems {
		if j > 0 {
			b.WriteString(",")
		}
		b.WriteString(nl + indent + unit + e)
	}
	b.WriteString(nl + indent + "]")
	return b.String()
}

// indentUnit guesses one level of indentation: the members' indentation
// less that of the object's closing brace.
func indentUnit(src []byte, obj *hujson.Object, indent string) string {
	unit := "  "
	if strings.HasPrefix(indent, "\t") {
		unit = "\t"
	}
	if len(obj.Members) == 0 {
		return unit
	}
	last := obj.Members[len(obj.Members)-1].Value
	end := bytes.IndexByte(src[last.EndOffset:], '}')
	if end < 0 {
		return unit
	}
	tail := src[last.EndOffset : last.EndOffset+end]
	if i := bytes.LastIndexByte(tail, '\n'); i >= 0 && isSpace(tail[i+1:]) {
		brace := string(tail[i+1:])
		if len(indent) > len(brace) && strings.HasPrefix(indent, brace) {
			return indent[len(brace):]
		}
	}
	return unit
}

func isSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func lineBreak(src []byte) string {
	if bytes.Contains(src, []byte("\r\n")) {
		return "\r\n"
	}
	return "\n"
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// splice applies non-overlapping edits to a copy of src.
func splice(src []byte, edits ...edit) ([]byte, error) {
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := append([]byte(nil), src...)
	prev := len(src)
	for _, e := range edits {
		if e.start > e.end || e.end > prev {
			return nil, fmt.Errorf("internal error: overlapping edits at %d..%d", e.start, e.end)
		}
		out = append(out[:e.start], append([]byte(e.text), out[e.end:]...)...)
		prev = e.start
	}
	return out, nil
}
