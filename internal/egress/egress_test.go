package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// proxyFor serves a proxy admitting list on a loopback port of its own
// and returns its address and the refusals it reported.
func proxyFor(t testing.TB, list string) (string, func() []string) {
	t.Helper()
	hosts, err := sandbox.ParseHosts(list)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var denied []string
	addr := serve(t, &Proxy{
		Admit:  func(h string, port int) bool { return sandbox.Admits(hosts, h, port) },
		Denied: func(target, why string) { mu.Lock(); denied = append(denied, target); mu.Unlock() },
	})
	return addr, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), denied...) }
}

// serve runs p on a loopback port of its own until the test ends, and
// returns its address.
func serve(t testing.TB, p *Proxy) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func target(t testing.TB) (*httptest.Server, string) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.Host)
	}))
	t.Cleanup(s.Close)
	return s, strings.TrimPrefix(s.URL, "http://")
}

// viaConnect asks the proxy for a tunnel to hostport, then GETs / through it.
func viaConnect(proxy, hostport string) (string, error) {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		return "", err
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// viaAbsolute GETs http://hostport/ through the proxy as a forward proxy.
func viaAbsolute(proxy, hostport string) (string, error) {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		return "", err
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: elsewhere.invalid\r\nProxy-Connection: keep-alive\r\n\r\n", hostport)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

// viaSocks opens hostport through the proxy with SOCKS5 (a domain name
// unless it is an IPv4 address) and GETs / through it.
func viaSocks(proxy, hostport string) (string, error) {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		return "", err
	}
	defer c.Close()
	host, portStr, _ := net.SplitHostPort(hostport)
	port, _ := strconv.Atoi(portStr)
	req := []byte{5, 1, 0, 5, 1, 0}
	if ip := net.ParseIP(host).To4(); ip != nil {
		req = append(req, 1)
		req = append(req, ip...)
	} else {
		req = append(req, 3, byte(len(host)))
		req = append(req, host...)
	}
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		return "", err
	}
	var ans [12]byte
	if _, err := io.ReadFull(c, ans[:]); err != nil {
		return "", err
	}
	if ans[0] != 5 || ans[1] != 0 || ans[3] != 0 {
		return "", fmt.Errorf("SOCKS5 reply %v", ans[2:])
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestProxyAdmitsOnlyTheList(t *testing.T) {
	t.Parallel()
	_, allowed := target(t)
	_, other := target(t)
	_, aport, _ := net.SplitHostPort(allowed)
	proxy, denied := proxyFor(t, "localhost:"+aport+","+allowed)
	ways := map[string]func(string, string) (string, error){"CONNECT": viaConnect, "absolute GET": viaAbsolute, "SOCKS5": viaSocks}
	for name, via := range ways {
		for _, tc := range []struct {
			to   string
			want bool
		}{
			{allowed, true},
			{"localhost:" + aport, true},  // a name the proxy resolves
			{"LOCALHOST.:" + aport, true}, // the same name, written otherwise
			{other, false},                // a listed host, another port
			{"127.0.0.2:" + aport, false}, // the port, another host
		} {
			got, err := via(proxy, tc.to)
			if tc.want && (err != nil || !strings.HasPrefix(got, "hello")) {
				t.Errorf("%s %s: %q, %v; want it admitted", name, tc.to, got, err)
			}
			if !tc.want && err == nil {
				t.Errorf("%s %s: %q; want it refused", name, tc.to, got)
			}
		}
	}
	want := []string{other, "127.0.0.2:" + aport}
	got := denied()
	if len(got) != len(want)*len(ways) {
		t.Errorf("refusals reported: %v; want each of %v once per protocol", got, want)
	}
}

// TestProxyRefusesWhatItCannotRead: a request the proxy cannot read, or
// does not serve, is answered with why and never sent on.
func TestProxyRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	_, allowed := target(t)
	proxy, _ := proxyFor(t, allowed)
	for _, tc := range []struct {
		name, send, want string
	}{
		{"garbage", "\x16\x03\x01 not http\r\n\r\n", "400"},
		{"CONNECT without a port", "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", "400"},
		{"origin form", "GET / HTTP/1.1\r\nHost: " + allowed + "\r\n\r\n", "400"},
		{"https in absolute form", "GET https://" + allowed + "/ HTTP/1.1\r\nHost: " + allowed + "\r\n\r\n", "400"},
		{"two lengths", "POST http://" + allowed + "/ HTTP/1.1\r\nHost: " + allowed + "\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "400"},
		{"SOCKS5 BIND", "\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", "\x05\x00\x05\x07"},
		{"SOCKS5 with a password only", "\x05\x01\x02", "\x05\xff"},
	} {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, tc.send)
		b, _ := io.ReadAll(c)
		c.Close()
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: answered %q, want %q in it", tc.name, b, tc.want)
		}
	}
}

// TestProxyEndsWithItsContext: Serve returns once its context ends, with
// a tunnel still open, and closes that tunnel.
func TestProxyEndsWithItsContext(t *testing.T) {
	t.Parallel()
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open until the listener closes
		}
	}()
	hosts, _ := sandbox.ParseHosts(up.Addr().String())
	p := &Proxy{Admit: func(h string, port int) bool { return sandbox.Admits(hosts, h, port) }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", up.Addr())
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the tunnel was left open: read %v", err)
	}
}

// TestProxyBoundsItsConnections: past MaxConns open at once, a connection
// is refused (and reported) until one closes.
func TestProxyBoundsItsConnections(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var denied []string
	addr := serve(t, &Proxy{Admit: func(string, int) bool { return false }, MaxConns: 2,
		Denied: func(target, why string) { mu.Lock(); denied = append(denied, why); mu.Unlock() }})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	// Less than the proxy's 10 s for a request: a served connection
	// would still be open.
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the third connection at once: read %v, want it closed", err)
	}
	mu.Lock()
	if len(denied) != 1 || !strings.Contains(denied[0], "over 2 connections") {
		t.Errorf("refusals %q, want one for the bound", denied)
	}
	mu.Unlock()
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err == nil && resp.StatusCode == http.StatusForbidden {
			break // served (and refused by the list): a slot was free again
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot came free after a connection closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
