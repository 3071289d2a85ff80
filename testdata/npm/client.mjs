// A real MCP host in miniature for cmd/supervisor's mcp_npm_test.go: the
// TypeScript SDK's Client on a StdioClientTransport, started on the server
// command the test gives (`supervisor run ... -- node ...`).
//
// Usage: SUPERVISOR_TEST_MCP_CLIENT='<config JSON>' node client.mjs
//   {"command": "...", "args": [...], "cwd": "...", "tool": "echo",
//    "arguments": {...}}
//
// It connects (initialize), lists the tools and calls the tool, then prints
// one JSON line {"event":"connected", ...} and stays in the session until a
// line or EOF on its stdin; then it closes the session the SDK's way (the
// server's stdin EOF, SIGTERM after 2 s) and prints {"event":"closed"}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

// The config comes in the environment, not argv: a node process whose argv
// mentions npx would count as a launcher rather than as the host.
const cfg = JSON.parse(process.env.SUPERVISOR_TEST_MCP_CLIENT);
const print = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

try {
  const transport = new StdioClientTransport({
    command: cfg.command,
    args: cfg.args,
    cwd: cfg.cwd,
    // The whole environment: the SDK's default passes only a few safe
    // variables, and the test's SUPERVISOR_STATE_DIR/SOCKET must reach the shim.
    env: { ...process.env },
    stderr: "inherit",
  });
  const client = new Client({ name: "supervisor-e2e-ts", version: "0.0.0" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: cfg.tool, arguments: cfg.arguments ?? {} });
  print({
    event: "connected",
    server: client.getServerVersion(),
    tools: tools.map((t) => t.name),
    text: (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n"),
    isError: result.isError ?? false,
    shim_pid: transport.pid,
  });
  // Mid-session until the test says so: a line or EOF on stdin closes the
  // session; the host-death tests SIGKILL this process here instead.
  await new Promise((resolve) => {
    process.stdin.once("data", resolve);
    process.stdin.once("end", resolve);
  });
  await client.close();
  print({ event: "closed" });
  process.exit(0);
} catch (err) {
  print({ event: "error", error: String(err?.stack ?? err) });
  process.exit(1);
}
