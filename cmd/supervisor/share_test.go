//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/proc"
	"github.com/seed-86a41135/supervisor/registry"
	"github.com/seed-86a41135/supervisor/spawn"
)

// shareCase is a real npm server run with --share.
type shareCase struct {
	name string
	argv func(npm, root string) []string
	tool string
	args func(client, call int) map[string]any
	want func(client, call int, root string) string
}

func shareCases() []shareCase {
	entry := func(npm, pkg string) string {
		return filepath.Join(npm, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	}
	return []shareCase{
		{"everything", func(npm, _ string) []string { return []string{"node", entry(npm, "server-everything"), "stdio"} },
			"echo",
			func(c, i int) map[string]any { return map[string]any{"message": fmt.Sprintf("client %d call %d", c, i)} },
			func(c, i int, _ string) string { return fmt.Sprintf("Echo: client %d call %d", c, i) }},
		{"filesystem", func(npm, root string) []string { return []string{"node", entry(npm, "server-filesystem"), root} },
			"read_text_file",
			func(c, i int) map[string]any { return map[string]any{"path": fmt.Sprintf("f-%d-%d.txt", c, i%4)} },
			func(c, i int, _ string) string { return fmt.Sprintf("content of client %d file %d", c, i%4) }},
	}
}

// sharedClient is one Go SDK client of a --share server.
type sharedClient struct {
	cmd *exec.Cmd
	cs  *mcp.ClientSession
}

// TestShareConcurrentClients: N clients (2 and 5) of the real
// server-everything and server-filesystem through `run --share`, each from
// the official Go SDK (whose request ids start at 1 in every client, so
// they collide), interleave tools/call: every answer reaches its own
// client, and one server process exists. When the last client has gone
// and the linger has passed, the broker and its server are gone.
func TestShareConcurrentClients(t *testing.T) {
	npm := npmDeps(t)
	for _, c := range shareCases() {
		for _, n := range []int{2, 5} {
			t.Run(fmt.Sprintf("%s/%d", c.name, n), func(t *testing.T) {
				in := newInstance(t)
				if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("linger = \"1s\"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				root := mcpRoot(t)
				for cl := 0; cl < n; cl++ {
					for f := 0; f < 4; f++ {
						os.WriteFile(filepath.Join(root, fmt.Sprintf("f-%d-%d.txt", cl, f)), []byte(fmt.Sprintf("content of client %d file %d", cl, f)), 0o600)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
				defer cancel()
				// One environment for all: a difference would give each
				// client its own upstream (the server key).
				env := mcpEnv(t, in)
				clients := make([]*sharedClient, n)
				var wg sync.WaitGroup
				errs := make(chan error, n*40)
				for i := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						args := append([]string{"run", "--share", "--name", c.name, "--"}, c.argv(npm, root)...)
						cmd := exec.Command(bin, args...)
						cmd.Dir = root
						cmd.Env = env
						cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("client %d: ", i)}
						client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("share-%d", i), Version: "0.0.0"}, nil)
						cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
						if err != nil {
							errs <- fmt.Errorf("client %d: connect: %v", i, err)
							return
						}
						clients[i] = &sharedClient{cmd: cmd, cs: cs}
					}()
				}
				wg.Wait()
				t.Cleanup(func() {
					for _, cl := range clients {
						if cl != nil {
							cl.cs.Close()
						}
					}
				})
				select {
				case err := <-errs:
					t.Fatal(err)
				default:
				}
				// Every client calls 8 times at once, all clients at once.
				for i, cl := range clients {
					for k := 0; k < 8; k++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							res, err := cl.cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args(i, k)})
							if err != nil {
								errs <- fmt.Errorf("client %d call %d: %v", i, k, err)
								return
							}
							var text []string
							for _, ct := range res.Content {
								if tc, ok := ct.(*mcp.TextContent); ok {
									text = append(text, tc.Text)
								}
							}
							if want := c.want(i, k, root); res.IsError || !strings.Contains(strings.Join(text, "\n"), want) {
								errs <- fmt.Errorf("client %d call %d: got %q (isError %v), want %q", i, k, text, res.IsError, want)
							}
						}()
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}

				// One broker, every client attached, one server process.
				var brokers []registry.Process
				for _, p := range in.mustProcesses(false) {
					if p.Broker {
						brokers = append(brokers, p)
					}
				}
				if len(brokers) != 1 || len(brokers[0].Clients) != n {
					t.Fatalf("ps: %d brokers (%+v), want 1 with %d clients", len(brokers), brokers, n)
				}
				br := brokers[0]
				servers := serverProcs(t, br.ID)
				if len(servers) != 1 {
					t.Errorf("server processes under broker %s: %v, want exactly 1", br.ID, servers)
				}

				// The clients go; the broker and its server follow after
				// the linger.
				for _, cl := range clients {
					cl.cs.Close()
				}
				waitGonePID(t, br.PID, br.Token)
				for _, s := range servers {
					waitGonePID(t, s.pid, s.tok)
				}
				p := waitRecord(t, in, br.PID, func(p registry.Process) bool { return p.State.Final() })
				if len(p.Clients) != 0 {
					t.Errorf("broker record %s still lists clients %+v", p.ID, p.Clients)
				}
			})
		}
	}
}

// serverProcs lists the live node processes carrying procID's marker: the
// upstream servers of a broker.
func serverProcs(t *testing.T, procID string) []tracked {
	t.Helper()
	infos, err := proc.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var out []tracked
	for _, info := range infos {
		env, err := proc.Environ(info.PID)
		if err != nil {
			continue
		}
		if v, _ := proc.EnvValue(env, spawn.EnvProcID); v != procID {
			continue
		}
		argv, _ := proc.Cmdline(info.PID)
		if len(argv) > 0 && filepath.Base(argv[0]) == "node" {
			out = append(out, tracked{strings.Join(argv, " "), info.PID, info.Token})
		}
	}
	return out
}
