package doctor

import (
	"path/filepath"
	"strings"
)

// Known MCP servers: the one list --fix trusts.
//
// LooksLikeMCP decides what the audit reports: any argv element containing
// "mcp" is enough, because a missed leak costs memory all day. That is far
// too loose to kill on: `minecraft-mcpe-backup.py`, a user's `smcp` or a
// log tailer would all match. ProvablyMCP decides what Fix may stop. It
// matches whole words only, never a substring of a word: each argv element
// is split on white space (so `sh -c "npx -y @modelcontextprotocol/server-x"`
// is read word by word; flags are skipped), and each word is reduced to a name, its base
// name with a package version (`@1.2.3`) and a script extension (.js, .py,
// ...) cut off. A word is known when
//
//   - it is an npm package spec of the official scope:
//     `@modelcontextprotocol/server-*` (also inside a path, as
//     `node_modules/@modelcontextprotocol/server-*/...`);
//   - its name is `mcp-server-*`, `*-mcp-server`, `mcp_server_*`,
//     `*_mcp_server`, `*-mcp`, `*_mcp`, `mcp-server` or `mcp-proxy`
//     (also as the package directory under `node_modules/`, and as the
//     first part of a dotted Python module after `-m`);
//
// or the argv is `supervisor _fixture mcp`, this binary's test server.
//
// Anything else that merely looks like MCP (camelCase names, `mcp` as a
// directory of a script path, `mcpe`) is reported but never stopped: the
// user, who knows whether it is theirs, decides.

// knownExact are names that are MCP servers by themselves.
var knownExact = map[string]bool{
	"mcp-server": true,
	"mcp-proxy":  true,
}

// knownPrefixes and knownSuffixes match a name that has more than the
// affix: `mcp-server-` alone names nothing.
var (
	knownPrefixes = []string{"mcp-server-", "mcp_server_"}
	knownSuffixes = []string{"-mcp-server", "_mcp_server", "-mcp", "_mcp"}
)

// officialScope is the npm scope of the reference servers.
const officialScope = "@modelcontextprotocol/"

// scriptExts are cut off a name before matching: `github-mcp.py` is the
// server `github-mcp`.
var scriptExts = []string{".js", ".mjs", ".cjs", ".ts", ".py", ".exe", ".sh"}

// ProvablyMCP reports whether argv names a known MCP server package or
// binary (see the list above) as the program it runs, so that stopping the
// process cannot hit a stranger's program that merely has "mcp" in a word.
// Position matters: the name must be the program itself, the script or
// module an interpreter runs, the package a launcher (npx, uvx, npm exec,
// pnpm dlx, bunx, pipx run, ...) runs, or so within a shell's -c or after
// env/nohup/setsid/timeout. A package named only as an argument of
// another program (`node driver.mjs @modelcontextprotocol/server-x`,
// `claude mcp add fs -- npx ...`) is that program's business: a host, maybe.
func ProvablyMCP(argv []string) bool { return provablyMCP(argv, 0) }

// shells run their -c string; wrappers run the rest of their argv.
var (
	shells   = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "ksh": true}
	wrappers = map[string]bool{"env": true, "nohup": true, "setsid": true, "timeout": true, "exec": true}
	// launchers run a package by name; subcommands are the launcher's
	// subcommand that does (npm exec, pnpm dlx, bun x, uv tool run).
	launchers   = map[string]bool{"npx": true, "pnpx": true, "bunx": true, "uvx": true}
	subcommands = map[string][]string{"npm": {"exec", "x"}, "pnpm": {"dlx", "exec"}, "bun": {"x"}, "pipx": {"run"}, "uv": {"run", "tool"}}
)

func provablyMCP(argv []string, depth int) bool {
	if len(argv) == 0 || depth > 4 || notServers[filepath.Base(argv[0])] {
		return false
	}
	prog := strings.ToLower(strings.TrimSuffix(filepath.Base(argv[0]), ".exe"))
	args := argv[1:]
	if prog == "supervisor" && len(args) >= 2 && args[0] == "_fixture" && args[1] == "mcp" {
		return true
	}
	if knownWord(strings.ToLower(argv[0])) {
		return true
	}
	switch {
	case shells[prog]:
		for i, a := range args {
			if strings.HasPrefix(a, "-") && strings.Contains(a, "c") && !strings.HasPrefix(a, "--") && i+1 < len(args) {
				return provablyMCP(strings.Fields(args[i+1]), depth+1)
			}
		}
		return false
	case wrappers[prog]:
		i := 0
		for i < len(args) && (strings.HasPrefix(args[i], "-") || strings.Contains(args[i], "=")) {
			i++
		}
		if prog == "timeout" && i < len(args) {
			i++ // the duration
		}
		return provablyMCP(args[i:], depth+1)
	case launchers[prog]:
		return launchedPackage(args)
	case len(subcommands[prog]) > 0:
		for i, a := range args {
			if strings.HasPrefix(a, "-") {
				continue
			}
			for _, sub := range subcommands[prog] {
				if a == sub {
					rest := args[i+1:]
					if prog == "uv" && sub == "tool" && len(rest) > 0 && rest[0] == "run" {
						rest = rest[1:]
					}
					return launchedPackage(rest)
				}
			}
			break
		}
		if prog == "bun" {
			return scriptRun(args)
		}
		return false
	case prog == "node" || prog == "nodejs" || prog == "deno" || prog == "tsx" || prog == "ts-node" ||
		strings.HasPrefix(prog, "python") || prog == "ruby" || prog == "perl":
		if prog == "deno" && len(args) > 0 && args[0] == "run" {
			args = args[1:]
		}
		return scriptRun(args)
	}
	return false
}

// launchedPackage judges a launcher's arguments: the package it runs, the
// first word that is not a flag, or a --package / --from value.
func launchedPackage(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := strings.ToLower(args[i])
		if !strings.HasPrefix(a, "-") {
			return knownWord(a)
		}
		if _, v, ok := strings.Cut(a, "="); ok && (strings.HasPrefix(a, "--package") || strings.HasPrefix(a, "--from") || strings.HasPrefix(a, "--with")) {
			if knownWord(v) {
				return true
			}
			continue
		}
		if (a == "-p" || a == "--package" || a == "--from") && i+1 < len(args) {
			if knownWord(strings.ToLower(args[i+1])) {
				return true
			}
			i++
		}
	}
	return false
}

// scriptRun judges an interpreter's arguments: the script it runs (its
// first argument that is not a flag), or the module after -m; node
// running npm's own CLI is the launcher it runs.
func scriptRun(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := strings.ToLower(args[i])
		if a == "-m" && i+1 < len(args) {
			mod := strings.ToLower(args[i+1])
			if knownWord(mod) {
				return true
			}
			pkg, _, ok := strings.Cut(mod, ".")
			return ok && knownName(pkg)
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		switch filepath.Base(a) {
		case "npx-cli.js":
			return launchedPackage(args[i+1:])
		case "npm-cli.js":
			return provablyMCP(append([]string{"npm"}, args[i+1:]...), 1)
		}
		return knownWord(a)
	}
	return false
}

// knownWord matches one lower-case word: a package spec, a path or a name.
func knownWord(w string) bool {
	w = strings.TrimRight(w, "/")
	if strings.HasPrefix(w, officialScope+"server-") && len(w) > len(officialScope+"server-") {
		return true
	}
	// Inside node_modules the directory is a package name, which is as
	// good as a spec; any other directory of a path is just a directory.
	if _, rest, ok := strings.Cut(w, "/node_modules/"); ok {
		if strings.HasPrefix(rest, officialScope+"server-") && len(rest) > len(officialScope+"server-") {
			return true
		}
		pkg, _, _ := strings.Cut(rest, "/")
		if !strings.HasPrefix(pkg, "@") && knownName(pkg) {
			return true
		}
	}
	return knownName(filepath.Base(w))
}

// knownName matches a base name after cutting a version and an extension.
func knownName(name string) bool {
	// `mcp-server-fetch@latest`, `@scope/x-mcp@1.0` (base `x-mcp@1.0`).
	if i := strings.LastIndexByte(name, '@'); i > 0 {
		name = name[:i]
	}
	for _, ext := range scriptExts {
		if n, ok := strings.CutSuffix(name, ext); ok {
			name = n
			break
		}
	}
	if knownExact[name] {
		return true
	}
	for _, p := range knownPrefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	for _, s := range knownSuffixes {
		if strings.HasSuffix(name, s) && len(name) > len(s) {
			return true
		}
	}
	return false
}
