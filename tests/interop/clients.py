"""`gemctl clients connect` with the real Claude Code and Codex CLI (issue 69, item 3), both from
npm at pinned versions (agents.sh installs them). In a home of its own (its own daemon): the
fixture server in the client's own file, `gemctl clients connect`, the client's own listing of
its servers, then `gemctl clients disconnect` and the user's bytes back.

Claude Code: `claude mcp list` starts each server to check it, so "Connected" after connect
means Claude Code ran `gemctl mcp serve --server fx` and completed the MCP handshake through
geminid. No login and no network: `mcp list` needs neither. Codex CLI: `codex mcp list --json`
shows the gateway entry as Codex reads it (Codex's listing does not start servers, and a tool
call needs a model, which Codex reaches only over the network: not run here).
"""

import json
import os
import shutil
import subprocess
import tempfile

import homes


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


class World:
    def __init__(self, s):
        self.s = s
        self.tmp = tempfile.mkdtemp(prefix="geminid-clients-")
        self.home = os.path.join(self.tmp, "home")
        self.ws = os.path.join(self.tmp, "ws")
        homes.make(self.tmp)
        os.makedirs(self.ws, exist_ok=True)
        self.bin = os.path.join(s.cache, "agents", "node_modules", ".bin")
        self.fixture = os.path.join(s.bin, "mcp-fixture")

    def env(self):
        return homes.env(self.tmp, self.s.bin, DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1",
                         CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                         CODEX_HOME=os.path.join(self.home, ".codex"))

    def run(self, *args, stdout_only=False):
        p = subprocess.run(list(args), env=self.env(), cwd=self.ws, capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {p.returncode}: {p.stdout}{p.stderr}")
        return p.stdout if stdout_only else p.stdout + p.stderr

    def gemctl(self, *args):
        return self.run(os.path.join(self.s.bin, "gemctl"), *args)

    def write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def read(self, path):
        with open(path) as f:
            return f.read()


def claude_code(w):
    path = os.path.join(w.home, ".claude.json")
    # Claude Code checks a server only in a folder whose trust dialog was accepted (its own
    # record of that, in the same file, per project).
    trusted = json.dumps({w.ws: {"hasTrustDialogAccepted": True}})
    text = ('{\n  "numStartups": 1,\n  "mcpServers": {\n    "fx": {\n      "type": "stdio",\n'
            f'      "command": {json.dumps(w.fixture)},\n      "args": [],\n      "env": {{}}\n'
            f'    }}\n  }},\n  "projects": {trusted}\n}}')
    w.write(path, text)
    before = w.run(os.path.join(w.bin, "claude"), "mcp", "list")
    expect("fx" in before and "Connected" in before, f"claude mcp list before connect: {before}")
    w.gemctl("clients", "connect", "claude-code")
    out = w.run(os.path.join(w.bin, "claude"), "mcp", "list")
    line = next((l for l in out.splitlines() if l.startswith("fx:")), "")
    expect("gemctl mcp serve --server fx" in line and "Connected" in line,
           f"claude mcp list after connect: {out}")
    print(f"        claude mcp list: {line}", flush=True)
    w.gemctl("clients", "disconnect", "claude-code")
    after = w.read(path)
    # Claude Code may rewrite its own state in the file; the servers come back byte for byte.
    start = text.index('"mcpServers"')
    section = text[start:text.index('\n  },\n', start) + 4]
    expect(section in after, f"the servers did not come back as written:\n{after}")
    expect(json.loads(after)["mcpServers"] == json.loads(text)["mcpServers"], after)
    return "identical" if after == text else "servers identical, Claude Code's own edits kept"


def codex(w):
    path = os.path.join(w.home, ".codex", "config.toml")
    text = (f'# mine\n\n# the fixture\n[mcp_servers.fx]\ncommand = {json.dumps(w.fixture)}\n'
            'args = ["--rich"]\n')
    w.write(path, text)
    w.gemctl("clients", "connect", "codex")
    listed = json.loads(w.run(os.path.join(w.bin, "codex"), "mcp", "list", "--json",
                              stdout_only=True))
    fx = next((x for x in listed if x.get("name") == "fx"), None)
    expect(fx is not None, f"codex mcp list: {listed}")
    transport = fx.get("transport", fx)
    expect(os.path.basename(transport.get("command", "")) == "gemctl"
           and transport.get("args", [])[:4] == ["mcp", "serve", "--server", "fx"],
           f"codex reads: {fx}")
    expect(fx.get("enabled", True), f"codex has it off: {fx}")
    w.gemctl("clients", "disconnect", "codex")
    expect(w.read(path) == text, f"not the user's bytes:\n{w.read(path)}")


def run(s):
    if not os.path.exists(os.path.join(s.cache, "agents", "node_modules", ".bin", "claude")):
        s.check("clients", "Claude Code and Codex CLI (agents.sh --install-only installs them)",
                lambda: expect(False, "not installed"))
        return
    w = World(s)
    try:
        got = {}
        s.check("claude-code", "clients connect: `claude mcp list` shows fx Connected through "
                "the gateway; disconnect gives the servers back",
                lambda: got.update(claude=claude_code(w)))
        s.check("codex", "clients connect: `codex mcp list` reads the gateway entry; disconnect "
                "gives back the same bytes", lambda: codex(w))
        if "claude" in got:
            print(f"        claude-code: {got['claude']}", flush=True)
    finally:
        subprocess.run([os.path.join(s.bin, "gemctl"), "daemon", "stop"], env=w.env(),
                       capture_output=True, timeout=30)
        shutil.rmtree(w.tmp, ignore_errors=True)
