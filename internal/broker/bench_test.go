//go:build linux

package broker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// BenchmarkRoundTrip is one client's tools/call echo of 1 KiB and of
// 1 MiB, and a blob call answered with 1 MiB (bench's relay-cost
// throughput), through the broker and straight to the same fixture
// server: the difference is the relay's cost.
func BenchmarkRoundTrip(b *testing.B) {
	type bench struct {
		name string
		line string
		size int
	}
	var benches []bench
	for _, size := range []int{1 << 10, 1 << 20} {
		benches = append(benches, bench{fmt.Sprintf("%dKiB", size>>10),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`+"\n", strings.Repeat("x", size)), size})
	}
	benches = append(benches, bench{"blob1MiB", `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"blob","arguments":{"bytes":1048576}}}` + "\n", 1 << 20})
	for _, bc := range benches {
		line, size := bc.line, bc.size
		b.Run("direct/"+bc.name, func(b *testing.B) {
			cmd := exec.Command(bin, "_fixture", "mcp")
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { in.Close(); cmd.Wait() }()
			r := bufio.NewReaderSize(out, 1<<20)
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				fmt.Fprintf(in, line, i)
				if _, err := readLine(r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("broker/"+bc.name, func(b *testing.B) {
			h := newHarness(b, fixtureArgv(), func(c *Config) { c.Log = nil })
			inR, inW, _ := os.Pipe()
			outR, outW, _ := os.Pipe()
			defer inW.Close()
			if err := h.b.Attach("bench", inR, outW); err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReaderSize(outR, 1<<20)
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				fmt.Fprintf(inW, line, i)
				if _, err := readLine(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		out = append(out, chunk...)
		if err != bufio.ErrBufferFull {
			if err == io.EOF && len(out) > 0 {
				return out, nil
			}
			return out, err
		}
	}
}
