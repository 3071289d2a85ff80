package sandbox

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Learned is what a server needed beyond what its sandbox gives it anyway
// (the rules it was planned), as learnt by watching it run unconfined
// (Watch): paths to allow, the secrets it asked for (never allowed by
// learning: a user names one in a rule if it must), and the addresses it
// connected to.
type Learned struct {
	Read, Write []string
	Secrets     []string
	Hosts       []string // address:port, as connected to
}

// collapseAt is how many paths of one directory make the directory one
// rule instead.
const collapseAt = 3

// Learn makes touched (each path and how) and hosts into what base lacks.
// A read of a path that does not exist is a probe (module resolution
// tries many), not a need: passed over. A write allows the directory it
// is in, which making, replacing or removing a file needs (a directory
// made where one was is not noted: Watch). /proc, /sys and /dev are
// the system's. Paths are never collapsed into home or /.
func Learn(base Rules, denied []string, home string, touched map[string]Access, hosts []string) Learned {
	var l Learned
	var read, write []string
	for p, a := range touched {
		p = resolved(p)
		if within(p, "/proc") || within(p, "/sys") || within(p, "/dev") {
			continue
		}
		secret := slices.ContainsFunc(denied, func(d string) bool { return within(p, d) })
		if a.Write && !coveredBy(p, base.Write) {
			if secret {
				l.Secrets = append(l.Secrets, p)
				continue
			}
			write = append(write, filepath.Dir(p))
			continue
		}
		if (a.Read || a.Exec) && !base.Covers(p) {
			if _, err := os.Stat(p); err != nil {
				continue // a probe for what is not there
			}
			if secret {
				l.Secrets = append(l.Secrets, p)
				continue
			}
			read = append(read, p)
		}
	}
	l.Write = collapse(write, home)
	// A path written is read there too: no read rule beneath a write one.
	for _, p := range collapse(read, home) {
		if !coveredBy(p, l.Write) {
			l.Read = append(l.Read, p)
		}
	}
	slices.Sort(l.Secrets)
	for _, h := range hosts {
		if ap, err := netip.ParseAddrPort(h); err == nil && ap.Port() != 53 {
			l.Hosts = append(l.Hosts, h)
		}
	}
	slices.Sort(l.Hosts)
	return l
}

// resolved is p through its symlinks, as Landlock judges it (its
// directory's, for a path gone since).
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(d, filepath.Base(p))
	}
	return p
}

func coveredBy(p string, rules []string) bool {
	return slices.ContainsFunc(rules, func(r string) bool { return within(p, r) })
}

// collapse drops paths beneath another of paths, and makes collapseAt or
// more of one directory that directory (but home or /).
func collapse(paths []string, home string) []string {
	slices.Sort(paths)
	paths = slices.Compact(paths)
	byDir := map[string]int{}
	for _, p := range paths {
		byDir[filepath.Dir(p)]++
	}
	var out []string
	for _, p := range paths {
		if d := filepath.Dir(p); byDir[d] >= collapseAt && d != home && d != "/" {
			p = d
		}
		out = append(out, p)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	var kept []string
	for _, p := range out {
		if !slices.ContainsFunc(kept, func(k string) bool { return within(p, k) }) {
			kept = append(kept, p)
		}
	}
	return kept
}

// TOML is l as a config section for server name, paths beneath home
// written with ~, with what it did not add said in comments.
func (l Learned) TOML(name, home, command string) string {
	tilde := func(p string) string {
		if home != "" && within(p, home) {
			return "~" + strings.TrimPrefix(p, home)
		}
		return p
	}
	list := func(ps []string) string {
		q := make([]string, len(ps))
		for i, p := range ps {
			q[i] = fmt.Sprintf("%q", tilde(p))
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Learnt by `supervisor sandbox learn` from: %s\n", command)
	b.WriteString("# What it needed beyond every sandboxed server's rules. Add it to your\n# config file (supervisor config path), and read it first.\n")
	fmt.Fprintf(&b, "[servers.%s]\nsandbox = true\n", quoteName(name))
	if len(l.Read) > 0 {
		fmt.Fprintf(&b, "allow_read = %s\n", list(l.Read))
	}
	if len(l.Write) > 0 {
		fmt.Fprintf(&b, "allow_write = %s\n", list(l.Write))
	}
	if len(l.Hosts) == 0 {
		b.WriteString("network = \"none\"\n")
	} else {
		b.WriteString("# It connected to: " + strings.Join(l.Hosts, ", ") + ".\n")
		b.WriteString("# Names are better than the addresses they had: narrow this to\n# network = \"api.example.com:443,...\" where you know them.\n")
		b.WriteString("network = \"all\"\n")
	}
	if len(l.Secrets) > 0 {
		b.WriteString("# It asked for secrets; none is allowed by learning (name one in a rule\n# if the server must have it):\n")
		for _, s := range l.Secrets {
			fmt.Fprintf(&b, "#   %s\n", tilde(s))
		}
	}
	b.WriteString("# Not learnt: the environment variables it reads (allow_env).\n")
	return b.String()
}

// quoteName is name as a TOML key.
func quoteName(name string) string {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Sprintf("%q", name)
		}
	}
	return name
}
