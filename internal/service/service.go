// Package service owns installing the daemon as a per-user service: a
// systemd user unit on Linux, a launchd agent on macOS. The unit templates
// are embedded in the binary; the binary's absolute path is substituted at
// install time. Both managers are plain values usable (and tested) on any
// OS; Native, in the per-OS files, picks the one for this OS.
package service

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/seed-86a41135/supervisor/internal/atomicfile"
)

// Label is the launchd label, and the stem of the plist's file name.
const Label = "com.github.seed-86a41135.supervisor"

// UnitName is the systemd unit's name.
const UnitName = "supervisor.service"

//go:embed supervisor.service.tmpl
var systemdTemplate string

//go:embed launchd.plist.tmpl
var launchdTemplate string

// Manager is one service manager: how its unit is rendered, where it goes,
// and the commands that enable and disable it.
type Manager struct {
	// Name says what is installed, e.g. "systemd user unit".
	Name string
	// render returns the unit for binary.
	render func(binary string) ([]byte, error)
	// path returns where the unit goes.
	path func(getenv func(string) string) (string, error)
	// enable and disable are the commands run after writing the unit and
	// before removing it.
	enable, disable func(path string, uid int) []command
	// reload runs after the unit was removed (may be nil).
	reload func() []command
}

// command is one manager command.
type command struct {
	args    []string
	mayFail bool // e.g. unloading what may not be loaded
}

// ErrUnsupported is returned by Native on an OS without a service manager
// this package knows.
var ErrUnsupported = errors.New("no per-user service manager supported on this OS (systemd user units on Linux, launchd on macOS)")

// Runner runs one command and returns its combined output.
type Runner func(name string, args ...string) ([]byte, error)

// Exec runs commands for real.
func Exec(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// Options are the inputs of Install and Uninstall.
type Options struct {
	Binary string              // absolute path of the supervisor binary
	Getenv func(string) string // HOME, XDG_CONFIG_HOME
	UID    int                 // launchd's gui/UID domain
	Run    Runner              // nil: Exec
}

func (o Options) run() Runner {
	if o.Run == nil {
		return Exec
	}
	return o.Run
}

// Result says what Install or Uninstall did.
type Result struct {
	Path    string // the unit file
	Unit    []byte // its content (Install)
	Changed bool   // the file was written or removed
	// Commands are the manager commands, each as one shell line; they ran
	// unless DryRun or until the first failure (CommandErr).
	Commands []string
	// CommandErr is the first manager command that failed, with its output:
	// the file is in place (or gone) but the manager did not take it.
	CommandErr error
}

// Render returns the unit for binary.
func (m *Manager) Render(binary string) ([]byte, error) {
	if !filepath.IsAbs(binary) {
		return nil, fmt.Errorf("binary %q: need an absolute path", binary)
	}
	return m.render(binary)
}

// Path returns where the unit goes.
func (m *Manager) Path(getenv func(string) string) (string, error) { return m.path(getenv) }

// Plan returns what Install would write and run, doing nothing.
func (m *Manager) Plan(o Options) (Result, error) {
	unit, err := m.Render(o.Binary)
	if err != nil {
		return Result{}, err
	}
	path, err := m.path(o.Getenv)
	if err != nil {
		return Result{}, err
	}
	return Result{Path: path, Unit: unit, Commands: lines(m.enable(path, o.UID))}, nil
}

// Install writes the unit (only if its content differs) and enables it.
// An error means the unit could not be written; a manager that refused to
// enable it is reported in Result.CommandErr.
func (m *Manager) Install(o Options) (Result, error) {
	r, err := m.Plan(o)
	if err != nil {
		return r, err
	}
	if old, err := os.ReadFile(r.Path); err != nil || !bytes.Equal(old, r.Unit) {
		if err := os.MkdirAll(filepath.Dir(r.Path), 0o755); err != nil {
			return r, err
		}
		// Replaced whole or not at all; a fresh unit is 0644 like any.
		// A unit kept in dotfiles through a symlink stays a symlink.
		real := r.Path
		if p, err := filepath.EvalSymlinks(r.Path); err == nil {
			real = p
		}
		var like fs.FileInfo
		if st, err := os.Stat(real); err == nil {
			like = st
		}
		if err := atomicfile.WriteMode(real, r.Unit, like, 0o644); err != nil {
			return r, err
		}
		r.Changed = true
	}
	r.CommandErr = runAll(o.run(), m.enable(r.Path, o.UID))
	return r, nil
}

// Uninstall disables the unit and removes it. Nothing installed is not an
// error. A manager that refused to disable it is reported in
// Result.CommandErr; the file is removed regardless.
func (m *Manager) Uninstall(o Options) (Result, error) {
	path, err := m.path(o.Getenv)
	if err != nil {
		return Result{}, err
	}
	r := Result{Path: path}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	cmds := m.disable(path, o.UID)
	r.CommandErr = runAll(o.run(), cmds)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return r, err
	}
	r.Changed = true
	if m.reload != nil {
		rc := m.reload()
		cmds = append(cmds, rc...)
		if err := runAll(o.run(), rc); r.CommandErr == nil {
			r.CommandErr = err
		}
	}
	r.Commands = lines(cmds)
	return r, nil
}

func runAll(run Runner, cmds []command) error {
	for _, cmd := range cmds {
		c := cmd.args
		out, err := run(c[0], c[1:]...)
		if err != nil && !cmd.mayFail {
			msg := strings.TrimSpace(string(out))
			if msg == "" {
				msg = err.Error()
			}
			return fmt.Errorf("%s: %s", strings.Join(c, " "), msg)
		}
	}
	return nil
}

func lines(cmds []command) []string {
	var s []string
	for _, c := range cmds {
		s = append(s, strings.Join(c.args, " "))
	}
	return s
}

func renderTemplate(name, text string, data any) ([]byte, error) {
	t, err := template.New(name).Parse(text)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func home(getenv func(string) string) (string, error) {
	h := getenv("HOME")
	if h == "" || !filepath.IsAbs(h) {
		return "", errors.New("$HOME is not set to an absolute path: cannot tell where the per-user unit goes")
	}
	return h, nil
}
