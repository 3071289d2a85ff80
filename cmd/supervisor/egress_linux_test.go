package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
)

// TestSandboxNetworkList: a server whose policy lists hosts reaches them
// through the egress proxy (HTTP, CONNECT and SOCKS5, names resolved by
// the proxy), and nothing else: not an unlisted port through the proxy,
// not a listed one directly, not UDP; a setsid grandchild no more. Each
// refusal of the proxy is a sandbox.denied event naming the target.
func TestSandboxNetworkList(t *testing.T) {
	t.Parallel()
	curlOrSkip(t)
	// Both ways to the proxy: a namespace of the server's own (a root
	// daemon), and the daemon's loopback, by port (any other).
	for _, netns := range []string{"auto", "off"} {
		t.Run("netns "+netns, func(t *testing.T) {
			t.Parallel()
			testNetworkList(t, netns)
		})
	}
}

func testNetworkList(t *testing.T, netns string) {
	in := newInstance(t)
	home, work, tmp := sandboxHome(t)
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp, "NO_PROXY=localhost,127.0.0.1", "HTTPS_PROXY=http://127.0.0.1:1",
		"SUPERVISOR_SANDBOX_NETNS="+netns)
	allowed, other := httpPort(t), httpPort(t)
	list := "127.0.0.1:" + allowed + ",localhost:" + allowed
	if netns == "off" {
		// A server's network key asks for its sandbox, as --network does.
		conf := "[servers.netlist]\nnetwork = \"" + list + "\"\n"
		if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sandboxOrSkip(t, in)
	status := in.mustRun("status")
	wantHow := "in a network namespace"
	if netns == "off" || !strings.Contains(status, wantHow) {
		wantHow = "by port only"
	}
	if netns == "auto" && os.Getuid() == 0 && !strings.Contains(status, "in a network namespace") {
		t.Errorf("a root daemon makes no network namespaces:\n%s", status)
	}
	get := `curl -sf --max-time 20 -o /dev/null`
	script := tryActs + `
try proxy-http "` + get + ` http://127.0.0.1:` + allowed + `/"
try proxy-name "` + get + ` http://LocalHost:` + allowed + `/"
try proxy-connect "` + get + ` -p http://127.0.0.1:` + allowed + `/"
try proxy-socks "` + get + ` -x \"$ALL_PROXY\" http://localhost:` + allowed + `/"
try proxy-other "` + get + ` http://127.0.0.1:` + other + `/"
try socks-other "` + get + ` -x \"$ALL_PROXY\" http://127.0.0.1:` + other + `/"
try direct "` + get + ` --noproxy '*' http://127.0.0.1:` + allowed + `/"
try udp "perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => q(127.0.0.1:53), Proto => q(udp)) or exit 1'"
try grandchild "setsid ` + get + ` --noproxy '*' http://127.0.0.1:` + allowed + `/ </dev/null"
try grandchild-proxy "setsid ` + get + ` http://127.0.0.1:` + allowed + `/ </dev/null"
echo "no_proxy=[$NO_PROXY$no_proxy]"
echo done
exec cat`
	args := []string{"--session", "sbn", "--name", "netlist", "--cwd", work, "--network", list}
	if netns == "off" { // and the list from the config file (read as the daemon starts)
		args = args[:len(args)-2]
	}
	srv := in.startShim(append(args, "--", "sh", "-c", script)...)
	got := readActs(t, srv)
	want := map[string]string{
		"proxy-http": "ok", "proxy-name": "ok", "proxy-connect": "ok", "proxy-socks": "ok",
		"proxy-other": "denied", "socks-other": "denied", "direct": "denied", "udp": "denied",
		"grandchild": "denied", "grandchild-proxy": "ok", "no_proxy=[]": "",
	}
	for act, w := range want {
		if r, ok := got[act]; !ok || r != w {
			t.Errorf("%s: %q, want %q (all: %v)", act, r, w, got)
		}
	}
	srv.stdin.Close()
	if code := srv.exitCode(t); code != 0 {
		t.Errorf("the server's shim exited %d after stdin EOF, want 0", code)
	}
	evs := in.mustRun("events", "--session", "sbn")
	// The proxy's refusals; where the kernel's audit is on, Landlock's own
	// (the direct connection, by port only) are events too.
	if n := strings.Count(evs, "sandbox.denied") - strings.Count(evs, "net.connect_tcp denied"); n != 2 || !strings.Contains(evs, "127.0.0.1:"+other) {
		t.Errorf("want two sandbox.denied events naming 127.0.0.1:%s (the proxy's refusals), got %d:\n%s", other, n, evs)
	}
	if !strings.Contains(evs, "2 hosts through the egress proxy") {
		t.Errorf("the start event does not name the egress proxy:\n%s", evs)
	}
	if !strings.Contains(status, "network lists: through the egress proxy, "+wantHow) {
		t.Errorf("status does not say how network lists are enforced (%s):\n%s", wantHow, status)
	}
	if !strings.Contains(evs, "("+wantHow) {
		t.Errorf("the start event does not say how the proxy is reached (%s):\n%s", wantHow, evs)
	}
}

// TestSandboxNetworkListAfterDaemonCrash: a daemon that crashes and comes
// back opens the egress proxy of a server it adopts again, in its
// namespace or at its port, with the same list: the server reaches its
// host through it as before, and no other.
func TestSandboxNetworkListAfterDaemonCrash(t *testing.T) {
	t.Parallel()
	curlOrSkip(t)
	for _, netns := range []string{"auto", "off"} {
		t.Run("netns "+netns, func(t *testing.T) {
			t.Parallel()
			in, work := sandboxNetInstance(t, netns)
			allowed, other := httpPort(t), httpPort(t)
			// One line in, the fetch of that port through the proxy out.
			script := `while read port; do if curl -sf --max-time 20 -o /dev/null http://127.0.0.1:$port/; then echo "$port ok"; else echo "$port denied"; fi; done`
			srv := in.startShim("--session", "sbc", "--name", "netcrash", "--cwd", work, "--network", "127.0.0.1:"+allowed, "--", "sh", "-c", script)
			ask := func(port, want string) {
				t.Helper()
				fmt.Fprintln(srv.stdin, port)
				line, err := readLine(srv.stdout, wait)
				if err != nil || line != port+" "+want {
					t.Fatalf("port %s: %q, %v; want %q", port, line, err, port+" "+want)
				}
			}
			ask(allowed, "ok")
			if out := in.mustRun("inspect", "netcrash"); !strings.Contains(out, "network:  127.0.0.1:"+allowed+", through the egress proxy") {
				t.Errorf("inspect does not show the network list:\n%s", out)
			}
			old := in.killDaemon(t)
			in.mustRun("daemon")
			in.waitNewDaemon(t, old)
			ask(allowed, "ok")
			ask(other, "denied")
			evs := in.mustRun("events", "--session", "sbc")
			if !strings.Contains(evs, "127.0.0.1:"+other) || !strings.Contains(evs, "process.adopted") {
				t.Errorf("want the adoption and the refusal of 127.0.0.1:%s after the restart:\n%s", other, evs)
			}
			// The server answers before its shim has found the new daemon
			// (it backs off up to 500 ms); a server that exits before that
			// has a status nobody kept, and the shim says so with 125.
			in.waitLog(t, "shim re-attached", 1)
			srv.stdin.Close()
			if code := srv.exitCode(t); code != 0 {
				t.Errorf("the server's shim exited %d after stdin EOF, want 0", code)
			}
		})
	}
}

// curlOrSkip skips a test that needs curl, a real proxy client.
func curlOrSkip(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl, a real proxy client: " + err.Error())
	}
}

// sandboxNetInstance is a started instance with a home of secrets
// (sandboxHome) whose daemon makes network namespaces for network lists
// or not (netns: auto, off), and the project directory in that home.
func sandboxNetInstance(t *testing.T, netns string) (*instance, string) {
	t.Helper()
	in := newInstance(t)
	home, work, tmp := sandboxHome(t)
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp, "SUPERVISOR_SANDBOX_NETNS="+netns)
	sandboxOrSkip(t, in)
	return in, work
}

// httpPort is the port of an HTTP server on this machine's loopback that
// answers "reached", closed with the test.
func httpPort(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }))
	t.Cleanup(s.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	return port
}

// TestSandboxNetworkListShared: a shared server's upstream reaches the
// listed host through its broker's egress proxy, and nothing else, in its
// first run and after a crash of it; after a crash of the daemon, which
// opens the proxy again for the broker it adopts. Both ways to the proxy.
func TestSandboxNetworkListShared(t *testing.T) {
	t.Parallel()
	curlOrSkip(t)
	for _, netns := range []string{"auto", "off"} {
		t.Run("netns "+netns, func(t *testing.T) {
			t.Parallel()
			in, _ := sandboxNetInstance(t, netns)
			in.via = []string{"sh", "-c", `"$0" "$@"; exit $?`}
			allowed, other := httpPort(t), httpPort(t)
			host := func() *rawHost {
				h := startRawHost(t, in, "--share", "--name", "netshared", "--sandbox", "--allow-read", filepath.Dir(bin),
					"--network", "127.0.0.1:"+allowed, "--", bin, "_fixture", "mcp")
				h.handshake()
				return h
			}
			a, b := host(), host()
			id := 10
			fetch := func(h *rawHost, port, want string) {
				t.Helper()
				id++
				got := h.ask(id, "tools/call", fmt.Sprintf(`{"name":"fetch","arguments":{"text":"http://127.0.0.1:%s/"}}`, port)).String()
				if !strings.Contains(got, want) {
					t.Errorf("fetch of port %s: %s, want %q", port, got, want)
				}
			}
			fetch(a, allowed, "fetched: reached")
			fetch(b, allowed, "fetched: reached")
			fetch(a, other, "denied")
			var broker api.Process
			for _, p := range in.mustProcesses(false) {
				if p.Broker {
					broker = p
				}
			}
			if broker.Egress == nil || len(broker.Egress.Hosts) != 1 {
				t.Fatalf("the broker's record has no network list: %+v", broker)
			}
			if mine, _ := os.Readlink("/proc/self/ns/net"); netns == "auto" && os.Getuid() == 0 {
				if theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", broker.PID)); err != nil || theirs == mine || !broker.Egress.Netns {
					t.Errorf("a root daemon's broker is not in a network namespace of its own (%s, %v; this one's %s; recorded %v)", theirs, err, mine, broker.Egress.Netns)
				}
			}
			if evs := in.mustRun("events"); !strings.Contains(evs, "network: 127.0.0.1:"+other+": not in the server's network list") {
				t.Errorf("no sandbox.denied event for the proxy's refusal:\n%s", evs)
			}
			// The upstream crashes; its next run is behind the same proxy.
			pidOf := func(h *rawHost) int {
				id++
				s := h.ask(id, "tools/call", `{"name":"stats","arguments":{}}`).String()
				var pid int
				if i := strings.Index(s, "pid="); i >= 0 {
					fmt.Sscan(s[i+4:], &pid)
				}
				return pid
			}
			first := pidOf(a)
			a.send(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"crash","arguments":{}}}`)
			waitCond(t, func() error {
				id++
				r, _ := b.tryAsk(id, "tools/call", `{"name":"stats","arguments":{}}`)
				if s := r.String(); !strings.Contains(s, "pid=") || strings.Contains(s, fmt.Sprintf("pid=%d ", first)) {
					return fmt.Errorf("the upstream was not restarted after its crash: %s", s)
				}
				return nil
			})
			fetch(b, allowed, "fetched: reached")
			fetch(b, other, "denied")
			// The daemon crashes: the next one opens the broker's proxy again.
			old := in.killDaemon(t)
			in.mustRun("daemon")
			in.waitNewDaemon(t, old)
			in.waitLog(t, "egress proxy opened again", 1)
			fetch(b, allowed, "fetched: reached")
			fetch(b, other, "denied")
		})
	}
}

// TestEnsureSandboxedNetworkList: a port-bound shared server's network
// list holds through the egress proxy, by port only (a namespace would
// hide the port it serves), and the proxy outlives a restart of it.
func TestEnsureSandboxedNetworkList(t *testing.T) {
	t.Parallel()
	curlOrSkip(t)
	in := newInstance(t)
	home, work, tmp := sandboxHome(t)
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp)
	in.via = []string{"sh", "-c", `"$0" "$@"; exit $?`}
	sandboxOrSkip(t, in)
	allowed, other := httpPort(t), httpPort(t)
	ps := strconv.Itoa(freePort(t))
	// What it reached goes to a file, then it serves its port.
	get := `curl -sf --max-time 20 -o /dev/null`
	script := `r() { if ` + get + ` "http://127.0.0.1:$1/"; then echo ok; else echo denied; fi; }
echo "$(r ` + allowed + `) $(r ` + other + `)" > ` + work + `/reached.tmp && mv ` + work + `/reached.tmp ` + work + `/reached
exec "$0" _fixture listen ` + ps
	res, errOut, code := in.ensure(t, "--session", "sben", "--name", "netport", "--port", ps, "--cwd", work, "--allow-write", work,
		"--network", "127.0.0.1:"+allowed, "--", "sh", "-c", script, bin)
	if code != 0 {
		t.Fatalf("ensure with a network list: exit %d: %s", code, errOut)
	}
	reached := func() string {
		t.Helper()
		var b []byte
		waitCond(t, func() (err error) {
			b, err = os.ReadFile(filepath.Join(work, "reached"))
			return err
		})
		os.Remove(filepath.Join(work, "reached"))
		return strings.TrimSpace(string(b))
	}
	if got := reached(); got != "ok denied" {
		t.Errorf("the shared server reached %q of (listed, unlisted), want \"ok denied\"", got)
	}
	p := waitRecord(t, in, res.PID, func(api.Process) bool { return true })
	if p.Egress == nil || p.Egress.Netns || len(p.Egress.Hosts) != 1 {
		t.Errorf("the record's egress %+v, want the list, by port only", p.Egress)
	}
	if out := in.mustRun("restart", "netport"); !strings.Contains(out, "restarted, pid ") {
		t.Fatalf("restart netport: %q", out)
	}
	if got := reached(); got != "ok denied" {
		t.Errorf("after a restart the shared server reached %q of (listed, unlisted), want \"ok denied\"", got)
	}
	if evs := in.mustRun("events"); strings.Count(evs, "network: 127.0.0.1:"+other+": not in the server's network list") != 2 {
		t.Errorf("want the proxy's two refusals as events:\n%s", evs)
	}
}
