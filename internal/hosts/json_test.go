package hosts

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var (
	mcpServers = Schema{Path: []string{"mcpServers"}, Command: "command", Args: "args"}
	opencodeS  = Schema{Path: []string{"mcp"}, Command: "command"}
	prefixFS   = []string{"run", "--name", "fs", "--"}
)

func TestJSONWrapUnwrap(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
		s               Schema
	}{
		{"one per line",
			"{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"npx\",\n      \"args\": [\n        \"-y\",\n        \"pkg\"\n      ]\n    }\n  }\n}\n",
			"{\n  \"mcpServers\": {\n    \"fs\": {\n      \"command\": \"/bin/supervisor\",\n      \"args\": [\n        \"run\",\n        \"--name\",\n        \"fs\",\n        \"--\",\n        \"npx\",\n        \"-y\",\n        \"pkg\"\n      ]\n    }\n  }\n}\n",
			mcpServers},
		{"inline",
			`{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "pkg"], "env": {}}}}`,
			`{"mcpServers": {"fs": {"command": "/bin/supervisor", "args": ["run", "--name", "fs", "--", "npx", "-y", "pkg"], "env": {}}}}`,
			mcpServers},
		{"compact",
			`{"mcpServers":{"fs":{"command":"npx","args":["-y","pkg"]}}}`,
			`{"mcpServers":{"fs":{"command":"/bin/supervisor","args":["run","--name","fs","--","npx","-y","pkg"]}}}`,
			mcpServers},
		{"one inline arg",
			`{"mcpServers": {"fs": {"command": "npx", "args": ["pkg"]}}}`,
			`{"mcpServers": {"fs": {"command": "/bin/supervisor", "args": ["run", "--name", "fs", "--", "npx", "pkg"]}}}`,
			mcpServers},
		{"empty args",
			`{"mcpServers": {"fs": {"command": "srv", "args": []}}}`,
			`{"mcpServers": {"fs": {"command": "/bin/supervisor", "args": ["run", "--name", "fs", "--", "srv"]}}}`,
			mcpServers},
		{"missing args inline",
			`{"mcpServers": {"fs": {"command": "srv", "env": {}}}}`,
			`{"mcpServers": {"fs": {"command": "/bin/supervisor", "args": [ "run", "--name", "fs", "--", "srv" ], "env": {}}}}`,
			mcpServers},
		{"missing args one per line",
			"{\n\t\"mcpServers\": {\n\t\t\"fs\": {\n\t\t\t\"command\": \"srv\" // the server\n\t\t}\n\t}\n}",
			"{\n\t\"mcpServers\": {\n\t\t\"fs\": {\n\t\t\t\"command\": \"/bin/supervisor\",\n\t\t\t\"args\": [\n\t\t\t\t\"run\",\n\t\t\t\t\"--name\",\n\t\t\t\t\"fs\",\n\t\t\t\t\"--\",\n\t\t\t\t\"srv\"\n\t\t\t] // the server\n\t\t}\n\t}\n}",
			mcpServers},
		{"escapes kept verbatim",
			`{"mcpServers": {"fs": {"command": "C:\\tools\\srv.exe", "args": ["a\u0062"]}}}`,
			`{"mcpServers": {"fs": {"command": "/bin/supervisor", "args": ["run", "--name", "fs", "--", "C:\\tools\\srv.exe", "a\u0062"]}}}`,
			mcpServers},
		{"opencode command array",
			"{\n  \"mcp\": {\n    \"fs\": {\n      \"type\": \"local\",\n      \"command\": [\"npx\", \"-y\", \"pkg\"],\n    },\n  },\n}",
			"{\n  \"mcp\": {\n    \"fs\": {\n      \"type\": \"local\",\n      \"command\": [\"/bin/supervisor\", \"run\", \"--name\", \"fs\", \"--\", \"npx\", \"-y\", \"pkg\"],\n    },\n  },\n}",
			opencodeS},
		{"nested path",
			`{"projects": {"/a b": {"mcpServers": {"fs": {"command": "x", "args": ["y"]}}}}}`,
			`{"projects": {"/a b": {"mcpServers": {"fs": {"command": "/bin/supervisor", "args": ["run", "--name", "fs", "--", "x", "y"]}}}}}`,
			Schema{Path: []string{"projects", "/a b", "mcpServers"}, Command: "command", Args: "args"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := jsonEditor{}.Wrap([]byte(tc.src), tc.s, "fs", "/bin/supervisor", prefixFS)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("wrap:\ngot  %s\nwant %s", got, tc.want)
			}
			back, err := jsonEditor{}.Unwrap(got, tc.s, "fs")
			if err != nil {
				t.Fatal(err)
			}
			if string(back) != tc.src {
				t.Fatalf("unwrap:\ngot  %s\nwant %s", back, tc.src)
			}
			list, err := jsonEditor{}.List(got, tc.s)
			if err != nil || len(list) != 1 || list[0].Command != "/bin/supervisor" {
				t.Fatalf("list of the wrapped: %+v, %v", list, err)
			}
		})
	}
}

func TestJSONList(t *testing.T) {
	src := `// servers
{
  "mcpServers": {
    "local": {"command": "npx", "args": ["-y", "pkg"],},
    "http": {"type": "http", "url": "https://x"},
    "gem": {"httpUrl": "https://x"},
    "wind": {"serverUrl": "https://x"},
    "cline": {"type": "streamableHttp", "url": "https://x"},
    "ext": {"settings": {}},
    "nested": {"command": {"path": "x"}},
  },
}`
	got, err := jsonEditor{}.List([]byte(src), mcpServers)
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{
		{Name: "local", Command: "npx", Args: []string{"-y", "pkg"}},
		{Name: "http", Remote: true, NoCommand: true},
		{Name: "gem", Remote: true, NoCommand: true},
		{Name: "wind", Remote: true, NoCommand: true},
		{Name: "cline", Remote: true, NoCommand: true},
		{Name: "ext", NoCommand: true},
		{Name: "nested", NoCommand: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got, err := (jsonEditor{}).List([]byte("{}"), mcpServers); err != nil || got != nil {
		t.Fatalf("no servers: got %v, %v", got, err)
	}
	if got, err := (jsonEditor{}).List([]byte(""), mcpServers); err != nil || got != nil {
		t.Fatalf("empty file: got %v, %v", got, err)
	}
}

func TestJSONSyntaxError(t *testing.T) {
	src := "{\n  \"mcpServers\": {\n    \"fs\": {\"command\" \"npx\"}\n  }\n}\n"
	_, err := jsonEditor{}.List([]byte(src), mcpServers)
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *SyntaxError", err)
	}
	if se.Line != 3 || se.Col != 22 || !strings.Contains(se.Msg, "invalid character") {
		t.Fatalf("got %d:%d: %s, want 3:22: invalid character...", se.Line, se.Col, se.Msg)
	}
}
