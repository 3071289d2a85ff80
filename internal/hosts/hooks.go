package hosts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/seed-86a41135/supervisor/internal/atomicfile"
)

// HookArgs are the arguments a SessionEnd hook runs the supervisor with.
const HookArgs = "session end --hook"

// hookFile is where a host keeps its hooks: {"hooks": {"SessionEnd":
// [{"hooks": [{"type": "command", "command": ...}]}]}} in both Claude
// Code's and Gemini CLI's settings.json.
func hookFile(h Host, e Env) (File, bool) {
	switch h.Name {
	case "claude-code":
		dir := e.join(e.Home, ".claude")
		if d := e.getenv("CLAUDE_CONFIG_DIR"); d != "" {
			dir = d
		}
		return File{Host: h.Name, Path: e.join(dir, "settings.json"), Format: JSON, Hook: true}, true
	case "gemini":
		return File{Host: h.Name, Path: e.join(e.Home, ".gemini", "settings.json"), Format: JSON, Hook: true}, true
	}
	return File{}, false
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
}

type hookGroup struct {
	Hooks []hookCommand `json:"hooks"`
}

// shellQuote quotes s for the shell the host runs hooks with, when needed.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:\\", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isOurHook recognizes a hook command a supervisor install added.
func isOurHook(cmd string) bool {
	exe, ok := strings.CutSuffix(strings.TrimSpace(cmd), " "+HookArgs)
	if !ok {
		return false
	}
	return supervisorCommand(strings.Trim(strings.TrimSpace(exe), `'"`))
}

// eachHookFile runs do for every host of hs that has a hook file, with the
// hook's command line for that file.
func (o *Options) eachHookFile(hs []Host, do func(f File, line string) Result) ([]Result, error) {
	e, err := o.env()
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, h := range hs {
		f, ok := hookFile(h, e)
		if !ok {
			continue
		}
		cmd, _, err := o.command(f)
		if err != nil {
			return nil, err
		}
		out = append(out, do(f, shellQuote(cmd)+" "+HookArgs))
	}
	return out, nil
}

func (o *Options) installHooks(hs []Host) ([]Result, error) {
	return o.eachHookFile(hs, func(f File, line string) Result {
		return o.applyHook(f, func(src []byte) ([]byte, []Entry, error) { return addHook(src, line) })
	})
}

func (o *Options) uninstallHooks(hs []Host) ([]Result, error) {
	return o.eachHookFile(hs, func(f File, line string) Result {
		// A file Install created holds nothing but the hook: it goes.
		fresh, _, _ := addHook(nil, line)
		_, berr := readBackup(f.Path)
		if cur, err := os.ReadFile(f.Path); err == nil && berr != nil && bytes.Equal(cur, fresh) {
			r := Result{File: f, Exists: true, Changed: true, Entries: []Entry{{Name: "SessionEnd", Action: Unwrapped}}}
			if o.DryRun {
				fmt.Fprint(o.out(), UnifiedDiff(f.Path, "/dev/null", cur, nil))
			} else if err := os.Remove(f.Path); err != nil {
				r.Err = err
			}
			return r
		}
		r := o.applyHook(f, func(src []byte) ([]byte, []Entry, error) {
			out, entries, err := removeHooks(src)
			if err != nil {
				return nil, nil, err
			}
			if b, err := readBackup(f.Path); err == nil {
				if w, _, err := addHook(b, line); err == nil && bytes.Equal(w, src) {
					return b, entries, nil
				}
			}
			return out, entries, nil
		})
		if r.Err == nil && !o.DryRun {
			dropBackup(f.Path)
		}
		return r
	})
}

// applyHook is apply for a settings file, which Install may create.
func (o *Options) applyHook(f File, edit func([]byte) ([]byte, []Entry, error)) Result {
	if _, err := os.Stat(f.Path); errors.Is(err, fs.ErrNotExist) && len(f.Path) > 0 {
		// A dangling symlink (a dotfiles link whose target is gone) must
		// not be replaced by a file of ours, and later removed with it.
		if fi, lerr := os.Lstat(f.Path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return Result{File: f, Err: fmt.Errorf("%s is a symlink to a file that does not exist; create the target (or remove the link) and retry", f.Path)}
		}
		out, entries, err := edit(nil)
		r := Result{File: f, Entries: entries, Err: err}
		if err != nil || len(out) == 0 {
			return r
		}
		r.Changed = true
		if o.DryRun {
			fmt.Fprint(o.out(), UnifiedDiff("/dev/null", f.Path, nil, out))
			return r
		}
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			r.Err = fmt.Errorf("%s: %w", f.Path, err)
			return r
		}
		if err := atomicfile.Write(f.Path, out, nil); err != nil {
			r.Err = fmt.Errorf("%s: %w", f.Path, err)
		}
		r.Exists = true
		return r
	}
	return o.applyJSON(f, edit)
}

// applyJSON is apply for a file that is JSON but not a server map.
func (o *Options) applyJSON(f File, edit func([]byte) ([]byte, []Entry, error)) Result {
	hf := f
	hf.ClaudeProjects = false
	return o.applyCheck(hf, edit, func(b []byte) error { _, err := parseJSON(b); return err })
}

// addHook adds the SessionEnd hook running line, unless one of ours is
// there.
func addHook(src []byte, line string) ([]byte, []Entry, error) {
	entry := []Entry{{Name: "SessionEnd", Action: Wrapped}}
	group := hookGroup{Hooks: []hookCommand{{Type: "command", Command: line}}}
	root, err := parseJSON(src)
	if err != nil {
		return nil, nil, err
	}
	if root == nil {
		b, _ := json.MarshalIndent(map[string]any{"hooks": map[string]any{"SessionEnd": []hookGroup{group}}}, "", "  ")
		return append(b, '\n'), entry, nil
	}
	rootObj, ok := root.Value.(*hujson.Object)
	if !ok {
		return nil, nil, errors.New("the top-level value is not an object")
	}
	hooks := jsonMember(rootObj, "hooks")
	if hooks == nil {
		e := appendMember(src, root, "hooks", map[string]any{"SessionEnd": []hookGroup{group}})
		out, err := splice(src, e)
		return out, entry, err
	}
	hobj, ok := hooks.Value.Value.(*hujson.Object)
	if !ok {
		return nil, nil, errors.New("hooks: not an object")
	}
	end := jsonMember(hobj, "SessionEnd")
	if end == nil {
		out, err := splice(src, appendMember(src, &hooks.Value, "SessionEnd", []hookGroup{group}))
		return out, entry, err
	}
	arr, ok := end.Value.Value.(*hujson.Array)
	if !ok {
		return nil, nil, errors.New("hooks.SessionEnd: not an array")
	}
	if ours := ourHooks(arr); len(ours) > 0 {
		return src, []Entry{{Name: "SessionEnd", Action: Already}}, nil
	}
	out, err := splice(src, appendElement(src, &end.Value, group))
	return out, entry, err
}

// hookRef is one of our hooks: group index in SessionEnd, hook index in
// the group.
type hookRef struct{ group, hook int }

func ourHooks(arr *hujson.Array) []hookRef {
	var out []hookRef
	for gi := range arr.Elements {
		g, ok := arr.Elements[gi].Value.(*hujson.Object)
		if !ok {
			continue
		}
		hs := jsonMember(g, "hooks")
		if hs == nil {
			continue
		}
		harr, ok := hs.Value.Value.(*hujson.Array)
		if !ok {
			continue
		}
		for hi := range harr.Elements {
			h, ok := harr.Elements[hi].Value.(*hujson.Object)
			if !ok {
				continue
			}
			if c := jsonMember(h, "command"); c != nil && isOurHook(jsonString(c.Value)) {
				out = append(out, hookRef{gi, hi})
			}
		}
	}
	return out
}

// removeHooks removes our SessionEnd hooks, one at a time, and with them
// the group, SessionEnd and hooks that held nothing else.
func removeHooks(src []byte) ([]byte, []Entry, error) {
	var entries []Entry
	for {
		root, err := parseJSON(src)
		if err != nil || root == nil {
			return src, entries, err
		}
		rootObj, ok := root.Value.(*hujson.Object)
		if !ok {
			return src, entries, nil
		}
		hooks := jsonMember(rootObj, "hooks")
		if hooks == nil {
			return src, entries, nil
		}
		hobj, ok := hooks.Value.Value.(*hujson.Object)
		if !ok {
			return src, entries, nil
		}
		end := jsonMember(hobj, "SessionEnd")
		if end == nil {
			return src, entries, nil
		}
		arr, ok := end.Value.Value.(*hujson.Array)
		if !ok {
			return src, entries, nil
		}
		ours := ourHooks(arr)
		if len(ours) == 0 {
			return src, entries, nil
		}
		entries = append(entries, Entry{Name: "SessionEnd", Action: Unwrapped})
		ref := ours[0]
		g := arr.Elements[ref.group].Value.(*hujson.Object)
		ghooks := jsonMember(g, "hooks")
		harr := ghooks.Value.Value.(*hujson.Array)
		var e edit
		switch {
		case len(harr.Elements) > 1:
			e = removeAt(src, &ghooks.Value, harr.Elements, ref.hook)
		case len(arr.Elements) > 1:
			e = removeAt(src, &end.Value, arr.Elements, ref.group)
		case len(hobj.Members) > 1:
			e = removeMember(src, &hooks.Value, hobj, "SessionEnd")
		default:
			e = removeMember(src, root, rootObj, "hooks")
		}
		if src, err = splice(src, e); err != nil {
			return nil, nil, err
		}
	}
}

func removeMember(src []byte, v *hujson.Value, obj *hujson.Object, key string) edit {
	var names []hujson.Value
	idx := 0
	for i, m := range obj.Members {
		if jsonString(m.Name) == key {
			idx = i
		}
		// A member spans from its name to its value.
		names = append(names, hujson.Value{BeforeExtra: m.Name.BeforeExtra, StartOffset: m.Name.StartOffset, EndOffset: m.Value.EndOffset})
	}
	return removeAt(src, v, names, idx)
}

// removeAt removes item i of a container (elements, or members spanning
// name to value): with the separator before it, or after it when first.
func removeAt(src []byte, v *hujson.Value, items []hujson.Value, i int) edit {
	switch {
	case len(items) == 1:
		// The container becomes empty, as {} or [].
		return edit{v.StartOffset + 1, v.EndOffset - 1, ""}
	case i > 0:
		return edit{items[i-1].EndOffset, items[i].EndOffset, ""}
	default:
		return edit{items[0].StartOffset, items[1].StartOffset, ""}
	}
}

// appendMember renders key: value as the last member of the object v in
// the style of its members.
func appendMember(src []byte, v *hujson.Value, key string, value any) edit {
	obj := v.Value.(*hujson.Object)
	var items []hujson.Value
	for _, m := range obj.Members {
		items = append(items, hujson.Value{BeforeExtra: m.Name.BeforeExtra, StartOffset: m.Name.StartOffset, EndOffset: m.Value.EndOffset})
	}
	return appendItem(src, v, items, func(indent, unit string) string {
		return jsonQuote(key) + ": " + render(value, indent, unit)
	})
}

// appendElement renders value as the last element of the array v.
func appendElement(src []byte, v *hujson.Value, value any) edit {
	arr := v.Value.(*hujson.Array)
	return appendItem(src, v, arr.Elements, func(indent, unit string) string { return render(value, indent, unit) })
}

func appendItem(src []byte, v *hujson.Value, items []hujson.Value, text func(indent, unit string) string) edit {
	nl := lineBreak(src)
	outer := lineIndent(src, v.StartOffset)
	if len(items) == 0 {
		unit := "  "
		if strings.HasPrefix(outer, "\t") {
			unit = "\t"
		}
		at := v.StartOffset + 1
		return edit{at, at, nl + outer + unit + text(outer+unit, unit) + nl + outer}
	}
	b := items[0].BeforeExtra
	i := bytes.LastIndexByte(b, '\n')
	last := items[len(items)-1]
	inline := i < 0 || !isSpace(b[i+1:])
	sep, indent, unit := " ", "", ""
	if !inline {
		indent = string(b[i+1:])
		sep = nl + indent
		unit = "  "
		if strings.HasPrefix(indent, "\t") {
			unit = "\t"
		}
		if len(indent) > len(outer) && strings.HasPrefix(indent, outer) {
			unit = indent[len(outer):]
		}
	}
	t := text(indent, unit)
	if inline {
		t = text("", "")
	}
	if c := skipExtra(src, last.EndOffset); c < len(src) && src[c] == ',' {
		return edit{c + 1, c + 1, sep + t + ","} // keep the trailing comma style
	}
	return edit{last.EndOffset, last.EndOffset, "," + sep + t}
}

// render is value as JSON: indented (continuing at indent) when unit is
// set, else on one line.
func render(value any, indent, unit string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if unit != "" {
		enc.SetIndent(indent, unit)
	}
	if err := enc.Encode(value); err != nil {
		// The values are the hook entries this package builds (maps,
		// slices and strings), which always encode.
		panic(fmt.Sprintf("hosts: render a hook entry: %v", err))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// lineIndent is the whitespace that starts the line holding offset.
func lineIndent(src []byte, offset int) string {
	start := bytes.LastIndexByte(src[:offset], '\n') + 1
	end := start
	for end < len(src) && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end])
}

// skipExtra skips whitespace and comments from i.
func skipExtra(src []byte, i int) int {
	for i < len(src) {
		switch {
		case src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r':
			i++
		case bytes.HasPrefix(src[i:], []byte("//")):
			j := bytes.IndexByte(src[i:], '\n')
			if j < 0 {
				return len(src)
			}
			i += j + 1
		case bytes.HasPrefix(src[i:], []byte("/*")):
			j := bytes.Index(src[i+2:], []byte("*/"))
			if j < 0 {
				return len(src)
			}
			i += j + 4
		default:
			return i
		}
	}
	return i
}
