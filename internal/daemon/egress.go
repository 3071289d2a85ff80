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
	"github.com/seed-86a41135/supervisor/internal/sandbox"
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
}

// openEgress starts the proxy for a run whose rules list hosts, on the
// loopback of a network namespace made for the server where the daemon
// can make one, else on its own; lets the rules connect to it and puts
// its address in the server's environment. nil for a run without a list.
func (d *Daemon) openEgress(session, id string, launch *launched) (*egressRun, error) {
	rules := launch.sandbox
	if rules == nil || rules.Hosts == nil {
		return nil, nil
	}
	e := &egressRun{served: make(chan struct{})}
	var ln net.Listener
	port := egress.Port
	if d.sandboxCaps.NoNamespace == "" {
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
		rules.Egress = "by port only: " + d.sandboxCaps.NoNamespace
		if d.sandboxCaps.Mechanism == "seatbelt" {
			rules.Egress = "on the daemon's loopback, whose address alone the profile allows"
		}
	}
	rules.ConnectPorts = []int{port}
	launch.env = proxyEnv(launch.env, port)
	launch.note = strings.Replace(launch.note, "through the egress proxy", "through the egress proxy ("+rules.Egress+")", 1)
	hosts := rules.Hosts
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
	return e, nil
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
