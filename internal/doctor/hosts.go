package doctor

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/seed-86a41135/supervisor/internal/hosts"
)

// KindUnwrappedHost is an agent host config file with stdio MCP servers
// that `supervisor run` does not wrap: the host starts them itself, and
// they leak when it dies.
const KindUnwrappedHost Kind = "unwrapped-host"

// KindUnresolvableCommand is an agent host config file whose wrapped
// servers run a supervisor command the host cannot start: the bare name
// not on PATH, or an absolute path that is gone. The host fails to start
// every one of them.
const KindUnresolvableCommand Kind = "unresolvable-command"

// checkHosts reports the host config files (per-user ones, found from
// HOME and the hosts' variables read through Getenv) that hold unwrapped
// stdio servers, and those whose wrapped servers run a supervisor command
// that does not resolve on PATH (Getenv's: a host started from a desktop
// may have a shorter one). Without a home directory there is nothing to
// read.
func (d *Doctor) checkHosts() []Finding {
	home := d.getenv("HOME")
	if home == "" {
		home = d.getenv("USERPROFILE")
	}
	if home == "" {
		return nil
	}
	env := hosts.Env{GOOS: runtime.GOOS, Home: home, Getenv: d.getenv}
	rs, err := hosts.Status(hosts.All(), hosts.Options{Env: &env})
	if err != nil {
		return nil
	}
	var out []Finding
	for _, r := range rs {
		if r.Exists && r.Err == nil {
			for _, c := range hosts.Unresolvable(r, d.getenv("PATH")) {
				out = append(out, Finding{
					Kind: KindUnresolvableCommand,
					Path: r.File.Path,
					Evidence: fmt.Sprintf("%s runs %d wrapped server(s) through %q, which it cannot start: %s; affected: %s",
						r.File.Host, len(c.Servers), c.Command, c.Problem, strings.Join(c.Servers, ", ")),
					Fix: c.Fix(r.File.Host),
				})
			}
		}
		var names []string
		for _, e := range r.Entries {
			if e.Action == hosts.IsUnwrapped {
				names = append(names, e.Name)
			}
		}
		if !r.Exists || r.Err != nil || len(names) == 0 {
			continue
		}
		out = append(out, Finding{
			Kind: KindUnwrappedHost,
			Path: r.File.Path,
			Evidence: fmt.Sprintf("%s starts %d stdio MCP server(s) itself, not through `supervisor run`: %s",
				r.File.Host, len(names), strings.Join(names, ", ")),
			Fix: fmt.Sprintf("`supervisor install %s` (add --dry-run to see the change first)", r.File.Host),
		})
	}
	return out
}
