package hosts

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// testExe is the supervisor the golden files are wrapped with.
const testExe = "/opt/supervisor/bin/supervisor"

// testEnv is a Linux machine whose home is a temp dir.
func testEnv(t *testing.T) (Env, string) {
	t.Helper()
	home := t.TempDir()
	vars := map[string]string{}
	return Env{GOOS: "linux", Home: home, Getenv: func(k string) string { return vars[k] }}, home
}

func testOptions(e Env, project string) Options {
	// Force: testExe is no file, so the bare name of project files never
	// resolves to it; TestBareCommandChecked is about that.
	return Options{Env: &e, Exe: testExe, TempDirs: []string{}, Project: project, Force: true}
}

// placeFile puts src where host keeps its user file (or its project file,
// in a project dir) and returns the options and the path.
func placeFile(t *testing.T, host string, project bool, src []byte) (Options, string) {
	t.Helper()
	e, home := testEnv(t)
	dir := ""
	if project {
		dir = filepath.Join(home, "project")
	}
	hs, err := Lookup([]string{host})
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for _, f := range hs[0].Files(e, dir) {
		if f.Project == project {
			path = f.Path
			break
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return testOptions(e, dir), path
}

// goldenCases are the JSON-family host formats under testdata/<dir>.
// The TOML and YAML goldens are shared with the editors' own tests, which
// wrap with /usr/local/bin/supervisor.
var goldenCases = []struct {
	dir, host string
	project   bool
	ext, exe  string
}{
	{"claude-code", "claude-code", false, "json", testExe},
	{"claude-code-project", "claude-code", true, "json", testExe},
	{"claude-desktop", "claude-desktop", false, "json", testExe},
	{"cursor", "cursor", false, "json", testExe},
	{"vscode", "vscode", true, "json", testExe},
	{"windsurf", "windsurf", false, "json", testExe},
	{"gemini", "gemini", false, "json", testExe},
	{"zed", "zed", false, "json", testExe},
	{"cline", "cline", false, "json", testExe},
	{"opencode", "opencode", false, "json", testExe},
	{"qwen", "qwen", false, "json", testExe},
	{"roo-code", "roo-code", false, "json", testExe},
	{"kilo", "kilo", false, "json", testExe},
	{"amp", "amp", false, "json", testExe},
	{"lmstudio", "lmstudio", false, "json", testExe},
	{"codex", "codex", false, "toml", "/usr/local/bin/supervisor"},
	{"continue", "continue", false, "yaml", "/usr/local/bin/supervisor"},
	{"goose", "goose", false, "yaml", "/usr/local/bin/supervisor"},
}

// TestGolden: install gives wrapped.json; install again changes nothing;
// uninstall gives back original.json byte for byte (through the backup),
// and without the backup gives unwrapped.json (the original with the
// entries it had wrapped already unwrapped too).
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.dir, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.dir)
			orig := mustRead(t, filepath.Join(dir, "original."+tc.ext))
			o, path := placeFile(t, tc.host, tc.project, orig)
			o.Exe = tc.exe
			hs, _ := Lookup([]string{tc.host})

			mustInstall(t, hs, o)
			golden(t, filepath.Join(dir, "wrapped."+tc.ext), mustRead(t, path))
			wrapped := mustRead(t, path)
			if !bytes.Equal(mustRead(t, path+BackupSuffix), orig) {
				t.Fatalf("the backup is not the original")
			}

			mustInstall(t, hs, o)
			if again := mustRead(t, path); !bytes.Equal(again, wrapped) {
				t.Fatalf("a second install changed the file:\n%s", UnifiedDiff("first", "second", wrapped, again))
			}

			mustUninstall(t, hs, o)
			if got := mustRead(t, path); !bytes.Equal(got, orig) {
				t.Fatalf("uninstall did not restore the original:\n%s", UnifiedDiff("original", "uninstalled", orig, got))
			}
			if _, err := os.Stat(path + BackupSuffix); !os.IsNotExist(err) {
				t.Fatalf("the backup is still there after a restore: %v", err)
			}

			// Without the backup: the editors alone.
			if err := os.WriteFile(path, wrapped, 0o600); err != nil {
				t.Fatal(err)
			}
			mustUninstall(t, hs, o)
			golden(t, filepath.Join(dir, "unwrapped."+tc.ext), mustRead(t, path))
		})
	}
}

func mustInstall(t *testing.T, hs []Host, o Options) []Result {
	t.Helper()
	rs, err := Install(hs, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return rs
}

func mustUninstall(t *testing.T, hs []Host, o Options) []Result {
	t.Helper()
	rs, err := Uninstall(hs, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return rs
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with the golden file (rewriting it with -update).
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := mustRead(t, path)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test -update rewrites it):\n%s", path, UnifiedDiff(path, "got", want, got))
	}
}
