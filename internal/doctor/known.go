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
var scriptExts = []string{".js", ".mjs", ".cjs", ".ts", ".py", ".exe", ".sh", ".jar"}

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
	// valueFlags take the next word as their value (when not --flag=value).
	valueFlags = map[string]bool{
		"--directory": true, "--project": true, "--python": true, "--with": true, "--with-requirements": true,
		"--index-url": true, "--extra-index-url": true, "--prefix": true, "--registry": true, "--cache": true,
		"--cwd": true, "-C": true, "--userconfig": true, "--node-options": true, "--call": true, "-c": true,
		// env and timeout
		"-u": true, "--unset": true, "--chdir": true, "-s": true, "--signal": true, "-k": true, "--kill-after": true,
	}
	// packageFlags name the package a launcher installs, the command that
	// follows being what it runs.
	packageFlags = map[string]bool{"-p": true, "--package": true, "--from": true}
	// containerValueFlags of docker/podman run take the next word.
	containerValueFlags = map[string]bool{
		"-e": true, "--env": true, "--env-file": true, "-v": true, "--volume": true, "--mount": true, "--name": true,
		"-p": true, "--publish": true, "-w": true, "--workdir": true, "-u": true, "--user": true, "--network": true,
		"--entrypoint": true, "-l": true, "--label": true, "--platform": true, "--pull": true, "-m": true, "--memory": true,
		"--cpus": true, "--add-host": true, "--device": true, "--cap-add": true, "--cap-drop": true, "--security-opt": true,
		"--tmpfs": true, "--ulimit": true, "-h": true, "--hostname": true, "--restart": true, "--log-driver": true,
	}
)

func provablyMCP(argv []string, depth int) bool {
	// npm rewrites its process title: /proc holds one argument with spaces.
	if len(argv) == 1 && strings.ContainsAny(argv[0], " \t") {
		argv = strings.Fields(argv[0])
	}
	// `FOO=1 npx ...` inside a shell's string: assignments come first.
	for len(argv) > 0 && isAssignment(argv[0]) {
		argv = argv[1:]
	}
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
		i := skipFlags(args, valueFlags)
		for i < len(args) && isAssignment(args[i]) {
			i++
		}
		if prog == "timeout" && i < len(args) {
			i++ // the duration
		}
		return provablyMCP(args[i:], depth+1)
	case launchers[prog]:
		return launched(args, depth)
	case prog == "docker" || prog == "podman":
		return containerImage(args)
	case len(subcommands[prog]) > 0:
		i := skipFlags(args, valueFlags)
		if i < len(args) {
			for _, sub := range subcommands[prog] {
				if args[i] != sub {
					continue
				}
				rest := args[i+1:]
				switch {
				case prog == "uv" && sub == "tool":
					if len(rest) == 0 || rest[0] != "run" {
						return false
					}
					return launched(rest[1:], depth)
				case prog == "uv" && sub == "run":
					// uv run runs a command or a script of the project.
					j := skipFlags(rest, valueFlags)
					return provablyMCP(rest[j:], depth+1) || j < len(rest) && knownWord(strings.ToLower(rest[j]))
				}
				return launched(rest, depth)
			}
		}
		if prog == "bun" {
			if i < len(args) && args[i] == "run" {
				return scriptRun(args[i+1:])
			}
			return scriptRun(args)
		}
		return false
	case prog == "node" || prog == "nodejs" || prog == "deno" || prog == "tsx" || prog == "ts-node" || prog == "java" ||
		strings.HasPrefix(prog, "python") || prog == "ruby" || prog == "perl":
		if prog == "deno" && len(args) > 0 && args[0] == "run" {
			args = args[1:]
		}
		return scriptRun(args)
	}
	return false
}

// isAssignment reports a shell variable assignment (NAME=value).
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	return ok && name != "" && !strings.ContainsAny(name, "/-.@")
}

// skipFlags returns the index of the first word of args that is neither a
// flag nor the value of a flag in takes.
func skipFlags(args []string, takes map[string]bool) int {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if takes[args[i]] {
			i++
		}
		i++
	}
	return i
}

// launched judges a launcher's arguments: the package it runs (the first
// word that is not a flag or a flag's value), or, when a flag names the
// package (-p, --package, --from), the command that follows it.
func launched(args []string, depth int) bool {
	explicit := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			if explicit {
				return provablyMCP(args[i:], depth+1)
			}
			return knownWord(strings.ToLower(a))
		}
		flag, _, hasValue := strings.Cut(a, "=")
		if packageFlags[flag] {
			explicit = true
		}
		if !hasValue && (packageFlags[flag] || valueFlags[flag]) {
			i++
		}
	}
	return false
}

// containerImage judges `docker run ... IMAGE`: the image named like a
// known server (`ghcr.io/github/github-mcp-server`, GitHub's own form).
func containerImage(args []string) bool {
	if len(args) == 0 || args[0] != "run" {
		return false
	}
	rest := args[1:]
	i := skipFlags(rest, containerValueFlags)
	if i >= len(rest) {
		return false
	}
	image := strings.ToLower(rest[i])
	if j := strings.LastIndexByte(image, ':'); j > strings.LastIndexByte(image, '/') {
		image = image[:j] // the tag
	}
	return knownName(filepath.Base(image))
}

// scriptRun judges an interpreter's arguments: the script it runs (its
// first argument that is not a flag), or the module after -m (the jar
// after -jar); node running npm's own CLI is the launcher it runs.
func scriptRun(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := strings.ToLower(args[i])
		if (a == "-m" || a == "-jar") && i+1 < len(args) {
			mod := strings.ToLower(args[i+1])
			if knownWord(mod) {
				return true
			}
			pkg, _, ok := strings.Cut(mod, ".")
			return a == "-m" && ok && knownName(pkg)
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		switch filepath.Base(a) {
		case "npx-cli.js":
			return launched(args[i+1:], 1)
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
