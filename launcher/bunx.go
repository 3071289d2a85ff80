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
	if !ok || name == "tsc" || name == "typescript" {
		return r, false, fmt.Sprintf("%q is not a package name, with or without an exact version (bunx resolves ranges, tags, paths and URLs online)", spec)
	}
	if why := bunConfigSet(env, dir); why != "" {
		return r, false, why
	}
	cache, ok := bunCache(env)
	if !ok {
		return r, false, "bun's cache directory is unknown (no HOME)"
	}
	tag := version
	if tag == "" {
		tag = "latest"
	}
	install := filepath.Join(cache, ".bunx-"+strconv.Itoa(os.Getuid()), name+"@"+tag)
	modules := filepath.Join(install, "node_modules")
	// bun's PATH for the command: the install's bins, every
	// node_modules/.bin from dir up, then the caller's PATH.
	binDirs := append([]string{filepath.Join(modules, ".bin")}, walkUpBins(dir)...)
	binName := name[strings.LastIndexByte(name, '/')+1:]
	if version == "" {
		for _, d := range append(walkUpBins(dir), filepath.SplitList(getenv(env, "PATH"))...) {
			if !filepath.IsAbs(d) {
				d = filepath.Join(dir, d)
			}
			if p := filepath.Join(d, binName); isFile(p) {
				return Resolved{Argv: append([]string{p}, args...), Env: withPath(env, binDirs), Via: "bunx: " + p}, true, ""
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
	bin := filepath.Join(modules, ".bin", cmd)
	return Resolved{
		Argv: append([]string{bin}, args...),
		Env:  withPath(env, binDirs),
		Via:  "bunx: " + bin,
	}, true, ""
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
		return "", fmt.Sprintf("bunx's install in %s is not %s@%s", filepath.Dir(modules), name, version)
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
	if d := getenv(env, "BUN_INSTALL_CACHE_DIR"); filepath.IsAbs(d) {
		return d, true
	}
	if d := getenv(env, "BUN_INSTALL"); filepath.IsAbs(d) {
		return filepath.Join(d, "install", "cache"), true
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
	files := []string{filepath.Join(dir, "bunfig.toml")}
	if x := getenv(env, "XDG_CONFIG_HOME"); filepath.IsAbs(x) {
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
