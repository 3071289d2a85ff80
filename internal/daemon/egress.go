package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/seed-86a41135/supervisor/internal/egress"
	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
	"github.com/seed-86a41135/supervisor/registry"
)

// maxDenialEvents bounds the sandbox.denied events one server's proxy
// logs: a server retrying in a loop is counted (the metric), not left to
// fill the event log.
const maxDenialEvents = 100

// egressRun is the egress proxy of a server whose policy lists hosts: the
// only way out its sandbox leaves it (design §5, "Sandbox").
type egressRun struct {
	ns     *egress.Namespace // nil: the proxy listens on the daemon's loopback
	stop   context.CancelFunc
	served chan struct{}
	rec    registry.Egress // what a restarted daemon opens again
}

// openEgress starts the proxy for a run whose rules list hosts, on the
// loopback of a network namespace made for the server where the daemon
// can make one and portOnly gives no reason not to, else on its own; lets
// the rules connect to it and puts its address in the server's
// environment. nil for a run without a list.
func (d *Daemon) openEgress(session, id string, launch *launched, portOnly string) (*egressRun, error) {
	rules := launch.sandbox
	if rules == nil || rules.Hosts == nil {
		return nil, nil
	}
	e := &egressRun{served: make(chan struct{})}
	var ln net.Listener
	port := egress.Port
	noNamespace := d.sandboxCaps.NoNamespace
	if noNamespace == "" {
		noNamespace = portOnly
	}
	if noNamespace == "" {
		ns, err := egress.NewNamespace()
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		e.ns, ln = ns, ns.Listener
		rules.Egress = "in a network namespace of its own"
	} else {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("sandbox: the egress proxy's listener: %w", err)
		}
		ln, port = l, l.Addr().(*net.TCPAddr).Port
		rules.Egress = "by port only: " + noNamespace
		if d.sandboxCaps.Mechanism == "seatbelt" {
			rules.Egress = "on the daemon's loopback, whose address alone the profile allows"
		}
	}
	rules.ConnectPorts = []int{port}
	launch.env = proxyEnv(launch.env, port)
	launch.note = strings.Replace(launch.note, "through the egress proxy", "through the egress proxy ("+rules.Egress+")", 1)
	e.rec = registry.Egress{Port: port, Netns: e.ns != nil}
	for _, h := range rules.Hosts {
		e.rec.Hosts = append(e.rec.Hosts, h.String())
	}
	d.serveEgress(e, ln, session, id, rules.Hosts)
	return e, nil
}

// serveEgress serves e's proxy on ln for server id, admitting hosts,
// until e is closed or the daemon ends.
func (d *Daemon) serveEgress(e *egressRun, ln net.Listener, session, id string, hosts []sandbox.Host) {
	var denials atomic.Int64
	p := &egress.Proxy{
		Admit: func(host string, port int) bool { return sandbox.Admits(hosts, host, port) },
		Denied: func(target, why string) {
			d.metrics.SandboxDenied("network")
			switch n := denials.Add(1); {
			case n < maxDenialEvents:
				d.event("sandbox.denied", session, id, "network: "+target+": "+why)
			case n == maxDenialEvents:
				d.event("sandbox.denied", session, id, "network: "+target+": "+why+"; further denials of this server are counted (supervisor_sandbox_denied_total), not logged")
			}
		},
	}
	ctx, cancel := context.WithCancel(d.life)
	e.stop = cancel
	d.tasks.Go("egress proxy", func() {
		defer close(e.served)
		if err := p.Serve(ctx, ln); err != nil {
			d.log.Warn("egress proxy ended: the server has no network from now", "id", id, "err", err)
		}
	})
}

// reopenEgress opens again, for a server a restarted daemon adopts, the
// proxy its network list runs behind: inside its own namespace (entered
// by its pid, proven by its token after the namespace was opened), or on
// the daemon's loopback at the port its sandbox lets it reach. One that
// cannot be opened leaves the server without network: less, never more.
func (d *Daemon) reopenEgress(p registry.Process, l *live) {
	hosts, err := sandbox.ParseHosts(strings.Join(p.Egress.Hosts, ","))
	var ln net.Listener
	if err == nil && p.Egress.Netns {
		ln, err = egress.ListenIn(p.PID, func() error { return proc.Verify(p.PID, p.Token) })
	} else if err == nil {
		ln, err = net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(p.Egress.Port))
	}
	if err != nil {
		d.log.Warn("egress proxy not opened again: the server has no network until it restarts", "id", p.ID, "err", err)
		d.event("sandbox.denied", p.Session, p.ID, "network: the egress proxy could not be opened again after the daemon's restart ("+err.Error()+"): no network until the server restarts")
		return
	}
	e := &egressRun{served: make(chan struct{}), rec: *p.Egress}
	d.serveEgress(e, ln, p.Session, p.ID, hosts)
	d.watchEgress(e, l)
	d.log.Info("egress proxy opened again", "id", p.ID, "hosts", p.Egress.Hosts)
}

// record is what the server's record keeps of e, nil for none.
func (e *egressRun) record() *registry.Egress {
	if e == nil {
		return nil
	}
	r := e.rec
	return &r
}

// netns is the namespace the server is forked into, nil for none.
func (e *egressRun) netns() *os.File {
	if e == nil || e.ns == nil {
		return nil
	}
	return e.ns.Fd
}

// forked lets go of the namespace's fd once the fork has put the server in
// it (or failed): the namespace lives on with the server.
func (e *egressRun) forked() {
	if e != nil && e.ns != nil {
		e.ns.Fd.Close()
	}
}

// close ends the proxy, its tunnels with it.
func (e *egressRun) close() {
	if e == nil {
		return
	}
	e.forked()
	e.stop()
	<-e.served
}

// watch closes the proxy once the server l has ended (or the daemon has).
func (d *Daemon) watchEgress(e *egressRun, l *live) {
	if e == nil {
		return
	}
	d.tasks.Go("egress watch", func() {
		select {
		case <-l.done:
		case <-d.life.Done():
		}
		e.close()
	})
}

// proxyEnv is env with the proxy variables set to the proxy on port and
// any the host gave dropped: HTTP clients take the proxy from these
// (Node's fetch from 24 with NODE_USE_ENV_PROXY); one that ignores them
// has no network at all.
func proxyEnv(env []string, port int) []string {
	names := []string{"http_proxy", "https_proxy", "all_proxy", "no_proxy", "node_use_env_proxy"}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			if strings.EqualFold(k, n) {
				drop = true
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	http := "http://127.0.0.1:" + strconv.Itoa(port)
	socks := "socks5h://127.0.0.1:" + strconv.Itoa(port)
	return append(out, "HTTP_PROXY="+http, "HTTPS_PROXY="+http, "http_proxy="+http, "https_proxy="+http,
		"ALL_PROXY="+socks, "all_proxy="+socks, "NODE_USE_ENV_PROXY=1")
}
