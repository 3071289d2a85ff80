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

// writeSetting writes a settings file, {path, content}: a path starting
// "~/" is in home, any other in proj; none when the path is "".
func writeSetting(t *testing.T, home, proj string, file [2]string) {
	t.Helper()
	f := file[0]
	if f == "" {
		return
	}
	if rest, ok := strings.CutPrefix(f, "~/"); ok {
		f = filepath.Join(home, rest)
	} else {
		f = filepath.Join(proj, f)
	}
	write(t, f, file[1])
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
	// Several bins naming one file (npm normalises "./cli.js" to "cli.js"):
	// the first.
	write(t, filepath.Join(mods, "@s", "srv", "package.json"), `{"name":"@s/srv","version":"1.0.0","bin":{"x":"./cli.js","srv":"cli.js"}}`)
	write(t, filepath.Join(mods, ".bin", "x"), "#!/bin/sh\n")
	write(t, filepath.Join(mods, ".bin", "srv"), "#!/bin/sh\n")
	write(t, filepath.Join(mods, ".package-lock.json"), `{"packages":{"node_modules/foo":{},"node_modules/foo/node_modules/nest":{}}}`)
	// A workspace: npx runs it from the root's tree.
	write(t, filepath.Join(root, "ws", "package.json"), `{"name":"ws","workspaces":["pkgs/*"]}`)
	write(t, filepath.Join(root, "ws", "pkgs", "a", "package.json"), `{"name":"a"}`)
	write(t, filepath.Join(root, "ws", "pkgs", "a", "node_modules", ".bin", "foo"), "#!/bin/sh\n")
	// A bin beside a symlink's logical parent, not its physical one.
	write(t, filepath.Join(root, "real", "proj", "package.json"), `{"name":"p"}`)
	write(t, filepath.Join(root, "linkparent", "node_modules", ".bin", "baz"), "#!/bin/sh\n")
	if err := os.Symlink(filepath.Join(root, "real", "proj"), filepath.Join(root, "linkparent", "proj")); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(proj, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	npmPrefix := fakeNpm(t)
	write(t, filepath.Join(npmPrefix, "bin", "gbin"), "#!/bin/sh\n")
	write(t, filepath.Join(npmPrefix, "lib", "node_modules", "gcached", "package.json"), `{"name":"gcached","version":"1.0.0","bin":{"gcached":"g.js"}}`)
	gsum := sha512.Sum512([]byte("gcached"))
	ginstall := filepath.Join(home, ".npm", "_npx", hex.EncodeToString(gsum[:])[:16])
	write(t, filepath.Join(ginstall, "node_modules", "gcached", "package.json"), `{"name":"gcached","version":"1.0.0","bin":{"gcached":"g.js"}}`)
	write(t, filepath.Join(ginstall, "node_modules", ".bin", "gcached"), "#!/bin/sh\n")
	env := []string{"HOME=" + home, "PATH=" + filepath.Join(npmPrefix, "bin") + ":/usr/bin:/bin"}

	for _, tt := range []struct {
		name string
		argv []string
		dir  string
		want string // the resolved program; "" for not flattened
		why  string // part of why not
	}{
		{"bin by name", []string{"npx", "foo", "x"}, proj, filepath.Join(mods, ".bin", "foo"), ""},
		{"bin by name from below", []string{filepath.Join(npmPrefix, "bin", "npx"), "-y", "foo"}, sub, filepath.Join(mods, ".bin", "foo"), ""},
		{"scoped package", []string{"npx", "-y", "@s/pkg", "a"}, proj, filepath.Join(mods, ".bin", "pkg-cli"), ""},
		{"exact version installed", []string{"npx", "@s/pkg@2.0.0"}, proj, filepath.Join(mods, ".bin", "pkg-cli"), ""},
		{"bin as a string", []string{"npm", "exec", "--", "str"}, proj, filepath.Join(mods, ".bin", "str"), ""},
		{"npm x", []string{"npm", "x", "--yes", "--", "@s/pkg"}, proj, filepath.Join(mods, ".bin", "pkg-cli"), ""},
		{"npx cache", []string{"npx", "-y", "cached", "--flag"}, root, filepath.Join(install, "node_modules", ".bin", "cached"), ""},
		{"other version", []string{"npx", "@s/pkg@3.0.0"}, proj, "", "not the version asked for"},
		{"range", []string{"npx", "@s/pkg@^2"}, proj, "", "not a package name"},
		{"tag", []string{"npx", "foo@latest"}, proj, "", "not a package name"},
		{"path", []string{"npx", "./tool"}, proj, "", "not a package name"},
		{"not installed", []string{"npx", "-y", "nowhere"}, proj, "", "npx would install it"},
		{"several bins, none its name", []string{"npx", "many"}, proj, "", "has no bin linked"},
		{"several bins of one file", []string{"npx", "@s/srv"}, proj, filepath.Join(mods, ".bin", "x"), ""},
		{"npm exec reads a flag after the package", []string{"npm", "exec", "foo", "a", "--flag"}, proj, "", "unless a -- comes before"},
		{"npm exec after --", []string{"npm", "exec", "--", "foo", "--x"}, proj, filepath.Join(mods, ".bin", "foo"), ""},
		{"global bin", []string{"npx", "gbin"}, proj, "", "installed globally"},
		{"global package before the cache", []string{"npx", "-y", "gcached"}, root, "", "installed globally"},
		{"nested only", []string{"npx", "nest"}, proj, "", "nested dependency"},
		{"workspace", []string{"npx", "foo"}, filepath.Join(root, "ws", "pkgs", "a"), "", "workspace"},
		{"through a symlinked directory", []string{"npx", "baz"}, filepath.Join(root, "linkparent", "proj"), "", "npx would install it"},
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
			if !strings.HasSuffix(path, "node-gyp-bin:"+filepath.Join(npmPrefix, "bin")+":/usr/bin:/bin") || !strings.Contains(path, filepath.Join(proj, "node_modules", ".bin")) && tt.dir != root {
				t.Errorf("PATH %q: want npm's bin directories before the original", path)
			}
			if tt.name == "npx cache" && !strings.HasPrefix(path, filepath.Join(install, "node_modules", ".bin")+":") {
				t.Errorf("PATH %q: want the npx cache's bin first", path)
			}
			if tt.name == "bin by name from below" && !strings.HasPrefix(path, filepath.Join(mods, ".bin")+":"+filepath.Join(mods, ".bin")+":"+filepath.Join(root, "node_modules", ".bin")) {
				t.Errorf("PATH %q: want the directory the bin was found in first", path)
			}
		})
	}
}

// An absolute npm_config_cache is where npx's cache is looked for.
func TestFlattenCacheFromEnv(t *testing.T) {
	cache := t.TempDir()
	sum := sha512.Sum512([]byte("cached"))
	install := filepath.Join(cache, "_npx", hex.EncodeToString(sum[:])[:16])
	write(t, filepath.Join(install, "node_modules", "cached", "package.json"), `{"name":"cached","version":"1.0.0","bin":"c.js"}`)
	write(t, filepath.Join(install, "node_modules", ".bin", "cached"), "#!/bin/sh\n")
	env := []string{"HOME=" + t.TempDir(), "npm_config_cache=" + cache, "PATH=" + filepath.Join(fakeNpm(t), "bin")}
	r, ok, why := Flatten([]string{"npx", "-y", "cached"}, t.TempDir(), env)
	if !ok || r.Argv[0] != filepath.Join(install, "node_modules", ".bin", "cached") {
		t.Fatalf("Flatten = %+v, %v, %q; want the cached bin", r, ok, why)
	}
}

func TestFlattenKeepsArgs(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "node_modules", ".bin", "tool"), "#!/bin/sh\n")
	r, ok, why := Flatten([]string{"npx", "--", "tool", "-y", "--", "x y"}, dir, []string{"PATH=" + filepath.Join(fakeNpm(t), "bin")})
	if !ok {
		t.Fatal(why)
	}
	if got := strings.Join(r.Argv[1:], "|"); got != "-y|--|x y" {
		t.Errorf("args %q, want the server's own, untouched", got)
	}
}

// fakeNpm installs an npm of its own, as npm installs itself (prefix/bin/npx
// → the npm package's bin/npx-cli.js), and returns its prefix.
func fakeNpm(t *testing.T) string {
	t.Helper()
	prefix := t.TempDir()
	root := filepath.Join(prefix, "lib", "node_modules", "npm")
	write(t, filepath.Join(root, "package.json"), `{"name":"npm","version":"11.19.1"}`)
	if err := os.MkdirAll(filepath.Join(prefix, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"npx", "npm"} {
		write(t, filepath.Join(root, "bin", b+"-cli.js"), "")
		if err := os.Symlink(filepath.Join("..", "lib", "node_modules", "npm", "bin", b+"-cli.js"), filepath.Join(prefix, "bin", b)); err != nil {
			t.Fatal(err)
		}
	}
	return prefix
}

// Settings that change what npx runs, or how, leave it to npm.
func TestFlattenLeavesNpmSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   []string
		npmrc [2]string // file (relative to the project, or "~/" for home) and content
	}{
		{"cache in the user's npmrc", nil, [2]string{"~/.npmrc", "cache=/elsewhere\n"}},
		{"node-options in the project's npmrc", nil, [2]string{".npmrc", "node-options=--max-old-space-size=123\n"}},
		{"package in the environment", []string{"npm_config_package=other"}, [2]string{}},
		{"call in the environment", []string{"NPM_CONFIG_CALL=x"}, [2]string{}},
		{"a relative cache in the environment", []string{"npm_config_cache=rel/dir"}, [2]string{}},
		{"a global prefix", []string{"PREFIX=/opt"}, [2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proj := t.TempDir()
			home := t.TempDir()
			write(t, filepath.Join(proj, "node_modules", ".bin", "tool"), "#!/bin/sh\n")
			writeSetting(t, home, proj, tc.npmrc)
			env := append([]string{"HOME=" + home, "PATH=" + filepath.Join(fakeNpm(t), "bin")}, tc.env...)
			if r, ok, why := Flatten([]string{"npx", "tool"}, proj, env); ok || !strings.Contains(why, "npm setting") && !strings.Contains(why, "PREFIX") {
				t.Errorf("Flatten = %+v, %v, %q; want it left to npm, naming the setting", r, ok, why)
			}
		})
	}
}

// Only npm's own npx is imitated: a wrapper of that name is left to run.
func TestFlattenOnlyNpmsNpx(t *testing.T) {
	proj := t.TempDir()
	write(t, filepath.Join(proj, "node_modules", ".bin", "tool"), "#!/bin/sh\n")
	wrappers := t.TempDir()
	write(t, filepath.Join(wrappers, "npx"), "#!/bin/sh\nexec something-else \"$@\"\n")
	if r, ok, why := Flatten([]string{"npx", "tool"}, proj, []string{"PATH=" + wrappers}); ok || !strings.Contains(why, "not npm's own") {
		t.Errorf("Flatten = %+v, %v, %q; want a wrapper npx left to run", r, ok, why)
	}
}
