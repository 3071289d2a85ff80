package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The editor-level golden files are wrapped with this exe.
const editorExe = "/usr/local/bin/supervisor"

var (
	codexS    = Schema{Path: []string{"mcp_servers"}, Command: "command", Args: "args"}
	continueS = Schema{Path: []string{"mcpServers"}, List: true, Command: "command", Args: "args"}
	gooseS    = Schema{Path: []string{"extensions"}, Command: "cmd", Args: "args"}
)

func namePrefix(name string) []string { return []string{"run", "--name", name, "--"} }

// alreadyWrapped is how a caller tells a wrapped entry from List.
func alreadyWrapped(srv Server) bool {
	return supervisorCommand(srv.Command) && len(srv.Args) > 0 && srv.Args[0] == "run"
}

// editorGolden runs an editor over testdata/<dir>/original.<ext>:
// wrapping every stdio server not wrapped yet gives wrapped.<ext>;
// unwrapping those gives back the original byte for byte, in any order;
// unwrapping every wrapped server gives unwrapped.<ext>; and wrapping a
// wrapped server again stays valid and unwraps back.
func editorGolden(t *testing.T, ed Editor, dir, ext string, s Schema) {
	t.Helper()
	dir = filepath.Join("testdata", dir)
	orig := mustRead(t, filepath.Join(dir, "original."+ext))
	servers, err := ed.List(orig, s)
	if err != nil {
		t.Fatal(err)
	}
	out := orig
	var wrapped []string
	for _, srv := range servers {
		if srv.Remote || srv.NoCommand || alreadyWrapped(srv) {
			continue
		}
		if out, err = ed.Wrap(out, s, srv.Name, editorExe, namePrefix(srv.Name)); err != nil {
			t.Fatalf("wrap %q: %v", srv.Name, err)
		}
		wrapped = append(wrapped, srv.Name)
	}
	golden(t, filepath.Join(dir, "wrapped."+ext), out)

	// List sees every stdio server wrapped, with its own command after --.
	after, err := ed.List(out, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(servers) {
		t.Fatalf("List of the wrapped file: %d servers, want %d", len(after), len(servers))
	}
	for i, srv := range servers {
		got := after[i]
		want := srv
		if !srv.Remote && !srv.NoCommand && !alreadyWrapped(srv) {
			want.Command = editorExe
			want.Args = append(append(namePrefix(srv.Name), srv.Command), srv.Args...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("List of the wrapped file:\ngot  %+v\nwant %+v", got, want)
		}
	}

	// Unwrap in both orders gives back the original.
	for _, order := range [][]string{wrapped, reversed(wrapped)} {
		back := out
		for _, name := range order {
			if back, err = ed.Unwrap(back, s, name); err != nil {
				t.Fatalf("unwrap %q: %v", name, err)
			}
		}
		if !bytes.Equal(back, orig) {
			t.Fatalf("unwrap did not give back the original:\n%s", UnifiedDiff("original", "unwrapped", orig, back))
		}
	}

	// Unwrapping everything wrapped, the entries wrapped from the start
	// too, gives unwrapped.<ext>.
	all := out
	for _, srv := range after {
		if alreadyWrapped(srv) {
			if all, err = ed.Unwrap(all, s, srv.Name); err != nil {
				t.Fatalf("unwrap %q: %v", srv.Name, err)
			}
		}
	}
	golden(t, filepath.Join(dir, "unwrapped."+ext), all)
	if rest, err := ed.List(all, s); err != nil {
		t.Fatal(err)
	} else {
		for _, srv := range rest {
			if alreadyWrapped(srv) {
				t.Errorf("%q is still wrapped after unwrapping everything", srv.Name)
			}
		}
	}

	// Wrapping a wrapped server again nests, and one Unwrap undoes it.
	for _, srv := range after {
		if !alreadyWrapped(srv) {
			continue
		}
		twice, err := ed.Wrap(out, s, srv.Name, editorExe, namePrefix(srv.Name))
		if err != nil {
			t.Fatalf("wrap %q twice: %v", srv.Name, err)
		}
		l, err := ed.List(twice, s)
		if err != nil {
			t.Fatalf("wrap %q twice: %v", srv.Name, err)
		}
		for _, x := range l {
			if x.Name == srv.Name {
				want := append(append(namePrefix(srv.Name), editorExe), srv.Args...)
				if x.Command != editorExe || !reflect.DeepEqual(x.Args, want) {
					t.Errorf("wrap %q twice: got %s %q", srv.Name, x.Command, x.Args)
				}
			}
		}
		once, err := ed.Unwrap(twice, s, srv.Name)
		if err != nil {
			t.Fatalf("unwrap %q once: %v", srv.Name, err)
		}
		if !bytes.Equal(once, out) {
			t.Errorf("wrap twice, unwrap once %q:\n%s", srv.Name, UnifiedDiff("wrapped", "again", out, once))
		}
	}
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[len(s)-1-i] = x
	}
	return out
}

func TestTOMLGolden(t *testing.T) {
	editorGolden(t, tomlEditor{}, "codex", "toml", codexS)
}

func TestTOMLList(t *testing.T) {
	src := mustRead(t, filepath.Join("testdata", "codex", "original.toml"))
	got, err := tomlEditor{}.List(src, codexS)
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{
		{Name: "sqlite", Command: "uvx", Args: []string{"mcp-server-sqlite", "--db-path", "/tmp/test.db"}},
		{Name: "time", Command: "mcp-time"},
		{Name: "weather", Command: "uv", Args: []string{"--directory", "/home/dev/weather", "run", "weather.py"}},
		{Name: "clock", Command: "mcp-clock"},
		{Name: "filesystem", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/dev/projects"}},
		{Name: "my server", Command: "uvx", Args: []string{"mcp-server-fetch", "--ignore-robots-txt"}},
		{Name: "git", Command: "/usr/local/bin/mcp-git"},
		{Name: "windows", Command: "cmd", Args: []string{"/c", "npx", "-y", "@upstash/context7-mcp"}},
		{Name: "linear", Remote: true, NoCommand: true},
		{Name: "memory", Command: "/usr/local/bin/supervisor", Args: []string{"run", "--name", "memory", "--", "npx", "-y", "@modelcontextprotocol/server-memory"}},
		{Name: "empty", Command: "mcp-empty"},
		{Name: "escapes", Command: `C:\tools\mcp "quoted".exe`, Args: []string{"--opt=A", "multi\nline"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	for _, src := range []string{"", "# nothing\n", "model = \"x\"\n", "[mcp_servers]\n"} {
		if got, err := (tomlEditor{}).List([]byte(src), codexS); err != nil || got != nil {
			t.Errorf("List(%q) = %v, %v; want no servers", src, got, err)
		}
	}
}

// editorCase is one Wrap of server fs and the Unwrap that undoes it.
type editorCase struct {
	name, src, want string
}

func runEditorCases(t *testing.T, ed Editor, s Schema, cases []editorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ed.Wrap([]byte(tc.src), s, "fs", "/bin/supervisor", prefixFS)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("wrap:\ngot  %q\nwant %q", got, tc.want)
			}
			back, err := ed.Unwrap(got, s, "fs")
			if err != nil {
				t.Fatal(err)
			}
			if string(back) != tc.src {
				t.Fatalf("unwrap:\ngot  %q\nwant %q", back, tc.src)
			}
		})
	}
}

func TestTOMLWrapUnwrap(t *testing.T) {
	runEditorCases(t, tomlEditor{}, codexS, []editorCase{
		{"table",
			"[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"pkg\"]\n",
			"[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"npx\", \"-y\", \"pkg\"]\n"},
		{"compact array",
			"[mcp_servers.fs]\ncommand=\"npx\"\nargs=[\"-y\",\"pkg\"]\n",
			"[mcp_servers.fs]\ncommand=\"/bin/supervisor\"\nargs=[\"run\",\"--name\",\"fs\",\"--\",\"npx\",\"-y\",\"pkg\"]\n"},
		{"one per line, tabs",
			"[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\n\t\"pkg\",\n]\n",
			"[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [\n\t\"run\",\n\t\"--name\",\n\t\"fs\",\n\t\"--\",\n\t\"npx\",\n\t\"pkg\",\n]\n"},
		{"comment before the first element",
			"[mcp_servers.fs]\ncommand = \"npx\"\nargs = [ # why\n  \"pkg\" ]\n",
			"[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [ # why\n  \"run\",\n  \"--name\",\n  \"fs\",\n  \"--\",\n  \"npx\",\n  \"pkg\" ]\n"},
		{"literal strings are copied",
			"[mcp_servers.fs]\ncommand = 'npx'\nargs = ['pkg']\n",
			"[mcp_servers.fs]\ncommand = '/bin/supervisor'\nargs = ['run', '--name', 'fs', '--', 'npx', 'pkg']\n"},
		{"no args",
			"[mcp_servers.fs]\n  command = \"srv\" # the server\n  env = { A = \"1\" }\n",
			"[mcp_servers.fs]\n  command = \"/bin/supervisor\" # the server\n  args = [\"run\", \"--name\", \"fs\", \"--\", \"srv\"]\n  env = { A = \"1\" }\n"},
		{"no args, last line without a line break",
			"[mcp_servers.fs]\ncommand = \"srv\"",
			"[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"srv\"]"},
		{"no args, CRLF",
			"[mcp_servers.fs]\r\ncommand = \"srv\"\r\n\r\n[x]\r\n",
			"[mcp_servers.fs]\r\ncommand = \"/bin/supervisor\"\r\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"srv\"]\r\n\r\n[x]\r\n"},
		{"CRLF one per line",
			"[mcp_servers.fs]\r\ncommand = \"npx\"\r\nargs = [\r\n  \"pkg\",\r\n]\r\n",
			"[mcp_servers.fs]\r\ncommand = \"/bin/supervisor\"\r\nargs = [\r\n  \"run\",\r\n  \"--name\",\r\n  \"fs\",\r\n  \"--\",\r\n  \"npx\",\r\n  \"pkg\",\r\n]\r\n"},
		{"empty array gets a trailing comma",
			"[mcp_servers.fs]\ncommand = \"srv\"\nargs = []\n",
			"[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"srv\",]\n"},
		{"args before command",
			"[mcp_servers.fs]\nargs = [\"pkg\"]\ncommand = \"npx\"\n",
			"[mcp_servers.fs]\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"npx\", \"pkg\"]\ncommand = \"/bin/supervisor\"\n"},
		{"dotted under the parent table",
			"[mcp_servers]\nfs.command = \"npx\"\nfs.args = [\"pkg\"]\n",
			"[mcp_servers]\nfs.command = \"/bin/supervisor\"\nfs.args = [\"run\", \"--name\", \"fs\", \"--\", \"npx\", \"pkg\"]\n"},
		{"dotted, no args",
			"[mcp_servers]\n  fs . \"command\" = \"srv\"\n",
			"[mcp_servers]\n  fs . \"command\" = \"/bin/supervisor\"\n  fs . args = [\"run\", \"--name\", \"fs\", \"--\", \"srv\"]\n"},
		{"dotted from the top, no args",
			"mcp_servers.fs.command = \"srv\"\n",
			"mcp_servers.fs.command = \"/bin/supervisor\"\nmcp_servers.fs.args = [\"run\", \"--name\", \"fs\", \"--\", \"srv\"]\n"},
		{"inline table",
			"[mcp_servers]\nfs = { command = \"npx\", args = [\"pkg\"] }\n",
			"[mcp_servers]\nfs = { command = \"/bin/supervisor\", args = [\"run\", \"--name\", \"fs\", \"--\", \"npx\", \"pkg\"] }\n"},
		{"inline table, no args",
			"[mcp_servers]\nfs = { command = \"srv\" }\n",
			"[mcp_servers]\nfs = { command = \"/bin/supervisor\", args = [\"run\", \"--name\", \"fs\", \"--\", \"srv\"] }\n"},
		{"inline table, empty args",
			"mcp_servers = { fs = { command = \"srv\", args = [] } }\n",
			"mcp_servers = { fs = { command = \"/bin/supervisor\", args = [\"run\", \"--name\", \"fs\", \"--\", \"srv\",] } }\n"},
		{"quoted name",
			"[mcp_servers.\"fs\"]\ncommand = \"npx\"\nargs = [\"pkg\"]\n",
			"[mcp_servers.\"fs\"]\ncommand = \"/bin/supervisor\"\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"npx\", \"pkg\"]\n"},
		{"byte order mark",
			"\uFEFF[mcp_servers.fs]\ncommand = \"npx\"\n",
			"\uFEFF[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"npx\"]\n"},
		{"NaN elsewhere",
			"x = nan\n[mcp_servers.fs]\ncommand = \"npx\"\n",
			"x = nan\n[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"npx\"]\n"},
		{"windows cmd /c keeps its shape",
			"[mcp_servers.fs]\ncommand = \"cmd\"\nargs = [\"/c\", \"npx\", \"-y\", \"pkg\"]\n",
			"[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"cmd\", \"/c\", \"npx\", \"-y\", \"pkg\"]\n"},
		{"a -- of its own",
			"[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"pkg\", \"--\", \"x\"]\n",
			"[mcp_servers.fs]\ncommand = \"/bin/supervisor\"\nargs = [\"run\", \"--name\", \"fs\", \"--\", \"npx\", \"pkg\", \"--\", \"x\"]\n"},
	})
}

func TestTOMLQuotesNewStrings(t *testing.T) {
	src := "[mcp_servers.fs]\ncommand = 'npx'\n"
	exe := `C:\Program Files\it's "here"` + "\t\x01"
	got, err := tomlEditor{}.Wrap([]byte(src), codexS, "fs", exe, []string{"run", "--name", "f's", "--"})
	if err != nil {
		t.Fatal(err)
	}
	want := "[mcp_servers.fs]\ncommand = \"C:\\\\Program Files\\\\it's \\\"here\\\"\\t\\u0001\"\n" +
		"args = ['run', '--name', \"f's\", '--', 'npx']\n"
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	l, err := tomlEditor{}.List(got, codexS)
	if err != nil || l[0].Command != exe || l[0].Args[2] != "f's" {
		t.Fatalf("List: %+v, %v", l, err)
	}
}

func TestTOMLErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		unwrap    bool
		line, col int    // a *SyntaxError at line:col
		want      string // else an error saying this
	}{
		{name: "malformed", src: "[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"-y\" \"pkg\"]\n", line: 3, col: 14},
		{name: "unterminated string", src: "model = \"x\"\n\n[mcp_servers.fs]\ncommand = \"npx\n", line: 4, col: 15},
		{name: "byte order mark", src: "\uFEFFmodel = \"x\" y\n", line: 1, col: 13},
		{name: "key twice", src: "[mcp_servers.fs]\ncommand = \"a\"\ncommand = \"b\"\n", line: 3, col: 1},
		{name: "not found", src: "[mcp_servers.other]\ncommand = \"a\"\n", want: `server "fs": not found`},
		{name: "remote", src: "[mcp_servers.fs]\nurl = \"https://x\"\n", want: `server "fs": a remote server`},
		{name: "no command", src: "[mcp_servers.fs]\nenabled = true\n", want: `server "fs": no command`},
		{name: "command not a string", src: "[mcp_servers.fs]\ncommand = [\"a\"]\n", want: `server "fs": command is not a string`},
		{name: "args not strings", src: "[mcp_servers.fs]\ncommand = \"a\"\nargs = [1]\n", want: `server "fs": args[0] is not a string`},
		{name: "array of tables", src: "[[mcp_servers]]\ncommand = \"a\"\n", want: "mcp_servers: an array of tables"},
		{name: "unwrap, not wrapped", src: "[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"a\", \"--\", \"b\"]\n", unwrap: true,
			want: `server "fs" is not wrapped: its command "npx" is not a supervisor`},
		{name: "unwrap, no --", src: "[mcp_servers.fs]\ncommand = \"supervisor\"\nargs = [\"run\"]\n", unwrap: true,
			want: `server "fs" is not wrapped: no command after "--"`},
		{name: "unwrap, nothing after --", src: "[mcp_servers.fs]\ncommand = \"/x/supervisor\"\nargs = [\"run\", \"--\"]\n", unwrap: true,
			want: `server "fs" is not wrapped: no command after "--"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkEditorError(t, tomlEditor{}, codexS, tc.src, tc.unwrap, tc.line, tc.col, tc.want)
		})
	}
}

// checkEditorError runs Wrap (or Unwrap) of server fs over src and checks
// that it fails as wanted, and that List fails alike on a syntax error.
func checkEditorError(t *testing.T, ed Editor, s Schema, src string, unwrap bool, line, col int, want string) {
	t.Helper()
	var err error
	if unwrap {
		_, err = ed.Unwrap([]byte(src), s, "fs")
	} else {
		_, err = ed.Wrap([]byte(src), s, "fs", "/bin/supervisor", prefixFS)
	}
	var se *SyntaxError
	if line > 0 {
		if !errors.As(err, &se) {
			t.Fatalf("got %v, want a *SyntaxError", err)
		}
		if se.Line != line || se.Col != col {
			t.Fatalf("got %d:%d: %s, want %d:%d", se.Line, se.Col, se.Msg, line, col)
		}
		if _, err := ed.List([]byte(src), s); !errors.As(err, &se) {
			t.Fatalf("List: got %v, want a *SyntaxError", err)
		}
		return
	}
	if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error with %q", err, want)
	}
}

// TestTOMLRoundTripVariations wraps and unwraps generated variations of
// one server: quoting, array layout, indentation, line breaks, dotted and
// inline forms.
func TestTOMLRoundTripVariations(t *testing.T) {
	quotes := []func(string) string{
		func(s string) string { return `"` + s + `"` },
		func(s string) string { return `'` + s + `'` },
		func(s string) string { return `"""` + s + `"""` },
	}
	arrays := []func(el []string, nl, ind string) string{
		func(el []string, nl, ind string) string { return "[" + strings.Join(el, ", ") + "]" },
		func(el []string, nl, ind string) string { return "[" + strings.Join(el, ",") + ",]" },
		func(el []string, nl, ind string) string {
			return "[" + nl + ind + ind + strings.Join(el, ","+nl+ind+ind) + "," + nl + ind + "]"
		},
		func(el []string, nl, ind string) string {
			return "[  # c" + nl + ind + strings.Join(el, ", # c"+nl+ind) + nl + "]"
		},
	}
	n := 0
	for qi, q := range quotes {
		for ai, arr := range arrays {
			for _, nl := range []string{"\n", "\r\n"} {
				for _, ind := range []string{"", "  ", "\t"} {
					for _, nargs := range []int{-1, 0, 1, 3} {
						var el []string
						for i := 0; i < nargs; i++ {
							el = append(el, q(fmt.Sprintf("a%d", i)))
						}
						args := ""
						if nargs >= 0 {
							args = "args = " + arr(el, nl, ind)
							if nargs == 0 {
								args = "args = []"
							}
						}
						cmd := "command = " + q("npx")
						forms := []string{
							"# x" + nl + "[mcp_servers.fs]" + nl + ind + cmd + nl + ind + args + nl + "[other]" + nl,
							"[mcp_servers]" + nl + ind + "fs." + cmd + " # c" + nl + ind + prefixIf(args, "fs.") + nl,
							"[mcp_servers.fs]" + nl + ind + args + nl + ind + cmd,
						}
						if ai == 0 {
							inline := cmd
							if args != "" {
								inline += ", " + args
							}
							forms = append(forms, "[mcp_servers]"+nl+"fs = { "+inline+" }"+nl)
						}
						for fi, src := range forms {
							n++
							name := fmt.Sprintf("q%d-a%d-%q-%q-n%d-f%d", qi, ai, nl, ind, nargs, fi)
							roundTrip(t, tomlEditor{}, codexS, name, src, append([]string{"npx"}, argNames(nargs)...))
						}
					}
				}
			}
		}
	}
	t.Logf("%d variations", n)
}

func prefixIf(s, p string) string {
	if s == "" {
		return ""
	}
	return p + s
}

func argNames(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("a%d", i))
	}
	return out
}

// roundTrip wraps server fs in src, checks what List sees, and unwraps
// back to src byte for byte.
func roundTrip(t *testing.T, ed Editor, s Schema, name, src string, cmdline []string) {
	t.Helper()
	w, err := ed.Wrap([]byte(src), s, "fs", editorExe, prefixFS)
	if err != nil {
		t.Errorf("%s: wrap: %v\n%s", name, err, src)
		return
	}
	l, err := ed.List(w, s)
	var fs *Server
	for i := range l {
		if l[i].Name == "fs" {
			fs = &l[i]
		}
	}
	if err != nil || fs == nil || fs.Command != editorExe || !reflect.DeepEqual(fs.Args, append(append([]string(nil), prefixFS...), cmdline...)) {
		t.Errorf("%s: List of the wrapped: %+v, %v\n%s", name, l, err, w)
		return
	}
	back, err := ed.Unwrap(w, s, "fs")
	if err != nil {
		t.Errorf("%s: unwrap: %v\n%s", name, err, w)
		return
	}
	if !bytes.Equal(back, []byte(src)) {
		t.Errorf("%s: round trip:\nsrc     %q\nwrapped %q\nback    %q", name, src, w, back)
	}
}

// FuzzTOMLEditor: no input makes the editor panic, and whatever Wrap
// accepts, Unwrap puts back byte for byte.
func FuzzTOMLEditor(f *testing.F) {
	f.Add(string(mustReadF(f, filepath.Join("testdata", "codex", "original.toml"))))
	f.Add("[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"pkg\",]\n")
	f.Add("[mcp_servers]\nfs = { command = 'srv' }\n")
	f.Fuzz(func(t *testing.T, src string) {
		fuzzEditor(t, tomlEditor{}, codexS, src, true)
	})
}

func mustReadF(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// fuzzEditor wraps and unwraps every stdio server of src, checking that
// Unwrap gives back src (exact: byte for byte; else, as it decodes).
func fuzzEditor(t *testing.T, ed Editor, s Schema, src string, exact bool) {
	servers, err := ed.List([]byte(src), s)
	if err != nil {
		return
	}
	for _, srv := range servers {
		if srv.Remote || srv.NoCommand {
			continue
		}
		w, err := ed.Wrap([]byte(src), s, srv.Name, editorExe, namePrefix(srv.Name))
		if err != nil {
			continue
		}
		back, err := ed.Unwrap(w, s, srv.Name)
		if err != nil {
			t.Fatalf("unwrap %q: %v\nsrc %q\nwrapped %q", srv.Name, err, src, w)
		}
		if exact && string(back) != src {
			t.Fatalf("unwrap %q:\nsrc  %q\nwrapped %q\nback %q", srv.Name, src, w, back)
		}
		l, err := ed.List(back, s)
		if err != nil || !reflect.DeepEqual(l, servers) {
			t.Fatalf("unwrap %q: List %+v, %v; want %+v\nback %q", srv.Name, l, err, servers, back)
		}
	}
}
