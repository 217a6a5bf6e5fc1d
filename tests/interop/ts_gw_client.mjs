// The TypeScript MCP SDK (@modelcontextprotocol/sdk 1.x, the client most MCP apps embed) as a
// client of geminid's gateway that declares elicitation, for the interop suite (many_clients.py).
// usage: SDK=DIR node ts_gw_client.mjs SCENARIO stdio CMD [ARGS...]
//        SDK=DIR node ts_gw_client.mjs SCENARIO http URL TOKEN_FILE
// Scenarios (each prints one JSON object a line):
//   hold        list the tools and print them; then for each stdin line `TOOL ARGS_JSON` call
//               TOOL, accepting what it is asked, and print the result; at the end of stdin,
//               close() (over HTTP the SDK sends no DELETE) and exit
//   leave       list the tools, print them, close() and exit
//   ask-leave TOOL ARGS_JSON
//               call TOOL; when asked to confirm it, print the question, answer nothing and
//               close() (no DELETE) and exit, as a user quitting the app at the prompt
import fs from 'node:fs';
import readline from 'node:readline';

const SDK = process.env.SDK;
const { Client } = await import(`${SDK}/dist/esm/client/index.js`);
const { StdioClientTransport } = await import(`${SDK}/dist/esm/client/stdio.js`);
const { StreamableHTTPClientTransport } = await import(`${SDK}/dist/esm/client/streamableHttp.js`);
const T = await import(`${SDK}/dist/esm/types.js`);

const [scenario, ...rest] = process.argv.slice(2);
const say = (o) => console.log(JSON.stringify(o));
const text = (r) => (r.content || []).map((c) => c.text ?? '').join('\n');
let args = [];
if (scenario === 'ask-leave') args = rest.splice(0, 2);
const [mode, ...where] = rest;
let transport;
if (mode === 'stdio') {
  // The suite's daemon is on its own socket: the environment goes on, as a client entry's would.
  transport = new StdioClientTransport({ command: where[0], args: where.slice(1), env: process.env, stderr: 'inherit' });
} else {
  const token = fs.readFileSync(where[1], 'utf8').trim();
  transport = new StreamableHTTPClientTransport(new URL(where[0]), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
}
const client = new Client({ name: 'ts-sdk-interop', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
const asked = [];
client.setRequestHandler(T.ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  if (scenario === 'ask-leave') {
    say({ asked: req.params.message });
    await client.close();
    process.exit(0);
  }
  return { action: 'accept', content: {} };
});
await client.connect(transport);

if (scenario === 'ask-leave') {
  await client.callTool({ name: args[0], arguments: JSON.parse(args[1]) }, undefined, { timeout: 600000 });
  say({ error: 'the call ended before anyone was asked' });
  process.exit(1);
}
say({ tools: (await client.listTools()).tools.map((t) => t.name) });
if (scenario === 'hold') {
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [tool, json] = [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)];
    const a0 = asked.length;
    const r = await client.callTool({ name: tool, arguments: JSON.parse(json) }, undefined, { timeout: 60000 });
    say({ text: text(r), isError: !!r.isError, asked: asked.slice(a0) });
  }
}
await client.close();
process.exit(0);
