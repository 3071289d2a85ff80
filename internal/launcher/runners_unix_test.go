//go:build unix

package launcher

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pnpm dlx's cache key, checked against the directory pnpm 12.4.2 made for
// `pnpm dlx @modelcontextprotocol/server-filesystem@2026.8.31`.
func TestPnpmDlxKey(t *testing.T) {
	if got := pnpmDlxKey("@modelcontextprotocol/server-filesystem@2026.8.31"); got != "1b7a73a9e603677242a04eb7606deffd" {
		t.Fatalf("key %s, want pnpm's 1b7a73a9e603677242a04eb7606deffd", got)
	}
}

// runnerOn puts executables named names in a directory of its own (a
// native program's first bytes, or a shell script's) and returns a PATH=
// entry for it. A later name is a link to the first.
func runnerOn(t *testing.T, native bool, names ...string) string {
	t.Helper()
	d := t.TempDir()
	content := "#!/bin/sh\n"
	if native {
		content = "\x7fELF"
	}
	write(t, filepath.Join(d, names[0]), content)
	for _, n := range names[1:] {
		if err := os.Symlink(names[0], filepath.Join(d, n)); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + d
}

// pnpmInstall lays out pnpm's dlx install of spec under home's cache, as
// pnpm does (dlx/<key>/pkg → a directory of its own), with manifest for
// the package and bins linked, its link made age ago.
func pnpmInstall(t *testing.T, home, spec, manifest string, bins []string, age time.Duration) string {
	t.Helper()
	key := filepath.Join(home, ".cache", "pnpm", "dlx", pnpmDlxKey(spec))
	install := filepath.Join(key, "mwxgly07-62e")
	name, _, _ := splitSpec(spec)
	write(t, filepath.Join(install, "node_modules", name, "package.json"), manifest)
	for _, b := range bins {
		write(t, filepath.Join(install, "node_modules", ".bin", b), "#!/bin/sh\n")
	}
	link := filepath.Join(key, "pkg")
	if err := os.Symlink("mwxgly07-62e", link); err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(-age)
	if err := unix.Lutimes(link, []unix.Timeval{unix.NsecToTimeval(when.UnixNano()), unix.NsecToTimeval(when.UnixNano())}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(install, "node_modules", ".bin")
}

func TestFlattenPnpmDlx(t *testing.T) {
	home := t.TempDir()
	bins := pnpmInstall(t, home, "srv@1.2.3", `{"name":"srv","version":"1.2.3","bin":{"srv":"cli.js"}}`, []string{"srv"}, time.Hour)
	pnpmInstall(t, home, "@s/two", `{"name":"@s/two","version":"2.0.0","bin":{"x":"x.js","two":"two.js"}}`, []string{"x", "two"}, time.Minute)
	pnpmInstall(t, home, "many", `{"name":"many","version":"1.0.0","bin":{"a":"a.js","b":"b.js"}}`, []string{"a", "b"}, time.Minute)
	pnpmInstall(t, home, "old@1.0.0", `{"name":"old","version":"1.0.0","bin":"o.js"}`, []string{"old"}, 25*time.Hour)
	pnpmInstall(t, home, "other@1.0.0", `{"name":"other","version":"1.0.1","bin":"o.js"}`, []string{"other"}, time.Minute)
	path := runnerOn(t, true, "pnpm", "pnpx")
	for _, tc := range []struct {
		name string
		argv []string
		want string // the bin run, or what the why says
		ok   bool
	}{
		{"pnpm dlx", []string{"pnpm", "dlx", "srv@1.2.3", "--flag", "x"}, filepath.Join(bins, "srv"), true},
		{"pnpx, silent", []string{"pnpx", "-s", "srv@1.2.3", "--flag", "x"}, filepath.Join(bins, "srv"), true},
		{"the bin named after a scoped package", []string{"pnpm", "dlx", "@s/two"}, "two", true},
		{"another spec is another install", []string{"pnpm", "dlx", "srv"}, "not in pnpm's dlx cache", false},
		{"several bins, none its name", []string{"pnpm", "dlx", "many"}, "cannot choose", false},
		{"past the max age", []string{"pnpm", "dlx", "old@1.0.0"}, "dlx-cache-max-age", false},
		{"another version installed", []string{"pnpm", "dlx", "other@1.0.0"}, "does not hold other@1.0.0", false},
		{"a range", []string{"pnpm", "dlx", "srv@^1"}, "not a package name", false},
		{"a flag it does not know", []string{"pnpm", "dlx", "--package", "srv@1.2.3", "srv"}, `"--package"`, false},
		{"no command", []string{"pnpm", "dlx", "-s"}, "no command", false},
		{"installed in another version", []string{"pnpm", "dlx", "other@1.0.0"}, "does not hold other@1.0.0", false},
		{"pnpm exec is no runner of packages", []string{"pnpm", "exec", "srv"}, NotARunner, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok, why := Flatten(tc.argv, t.TempDir(), []string{"HOME=" + home, path})
			switch {
			case ok != tc.ok:
				t.Fatalf("Flatten = %+v, %v, %q; want ok %v", r, ok, why, tc.ok)
			case ok && (!strings.HasSuffix(r.Argv[0], tc.want) || !strings.HasPrefix(r.Via, "pnpm dlx: ")):
				t.Fatalf("ran %q (%s), want %s", r.Argv, r.Via, tc.want)
			case ok && getenv(r.Env, "PATH") != filepath.Dir(r.Argv[0])+":"+strings.TrimPrefix(path, "PATH="):
				t.Fatalf("PATH %q, want the install's bins first", getenv(r.Env, "PATH"))
			case !ok && !strings.Contains(why, tc.want):
				t.Fatalf("why %q, want it to say %q", why, tc.want)
			}
			if tc.name == "pnpm dlx" && strings.Join(r.Argv[1:], " ") != "--flag x" {
				t.Errorf("args %q, want the server's own", r.Argv[1:])
			}
		})
	}
	if _, ok, why := Flatten([]string{"pnpm", "dlx", "srv@1.2.3"}, t.TempDir(), []string{"HOME=" + home, "PATH=/nonexistent"}); ok || !strings.Contains(why, "not on the command's PATH") {
		t.Errorf("with no pnpm on PATH: %v, %q; want it left to fail as it would", ok, why)
	}
	// In a pnpm workspace, the root's bins come after the install's.
	ws := t.TempDir()
	write(t, filepath.Join(ws, "pnpm-workspace.yaml"), "packages:\n  - pkgs/*\n")
	sub := filepath.Join(ws, "pkgs", "a")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	r, ok, why := Flatten([]string{"pnpm", "dlx", "srv@1.2.3"}, sub, []string{"HOME=" + home, path})
	if want := bins + ":" + filepath.Join(ws, "node_modules", ".bin") + ":"; !ok || !strings.HasPrefix(getenv(r.Env, "PATH"), want) {
		t.Errorf("in a workspace: %+v, %v, %q; want PATH to start %s", r, ok, why, want)
	}
	if _, ok, why := Flatten([]string{"pnpm", "dlx", "srv@1.2.3"}, sub, []string{"HOME=" + home, path, "XDG_CACHE_HOME=rel"}); ok || !strings.Contains(why, "relative XDG_CACHE_HOME") {
		t.Errorf("with a relative XDG_CACHE_HOME: %v, %q; want it left to pnpm", ok, why)
	}
}

// Settings that change pnpm dlx's cache key or directory leave it to pnpm.
func TestFlattenLeavesPnpmSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		file [2]string // file (relative to the project, or "~/" for home) and content
	}{
		{"a registry in the environment", []string{"npm_config_registry=https://example.com/"}, [2]string{}},
		{"a pnpm setting in the environment", []string{"PNPM_CONFIG_CACHE_DIR=/elsewhere"}, [2]string{}},
		{"another user config", []string{"npm_config_userconfig=/elsewhere/npmrc"}, [2]string{}},
		{"a scope's registry in the user's npmrc", nil, [2]string{"~/.npmrc", "@s:registry=https://example.com/\n"}},
		{"the max age in pnpm's global config", nil, [2]string{"~/.config/pnpm/config.yaml", "dlxCacheMaxAge: 0\n"}},
		{"registries in the workspace", nil, [2]string{"pnpm-workspace.yaml", "registries:\n  default: https://example.com/\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			proj := t.TempDir()
			pnpmInstall(t, home, "srv@1.2.3", `{"name":"srv","version":"1.2.3","bin":"cli.js"}`, []string{"srv"}, time.Minute)
			writeSetting(t, home, proj, tc.file)
			env := append([]string{"HOME=" + home, runnerOn(t, true, "pnpm")}, tc.env...)
			if r, ok, why := Flatten([]string{"pnpm", "dlx", "srv@1.2.3"}, proj, env); ok || !strings.Contains(why, "pnpm setting") {
				t.Errorf("Flatten = %+v, %v, %q; want it left to pnpm, naming the setting", r, ok, why)
			}
		})
	}
}

// bunxInstall lays out bunx's install of name@tag in home's bun cache, as
// bun 1.4 does, its package.json written age ago.
func bunxInstall(t *testing.T, home, name, tag, manifest string, bins []string, age time.Duration) string {
	t.Helper()
	install := filepath.Join(home, ".bun", "install", "cache", ".bunx-"+strconv.Itoa(os.Getuid()), name+"@"+tag)
	write(t, filepath.Join(install, "node_modules", name, "package.json"), manifest)
	for _, b := range bins {
		write(t, filepath.Join(install, "node_modules", ".bin", b), "#!/bin/sh\n")
	}
	pj := filepath.Join(install, "package.json")
	write(t, pj, `{"dependencies":{}}`)
	when := time.Now().Add(-age)
	if err := os.Chtimes(pj, when, when); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(install, "node_modules", ".bin")
}

func TestFlattenBunx(t *testing.T) {
	home := t.TempDir()
	bins := bunxInstall(t, home, "@s/srv", "1.2.3", `{"name":"@s/srv","version":"1.2.3","bin":{"srv":"cli.js"}}`, []string{"srv"}, time.Hour)
	bunxInstall(t, home, "odd", "1.0.0", `{"name":"odd","version":"1.0.0","bin":{"first":"a.js","second":"b.js"}}`, []string{"first", "second"}, time.Minute)
	bunxInstall(t, home, "fresh", "latest", `{"name":"fresh","version":"3.0.0","bin":"f.js"}`, []string{"fresh"}, time.Minute)
	bunxInstall(t, home, "@s/srv", "latest", `{"name":"@s/srv","version":"1.2.4","bin":{"srv":"cli.js"}}`, []string{"srv"}, time.Hour)
	bunxInstall(t, home, "vee", "v1.0.0", `{"name":"vee","version":"1.0.0","bin":"v.js"}`, []string{"vee"}, time.Minute)
	bunxInstall(t, home, "stale", "1.0.0", `{"name":"stale","version":"1.0.0","bin":"s.js"}`, []string{"stale"}, 25*time.Hour)
	proj := t.TempDir()
	write(t, filepath.Join(proj, "node_modules", ".bin", "local"), "#!/bin/sh\n")
	path := runnerOn(t, true, "bun", "bunx", "node")
	write(t, filepath.Join(strings.TrimPrefix(path, "PATH="), "srv"), "#!/bin/sh\n") // not what `bunx @s/srv` runs
	for _, tc := range []struct {
		name string
		argv []string
		dir  string
		want string
		ok   bool
	}{
		{"bunx", []string{"bunx", "@s/srv@1.2.3", "--x"}, proj, filepath.Join(bins, "srv"), true},
		{"bun x", []string{"bun", "x", "--silent", "@s/srv@1.2.3"}, proj, filepath.Join(bins, "srv"), true},
		{"the first bin when none has its name", []string{"bunx", "odd@1.0.0"}, proj, "first", true},
		{"no version: latest", []string{"bunx", "fresh"}, proj, "fresh@latest/node_modules/.bin/fresh", true},
		{"no version: what PATH has first", []string{"bunx", "local"}, proj, filepath.Join(proj, "node_modules", ".bin", "local"), true},
		{"a scoped package without a version: its install, never a bin of its name on PATH", []string{"bunx", "@s/srv"}, proj, "@s/srv@latest/node_modules/.bin/srv", true},
		{"a version as written", []string{"bunx", "vee@v1.0.0"}, proj, "vee@v1.0.0/node_modules/.bin/vee", true},
		{"not the install of the version as written", []string{"bunx", "vee@1.0.0"}, proj, "not in bunx's cache", false},
		{"stale", []string{"bunx", "stale@1.0.0"}, proj, "past a day", false},
		{"not installed", []string{"bunx", "@s/srv@1.2.4"}, proj, "not in bunx's cache", false},
		{"a tag", []string{"bunx", "fresh@latest"}, proj, "not a package name", false},
		{"in bun's runtime", []string{"bunx", "--bun", "@s/srv@1.2.3"}, proj, `"--bun"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok, why := Flatten(tc.argv, tc.dir, []string{"HOME=" + home, path})
			switch {
			case ok != tc.ok:
				t.Fatalf("Flatten = %+v, %v, %q; want ok %v", r, ok, why, tc.ok)
			case ok && (!strings.HasSuffix(r.Argv[0], tc.want) || !strings.HasPrefix(r.Via, "bunx: ")):
				t.Fatalf("ran %q (%s), want %s", r.Argv, r.Via, tc.want)
			case ok && (!strings.HasPrefix(getenv(r.Env, "PATH"), filepath.Join(home, ".bun")) ||
				!strings.HasSuffix(getenv(r.Env, "PATH"), ":"+binsUp(tc.dir)+":"+strings.TrimPrefix(path, "PATH="))):
				t.Fatalf("PATH %q, want bunx's install's bins, then every node_modules/.bin from %s up, then the caller's", getenv(r.Env, "PATH"), tc.dir)
			case !ok && !strings.Contains(why, tc.want):
				t.Fatalf("why %q, want it to say %q", why, tc.want)
			}
		})
	}
	// What would make bun run it otherwise: its settings, a .env it
	// loads, a bunx that is not bun's.
	for _, f := range []string{"bunfig.toml", ".env"} {
		dir := t.TempDir()
		write(t, filepath.Join(dir, f), "")
		if _, ok, why := Flatten([]string{"bunx", "@s/srv@1.2.3"}, dir, []string{"HOME=" + home, path}); ok || !strings.Contains(why, f) {
			t.Errorf("with %s: %v, %q; want it left to bun, naming the file", f, ok, why)
		}
	}
	if _, ok, why := Flatten([]string{"bunx", "@s/srv@1.2.3"}, proj, []string{"HOME=" + home, runnerOn(t, false, "bunx")}); ok || !strings.Contains(why, "not bun's own") {
		t.Errorf("a wrapper bunx: %v, %q; want it left to run", ok, why)
	}
	// Without node, bunx runs the bin under bun; BUN_OPTIONS may ask it to.
	if _, ok, why := Flatten([]string{"bunx", "@s/srv@1.2.3"}, proj, []string{"HOME=" + home, runnerOn(t, true, "bunx")}); ok || !strings.Contains(why, "node is not on") {
		t.Errorf("without node: %v, %q; want it left to bunx", ok, why)
	}
	if _, ok, why := Flatten([]string{"bunx", "@s/srv@1.2.3"}, proj, []string{"HOME=" + home, path, "BUN_OPTIONS=--bun"}); ok || !strings.Contains(why, "BUN_OPTIONS") {
		t.Errorf("with BUN_OPTIONS: %v, %q; want it left to bunx", ok, why)
	}
}

// binsUp is every node_modules/.bin from dir up to /, as a PATH.
func binsUp(dir string) string {
	var out []string
	for {
		out = append(out, filepath.Join(dir, "node_modules", ".bin"))
		if dir == "/" {
			return strings.Join(out, ":")
		}
		dir = filepath.Dir(dir)
	}
}
