package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// BareName is what files meant to be committed (and installs from a
// temporary location) get as the command: hosts find it on PATH.
const BareName = "supervisor"

// BackupSuffix names the copy of a file's original kept beside it.
const BackupSuffix = ".supervisor-backup"

// Options configure Install, Uninstall and Status. Zero fields take the
// defaults documented on them.
type Options struct {
	// DryRun prints to Out a unified diff of each change and writes nothing.
	DryRun bool
	// Hooks also adds (Install) or removes (Uninstall) the SessionEnd hooks
	// of the hosts that have them (Claude Code, Gemini CLI).
	Hooks bool
	// Project is a project directory whose files (.mcp.json,
	// .vscode/mcp.json, ...) are included; empty: per-user files only.
	Project string
	// Exe is the running supervisor binary; default os.Executable().
	Exe string
	// Env locates the host files; default CurrentEnv().
	Env *Env
	// TempDirs hold binaries that will not be there tomorrow (go run's
	// cache, temp dirs): an Exe under one is written as BareName. Default:
	// os.TempDir(), /tmp, /var/tmp, $GOTMPDIR, $GOCACHE, the user cache's
	// go-build.
	TempDirs []string
	// Out receives notes and diffs; default io.Discard.
	Out io.Writer
	// Warn receives warnings (what Force overrode); default Out.
	Warn io.Writer
	// Force makes Install write the bare name BareName even when PATH
	// (Env's) would not find this binary under it; it warns instead of
	// refusing.
	Force bool
	// Share names the servers to wrap shared (`run --share`: one process
	// for every session, design §11); an entry wrapped already without it
	// is re-wrapped.
	Share []string
	// Lazy names the servers to wrap lazy (`run --lazy`: started on the
	// first call their cache cannot answer, design §11), likewise.
	Lazy []string
	// Sandbox names the servers to wrap sandboxed (`run --sandbox`:
	// least privilege, docs/sandbox.md).
	Sandbox []string

	// leanFast says whether the lean run entry can take its fast path
	// on this machine (nil: Linux with pidfd exit status, 6.15+; tests
	// set it). Elsewhere it would only hand every run to `supervisor run`,
	// one process start later, so servers are wrapped in that.
	leanFast func() bool

	// beforeWrite runs between the edit and the re-read that precedes the
	// write: tests use it to change the file under our feet.
	beforeWrite func(path string)
	// beforeRename runs right before the final comparison and rename
	// (tests: a host writing the file while ours is being written).
	beforeRename func(path string)
}

// Action says what happened (or, with DryRun, would happen) to a server.
type Action string

const (
	Wrapped    Action = "wrapped"     // Install wrapped it
	Already    Action = "already"     // it was wrapped already, left as is
	Repinned   Action = "repinned"    // wrapped by a binary that moved; now this one
	Shared     Action = "shared"      // wrapped already; now shared (--share)
	Lazy       Action = "lazy"        // wrapped already; now lazy (--lazy)
	Sandboxed  Action = "sandboxed"   // wrapped already; now sandboxed (--sandbox)
	Unwrapped  Action = "unwrapped"   // Uninstall put it back
	NotWrapped Action = "not-wrapped" // Uninstall found it unwrapped
	Remote     Action = "remote"      // a network server, left alone
	NoCommand  Action = "no-command"  // nothing to wrap (an extension, a builtin)
	// KeptWrapped: Uninstall restored the backup, in which it was wrapped
	// already (by hand, or an install before the backup).
	KeptWrapped Action = "kept-wrapped"
	// Status only:
	IsWrapped   Action = "is-wrapped"
	IsUnwrapped Action = "is-unwrapped"
)

// Entry is one server of a file and what happened to it.
type Entry struct {
	Name   string `json:"name"`
	Action Action `json:"action"`
	// Command is a wrapped server's wrapper command (Status only).
	Command string `json:"command,omitempty"`
}

// Result is what happened to one file.
type Result struct {
	File    File
	Exists  bool
	Changed bool // written (with DryRun: would be)
	// Command is what Install wraps this file's servers in: this binary's
	// absolute path, or BareName.
	Command string
	Entries []Entry
	Err     error
}

// Count counts the entries with action a.
func (r Result) Count(a Action) int {
	n := 0
	for _, e := range r.Entries {
		if e.Action == a {
			n++
		}
	}
	return n
}

func (o *Options) out() io.Writer {
	if o.Out == nil {
		return io.Discard
	}
	return o.Out
}

func (o *Options) warn() io.Writer {
	if o.Warn == nil {
		return o.out()
	}
	return o.Warn
}

func (o *Options) env() (Env, error) {
	if o.Env != nil {
		return *o.Env, nil
	}
	return CurrentEnv()
}

func (o *Options) exe() (string, error) {
	if o.Exe != "" {
		return o.Exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate this binary: %w", err)
	}
	return exe, nil
}

// command is what goes in the command field of f: the bare name in files
// meant to be committed, the absolute path of this binary elsewhere
// (unless it lives in a temporary place; why says so).
func (o *Options) command(f File) (cmd, why string, err error) {
	exe, err := o.exe()
	if err != nil {
		return "", "", err
	}
	if f.Project {
		return BareName, "", nil
	}
	if dst, why, err := o.settled(exe); err != nil || dst != "" {
		return dst, why, err
	}
	if dir := o.temporary(exe); dir != "" {
		return BareName, fmt.Sprintf("this supervisor runs from a temporary location (%s is under %s): writing the bare name %q, which hosts look up on PATH; install the binary (e.g. `go install`) and rerun to pin its absolute path", exe, dir, BareName), nil
	}
	return exe, "", nil
}

// TemporaryDir returns the temporary directory (the temp dir, the Go build
// cache, ...) exe lives under, or "": a path that will not outlive the
// build is no path to write into a config or a service unit.
func TemporaryDir(exe string) string { return (&Options{}).temporary(exe) }

// temporary returns the temporary directory exe lives under, or "".
func (o *Options) temporary(exe string) string {
	dirs := o.TempDirs
	if dirs == nil {
		dirs = []string{os.TempDir(), "/tmp", "/var/tmp", os.Getenv("GOTMPDIR"), os.Getenv("GOCACHE")}
		if c, err := os.UserCacheDir(); err == nil {
			dirs = append(dirs, filepath.Join(c, "go-build"))
		}
	}
	exes := []string{exe}
	if r, err := filepath.EvalSymlinks(exe); err == nil && r != exe {
		exes = append(exes, r)
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		ds := []string{d}
		if r, err := filepath.EvalSymlinks(d); err == nil && r != d {
			ds = append(ds, r)
		}
		for _, x := range exes {
			for _, dd := range ds {
				if rel, err := filepath.Rel(dd, x); err == nil && filepath.IsLocal(rel) {
					return d
				}
			}
		}
	}
	return ""
}

// files lists the config files of hs.
func (o *Options) files(hs []Host) ([]File, error) {
	e, err := o.env()
	if err != nil {
		return nil, err
	}
	var out []File
	for _, h := range hs {
		out = append(out, h.Files(e, o.Project)...)
	}
	return out, nil
}

// Install wraps every stdio server of hs's files (and, with Hooks, adds
// their SessionEnd hooks). Each file has its own Result; the error is for
// what stops everything. When it would write the bare name BareName
// anywhere and PATH does not find this binary under that name, it writes
// nothing and returns a *BareCommandError: the hosts could not start the
// servers it wraps. Force writes anyway, with a warning.
func Install(hs []Host, o Options) ([]Result, error) {
	files, err := o.files(hs)
	if err != nil {
		return nil, err
	}
	bare, err := o.writesBare(hs, files)
	if err != nil {
		return nil, err
	}
	if bare {
		if err := o.checkBare(); err != nil {
			var be *BareCommandError
			if !o.Force || !errors.As(err, &be) {
				return nil, err
			}
			fmt.Fprintf(o.warn(), "warning: %v; writing it anyway (--force): until `supervisor` on PATH is this binary the hosts cannot start the wrapped servers\n", err)
		}
	}
	if err := o.settle(); err != nil {
		return nil, err
	}
	var out []Result
	noted := false
	for _, f := range files {
		cmd, why, err := o.command(f)
		if err != nil {
			return nil, err
		}
		r := o.apply(f, func(src []byte) ([]byte, []Entry, error) { return wrapAll(f, src, cmd, o) })
		if r.Exists {
			r.Command = cmd
		}
		if r.Changed && why != "" && !noted {
			fmt.Fprintf(o.out(), "note: %s\n", why)
			noted = true
		}
		out = append(out, r)
	}
	if o.Hooks {
		hr, err := o.installHooks(hs)
		if err != nil {
			return nil, err
		}
		out = append(out, hr...)
	}
	return out, nil
}

// Uninstall puts every wrapped server of hs's files back (and, with Hooks,
// removes the SessionEnd hooks Install added). A file that is exactly what
// Install made of its backup gets the backup back, byte for byte.
func Uninstall(hs []Host, o Options) ([]Result, error) {
	files, err := o.files(hs)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, f := range files {
		cmd, _, err := o.command(f)
		if err != nil {
			return nil, err
		}
		r := o.apply(f, func(src []byte) ([]byte, []Entry, error) {
			restored, entries, err := unwrapAll(f, src)
			if err != nil {
				return nil, nil, err
			}
			if b, err := readBackup(f.Path); err == nil {
				if w, _, err := wrapAll(f, b, cmd, o); err == nil && bytes.Equal(w, src) {
					return b, keptWrapped(f, b, entries), nil
				}
			}
			return restored, entries, nil
		})
		if r.Err == nil && !o.DryRun {
			dropBackup(f.Path)
		}
		out = append(out, r)
	}
	if o.Hooks {
		hr, err := o.uninstallHooks(hs)
		if err != nil {
			return nil, err
		}
		out = append(out, hr...)
	}
	return out, nil
}

// Status reads hs's files and says which servers are wrapped.
func Status(hs []Host, o Options) ([]Result, error) {
	files, err := o.files(hs)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, f := range files {
		r := Result{File: f}
		src, err := os.ReadFile(f.Path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				r.Exists, r.Err = true, err
			}
			out = append(out, r)
			continue
		}
		r.Exists = true
		err = eachServer(f, src, func(s Schema, srv Server) error {
			a := IsUnwrapped
			switch {
			case srv.Remote:
				a = Remote
			case srv.NoCommand:
				a = NoCommand
			case isWrapped(srv):
				a = IsWrapped
			}
			e := Entry{Name: srv.Name, Action: a}
			if a == IsWrapped {
				e.Command = srv.Command
			}
			r.Entries = append(r.Entries, e)
			return nil
		})
		r.Err = fileError(f.Path, err)
		out = append(out, r)
	}
	return out, nil
}

// eachServer calls fn for every server of every server map of src.
func eachServer(f File, src []byte, fn func(Schema, Server) error) error {
	ed, err := editorFor(f.Format)
	if err != nil {
		return err
	}
	schemas, err := f.Schemas(src)
	if err != nil {
		return err
	}
	lists, err := listAll(ed, src, schemas)
	if err != nil {
		return err
	}
	for i, servers := range lists {
		for _, srv := range servers {
			if err := fn(schemas[i], srv); err != nil {
				return err
			}
		}
	}
	return nil
}

// listAll lists the servers of every schema of src, from one parse where
// the editor can (see jsonEditor.ListAll).
func listAll(ed Editor, src []byte, schemas []Schema) ([][]Server, error) {
	if m, ok := ed.(interface {
		ListAll([]byte, []Schema) ([][]Server, error)
	}); ok {
		lists, err := m.ListAll(src, schemas)
		if lists == nil && err == nil {
			lists = make([][]Server, len(schemas))
		}
		return lists, err
	}
	lists := make([][]Server, len(schemas))
	for i, s := range schemas {
		servers, err := ed.List(src, s)
		if err != nil {
			return nil, err
		}
		lists[i] = servers
	}
	return lists, nil
}

// wrapAll wraps every stdio server of src that is not wrapped yet, and
// re-pins those wrapped by a supervisor binary at another absolute path.
func wrapAll(f File, src []byte, cmd string, o Options) ([]byte, []Entry, error) {
	ed, err := editorFor(f.Format)
	if err != nil {
		return nil, nil, err
	}
	out := src
	var entries []Entry
	runEntry := o.runEntries(cmd)
	err = eachServer(f, src, func(s Schema, srv Server) error {
		var a Action
		var err error
		switch {
		case srv.Remote:
			a = Remote
		case srv.NoCommand:
			a = NoCommand
		case isWrapped(srv):
			a = Already
			flags, added := runFlags(srv, o)
			entry, pre := runEntry(flags)
			if added != "" || isAbs(srv.Command) && isAbs(entry) && srv.Command != entry {
				a = Repinned
				switch added {
				case "--share":
					a = Shared
				case "--lazy":
					a = Lazy
				case "--sandbox":
					a = Sandboxed
				}
				if out, err = ed.Unwrap(out, s, srv.Name); err == nil {
					out, err = ed.Wrap(out, s, srv.Name, entry, append(slices.Clone(pre), rewrapPrefix(srv, flags)...))
				}
			}
		default:
			a = Wrapped
			flags, _ := runFlags(srv, o)
			entry, pre := runEntry(flags)
			out, err = ed.Wrap(out, s, srv.Name, entry, append(slices.Clone(pre), runPrefix(srv.Name, flags)...))
		}
		if err != nil {
			return err
		}
		entries = append(entries, Entry{Name: srv.Name, Action: a})
		return nil
	})
	return out, entries, err
}

// unwrapAll puts every wrapped server of src back.
func unwrapAll(f File, src []byte) ([]byte, []Entry, error) {
	ed, err := editorFor(f.Format)
	if err != nil {
		return nil, nil, err
	}
	out := src
	var entries []Entry
	err = eachServer(f, src, func(s Schema, srv Server) error {
		a := NotWrapped
		switch {
		case srv.Remote:
			a = Remote
		case srv.NoCommand:
			a = NoCommand
		case isWrapped(srv):
			var err error
			if out, err = ed.Unwrap(out, s, srv.Name); err != nil {
				return err
			}
			a = Unwrapped
		}
		entries = append(entries, Entry{Name: srv.Name, Action: a})
		return nil
	})
	return out, entries, err
}

// keptWrapped marks the entries that are wrapped in the backup being
// restored.
func keptWrapped(f File, backup []byte, entries []Entry) []Entry {
	was := map[string]bool{}
	// A backup that does not parse marks nothing kept: its entries read
	// as unwrapped, which is what restoring it gives.
	_ = eachServer(f, backup, func(_ Schema, srv Server) error {
		was[srv.Name] = isWrapped(srv) && !srv.Remote && !srv.NoCommand
		return nil
	})
	for i, e := range entries {
		if e.Action == Unwrapped && was[e.Name] {
			entries[i].Action = KeptWrapped
		}
	}
	return entries
}

// runFlags are the run flags srv is wrapped with: --share, --lazy and
// --sandbox as
// o asks for them or its wrapped command has them already, and the first
// one o adds ("" if none).
func runFlags(srv Server, o Options) (flags []string, added string) {
	var have []string
	if isWrapped(srv) {
		have = srv.Args
		if i := slices.Index(have, "--"); i >= 0 {
			have = have[:i] // the server's own arguments are not ours
		}
	}
	for _, f := range []struct {
		flag  string
		names []string
	}{{"--share", o.Share}, {"--lazy", o.Lazy}, {"--sandbox", o.Sandbox}} {
		switch {
		case slices.Contains(have, f.flag):
			flags = append(flags, f.flag)
		case slices.Contains(f.names, srv.Name):
			flags = append(flags, f.flag)
			if added == "" {
				added = f.flag
			}
		}
	}
	return flags, added
}

// rewrapPrefix is the run prefix of a wrapped srv wrapped again: its own
// (flags added by hand, --idle D, --grace D, kept) with the flags o adds
// put after run.
func rewrapPrefix(srv Server, flags []string) []string {
	i := slices.Index(srv.Args, "--")
	if i < 0 {
		return runPrefix(srv.Name, flags)
	}
	pre := slices.Clone(srv.Args[:i+1])
	if supervisorCommand(srv.Command) && len(pre) > 0 && pre[0] == "run" {
		pre = pre[1:] // runEntries puts it back where the entry needs it
	}
	var add []string
	for _, f := range flags {
		if !slices.Contains(pre, f) {
			add = append(add, f)
		}
	}
	return slices.Insert(pre, 0, add...)
}

// runPrefix are a wrapped server's arguments before its own command, but
// for the run entry's (runEntries).
func runPrefix(name string, flags []string) []string {
	return append(append(slices.Clone(flags), "--name", name), "--")
}

// LeanName is the lean run entry (cmd/supervisor-run), installed beside
// supervisor on Linux and macOS: it starts a server sooner than
// `supervisor run` (it links only what that takes), and hands every run
// but its fast path to `supervisor run`.
const LeanName = "supervisor-run"

// runEntries are what wrapped servers' commands start with, for a file
// whose command is cmd: the lean entry beside cmd where this binary has
// one beside it (and cmd is a path, not the bare name a committed file
// gets) and it has a fast path here (leanFast), else cmd and its run
// subcommand. A server wrapped --share (and not --lazy) keeps
// `supervisor run`: it runs through a broker, which the lean entry would
// hand it to anyway, one process start later. A lazy one takes the lean
// entry, which answers its host from the cache itself. Looked at once per
// file.
func (o *Options) runEntries(cmd string) func(flags []string) (string, []string) {
	full := func([]string) (string, []string) { return cmd, []string{"run"} }
	if !isAbs(cmd) {
		return full
	}
	fast := o.leanFast
	if fast == nil {
		fast = func() bool { return runtime.GOOS == "linux" && proc.ExitInfoSupported() }
	}
	exe, err := o.exe()
	if err != nil || !fast() {
		return full
	}
	if st, err := os.Stat(filepath.Join(filepath.Dir(exe), LeanName)); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return full
	}
	lean := filepath.Join(filepath.Dir(cmd), LeanName)
	return func(flags []string) (string, []string) {
		if slices.Contains(flags, "--share") && !slices.Contains(flags, "--lazy") {
			return full(flags)
		}
		return lean, nil
	}
}

// isWrapped: the command is a supervisor binary and its arguments start
// with run, or it is the lean entry and a command follows its "--".
func isWrapped(srv Server) bool {
	return supervisorCommand(srv.Command) && len(srv.Args) > 0 && srv.Args[0] == "run" ||
		leanCommand(srv.Command) && slices.Contains(srv.Args, "--")
}

// isAbs recognizes absolute paths of any OS (a file may come from another).
func isAbs(p string) bool {
	return strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\\`) ||
		(len(p) > 2 && p[1] == ':' && (p[2] == '\\' || p[2] == '/'))
}

// fileError says which file a syntax error is in, as file:line:col: why.
func fileError(path string, err error) error {
	var se *SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s:%d:%d: %s", path, se.Line, se.Col, se.Msg)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// apply runs edit on f's bytes and writes the result safely; see write.
func (o *Options) apply(f File, edit func([]byte) ([]byte, []Entry, error)) Result {
	return o.applyCheck(f, edit, func(b []byte) error {
		return eachServer(f, b, func(Schema, Server) error { return nil })
	})
}

// applyCheck is apply with check saying whether the edited bytes parse.
func (o *Options) applyCheck(f File, edit func([]byte) ([]byte, []Entry, error), check func([]byte) error) Result {
	r := Result{File: f}
	real, err := filepath.EvalSymlinks(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return r
	}
	r.Exists = true
	if err != nil {
		r.Err = fmt.Errorf("%s: %w", f.Path, err)
		return r
	}
	src, err := os.ReadFile(real)
	if err != nil {
		r.Err = fmt.Errorf("%s: %w", f.Path, err)
		return r
	}
	out, entries, err := edit(src)
	r.Entries = entries
	if err != nil {
		r.Err = fileError(f.Path, err)
		return r
	}
	if bytes.Equal(out, src) {
		return r
	}
	r.Changed = true
	if o.DryRun {
		fmt.Fprint(o.out(), UnifiedDiff(f.Path, f.Path, src, out))
		return r
	}
	written, err := o.write(f.Path, real, src, out, func(fresh []byte) ([]byte, error) {
		out, entries, err := edit(fresh)
		r.Entries = entries
		return out, err
	}, check)
	r.Err = err
	r.Changed = written
	return r
}

// npxCache returns npx's cache directory exe runs from (`npx -y <package>`
// runs the binary from ~/.npm/_npx/<hash>/node_modules/...), or "". npm
// cleans that cache when it likes, so a path into it is no path to pin.
func npxCache(exe string) string {
	dir := filepath.Dir(exe)
	for {
		if filepath.Base(dir) == "_npx" {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// StableBinDir is where a binary run from npx's cache settles before its
// path goes into host configs: the user's data directory, which nothing
// cleans. $XDG_DATA_HOME/supervisor/bin (default ~/.local/share/...),
// ~/Library/Application Support/supervisor/bin on macOS,
// %LOCALAPPDATA%\supervisor\bin on Windows.
func StableBinDir(e Env) string {
	switch e.GOOS {
	case "windows":
		if d := e.getenv("LOCALAPPDATA"); d != "" {
			return filepath.Join(d, "supervisor", "bin")
		}
		return filepath.Join(e.Home, "AppData", "Local", "supervisor", "bin")
	case "darwin":
		return filepath.Join(e.Home, "Library", "Application Support", "supervisor", "bin")
	}
	if d := e.getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "supervisor", "bin")
	}
	return filepath.Join(e.Home, ".local", "share", "supervisor", "bin")
}

// settled is where a binary run from npx's cache is pinned (the copy
// Install makes in StableBinDir), with the note saying so; "" when exe is
// not in npx's cache.
func (o *Options) settled(exe string) (dst, why string, err error) {
	cache := npxCache(exe)
	if cache == "" {
		return "", "", nil
	}
	e, err := o.env()
	if err != nil {
		return "", "", err
	}
	dst = filepath.Join(StableBinDir(e), filepath.Base(exe))
	verb := "copied it"
	if o.DryRun {
		verb = "would copy it"
	}
	return dst, fmt.Sprintf("this supervisor runs from npx's cache (%s), which npm may clean: %s to %s and pinned that", cache, verb, dst), nil
}

// settle makes the copy settled names, before Install writes its path
// anywhere. The copy goes through a temp file and a rename, so a host
// starting a server meanwhile runs the old binary or the new, never half
// of one (a running daemon keeps its own until it restarts). DryRun and
// a binary outside npx's cache copy nothing.
func (o *Options) settle() error {
	if o.DryRun {
		return nil
	}
	exe, err := o.exe()
	if err != nil {
		return err
	}
	dst, _, err := o.settled(exe)
	if err != nil || dst == "" {
		return err
	}
	if err := copyExecutable(exe, dst); err != nil {
		return fmt.Errorf("copy this binary out of npx's cache: %w", err)
	}
	lean := filepath.Join(filepath.Dir(exe), LeanName)
	if _, err := os.Stat(lean); err == nil {
		if err := copyExecutable(lean, filepath.Join(filepath.Dir(dst), LeanName)); err != nil {
			return fmt.Errorf("copy %s out of npx's cache: %w", LeanName, err)
		}
	}
	return nil
}

// copyExecutable copies src to dst (mode 0755) through a temp file in
// dst's directory and a rename; an identical dst is left alone.
func copyExecutable(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return fmt.Errorf("create a temp file beside %s: %w", dst, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("rename into %s: %w", dst, err)
	}
	return nil
}

// Pin is the path to write for exe into a service unit or config: exe, or,
// run from npx's cache, its copy in StableBinDir (made unless dryRun),
// with the note saying so.
func Pin(exe string, dryRun bool) (path, note string, err error) {
	o := &Options{Exe: exe, DryRun: dryRun}
	if err := o.settle(); err != nil {
		return "", "", err
	}
	dst, note, err := o.settled(exe)
	if err != nil || dst == "" {
		return exe, "", err
	}
	return dst, note, nil
}
