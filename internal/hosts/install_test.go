package hosts

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const cursorSrc = `{
  "mcpServers": {
    "fs": {
      "command": "npx",
      "args": ["-y", "pkg"]
    }
  }
}
`

var cursor, _ = Lookup([]string{"cursor"})

func TestSymlinkedConfig(t *testing.T) {
	o, path := placeFile(t, "cursor", false, nil)
	real := filepath.Join(t.TempDir(), "dotfiles", "mcp.json")
	os.MkdirAll(filepath.Dir(real), 0o755)
	if err := os.WriteFile(real, []byte(cursorSrc), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	mustInstall(t, cursor, o)
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is no longer a link: %v %v", fi.Mode(), err)
	}
	got := mustRead(t, real)
	if !bytes.Contains(got, []byte(`"command": "`+testExe+`"`)) {
		t.Fatalf("the real file was not wrapped:\n%s", got)
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if b := mustRead(t, real+BackupSuffix); string(b) != cursorSrc {
		t.Fatalf("backup beside the real file: %q", b)
	}
	mustUninstall(t, cursor, o)
	if got := mustRead(t, real); string(got) != cursorSrc {
		t.Fatalf("uninstall through the link:\n%s", got)
	}
}

// Tests run as root in CI, where a mode does not stop a write: the check
// is explicit, and this test holds as root too.
func TestReadOnlyConfig(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	os.Chmod(path, 0o444)
	rs, err := Install(cursor, o)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err == nil || !strings.Contains(rs[0].Err.Error(), path+": read-only (mode 0444)") {
		t.Fatalf("got %v, want a read-only error naming %s", rs[0].Err, path)
	}
	if got := mustRead(t, path); string(got) != cursorSrc {
		t.Fatalf("a read-only file was changed:\n%s", got)
	}
	if _, err := os.Stat(path + BackupSuffix); !os.IsNotExist(err) {
		t.Fatalf("a backup was written for a file left alone")
	}
}

func TestMalformedConfig(t *testing.T) {
	src := "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"npx\",, }\n  }\n}\n"
	o, path := placeFile(t, "cursor", false, []byte(src))
	for _, f := range []func([]Host, Options) ([]Result, error){Install, Uninstall, Status} {
		rs, err := f(cursor, o)
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Err == nil || !strings.HasPrefix(rs[0].Err.Error(), path+":3:29: invalid character ','") {
			t.Fatalf("got %v, want %s:3:29: invalid character ','...", rs[0].Err, path)
		}
	}
	if got := mustRead(t, path); string(got) != src {
		t.Fatalf("a malformed file was changed")
	}
}

// Claude Code rewrites ~/.claude.json while it runs: a key (and a server)
// it adds between our read and our write must survive, and the new server
// is wrapped too.
func TestChangedBetweenReadAndWrite(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	o.beforeWrite = func(real string) {
		b := mustRead(t, real)
		b = bytes.Replace(b, []byte("  }\n}\n"), []byte("  },\n  \"newKey\": true\n}\n"), 1)
		b = bytes.Replace(b, []byte(`"mcpServers": {`), []byte(`"mcpServers": {"late": {"command": "late-server"},`), 1)
		os.WriteFile(real, b, 0o600)
	}
	rs := mustInstall(t, cursor, o)
	got := string(mustRead(t, path))
	for _, want := range []string{`"newKey": true`, `"late": {"command": "` + testExe + `", "args": [ "run", "--name", "late", "--", "late-server" ]}`, `"--name", "fs"`} {
		if !strings.Contains(got, want) {
			t.Errorf("lost %s:\n%s", want, got)
		}
	}
	if n := rs[0].Count(Wrapped); n != 2 {
		t.Errorf("reported %d wrapped, want 2: %+v", n, rs[0].Entries)
	}
}

// The same when the host writes while ours is being written (after the
// re-read, before the rename): the edit is redone on what it wrote.
func TestChangedBeforeRename(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	once := false
	o.beforeRename = func(real string) {
		if once {
			return
		}
		once = true
		b := mustRead(t, real)
		b = bytes.Replace(b, []byte("  }\n}\n"), []byte("  },\n  \"newKey\": true\n}\n"), 1)
		os.WriteFile(real, b, 0o600)
	}
	mustInstall(t, cursor, o)
	got := string(mustRead(t, path))
	for _, want := range []string{`"newKey": true`, `"--name", "fs"`} {
		if !strings.Contains(got, want) {
			t.Errorf("lost %s:\n%s", want, got)
		}
	}
	if !once {
		t.Fatal("the hook never ran")
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	var out bytes.Buffer
	o.DryRun, o.Out = true, &out
	rs, err := Install(cursor, o)
	if err != nil || rs[0].Err != nil || !rs[0].Changed {
		t.Fatalf("got %+v, %v", rs, err)
	}
	want := "--- " + path + "\n+++ " + path + "\n@@ -1,8 +1,8 @@\n {\n   \"mcpServers\": {\n     \"fs\": {\n-      \"command\": \"npx\",\n-      \"args\": [\"-y\", \"pkg\"]\n+      \"command\": \"" + testExe + "\",\n+      \"args\": [\"run\", \"--name\", \"fs\", \"--\", \"npx\", \"-y\", \"pkg\"]\n     }\n   }\n }\n"
	if out.String() != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", out.String(), want)
	}
	if got := mustRead(t, path); string(got) != cursorSrc {
		t.Fatal("dry run wrote the file")
	}
	if _, err := os.Stat(path + BackupSuffix); !os.IsNotExist(err) {
		t.Fatal("dry run wrote a backup")
	}
}

// TestTemporaryExe: a binary in a temporary place writes the bare name,
// and says why, when PATH finds that very binary under it.
func TestTemporaryExe(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	tmp := t.TempDir()
	var out bytes.Buffer
	o.Exe, o.TempDirs, o.Out = filepath.Join(tmp, "go-build123", "exe", "supervisor"), []string{tmp}, &out
	writeExe(t, o.Exe)
	withPath(&o, filepath.Dir(o.Exe))
	mustInstall(t, cursor, o)
	if got := mustRead(t, path); !bytes.Contains(got, []byte(`"command": "supervisor"`)) {
		t.Fatalf("got:\n%s\nwant the bare name", got)
	}
	if !strings.Contains(out.String(), "temporary location") {
		t.Fatalf("no note saying why: %q", out.String())
	}
}

func writeExe(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// withPath gives o's environment PATH=path.
func withPath(o *Options, path string) {
	e := *o.Env
	get := e.Getenv
	e.Getenv = func(k string) string {
		if k == "PATH" {
			return path
		}
		return get(k)
	}
	o.Env = &e
}

// TestBareCommandChecked: Install refuses to write the bare name when PATH
// would not find this binary under it, writes nothing, and says so; Force
// writes with a warning.
func TestBareCommandChecked(t *testing.T) {
	other := filepath.Join(t.TempDir(), "supervisor")
	writeExe(t, other)
	for _, tc := range []struct {
		name    string
		path    func(exeDir string) string
		force   bool
		wantErr string // "" : written
		warn    bool
	}{
		{"not on PATH", func(string) string { return "/nonexistent" }, false, `no "supervisor" is on PATH`, false},
		{"empty PATH", func(string) string { return "" }, false, `no "supervisor" is on PATH`, false},
		{"another supervisor first", func(d string) string { return filepath.Dir(other) + string(os.PathListSeparator) + d }, false,
			`"supervisor" on PATH is ` + other + `, not this binary`, false},
		{"not on PATH, forced", func(string) string { return "/nonexistent" }, true, "", true},
		{"this binary on PATH", func(d string) string { return "/nonexistent" + string(os.PathListSeparator) + d }, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
			tmp := t.TempDir()
			var out, warn bytes.Buffer
			o.Exe, o.TempDirs, o.Out, o.Warn, o.Force = filepath.Join(tmp, "exe", "supervisor"), []string{tmp}, &out, &warn, tc.force
			writeExe(t, o.Exe)
			withPath(&o, tc.path(filepath.Dir(o.Exe)))
			rs, err := Install(cursor, o)
			if tc.wantErr != "" {
				var be *BareCommandError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrBareNotThisBinary) || !errors.As(err, &be) ||
					!strings.Contains(be.Fix(), "go install ./cmd/supervisor") || !strings.Contains(be.Fix(), "--force") {
					t.Fatalf("err %v, want a *BareCommandError saying %q", err, tc.wantErr)
				}
				if got := mustRead(t, path); string(got) != cursorSrc {
					t.Fatalf("the refused install changed the file:\n%s", got)
				}
				if _, err := os.Stat(path + BackupSuffix); !os.IsNotExist(err) {
					t.Fatal("the refused install wrote a backup")
				}
				return
			}
			if err != nil || len(rs) == 0 || !rs[0].Changed || rs[0].Command != BareName {
				t.Fatalf("install: %v, %+v; want the file wrapped in the bare name", err, rs)
			}
			if got := strings.Contains(warn.String(), "warning: ") && strings.Contains(warn.String(), "--force"); got != tc.warn {
				t.Fatalf("warning %q, want one: %v", warn.String(), tc.warn)
			}
		})
	}
}

// TestUnresolvable: Status's wrapped entries whose wrapper command a host
// could not start.
func TestUnresolvable(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "bin", "supervisor")
	writeExe(t, good)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o644)
	r := Result{Entries: []Entry{
		{Name: "a", Action: IsWrapped, Command: "supervisor"},
		{Name: "b", Action: IsWrapped, Command: "supervisor"},
		{Name: "c", Action: IsWrapped, Command: good},
		{Name: "d", Action: IsWrapped, Command: filepath.Join(dir, "gone", "supervisor")},
		{Name: "e", Action: IsWrapped, Command: plain},
		{Name: "f", Action: IsWrapped, Command: "./supervisor"},
		{Name: "g", Action: IsUnwrapped},
	}}
	got := Unresolvable(r, "/nonexistent")
	want := []CommandIssue{
		{Command: filepath.Join(dir, "gone", "supervisor"), Problem: filepath.Join(dir, "gone", "supervisor") + " does not exist", Servers: []string{"d"}},
		{Command: plain, Problem: plain + " is not executable", Servers: []string{"e"}},
		{Command: "supervisor", Problem: `"supervisor" is not on PATH`, Servers: []string{"a", "b"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got := Unresolvable(r, filepath.Dir(good)); len(got) != 2 {
		t.Fatalf("with the binary on PATH: %+v, want only d and e", got)
	}
}

func TestMovedBinaryRepinned(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	o.Exe = "/old/supervisor"
	mustInstall(t, cursor, o)
	o.Exe = testExe
	rs := mustInstall(t, cursor, o)
	if rs[0].Count(Repinned) != 1 {
		t.Fatalf("entries %+v, want one repinned", rs[0].Entries)
	}
	want := strings.Replace(cursorSrc, `"command": "npx",
      "args": ["-y", "pkg"]`, `"command": "`+testExe+`",
      "args": ["run", "--name", "fs", "--", "npx", "-y", "pkg"]`, 1)
	if got := mustRead(t, path); string(got) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	mustUninstall(t, cursor, o)
	if got := mustRead(t, path); string(got) != cursorSrc {
		t.Fatalf("uninstall:\n%s", got)
	}
}

func TestStatus(t *testing.T) {
	o, _ := placeFile(t, "claude-code", false, mustRead(t, "testdata/claude-code/original.json"))
	hs, _ := Lookup([]string{"claude-code"})
	rs, err := Status(hs, o)
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if !r.Exists || r.Count(IsWrapped) != 2 || r.Count(IsUnwrapped) != 3 || r.Count(Remote) != 1 {
		t.Fatalf("status %+v", r)
	}
}

func TestUnifiedDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20"
	b := "1\n2\n3\nfour\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\ntwenty\n"
	want := `--- a
+++ b
@@ -1,7 +1,7 @@
 1
 2
 3
-4
+four
 5
 6
 7
@@ -17,4 +17,4 @@
 17
 18
 19
-20
\ No newline at end of file
+twenty
`
	if got := UnifiedDiff("a", "b", []byte(a), []byte(b)); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := UnifiedDiff("a", "b", nil, []byte("x\n")); got != "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n" {
		t.Fatalf("new file: %q", got)
	}
}

// TestInstallShare: --share NAME wraps that server with `run --share`, and
// re-wraps one that was wrapped without it; others are left as they are.
func TestInstallShare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  []string // Share of a first install (nil: none)
		action Action
	}{
		{"fresh", nil, Wrapped},
		{"wrapped before", []string{}, Shared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
			if tc.first != nil {
				o.Share = tc.first
				mustInstall(t, cursor, o)
			}
			o.Share = []string{"fs", "absent"}
			rs := mustInstall(t, cursor, o)
			got := string(mustRead(t, path))
			if !strings.Contains(got, `"run", "--share", "--name", "fs", "--"`) {
				t.Errorf("fs not wrapped shared:\n%s", got)
			}
			if n := rs[0].Count(tc.action); n != 1 {
				t.Errorf("reported %d %s, want 1: %+v", n, tc.action, rs[0].Entries)
			}
			// Installing again changes nothing.
			rs = mustInstall(t, cursor, o)
			if n := rs[0].Count(Already); n != 1 || string(mustRead(t, path)) != got {
				t.Errorf("a second install changed the file or reported %+v", rs[0].Entries)
			}
		})
	}
}

// install --lazy wraps a server lazy, and keeps --share on one wrapped
// shared before (and the other way round): flags accumulate.
func TestInstallLazy(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	o.Share = []string{"fs"}
	mustInstall(t, cursor, o)
	// A flag added by hand survives the next install.
	src := strings.Replace(string(mustRead(t, path)), `"run", "--share", "--name", "fs"`, `"run", "--share", "--idle", "5m", "--name", "fs"`, 1)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	o.Share, o.Lazy = nil, []string{"fs"}
	rs := mustInstall(t, cursor, o)
	got := string(mustRead(t, path))
	if !strings.Contains(got, `"run", "--lazy", "--share", "--idle", "5m", "--name", "fs", "--"`) {
		t.Errorf("fs not wrapped shared and lazy with its own --idle:\n%s", got)
	}
	if n := rs[0].Count(Lazy); n != 1 {
		t.Errorf("reported %d lazy, want 1: %+v", n, rs[0].Entries)
	}
	o.Lazy = nil
	rs = mustInstall(t, cursor, o)
	if n := rs[0].Count(Already); n < 1 || string(mustRead(t, path)) != got {
		t.Errorf("a plain install changed the flags or reported %+v", rs[0].Entries)
	}
}

// install --sandbox wraps a server sandboxed, beside flags it had.
func TestInstallSandbox(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	o.Lazy = []string{"fs"}
	mustInstall(t, cursor, o)
	o.Lazy, o.Sandbox = nil, []string{"fs"}
	rs := mustInstall(t, cursor, o)
	got := string(mustRead(t, path))
	if !strings.Contains(got, `"run", "--sandbox", "--lazy", "--name", "fs", "--"`) {
		t.Errorf("fs not wrapped sandboxed, and lazy as before:\n%s", got)
	}
	if n := rs[0].Count(Sandboxed); n != 1 {
		t.Errorf("reported %d sandboxed, want 1: %+v", n, rs[0].Entries)
	}
	o.Sandbox = nil
	rs = mustInstall(t, cursor, o)
	if n := rs[0].Count(Already); n < 1 || string(mustRead(t, path)) != got {
		t.Errorf("a plain install changed the flags or reported %+v", rs[0].Entries)
	}
}

// Where the lean run entry is installed beside this binary, servers are
// wrapped in it (its arguments are run's, without "run"), but for shared
// ones that are not lazy, which keep `supervisor run`; uninstall restores
// the original from either form.
func TestInstallLeanEntry(t *testing.T) {
	o, path := placeFile(t, "cursor", false, []byte(cursorSrc))
	dir := t.TempDir()
	o.Exe = filepath.Join(dir, "supervisor")
	o.TempDirs = []string{"/nonexistent-temp"}
	o.leanFast = func() bool { return true } // whatever this kernel is
	o.Share = []string{"fs"}
	mustInstall(t, cursor, o) // no lean entry yet: supervisor run --share
	if got := string(mustRead(t, path)); !strings.Contains(got, `"args": ["run", "--share", "--name", "fs", "--", "npx", "-y", "pkg"]`) {
		t.Fatalf("without the lean entry:\n%s", got)
	}
	if err := os.WriteFile(filepath.Join(dir, LeanName), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Shared, it stays on supervisor run: a broker's client is run's.
	o.Share = nil
	if rs := mustInstall(t, cursor, o); rs[0].Count(Already) != 1 {
		t.Fatalf("a shared entry: %+v, want it left as it is", rs[0].Entries)
	}
	mustUninstall(t, cursor, o)
	rs := mustInstall(t, cursor, o) // plain: the lean entry
	if rs[0].Count(Wrapped) != 1 {
		t.Fatalf("entries %+v, want one wrapped", rs[0].Entries)
	}
	want := strings.Replace(cursorSrc, `"command": "npx",
      "args": ["-y", "pkg"]`, `"command": "`+filepath.Join(dir, LeanName)+`",
      "args": ["--name", "fs", "--", "npx", "-y", "pkg"]`, 1)
	if got := mustRead(t, path); string(got) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	st, err := Status([]Host{cursor[0]}, o)
	if err != nil || st[0].Count(IsWrapped) != 1 {
		t.Fatalf("status %+v (%v), want fs wrapped", st, err)
	}
	if rs := mustInstall(t, cursor, o); rs[0].Count(Already) != 1 || string(mustRead(t, path)) != want {
		t.Fatalf("a second install changed the file or reported %+v", rs[0].Entries)
	}
	// Made lazy, it stays on the lean entry (which answers its host from
	// the cache itself), its flags kept.
	o.Lazy = []string{"fs"}
	if rs := mustInstall(t, cursor, o); rs[0].Count(Lazy) != 1 || !strings.Contains(string(mustRead(t, path)), `"command": "`+filepath.Join(dir, LeanName)+`",
      "args": ["--lazy", "--name", "fs", "--"`) {
		t.Fatalf("made lazy: %+v\n%s", rs[0].Entries, mustRead(t, path))
	}
	mustUninstall(t, cursor, o)
	if got := mustRead(t, path); string(got) != cursorSrc {
		t.Fatalf("uninstall:\n%s", got)
	}
	// Wrapped in supervisor run before the lean entry was installed:
	// repinned to it by the next install.
	o.Lazy = nil
	lean := filepath.Join(dir, LeanName)
	if err := os.Rename(lean, lean+".away"); err != nil {
		t.Fatal(err)
	}
	mustInstall(t, cursor, o)
	if err := os.Rename(lean+".away", lean); err != nil {
		t.Fatal(err)
	}
	if rs := mustInstall(t, cursor, o); rs[0].Count(Repinned) != 1 || string(mustRead(t, path)) != want {
		t.Fatalf("repin to the lean entry: %+v\n%s", rs[0].Entries, mustRead(t, path))
	}
}
