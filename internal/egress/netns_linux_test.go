package egress

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// inNamespace runs f on a thread moved into ns, which is never handed
// back to Go.
func inNamespace(t *testing.T, ns *Namespace, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends here
		if err := unix.Setns(int(ns.Fd.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		f()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("setns: %v", err)
	}
}

// TestNamespaceReachesOnlyTheProxy: in a server's namespace the proxy is
// on the loopback and admits what is listed; a listener of the host's
// loopback cannot be reached directly, nor a name resolved.
func TestNamespaceReachesOnlyTheProxy(t *testing.T) {
	t.Parallel()
	if why := NamespaceSupport(); why != "" {
		t.Skip("no network namespace here: " + why)
	}
	_, allowed := target(t)
	hosts, _ := sandbox.ParseHosts(allowed)
	ns, err := NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	p := &Proxy{Admit: func(h string, port int) bool { return sandbox.Admits(hosts, h, port) }}
	go func() { done <- p.Serve(ctx, ns.Listener) }()
	defer func() { cancel(); <-done }()
	proxy := fmt.Sprintf("127.0.0.1:%d", Port)
	var direct, viaProxy, lookup error
	var got string
	inNamespace(t, ns, func() {
		var c net.Conn
		if c, direct = net.Dial("tcp", allowed); direct == nil {
			c.Close()
		}
		got, viaProxy = viaConnect(proxy, allowed)
		_, lookup = net.LookupHost("example.com")
	})
	if direct == nil {
		t.Errorf("a direct connection to the host's %s was made from the namespace", allowed)
	}
	if viaProxy != nil || !strings.HasPrefix(got, "hello") {
		t.Errorf("through the proxy: %q, %v; want the listed host reached", got, viaProxy)
	}
	if lookup == nil {
		t.Error("a name was resolved from the namespace")
	}
	// The daemon's own thread is not in it.
	own, _ := os.Readlink("/proc/thread-self/ns/net")
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if own == fmt.Sprintf("net:[%d]", st.Ino) {
		t.Error("the calling thread was left in the server's namespace")
	}
}

// BenchmarkNamespace is what a network list adds to a root daemon's
// start of a server: a namespace made, its loopback up and the proxy's
// listener in it, and all of it closed.
func BenchmarkNamespace(b *testing.B) {
	if why := NamespaceSupport(); why != "" {
		b.Skip("no network namespace here: " + why)
	}
	for b.Loop() {
		ns, err := NewNamespace()
		if err != nil {
			b.Fatal(err)
		}
		ns.Close()
	}
}
