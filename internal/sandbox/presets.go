package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// Preset is what a well-known server needs beyond every server's rules,
// found in its command (argv, as run: flattened or not): the name of the
// preset and the paths it adds. A server that matches none gets none.
//
//   - filesystem (@modelcontextprotocol/server-filesystem): the
//     directories its arguments name, read and write: they are what it
//     serves;
//   - git (mcp-server-git): the repository of --repository (-r), read and
//     write;
//   - memory (@modelcontextprotocol/server-memory): the directory of its
//     knowledge graph file, MEMORY_FILE_PATH in its environment (relative
//     to its script, as the server reads it) or beside its script;
//   - fetch (mcp-server-fetch, @modelcontextprotocol/server-fetch,
//     @kazuph/mcp-fetch, fetcher-mcp) and browser (@playwright/mcp,
//     @modelcontextprotocol/server-puppeteer, chrome-devtools-mcp): no
//     more than every server gets, and not even their directory where it
//     is in the home (hosts start servers in it): what they fetch comes
//     from the network, which stays as the policy says (all by default),
//     and nothing of the user's files is theirs to send there. A browser
//     writes its profile in its temp dir.
//
// The secrets' deny list holds under a preset as under any rule.
func Preset(argv []string, cwd string, env []string) (name string, add Spec) {
	abs := func(p string) string {
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		return filepath.Clean(p)
	}
	for i, a := range argv {
		switch {
		case matchesAny(a, fetchServers):
			return PresetFetch, add
		case matchesAny(a, browserServers):
			return PresetBrowser, add
		case strings.Contains(a, "server-filesystem"):
			for _, d := range argv[i+1:] {
				if strings.HasPrefix(d, "-") {
					continue
				}
				if st, err := os.Stat(abs(d)); err == nil && st.IsDir() {
					add.Write = append(add.Write, abs(d))
				}
			}
			return "filesystem", add
		case strings.Contains(a, "mcp-server-git"):
			rest := argv[i+1:]
			for j, r := range rest {
				if v, ok := strings.CutPrefix(r, "--repository="); ok {
					add.Write = append(add.Write, abs(v))
				} else if (r == "--repository" || r == "-r") && j+1 < len(rest) {
					add.Write = append(add.Write, abs(rest[j+1]))
				}
			}
			return "git", add
		case strings.Contains(a, "server-memory"):
			script := ""
			if strings.HasSuffix(a, ".js") || strings.HasSuffix(a, ".mjs") {
				script = abs(a)
			}
			file := ""
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, "MEMORY_FILE_PATH="); ok && v != "" {
					file = v
				}
			}
			switch {
			case file != "" && filepath.IsAbs(file):
				add.Write = append(add.Write, filepath.Dir(file))
			case file != "" && script != "":
				add.Write = append(add.Write, filepath.Dir(filepath.Join(filepath.Dir(script), file)))
			case script != "":
				add.Write = append(add.Write, filepath.Dir(script))
			}
			return "memory", add
		}
	}
	return "", Spec{}
}

// The presets that keep a server out of the home (Plan).
const (
	PresetFetch   = "fetch"
	PresetBrowser = "browser"
)

// The packages of the fetch and browser presets, as their commands name
// them (a package, or a path into its node_modules or virtualenv).
var (
	fetchServers   = []string{"mcp-server-fetch", "server-fetch", "mcp-fetch", "fetcher-mcp"}
	browserServers = []string{"@playwright/mcp", "server-puppeteer", "chrome-devtools-mcp", "playwright-mcp"}
)

func matchesAny(arg string, names []string) bool {
	for _, n := range names {
		if strings.Contains(arg, n) {
			return true
		}
	}
	return false
}
