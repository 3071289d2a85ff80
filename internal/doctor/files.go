package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/lockfile"
	"github.com/seed-86a41135/supervisor/internal/proc"
)

// What a stale-file finding is about (Finding.what).
const (
	fileLock    = "lock"
	fileSocket  = "socket"
	filePIDFile = "pid file"
)

// checkFiles finds the instance's files that outlived their owners: locks
// nobody holds and a socket nobody serves (only while no daemon answers:
// a running daemon's unheld locks are its working files), and pid files
// naming a dead process.
func (d *Doctor) checkFiles(dm daemonState) []Finding {
	var out []Finding
	if !dm.running {
		out = append(out, d.checkLocks()...)
		out = append(out, d.checkSocket()...)
	}
	return append(out, d.checkPIDFiles(dm)...)
}

func (d *Doctor) staleLock(path, evidence string) Finding {
	return Finding{
		Kind: KindStaleFile, Path: path,
		Evidence: evidence,
		Fix:      fmt.Sprintf("remove %s while no daemon runs (`supervisor doctor --fix` does; a starting daemon also clears it)", path),
		remove:   true, what: fileLock,
	}
}

// checkLocks probes daemon.lock, start.lock and ports/*.lock. start.lock is
// taken first and held through the other probes: every auto-start of a
// daemon takes it before the daemon's singleton lock, so no probe here
// makes such a daemon find its lock taken.
func (d *Doctor) checkLocks() []Finding {
	var out []Finding
	nobody := fmt.Sprintf("no process holds it (flock LOCK_EX|LOCK_NB on a fresh open succeeded) and no daemon answers on %s", d.Paths.Socket)
	start, err := tryLock(d.Paths.StartLock(), false)
	switch {
	case errors.Is(err, lockfile.ErrHeld):
		return nil // a daemon is being started right now: its locks are live
	case err == nil:
		defer start.Close()
		out = append(out, d.staleLock(d.Paths.StartLock(), nobody))
	}
	if f, err := tryLock(d.Paths.Lock(), false); err == nil {
		f.Close()
		ev := nobody
		if pid := lockfile.ReadPID(d.Paths.Lock()); pid > 0 {
			ev += fmt.Sprintf("; it names pid %d, the daemon that last held it", pid)
		}
		out = append(out, d.staleLock(d.Paths.Lock(), ev))
	} else if errors.Is(err, lockfile.ErrHeld) {
		// A daemon holds the lock yet its socket does not answer: starting
		// up (it listens after recovery), or its socket is gone.
		return out
	}
	ports, _ := filepath.Glob(filepath.Join(d.Paths.StateDir, "ports", "*.lock"))
	sort.Strings(ports)
	for _, p := range ports {
		if f, err := tryLock(p, false); err == nil {
			f.Close()
			out = append(out, d.staleLock(p, nobody+"; a port lock is only held while a daemon starts a shared server on that port"))
		}
	}
	return out
}

// checkSocket reports the socket file of a daemon that is gone (the dial
// was refused: no daemon answers) and anything else squatting its path.
func (d *Doctor) checkSocket() []Finding {
	st, err := os.Lstat(d.Paths.Socket)
	if err != nil {
		return nil
	}
	if st.Mode()&os.ModeSocket == 0 {
		return []Finding{{
			Kind: KindStaleFile, Path: d.Paths.Socket,
			Evidence: fmt.Sprintf("%s is where the daemon's socket belongs, but it is a %s: a daemon refuses to start over it", d.Paths.Socket, fileKind(st)),
			Fix:      fmt.Sprintf("move %s away if it is not needed, or set %s to another path", d.Paths.Socket, api.EnvSocket),
		}}
	}
	return []Finding{{
		Kind: KindStaleFile, Path: d.Paths.Socket,
		Evidence: "the daemon's socket file exists but connecting to it is refused: the daemon that created it is gone",
		Fix:      fmt.Sprintf("remove %s while no daemon runs (`supervisor doctor --fix` does; a starting daemon also replaces it)", d.Paths.Socket),
		remove:   true, what: fileSocket,
	}}
}

// checkPIDFiles reports *.pid files in the state directory whose process
// is gone. A live PID is left alone: it may be recycled, but nothing here
// can tell.
func (d *Doctor) checkPIDFiles(dm daemonState) []Finding {
	files, _ := filepath.Glob(filepath.Join(d.Paths.StateDir, "*.pid"))
	sort.Strings(files)
	var out []Finding
	for _, p := range files {
		pid := lockfile.ReadPID(p)
		if pid <= 0 || !deadPID(pid) {
			continue
		}
		f := Finding{
			Kind: KindStaleFile, Path: p,
			Evidence: fmt.Sprintf("it names pid %d, which no longer runs", pid),
			Fix:      fmt.Sprintf("remove %s while no daemon runs (`supervisor doctor --fix` does)", p),
			remove:   true, what: filePIDFile,
		}
		if dm.running {
			f.Fix = fmt.Sprintf("remove %s; `supervisor doctor --fix` does so only while no daemon runs", p)
		}
		out = append(out, f)
	}
	return out
}

func deadPID(pid int) bool {
	info, err := proc.Stat(pid)
	return errors.Is(err, proc.ErrGone) || (err == nil && (info.State == 'Z' || info.State == 'X'))
}

func fileKind(st fs.FileInfo) string {
	switch {
	case st.Mode().IsRegular():
		return "regular file"
	case st.IsDir():
		return "directory"
	case st.Mode()&os.ModeSymlink != 0:
		return "symlink"
	}
	return "file of mode " + st.Mode().String()
}

// removeStale removes the stale files among findings, but only while it
// holds start.lock and daemon.lock itself: then no daemon runs and none
// can start until it is done. Each file is checked again under the locks
// and a lock file is unlinked while held.
func (d *Doctor) removeStale(findings []Finding) []string {
	var todo []*Finding
	for i := range findings {
		if f := &findings[i]; f.Kind == KindStaleFile && f.remove && !f.Fixed {
			todo = append(todo, f)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// The daemon's locks live in the state directory, even when its
	// socket lives elsewhere; without the directory they cannot be held.
	if _, err := os.Stat(d.Paths.StateDir); err != nil {
		return []string{fmt.Sprintf("left %d stale file(s) alone: state directory: %v", len(todo), err)}
	}
	var did []string
	hold := func(path string) (f *os.File, created bool, msg string) {
		_, statErr := os.Lstat(path)
		f, err := tryLock(path, true)
		switch {
		case errors.Is(err, lockfile.ErrHeld) && path == d.Paths.StartLock():
			return nil, false, fmt.Sprintf("left %d stale file(s) alone: a daemon is being started (%s is held)", len(todo), path)
		case errors.Is(err, lockfile.ErrHeld):
			return nil, false, fmt.Sprintf("left %d stale file(s) for the daemon that now runs (it holds %s and clears stale files when it starts)", len(todo), path)
		case err != nil:
			return nil, false, fmt.Sprintf("left %d stale file(s) alone: %v", len(todo), err)
		}
		return f, errors.Is(statErr, fs.ErrNotExist), ""
	}
	start, startCreated, msg := hold(d.Paths.StartLock())
	if msg != "" {
		return []string{msg}
	}
	defer start.Close()
	single, singleCreated, msg := hold(d.Paths.Lock())
	if msg != "" {
		if startCreated {
			if err := unlinkHeld(start, d.Paths.StartLock()); err != nil {
				return []string{msg, fmt.Sprintf("the start lock this check created could not be removed: %v", err)}
			}
		}
		return []string{msg}
	}
	defer single.Close()

	var unlinkStart, unlinkSingle bool
	for _, f := range todo {
		switch {
		case f.Path == d.Paths.StartLock():
			unlinkStart = true
			continue
		case f.Path == d.Paths.Lock():
			unlinkSingle = true
			continue
		}
		did = append(did, d.removeOne(f))
	}
	// The locks we hold go last, and also when we created them only to
	// hold them: the state directory is left as we found it, minus the
	// stale files.
	if unlinkStart || startCreated {
		did = append(did, d.removeHeldLock(start, d.Paths.StartLock(), unlinkStart, todo)...)
	}
	if unlinkSingle || singleCreated {
		did = append(did, d.removeHeldLock(single, d.Paths.Lock(), unlinkSingle, todo)...)
	}
	return did
}

// removeHeldLock unlinks a lock file this process holds; reported says
// whether it was a finding (else it was created only to be held).
func (d *Doctor) removeHeldLock(f *os.File, path string, reported bool, todo []*Finding) []string {
	err := unlinkHeld(f, path)
	if !reported {
		return nil
	}
	for _, t := range todo {
		if t.Path == path {
			if err != nil {
				return []string{fmt.Sprintf("could not remove stale lock %s: %v", path, err)}
			}
			t.Fixed = true
		}
	}
	return []string{"removed stale lock " + path}
}

// removeOne removes one stale port lock, socket or pid file after checking
// again that it is stale. The caller holds the daemon's singleton lock.
func (d *Doctor) removeOne(f *Finding) string {
	switch f.what {
	case fileLock:
		l, err := tryLock(f.Path, false)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			f.Fixed = true
			return fmt.Sprintf("stale lock %s is gone already", f.Path)
		case errors.Is(err, lockfile.ErrHeld):
			return fmt.Sprintf("left lock %s alone: it is held now", f.Path)
		case err != nil:
			return fmt.Sprintf("could not remove stale lock %s: %v", f.Path, err)
		}
		defer l.Close()
		if err := unlinkHeld(l, f.Path); err != nil {
			return fmt.Sprintf("could not remove stale lock %s: %v", f.Path, err)
		}
		f.Fixed = true
		return "removed stale lock " + f.Path
	case fileSocket:
		st, err := os.Lstat(f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			f.Fixed = true
			return fmt.Sprintf("stale socket %s is gone already", f.Path)
		}
		if err != nil || st.Mode()&os.ModeSocket == 0 {
			return fmt.Sprintf("left %s alone: it is no longer a socket", f.Path)
		}
		c, err := net.DialTimeout("unix", f.Path, time.Second)
		if err == nil {
			c.Close()
			return fmt.Sprintf("left socket %s alone: something answers on it now", f.Path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Sprintf("left socket %s alone: %v", f.Path, err)
		}
		if err := os.Remove(f.Path); err != nil {
			return fmt.Sprintf("could not remove stale socket %s: %v", f.Path, err)
		}
		f.Fixed = true
		return "removed stale socket " + f.Path
	case filePIDFile:
		pid := lockfile.ReadPID(f.Path)
		if pid <= 0 || !deadPID(pid) {
			return fmt.Sprintf("left pid file %s alone: it names a live process now", f.Path)
		}
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("could not remove stale pid file %s: %v", f.Path, err)
		}
		f.Fixed = true
		return fmt.Sprintf("removed stale pid file %s (pid %d is gone)", f.Path, pid)
	}
	return fmt.Sprintf("left %s alone", f.Path)
}
