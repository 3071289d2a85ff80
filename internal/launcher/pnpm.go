package launcher

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// pnpmDlxMaxAge is pnpm's default dlx-cache-max-age (1,440 minutes): an
// install older than that is resolved again, which may bring other
// dependencies.
const pnpmDlxMaxAge = 24 * time.Hour

// pnpmRegistries are pnpm's default registries, in the order its dlx cache
// key sorts them.
var pnpmRegistries = [][2]string{{"@jsr", "https://npm.jsr.io/"}, {"default", "https://registry.npmjs.org/"}}

// pnpmDlxArgs recognises `pnpm dlx ...` (or its `pn` alias) and `pnpx` /
// `pnx`, and returns what follows the runner.
func pnpmDlxArgs(argv []string) ([]string, bool) {
	switch filepath.Base(argv[0]) {
	case "pnpx", "pnx":
		return argv[1:], true
	case "pnpm", "pn":
		if len(argv) > 1 && argv[1] == "dlx" {
			return argv[2:], true
		}
	}
	return nil, false
}

// flattenPnpmDlx resolves `pnpm dlx REST` to the bin pnpm would run from
// its dlx cache: <cache-dir>/dlx/<key>/pkg, where key is the first 32 hex
// digits of the SHA-256 of the JSON of the package specs and registries
// (checked against pnpm 12.4.2), while that install is younger than
// pnpm's dlx-cache-max-age. The pnpm on PATH is not checked to be that
// version: a pnpm that keys its cache otherwise finds no such directory
// and installs anew, and one that keys it the same way runs what is there.
func flattenPnpmDlx(runner string, rest []string, dir string, env []string) (r Resolved, ok bool, why string) {
	spec, args, why := parsePnpmDlx(rest)
	if why != "" {
		return r, false, why
	}
	if _, why := lookPath(runner, dir, env); why != "" {
		return r, false, why
	}
	name, version, ok := splitSpec(spec)
	if !ok {
		return r, false, fmt.Sprintf("%q is not a package name, with or without an exact version (pnpm dlx resolves ranges, tags, paths and URLs online)", spec)
	}
	if why := pnpmConfigSet(env, dir); why != "" {
		return r, false, why
	}
	cache, ok := pnpmCache(env)
	if !ok {
		return r, false, "pnpm's cache directory is unknown (no HOME, or a relative XDG_CACHE_HOME)"
	}
	link := filepath.Join(cache, "dlx", pnpmDlxKey(spec), "pkg")
	st, err := os.Lstat(link)
	if err != nil || st.Mode()&os.ModeSymlink == 0 {
		return r, false, fmt.Sprintf("%s is not in pnpm's dlx cache (%s): pnpm dlx would install it", spec, link)
	}
	if age := time.Since(st.ModTime()); age > pnpmDlxMaxAge {
		return r, false, fmt.Sprintf("pnpm's dlx install of %s is %s old, past its dlx-cache-max-age (1 day): pnpm resolves it again", spec, age.Round(time.Minute))
	}
	install, err := filepath.EvalSymlinks(link)
	if err != nil {
		return r, false, fmt.Sprintf("pnpm's dlx cache link %s is broken: pnpm dlx would install %s", link, spec)
	}
	modules := filepath.Join(install, "node_modules")
	cmd, why := pnpmBin(modules, name, version)
	if why != "" {
		return r, false, why
	}
	bin := filepath.Join(modules, ".bin", cmd)
	// In a pnpm workspace, pnpm puts the workspace root's bins after the
	// install's (checked against pnpm 12.4.2).
	dirs := []string{filepath.Join(modules, ".bin")}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	for d := dir; ; d = filepath.Dir(d) {
		if exists(filepath.Join(d, "pnpm-workspace.yaml")) {
			dirs = append(dirs, filepath.Join(d, "node_modules", ".bin"))
			break
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return Resolved{
		Argv: append([]string{bin}, args...),
		Env:  withPath(env, dirs),
		Via:  "pnpm dlx: " + bin,
	}, true, ""
}

// specOf is name@version, or name alone when version is "".
func specOf(name, version string) string {
	if version == "" {
		return name
	}
	return name + "@" + version
}

// parsePnpmDlx splits pnpm dlx's arguments into the package and the
// command's arguments: everything after the package is the command's.
// Only -s/--silent is understood; any other flag (--package, -c,
// --allow-build, --cpu, a registry) keeps pnpm.
func parsePnpmDlx(args []string) (spec string, rest []string, why string) {
	for i, a := range args {
		switch {
		case a == "-s" || a == "--silent":
		case strings.HasPrefix(a, "-"):
			return "", nil, fmt.Sprintf("pnpm dlx flag %q is not one flattening understands", a)
		default:
			return a, args[i+1:], ""
		}
	}
	return "", nil, "pnpm dlx with no command"
}

// pnpmDlxKey is the name of spec's directory in pnpm's dlx cache.
func pnpmDlxKey(spec string) string {
	regs := make([][]string, len(pnpmRegistries))
	for i, r := range pnpmRegistries {
		regs[i] = []string{r[0], r[1]}
	}
	b, _ := json.Marshal([]any{[]string{spec}, regs})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:32]
}

// pnpmBin is the bin pnpm dlx runs for package name installed in modules:
// its only bin, else the one named after it (pnpm's getBinName), checked
// to be of exactly version when that is set and linked in modules/.bin.
func pnpmBin(modules, name, version string) (string, string) {
	b, err := os.ReadFile(filepath.Join(modules, name, "package.json"))
	if err != nil {
		return "", fmt.Sprintf("pnpm's dlx install in %s has no %s", filepath.Dir(modules), name)
	}
	var pkg struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &pkg) != nil || pkg.Name != name || version != "" && pkg.Version != version {
		return "", fmt.Sprintf("pnpm's dlx install in %s does not hold %s", filepath.Dir(modules), specOf(name, version))
	}
	bins, order := binsOfManifest(b, name)
	cmd := ""
	switch unscoped := name[strings.LastIndexByte(name, '/')+1:]; {
	case len(order) == 1:
		cmd = order[0]
	case bins[unscoped] != "":
		cmd = unscoped
	default:
		return "", fmt.Sprintf("%s has %d bins and none named after it: pnpm dlx cannot choose either", name, len(order))
	}
	if strings.ContainsAny(cmd, `/\`) || !isFile(filepath.Join(modules, ".bin", cmd)) {
		return "", fmt.Sprintf("%s's bin %q is not linked in %s", name, cmd, filepath.Join(modules, ".bin"))
	}
	return cmd, ""
}

// pnpmCache is pnpm's cache directory: $XDG_CACHE_HOME/pnpm, else the
// platform's user cache (~/.cache/pnpm; ~/Library/Caches/pnpm on macOS).
func pnpmCache(env []string) (string, bool) {
	if x := getenv(env, "XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "pnpm"), filepath.IsAbs(x)
	}
	home := getenv(env, "HOME")
	if !filepath.IsAbs(home) {
		return "", false
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Caches", "pnpm"), true
	}
	return filepath.Join(home, ".cache", "pnpm"), true
}

// pnpmSetting says whether a pnpm setting's name (any spelling: cache-dir,
// cacheDir, npm_config_cache_dir's tail) changes which dlx install runs, or
// how: the registries (part of the cache key), the cache directory and
// its max age, the architectures kept, node options.
func pnpmSetting(key string) bool {
	k := strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(strings.TrimSpace(key)))
	if strings.Contains(k, "registr") {
		return true
	}
	switch k {
	case "cachedir", "dlxcachemaxage", "supportedarchitectures", "nodeoptions", "cpu", "os", "libc",
		"userconfig", "globalconfig", "npmrcauthfile":
		return true
	}
	return false
}

// pnpmConfigSet says which pnpm setting that pnpmSetting names is set for
// a command in dir with env: as npm_config_* or pnpm_config_*, in an
// .npmrc (the project's up to /, the user's), in pnpm's global rc or
// config.yaml, or in a pnpm-workspace.yaml up from dir. "" when none is.
func pnpmConfigSet(env []string, dir string) string {
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		lk := strings.ToLower(k)
		for _, p := range []string{"npm_config_", "pnpm_config_"} {
			if name, ok := strings.CutPrefix(lk, p); ok && pnpmSetting(name) {
				return "pnpm setting " + k + " is set in the environment"
			}
		}
	}
	home := getenv(env, "HOME")
	config := getenv(env, "XDG_CONFIG_HOME")
	if config != "" && !filepath.IsAbs(config) {
		return "XDG_CONFIG_HOME is relative: where pnpm reads its settings depends on it"
	}
	var configs []string // pnpm's global config directories
	if config != "" {
		configs = append(configs, filepath.Join(config, "pnpm"))
	}
	var files []string
	if home != "" {
		files = append(files, filepath.Join(home, ".npmrc"))
		configs = append(configs, filepath.Join(home, ".config", "pnpm"))
		if runtime.GOOS == "darwin" {
			configs = append(configs, filepath.Join(home, "Library", "Preferences", "pnpm"))
		}
	}
	for _, c := range configs {
		files = append(files, filepath.Join(c, "rc"), filepath.Join(c, "config.yaml"))
	}
	for d := dir; ; d = filepath.Dir(d) {
		files = append(files, filepath.Join(d, ".npmrc"), filepath.Join(d, "pnpm-workspace.yaml"))
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			return fmt.Sprintf("pnpm's settings in %s cannot be read (%v)", f, err)
		}
		sep := "="
		if strings.HasSuffix(f, ".yaml") {
			sep = ":"
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, _, ok := strings.Cut(line, sep)
			k = strings.Trim(strings.TrimSpace(k), `"'`)
			if ok && !strings.HasPrefix(k, "#") && !strings.HasPrefix(k, ";") && pnpmSetting(k) {
				return fmt.Sprintf("pnpm setting %s is set in %s", k, f)
			}
		}
	}
	return ""
}
