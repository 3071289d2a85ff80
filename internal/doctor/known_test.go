package doctor

import "testing"

func TestDoctorProvablyMCP(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		// Known packages and binaries, as launched for real.
		{[]string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"}, true},
		{[]string{"npx", "-y", "@modelcontextprotocol/server-everything@2025.1.0"}, true},
		{[]string{"node", "/usr/lib/node_modules/@modelcontextprotocol/server-github/dist/index.js"}, true},
		{[]string{"node", "/home/u/.npm/_npx/1a2b/node_modules/github-mcp/dist/index.js"}, true},
		{[]string{"uvx", "mcp-server-fetch"}, true},
		{[]string{"uvx", "mcp-server-fetch@latest"}, true},
		{[]string{"mcp-server-git", "--repository", "."}, true},
		{[]string{"/home/u/.local/bin/mcp-server-x", "--stdio"}, true},
		{[]string{"python3", "-m", "mcp_server_fetch"}, true},
		{[]string{"python3", "-m", "my_mcp_server"}, true},
		{[]string{"python3", "-m", "weather_mcp.server"}, true},
		{[]string{"python3", "/opt/github-mcp.py"}, true},
		{[]string{"bun", "x", "chroma-mcp"}, true},
		{[]string{"docker-mcp-server"}, true},
		{[]string{"mcp-proxy", "--sse-port", "8080"}, true},
		{[]string{"/usr/bin/supervisor", "_fixture", "mcp"}, true},
		{[]string{"sh", "-c", "npx -y @modelcontextprotocol/server-memory"}, true},
		// "mcp" inside a word, a directory or a flag: a stranger's, maybe.
		{[]string{"minecraft-mcpe-backup.py", "600"}, false},
		{[]string{"python3", "/home/u/minecraft-mcpe-backup.py"}, false},
		{[]string{"mcpe"}, false},
		{[]string{"smcp", "--serve"}, false},
		{[]string{"node", "/x/mcp/index.js"}, false},
		{[]string{"deno", "run", "-A", "jsr:@x/McpServer"}, false},
		{[]string{"python3", "-m", "my_MCP_thing"}, false},
		{[]string{"app", "--enable-mcp"}, false},
		{[]string{"mcp-server-"}, false},
		{[]string{"-mcp"}, false},
		{[]string{"npx", "-y", "@modelcontextprotocol/server-"}, false},
		{[]string{"npx", "-y", "@modelcontextprotocol/inspector"}, false},
		{[]string{"/usr/bin/supervisor", "_fixture", "sleep", "mcp"}, false},
		{[]string{"node", "server.js"}, false},
		{[]string{"vim", "mcp-server-git.go"}, false},
		{[]string{"tail", "-f", "/var/log/github-mcp.log"}, false},
		{nil, false},
		// A launcher or interpreter in every position it takes.
		{[]string{"npm", "exec", "-y", "@modelcontextprotocol/server-memory"}, true},
		{[]string{"node", "/usr/lib/node_modules/npm/bin/npx-cli.js", "-y", "@modelcontextprotocol/server-memory"}, true},
		{[]string{"env", "FOO=1", "npx", "-y", "@modelcontextprotocol/server-memory"}, true},
		{[]string{"bash", "-lc", "uvx mcp-server-fetch"}, true},
		{[]string{"uv", "tool", "run", "mcp-server-fetch"}, true},
		{[]string{"pnpm", "dlx", "@modelcontextprotocol/server-memory"}, true},
		{[]string{"uvx", "--from", "mcp-server-git", "mcp-server-git"}, true},
		{[]string{"npm exec -y @modelcontextprotocol/server-filesystem /tmp"}, true}, // npm's process title: one argument
		{[]string{"docker", "run", "-i", "--rm", "-e", "GITHUB_TOKEN", "ghcr.io/github/github-mcp-server"}, true},
		{[]string{"podman", "run", "-i", "--rm", "ghcr.io/x/weather-mcp:1.2"}, true},
		{[]string{"java", "-jar", "/opt/mcp-server-x.jar"}, true},
		{[]string{"uv", "--directory", "/src/weather", "run", "weather-mcp"}, true},
		{[]string{"uvx", "--python", "3.12", "mcp-server-fetch"}, true},
		{[]string{"sh", "-c", "FOO=1 npx -y @modelcontextprotocol/server-memory"}, true},
		{[]string{"env", "-u", "X", "npx", "-y", "@modelcontextprotocol/server-memory"}, true},
		{[]string{"timeout", "-s", "KILL", "60", "npx", "-y", "@modelcontextprotocol/server-memory"}, true},
		{[]string{"bun", "run", "/src/github-mcp.ts"}, true},
		{[]string{"npx", "-p", "@modelcontextprotocol/server-memory", "mcp-server-memory"}, true},
		// A package named only as an argument of another program: a host
		// (or its driver) that runs the server as its child (issue 27).
		{[]string{"node", "driver.mjs", "@modelcontextprotocol/server-everything"}, false},
		{[]string{"python3", "host.py", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"}, false},
		{[]string{"claude", "mcp", "add", "fs", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem"}, false},
		{[]string{"/usr/local/bin/codex", "exec", "--mcp", "mcp-server-git"}, false},
		{[]string{"npx", "-y", "some-host", "@modelcontextprotocol/server-memory"}, false},
		// A flag's value, or the package a launcher installs for another
		// command, is not what runs.
		{[]string{"npx", "--prefix", "/home/u/foo-mcp", "tsx", "driver.ts"}, false},
		{[]string{"uv", "run", "--directory", "/home/u/github-mcp", "agent.py"}, false},
		{[]string{"npx", "-p", "foo-mcp", "node", "host.js"}, false},
		{[]string{"uvx", "--from", "x-mcp", "python", "agent.py"}, false},
		{[]string{"node driver.mjs @modelcontextprotocol/server-everything"}, false},
		{[]string{"docker", "run", "-v", "/x/y-mcp:/data", "alpine"}, false},
	} {
		if got := ProvablyMCP(tc.argv); got != tc.want {
			t.Errorf("ProvablyMCP(%q) = %v, want %v", tc.argv, got, tc.want)
		}
	}
}
