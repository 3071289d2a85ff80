// Package egress is a sandboxed server's only way out to the network: a
// proxy that opens a connection for the server to a host its policy lists
// and refuses every other, speaking HTTP (CONNECT, and requests in
// absolute form) and SOCKS5 on one port. The server reaches it on its
// own loopback, in a network namespace where nothing else is (Namespace),
// or, where no namespace can be had, on the daemon's.
//
// A request is read in full and judged before anything is sent on: the
// target a tunnel opens is the one the proxy admitted, and a forwarded
// HTTP request is written anew from what was parsed, for one target and
// one request per connection.
package egress

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Proxy admits a server's connections to the hosts Admit allows.
type Proxy struct {
	// Admit says the server may reach host (as it named it) on port.
	Admit func(host string, port int) bool
	// Denied is told of each refusal: the target and why. It is called
	// from the connection's goroutine and must not block for long.
	Denied func(target, why string)
	// Dial opens a connection to an admitted target (default: a
	// net.Dialer with a 10 s timeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HandshakeTimeout bounds reading a request (default 10 s).
	HandshakeTimeout time.Duration
	// MaxConns bounds the connections open at once (default
	// DefaultMaxConns): each costs the daemon two descriptors, and a
	// server must not spend the daemon's.
	MaxConns int
}

// DefaultMaxConns is Proxy.MaxConns's default.
const DefaultMaxConns = 256

// Serve accepts connections on ln until ctx ends or ln fails, and closes
// ln and every connection it opened before it returns.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	slots := make(chan struct{}, cmp.Or(p.MaxConns, DefaultMaxConns))
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("egress proxy: accept: %w", err)
		}
		select {
		case slots <- struct{}{}:
		default:
			p.deny(c.RemoteAddr().String(), fmt.Sprintf("over %d connections open at once", cap(slots)))
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			p.serveConn(ctx, c)
		}()
	}
}

// serveConn serves one client connection: a protocol told by its first
// byte (5 is SOCKS5's version; HTTP starts with a method's letter).
func (p *Proxy) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	defer closeOnDone(ctx, c)()
	timeout := p.HandshakeTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == 5 {
		p.socks(ctx, c, br)
		return
	}
	p.http(ctx, c, br)
}

// open dials target host:port where it is admitted, telling Denied
// otherwise.
func (p *Proxy) open(ctx context.Context, host string, port int) (net.Conn, error) {
	target := net.JoinHostPort(host, strconv.Itoa(port))
	if host == "" || port < 1 || port > 65535 {
		p.deny(target, "not a host and port")
		return nil, errDenied
	}
	if p.Admit == nil || !p.Admit(host, port) {
		p.deny(target, "not in the server's network list")
		return nil, errDenied
	}
	dial := p.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		dial = d.DialContext
	}
	// What is dialled is what was admitted: the name as the list has it.
	up, err := dial(ctx, "tcp", net.JoinHostPort(strings.TrimSuffix(strings.ToLower(host), "."), strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", target, err)
	}
	return up, nil
}

// closeOnDone closes c when ctx ends; the func it returns stops that.
func closeOnDone(ctx context.Context, c net.Conn) func() bool {
	return context.AfterFunc(ctx, func() { c.Close() })
}

var errDenied = errors.New("not in the server's network list")

func (p *Proxy) deny(target, why string) {
	if p.Denied != nil {
		p.Denied(target, why)
	}
}

// http serves an HTTP proxy request: CONNECT opens a tunnel; a request
// in absolute form (GET http://host/path) is sent on to its host, alone,
// and the connection closes after its response.
func (p *Proxy) http(ctx context.Context, c net.Conn, br *bufio.Reader) {
	req, err := http.ReadRequest(br)
	if err != nil {
		reply(c, http.StatusBadRequest, "the egress proxy could not read the request: "+err.Error())
		return
	}
	if req.Method == http.MethodConnect {
		host, port, err := splitTarget(req.RequestURI, 0)
		if err != nil {
			reply(c, http.StatusBadRequest, "CONNECT "+req.RequestURI+": "+err.Error())
			return
		}
		up, err := p.open(ctx, host, port)
		if err != nil {
			reply(c, statusOf(err), "CONNECT "+req.RequestURI+": "+err.Error())
			return
		}
		defer up.Close()
		defer closeOnDone(ctx, up)()
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		_ = c.SetDeadline(time.Time{})
		relay(c, br, up)
		return
	}
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		reply(c, http.StatusBadRequest, "the egress proxy takes CONNECT host:port, or a request for an http:// URL in full; it got "+req.Method+" "+req.RequestURI)
		return
	}
	host, port, err := splitTarget(req.URL.Host, 80)
	if err != nil {
		reply(c, http.StatusBadRequest, req.URL.Host+": "+err.Error())
		return
	}
	up, err := p.open(ctx, host, port)
	if err != nil {
		reply(c, statusOf(err), req.URL.Host+": "+err.Error())
		return
	}
	defer up.Close()
	defer closeOnDone(ctx, up)()
	_ = c.SetDeadline(time.Time{})
	// Written anew from what was read, for the admitted host: the Host
	// header is the URL's, and hop-by-hop headers end here.
	req.Host = req.URL.Host
	req.RequestURI = ""
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		req.Header.Del(h)
	}
	req.Close = true
	errc := make(chan error, 1)
	go func() { errc <- req.Write(up) }()
	n, _ := io.Copy(c, up)
	up.Close()
	if err := <-errc; err != nil && n == 0 {
		reply(c, http.StatusBadGateway, "sending the request to "+req.URL.Host+": "+err.Error())
	}
}

func statusOf(err error) int {
	if errors.Is(err, errDenied) {
		return http.StatusForbidden
	}
	return http.StatusBadGateway
}

// reply answers an HTTP client with status and why, and closes.
func reply(c net.Conn, status int, why string) {
	body := "supervisor egress proxy: " + why + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// splitTarget reads host:port (the port defaults to def where def > 0).
func splitTarget(s string, def int) (string, int, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		if def > 0 && !strings.Contains(strings.TrimPrefix(strings.TrimSuffix(s, "]"), "["), ":") {
			return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), def, nil
		}
		return "", 0, fmt.Errorf("want host:port: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("the port %q is not a number from 1 to 65535", portStr)
	}
	return host, port, nil
}

// relay copies both ways between the client (whose reader may hold bytes
// read past its request) and up until both sides are done, passing each
// side's end on as a half-close.
func relay(c net.Conn, br *bufio.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
		}
		_, _ = io.Copy(up, c) // splices where both are TCP
		closeWrite(up)
	}()
	_, _ = io.Copy(c, up)
	closeWrite(c)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// SOCKS5 (RFC 1928): no authentication, CONNECT only.
const (
	socksNoAuth      = 0
	socksNoMethod    = 0xff
	socksConnect     = 1
	socksIPv4        = 1
	socksDomain      = 3
	socksIPv6        = 4
	socksOK          = 0
	socksNotAllowed  = 2
	socksRefused     = 5
	socksBadCommand  = 7
	socksBadAddrType = 8
)

func (p *Proxy) socks(ctx context.Context, c net.Conn, br *bufio.Reader) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	if !strings.ContainsRune(string(methods), socksNoAuth) {
		_, _ = c.Write([]byte{5, socksNoMethod})
		return
	}
	if _, err := c.Write([]byte{5, socksNoAuth}); err != nil {
		return
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 {
		return
	}
	var host string
	switch req[3] {
	case socksIPv4, socksIPv6:
		n := 4
		if req[3] == socksIPv6 {
			n = 16
		}
		a := make([]byte, n)
		if _, err := io.ReadFull(br, a); err != nil {
			return
		}
		host = net.IP(a).String()
	case socksDomain:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		a := make([]byte, n)
		if _, err := io.ReadFull(br, a); err != nil {
			return
		}
		host = string(a)
	default:
		socksReply(c, socksBadAddrType)
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return
	}
	port := int(binary.BigEndian.Uint16(pb[:]))
	if req[1] != socksConnect {
		p.deny(net.JoinHostPort(host, strconv.Itoa(port)), "SOCKS5 command "+strconv.Itoa(int(req[1]))+" (only CONNECT is served)")
		socksReply(c, socksBadCommand)
		return
	}
	up, err := p.open(ctx, host, port)
	if err != nil {
		code := byte(socksRefused)
		if errors.Is(err, errDenied) {
			code = socksNotAllowed
		}
		socksReply(c, code)
		return
	}
	defer up.Close()
	defer closeOnDone(ctx, up)()
	if !socksReply(c, socksOK) {
		return
	}
	_ = c.SetDeadline(time.Time{})
	relay(c, br, up)
}

// socksReply answers a SOCKS5 request with code and no bound address.
func socksReply(c net.Conn, code byte) bool {
	_, err := c.Write([]byte{5, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err == nil
}
