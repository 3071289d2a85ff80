package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// echoOnce is an upstream that answers each connection's first byte with
// one byte and then takes whatever is sent until EOF.
func echoOnce(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var one [1]byte
				if _, err := io.ReadFull(c, one[:]); err != nil {
					return
				}
				if _, err := c.Write(one[:]); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// open connects to up directly, or through the proxy with CONNECT, and
// makes one round trip on it.
func open(b *testing.B, proxy, up string) net.Conn {
	addr := up
	if proxy != "" {
		addr = proxy
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	r := bufio.NewReader(c)
	if proxy != "" {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", up)
		resp, err := http.ReadResponse(r, nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
	}
	if _, err := c.Write([]byte{1}); err != nil {
		b.Fatal(err)
	}
	if _, err := r.ReadByte(); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkConnect is a connection opened and one round trip made on it,
// directly and through the proxy, side by side: the proxy's cost per
// connection is the difference (goal: at most 1 ms).
func BenchmarkConnect(b *testing.B) {
	up := echoOnce(b)
	proxy, _ := proxyFor(b, up)
	for _, via := range []struct{ name, proxy string }{{"direct", ""}, {"proxy", proxy}} {
		b.Run(via.name, func(b *testing.B) {
			for b.Loop() {
				open(b, via.proxy, up).Close()
			}
		})
	}
}

// BenchmarkThroughput is bytes sent to a host directly and through the
// proxy's tunnel, side by side (goal: at least 500 MB/s through it).
func BenchmarkThroughput(b *testing.B) {
	up := echoOnce(b)
	proxy, _ := proxyFor(b, up)
	chunk := make([]byte, 1<<20)
	for _, via := range []struct{ name, proxy string }{{"direct", ""}, {"proxy", proxy}} {
		b.Run(via.name, func(b *testing.B) {
			c := open(b, via.proxy, up)
			defer c.Close()
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				if _, err := c.Write(chunk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
