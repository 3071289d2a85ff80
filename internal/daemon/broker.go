package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/broker"
	"github.com/seed-86a41135/supervisor/internal/daemon/sharing"
	"github.com/seed-86a41135/supervisor/internal/launcher"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// A shared server (run --share, design §11) is one broker process per
// server key, which runs the upstream as its child and relays for every
// client. The daemon starts brokers, hands them clients' fds, keeps the
// clients' lifelines (a host's death or stop request detaches its client
// only) and stops brokers through the cascade like any server.

// brokerRef is one broker process, by server key.
type brokerRef struct {
	key, name, socket string
	id                string // its process record
	ready             chan struct{}
	err               error // why it did not start (after ready is closed)
	l                 *live
	serverKey         string // the server key of what it runs (key is a solo broker's own); "" if unknown
	fp                string // fingerprint of what it runs (broker.Fingerprint); "" if unknown
	lazy              bool
	idle              time.Duration
	mu                sync.Mutex   // guards seen
	seen              broker.Stats // its figures when last asked (lazy.go's counters)
	pid               int          // the broker process, as its clients' shims know it
	token             proc.Token
}

// serveShare attaches a run --share client to the broker of its server
// key, starting the broker if none runs, and keeps the client's lifeline.
// mode names how the client came to a broker, for its errors.
func (d *Daemon) serveShare(conn *api.Conn, req api.RunRequest, files [3]*os.File, name, mode string) {
	closeFiles := func() {
		for _, f := range files {
			f.Close()
		}
	}
	defer closeFiles()
	cwd := string(req.Cwd)
	if err := spawn.CheckDir(cwd); err != nil {
		d.sendError(conn, 125, "%s: %v", mode, err)
		return
	}
	key, fp, err := d.serverIdentity(req)
	if err != nil {
		code := 125
		var se *spawn.StartError
		if errors.As(err, &se) {
			code = se.Code
		}
		d.sendError(conn, code, "%v", err)
		return
	}
	clientID := clientPrefix + newID()[2:]
	serverKey := key
	if req.Limits != nil {
		if why := sharing.BrokerRoom(req.Limits); why != "" {
			d.sendError(conn, 125, "%s: %s", mode, why)
			return
		}
		// Clients asking other limits get a broker of their own.
		key = sharing.LimitedKey(key, DescribeLimits(req.Limits))
	}
	if req.Sandbox != nil {
		// And so do clients asking another sandbox.
		key = sharing.SandboxedKey(key, *req.Sandbox)
	}
	if !req.Share {
		// Lazy or idle but not shared: a broker of this client's own, which
		// shares only the cache (kept by server key).
		key = sharing.SoloKey(key, clientID)
	}
	var br *brokerRef
	var bc *api.Conn
	for attempt := 1; ; attempt++ {
		var err error
		if br, err = d.brokerFor(req, key, serverKey, fp, name); err != nil {
			d.sendError(conn, 125, "%s: start the broker of %s: %v", mode, name, err)
			return
		}
		var retry bool
		bc, retry, err = handOver(br, broker.AttachRequest{ID: clientID, Session: req.Session, Replay: req.Replay, Rest: req.Rest}, files)
		if err == nil {
			break
		}
		if !retry || attempt == 3 {
			d.sendError(conn, 125, "%s: hand the client to the broker of %s: %v", mode, name, err)
			return
		}
		// The broker is exiting (its linger ended as this client came):
		// once it is gone, brokerFor starts a fresh one.
		d.log.Info("broker exiting; retrying with a fresh one", "broker", br.id, "err", err)
		select {
		case <-br.l.done:
		case <-time.After(10 * time.Second):
		}
	}
	defer bc.Close()
	// The broker holds the client's fds now; ours must go, or the host
	// would never see EOF from a detached client.
	closeFiles()
	d.clientAttached(br, clientID, req.Session)
	p, _ := d.reg.Process(br.id)
	if err := conn.Send(api.TypeStarted, &api.Started{ID: clientID, PID: p.PID, Token: p.Token, Session: req.Session, Shared: true}); err != nil {
		d.log.Info("shim gone before the attach was confirmed", "client", clientID, "err", err)
	}
	d.shareLifeline(conn, br, bc, clientID, req.Session)
}

// frontFor answers a lazy client that offered a front with its server's
// cache, if the cache can serve one and no broker of its server key runs
// (a running one answers as fast, and may have its upstream up): true if
// it did. Nothing is recorded: until the client comes back with its
// first real request, nothing runs for it but its own process.
func (d *Daemon) frontFor(conn *api.Conn, req api.RunRequest, name string) bool {
	if !req.Front || !req.Lazy {
		return false
	}
	// What serveShare refuses at once is refused at once, not after the
	// front told the host all is well.
	if spawn.CheckDir(string(req.Cwd)) != nil || req.Limits != nil && sharing.BrokerRoom(req.Limits) != "" {
		return false
	}
	serverKey, fp, err := d.serverIdentity(req)
	if err != nil {
		return false // the broker path says why
	}
	if req.Share {
		key := serverKey
		if req.Limits != nil {
			key = sharing.LimitedKey(key, DescribeLimits(req.Limits))
		}
		if req.Sandbox != nil {
			key = sharing.SandboxedKey(key, *req.Sandbox)
		}
		d.mu.Lock()
		br := d.brokers[key]
		d.mu.Unlock()
		if br != nil && (!isDone(br.ready) || br.err == nil && br.l != nil && !isDone(br.l.done)) {
			return false
		}
	}
	c := d.facts.cache(serverKey, fp)
	if !c.Verified() {
		return false
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return false
	}
	if err := conn.Send(api.TypeFront, &api.Front{Cache: raw}); err != nil {
		d.log.Debug("lazy client gone before its front", "name", name, "err", err)
		return true
	}
	d.log.Debug("lazy client answers from the cache", "name", name)
	return true
}

// clientPrefix starts a shared server's client ids (process ids start
// with "p-"): an attach names one or the other.
const clientPrefix = "c-"

// shareLifeline keeps a client's lifeline: the shim's stop request or its
// end detaches the client (never stops the broker, which serves others);
// the broker's word that the client is gone (its EOF) ends the shim.
// bc is the client's connection to its broker.
func (d *Daemon) shareLifeline(conn *api.Conn, br *brokerRef, bc *api.Conn, clientID, session string) {
	detached := make(chan struct{})
	go func() { // ends when the broker closes bc (the caller closes it too)
		defer close(detached)
		for {
			m, fds, err := bc.Recv()
			api.CloseFds(fds)
			if err != nil || m.Type == broker.MsgDetached {
				return
			}
		}
	}()
	shimGone := make(chan struct{})
	stopReq := make(chan struct{}, 1)
	go func() { // ends when the shim's connection closes
		defer close(shimGone)
		for {
			m, fds, err := conn.Recv()
			api.CloseFds(fds)
			if err != nil {
				return
			}
			if m.Type == api.TypeStopSelf {
				select {
				case stopReq <- struct{}{}:
				default:
				}
			}
		}
	}()
	detach := func() {
		d.send(bc, broker.MsgDetach, &broker.AttachRequest{ID: clientID, Session: session})
		select {
		case <-detached:
		case <-br.l.done:
		case <-time.After(5 * time.Second):
			d.log.Warn("broker did not confirm a detach", "client", clientID, "broker", br.id)
		}
	}
	code := 0
	select {
	case <-detached:
	case <-stopReq:
		detach()
	case <-shimGone:
		if d.isStopping() {
			return // daemon stop: the broker is stopped as a whole
		}
		detach()
		d.clientDetached(br, clientID, session)
		return
	case <-br.l.done:
		// The broker (and with it the upstream) is gone for good: to the
		// host, its server exited.
		code = 1
	}
	d.clientDetached(br, clientID, session)
	d.send(conn, api.TypeExited, &api.Exited{ExitCode: code, Code: code})
}

// serveShareAttach re-attaches a shared server's shim after its daemon
// went away: the broker still relays the client (a daemon crash drops no
// client); the lifeline resumes here.
func (d *Daemon) serveShareAttach(conn *api.Conn, a api.Attach) {
	d.mu.Lock()
	var br *brokerRef
	for _, b := range d.brokers {
		if b.l != nil && !isDone(b.l.done) && b.pid == a.PID && b.token.Matches(a.Token) {
			br = b
		}
	}
	d.mu.Unlock()
	if br == nil {
		d.sendError(conn, 125, "attach %s: no live shared server (broker pid %d) here; its client is no longer supervised", a.ID, a.PID)
		return
	}
	bc, err := sharing.DialBroker(br.socket)
	if err != nil {
		d.sendError(conn, 125, "attach %s: reach the broker of %s: %v", a.ID, br.name, err)
		return
	}
	defer bc.Close()
	if err := bc.Send(broker.MsgWatch, &broker.AttachRequest{ID: a.ID, Session: a.Session}); err != nil {
		d.sendError(conn, 125, "attach %s: %v", a.ID, err)
		return
	}
	m, fds, err := bc.Recv()
	api.CloseFds(fds)
	if err != nil || m.Type != broker.MsgAttached {
		d.clientDetached(br, a.ID, a.Session)
		d.sendError(conn, 125, "attach %s: the broker of %s no longer relays this client", a.ID, br.name)
		return
	}
	if err := conn.Send(api.TypeStarted, &api.Started{ID: a.ID, PID: a.PID, Token: a.Token, Session: a.Session, Shared: true}); err != nil {
		return
	}
	d.event("shim.attached", a.Session, br.id, fmt.Sprintf("shim %d, client %s", a.ShimPID, a.ID))
	d.shareLifeline(conn, br, bc, a.ID, a.Session)
}

// readoptBroker makes a re-adopted broker findable again by its key (new
// clients of that key join it) and drops from its record the clients that
// left while no daemon watched.
func (d *Daemon) readoptBroker(p registry.Process, l *live) {
	if len(p.BrokerKey) < 16 {
		return
	}
	br := &brokerRef{key: p.BrokerKey, name: p.Name, id: p.ID, l: l, pid: p.PID, token: p.Token,
		socket: sharing.BrokerSocket(d.cfg.Paths, p.BrokerKey), ready: make(chan struct{}),
		serverKey: p.ServerKey, fp: p.Fingerprint, lazy: p.Lazy, idle: time.Duration(p.IdleMS) * time.Millisecond}
	close(br.ready)
	d.mu.Lock()
	d.brokers[p.BrokerKey] = br
	d.mu.Unlock()
	d.tasks.Go("forget broker", func() { d.forgetBroker(br) })
	if br.lazy || br.idle > 0 {
		d.tasks.Go("watch broker", func() { d.watchBroker(br) })
	}
	if st, err := sharing.AskStats(br.socket); err == nil {
		br.mu.Lock()
		br.seen = st // what happened while no daemon watched is not news
		br.mu.Unlock()
		relayed := map[string]bool{}
		for _, c := range st.Clients {
			relayed[c.ID] = true
		}
		d.update(p.ID, "forget clients the broker no longer relays", func(r *registry.Process) error {
			kept := r.Clients[:0]
			for _, c := range r.Clients {
				if relayed[c.ID] {
					kept = append(kept, c)
				}
			}
			if len(kept) == len(r.Clients) {
				return errUnchanged
			}
			r.Clients = kept
			return nil
		})
	}
	d.log.Info("re-adopted a broker", "id", p.ID, "pid", p.PID, "clients", len(p.Clients))
}

// forgetBroker drops br from the brokers by key once its process is gone:
// a key never asked for again must not keep a dead broker's entry.
func (d *Daemon) forgetBroker(br *brokerRef) {
	select {
	case <-br.l.done:
	case <-d.life.Done():
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.brokers[br.key] == br {
		delete(d.brokers, br.key)
	}
}

// handOver gives the client's stdin and stdout to br and waits for its
// word. retry says the broker is going away (its socket is gone, or it
// said so): a fresh broker may take the client.
func handOver(br *brokerRef, req broker.AttachRequest, files [3]*os.File) (*api.Conn, bool, error) {
	bc, err := sharing.DialBroker(br.socket)
	if err != nil {
		return nil, true, err
	}
	if err := bc.Send(broker.MsgAttach, &req, int(files[0].Fd()), int(files[1].Fd())); err != nil {
		bc.Close()
		return nil, true, err
	}
	m, fds, err := bc.Recv()
	api.CloseFds(fds)
	switch {
	case err != nil:
		bc.Close()
		return nil, true, fmt.Errorf("the broker went away: %w", err)
	case m.Type == broker.MsgAttached:
		return bc, false, nil
	}
	bc.Close()
	var e api.Error
	if err := api.Decode(m, &e); err != nil {
		return nil, false, fmt.Errorf("the broker's answer to an attach (%q) does not decode: %w", m.Type, err)
	}
	return nil, e.Retry, fmt.Errorf("the broker did not take the client: %s", e.Message)
}

// clientAttached and clientDetached keep a broker's record and events
// current.
func (d *Daemon) clientAttached(br *brokerRef, id, session string) {
	d.update(br.id, "client attached", func(p *registry.Process) error {
		p.Clients = append(p.Clients, registry.Client{ID: id, Session: session, Since: d.reg.Now().UTC()})
		return nil
	})
	d.event("client.attach", session, br.id, fmt.Sprintf("client %s of %s", id, br.name))
}

func (d *Daemon) clientDetached(br *brokerRef, id, session string) {
	// What the client's session taught the broker (server/discover, the
	// lazy cache) is kept first, while the broker still runs: its linger
	// may end before anyone asks again, and the event below says it is
	// done.
	if st, err := sharing.AskStats(br.socket); err == nil {
		d.learnFrom(br, st)
	}
	d.update(br.id, "client detached", func(p *registry.Process) error {
		kept := p.Clients[:0]
		for _, c := range p.Clients {
			if c.ID != id {
				kept = append(kept, c)
			}
		}
		p.Clients = kept
		return nil
	})
	d.event("client.detach", session, br.id, fmt.Sprintf("client %s of %s", id, br.name))
}

// brokerFor returns the running broker of key, starting one if none runs.
// Concurrent first clients of one key start one broker.
func (d *Daemon) brokerFor(req api.RunRequest, key, serverKey, fp, name string) (*brokerRef, error) {
	d.mu.Lock()
	br := d.brokers[key]
	if br != nil {
		select {
		case <-br.ready:
			if br.err != nil || br.l == nil || isDone(br.l.done) {
				br = nil // failed or gone: a fresh one
			}
		default:
		}
	}
	mine := br == nil
	if mine {
		br = &brokerRef{key: key, serverKey: serverKey, name: name, fp: fp, ready: make(chan struct{}),
			lazy: req.Lazy, idle: time.Duration(req.IdleMS) * time.Millisecond,
			socket: sharing.BrokerSocket(d.cfg.Paths, key)}
		d.brokers[key] = br
	}
	d.mu.Unlock()
	if mine {
		br.err = d.startBroker(br, req)
		close(br.ready)
	}
	select {
	case <-br.ready:
	case <-time.After(30 * time.Second):
		return nil, errors.New("the broker did not start within 30s")
	}
	if br.err != nil {
		return nil, br.err
	}
	return br, nil
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// startBroker spawns br's broker process with the client's command,
// directory and environment, and waits for its socket.
func (d *Daemon) startBroker(br *brokerRef, req api.RunRequest) error {
	if d.exe == "" {
		return errors.New("this binary's path is unknown: a broker cannot be started")
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	br.id = newID()
	sess := sharing.BrokerSession(br.key)
	// Where a stdio server's stderr goes: `logs NAME` and `logs ID` find
	// it, and retention removes it with the record.
	logPath := RunLogPath(d.cfg.Paths, br.name, br.id)
	// The broker writes its output, and its upstream's stderr, to the log
	// itself, holding the cap as a stdio server's log writer does (--log);
	// what it says before that goes to the file directly.
	logf, err := openBrokerLog(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("ready pipe: %w", err)
	}
	defer pr.Close()
	// A lazy broker's cache goes to it on its stdin: nothing on disk but
	// the registry, and no second copy to keep current. Made before the
	// record, so a failure leaves nothing behind.
	stdin := null
	cache, err := d.lazyCacheStdin(br)
	if err != nil {
		pw.Close()
		return err
	}
	if cache != nil {
		defer cache.Close()
		stdin = cache
	}
	srv, err := d.prepareBroker(br, sess, req)
	if err != nil {
		pw.Close()
		return err
	}
	argv, env, note, eg, err := d.brokerArgv(br, sess, req, logPath)
	if err != nil {
		pw.Close()
		d.transition(br.id, registry.StateFailed, func(p *registry.Process) {
			p.Error = err.Error()
			t := d.reg.Now().UTC()
			p.ExitedAt = &t
		})
		d.undoStart(srv)
		return err
	}
	// A network list's broker lives in its upstream's namespace, so each
	// run of the upstream starts there, and a restarted daemon finds the
	// namespace by the broker's pid.
	started, err := d.forkServer(srv, spawn.Request{
		Argv: argv, Env: env, Dir: string(req.Cwd), Stdio: [3]*os.File{stdin, pw, logf}, Netns: eg.netns(),
	})
	pw.Close()
	eg.forked()
	if err != nil {
		eg.close()
		// A broker that does not start leaves a failed record.
		d.transition(br.id, registry.StateFailed, func(p *registry.Process) {
			p.Error = err.Error()
			t := d.reg.Now().UTC()
			p.ExitedAt = &t
		})
		return err
	}
	rec := d.recordBrokerStart(br, sess, req, srv, started, note, eg.record())
	d.trackBroker(br, rec, req, started)
	d.watchEgress(eg, br.l)
	if err := d.awaitBrokerReady(br, pr, logPath); err != nil {
		return err
	}
	d.setHealth(br.id, "healthy")
	d.log.Info("broker started", "id", br.id, "pid", started.PID, "name", br.name, "key", br.key[:12])
	return nil
}

// openBrokerLog opens a broker's log at logPath for the daemon to hand
// it as its stderr, making its directory.
func openBrokerLog(logPath string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return logf, nil
}

// lazyCacheStdin returns the read end of a pipe that hands lazy broker br
// the cache of what it runs, or nil when br is not lazy or there is no
// cache. The caller closes it once the broker has it.
func (d *Daemon) lazyCacheStdin(br *brokerRef) (*os.File, error) {
	c := d.facts.cache(br.serverKey, br.fp)
	if !br.lazy || c == nil {
		return nil, nil
	}
	cr, cw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("lazy cache pipe: %w", err)
	}
	go func() {
		defer cw.Close()
		// Ends when the broker has read it, or exits (EPIPE): the
		// broker closes its stdin once read, whatever the size.
		if err := json.NewEncoder(cw).Encode(c); err != nil {
			d.log.Debug("lazy cache not handed on: the broker starts without it", "id", br.id, "err", err)
		}
	}()
	return cr, nil
}

// prepareBroker makes broker br's cgroup, its limits and its intent
// record (start.go, design §7).
func (d *Daemon) prepareBroker(br *brokerRef, sess string, req api.RunRequest) (*serverStart, error) {
	return d.prepareServer(sess, br.id, br.id, storedLimits(req.Limits), func(cgroupPath string, v1 []string) error {
		_, err := d.reg.AddProcess(registry.Process{
			ID: br.id, Session: sess, Name: br.name, Argv: req.Argv, Cwd: string(req.Cwd),
			Broker: true, BrokerKey: br.key, Health: "starting", GraceMS: req.GraceMS,
			ServerKey: br.serverKey, Fingerprint: br.fp, Lazy: br.lazy, IdleMS: api.Millis(br.idle),
			Cgroup: cgroupPath, Limits: storedLimits(req.Limits), LimitCgroups: v1, Sandboxed: req.Sandbox != nil,
		})
		return err
	})
}

// brokerArgv is the command line and environment of broker br, which
// runs req's command and logs to logPath, and the note its start event
// adds on how its upstream runs. A sandboxed upstream's rules are planned
// here, as a direct server's are, and the broker confines each of its
// runs to them.
func (d *Daemon) brokerArgv(br *brokerRef, sess string, req api.RunRequest, logPath string) (argv, env []string, note string, eg *egressRun, err error) {
	// The upstream runs as the program an npx command would run, as a
	// direct server does (package launcher).
	up := launched{argv: req.Argv, env: req.Env}
	if fl, ok, _ := launcher.Flatten(req.Argv, string(req.Cwd), req.Env); ok && !req.NoFlatten {
		up = launched{argv: fl.Argv, env: fl.Env, note: " (flattened, " + fl.Via + ")"}
	}
	var rules []byte
	if req.Sandbox != nil {
		if err := d.planSandbox(&up, req, br.id); err != nil {
			return nil, nil, "", nil, err
		}
		// A network list: the proxy the upstream's every run reaches.
		if eg, err = d.openEgress(sess, br.id, &up, ""); err != nil {
			return nil, nil, "", nil, err
		}
		if rules, err = json.Marshal(up.sandbox); err != nil {
			eg.close()
			return nil, nil, "", nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	env, drop := sharing.BrokerEnv(up.env)
	argv = []string{d.exe, "_broker", "--socket", br.socket, "--linger", d.settings().Linger.String()}
	for _, name := range drop {
		argv = append(argv, "--drop-env", name)
	}
	maxBytes, keep := d.logCap()
	argv = append(argv, "--log", logPath, "--log-max-bytes", strconv.FormatInt(maxBytes, 10), "--log-keep", strconv.Itoa(keep))
	if rules != nil {
		argv = append(argv, "--sandbox-rules", string(rules))
	}
	if br.lazy {
		argv = append(argv, "--lazy")
	}
	if br.idle > 0 {
		argv = append(argv, "--idle", br.idle.String())
	}
	argv = append(append(argv, "--"), up.argv...)
	return argv, env, up.note, eg, nil
}

// recordBrokerStart commits broker br's running record, with its start
// event, and returns the record, as it would be if the commit failed.
func (d *Daemon) recordBrokerStart(br *brokerRef, sess string, req api.RunRequest, srv *serverStart, started spawn.Started, note string, eg *registry.Egress) registry.Process {
	cg, limited := srv.cg, srv.limited
	startEvent := registry.Logged{Kind: "process.start", Detail: fmt.Sprintf("pid %d broker of %q%s", started.PID, req.Argv, note)}
	rec, err := d.reg.UpdateLogged(br.id, startEvent, func(p *registry.Process) error {
		p.PID, p.PGID, p.Token, p.Path, p.Cgroup = started.PID, started.PGID, started.Token, started.Path, cg.Path
		p.Limits, p.LimitCgroups, p.Egress = storedLimits(req.Limits), limited.V1, eg
		if p.State == registry.StateStarting {
			p.State = registry.StateRunning
		}
		return nil
	})
	if err != nil {
		rec.PID, rec.PGID, rec.Token, rec.Cgroup = started.PID, started.PGID, started.Token, cg.Path
		rec.Limits, rec.LimitCgroups, rec.Egress = storedLimits(req.Limits), limited.V1, eg
		d.event(startEvent.Kind, sess, br.id, startEvent.Detail)
	}
	return rec
}

// trackBroker makes broker br, started, a live process of the daemon's,
// with rec its record, and watches it.
func (d *Daemon) trackBroker(br *brokerRef, rec registry.Process, req api.RunRequest, started spawn.Started) {
	l := &live{id: br.id, done: make(chan struct{}), grace: time.Duration(req.GraceMS) * time.Millisecond,
		target: d.targetOf(rec), started: time.Now()}
	d.mu.Lock()
	d.live[br.id] = l
	d.mu.Unlock()
	br.l, br.pid, br.token = l, started.PID, started.Token
	d.tasks.Go("monitor", func() { d.monitor(l, started.Exit) })
	d.tasks.Go("forget broker", func() { d.forgetBroker(br) })
	if br.lazy || br.idle > 0 {
		d.tasks.Go("watch broker", func() { d.watchBroker(br) })
	}
}

// awaitBrokerReady waits for broker br to say on pr that it is ready,
// and stops it when it does not.
func (d *Daemon) awaitBrokerReady(br *brokerRef, pr *os.File, logPath string) error {
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(pr).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("said %q instead of ready", line)
		}
		ready <- err
	}()
	var err error
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = errors.New("not ready within 30s")
	}
	if err != nil {
		err = fmt.Errorf("broker %s: %w (its log: %s)", br.id, err, logPath)
		d.stopIDs(context.Background(), []string{br.id}, shutdown.Options{})
		return err
	}
	return nil
}

// stopBrokers stops every broker (daemon stop): their upstreams go with
// them through the cascade.
func (d *Daemon) stopBrokers(grace time.Duration) {
	d.mu.Lock()
	var ids []string
	for _, br := range d.brokers {
		if br.l != nil && !isDone(br.l.done) {
			ids = append(ids, br.id)
		}
	}
	d.mu.Unlock()
	if len(ids) > 0 {
		d.stopIDs(context.Background(), ids, shutdown.Options{Grace: grace})
	}
}

// brokerStats asks every live broker for its figures (a second at most
// each); the record keeps what ps shows (unsafe, restarts, relayed).
func (d *Daemon) brokerStats() []broker.Stats {
	d.mu.Lock()
	var brs []*brokerRef
	for _, br := range d.brokers {
		if br.l != nil && !isDone(br.l.done) {
			brs = append(brs, br)
		}
	}
	d.mu.Unlock()
	var out []broker.Stats
	for _, br := range brs {
		st, err := sharing.AskStats(br.socket)
		if err != nil {
			d.log.Debug("broker stats", "id", br.id, "err", err)
			continue
		}
		out = append(out, st)
		d.learnFrom(br, st)
		d.update(br.id, "broker figures", func(p *registry.Process) error {
			unsafe := ""
			if st.Unsafe {
				unsafe = st.UnsafeReason
				if unsafe == "" {
					unsafe = "sent server-to-client requests"
				}
			}
			if p.Unsafe == unsafe && p.Restarts == st.Restarts && p.Relayed == st.Relayed {
				return errUnchanged
			}
			if unsafe != "" && p.Unsafe == "" {
				d.event("shared.unsafe", p.Session, p.ID, unsafe)
			}
			p.Unsafe, p.Restarts, p.Relayed = unsafe, st.Restarts, st.Relayed
			return nil
		})
	}
	return out
}

// watchBrokerEvery is how often a lazy or idle broker is asked for its
// figures: its lazy starts and idle stops become events within it.
const watchBrokerEvery = time.Second

// watchBroker follows a lazy or idle broker until it exits (a daemon stop
// stops it): starts, idle stops and cache changes become events, metrics
// and registry entries.
func (d *Daemon) watchBroker(br *brokerRef) {
	t := time.NewTicker(watchBrokerEvery)
	defer t.Stop()
	for {
		select {
		case <-br.l.done:
			return
		case <-d.life.Done():
			return
		case <-t.C:
		}
		if st, err := sharing.AskStats(br.socket); err == nil {
			d.learnFrom(br, st)
		}
	}
}
