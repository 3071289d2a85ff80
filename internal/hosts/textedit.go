package hosts

import (
	"fmt"
	"reflect"
	"strings"
)

// Helpers the TOML and YAML editors share: they find values with a parser
// that knows positions, then splice text line by line, so they need to know
// where lines end and what a wrapped entry looks like.

// contentEnd is the offset where the line holding off ends, before its line
// break (or at the end of src).
func contentEnd(src []byte, off int) int {
	i := off
	for i < len(src) && src[i] != '\n' {
		i++
	}
	if i > off && src[i-1] == '\r' && i < len(src) {
		i--
	}
	return i
}

// breakAt is the line break that starts at i: "\r\n", "\n", or "" (none,
// e.g. at the end of src).
func breakAt(src []byte, i int) string {
	switch {
	case i < len(src) && src[i] == '\n':
		return "\n"
	case i+1 < len(src) && src[i] == '\r' && src[i+1] == '\n':
		return "\r\n"
	}
	return ""
}

// lineStartAt is the offset of the first byte of the line holding off.
func lineStartAt(src []byte, off int) int {
	for off > 0 && src[off-1] != '\n' {
		off--
	}
	return off
}

// isBlanks: only spaces and tabs.
func isBlanks(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

// checkPrefix refuses a prefix Unwrap could not find again.
func checkPrefix(prefix []string) error {
	if len(prefix) == 0 || prefix[len(prefix)-1] != "--" {
		return fmt.Errorf("internal error: wrap prefix %q does not end with \"--\"", prefix)
	}
	return nil
}

// commandBase is cmd's file name, with either OS's separators.
func commandBase(cmd string) string { return cmd[strings.LastIndexAny(cmd, `/\`)+1:] }

// supervisorCommand: cmd runs a supervisor binary (any directory, either
// OS's separators, .exe or not).
func supervisorCommand(cmd string) bool {
	base := commandBase(cmd)
	return base == BareName || strings.EqualFold(base, BareName+".exe")
}

// leanCommand: cmd runs the lean run entry (LeanName, any directory).
func leanCommand(cmd string) bool { return commandBase(cmd) == LeanName }

// wrappedSplit finds the "--" that ends what Wrap put in front of a
// server's own command in args (the first one: in an entry wrapped twice,
// the rest is the inner wrap). It is an error naming the server when the
// entry is not wrapped: the command is not a supervisor, or no command
// follows a "--".
func wrappedSplit(name, cmd string, args []string) (int, error) {
	if !supervisorCommand(cmd) && !leanCommand(cmd) {
		return 0, fmt.Errorf("server %q is not wrapped: its command %q is not a supervisor", name, cmd)
	}
	for i, a := range args {
		if a == "--" {
			if i+1 == len(args) {
				break
			}
			return i, nil
		}
	}
	return 0, fmt.Errorf("server %q is not wrapped: no command after \"--\" in its arguments", name)
}

// wrapChange is what Wrap does to a decoded server (the text editors check
// their splice against it): exe runs prefix, the old command and its args.
func wrapChange(s Schema, exe string, prefix []string) func(map[string]any) {
	return func(srv map[string]any) {
		a := []any{}
		for _, p := range prefix {
			a = append(a, p)
		}
		a = append(a, srv[s.Command])
		if old, ok := srv[s.Args].([]any); ok {
			a = append(a, old...)
		}
		srv[s.Command], srv[s.Args] = exe, a
	}
}

// unwrapChange is what Unwrap does to a decoded server: the element after
// the "--" at dash is the command again, the rest its args (gone when
// Wrap added them).
func unwrapChange(s Schema, dash int, added bool) func(map[string]any) {
	return func(srv map[string]any) {
		a, _ := srv[s.Args].([]any)
		if dash+1 >= len(a) {
			return // not what Wrap made: the comparison fails
		}
		srv[s.Command] = a[dash+1]
		if added {
			delete(srv, s.Args)
		} else {
			srv[s.Args] = a[dash+2:]
		}
	}
}

// spliceVerified applies edits to src and checks the result the way the
// text editors must (they splice bytes instead of re-serializing): out
// must decode to what src decodes to with change applied to server name,
// and nothing else.
func spliceVerified(src []byte, edits []edit, decode func([]byte) (any, error), s Schema, name string, change func(srv map[string]any)) ([]byte, error) {
	out, err := splice(src, edits...)
	if err != nil {
		return nil, err
	}
	want, err := decode(src)
	if err != nil {
		return nil, err
	}
	got, err := decode(out)
	if err != nil {
		return nil, fmt.Errorf("internal error: server %q: the edited file does not parse: %w", name, err)
	}
	srv := decodedServer(want, s, name)
	if srv == nil {
		return nil, fmt.Errorf("internal error: server %q: cannot find it again", name)
	}
	change(srv)
	if !reflect.DeepEqual(want, got) && fmt.Sprintf("%#v", want) != fmt.Sprintf("%#v", got) { // NaN != NaN
		return nil, fmt.Errorf("internal error: server %q: the edit changed more than the server's %s and %s", name, s.Command, s.Args)
	}
	return out, nil
}

// decodedServer finds server name in a decoded file: below s.Path, as a
// key or (s.List) as the list item whose "name" it is.
func decodedServer(doc any, s Schema, name string) map[string]any {
	m := doc
	for _, k := range s.Path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	if s.List {
		items, _ := m.([]any)
		for _, it := range items {
			if x, ok := it.(map[string]any); ok && x["name"] == name {
				return x
			}
		}
		return nil
	}
	mm, _ := m.(map[string]any)
	srv, _ := mm[name].(map[string]any)
	return srv
}
