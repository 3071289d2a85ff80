// Package launcher flattens launcher chains: a server command that goes
// through a package runner (`npx`, `npm exec`, `pnpm dlx`, `bunx`) is
// resolved, up front and offline, to the program the runner would end up
// running, so that the runner does not stay resident between the
// supervisor and the server for the server's whole life (npm exec: ~35 MiB
// and a shell per server; pnpm: ~19 MiB; bunx: ~8 MiB).
//
// It only reads the file system, the way the runner itself looks things
// up, and says no whenever the answer could differ from the runner's:
// unknown flags, a package that is not installed, a version range or tag,
// a package spec that is a path, URL or alias, a runner setting that moves
// its cache or changes what it installs, a cached install the runner
// would refresh (pnpm and bunx: older than a day). It never runs, installs
// or fetches anything. What the runner would have done that the flattened
// command skips: npx's check for a newer version of a package named
// without a version when it is already in npx's cache (the cached one
// runs, as with --prefer-offline), and the npm_* variables the runners set
// (npm_config_user_agent, npm_execpath, ...; bun's NODE).
//
// uvx (uv tool run) is not flattened: uv is not installable here to check
// its cache's layout against, and a guess is no imitation.
package launcher

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// NotARunner is Flatten's why for a command that is no package runner's.
const NotARunner = "not a package runner"

// Resolved is a flattened command.
type Resolved struct {
	Argv []string // the program the runner would exec, and its arguments
	Env  []string // the environment with PATH as the runner sets it
	// Via says how it was found, for events and logs
	// ("npx: /p/node_modules/.bin/mcp-server-filesystem").
	Via string
}

// Flatten resolves argv, to be run in dir with env, to the program a
// package runner in it would run. ok is false, with why, when argv is not
// a runner command or its target cannot be known for sure offline; the
// command then runs as given.
func Flatten(argv []string, dir string, env []string) (r Resolved, ok bool, why string) {
	if len(argv) == 0 {
		return r, false, "empty command"
	}
	if why := unsupported(); why != "" {
		return r, false, why
	}
	if rest, isNpx, npmExec := npxArgs(argv); isNpx {
		return flattenNpx(argv[0], rest, npmExec, dir, env)
	}
	if rest, isDlx := pnpmDlxArgs(argv); isDlx {
		return flattenPnpmDlx(argv[0], rest, dir, env)
	}
	if rest, isBunx := bunxArgs(argv); isBunx {
		return flattenBunx(argv[0], rest, dir, env)
	}
	return r, false, NotARunner
}

// flattenNpx resolves `npx REST` or `npm exec REST` (npmExec).
func flattenNpx(runner string, rest []string, npmExec bool, dir string, env []string) (r Resolved, ok bool, why string) {
	spec, args, why := parseNpx(rest, npmExec)
	if why != "" {
		return r, false, why
	}
	npm, why := npmInstall(runner, dir, env)
	if why != "" {
		return r, false, why
	}
	if why := npmConfigSet(env, dir, npm); why != "" {
		return r, false, why
	}
	// npm walks up from the process's working directory, which is the
	// physical path.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if ws := workspaceRoot(dir); ws != "" {
		return r, false, "the directory is in the npm workspace " + ws + " (npx runs it as the workspace, from its root's tree)"
	}
	bin, binDirs, why := findNpx(spec, dir, env, npm)
	if why != "" {
		return r, false, why
	}
	// npm's PATH (run-script's setPATH): the bin directories it found,
	// every node_modules/.bin from the project up, its node-gyp shim, then
	// the caller's PATH.
	dirs := append(binDirs, walkUpBins(localPrefix(dir))...)
	dirs = append(dirs, filepath.Join(npm.root, "node_modules", "@npmcli", "run-script", "lib", "node-gyp-bin"))
	return Resolved{
		Argv: append([]string{bin}, args...),
		Env:  withPath(env, dirs),
		Via:  "npx: " + bin,
	}, true, ""
}

// npm is the npm installation that would run the command.
type npm struct {
	root   string // its package directory (.../lib/node_modules/npm)
	prefix string // its global prefix: where global packages live
}

// npmInstall finds the npm that the runner command belongs to: runner
// (npx or npm) looked up on env's PATH, its links followed to npm's own
// bin/npx-cli.js or bin/npm-cli.js. Only npm 7 and later (libnpmexec) are
// imitated.
func npmInstall(runner, dir string, env []string) (npm, string) {
	exe, why := lookPath(runner, dir, env)
	if why != "" {
		return npm{}, why
	}
	real, err := filepath.EvalSymlinks(exe)
	if err != nil || filepath.Base(filepath.Dir(real)) != "bin" {
		return npm{}, fmt.Sprintf("%s is not npm's own (%s): a wrapper npx is left to run", exe, real)
	}
	root := filepath.Dir(filepath.Dir(real))
	b, err := os.ReadFile(filepath.Join(root, "package.json"))
	var pkg struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Name != "npm" {
		return npm{}, fmt.Sprintf("%s is not npm's own: a wrapper npx is left to run", exe)
	}
	if major, _, _ := strings.Cut(pkg.Version, "."); len(major) == 1 && major < "7" {
		return npm{}, "npm " + pkg.Version + " predates npm exec (7)"
	}
	// npm's default global prefix: two levels up from node (prefix/bin/node).
	prefix := filepath.Dir(filepath.Dir(root)) // prefix/lib/node_modules/npm → prefix/lib
	prefix = filepath.Dir(prefix)
	return npm{root: root, prefix: prefix}, ""
}

// npmConfigKeys are the settings that change what npx runs, or how: any of
// them set, in the environment or an npmrc, leaves the command to npm.
var npmConfigKeys = []string{"cache", "prefix", "package", "call", "global", "location",
	"workspace", "workspaces", "include-workspace-root", "node-options", "userconfig", "globalconfig"}

// npmConfigSet says which of npmConfigKeys is set for a command in dir
// with env: as npm_config_KEY, or in the project's, the user's, the
// global or npm's built-in npmrc. "" when none is.
func npmConfigSet(env []string, dir string, n npm) string {
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		lk := strings.ReplaceAll(strings.ToLower(k), "-", "_")
		if name, ok := strings.CutPrefix(lk, "npm_config_"); ok {
			if v := kv[len(k)+1:]; name == "cache" && filepath.IsAbs(v) {
				continue // honoured (npmCache)
			}
			for _, key := range npmConfigKeys {
				if name == strings.ReplaceAll(key, "-", "_") {
					return "npm setting " + k + " is set in the environment"
				}
			}
		}
		if k == "PREFIX" {
			return "PREFIX is set in the environment (npm's global prefix)"
		}
	}
	home := getenv(env, "HOME")
	files := []string{filepath.Join(n.root, "npmrc"), filepath.Join(n.prefix, "etc", "npmrc")}
	if home != "" {
		files = append(files, filepath.Join(home, ".npmrc"))
	}
	for d := dir; ; d = filepath.Dir(d) {
		files = append(files, filepath.Join(d, ".npmrc"))
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, _, ok := strings.Cut(line, "=")
			k = strings.TrimSpace(k)
			if !ok || strings.HasPrefix(k, "#") || strings.HasPrefix(k, ";") {
				continue
			}
			for _, key := range npmConfigKeys {
				if k == key {
					return fmt.Sprintf("npm setting %s is set in %s", key, f)
				}
			}
		}
	}
	return ""
}

// workspaceRoot is the directory of the nearest package.json above dir
// (or at it) that declares workspaces, or "".
func workspaceRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "package.json")); err == nil {
			var pkg struct {
				Workspaces json.RawMessage `json:"workspaces"`
			}
			if json.Unmarshal(b, &pkg) == nil && len(pkg.Workspaces) > 0 && string(pkg.Workspaces) != "null" {
				return d
			}
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// npxArgs recognises `npx ...`, `npm exec ...` and `npm x ...` and returns
// what follows the runner; npmExec says it was npm exec or npm x.
func npxArgs(argv []string) (rest []string, ok, npmExec bool) {
	switch filepath.Base(argv[0]) {
	case "npx":
		return argv[1:], true, false
	case "npm":
		if len(argv) > 1 && (argv[1] == "exec" || argv[1] == "x") {
			return argv[2:], true, true
		}
	}
	return nil, false, false
}

// parseNpx splits npx's arguments into the package or command and its
// arguments. Only the flags that do not change what runs are understood:
// -y/--yes (no install prompt), --no-install (never install: a flattened
// command never does), -q/--quiet and --. Anything else (--package, -c,
// --call, a registry or cache setting) keeps the runner.
//
// npx stops reading its own flags at the package; npm exec reads flags
// anywhere until a "--" (and drops that "--"), so after the package there
// its arguments are the server's only past a "--" given before it.
func parseNpx(args []string, npmExec bool) (spec string, rest []string, why string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 >= len(args) {
				return "", nil, "npx with no command"
			}
			return args[i+1], args[i+2:], ""
		case a == "-y" || a == "--yes" || a == "--no-install" || a == "-q" || a == "--quiet":
		case strings.HasPrefix(a, "-"):
			return "", nil, fmt.Sprintf("npx flag %q is not one flattening understands", a)
		default:
			if npmExec {
				for _, b := range args[i+1:] {
					if strings.HasPrefix(b, "-") {
						return "", nil, fmt.Sprintf("npm exec reads %q itself unless a -- comes before the package", b)
					}
				}
			}
			return a, args[i+1:], ""
		}
	}
	return "", nil, "npx with no command"
}

// npmName is a registry package name, optionally scoped. Compiled when
// first used, like exactVersion: an init would cost every command's start.
var npmName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`) })

// exactVersion is a plain semver version (no range, no tag).
var exactVersion = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
})

// findNpx finds what npm exec would run for spec from dir, in npm's order:
// a bin of that name in a node_modules/.bin from dir up to /; the package
// in the local project's node_modules; the package in npx's cache. It
// returns the program and the bin directories npm puts first on PATH.
func findNpx(spec, dir string, env []string, n npm) (bin string, binDirs []string, why string) {
	prefix := localPrefix(dir)
	// npm first runs the local project's own bin of that name (installing
	// the project into its cache to link it): left to npm.
	if _, ok := binsOf(filepath.Join(prefix, "package.json"))[spec]; ok {
		return "", nil, fmt.Sprintf("%q is a bin of the project in %s itself", spec, prefix)
	}
	// A bin by its own name, anywhere up the tree from the project (npm's
	// localFileExists from its localBin), else a global one.
	if !strings.ContainsAny(spec, "/@:") {
		for _, d := range walkUpBins(prefix) {
			p := filepath.Join(d, spec)
			if isFile(p) {
				return p, []string{d}, ""
			}
		}
		if exists(filepath.Join(n.prefix, "bin", spec)) {
			return "", nil, fmt.Sprintf("%s is installed globally (%s): left to npm", spec, n.prefix)
		}
	}
	name, version, ok := splitSpec(spec)
	if !ok {
		return "", nil, fmt.Sprintf("%q is not a package name, with or without an exact version (npx resolves ranges, tags, paths and URLs online)", spec)
	}
	// The local project's dependency (npm's local tree). Found but not
	// runnable as we would run it (no bin link, another version, or only
	// nested deeper): npm would run whatever PATH gives, left to it.
	local := filepath.Join(prefix, "node_modules")
	if exists(filepath.Join(local, name, "package.json")) {
		if b, ok := binOf(local, name, version); ok {
			return b, nil, ""
		}
		return "", nil, fmt.Sprintf("%s in %s is not the version asked for or has no bin linked", name, local)
	}
	if lock, err := os.ReadFile(filepath.Join(local, ".package-lock.json")); err == nil &&
		strings.Contains(string(lock), "/node_modules/"+name+`"`) {
		return "", nil, fmt.Sprintf("%s is installed only as a nested dependency in %s", name, local)
	}
	// npm looks in the global tree before its cache.
	if exists(filepath.Join(n.prefix, "lib", "node_modules", name)) {
		return "", nil, fmt.Sprintf("%s is installed globally (%s): left to npm", name, n.prefix)
	}
	// npx's cache: <cache>/_npx/<first 16 hex of sha512(spec)>.
	cache, ok := npmCache(env)
	if !ok {
		return "", nil, fmt.Sprintf("%s is not installed in %s and npm's cache directory is unknown", spec, prefix)
	}
	sum := sha512.Sum512([]byte(spec))
	install := filepath.Join(cache, "_npx", hex.EncodeToString(sum[:])[:16])
	if b, ok := binOf(filepath.Join(install, "node_modules"), name, version); ok {
		return b, []string{filepath.Join(install, "node_modules", ".bin")}, ""
	}
	return "", nil, fmt.Sprintf("%s is neither installed in %s nor in npx's cache (%s): npx would install it", spec, prefix, install)
}

// splitSpec splits "name" or "name@1.2.3" (the name possibly scoped).
func splitSpec(spec string) (name, version string, ok bool) {
	name = spec
	if i := strings.LastIndexByte(spec, '@'); i > 0 {
		name, version = spec[:i], spec[i+1:]
		if !exactVersion().MatchString(version) {
			return "", "", false
		}
		version = strings.TrimPrefix(version, "v")
	}
	return name, version, npmName().MatchString(name)
}

// binOf finds the bin npm exec would run for package name installed in
// modules (a node_modules directory), of exactly version when that is
// set: the package's only bin (the first, where several name one file),
// or the one named after it (npm's getBinFromManifest), linked in
// modules/.bin.
func binOf(modules, name, version string) (string, bool) {
	manifest := filepath.Join(modules, name, "package.json")
	b, err := os.ReadFile(manifest)
	if err != nil {
		return "", false
	}
	var pkg struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &pkg) != nil || pkg.Name != name || version != "" && pkg.Version != version {
		return "", false
	}
	bins, order := binsOfManifest(b, name)
	targets := map[string]bool{}
	for _, v := range bins {
		targets[v] = true
	}
	unscoped := name[strings.LastIndexByte(name, '/')+1:]
	var cmd string
	switch {
	case len(targets) == 1:
		cmd = order[0]
	case bins[unscoped] != "":
		cmd = unscoped
	default:
		return "", false
	}
	p := filepath.Join(modules, ".bin", cmd)
	if strings.ContainsAny(cmd, `/\`) || !isFile(p) {
		return "", false
	}
	return p, true
}

// binsOf reads the bins of the package.json at path (none if unreadable).
func binsOf(path string) map[string]string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var pkg struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil // not a package manifest: no programs
	}
	bins, _ := binsOfManifest(b, pkg.Name)
	return bins
}

// binsOfManifest decodes a manifest's "bin": a file (named after the
// unscoped package) or an object, whose keys it also returns in order.
func binsOfManifest(manifest []byte, name string) (map[string]string, []string) {
	var raw struct {
		Bin json.RawMessage `json:"bin"`
	}
	if json.Unmarshal(manifest, &raw) != nil || len(raw.Bin) == 0 {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw.Bin, &one) == nil {
		if one == "" {
			return nil, nil
		}
		unscoped := name[strings.LastIndexByte(name, '/')+1:]
		return map[string]string{unscoped: path.Clean(one)}, []string{unscoped}
	}
	bins := map[string]string{}
	var order []string
	dec := json.NewDecoder(bytes.NewReader(raw.Bin))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil
		}
		var v string
		if dec.Decode(&v) != nil {
			return nil, nil
		}
		// npm-normalize-package-bin: a key is its base name, a value a
		// clean relative path ("./cli.js" is "cli.js").
		k, _ := kt.(string)
		k, v = path.Base(k), path.Clean(v)
		if _, dup := bins[k]; !dup {
			order = append(order, k)
		}
		bins[k] = v
	}
	return bins, order
}

// localPrefix is npm's local prefix for dir: the nearest directory up from
// dir holding a package.json or a node_modules, else dir itself.
func localPrefix(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if exists(filepath.Join(d, "package.json")) || exists(filepath.Join(d, "node_modules")) {
			return d
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

// walkUpBins is every node_modules/.bin from dir up to /, nearest first,
// as npm puts them on PATH.
func walkUpBins(dir string) []string {
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		out = append(out, filepath.Join(d, "node_modules", ".bin"))
		if d == filepath.Dir(d) {
			return out
		}
	}
}

// npmCache is npm's cache directory: an absolute $npm_config_cache, else
// ~/.npm (npmConfigSet left any other setting of it to npm).
func npmCache(env []string) (string, bool) {
	home := ""
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.EqualFold(strings.ReplaceAll(k, "-", "_"), "npm_config_cache") && filepath.IsAbs(v):
			return v, true
		case k == "HOME" && filepath.IsAbs(v):
			home = v
		}
	}
	if home == "" {
		return "", false
	}
	return filepath.Join(home, ".npm"), true
}

// withPath returns env with dirs put first on its PATH.
func withPath(env []string, dirs []string) []string {
	out := make([]string, 0, len(env)+1)
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
			continue
		}
		out = append(out, kv)
	}
	p := strings.Join(dirs, string(os.PathListSeparator))
	if path != "" {
		p += string(os.PathListSeparator) + path
	}
	return append(out, "PATH="+p)
}

// lookPath finds the runner as execvp would for a command run in dir with
// env: a path with a slash as it is (relative to dir), else the first file
// of that name on env's PATH. A runner that is not there is left to fail
// as it would.
func lookPath(runner, dir string, env []string) (string, string) {
	if strings.ContainsRune(runner, '/') {
		if !filepath.IsAbs(runner) {
			runner = filepath.Join(dir, runner)
		}
		return runner, ""
	}
	for _, d := range filepath.SplitList(getenv(env, "PATH")) {
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if p := filepath.Join(d, runner); isFile(p) {
			return p, ""
		}
	}
	return "", runner + " is not on the command's PATH"
}

// getenv is the last value of key in env ("" when unset).
func getenv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, key+"="); ok {
			v = val
		}
	}
	return v
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
