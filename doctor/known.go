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
// binary (see the list above), so that stopping the process cannot hit a
// stranger's program that merely has "mcp" in a word.
func ProvablyMCP(argv []string) bool {
	if len(argv) == 0 || notServers[filepath.Base(argv[0])] {
		return false
	}
	if len(argv) >= 3 && strings.TrimSuffix(filepath.Base(argv[0]), ".exe") == "supervisor" &&
		argv[1] == "_fixture" && argv[2] == "mcp" {
		return true
	}
	var words []string
	for _, a := range argv {
		words = append(words, strings.Fields(strings.ToLower(a))...)
	}
	for i, w := range words {
		if strings.HasPrefix(w, "-") {
			// A flag (`--enable-mcp`) names an option, not a program;
			// `--config=/x/y-mcp.json` names a file, judged as a word.
			_, v, ok := strings.Cut(w, "=")
			if !ok {
				continue
			}
			w = v
		}
		if knownWord(w) {
			return true
		}
		// `python -m foo_mcp.server`: the module's package is the name.
		if i > 0 && words[i-1] == "-m" {
			if pkg, _, ok := strings.Cut(w, "."); ok && knownName(pkg) {
				return true
			}
		}
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
