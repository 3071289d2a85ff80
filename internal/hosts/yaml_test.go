package hosts

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestYAMLGolden(t *testing.T) {
	t.Run("continue", func(t *testing.T) { editorGolden(t, yamlEditor{}, "continue", "yaml", continueS) })
	t.Run("goose", func(t *testing.T) { editorGolden(t, yamlEditor{}, "goose", "yaml", gooseS) })
}

func TestYAMLList(t *testing.T) {
	memory := []string{"run", "--name", "memory", "--", "npx", "-y", "@modelcontextprotocol/server-memory"}
	for _, tc := range []struct {
		dir  string
		s    Schema
		want []Server
	}{
		{"continue", continueS, []Server{
			{Name: "filesystem", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/dev/projects"}},
			{Name: "sqlite db", Command: "uvx", Args: []string{"mcp-server-sqlite", "--db-path", "/tmp/test.db"}},
			{Name: "git", Command: "/usr/local/bin/mcp-git"},
			{Name: "windows", Command: "cmd", Args: []string{"/c", "npx", "-y", "@upstash/context7-mcp"}},
			{Name: "remote-sse", Remote: true, NoCommand: true},
			{Name: "remote-http", Remote: true, NoCommand: true},
			{Name: "memory", Command: "/usr/local/bin/supervisor", Args: memory},
			{Name: "inline", Command: "mcp-inline", Args: []string{"--verbose"}},
			{Name: "inline-bare", Command: "mcp-inline-bare"},
			{Name: "node", Command: "node", Args: []string{"server.js", "--port=8080"}},
			{Name: "empty", Command: "mcp-empty"},
		}},
		{"goose", gooseS, []Server{
			{Name: "developer", NoCommand: true},
			{Name: "computercontroller", NoCommand: true},
			{Name: "github", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github"}},
			{Name: "fetch", Command: "uvx"},
			{Name: "memory", Command: "/usr/local/bin/supervisor", Args: memory},
			{Name: "local tool", Command: "/opt/tools/bin/mcp-local"},
			{Name: "remote", Remote: true, NoCommand: true},
			{Name: "windows", Command: "cmd", Args: []string{"/c", "npx", "-y", "@upstash/context7-mcp"}},
		}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			src := mustRead(t, filepath.Join("testdata", tc.dir, "original.yaml"))
			got, err := yamlEditor{}.List(src, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	for _, src := range []string{"", "# nothing\n", "name: x\n", "mcpServers:\n", "mcpServers: []\n", "---\n"} {
		if got, err := (yamlEditor{}).List([]byte(src), continueS); err != nil || got != nil {
			t.Errorf("List(%q) = %v, %v; want no servers", src, got, err)
		}
	}
}

func TestYAMLWrapUnwrap(t *testing.T) {
	t.Run("continue", func(t *testing.T) {
		runEditorCases(t, yamlEditor{}, continueS, []editorCase{
			{"block args",
				"mcpServers:\n  - name: fs\n    command: npx\n    args:\n      - -y\n      - pkg\n",
				"mcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args:\n      - run\n      - --name\n      - fs\n      - --\n      - npx\n      - -y\n      - pkg\n"},
			{"block args, quoted like the first one",
				"mcpServers:\n- name: fs\n  command: \"npx\"\n  args:\n  -   'pkg'   # c\n",
				"mcpServers:\n- name: fs\n  command: \"/bin/supervisor\"\n  args:\n  -   'run'\n  -   '--name'\n  -   'fs'\n  -   '--'\n  -   \"npx\"\n  -   'pkg'   # c\n"},
			{"flow args",
				"mcpServers:\n  - name: fs\n    command: npx\n    args: [-y, pkg]\n",
				"mcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args: [run, --name, fs, --, npx, -y, pkg]\n"},
			{"flow args, double-quoted",
				"mcpServers:\n  - name: fs\n    command: npx\n    args: [\"-y\",\"pkg\"]\n",
				"mcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args: [\"run\",\"--name\",\"fs\",\"--\",npx,\"-y\",\"pkg\"]\n"},
			{"flow args on lines of their own",
				"mcpServers:\n  - name: fs\n    command: npx\n    args: [\n      pkg,\n    ]\n",
				"mcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args: [\n      run,\n      --name,\n      fs,\n      --,\n      npx,\n      pkg,\n    ]\n"},
			{"empty flow args",
				"mcpServers:\n  - name: fs\n    command: srv\n    args: []\n",
				"mcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args: [run, --name, fs, --, srv]\n"},
			{"no args",
				"mcpServers:\n  - name: fs\n    command: srv   # the server\n    env: {A: b}\n",
				"mcpServers:\n  - name: fs\n    command: /bin/supervisor   # the server\n    args:\n      - run\n      - --name\n      - fs\n      - --\n      - srv\n    env: {A: b}\n"},
			{"no args, command first in the item",
				"mcpServers:\n  - command: srv\n    name: fs",
				"mcpServers:\n  - command: /bin/supervisor\n    args:\n      - run\n      - --name\n      - fs\n      - --\n      - srv\n    name: fs"},
			{"no args, CRLF, last line without a break",
				"mcpServers:\r\n  - name: fs\r\n    command: srv",
				"mcpServers:\r\n  - name: fs\r\n    command: /bin/supervisor\r\n    args:\r\n      - run\r\n      - --name\r\n      - fs\r\n      - --\r\n      - srv"},
			{"flow entry",
				"mcpServers:\n  - {name: fs, command: npx, args: [pkg]}\n",
				"mcpServers:\n  - {name: fs, command: /bin/supervisor, args: [run, --name, fs, --, npx, pkg]}\n"},
			{"flow entry, no args",
				"mcpServers: [{name: fs, command: srv}]\n",
				"mcpServers: [{name: fs, command: /bin/supervisor, args: [run, --name, fs, --, srv]}]\n"},
			{"flow entry, empty args",
				"mcpServers: [{name: fs, command: srv, args: []}]\n",
				"mcpServers: [{name: fs, command: /bin/supervisor, args: [run, --name, fs, --, srv,]}]\n"},
			{"byte order mark",
				"\uFEFFmcpServers:\n  - name: fs\n    command: npx\n    args: [é, b]\n",
				"\uFEFFmcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args: [run, --name, fs, --, npx, é, b]\n"},
			{"NaN elsewhere",
				"x: .nan\nmcpServers:\n  - name: fs\n    command: npx\n",
				"x: .nan\nmcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args:\n      - run\n      - --name\n      - fs\n      - --\n      - npx\n"},
			{"windows cmd /c keeps its shape",
				"mcpServers:\n  - name: fs\n    command: cmd\n    args: [/c, npx, -y, pkg]\n",
				"mcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args: [run, --name, fs, --, cmd, /c, npx, -y, pkg]\n"},
			{"tagged and anchored",
				"mcpServers:\n  - name: fs\n    command: !!str npx\n    args: &a [pkg]\n",
				"mcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args: &a [run, --name, fs, --, !!str npx, pkg]\n"},
		})
	})
	t.Run("goose", func(t *testing.T) {
		runEditorCases(t, yamlEditor{}, gooseS, []editorCase{
			{"serde_yaml layout",
				"extensions:\n  fs:\n    args:\n    - -y\n    - '@scope/pkg'\n    cmd: npx\n    type: stdio\n",
				"extensions:\n  fs:\n    args:\n    - run\n    - --name\n    - fs\n    - --\n    - npx\n    - -y\n    - '@scope/pkg'\n    cmd: /bin/supervisor\n    type: stdio\n"},
			{"empty args before cmd",
				"extensions:\n  fs:\n    args: []\n    cmd: uvx\n",
				"extensions:\n  fs:\n    args: [run, --name, fs, --, uvx]\n    cmd: /bin/supervisor\n"},
			{"no args, dashes as a neighbour has them",
				"extensions:\n  a:\n    args:\n    - x\n    cmd: a\n  fs:\n    cmd: srv\n",
				"extensions:\n  a:\n    args:\n    - x\n    cmd: a\n  fs:\n    cmd: /bin/supervisor\n    args:\n    - run\n    - --name\n    - fs\n    - --\n    - srv\n"},
			{"quoted key",
				"extensions:\n  \"fs\":   # c\n    cmd: 'srv'\n    args: ['x']\n",
				"extensions:\n  \"fs\":   # c\n    cmd: '/bin/supervisor'\n    args: ['run', '--name', 'fs', '--', 'srv', 'x']\n"},
		})
	})
}

func TestYAMLQuotesNewStrings(t *testing.T) {
	for _, tc := range []struct {
		s        string
		flowOK   bool // plain in flow context
		blockOK  bool // plain in block context
		rendered string
	}{
		{"run", true, true, "run"},
		{"--name", true, true, "--name"},
		{"--", true, true, "--"},
		{"-", false, false, `"-"`},
		{"---", false, false, `"---"`},
		{"/usr/local/bin/supervisor", true, true, "/usr/local/bin/supervisor"},
		{`C:\Program Files\supervisor.exe`, false, true, `"C:\\Program Files\\supervisor.exe"`},
		{"a, b", false, true, `"a, b"`},
		{"yes", false, false, `"yes"`},
		{"Off", false, false, `"Off"`},
		{"null", false, false, `"null"`},
		{"~", false, false, `"~"`},
		{"123", false, false, `"123"`},
		{"-1", false, false, `"-1"`},
		{".5", false, false, `".5"`},
		{".inf", false, false, `".inf"`},
		{"@scope/pkg", false, false, `"@scope/pkg"`},
		{"a: b", false, false, `"a: b"`},
		{"a #b", false, false, `"a #b"`},
		{"x:", false, false, `"x:"`},
		{" x", false, false, `" x"`},
		{"", false, false, `""`},
		{"tab\there", false, false, `"tab\there"`},
		{"nl\nhere\x01\u2028", false, false, `"nl\nhere\x01\u2028"`},
		{"it's \"q\" \\", true, true, `it's "q" \`},
		{"'q' \"x\" \\", false, false, `"'q' \"x\" \\"`},
		{"ünïcödé", true, true, "ünïcödé"},
	} {
		if got := yamlPlain(tc.s, true); got != tc.flowOK {
			t.Errorf("yamlPlain(%q, flow) = %v", tc.s, got)
		}
		if got := yamlPlain(tc.s, false); got != tc.blockOK {
			t.Errorf("yamlPlain(%q, block) = %v", tc.s, got)
		}
		if got := yamlQuote(tc.s, 0, true); got != tc.rendered {
			t.Errorf("yamlQuote(%q) = %s, want %s", tc.s, got, tc.rendered)
		}
		// Whatever the rendering, it reads back as s, in a block and a
		// flow sequence, and with single quotes as the hint too.
		for _, src := range []string{
			"mcpServers:\n  - name: fs\n    command: npx\n    args:\n      - a\n",
			"mcpServers:\n  - name: fs\n    command: 'npx'\n    args: ['a']\n",
		} {
			got, err := yamlEditor{}.Wrap([]byte(src), continueS, "fs", tc.s, []string{"run", "--name", tc.s, "--"})
			if err != nil {
				t.Errorf("wrap with %q: %v", tc.s, err)
				continue
			}
			l, err := yamlEditor{}.List(got, continueS)
			if err != nil || l[0].Command != tc.s || l[0].Args[2] != tc.s {
				t.Errorf("wrap with %q: %+v, %v\n%s", tc.s, l, err, got)
			}
		}
	}
}

func TestYAMLErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		s         Schema
		unwrap    bool
		line, col int
		want      string
	}{
		{name: "malformed flow", s: continueS, src: "mcpServers:\n  - name: fs\n    args: [a, b\n    command: x\n", line: 4, col: 12},
		{name: "bad indentation", s: gooseS, src: "extensions:\n  fs:\n    cmd: x\n   args: []\n", line: 4, col: 4},
		{name: "tab", s: gooseS, src: "extensions:\n\tfs:\n", line: 2, col: 1},
		{name: "key twice", s: gooseS, src: "extensions:\n  fs:\n    cmd: a\n    cmd: b\n", line: 4, col: 5},
		{name: "not found", s: gooseS, src: "extensions:\n  other:\n    cmd: a\n", want: `server "fs": not found in extensions`},
		{name: "builtin", s: gooseS, src: "extensions:\n  fs:\n    type: builtin\n", want: `server "fs": no cmd`},
		{name: "remote", s: gooseS, src: "extensions:\n  fs:\n    type: streamable_http\n    uri: https://x\n", want: `server "fs": a remote server`},
		{name: "remote by type", s: continueS, src: "mcpServers:\n- name: fs\n  type: sse\n  command: x\n", want: `server "fs": a remote server`},
		{name: "a name twice", s: continueS, src: "mcpServers:\n- name: fs\n  command: a\n- name: fs\n  command: b\n", want: `mcpServers: two servers are named "fs" (line 4)`},
		{name: "not a list", s: continueS, src: "mcpServers:\n  fs: {}\n", want: "mcpServers: not a list"},
		{name: "not a mapping", s: gooseS, src: "extensions: [a]\n", want: "extensions: not a mapping"},
		{name: "top level", s: gooseS, src: "- a\n", want: "the top-level value is not a mapping"},
		{name: "block scalar command", s: gooseS, src: "extensions:\n  fs:\n    cmd: |\n      npx\n    args: []\n", want: "line 3:"},
		{name: "multi-line plain command", s: gooseS, src: "extensions:\n  fs:\n    cmd: npx\n      more\n    args: []\n", want: "line 3:"},
		{name: "alias command", s: gooseS, src: "x: &c npx\nextensions:\n  fs:\n    cmd: *c\n", want: "cmd is an alias"},
		{name: "args not strings", s: gooseS, src: "extensions:\n  fs:\n    cmd: a\n    args: [[b]]\n", want: `server "fs": args[0] is not a string`},
		{name: "unwrap, not wrapped", s: gooseS, unwrap: true, src: "extensions:\n  fs:\n    cmd: npx\n    args: [a, --, b]\n",
			want: `server "fs" is not wrapped: its command "npx" is not a supervisor`},
		{name: "unwrap, no --", s: continueS, unwrap: true, src: "mcpServers:\n- name: fs\n  command: supervisor.exe\n  args: [run]\n",
			want: `server "fs" is not wrapped: no command after "--"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkEditorError(t, yamlEditor{}, tc.s, tc.src, tc.unwrap, tc.line, tc.col, tc.want)
		})
	}
}

// TestYAMLFlowUnsafeCommand: a plain command with a comma cannot go into
// a flow sequence as written; it goes there double-quoted and comes back
// so (the one case where Unwrap does not give back the same bytes).
func TestYAMLFlowUnsafeCommand(t *testing.T) {
	src := "mcpServers:\n  - name: fs\n    command: my,tool\n    args: [a]\n"
	w, err := yamlEditor{}.Wrap([]byte(src), continueS, "fs", "/bin/supervisor", prefixFS)
	if err != nil {
		t.Fatal(err)
	}
	if want := "mcpServers:\n  - name: fs\n    command: /bin/supervisor\n    args: [run, --name, fs, --, \"my,tool\", a]\n"; string(w) != want {
		t.Fatalf("wrap:\ngot  %q\nwant %q", w, want)
	}
	back, err := yamlEditor{}.Unwrap(w, continueS, "fs")
	if err != nil {
		t.Fatal(err)
	}
	if want := "mcpServers:\n  - name: fs\n    command: \"my,tool\"\n    args: [a]\n"; string(back) != want {
		t.Fatalf("unwrap:\ngot  %q\nwant %q", back, want)
	}
}

// TestYAMLUnwrapBlockLeftEmpty: a block sequence that had only the
// wrapped command (not Wrap's own output) unwraps to [].
func TestYAMLUnwrapBlockLeftEmpty(t *testing.T) {
	src := "extensions:\n  fs:\n    args:\n    - run\n    - --\n    - srv\n    cmd: supervisor\n"
	got, err := yamlEditor{}.Unwrap([]byte(src), gooseS, "fs")
	if err != nil {
		t.Fatal(err)
	}
	if want := "extensions:\n  fs:\n    args: []\n    cmd: srv\n"; string(got) != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestYAMLRoundTripVariations wraps and unwraps generated variations of
// one server: quoting, block and flow args, indentation, line breaks,
// field order, Continue's list and goose's map.
func TestYAMLRoundTripVariations(t *testing.T) {
	quotes := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return `'` + s + `'` },
		func(s string) string { return `"` + s + `"` },
		func(s string) string { return `!!str ` + s },
	}
	n := 0
	for qi, q := range quotes {
		for _, nl := range []string{"\n", "\r\n"} {
			for _, ind := range []string{"  ", "    "} {
				for _, nargs := range []int{-1, 0, 1, 3} {
					var el []string
					for i := 0; i < nargs; i++ {
						el = append(el, q(fmt.Sprintf("a%d", i)))
					}
					// The args field at indentation i, block or flow.
					argsForms := []func(i string) string{
						func(i string) string { return i + "args: [" + strings.Join(el, ", ") + "]" },
						func(i string) string {
							return i + "args: [" + nl + i + ind + strings.Join(el, ","+nl+i+ind) + "," + nl + i + "]"
						},
					}
					if nargs > 0 {
						argsForms = append(argsForms,
							func(i string) string { return i + "args:" + nl + i + "- " + strings.Join(el, nl+i+"- ") },
							func(i string) string {
								return i + "args:   # c" + nl + i + ind + "-  " + strings.Join(el, " # c"+nl+i+ind+"-  ")
							})
					}
					if nargs == -1 {
						argsForms = []func(string) string{func(string) string { return "" }}
					}
					if nargs == 0 {
						argsForms = argsForms[:1]
					}
					for ai, args := range argsForms {
						cmd := q("npx")
						var forms []struct {
							s   Schema
							src string
						}
						add := func(s Schema, parts ...string) {
							var kept []string
							for _, p := range parts {
								if p != "" {
									kept = append(kept, p)
								}
							}
							forms = append(forms, struct {
								s   Schema
								src string
							}{s, strings.Join(kept, nl) + nl})
						}
						i2 := ind + ind
						add(continueS, "# top", "mcpServers:", ind+"- name: fs", ind+"  command: "+cmd+"  # c", args(ind+"  "), ind+"  env: {}")
						add(continueS, "mcpServers:", "- command: "+cmd, args("  "), "  name: fs")
						add(gooseS, "extensions:", ind+"fs:", args(i2), i2+"cmd: "+cmd, i2+"type: stdio", "other: 1")
						add(gooseS, "extensions:", ind+"other: {}", ind+"fs:", i2+"type: stdio", i2+"cmd: "+cmd, args(i2))
						if ai == 0 {
							flowArgs := ""
							if nargs >= 0 {
								flowArgs = ", args: [" + strings.Join(el, ", ") + "]"
							}
							add(continueS, "mcpServers:", ind+"- {name: fs, command: "+cmd+flowArgs+"}")
						}
						for fi, f := range forms {
							n++
							name := fmt.Sprintf("q%d-%q-%q-n%d-a%d-f%d", qi, nl, ind, nargs, ai, fi)
							roundTrip(t, yamlEditor{}, f.s, name, f.src, append([]string{"npx"}, argNames(nargs)...))
						}
					}
				}
			}
		}
	}
	t.Logf("%d variations", n)
}

// FuzzYAMLEditor: no input makes the editor panic, and whatever Wrap
// accepts, Unwrap puts back (as it decodes: a command that had to be
// quoted in a flow sequence comes back quoted).
func FuzzYAMLEditor(f *testing.F) {
	f.Add(string(mustReadF(f, filepath.Join("testdata", "continue", "original.yaml"))), true)
	f.Add(string(mustReadF(f, filepath.Join("testdata", "goose", "original.yaml"))), false)
	f.Add("mcpServers:\n- {name: fs, command: srv, args: []}\n", true)
	f.Fuzz(func(t *testing.T, src string, list bool) {
		s := gooseS
		if list {
			s = continueS
		}
		fuzzEditor(t, yamlEditor{}, s, src, false)
	})
}
