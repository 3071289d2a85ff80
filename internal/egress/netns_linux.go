package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Port is where a server finds its proxy on its own loopback, inside a
// namespace of its own (any port would do: nothing else is there).
const Port = 3128

// Namespace is a network namespace with nothing in it but a loopback and
// the proxy's listener on it: a server forked into it (Fd, setns) reaches
// nothing else, by any protocol, names included (there is no resolver).
type Namespace struct {
	// Fd is the namespace (/proc/thread-self/ns/net as it was made).
	Fd *os.File
	// Listener is the proxy's, on 127.0.0.1:Port inside the namespace;
	// its socket stays there whichever thread accepts on it.
	Listener net.Listener
}

// NewNamespace makes a Namespace, on a thread of its own that enters it
// and is never handed back to Go (it ends with its goroutine): no other
// goroutine ever runs in the namespace. It needs CAP_SYS_ADMIN (a root
// daemon); NamespaceSupport says whether this process has it.
func NewNamespace() (*Namespace, error) {
	type result struct {
		ns  *Namespace
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		ns, err := enterNew()
		done <- result{ns, err}
	}()
	r := <-done
	return r.ns, r.err
}

func enterNew() (*Namespace, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("a network namespace for the server: unshare: %w", err)
	}
	if err := LoopbackUp(); err != nil {
		return nil, err
	}
	fd, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("a network namespace for the server: %w", err)
	}
	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", Port))
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("the egress proxy's listener in the server's namespace: %w", err)
	}
	return &Namespace{Fd: fd, Listener: ln}, nil
}

// ListenIn opens the proxy's listener again in the network namespace of
// process pid (a server whose daemon restarted): the namespace is opened
// first, then verify proves pid is still that server (its token), so a
// recycled pid's namespace is never entered. The thread that enters it
// ends with its goroutine.
func ListenIn(pid int, verify func() error) (net.Listener, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("the server's network namespace: %w", err)
	}
	defer ns.Close()
	if err := verify(); err != nil {
		return nil, fmt.Errorf("the server's network namespace: %w", err)
	}
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in the namespace
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter the server's network namespace: %w", err)}
			return
		}
		ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", Port))
		if err != nil {
			err = fmt.Errorf("the egress proxy's listener in the server's namespace: %w", err)
		}
		done <- result{ln, err}
	}()
	r := <-done
	return r.ln, r.err
}

// LoopbackUp brings up lo in the calling thread's network namespace: a
// new namespace has it down, and then nothing, 127.0.0.1 included, is
// reachable.
func LoopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up the namespace's loopback: socket: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring up the namespace's loopback: %w", err)
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up the namespace's loopback: SIOCGIFFLAGS: %w", err)
	}
	if flags := ifr.Uint16(); flags&unix.IFF_UP == 0 {
		ifr.SetUint16(flags | unix.IFF_UP)
		if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
			return fmt.Errorf("bring up the namespace's loopback: SIOCSIFFLAGS: %w", err)
		}
	}
	return nil
}

// Close closes the namespace's fd and the listener; the namespace goes
// with the last process in it.
func (n *Namespace) Close() error {
	return errors.Join(n.Listener.Close(), n.Fd.Close())
}

// NamespaceSupport says why NewNamespace cannot work for this process, or
// "": it needs CAP_SYS_ADMIN, which a daemon not run as root lacks (an
// unprivileged user namespace would give it, but a daemon's threads
// cannot enter one: the kernel refuses a multithreaded process).
func NamespaceSupport() string {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return "its capabilities cannot be read: " + err.Error()
	}
	if data[0].Effective&(1<<unix.CAP_SYS_ADMIN) == 0 {
		return "the daemon lacks CAP_SYS_ADMIN (it does not run as root), so it cannot make a network namespace"
	}
	return ""
}
