// Package launcher flattens launcher chains: a server command that goes
// through a package runner (`npx`, `npm exec`) is resolved, up front and
// offline, to the program the runner would end up running, so that the
// runner does not stay resident between the supervisor and the server for
// the server's whole life (npm exec: ~35 MiB and a shell per server).
//
// It only reads the file system, the way the runner itself looks things
// up, and says no whenever the answer could differ from the runner's:
// unknown flags, a package that is not installed, a version range, a
// package spec that is a path, URL or alias. It never runs, installs or
// fetches anything. What the runner would have done that the flattened
// command skips: npx's check for a newer version of a package named
// without a version when it is already in npx's cache (the cached one
// runs, as with --prefer-offline), and npm's own npm_* variables.
package launcher

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
	rest, isNpx := npxArgs(argv)
	if !isNpx {
		return r, false, NotARunner
	}
	spec, args, why := parseNpx(rest)
	if why != "" {
		return r, false, why
	}
	bin, binDirs, why := findNpx(spec, dir, env)
	if why != "" {
		return r, false, why
	}
	return Resolved{
		Argv: append([]string{bin}, args...),
		Env:  withPath(env, append(binDirs, walkUpBins(localPrefix(dir))...)),
		Via:  "npx: " + bin,
	}, true, ""
}

// npxArgs recognises `npx ...`, `npm exec ...` and `npm x ...` and returns
// what follows the runner.
func npxArgs(argv []string) ([]string, bool) {
	switch filepath.Base(argv[0]) {
	case "npx":
		return argv[1:], true
	case "npm":
		if len(argv) > 1 && (argv[1] == "exec" || argv[1] == "x") {
			return argv[2:], true
		}
	}
	return nil, false
}

// parseNpx splits npx's arguments into the package or command and its
// arguments. Only the flags that do not change what runs are understood:
// -y/--yes (no install prompt), --no-install (never install: a flattened
// command never does), -q/--quiet and --. Anything else (--package, -c,
// --call, a registry or cache setting) keeps the runner.
func parseNpx(args []string) (spec string, rest []string, why string) {
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
			return a, args[i+1:], ""
		}
	}
	return "", nil, "npx with no command"
}

// npmName is a registry package name, optionally scoped.
var npmName = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)

// exactVersion is a plain semver version (no range, no tag).
var exactVersion = regexp.MustCompile(`^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// findNpx finds what npm exec would run for spec from dir, in npm's order:
// a bin of that name in a node_modules/.bin from dir up to /; the package
// in the local project's node_modules; the package in npx's cache. It
// returns the program and the bin directories npm puts first on PATH.
func findNpx(spec, dir string, env []string) (bin string, binDirs []string, why string) {
	prefix := localPrefix(dir)
	// npm first runs the local project's own bin of that name (installing
	// the project into its cache to link it): left to npm.
	if _, ok := binsOf(filepath.Join(prefix, "package.json"))[spec]; ok {
		return "", nil, fmt.Sprintf("%q is a bin of the project in %s itself", spec, prefix)
	}
	// A bin by its own name, anywhere up the tree (npm's localFileExists).
	if !strings.ContainsAny(spec, "/@:") {
		for _, d := range walkUpBins(dir) {
			p := filepath.Join(d, spec)
			if isFile(p) {
				return p, nil, ""
			}
		}
	}
	name, version, ok := splitSpec(spec)
	if !ok {
		return "", nil, fmt.Sprintf("%q is not a package name, with or without an exact version (npx resolves ranges, tags, paths and URLs online)", spec)
	}
	// The local project's dependency (npm's local tree).
	if b, ok := binOf(filepath.Join(prefix, "node_modules"), name, version); ok {
		return b, nil, ""
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
		if !exactVersion.MatchString(version) {
			return "", "", false
		}
		version = strings.TrimPrefix(version, "v")
	}
	return name, version, npmName.MatchString(name)
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
	json.Unmarshal(b, &pkg)
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
		return map[string]string{unscoped: one}, []string{unscoped}
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
		k, _ := kt.(string)
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

// npmCache is npm's cache directory: $npm_config_cache, else ~/.npm. (A
// cache set in an .npmrc is not read: such a package is not flattened.)
func npmCache(env []string) (string, bool) {
	var home string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.EqualFold(k, "npm_config_cache") && v != "":
			return v, true
		case k == "HOME":
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

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
