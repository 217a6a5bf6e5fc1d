// An editor for the interop suite's ACP check (acp.py): the Agent Client Protocol's TypeScript
// SDK (@agentclientprotocol/sdk 2.x, what editors' agent panels are built on) driving an agent
// it starts over stdio, as Zed runs `gemini --acp`.
// usage: ACP_SDK=DIR [ACP_AGENT_LOG=FILE] node acp_editor.mjs CMD [ARGS...]
// It initializes the agent and prints {"op":"init",...}, then reads one JSON command a line on
// stdin and prints one JSON line for each:
//   {"op":"new","cwd":DIR}            session/new; prints its sessionId and how long it took (ms)
//   {"op":"prompt","sessionId":ID,"text":T,"answer":"allow"|"reject"}
//                                     session/prompt; every session/request_permission of the
//                                     turn is answered with the first option of kind
//                                     allow_once (or reject_once); prints the stop reason, what
//                                     was asked, the tool calls' last states and the agent's text
// At the end of stdin it closes the connection and ends the agent.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import readline from 'node:readline';
import { Readable, Writable } from 'node:stream';

const acp = await import(`${process.env.ACP_SDK}/dist/v1/stable/acp.js`);
const say = (o) => console.log(JSON.stringify(o));

const [cmd, ...args] = process.argv.slice(2);
// The agent's stderr (Gemini CLI's noise) goes to ACP_AGENT_LOG.
const log = fs.openSync(process.env.ACP_AGENT_LOG ?? '/dev/null', 'a');
const agent = spawn(cmd, args, { stdio: ['pipe', 'pipe', log] });
const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

// What the current turn of each session saw.
const turns = new Map();
const turn = (id) => {
  if (!turns.has(id)) turns.set(id, { answer: 'reject', asked: [], tools: new Map(), text: '' });
  return turns.get(id);
};

const conn = acp
  .client({ name: 'geminid-interop-editor' })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    const t = turn(params.sessionId);
    const kinds = params.options.map((o) => o.kind);
    t.asked.push({ title: params.toolCall.title ?? '', kinds });
    const want = t.answer === 'allow' ? 'allow_once' : 'reject_once';
    const option = params.options.find((o) => o.kind === want);
    if (!option) return { outcome: { outcome: 'cancelled' } };
    return { outcome: { outcome: 'selected', optionId: option.optionId } };
  })
  .onNotification(acp.methods.client.session.update, async ({ params: n }) => {
    const t = turn(n.sessionId);
    const u = n.update;
    if (u.sessionUpdate === 'tool_call' || u.sessionUpdate === 'tool_call_update') {
      const was = t.tools.get(u.toolCallId) ?? {};
      t.tools.set(u.toolCallId, { title: u.title ?? was.title, status: u.status ?? was.status });
    } else if (u.sessionUpdate === 'agent_message_chunk' && u.content?.type === 'text') {
      t.text += u.content.text;
    }
  })
  .connect(stream);

const ms = (t0) => Math.round(performance.now() - t0);
let t0 = performance.now();
const init = await conn.agent.request(acp.methods.agent.initialize, {
  protocolVersion: acp.PROTOCOL_VERSION,
  clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  clientInfo: { name: 'geminid-interop-editor', version: '1.0.0' },
});
say({ op: 'init', ms: ms(t0), protocolVersion: init.protocolVersion,
  authMethods: (init.authMethods ?? []).map((m) => m.id) });

for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const c = JSON.parse(line);
  try {
    if (c.op === 'new') {
      t0 = performance.now();
      const r = await conn.agent.request(acp.methods.agent.session.new, { cwd: c.cwd, mcpServers: [] });
      say({ op: 'new', ms: ms(t0), sessionId: r.sessionId });
    } else if (c.op === 'prompt') {
      turns.set(c.sessionId, { answer: c.answer, asked: [], tools: new Map(), text: '' });
      t0 = performance.now();
      const r = await conn.agent.request(acp.methods.agent.session.prompt, {
        sessionId: c.sessionId, prompt: [{ type: 'text', text: c.text }],
      });
      const t = turn(c.sessionId);
      say({ op: 'prompt', ms: ms(t0), stopReason: r.stopReason, asked: t.asked,
        tools: [...t.tools.values()], text: t.text });
    } else {
      say({ op: c.op, error: 'unknown command' });
    }
  } catch (e) {
    say({ op: c.op, error: String(e?.message ?? e), data: e?.data });
  }
}
conn.close();
agent.stdin.end();
agent.kill('SIGTERM');
