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
//     write.
//
// The secrets' deny list holds under a preset as under any rule.
func Preset(argv []string, cwd string) (name string, add Spec) {
	abs := func(p string) string {
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		return filepath.Clean(p)
	}
	for i, a := range argv {
		switch {
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
		}
	}
	return "", Spec{}
}
