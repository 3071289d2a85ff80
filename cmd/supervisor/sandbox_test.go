//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// sandboxOrSkip starts the instance's daemon and skips a test that needs
// Landlock, naming why the daemon cannot (status says).
func sandboxOrSkip(t *testing.T, in *instance) {
	t.Helper()
	in.mustRun("daemon")
	for _, line := range strings.Split(in.mustRun("status"), "\n") {
		if v, ok := strings.CutPrefix(line, "sandbox:"); ok && strings.Contains(v, "not available") {
			t.Skipf("no sandbox on this kernel:%s", v)
		}
	}
}

// acceptAndClose is a TCP listener on addr that accepts and closes every
// connection, closed with the test.
func acceptAndClose(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

// sandboxHome is a user's home with secrets in it, the project a server
// may write, and a temporary directory of its own (the default /tmp holds
// everything else the tests make, writable by default).
func sandboxHome(t *testing.T) (home, work, tmp string) {
	t.Helper()
	home = t.TempDir()
	for path, content := range map[string]string{
		".ssh/id_ed25519":  "PRIVATE KEY",
		".aws/credentials": "[default]\naws_secret_access_key=x",
		"project/README":   "fine",
		"tmp/.keep":        "",
	} {
		p := filepath.Join(home, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home, filepath.Join(home, "project"), filepath.Join(home, "tmp")
}

// tryActs is the shell function a test server tries its acts with: "try
// ACT COMMAND" prints "ACT ok" or "ACT denied" (readActs reads them).
const tryActs = `try() { if sh -c "$2" >/dev/null 2>&1; then echo "$1 ok"; else echo "$1 denied"; fi; }`

// readActs reads a test server's "ACT RESULT" lines until "done": what
// each act it tried came to.
func readActs(t *testing.T, srv *shimProc) map[string]string {
	t.Helper()
	got := map[string]string{}
	for {
		line, err := readLine(srv.stdout, wait)
		if err != nil {
			t.Fatalf("reading the server's results (got %v): %v", got, err)
		}
		if line == "done" {
			return got
		}
		act, result, _ := strings.Cut(line, " ")
		got[act] = result
	}
}

// A hostile server under `run --sandbox` tries to read planted keys, write
// outside its allowlist, read its host's environment through /proc, see a
// secret in its own, reach a listener on 127.0.0.1, and have a setsid
// grandchild read a key: every forbidden act fails and every allowed one
// works, exec'd in its shim's place and spawned by the daemon alike, with
// its policy given by flags or by the config file (which the lean entry
// takes without handing the run over).
func TestSandboxConfinesAHostileServer(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []string{"auto", "off"} {
		for _, from := range []string{"flags", "config"} {
			t.Run("in place "+inPlace+" by "+from, func(t *testing.T) {
				t.Parallel()
				testSandboxConfines(t, inPlace, from == "config")
			})
		}
	}
}

func testSandboxConfines(t *testing.T, inPlace string, byConfig bool) {
	in := newInstance(t)
	home, work, tmp := sandboxHome(t)
	outside := t.TempDir()
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp, "SUPERVISOR_IN_PLACE="+inPlace,
		"SECRET_TOKEN=hunter2", "ALLOWED_VAR=yes")
	// The supervisor binary is readable, so the server can try to use it.
	policy := []string{"--sandbox", "--allow-write", work, "--allow-env", "ALLOWED_VAR", "--network", "none", "--allow-read", filepath.Dir(bin), "--open-files", "512"}
	if byConfig {
		policy = nil
		conf := "[servers.hostile]\nsandbox = true\nallow_write = [\"" + work + "\"]\nallow_env = [\"ALLOWED_VAR\"]\nnetwork = \"none\"\nallow_read = [\"" + filepath.Dir(bin) + "\"]\nopen_files = 512\n"
		if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sandboxOrSkip(t, in)
	// The host (a shell here) has SECRET_TOKEN in its own environment, as
	// a user's shell has its keys, and gives GIVEN_VAR to this server
	// alone, as a host config's env block does.
	in.via = []string{"sh", "-c", `GIVEN_VAR=mine "$0" "$@"; exit $?`}
	ln := acceptAndClose(t, "127.0.0.1:0")
	script := tryActs + `
try read-key "cat $HOME/.ssh/id_ed25519"
try read-aws "cat $HOME/.aws/credentials"
try read-project "cat ` + work + `/README"
try write-project "echo x > ` + work + `/out"
try write-tmp "echo x > $TMPDIR/scratch"
try write-outside "echo x > ` + outside + `/planted"
try write-home "echo x > $HOME/planted"
try host-environ "cat /proc/$PPID/environ"
try connect "perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => q(` + ln.Addr().String() + `)) or exit 1'"
try grandchild-key "setsid sh -c 'cat $HOME/.ssh/id_ed25519' </dev/null"
try daemon-ps "` + bin + ` ps"
try daemon-run "` + bin + ` run --session escape -- cat $HOME/.ssh/id_ed25519 </dev/null"
echo "env secret=[$SECRET_TOKEN] allowed=[$ALLOWED_VAR] given=[$GIVEN_VAR]"
echo "core $(ulimit -c)"
echo "nofile $(ulimit -Hn)"
echo done
exec cat`
	args := append([]string{"--session", "sb", "--name", "hostile", "--cwd", work}, policy...)
	srv := in.startShim(append(args, "--", "sh", "-c", script)...)
	got := readActs(t, srv)
	want := map[string]string{
		"read-key": "denied", "read-aws": "denied", "read-project": "ok", "write-project": "ok",
		"write-tmp": "ok", "write-outside": "denied", "write-home": "denied", "host-environ": "denied",
		"connect": "denied", "grandchild-key": "denied", "daemon-ps": "denied", "daemon-run": "denied",
		"env": "secret=[] allowed=[yes] given=[mine]", "core": "0", "nofile": "512",
	}
	for act, w := range want {
		if got[act] != w {
			t.Errorf("%s: %q, want %q", act, got[act], w)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("the server planted a file outside its allowlist")
	}
	// Its host closes: the server (cat) ends on EOF, and its shim with it.
	srv.stdin.Close()
	if code := srv.exitCode(t); code != 0 {
		t.Errorf("the server's shim exited %d after stdin EOF, want 0", code)
	}
	evs := in.mustRun("events", "--session", "sb")
	if !strings.Contains(evs, "sandboxed:") {
		t.Errorf("the start event does not say the server is sandboxed:\n%s", evs)
	}
	if out := in.mustRun("inspect", "hostile"); !strings.Contains(out, "sandbox:  confined") {
		t.Errorf("inspect does not say the server is sandboxed:\n%s", out)
	}
	// Its requests to the daemon were refused as its own, not lost on the
	// way: the refusal is an event.
	if all := in.mustRun("events"); !strings.Contains(all, "sandbox.denied") || !strings.Contains(all, "belongs to the sandboxed server hostile") {
		t.Errorf("no sandbox.denied event for the server's requests to the daemon:\n%s", all)
	}
	if m := in.mustRun("metrics"); !strings.Contains(m, `supervisor_sandbox_denied_total{what="daemon"} `) ||
		strings.Contains(m, `supervisor_sandbox_denied_total{what="daemon"} 0`) {
		t.Errorf("the metrics do not count the refused connections:\n%s", m)
	}
}

// A sandbox the kernel cannot enforce, or a policy the daemon cannot
// keep, is refused with the reason, and nothing runs.
func TestSandboxRefusals(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	sandboxOrSkip(t, in)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a bad network", []string{"--network", "some"}, "want none, all, or a list of host:port"},
		{"a bad network list", []string{"--network", "example.com:443,example.org"}, `"example.org" has no port`},
		{"sandbox off with a rule", []string{"--sandbox=false", "--allow-read", "/etc"}, "drop one or the other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run", "--session", "sbr"}, tc.args...), "--", "sh", "-c", "echo ran")
			out, stderr, code := in.run(args...)
			if code == 0 || !strings.Contains(stderr, tc.want) || strings.Contains(out, "ran") {
				t.Errorf("run %v: code %d, stdout %q, stderr %q; want refused saying %q", tc.args, code, out, stderr, tc.want)
			}
		})
	}
}

// A shared port-bound server under `ensure --sandbox --network none` still
// listens on its port (the one bind it is allowed), and runs confined: no
// new privileges, no capabilities, and none of the host's secrets in its
// environment.
func TestEnsureSandboxed(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	home, _, tmp := sandboxHome(t)
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp, "SECRET_TOKEN=hunter2")
	// SECRET_TOKEN is the caller's (a shell's) own, not given to this
	// server by name.
	in.via = []string{"sh", "-c", `"$0" "$@"; exit $?`}
	sandboxOrSkip(t, in)
	ps := strconv.Itoa(freePort(t))
	res, errOut, code := in.ensure(t, "--session", "sbe", "--port", ps, "--sandbox", "--network", "none", "--", bin, "_fixture", "listen", ps)
	if code != 0 {
		t.Fatalf("ensure --sandbox: exit %d: %s", code, errOut)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", res.PID))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NoNewPrivs:\t1", "CapBnd:\t0000000000000000", "CapEff:\t0000000000000000"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("the shared server's /proc status lacks %q:\n%s", want, status)
		}
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", res.PID))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "hunter2") {
		t.Error("the sandboxed shared server sees SECRET_TOKEN")
	}
}

// The real server-everything and server-filesystem from npm work under
// --sandbox through the official Go SDK client, started as node and as
// npx, with the filesystem preset giving the filesystem server its
// directory; and server-filesystem serving the whole home still cannot
// read the key in it: the deny list holds under the server's own rules.
func TestMCPSandboxedNpmServers(t *testing.T) {
	t.Parallel()
	npm := npmDeps(t)
	for _, c := range mcpCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := newInstance(t)
			sandboxOrSkip(t, in)
			root := mcpRoot(t)
			args := append([]string{"run", "--sandbox", "--network", "none", "--name", strings.ReplaceAll(c.name, "/", "-"), "--"}, c.argv(npm, root)...)
			cs, tree := sandboxedSession(t, in, npm, args)
			goSDKSession(context.Background(), cs, c.tool, c.args).check(t, c, root)
			cs.Close()
			in.assertNothingLeft(t, tree)
		})
	}
	t.Run("filesystem serving the home", func(t *testing.T) {
		t.Parallel()
		in := newInstance(t)
		sandboxOrSkip(t, in)
		env := mcpEnv(t, in)
		home, _ := proc.EnvValue(env, "HOME")
		key := filepath.Join(home, ".ssh", "id_ed25519")
		if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, []byte("PRIVATE KEY"), 0o600); err != nil {
			t.Fatal(err)
		}
		notes := filepath.Join(home, "notes.txt")
		if err := os.WriteFile(notes, []byte("fine to read"), 0o600); err != nil {
			t.Fatal(err)
		}
		entry := filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
		cs, tree := sandboxedSessionEnv(t, in, npm, env, []string{"run", "--sandbox", "--name", "fs-home", "--", "node", entry, home})
		ctx := context.Background()
		read := func(path string) (string, bool) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": path}})
			if err != nil {
				t.Fatalf("read_text_file %s: %v", path, err)
			}
			var text []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text = append(text, tc.Text)
				}
			}
			return strings.Join(text, "\n"), res.IsError
		}
		if text, isErr := read(notes); isErr || !strings.Contains(text, "fine to read") {
			t.Errorf("reading a file in the served home: %q (error %v)", text, isErr)
		}
		if text, isErr := read(key); !isErr || strings.Contains(text, "PRIVATE KEY") {
			t.Errorf("the sandboxed filesystem server read the private key: %q (error %v)", text, isErr)
		}
		cs.Close()
		in.assertNothingLeft(t, tree)
	})
}

// sandboxedSession connects the Go SDK client to `supervisor ARGS`, run
// in npm (the npm packages' directory) with mcpEnv.
func sandboxedSession(t *testing.T, in *instance, npm string, args []string) (*mcp.ClientSession, *mcpTree) {
	t.Helper()
	return sandboxedSessionEnv(t, in, npm, mcpEnv(t, in), args)
}

func sandboxedSessionEnv(t *testing.T, in *instance, npm string, env, args []string) (*mcp.ClientSession, *mcpTree) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = npm
	cmd.Env = env
	cmd.Stderr = &prefixWriter{t: t, prefix: "server: "}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	transport := &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}
	client := mcp.NewClient(&mcp.Implementation{Name: "supervisor-e2e-sandbox", Version: "0.0.0"}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect through supervisor %v: %v", args, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, in.snapshot(t)
}

// `sandbox check` dry-runs a policy: the secrets it closes, the preset it
// finds, what it keeps of the environment, and whether a run would be
// refused; it runs nothing.
func TestSandboxCheck(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	home, work, _ := sandboxHome(t)
	in.env = append(in.env, "HOME="+home, "SECRET_TOKEN=hunter2", "KEEP_ME=1")
	out, errOut, code := in.run("sandbox", "check", "--cwd", work, "--allow-read", "~", "--allow-env", "KEEP_ME", "--network", "none",
		"--", "node", "/srv/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", work)
	if strings.Contains(out, "not available") {
		t.Skipf("no sandbox here: %s", out)
	}
	if code != 0 {
		t.Fatalf("sandbox check: exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"closed:  " + filepath.Join(home, ".ssh"), "closed:  " + filepath.Join(home, ".aws"),
		"preset:  filesystem", "write:   " + work, "network: none", " KEEP_ME", "SECRET_TOKEN",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sandbox check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "env:     ") && strings.Contains(strings.SplitN(strings.SplitN(out, "env:     ", 2)[1], "\n", 2)[0], "SECRET_TOKEN") {
		t.Errorf("SECRET_TOKEN is among the variables kept:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "read:") && (strings.HasSuffix(line, home) || strings.Contains(line, ".ssh")) {
			t.Errorf("a read rule opens the home or the key: %s", line)
		}
	}
	if _, _, code := in.run("sandbox", "check", "--", "true"); code != 1 {
		t.Errorf("sandbox check with no sandbox asked or configured: exit %d, want 1", code)
	}
	if out, _, code := in.run("sandbox", "check", "--network", "Example.com:443", "--", "true"); code != 0 || !strings.Contains(out, "network: example.com:443, through the egress proxy") {
		t.Errorf("sandbox check of a network list: exit %d, %q; want the list shown", code, out)
	}
	if _, stderr, code := in.run("sandbox", "check", "--network", "example.com:https", "--", "true"); code == 0 || !strings.Contains(stderr, "not a number") {
		t.Errorf("sandbox check of a bad network list: exit %d, %q; want refused", code, stderr)
	}
	if err := os.WriteFile(filepath.Join(in.state, "config.toml"), []byte("[servers.true]\nsandbox = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code := in.run("sandbox", "check", "--", "true"); code != 0 || !strings.Contains(out, "true: sandboxed:") {
		t.Errorf("sandbox check of a server the config sandboxes: exit %d:\n%s", code, out)
	}
}

// Without cgroups the daemon could not tell a sandboxed server's own
// requests to it from a host's: a sandbox is refused, for a run and an
// ensure alike, and nothing runs.
func TestSandboxNeedsCgroups(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, "SUPERVISOR_CGROUPS=off")
	sandboxOrSkip(t, in)
	ps := strconv.Itoa(freePort(t))
	for _, args := range [][]string{
		{"run", "--session", "nocg", "--sandbox", "--", "sh", "-c", "echo ran"},
		{"ensure", "--session", "nocg", "--port", ps, "--sandbox", "--", bin, "_fixture", "listen", ps},
	} {
		out, stderr, code := in.run(args...)
		if code == 0 || !strings.Contains(stderr, "a sandbox needs cgroups here") || strings.Contains(out, "ran") {
			t.Errorf("%s --sandbox without cgroups: exit %d, stdout %q, stderr %q; want refused", args[0], code, out, stderr)
		}
	}
}

// TestSandboxSharedServer: a shared server's upstream runs under its
// policy, restarts included: its clients share one broker and one
// confined upstream, and a client asking another policy gets a broker of
// its own (as limits do). Lazy and idle servers take the same path.
func TestSandboxSharedServer(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	home, _, tmp := sandboxHome(t)
	in.env = append(in.env, "HOME="+home, "TMPDIR="+tmp, "SECRET_TOKEN=hunter2")
	sandboxOrSkip(t, in)
	// The host (a shell) has SECRET_TOKEN in its own environment: it is
	// not one it gives its server.
	in.via = []string{"sh", "-c", `"$0" "$@"; exit $?`}
	key := filepath.Join(home, ".ssh", "id_ed25519")
	policy := []string{"--sandbox", "--allow-read", filepath.Dir(bin), "--network", "none"}
	host := func(extra ...string) *rawHost {
		args := append(append([]string{"--share", "--name", "sbshare"}, policy...), extra...)
		h := startRawHost(t, in, append(args, "--", bin, "_fixture", "mcp")...)
		h.handshake()
		return h
	}
	call := func(h *rawHost, id int, tool, arg string) string {
		return h.ask(id, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":{"text":%q}}`, tool, arg)).String()
	}
	pidOf := func(h *rawHost, id int) int {
		s := call(h, id, "stats", "")
		i := strings.Index(s, "pid=")
		var pid int
		if i < 0 {
			t.Fatalf("stats: %s", s)
		}
		fmt.Sscan(s[i+4:], &pid)
		return pid
	}
	a, b := host(), host()
	other := host("--allow-env", "SECRET_TOKEN")
	pa, pb, po := pidOf(a, 10), pidOf(b, 10), pidOf(other, 10)
	if pa != pb {
		t.Errorf("two clients of one policy got upstreams %d and %d, want one", pa, pb)
	}
	if po == pa {
		t.Errorf("a client asking another policy shares upstream %d", pa)
	}
	for _, c := range []struct {
		h          *rawHost
		tool, arg  string
		want, what string
	}{
		{a, "read", key, "denied", "the upstream read the private key"},
		{b, "read", key, "denied", "the upstream read the private key"},
		{a, "read", "/etc/hostname", "read: ", "the upstream could not read the system"},
		{a, "getenv", "SECRET_TOKEN", "env: \"", "the upstream saw a secret it did not ask for"},
		{other, "getenv", "SECRET_TOKEN", "env: hunter2", "the upstream that asked for SECRET_TOKEN did not see it"},
		{other, "read", key, "denied", "the other policy's upstream read the private key"},
	} {
		if got := call(c.h, 11, c.tool, c.arg); !strings.Contains(got, c.want) {
			t.Errorf("%s: %s", c.what, got)
		}
	}
	if nnp, err := proc.NoNewPrivs(pa); err != nil || !nnp {
		t.Errorf("the shared upstream %d is not confined (no_new_privs %v, %v)", pa, nnp, err)
	}
	// A restart of the upstream (a crash) is confined as the first run.
	a.send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"crash","arguments":{}}}`)
	deadline := time.Now().Add(wait)
	var again int
	for id := 100; time.Now().Before(deadline); id++ {
		// Answered with an error while the upstream restarts.
		r, _ := b.tryAsk(id, "tools/call", `{"name":"stats","arguments":{}}`)
		if i := strings.Index(r.String(), "pid="); i >= 0 {
			fmt.Sscan(r.String()[i+4:], &again)
			if again != pa {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if again == pa {
		t.Fatal("the upstream was not restarted after its crash")
	}
	if got := call(b, 14, "read", key); !strings.Contains(got, "denied") {
		t.Errorf("the restarted upstream read the private key: %s", got)
	}
	brokers := 0
	for _, p := range in.mustProcesses(false) {
		if p.Broker {
			brokers++
			if !p.Sandboxed {
				t.Errorf("broker %s is not recorded sandboxed", p.ID)
			}
		}
	}
	if brokers != 2 {
		t.Errorf("%d brokers, want 2 (one per policy)", brokers)
	}
}
