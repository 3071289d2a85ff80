//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Trials of the peers figure.
const (
	peerTrials      = 10
	peerTrialsQuick = 1
	// peerSettle is how long after a stop has completed (and the peer
	// itself is gone) a process of the tree must still run to count as a
	// survivor.
	peerSettle = time.Second
	// peerStopWait is supervisord's stopwaitsecs in the bench's config.
	peerStopWait = 2
	peerLimit    = 20 * time.Second
	// aptLimit bounds the peers' installation.
	aptLimit = 5 * time.Minute
)

// peerTree is the escaped-grandchild tree every peer stops: /bin/sh (the
// server) with a `sleep` child in its process group and a `setsid sleep`
// that left for a session of its own; it writes "SH CHILD ESCAPEE" to $1
// and waits. The shell and its child die on SIGTERM to the group; the
// escapee is reachable only by whoever tracks it.
const peerTree = `sleep 3600 &
c=$!
setsid sleep 3600 &
g=$!
echo "$$ $c $g" > "$1.tmp" && mv "$1.tmp" "$1"
echo ready
wait
`

// A peer is one way of running the tree and stopping it.
type peer struct {
	key  string // directory and server names
	name string // row label
	bins []string
	// run starts the tree under the peer; it returns a stop func (the
	// stop measured) and a func that takes down the peer itself after.
	run func(ctx context.Context, dir string) (*peerRun, error)
}

type peerRun struct {
	stop    func() error // the stop measured; returns when the peer says it is done
	done    func() error // the peer's own processes gone (after stop)
	cleanup func()       // whatever is left of the peer's own processes
}

// peers: supervisord (stopasgroup/killasgroup), tini -s -g and dumb-init
// each stop the same escaped-grandchild tree, against ours (a fake host
// SIGKILLed, and `supervisor stop`). Per trial and peer: the tree's three
// PIDs (and creation tokens) are read from its ready file; the stop is timed
// until the peer is done (supervisorctl returned, tini/dumb-init exited, the
// host's servers gone) and every process of the tree that is going to die
// is gone; a process of the tree still running peerSettle after that, with
// the peer itself gone, is a survivor. Survivors are SIGKILLed by PID and
// token at the end of each trial.
func (b *bench) peers(ctx context.Context, res *Results) error {
	trials := b.o.peerTrials
	b.ensurePeers(ctx)
	all := []peer{
		{"supervisord", "Debian `supervisor` (supervisord, stopasgroup+killasgroup): `supervisorctl stop`", []string{"supervisord", "supervisorctl"}, b.runSupervisord},
		{"tini", "`tini -s -g`: SIGTERM to tini", []string{"tini"}, b.runTini},
		{"dumb-init", "`dumb-init`: SIGTERM to dumb-init", []string{"dumb-init"}, b.runDumbInit},
		{"ours-kill", "ours: host SIGKILL (`supervisor run`; incl. the 500 ms EOF grace)", nil, b.runOursKill},
		{"ours-stop", "ours: `supervisor stop`", nil, b.runOursStop},
	}
	b.progress("peers: %d trials each; the tree: sh + a child in its group + a `setsid` escapee", trials)
	dir := filepath.Join(b.dir, "peers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tree.sh"), []byte(peerTree), 0o755); err != nil {
		return err
	}
	for _, p := range all {
		var missing []string
		for _, bin := range p.bins {
			if _, err := exec.LookPath(bin); err != nil {
				missing = append(missing, bin)
			}
		}
		if len(missing) > 0 {
			b.progress("  %s: SKIPPED, %s not installed", p.name, strings.Join(missing, ", "))
			res.figure("peers", p.name+": SKIPPED, not installed ("+strings.Join(missing, ", ")+")", "count")
			continue
		}
		surv := res.figure("peers", p.name+": **survivors** of the 3-process tree", "count")
		stop := res.figure("peers", "  "+p.name+": stop → done, tree's dying processes gone", "ms")
		ours := p.bins == nil
		for i := range trials {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			n, d, err := b.peerTrial(ctx, p, filepath.Join(dir, fmt.Sprintf("%s-%d", p.key, i+1)))
			if err != nil {
				b.progress("  %s trial %d FAILED: %v", p.name, i+1, err)
				res.Failures++
				continue
			}
			surv.add(float64(n))
			stop.add(ms(d))
			if ours && n > 0 {
				b.progress("  %s trial %d FAILED: %d survivors, want 0", p.name, i+1, n)
				res.Failures++
			}
		}
		b.progress("  %s: survivors %v, stop median %.1fms", p.name, surv.Samples, median(stop.Samples))
	}
	return nil
}

// ensurePeers installs Debian's supervisor, tini and dumb-init when any of
// their binaries is missing: as root with apt-get, and never with --quick
// (it runs inside `go test`, which must not change the machine; `bash
// .ci/run` installs them before the tests). Otherwise their rows are
// skipped, visibly.
func (b *bench) ensurePeers(ctx context.Context) {
	var missing []string
	for _, bin := range []string{"supervisord", "supervisorctl", "tini", "dumb-init"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) == 0 {
		return
	}
	apt, err := exec.LookPath("apt-get")
	switch {
	case b.o.quick:
		b.progress("peers: NOTE %s not installed; --quick does not install them (bash .ci/run does): their rows are skipped", strings.Join(missing, ", "))
		return
	case err != nil:
		b.progress("peers: NOTE %s not installed and no apt-get: their rows are skipped", strings.Join(missing, ", "))
		return
	case os.Geteuid() != 0:
		b.progress("peers: NOTE %s not installed and not root (apt-get install -y supervisor tini dumb-init): their rows are skipped", strings.Join(missing, ", "))
		return
	}
	// Keep the package's own supervisord service from starting: the bench
	// runs its own, with a private config.
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); errors.Is(err, os.ErrNotExist) {
		if os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755) == nil {
			defer os.Remove(policy)
		}
	}
	actx, cancel := context.WithTimeout(ctx, aptLimit)
	defer cancel()
	install := func() error {
		cmd := exec.CommandContext(actx, apt, "install", "-y", "--no-install-recommends", "supervisor", "tini", "dumb-init")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, lastLine(out))
		}
		return nil
	}
	t0 := time.Now()
	b.progress("peers: %s missing: apt-get install -y supervisor tini dumb-init", strings.Join(missing, ", "))
	err = install()
	if err != nil {
		b.progress("peers: %v; apt-get update, then again", err)
		upd := exec.CommandContext(actx, apt, "update")
		upd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, uerr := upd.CombinedOutput(); uerr != nil {
			b.progress("peers: NOTE apt-get update: %v: %s; the missing peers' rows are skipped", uerr, lastLine(out))
			return
		}
		err = install()
	}
	if err != nil {
		b.progress("peers: NOTE apt-get install: %v; the missing peers' rows are skipped", err)
		return
	}
	b.progress("peers: installed in %.1fs", time.Since(t0).Seconds())
}

// peerTrial runs the tree under p and stops it: survivors and stop time.
func (b *bench) peerTrial(ctx context.Context, p peer, dir string) (survivors int, took time.Duration, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, 0, err
	}
	ready := filepath.Join(dir, "ready")
	r, err := p.run(ctx, dir)
	if err != nil {
		return 0, 0, err
	}
	var tree []*watched
	defer func() {
		// Survivors too: nothing of the trial outlives it.
		for _, w := range tree {
			if !exited(w.fd) {
				unix.PidfdSendSignal(w.fd, unix.SIGKILL, nil, 0)
				if !waitFd(w.fd, 5*time.Second) {
					b.progress("  %s pid %d still running 5s after SIGKILL", w.name, w.pid)
				}
			}
		}
		closeWatches(tree)
		r.cleanup()
	}()
	pids, err := waitReady(ctx, ready, peerLimit)
	if err != nil {
		return 0, 0, err
	}
	for i, name := range []string{"sh (server)", "child in its group", "setsid escapee"} {
		w, err := openWatch(name, pids[i])
		if err != nil {
			return 0, 0, err
		}
		tree = append(tree, w)
		b.track(pids[i], "peers "+name)
	}
	// $! is the shell's child before it has run setsid(): give it the
	// moment to leave.
	sid := sessionOf(pids[2])
	for deadline := time.Now().Add(5 * time.Second); sid != pids[2] && time.Now().Before(deadline); sid = sessionOf(pids[2]) {
		time.Sleep(5 * time.Millisecond)
	}
	if sid != pids[2] {
		return 0, 0, fmt.Errorf("escapee %d is in session %d, not its own", pids[2], sid)
	}
	t0 := time.Now()
	if err := r.stop(); err != nil {
		return 0, 0, fmt.Errorf("stop: %w", err)
	}
	last := time.Now()
	// The peer itself goes, then whatever of the tree still runs
	// peerSettle later is a survivor.
	if err := r.done(); err != nil {
		return 0, 0, err
	}
	// What still runs peerSettle later is a survivor, counted below; any
	// other failure leaves the count unknown.
	if err := waitAll(tree, peerSettle); err != nil && !errors.Is(err, errStillRunning) {
		return 0, 0, err
	}
	for _, w := range tree {
		if w.gone.IsZero() {
			survivors++
		} else if w.gone.After(last) {
			last = w.gone
		}
	}
	return survivors, last.Sub(t0), nil
}

// waitReady polls for the tree's ready file: "SH CHILD ESCAPEE".
func waitReady(ctx context.Context, path string, limit time.Duration) ([3]int, error) {
	var pids [3]int
	deadline := time.Now().Add(limit)
	for {
		if bs, err := os.ReadFile(path); err == nil {
			f := strings.Fields(string(bs))
			if len(f) != 3 {
				return pids, fmt.Errorf("ready file says %q", bs)
			}
			for i := range f {
				pids[i], _ = strconv.Atoi(f[i])
			}
			return pids, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return pids, fmt.Errorf("no ready file %s within %v", path, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sessionOf is the session id of pid (field 6 of its stat), or -1.
func sessionOf(pid int) int {
	bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	i := strings.LastIndexByte(string(bs), ')')
	f := strings.Fields(string(bs[i+1:])) // f[0] is field 3
	if len(f) < 4 {
		return -1
	}
	sid, _ := strconv.Atoi(f[3])
	return sid
}

// child starts cmd as the bench's own child, waited for in the background:
// unreaped until done closes, so signalling it by PID is safe until then.
func (b *bench) child(cmd *exec.Cmd, what string) (done chan struct{}, err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cmd.Stdout == nil {
		cmd.Stdout = b.errLog
	}
	if cmd.Stderr == nil {
		cmd.Stderr = b.errLog
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	b.track(cmd.Process.Pid, what)
	done = make(chan struct{})
	// done says when it is gone. Its status is the stop's own doing (a
	// signal, mostly): the figure judges the tree's survivors, not that.
	go func() { _ = cmd.Wait(); close(done) }()
	return done, nil
}

// waitDone waits for a child started by child, up to limit.
func waitDone(done chan struct{}, what string, limit time.Duration) error {
	select {
	case <-done:
		return nil
	case <-time.After(limit):
		return fmt.Errorf("%s still running %v later", what, limit)
	}
}

// killChild SIGKILLs a child started by child unless it is done.
func killChild(cmd *exec.Cmd, done chan struct{}) {
	select {
	case <-done:
	default:
		cmd.Process.Kill()
		<-done
	}
}

func (b *bench) runSupervisord(ctx context.Context, dir string) (*peerRun, error) {
	conf := filepath.Join(dir, "supervisord.conf")
	sock := filepath.Join(dir, "supervisor.sock")
	text := fmt.Sprintf(`[unix_http_server]
file=%[1]s

[supervisord]
nodaemon=true
logfile=%[2]s/supervisord.log
pidfile=%[2]s/supervisord.pid
childlogdir=%[2]s

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://%[1]s

[program:tree]
command=/bin/sh %[3]s %[2]s/ready
autostart=true
autorestart=false
startsecs=0
stopasgroup=true
killasgroup=true
stopwaitsecs=%[4]d
`, sock, dir, filepath.Join(filepath.Dir(dir), "tree.sh"), peerStopWait)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, err
	}
	sd := exec.CommandContext(ctx, "supervisord", "-n", "-c", conf)
	sd.Dir = dir
	done, err := b.child(sd, "supervisord")
	if err != nil {
		return nil, err
	}
	return &peerRun{
		stop: func() error {
			ctl := exec.CommandContext(ctx, "supervisorctl", "-c", conf, "stop", "tree")
			out, err := ctl.CombinedOutput()
			if err != nil {
				return fmt.Errorf("supervisorctl stop tree: %w: %s", err, lastLine(out))
			}
			return nil
		},
		done: func() error {
			sd.Process.Signal(syscall.SIGTERM) // supervisord's shutdown
			return waitDone(done, "supervisord", peerLimit)
		},
		cleanup: func() { killChild(sd, done) },
	}, nil
}

// runInit is tini or dumb-init running the tree, stopped by SIGTERM.
func (b *bench) runInit(ctx context.Context, dir string, argv ...string) (*peerRun, error) {
	argv = append(argv, "/bin/sh", filepath.Join(filepath.Dir(dir), "tree.sh"), filepath.Join(dir, "ready"))
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	done, err := b.child(c, argv[0])
	if err != nil {
		return nil, err
	}
	return &peerRun{
		stop: func() error {
			c.Process.Signal(syscall.SIGTERM)
			return waitDone(done, argv[0], peerLimit)
		},
		done:    func() error { return nil },
		cleanup: func() { killChild(c, done) },
	}, nil
}

func (b *bench) runTini(ctx context.Context, dir string) (*peerRun, error) {
	return b.runInit(ctx, dir, "tini", "-s", "-g", "--")
}

func (b *bench) runDumbInit(ctx context.Context, dir string) (*peerRun, error) {
	return b.runInit(ctx, dir, "dumb-init")
}

// runOurs is a fake host (the binary as "bench-host", `_fixture
// host-multi`) with the tree as its one server through `supervisor run`.
func (b *bench) runOurs(ctx context.Context, dir string) (*exec.Cmd, chan struct{}, io.Closer, error) {
	name := "tree-" + filepath.Base(dir)
	host := exec.Command(b.hostLn, "_fixture", "host-multi", b.bin,
		"run", "--name", name, "--", "/bin/sh", filepath.Join(filepath.Dir(dir), "tree.sh"), filepath.Join(dir, "ready"))
	host.Env = b.env
	stdin, err := host.StdinPipe() // held open: the host lives until killed
	if err != nil {
		return nil, nil, nil, err
	}
	done, err := b.child(host, "peers host")
	if err != nil {
		stdin.Close()
		return nil, nil, nil, err
	}
	return host, done, stdin, nil
}

func (b *bench) runOursKill(ctx context.Context, dir string) (*peerRun, error) {
	host, done, stdin, err := b.runOurs(ctx, dir)
	if err != nil {
		return nil, err
	}
	var shims []int
	return &peerRun{
		stop: func() error {
			shims = children(host.Process.Pid)
			host.Process.Signal(syscall.SIGKILL)
			return waitDone(done, "fake host", peerLimit)
		},
		// Done once the shim has reported and exited.
		done: func() error { waitGoneTracked(shims, peerLimit); return nil },
		cleanup: func() {
			stdin.Close()
			killChild(host, done)
		},
	}, nil
}

func (b *bench) runOursStop(ctx context.Context, dir string) (*peerRun, error) {
	host, done, stdin, err := b.runOurs(ctx, dir)
	if err != nil {
		return nil, err
	}
	name := "tree-" + filepath.Base(dir)
	return &peerRun{
		stop: func() error {
			out, err := b.cmd(ctx, "stop", name).CombinedOutput()
			if err != nil {
				return fmt.Errorf("supervisor stop %s: %w: %s", name, err, lastLine(out))
			}
			return nil
		},
		// The host lives on (its server is gone); end it as a host ends.
		done: func() error {
			stdin.Close()
			return waitDone(done, "fake host", peerLimit)
		},
		cleanup: func() {
			stdin.Close()
			killChild(host, done)
		},
	}, nil
}
