package hosts

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHookNewFile(t *testing.T) {
	for _, tc := range []struct {
		name, host, rel string
		env             map[string]string
	}{
		{"claude", "claude-code", ".claude/settings.json", nil},
		{"claude config dir", "claude-code", "cfg/settings.json", map[string]string{"CLAUDE_CONFIG_DIR": "cfg"}},
		{"gemini", "gemini", ".gemini/settings.json", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			e := Env{GOOS: "linux", Home: home, Getenv: func(k string) string {
				if v := tc.env[k]; v != "" {
					return filepath.Join(home, v)
				}
				return ""
			}}
			o := testOptions(e, "")
			o.Hooks = true
			hs, _ := Lookup([]string{tc.host})
			mustInstall(t, hs, o)
			path := filepath.Join(home, tc.rel)
			want := `{
  "hooks": {
    "SessionEnd": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "/opt/supervisor/bin/supervisor session end --hook"
          }
        ]
      }
    ]
  }
}
`
			if got := string(mustRead(t, path)); got != want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, want)
			}
			rs := mustInstall(t, hs, o)
			if got := string(mustRead(t, path)); got != want || rs[len(rs)-1].Count(Already) != 1 {
				t.Fatalf("second install: %+v\n%s", rs, got)
			}
			mustUninstall(t, hs, o)
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("the settings file Install created is still there: %v", err)
			}
		})
	}
}

func TestHookExistingFile(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"other hooks",
			"{\n  // mine\n  \"model\": \"x\",\n  \"hooks\": {\n    \"SessionStart\": [\n      {\"hooks\": [{\"type\": \"command\", \"command\": \"echo hi\"}]}\n    ]\n  }\n}\n",
			"{\n  // mine\n  \"model\": \"x\",\n  \"hooks\": {\n    \"SessionStart\": [\n      {\"hooks\": [{\"type\": \"command\", \"command\": \"echo hi\"}]}\n    ],\n    \"SessionEnd\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"/opt/supervisor/bin/supervisor session end --hook\"\n          }\n        ]\n      }\n    ]\n  }\n}\n"},
		{"no hooks, trailing comma",
			"{\n\t\"model\": \"x\",\n}\n",
			"{\n\t\"model\": \"x\",\n\t\"hooks\": {\n\t\t\"SessionEnd\": [\n\t\t\t{\n\t\t\t\t\"hooks\": [\n\t\t\t\t\t{\n\t\t\t\t\t\t\"type\": \"command\",\n\t\t\t\t\t\t\"command\": \"/opt/supervisor/bin/supervisor session end --hook\"\n\t\t\t\t\t}\n\t\t\t\t]\n\t\t\t}\n\t\t]\n\t},\n}\n"},
		{"a SessionEnd hook already",
			"{\"hooks\": {\"SessionEnd\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"log-end\"}]}]}}",
			"{\"hooks\": {\"SessionEnd\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"log-end\"}]}, {\"hooks\":[{\"type\":\"command\",\"command\":\"/opt/supervisor/bin/supervisor session end --hook\"}]}]}}"},
		{"empty object", "{}\n",
			"{\n  \"hooks\": {\n    \"SessionEnd\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"/opt/supervisor/bin/supervisor session end --hook\"\n          }\n        ]\n      }\n    ]\n  }\n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, home := testEnv(t)
			path := filepath.Join(home, ".claude", "settings.json")
			os.MkdirAll(filepath.Dir(path), 0o700)
			os.WriteFile(path, []byte(tc.src), 0o644)
			o := testOptions(e, "")
			o.Hooks = true
			hs, _ := Lookup([]string{"claude-code"})
			mustInstall(t, hs, o)
			if got := string(mustRead(t, path)); got != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			mustInstall(t, hs, o)
			if got := string(mustRead(t, path)); got != tc.want {
				t.Fatalf("second install:\n%s", got)
			}
			mustUninstall(t, hs, o)
			if got := string(mustRead(t, path)); got != tc.src {
				t.Fatalf("uninstall (from the backup):\n%s\nwant:\n%s", got, tc.src)
			}
			// Without the backup: the removal alone is exact too.
			os.WriteFile(path, []byte(tc.want), 0o644)
			mustUninstall(t, hs, o)
			if tc.name == "empty object" { // indistinguishable from a file Install created
				if _, err := os.Stat(path); !os.IsNotExist(err) {
					t.Fatalf("a settings file holding only our hook was kept")
				}
				return
			}
			if got := string(mustRead(t, path)); got != tc.src {
				t.Fatalf("uninstall (removal):\n%s\nwant:\n%s", got, tc.src)
			}
		})
	}
}

func TestIsOurHook(t *testing.T) {
	for cmd, want := range map[string]bool{
		"/usr/local/bin/supervisor session end --hook":     true,
		"supervisor session end --hook":                    true,
		"'/Users/me/my bin/supervisor' session end --hook": true,
		`C:\bin\supervisor.exe session end --hook`:         true,
		"other session end --hook":                         false,
		"supervisor session end abc":                       false,
	} {
		if got := isOurHook(cmd); got != want {
			t.Errorf("isOurHook(%q) = %v, want %v", cmd, got, want)
		}
	}
	if got := shellQuote("/Users/me/my bin/supervisor"); got != "'/Users/me/my bin/supervisor'" {
		t.Errorf("shellQuote: %s", got)
	}
}

// TestHookRefusesDanglingSymlink: a settings.json that is a link to a
// missing file is left a link, and the install says why.
func TestHookRefusesDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	if err := os.Symlink(filepath.Join(dir, "dotfiles", "settings.json"), path); err != nil {
		t.Fatal(err)
	}
	o := &Options{Out: io.Discard}
	r := o.applyHook(File{Path: path}, func([]byte) ([]byte, []Entry, error) { return []byte("{}\n"), nil, nil })
	if r.Err == nil || !strings.Contains(r.Err.Error(), "symlink") {
		t.Errorf("err %v, want a refusal naming the symlink", r.Err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
}
