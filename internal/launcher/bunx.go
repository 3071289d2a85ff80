package launcher

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// bunxMaxAge is how long bunx trusts its install of a package: past it
// (by the install's package.json), bunx installs it again.
const bunxMaxAge = 24 * time.Hour

// bunEnvFiles are the .env files bun loads into a command's environment
// from its working directory; flattening would lose them.
var bunEnvFiles = []string{".env", ".env.local", ".env.development", ".env.development.local",
	".env.production", ".env.production.local", ".env.test", ".env.test.local"}

// bunxArgs recognises `bunx ...` and `bun x ...` and returns what follows
// the runner.
func bunxArgs(argv []string) ([]string, bool) {
	switch filepath.Base(argv[0]) {
	case "bunx":
		return argv[1:], true
	case "bun":
		if len(argv) > 1 && argv[1] == "x" {
			return argv[2:], true
		}
	}
	return nil, false
}

// flattenBunx resolves `bunx REST` to what bun 1.x would run: for a
// package named without a version, a bin of its name on bun's PATH (every
// node_modules/.bin from dir up, then PATH); else the bin in bunx's cache,
// <bun cache>/.bunx-<uid>/<name>@<version or "latest">, while that install
// is younger than a day.
func flattenBunx(runner string, rest []string, dir string, env []string) (r Resolved, ok bool, why string) {
	spec, args, why := parseBunx(rest)
	if why != "" {
		return r, false, why
	}
	exe, why := lookPath(runner, dir, env)
	if why != "" {
		return r, false, why
	}
	if real, err := filepath.EvalSymlinks(exe); err != nil || !isBun(real) {
		return r, false, fmt.Sprintf("%s is not bun's own: a wrapper bunx is left to run", exe)
	}
	name, version, ok := splitSpec(spec)
	if !ok {
		return r, false, fmt.Sprintf("%q is not a package name, with or without an exact version (bunx resolves ranges, tags, paths and URLs online)", spec)
	}
	if name == "tsc" || name == "typescript" {
		return r, false, "bunx runs tsc from typescript by a rule of its own"
	}
	// bun walks up from the process's working directory, the physical path.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if why := bunConfigSet(env, dir); why != "" {
		return r, false, why
	}
	cache, ok := bunCache(env)
	if !ok {
		return r, false, "bun's cache directory is unknown (no HOME, or a relative BUN_INSTALL or BUN_INSTALL_CACHE_DIR)"
	}
	// The install's directory is named after the version as written
	// ("pkg@v1.0.0" is not "pkg@1.0.0"'s).
	tag := "latest"
	if version != "" {
		tag = spec[strings.LastIndexByte(spec, '@')+1:]
	}
	install := filepath.Join(cache, ".bunx-"+strconv.Itoa(os.Getuid()), name+"@"+tag)
	modules := filepath.Join(install, "node_modules")
	// bun's PATH for the command: the install's bins, every
	// node_modules/.bin from dir up, then the caller's PATH.
	binDirs := append([]string{filepath.Join(modules, ".bin")}, walkUpBins(dir)...)
	binName := name[strings.LastIndexByte(name, '/')+1:]
	// Only an unscoped package named without a version may be any
	// program of its name that bun finds first (checked against bun
	// 1.4.4: `bunx @s/name` does not run a `name` on PATH).
	if version == "" && !strings.HasPrefix(name, "@") {
		for _, d := range append(walkUpBins(dir), filepath.SplitList(getenv(env, "PATH"))...) {
			if !filepath.IsAbs(d) {
				d = filepath.Join(dir, d)
			}
			if p := filepath.Join(d, binName); isFile(p) {
				return bunxResolved(p, args, env, binDirs)
			}
		}
	}
	st, err := os.Stat(filepath.Join(install, "package.json"))
	if err != nil {
		return r, false, fmt.Sprintf("%s is not in bunx's cache (%s): bunx would install it", spec, install)
	}
	if age := time.Since(st.ModTime()); age > bunxMaxAge {
		return r, false, fmt.Sprintf("bunx's install of %s is %s old, past a day: bunx installs it again", spec, age.Round(time.Minute))
	}
	cmd, why := bunxBin(modules, name, version, binName)
	if why != "" {
		return r, false, why
	}
	return bunxResolved(filepath.Join(modules, ".bin", cmd), args, env, binDirs)
}

// bunxResolved runs bin as bunx would, with binDirs first on PATH. Where
// node is not on that PATH, bunx runs a `#!/usr/bin/env node` bin under
// bun itself (its node shim): left to bunx.
func bunxResolved(bin string, args, env, binDirs []string) (Resolved, bool, string) {
	r := Resolved{Argv: append([]string{bin}, args...), Env: withPath(env, binDirs), Via: "bunx: " + bin}
	for _, d := range filepath.SplitList(getenv(r.Env, "PATH")) {
		if filepath.IsAbs(d) && isFile(filepath.Join(d, "node")) {
			return r, true, ""
		}
	}
	return Resolved{}, false, "node is not on the command's PATH: bunx would run the server under bun"
}

// parseBunx splits bunx's arguments into the package and the command's
// arguments. Only the flags that change nothing once the package is
// installed are understood (--no-install, --silent, --verbose); --bun (run
// in bun's runtime) and --package keep bunx.
func parseBunx(args []string) (spec string, rest []string, why string) {
	for i, a := range args {
		switch {
		case a == "--no-install" || a == "--silent" || a == "--verbose":
		case strings.HasPrefix(a, "-"):
			return "", nil, fmt.Sprintf("bunx flag %q is not one flattening understands", a)
		default:
			return a, args[i+1:], ""
		}
	}
	return "", nil, "bunx with no command"
}

// isBun says whether the program at path is bun's own: a native program
// named bun or bunx (bun's installers link bunx to it), no script.
func isBun(path string) bool {
	switch strings.TrimSuffix(filepath.Base(path), ".exe") {
	case "bun", "bunx":
	default:
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := f.Read(head)
	return n == 2 && string(head) != "#!"
}

// bunxBin is the bin bunx runs from its install in modules: the one named
// after the package, else the package's first bin, linked in modules/.bin,
// of exactly version when that is set.
func bunxBin(modules, name, version, binName string) (string, string) {
	b, err := os.ReadFile(filepath.Join(modules, name, "package.json"))
	var pkg struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Name != name || version != "" && pkg.Version != version {
		return "", fmt.Sprintf("bunx's install in %s does not hold %s", filepath.Dir(modules), specOf(name, version))
	}
	cmd := binName
	if !isFile(filepath.Join(modules, ".bin", cmd)) {
		_, order := binsOfManifest(b, name)
		if len(order) == 0 {
			return "", fmt.Sprintf("%s has no bin that bunx would find in %s", name, filepath.Join(modules, ".bin"))
		}
		cmd = order[0]
	}
	if strings.ContainsAny(cmd, `/\`) || !isFile(filepath.Join(modules, ".bin", cmd)) {
		return "", fmt.Sprintf("%s's bin %q is not linked in %s", name, cmd, filepath.Join(modules, ".bin"))
	}
	return cmd, ""
}

// bunCache is bun's install cache: $BUN_INSTALL_CACHE_DIR, else
// $BUN_INSTALL/install/cache, else ~/.bun/install/cache.
func bunCache(env []string) (string, bool) {
	if d := getenv(env, "BUN_INSTALL_CACHE_DIR"); d != "" {
		return d, filepath.IsAbs(d)
	}
	if d := getenv(env, "BUN_INSTALL"); d != "" {
		return filepath.Join(d, "install", "cache"), filepath.IsAbs(d)
	}
	if home := getenv(env, "HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".bun", "install", "cache"), true
	}
	return "", false
}

// bunConfigSet says what would make bun run the command otherwise than
// flattened: a bunfig.toml (the project's, the user's), which may move the
// cache or change the install, or a .env file in dir, which bun loads into
// the command's environment. "" when there is none.
func bunConfigSet(env []string, dir string) string {
	if getenv(env, "BUN_OPTIONS") != "" {
		return "BUN_OPTIONS is set: bun adds it to its own arguments (--bun runs the server under bun)"
	}
	files := []string{filepath.Join(dir, "bunfig.toml")}
	if x := getenv(env, "XDG_CONFIG_HOME"); x != "" {
		if !filepath.IsAbs(x) {
			return "XDG_CONFIG_HOME is relative: where bun reads its settings depends on it"
		}
		files = append(files, filepath.Join(x, ".bunfig.toml"))
	}
	if home := getenv(env, "HOME"); filepath.IsAbs(home) {
		files = append(files, filepath.Join(home, ".bunfig.toml"))
	}
	for _, f := range files {
		if exists(f) {
			return "bun reads its settings from " + f
		}
	}
	for _, f := range bunEnvFiles {
		if p := filepath.Join(dir, f); exists(p) {
			return "bun would load " + p + " into the command's environment"
		}
	}
	return ""
}
