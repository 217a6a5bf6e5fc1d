#!/usr/bin/env node
// The hello extension's MCP server: one tool, `hello`, over stdio (one JSON-RPC message per
// line), with nothing to install. A real extension would use the MCP SDK; this one shows the
// shape of the protocol and starts anywhere Node does.

const readline = require("node:readline");

const TOOLS = [
  {
    name: "hello",
    description: "Says hello to someone",
    inputSchema: {
      type: "object",
      properties: { name: { type: "string", description: "Who to greet" } },
    },
  },
];

function send(message) {
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
}

function answer(request) {
  switch (request.method) {
    case "initialize":
      return {
        protocolVersion: request.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "hello-server", version: "1.0.0" },
      };
    case "ping":
      return {};
    case "tools/list":
      return { tools: TOOLS };
    case "tools/call": {
      const who = request.params?.arguments?.name || "world";
      return { content: [{ type: "text", text: `Hello, ${who}!` }] };
    }
    default:
      // `server/discover` (2026-07-28) included: the client then says `initialize`.
      throw { code: -32601, message: `Method not found: ${request.method}` };
  }
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    return send({ id: null, error: { code: -32700, message: "Parse error" } });
  }
  if (request.id === undefined) return; // a notification
  try {
    send({ id: request.id, result: answer(request) });
  } catch (error) {
    send({ id: request.id, error });
  }
});
