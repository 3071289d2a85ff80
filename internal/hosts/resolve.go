package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrBareNotThisBinary is what Install returns (inside a
// *BareCommandError) when it would write the bare name BareName but a
// host looking it up on PATH would not find this binary.
var ErrBareNotThisBinary = errors.New("the bare command would not run this binary")

// BareCommandError says why the bare name would not run this binary: no
// supervisor on PATH, or another one.
type BareCommandError struct {
	Exe   string // this binary
	Found string // the supervisor PATH finds; "" when none
}

func (e *BareCommandError) Error() string {
	if e.Found == "" {
		return fmt.Sprintf("install would write the bare command %q into host configs, but no %q is on PATH, so the hosts could not start their servers (this binary is %s)",
			BareName, BareName, e.Exe)
	}
	return fmt.Sprintf("install would write the bare command %q into host configs, but %q on PATH is %s, not this binary (%s)",
		BareName, BareName, e.Found, e.Exe)
}

func (e *BareCommandError) Unwrap() error { return ErrBareNotThisBinary }

// Fix says how to make the bare name run this binary.
func (e *BareCommandError) Fix() string {
	return fmt.Sprintf("install it (`go install ./cmd/supervisor`) or put %s first on PATH, then rerun; or pass --force to write it anyway",
		filepath.Dir(e.Exe))
}

// lookPath finds name in the directories of pathEnv the way a host
// looking up a command does: the first executable file wins.
func lookPath(name, pathEnv string) (string, error) {
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			continue // the current directory: a host's is not ours
		}
		for _, n := range executableNames(name) {
			p := filepath.Join(dir, n)
			if executable(p) == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%q is not on PATH", name)
}

// checkBare proves that the bare name resolves, on the PATH of o's
// environment, to this very binary (os.SameFile): what Install writes
// must run what the user ran.
func (o *Options) checkBare() error {
	exe, err := o.exe()
	if err != nil {
		return err
	}
	e, err := o.env()
	if err != nil {
		return err
	}
	found, err := lookPath(BareName, e.getenv("PATH"))
	if err != nil {
		return &BareCommandError{Exe: exe}
	}
	fi, err1 := os.Stat(found)
	self, err2 := os.Stat(exe)
	if err1 != nil || err2 != nil || !os.SameFile(fi, self) {
		return &BareCommandError{Exe: exe, Found: found}
	}
	return nil
}

// writesBare reports whether Install would write the bare name into any
// file: a server file it would change, or a hook it would add.
func (o *Options) writesBare(hs []Host, files []File) (bool, error) {
	for _, f := range files {
		cmd, _, err := o.command(f)
		if err != nil {
			return false, err
		}
		if cmd != BareName {
			continue
		}
		src, err := os.ReadFile(f.Path)
		if err != nil {
			continue // missing or unreadable: Install says so per file
		}
		if out, _, err := wrapAll(f, src, cmd, Options{}); err == nil && !bytes.Equal(out, src) {
			return true, nil
		}
	}
	if !o.Hooks {
		return false, nil
	}
	bare := false
	_, err := o.eachHookFile(hs, func(f File, line string) Result {
		src, _ := os.ReadFile(f.Path)
		if cmd, _, _ := o.command(f); cmd == BareName {
			if out, _, err := addHook(src, line); err == nil && !bytes.Equal(out, src) {
				bare = true
			}
		}
		return Result{}
	})
	return bare, err
}

// CommandIssue is a wrapper command of a file's wrapped servers that a
// host could not start.
type CommandIssue struct {
	Command string   `json:"command"`
	Problem string   `json:"problem"`
	Servers []string `json:"servers"`
}

// Fix says how to make host's wrapped servers start again.
func (c CommandIssue) Fix(host string) string {
	if c.Command == BareName {
		return fmt.Sprintf("put `supervisor` on PATH (`go install ./cmd/supervisor`, or add the directory holding it to PATH), or `supervisor uninstall %s` then `supervisor install %s` from an installed binary to pin its absolute path",
			host, host)
	}
	return fmt.Sprintf("`supervisor install %s` from the supervisor you use now re-pins them to its absolute path", host)
}

// Unresolvable lists the wrapper commands of r's wrapped servers (as
// Status reports them) that a host with pathEnv as its PATH could not
// start: a bare name not on PATH, an absolute path that is missing or not
// executable. A relative path depends on the host's working directory
// and is not judged.
func Unresolvable(r Result, pathEnv string) []CommandIssue {
	byCmd := map[string]*CommandIssue{}
	for _, e := range r.Entries {
		if e.Action != IsWrapped || e.Command == "" {
			continue
		}
		c := byCmd[e.Command]
		if c == nil {
			problem := commandProblem(e.Command, pathEnv)
			if problem == "" {
				byCmd[e.Command] = &CommandIssue{} // resolves: remembered, not reported
				continue
			}
			c = &CommandIssue{Command: e.Command, Problem: problem}
			byCmd[e.Command] = c
		}
		if c.Problem != "" {
			c.Servers = append(c.Servers, e.Name)
		}
	}
	var out []CommandIssue
	for _, c := range byCmd {
		if c.Problem != "" {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Command < out[j].Command })
	return out
}

// commandProblem says why cmd cannot be started, or "".
func commandProblem(cmd, pathEnv string) string {
	switch {
	case isAbs(cmd):
		if err := executable(cmd); err != nil {
			return err.Error()
		}
	case !strings.ContainsAny(cmd, `/\`):
		if _, err := lookPath(cmd, pathEnv); err != nil {
			return err.Error()
		}
	}
	return ""
}
