// Package sandbox is least privilege for a server: a policy of what it may
// read and write, which of its host's environment it sees and whether it
// may reach the network (Spec, as a user writes it), made concrete for one
// start (Plan: absolute paths, the secrets' deny list applied) and enforced
// by the kernel in the process that becomes the server (Confine: Landlock
// on Linux, inherited by every descendant, escaped ones included).
//
// It decides and applies nothing else: the daemon plans, and the spawn or
// the shim's exec in place confines. It links nothing beyond the standard
// library and x/sys, as the lean run entry applies it.
package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Spec is a server's policy as a user writes it (run and ensure flags,
// [servers.NAME] keys): paths may start with ~ or be relative to the
// server's directory.
type Spec struct {
	// Enabled turns the sandbox on; the rest means nothing without it.
	Enabled bool `json:"enabled,omitempty"`
	// Read and Write are paths the server may read (and execute from), or
	// read and write, beneath; beside what every server reads (Plan).
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	// Env names the environment variables the server sees beyond the
	// base (BaseEnv); a name ending in * is a prefix.
	Env []string `json:"env,omitempty"`
	// Network is "all", "none", or a list of host:port (Hosts) the
	// server reaches through the egress proxy ("" is all).
	Network string `json:"network,omitempty"`
	// OpenFiles caps the files the server may hold open at once (its
	// RLIMIT_NOFILE); 0 is DefaultOpenFiles.
	OpenFiles int `json:"open_files,omitempty"`
}

// DefaultOpenFiles is a sandboxed server's open-files limit where its
// policy names none: ample for a stdio server, and a bound on one that
// leaks descriptors. A limit is only ever lowered: one already below it
// stays.
const DefaultOpenFiles = 4096

// maxOpenFiles bounds what a policy may ask: the kernel's usual nr_open.
const maxOpenFiles = 1 << 20

// Network modes.
const (
	NetworkAll  = "all"
	NetworkNone = "none"
)

// Validate says what is wrong with s, naming the setting and what to do.
func (s Spec) Validate() error {
	if _, err := s.Hosts(); err != nil {
		return err
	}
	if s.OpenFiles < 0 || s.OpenFiles > maxOpenFiles || s.OpenFiles > 0 && s.OpenFiles < 16 {
		return fmt.Errorf("open_files %d: want 16 to %d (0 for the default, %d)", s.OpenFiles, maxOpenFiles, DefaultOpenFiles)
	}
	for _, p := range append(slices.Clone(s.Read), s.Write...) {
		if strings.TrimSpace(p) == "" {
			return errors.New("an empty path in allow_read or allow_write: name a directory or file")
		}
	}
	for _, n := range s.Env {
		if n == "" || strings.ContainsAny(strings.TrimSuffix(n, "*"), "=*") {
			return fmt.Errorf("allow_env %q: want a variable name, or a prefix ending in *", n)
		}
	}
	return nil
}

// Context is what a plan is made in: the server's user, directory and
// program, and the supervisor's own state.
type Context struct {
	Home     string   // the user's home directory: ~ and the deny list
	Cwd      string   // the server's working directory
	Argv     []string // the server's command, its program resolved (Argv[0] absolute)
	StateDir string   // the supervisor's state: never the server's
	TempDir  string   // where the server's temporary files go ("" for /tmp)
	Env      []string // the environment it keeps: what presets read
}

// Rules is a policy made concrete for one start: what Confine applies.
// Paths are absolute and exist (they were found when planned).
type Rules struct {
	// Read are paths the server may read and execute from, beneath.
	Read []string `json:"read,omitempty"`
	// Write are paths it may also write, create in and remove from.
	Write []string `json:"write,omitempty"`
	// NoNetwork denies every TCP connect and bind, but binds to
	// BindPorts (a port-bound server's own port) and connects to
	// ConnectPorts (its egress proxy's).
	NoNetwork    bool  `json:"no_network,omitempty"`
	BindPorts    []int `json:"bind_ports,omitempty"`
	ConnectPorts []int `json:"connect_ports,omitempty"`
	// Hosts is the network list the egress proxy admits (NoNetwork is
	// set with it: the proxy is the only way out).
	Hosts []Host `json:"hosts,omitempty"`
	// Egress says how the proxy is reached and what that enforces, for
	// the start event (set by the daemon with the proxy).
	Egress string `json:"egress,omitempty"`
	// OpenFiles is the server's open-files limit (LimitResources).
	OpenFiles int `json:"open_files,omitempty"`
	// Preset names the preset that added to the rules (Preset), if one
	// did: what a user reads in the start event.
	Preset string `json:"preset,omitempty"`
	// Daemon is the supervisor's socket, which the server may not use: a
	// sandboxed server that could ask the daemon to run a command would
	// run it unconfined. Seatbelt denies it; on Linux the daemon refuses
	// the server's connections itself (by cgroup).
	Daemon string `json:"daemon,omitempty"`
	// Tag names the sandbox in the kernel's audit records: the server's
	// id (at most 15 bytes are kept), set by the daemon.
	Tag string `json:"tag,omitempty"`
}

// Covers says a rule of r opens path: it is one of r's paths or beneath
// one.
func (r Rules) Covers(path string) bool {
	for _, p := range append(slices.Clone(r.Read), r.Write...) {
		if within(path, p) {
			return true
		}
	}
	return false
}

// packageOf is what a server's program or script at p needs to read: the
// whole node_modules tree it is in (its dependencies are beside it, not
// under it), the prefix of a bin directory (a virtualenv's or a tool's
// lib/ beside its bin/), or the directory of any other file.
func packageOf(p string) string {
	if i := strings.Index(p, "/node_modules/"); i >= 0 {
		return p[:i+len("/node_modules")]
	}
	st, err := os.Stat(p)
	if err != nil || st.IsDir() {
		return p
	}
	dir := filepath.Dir(p)
	if filepath.Base(dir) == "bin" && filepath.Dir(dir) != "/" && filepath.Dir(dir) != "/usr" {
		return filepath.Dir(dir)
	}
	return dir
}

// systemRead is what every sandboxed server reads: the system's programs,
// libraries and configuration, and the kernel's views of itself. None of
// it holds a user's secrets (the system's own, such as /etc/shadow, are
// closed to the user already).
var systemRead = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc", "/opt", "/nix/store", "/proc", "/sys",
	"/run/systemd/resolve", // where /etc/resolv.conf points on systemd machines
}

// packageCaches are where package runners keep what they run (npx, uvx,
// pnpm dlx, bunx, pipx, go install, cargo install, version managers):
// read-only, beneath the user's home.
var packageCaches = []string{
	".npm", ".cache", ".local/share/uv", ".local/share/pnpm", ".local/pipx",
	".local/bin", ".local/lib", ".bun", ".nvm", ".volta", ".fnm", ".deno",
	".pyenv", ".rbenv", ".cargo/bin", "go/bin", "go/pkg/mod", ".asdf", ".local/share/mise",
}

// deniedSecrets are where a user's credentials live, beneath the home:
// closed even under a rule that covers them, unless a rule names one
// (or a path beneath it) itself.
var deniedSecrets = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker/config.json",
	".netrc", ".npmrc", ".pypirc", ".git-credentials", ".password-store",
	".config/gcloud", ".config/gh", ".config/hub", ".config/op", ".config/doctl",
	".config/google-chrome", ".config/chromium", ".config/BraveSoftware",
	".config/microsoft-edge", ".mozilla", ".thunderbird", ".local/share/keyrings",
	".terraform.d/credentials.tfrc.json", ".vault-token", ".cargo/credentials.toml",
	"Library/Keychains", "Library/Application Support/Google/Chrome",
	"Library/Application Support/Firefox",
}

// Denied lists the secrets' paths in ctx: the deny list beneath the home,
// and the supervisor's state directory.
func Denied(ctx Context) []string {
	var out []string
	for _, d := range deniedSecrets {
		out = append(out, filepath.Join(ctx.Home, d))
	}
	if ctx.StateDir != "" {
		out = append(out, ctx.StateDir)
	}
	return out
}

// Plan makes spec concrete in ctx: the system, the package caches, the
// server's program and arguments and its directory are readable; the
// temporary directory and /dev writable; spec's paths added; and every
// secret of the deny list closed, by splitting a rule that covers one into
// rules for its other entries. A path that does not exist is left out: a
// rule cannot name it.
func Plan(spec Spec, ctx Context) (Rules, error) {
	if err := spec.Validate(); err != nil {
		return Rules{}, err
	}
	if ctx.Home == "" || !filepath.IsAbs(ctx.Home) {
		return Rules{}, fmt.Errorf("no home directory to plan a sandbox in (HOME is %q)", ctx.Home)
	}
	tmp := ctx.TempDir
	if tmp == "" {
		tmp = "/tmp"
	}
	abs := func(p string) string {
		switch {
		case p == "~":
			p = ctx.Home
		case strings.HasPrefix(p, "~/"):
			p = filepath.Join(ctx.Home, p[2:])
		case !filepath.IsAbs(p):
			p = filepath.Join(ctx.Cwd, p)
		}
		return filepath.Clean(p)
	}
	// What the user named: it may open a secret.
	var named []string
	for _, p := range append(slices.Clone(spec.Read), spec.Write...) {
		named = append(named, abs(p))
	}
	var read, write []string
	read = append(read, systemRead...)
	for _, c := range packageCaches {
		read = append(read, filepath.Join(ctx.Home, c))
	}
	preset, add := Preset(ctx.Argv, ctx.Cwd, ctx.Env)
	// A fetch or browser server gets nothing of the home, its directory
	// included when that is in the home (presets.go).
	awayFromHome := (preset == PresetFetch || preset == PresetBrowser) && ctx.Home != "" && within(ctx.Cwd, ctx.Home)
	if ctx.Cwd != "" && !awayFromHome {
		read = append(read, ctx.Cwd)
	}
	for i, a := range ctx.Argv {
		if i > 0 && !strings.HasPrefix(a, "/") && !strings.HasPrefix(a, "./") && !strings.HasPrefix(a, "../") {
			continue // a word, not a path: only explicit paths are read
		}
		read = append(read, packageOf(abs(a)))
	}
	for _, p := range spec.Read {
		read = append(read, abs(p))
	}
	write = append(write, tmp, "/dev")
	for _, p := range spec.Write {
		write = append(write, abs(p))
	}
	for _, p := range add.Write {
		write = append(write, abs(p))
	}
	denied := openSecrets(Denied(ctx), named)
	hosts, err := spec.Hosts()
	if err != nil {
		return Rules{}, err
	}
	r := Rules{
		Read:      confine(read, denied),
		Write:     confine(write, denied),
		NoNetwork: spec.Network == NetworkNone || hosts != nil,
		Hosts:     hosts,
		Preset:    preset,
		OpenFiles: cmp.Or(spec.OpenFiles, DefaultOpenFiles),
	}
	return r, nil
}

// openSecrets is the deny list less what a user's rule names (the path
// itself, or one beneath it), resolved through symlinks so a link cannot
// name a secret by another path.
func openSecrets(denied, named []string) []string {
	var out []string
	for _, d := range denied {
		opened := false
		for _, n := range named {
			if within(n, d) {
				opened = true
			}
		}
		if opened {
			continue
		}
		out = append(out, d)
		if real, err := filepath.EvalSymlinks(d); err == nil && real != d {
			out = append(out, real)
		}
	}
	return out
}

// confine turns rules into rules that exist and cover no denied path:
// one that covers a denied path is replaced by rules for each of its
// entries that is not denied (recursively, down to the denied path's
// parent); one within a denied path is dropped. Duplicates and rules
// within another rule go.
func confine(rules, denied []string) []string {
	var out []string
	for _, r := range rules {
		real, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue // missing: nothing to allow
		}
		out = append(out, split(real, denied)...)
	}
	sort.Strings(out)
	var kept []string
	for _, p := range out {
		if n := len(kept); n > 0 && within(p, kept[n-1]) {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// split is rule p without the denied paths beneath it.
func split(p string, denied []string) []string {
	var below []string
	for _, d := range denied {
		if within(p, d) {
			return nil // inside a secret: dropped
		}
		if within(d, p) {
			below = append(below, d)
		}
	}
	if len(below) == 0 {
		return []string{p}
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil // cannot be split: nothing rather than the secret
	}
	var out []string
	for _, e := range entries {
		child := filepath.Join(p, e.Name())
		real, err := filepath.EvalSymlinks(child)
		if err != nil {
			continue
		}
		// A link's target is what a rule on it opens: it is judged by
		// that, so ~/keys -> ~/.ssh stays closed.
		out = append(out, split(real, denied)...)
	}
	return out
}

// within says p is base or beneath it.
func within(p, base string) bool {
	if p == base {
		return true
	}
	if base == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, base+"/")
}

// BaseEnv is what every sandboxed server sees of its host's environment:
// where to find programs, who and where it is, its locale and terminal,
// where temporary files and TLS roots are. Secrets are not among them.
var BaseEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*",
	"TERM", "COLORTERM", "TZ", "TMPDIR", "TMP", "TEMP",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
	"SUPERVISOR_*", // the markers
}

// FilterEnv keeps of env the variables BaseEnv and allow name.
func FilterEnv(env, allow []string) []string {
	names := append(slices.Clone(BaseEnv), allow...)
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		for _, n := range names {
			if prefix, ok := strings.CutSuffix(n, "*"); ok && strings.HasPrefix(k, prefix) || k == n {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

// Prepare makes spec concrete for one start of a command (ctx.Argv, its
// program resolved) whose environment is env, of which given names what
// its host set for it by name (a host config's env block): the rules, and
// the environment it keeps. Its temporary directory is the TMPDIR it
// keeps, where ctx names none.
func Prepare(spec Spec, ctx Context, env, given []string) (Rules, []string, error) {
	kept := FilterEnv(env, append(slices.Clone(spec.Env), given...))
	ctx.Env = kept
	if ctx.TempDir == "" {
		for _, kv := range kept {
			if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
				ctx.TempDir = v
			}
		}
	}
	r, err := Plan(spec, ctx)
	return r, kept, err
}

// Summary is r in a few words, for a start event: its rules' counts, how
// many of total variables it keeps, its network and its preset.
func (r Rules) Summary(kept, total int) string {
	net := "network all"
	switch {
	case r.Hosts != nil:
		net = fmt.Sprintf("network %d hosts through the egress proxy", len(r.Hosts))
		if r.Egress != "" {
			net += " (" + r.Egress + ")"
		}
	case r.NoNetwork:
		net = "no network"
	}
	if r.Preset != "" {
		net += ", preset " + r.Preset
	}
	return fmt.Sprintf("sandboxed: %d read rules, %d write, %d of %d variables, %s", len(r.Read), len(r.Write), kept, total, net)
}
