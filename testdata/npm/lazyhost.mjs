// A host with many MCP servers, as Claude Code starts them, for
// cmd/supervisor's lazy_test.go: the TypeScript SDK's Client on one
// StdioClientTransport per server. It connects to every server
// (initialize) and lists each one's tools, prints
// {"event":"listed","tools":[[...],...]}, then obeys lines on stdin:
//   {"server": i, "tool": "...", "arguments": {...}}  → {"event":"called","text":...}
// EOF closes every session and prints {"event":"closed"}.
//
// Usage: SUPERVISOR_TEST_MCP_HOST='{"servers":[{"command":..,"args":[..],"cwd":..},...]}' node lazyhost.mjs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import readline from "node:readline";

const cfg = JSON.parse(process.env.SUPERVISOR_TEST_MCP_HOST);
const print = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

try {
  const clients = await Promise.all(
    cfg.servers.map(async (s, i) => {
      const transport = new StdioClientTransport({
        command: s.command, args: s.args, cwd: s.cwd, env: { ...process.env }, stderr: "inherit",
      });
      const client = new Client({ name: `lazy-host-${i}`, version: "0.0.0" });
      await client.connect(transport);
      return client;
    }),
  );
  const tools = await Promise.all(clients.map(async (c) => (await c.listTools()).tools.map((t) => t.name)));
  print({ event: "listed", tools });
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const req = JSON.parse(line);
    try {
      const r = await clients[req.server].callTool({ name: req.tool, arguments: req.arguments ?? {} });
      print({ event: "called", text: (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n"), isError: r.isError ?? false });
    } catch (err) {
      print({ event: "called", error: String(err) });
    }
  }
  await Promise.all(clients.map((c) => c.close()));
  print({ event: "closed" });
  process.exit(0);
} catch (err) {
  print({ event: "error", error: String(err?.stack ?? err) });
  process.exit(1);
}
