//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary is its own hostile server: run with SANDBOX_TRY set, it
// tries that act and exits 0 if the act worked, 3 if it was denied.
func TestMain(m *testing.M) {
	if act := os.Getenv("SANDBOX_TRY"); act != "" {
		os.Exit(try(act, os.Getenv("SANDBOX_ARG")))
	}
	os.Exit(m.Run())
}

func try(act, arg string) int {
	var err error
	switch act {
	case "read":
		_, err = os.ReadFile(arg)
	case "list":
		_, err = os.ReadDir(arg)
	case "write":
		err = os.WriteFile(arg, []byte("x"), 0o600)
	case "connect":
		var c net.Conn
		if c, err = net.Dial("tcp", arg); err == nil {
			c.Close()
		}
	case "listen":
		var l net.Listener
		if l, err = net.Listen("tcp", arg); err == nil {
			l.Close()
		}
	case "mptcp", "udp": // past Landlock's TCP rules
		proto, typ := 262, syscall.SOCK_STREAM // IPPROTO_MPTCP
		if act == "udp" {
			proto, typ = 0, syscall.SOCK_DGRAM
		}
		var fd int
		if fd, err = syscall.Socket(syscall.AF_INET, typ, proto); err == nil {
			addr := &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
			fmt.Sscan(arg, &addr.Port)
			err = syscall.Connect(fd, addr)
			syscall.Close(fd)
		}
	case "vsock", "netlink": // a family beside the internet's
		fam, typ := unix.AF_VSOCK, syscall.SOCK_STREAM
		if act == "netlink" {
			fam, typ = unix.AF_NETLINK, syscall.SOCK_DGRAM
		}
		var fd int
		if fd, err = syscall.Socket(fam, typ, 0); err == nil {
			syscall.Close(fd)
		}
	case "unix": // a unix socket stays
		var c net.Conn
		if c, err = net.Dial("unix", arg); err == nil {
			c.Close()
		}
	case "environ": // another process's environment, by /proc
		_, err = os.ReadFile(fmt.Sprintf("/proc/%s/environ", arg))
	case "signal":
		var pid int
		fmt.Sscan(arg, &pid)
		err = syscall.Kill(pid, 0)
	case "setsid-read": // an escaped grandchild: its own session
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "SANDBOX_TRY=read")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Run()
	default:
		fmt.Fprintln(os.Stderr, "unknown act", act)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, act, arg+":", err)
		return 3
	}
	return 0
}

// confined runs the test binary as a server confined by r, trying act on
// arg, and says whether the act worked.
func confined(t *testing.T, r Rules, act, arg string) bool {
	t.Helper()
	type result struct {
		code int
		out  string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// Confined for good: this thread is never handed back.
		runtime.LockOSThread()
		if err := Confine(r); err != nil {
			done <- result{err: err}
			return
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "SANDBOX_TRY="+act, "SANDBOX_ARG="+arg)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code, err = ee.ExitCode(), nil
		}
		done <- result{code: code, out: string(out), err: err}
	}()
	res := <-done
	if res.err != nil {
		t.Fatalf("%s %s: %v", act, arg, res.err)
	}
	if res.code != 0 && res.code != 3 {
		t.Fatalf("%s %s: exit %d: %s", act, arg, res.code, res.out)
	}
	return res.code == 0
}

// listening is a listener on addr that accepts and closes every
// connection, closed with the test.
func listening(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
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

// home is a user's home with secrets in it, a file that is not one, and a
// link that names a secret by another path.
func home(t *testing.T) string {
	t.Helper()
	h := t.TempDir()
	for path, content := range map[string]string{
		".ssh/id_ed25519":      "PRIVATE KEY",
		".aws/credentials":     "[default]\naws_secret_access_key=x",
		".config/gh/hosts.yml": "oauth_token: x",
		".config/app/settings": "fine",
		"notes.txt":            "fine",
		"project/main.go":      "package main",
	} {
		p := filepath.Join(h, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(h, ".ssh"), filepath.Join(h, "keys")); err != nil {
		t.Fatal(err)
	}
	return h
}

// stranger is a process outside any sandbox, with a secret in its
// environment.
func stranger(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"SECRET=x"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

func needLandlock(t *testing.T) Capabilities {
	t.Helper()
	c := Support()
	if !c.Filesystem {
		t.Skipf("no Landlock here: %s", c.Why)
	}
	return c
}

func TestPlanClosesSecretsUnderABroadRule(t *testing.T) {
	h := home(t)
	exe, _ := os.Executable()
	r, err := Plan(Spec{Enabled: true, Read: []string{"~"}, Write: []string{"~/project"}},
		Context{Home: h, Cwd: filepath.Join(h, "project"), Argv: []string{exe}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(r.Read, r.Write...) {
		for _, secret := range []string{".ssh", ".aws", ".config/gh", "keys"} {
			if within(p, filepath.Join(h, secret)) || p == h || p == filepath.Join(h, ".config") {
				t.Errorf("rule %s opens %s", p, secret)
			}
		}
	}
	for _, want := range []string{filepath.Join(h, "notes.txt"), filepath.Join(h, ".config/app")} {
		if !slices.Contains(r.Read, want) {
			t.Errorf("the rules %v lack %s, which ~ covers and is no secret", r.Read, want)
		}
	}
	if !slices.Contains(r.Write, filepath.Join(h, "project")) {
		t.Errorf("write rules %v lack the project", r.Write)
	}
	// A rule that names a secret opens it: the user said so.
	r, err = Plan(Spec{Enabled: true, Read: []string{"~/.ssh"}}, Context{Home: h, Cwd: h, Argv: []string{exe}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.Read, filepath.Join(h, ".ssh")) {
		t.Errorf("a rule naming ~/.ssh did not open it: %v", r.Read)
	}
}

func TestPresetsAndPackages(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct {
		argv   []string
		preset string
		write  []string
	}{
		{[]string{"/usr/bin/node", "/x/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", root, "/no/such/dir"}, "filesystem", []string{root}},
		{[]string{"/usr/bin/npx", "-y", "@modelcontextprotocol/server-filesystem", root}, "filesystem", []string{root}},
		{[]string{"/home/u/.local/bin/uvx", "mcp-server-git", "--repository", root}, "git", []string{root}},
		{[]string{"/home/u/.local/bin/uvx", "mcp-server-git", "--repository=" + root}, "git", []string{root}},
		{[]string{"/usr/bin/node", "/x/node_modules/@modelcontextprotocol/server-everything/dist/index.js", root}, "", nil},
		{[]string{"/home/u/.local/bin/uvx", "mcp-server-fetch"}, "fetch", nil},
		{[]string{"/usr/bin/npx", "-y", "@playwright/mcp@latest", "--headless"}, "browser", nil},
		{[]string{"/usr/bin/node", "/x/node_modules/@modelcontextprotocol/server-puppeteer/dist/index.js"}, "browser", nil},
	} {
		name, add := Preset(tc.argv, "/", nil)
		if name != tc.preset || !slices.Equal(add.Write, tc.write) {
			t.Errorf("Preset(%q) = %q %q, want %q %q", tc.argv, name, add.Write, tc.preset, tc.write)
		}
	}
	// A fetch or browser server started in the home reads none of it
	// (but its caches); started elsewhere, it reads its directory.
	home, tmp := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		argv    []string
		cwd     string
		readsIt bool
	}{
		{[]string{"/usr/bin/npx", "-y", "@playwright/mcp"}, home, false},
		{[]string{"/usr/bin/uvx", "mcp-server-fetch"}, filepath.Join(home, "src"), false},
		{[]string{"/usr/bin/uvx", "mcp-server-fetch"}, root, true},
		{[]string{"/usr/bin/npx", "-y", "@modelcontextprotocol/server-everything"}, home, true},
	} {
		f := filepath.Join(tc.cwd, "notes.txt")
		if err := os.MkdirAll(tc.cwd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Plan(Spec{Enabled: true}, Context{Home: home, Cwd: tc.cwd, Argv: tc.argv, TempDir: tmp})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Covers(f); got != tc.readsIt {
			t.Errorf("%q in %s: reads its directory %v, want %v (preset %q)", tc.argv, tc.cwd, got, tc.readsIt, r.Preset)
		}
	}
	mem := "/x/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "/x/node_modules/@modelcontextprotocol/server-memory/dist"},
		{[]string{"MEMORY_FILE_PATH=/data/graph.jsonl"}, "/data"},
		{[]string{"MEMORY_FILE_PATH=../state/graph.jsonl"}, "/x/node_modules/@modelcontextprotocol/server-memory/state"},
	} {
		name, add := Preset([]string{"/usr/bin/node", mem}, "/", tc.env)
		if name != "memory" || !slices.Equal(add.Write, []string{tc.want}) {
			t.Errorf("memory preset with %q = %q %q, want %s", tc.env, name, add.Write, tc.want)
		}
	}
	for p, want := range map[string]string{
		"/srv/app/node_modules/@scope/pkg/dist/index.js": "/srv/app/node_modules",
		"/srv/a/node_modules/b/node_modules/c/x.js":      "/srv/a/node_modules",
	} {
		if got := packageOf(p); got != want {
			t.Errorf("packageOf(%s) = %s, want %s", p, got, want)
		}
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(venv, "bin", "python")
	if err := os.WriteFile(py, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := packageOf(py); got != venv {
		t.Errorf("packageOf(%s) = %s, want the virtualenv %s", py, got, venv)
	}
	if got := packageOf("/usr/bin/node"); got != "/usr/bin" {
		t.Errorf("packageOf(/usr/bin/node) = %s, want /usr/bin", got)
	}
}

func TestPlanRefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Enabled: true, Network: "api.github.com"}, "want none, all, or a list of host:port"},
		{Spec{Enabled: true, Network: "some"}, "want none, all"},
		{Spec{Enabled: true, Network: "a.com:443,b.com:0"}, "not a number from 1 to 65535"},
		{Spec{Enabled: true, Read: []string{" "}}, "empty path"},
		{Spec{Enabled: true, Env: []string{"A=B"}}, "variable name"},
	} {
		if _, err := Plan(tc.spec, Context{Home: "/home/x"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Plan(%+v) = %v, want an error saying %q", tc.spec, err, tc.want)
		}
	}
	if _, err := Plan(Spec{Enabled: true}, Context{}); err == nil || !strings.Contains(err.Error(), "home") {
		t.Errorf("a plan with no home: %v", err)
	}
}

// TestConfineEnforces runs real processes under a real Landlock domain:
// every forbidden act fails, every allowed one works, in the server and
// in a grandchild that escaped into a session of its own.
func TestConfineEnforces(t *testing.T) {
	c := needLandlock(t)
	h := home(t)
	work := filepath.Join(h, "project")
	outside := t.TempDir()
	exe, _ := os.Executable()
	spec := Spec{Enabled: true, Read: []string{"~"}, Write: []string{"~/project"}, Network: NetworkAll}
	if c.Network {
		spec.Network = NetworkNone
	}
	r, err := Plan(spec, Context{Home: h, Cwd: work, Argv: []string{exe}, TempDir: filepath.Join(h, "tmp-none")})
	if err != nil {
		t.Fatal(err)
	}
	ln := listening(t, "tcp", "127.0.0.1:0")
	for _, tc := range []struct {
		act, arg string
		allowed  bool
	}{
		{"read", filepath.Join(h, "notes.txt"), true},
		{"read", filepath.Join(h, "project/main.go"), true},
		{"read", filepath.Join(h, ".ssh/id_ed25519"), false},
		{"read", filepath.Join(h, "keys/id_ed25519"), false},
		{"list", filepath.Join(h, ".ssh"), false},
		{"read", filepath.Join(h, ".aws/credentials"), false},
		{"read", filepath.Join(h, ".config/gh/hosts.yml"), false},
		{"write", filepath.Join(work, "out.txt"), true},
		{"write", filepath.Join(h, "planted.txt"), false},
		{"write", filepath.Join(outside, "planted.txt"), false},
		{"environ", fmt.Sprint(os.Getpid()), false},
		{"environ", fmt.Sprint(stranger(t)), false},
		{"connect", ln.Addr().String(), !c.Network},
	} {
		if got := confined(t, r, tc.act, tc.arg); got != tc.allowed {
			t.Errorf("%s %s: allowed %v, want %v", tc.act, tc.arg, got, tc.allowed)
		}
	}
	if c.Scoping {
		if confined(t, r, "signal", fmt.Sprint(os.Getpid())) {
			t.Error("a sandboxed process could signal its parent outside the sandbox")
		}
	}
	// An escaped grandchild is confined as its parent is.
	t.Setenv("SANDBOX_ARG", filepath.Join(h, ".ssh/id_ed25519"))
	if confined(t, r, "setsid-read", filepath.Join(h, ".ssh/id_ed25519")) {
		t.Error("a setsid grandchild read the private key")
	}
}

// TestConfineNoNetworkButItsPort: with no network, a port-bound server
// may listen on its own port and nothing else, nor connect anywhere.
func TestConfineNoNetworkButItsPort(t *testing.T) {
	if c := needLandlock(t); !c.Network {
		t.Skipf("no TCP rules here: %s", c.Why)
	}
	free := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	own, other := free(), free()
	r := Rules{Read: []string{"/"}, NoNetwork: true, BindPorts: []int{own}}
	ln := listening(t, "tcp", "127.0.0.1:0")
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	if confined(t, r, "mptcp", port) {
		t.Error("an MPTCP socket reached a listener past the sandbox")
	}
	if confined(t, r, "udp", port) {
		t.Error("a UDP socket was made and connected with no network")
	}
	// vsock leaves a virtual machine for its host: refused where this
	// kernel has it at all. Netlink stays on the machine, and stays.
	if fd, err := syscall.Socket(unix.AF_VSOCK, syscall.SOCK_STREAM, 0); err == nil {
		syscall.Close(fd)
		if confined(t, r, "vsock", "") {
			t.Error("a vsock socket was made with no network")
		}
	} else {
		t.Logf("no vsock here (%v): its refusal is not tested", err)
	}
	if !confined(t, r, "netlink", "") {
		t.Error("with no network, a netlink socket could not be made")
	}
	sock := filepath.Join(t.TempDir(), "s")
	listening(t, "unix", sock)
	if !confined(t, r, "unix", sock) {
		t.Error("with no network, a unix socket could not be reached")
	}
	if !confined(t, r, "listen", fmt.Sprintf("127.0.0.1:%d", own)) {
		t.Errorf("the server could not listen on its own port %d", own)
	}
	if confined(t, r, "listen", fmt.Sprintf("127.0.0.1:%d", other)) {
		t.Errorf("the server listened on port %d, not its own", other)
	}
}

// TestNoNetworkFilterJumps: every jump of the filter lands inside it,
// and it ends with its two returns.
func TestNoNetworkFilterJumps(t *testing.T) {
	prog, err := noNetworkFilter()
	if err != nil {
		t.Skip(err)
	}
	for i, ins := range prog {
		if ins.Code&0x07 == 0x05 { // BPF_JMP
			for _, k := range []uint8{ins.Jt, ins.Jf} {
				if to := i + 1 + int(k); to >= len(prog) {
					t.Errorf("instruction %d jumps to %d, past the end (%d)", i, to, len(prog))
				}
			}
		}
	}
	if n := len(prog); prog[n-2].K != retAllow || prog[n-1].K != retDenyAccess {
		t.Errorf("the program does not end with allow, deny: %+v", prog[n-2:])
	}
}

func TestFilterEnvKeepsOnlyWhatIsAllowed(t *testing.T) {
	env := []string{"PATH=/usr/bin", "HOME=/h", "LC_ALL=C", "AWS_SECRET_ACCESS_KEY=x", "GITHUB_TOKEN=y",
		"ANTHROPIC_API_KEY=z", "MY_APP_MODE=dev", "MY_APP_DEBUG=1", "SUPERVISOR_PROC_ID=p-1"}
	got := FilterEnv(env, []string{"GITHUB_TOKEN", "MY_APP_*"})
	want := []string{"PATH=/usr/bin", "HOME=/h", "LC_ALL=C", "GITHUB_TOKEN=y", "MY_APP_MODE=dev", "MY_APP_DEBUG=1", "SUPERVISOR_PROC_ID=p-1"}
	if !slices.Equal(got, want) {
		t.Errorf("FilterEnv = %q\nwant %q", got, want)
	}
}
