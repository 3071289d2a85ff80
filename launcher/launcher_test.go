package launcher

import (
	"crypto/sha512"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// npxHash is npm's npx cache directory name for one package spec. Checked
// against node: crypto.createHash('sha512').update(spec).digest('hex').slice(0, 16).
func TestNpxCacheHash(t *testing.T) {
	sum := sha512.Sum512([]byte("@modelcontextprotocol/server-filesystem"))
	if got := hex.EncodeToString(sum[:])[:16]; got != "a3241bba59c344f5" {
		t.Fatalf("hash %s, want node's a3241bba59c344f5", got)
	}
}

func TestFlatten(t *testing.T) {
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	mods := filepath.Join(proj, "node_modules")
	home := filepath.Join(root, "home")
	write(t, filepath.Join(proj, "package.json"), `{"name":"proj","bin":{"own":"own.js"}}`)
	write(t, filepath.Join(mods, "foo", "package.json"), `{"name":"foo","version":"1.0.0","bin":{"foo":"cli.js"}}`)
	write(t, filepath.Join(mods, ".bin", "foo"), "#!/bin/sh\n")
	write(t, filepath.Join(mods, "@s", "pkg", "package.json"), `{"name":"@s/pkg","version":"2.0.0","bin":{"pkg-cli":"a.js"}}`)
	write(t, filepath.Join(mods, ".bin", "pkg-cli"), "#!/bin/sh\n")
	write(t, filepath.Join(mods, "str", "package.json"), `{"name":"str","version":"1.0.0","bin":"main.js"}`)
	write(t, filepath.Join(mods, ".bin", "str"), "#!/bin/sh\n")
	write(t, filepath.Join(mods, "many", "package.json"), `{"name":"many","version":"1.0.0","bin":{"a":"a.js","b":"b.js"}}`)
	write(t, filepath.Join(mods, ".bin", "a"), "#!/bin/sh\n")
	write(t, filepath.Join(mods, ".bin", "own"), "#!/bin/sh\n")
	sum := sha512.Sum512([]byte("cached"))
	install := filepath.Join(home, ".npm", "_npx", hex.EncodeToString(sum[:])[:16])
	write(t, filepath.Join(install, "node_modules", "cached", "package.json"), `{"name":"cached","version":"3.1.0","bin":{"cached":"c.js"}}`)
	write(t, filepath.Join(install, "node_modules", ".bin", "cached"), "#!/bin/sh\n")
	sub := filepath.Join(proj, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin"}

	for _, tt := range []struct {
		name string
		argv []string
		dir  string
		want string // the resolved program; "" for not flattened
		why  string // part of why not
	}{
		{"bin by name", []string{"npx", "foo", "x"}, proj, filepath.Join(mods, ".bin", "foo"), ""},
		{"bin by name from below", []string{"/usr/bin/npx", "-y", "foo"}, sub, filepath.Join(mods, ".bin", "foo"), ""},
		{"scoped package", []string{"npx", "-y", "@s/pkg", "a"}, proj, filepath.Join(mods, ".bin", "pkg-cli"), ""},
		{"exact version installed", []string{"npx", "@s/pkg@2.0.0"}, proj, filepath.Join(mods, ".bin", "pkg-cli"), ""},
		{"bin as a string", []string{"npm", "exec", "--", "str"}, proj, filepath.Join(mods, ".bin", "str"), ""},
		{"npm x", []string{"npm", "x", "--yes", "--", "@s/pkg"}, proj, filepath.Join(mods, ".bin", "pkg-cli"), ""},
		{"npx cache", []string{"npx", "-y", "cached", "--flag"}, root, filepath.Join(install, "node_modules", ".bin", "cached"), ""},
		{"other version", []string{"npx", "@s/pkg@3.0.0"}, proj, "", "npx would install it"},
		{"range", []string{"npx", "@s/pkg@^2"}, proj, "", "not a package name"},
		{"tag", []string{"npx", "foo@latest"}, proj, "", "not a package name"},
		{"path", []string{"npx", "./tool"}, proj, "", "not a package name"},
		{"not installed", []string{"npx", "-y", "nowhere"}, proj, "", "npx would install it"},
		{"several bins, none its name", []string{"npx", "many"}, proj, "", "npx would install it"},
		{"the project's own bin", []string{"npx", "own"}, proj, "", "bin of the project"},
		{"unknown flag", []string{"npx", "--package=foo", "foo"}, proj, "", "flag"},
		{"call", []string{"npx", "-c", "foo"}, proj, "", "flag"},
		{"no command", []string{"npx", "-y"}, proj, "", "no command"},
		{"npm install", []string{"npm", "install", "foo"}, proj, "", "not a package runner"},
		{"not a runner", []string{"node", "foo"}, proj, "", "not a package runner"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, ok, why := Flatten(tt.argv, tt.dir, env)
			if tt.want == "" {
				if ok || !strings.Contains(why, tt.why) {
					t.Fatalf("Flatten = %+v, %v, %q; want not flattened, %q", r, ok, why, tt.why)
				}
				return
			}
			if !ok || r.Argv[0] != tt.want {
				t.Fatalf("Flatten = %+v, %v, %q; want %s", r, ok, why, tt.want)
			}
			var path string
			for _, kv := range r.Env {
				if v, ok := strings.CutPrefix(kv, "PATH="); ok {
					path = v
				}
			}
			if !strings.HasSuffix(path, ":/usr/bin:/bin") || !strings.Contains(path, filepath.Join(proj, "node_modules", ".bin")) && tt.dir != root {
				t.Errorf("PATH %q: want npm's bin directories before the original", path)
			}
			if tt.name == "npx cache" && !strings.HasPrefix(path, filepath.Join(install, "node_modules", ".bin")+":") {
				t.Errorf("PATH %q: want the npx cache's bin first", path)
			}
		})
	}
}

func TestFlattenKeepsArgs(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "node_modules", ".bin", "tool"), "#!/bin/sh\n")
	r, ok, why := Flatten([]string{"npx", "--", "tool", "-y", "--", "x y"}, dir, []string{"PATH=/bin"})
	if !ok {
		t.Fatal(why)
	}
	if got := strings.Join(r.Argv[1:], "|"); got != "-y|--|x y" {
		t.Errorf("args %q, want the server's own, untouched", got)
	}
}
