package session

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{"simple", "abc", true},
		{"all classes", "A-z_0.9", true},
		{"uuid", "3f0e6c2a-1b2c-4d5e-8f90-0123456789ab", true},
		{"one char", "x", true},
		{"128 chars", strings.Repeat("a", 128), true},
		{"empty", "", false},
		{"129 chars", strings.Repeat("a", 129), false},
		{"slash", "a/b", false},
		{"dot dot slash", "../x", false},
		{"space", "a b", false},
		{"trailing newline", "abc\n", false},
		{"unicode", "sessão", false},
		{"colon", "a:b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateID(tt.id)
			if tt.ok && err != nil {
				t.Errorf("ValidateID(%q): got %v, want nil", tt.id, err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidID) {
				t.Errorf("ValidateID(%q): got %v, want %v", tt.id, err, ErrInvalidID)
			}
		})
	}
}

func TestIsLauncher(t *testing.T) {
	tests := []struct {
		name string
		comm string
		argv []string
		want bool
	}{
		{"sh", "sh", []string{"/bin/sh", "-c", "server"}, true},
		{"bash", "bash", []string{"bash", "-lc", "server"}, true},
		{"login bash has no argv", "bash", nil, true},
		{"zsh", "zsh", []string{"/usr/bin/zsh"}, true},
		{"env", "env", []string{"/usr/bin/env", "FOO=1", "server"}, true},
		{"npx", "npx", []string{"npx", "-y", "@scope/server"}, true},
		{"npm exec title", "npm exec @mode", []string{"npm exec @modelcontextprotocol/server-fs"}, true},
		{"uvx", "uvx", []string{"uvx", "mcp-server-git"}, true},
		{"supervisor", "supervisor", []string{"/usr/local/bin/supervisor", "run", "--", "srv"}, true},
		{"node running npx-cli.js", "node", []string{"node", "/usr/lib/node_modules/npm/bin/npx-cli.js", "-y", "srv"}, true},
		{"node running npm-cli.js exec", "node", []string{"/usr/bin/node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "exec", "srv"}, true},
		{"plain node", "node", []string{"node", "/home/u/app/server.js"}, false},
		{"node host with MainThread comm", "MainThread", []string{"node", "cli.js"}, false},
		{"python3 shim", "python3", []string{"/home/u/.pyenv/shims/python3", "-m", "srv"}, true},
		{"python3 -m uv", "python3", []string{"python3", "-m", "uv", "run", "srv"}, true},
		{"plain python3", "python3", []string{"/usr/bin/python3", "agent.py"}, false},
		{"claude", "claude", []string{"claude"}, false},
		{"cursor", "cursor", []string{"/opt/cursor/cursor", "--type=utility"}, false},
		{"go test binary", "session.test", []string{"/tmp/go-build123/b001/session.test", "-test.v"}, false},
		{"comm only launcher", "bash", []string{"-bash"}, true},
		{"windows cmd", "cmd.exe", []string{`C:\Windows\system32\cmd.exe`, "/d", "/s", "/c", "npx.cmd -y srv"}, true},
		{"windows npx.cmd", "npx.cmd", []string{`C:\Program Files\nodejs\npx.cmd`, "-y", "srv"}, true},
		{"windows node running npx", "node.exe", []string{`C:\Program Files\nodejs\node.exe`, `C:\Program Files\nodejs\node_modules\npm\bin\npx-cli.js`, "-y", "srv"}, true},
		{"windows node host", "node.exe", []string{`C:\Users\u\AppData\Roaming\npm\node_modules\claude\cli.js`}, false},
		{"windows Node.EXE host", "Node.EXE", []string{`C:\nodejs\Node.EXE`, "cli.js"}, false},
		{"windows uvx", "uvx.exe", []string{`C:\Users\u\.local\bin\uvx.exe`, "mcp-server-git"}, true},
		{"windows pwsh", "pwsh.exe", []string{`C:\Program Files\PowerShell\7\pwsh.exe`, "-c", "srv"}, true},
		{"windows powershell", "powershell.exe", nil, true},
		{"windows python shim", "python.exe", []string{`C:\Users\u\.pyenv\pyenv-win\shims\python.exe`, "-m", "srv"}, true},
		{"windows claude", "claude.exe", []string{`C:\Users\u\.local\bin\claude.exe`}, false},
		{"a dotted name is no suffix", "my.server", []string{"/opt/my.server"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsLauncher(tt.comm, tt.argv); got != tt.want {
				t.Errorf("IsLauncher(%q, %q): got %v, want %v", tt.comm, tt.argv, got, tt.want)
			}
		})
	}
}

func TestParseHostID(t *testing.T) {
	tests := []struct {
		id        string
		wantPID   int
		wantTicks uint64
		wantOK    bool
	}{
		{"host-123-456", 123, 456, true},
		{"host-1-0", 1, 0, true},
		{"host-123", 0, 0, false},
		{"host-x-1", 0, 0, false},
		{"host-1-y", 0, 0, false},
		{"host-1-2-3", 0, 0, false},
		{"my-session", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			pid, ticks, ok := ParseHostID(tt.id)
			if pid != tt.wantPID || ticks != tt.wantTicks || ok != tt.wantOK {
				t.Errorf("ParseHostID(%q): got (%d, %d, %v), want (%d, %d, %v)",
					tt.id, pid, ticks, ok, tt.wantPID, tt.wantTicks, tt.wantOK)
			}
		})
	}

	// Round trip through the format Identify uses.
	for _, c := range []struct {
		pid   int
		ticks uint64
	}{{1, 1}, {4194304, 18446744073709551615}, {77, 0}} {
		id := fmt.Sprintf("host-%d-%d", c.pid, c.ticks)
		pid, ticks, ok := ParseHostID(id)
		if !ok || pid != c.pid || ticks != c.ticks {
			t.Errorf("ParseHostID(%q): got (%d, %d, %v), want (%d, %d, true)", id, pid, ticks, ok, c.pid, c.ticks)
		}
	}
}
