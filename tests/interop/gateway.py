"""Interop checks of the gateway (`gemctl mcp serve`) with MCP clients nobody here wrote: the
Python MCP SDK, the MCP Inspector CLI and Gemini CLI itself. Run from checks.py after the
server checks, on the same daemon and home.
"""

import json
import os
import subprocess
import time


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def last_json(out):
    lines = [line for line in out.strip().splitlines() if line.startswith("{")]
    expect(lines, f"no JSON in: {out[-500:]}")
    return json.loads(lines[-1])


class Clients:
    def __init__(self, s):
        self.s = s
        self.gemctl = os.path.join(s.bin, "gemctl")
        self.python = os.path.join(s.cache, "venv", "bin", "python")
        self.script = os.path.join(s.root, "tests", "interop", "gw_client.py")
        self.node22 = os.path.join(s.cache, "node22", "node_modules", ".bin")
        self.clients = os.path.join(s.cache, "clients", "node_modules", ".bin")

    def py(self, *args, cwd=None, timeout=60):
        p = subprocess.run([self.python, self.script, self.gemctl, *args], env=self.s.env(),
                           cwd=cwd or self.s.ws, capture_output=True, text=True, timeout=timeout)
        expect(p.returncode == 0, f"gw_client {args} exited {p.returncode}: {p.stderr[-1500:]}")
        return last_json(p.stdout)

    def inspector(self, *args):
        env = dict(self.s.env(), PATH=self.node22 + os.pathsep + os.environ.get("PATH", ""))
        p = subprocess.run([os.path.join(self.clients, "mcp-inspector"), "--cli", *args], env=env,
                           cwd=self.s.ws, capture_output=True, text=True, timeout=120)
        expect(p.returncode == 0, f"inspector {args} exited {p.returncode}: {p.stderr[-1500:]}")
        return json.loads(p.stdout)


def run(s):
    c = Clients(s)
    # One tool asks for a confirmation (answered as an elicitation); the rest are allowed, as a
    # user who trusts these servers would set it.
    policies = os.path.join(s.home, ".gemini", "policies")
    os.makedirs(policies, exist_ok=True)
    with open(os.path.join(policies, "gateway.toml"), "w") as f:
        f.write('[[rule]]\ntoolName = "*"\nmcpName = "*"\ndecision = "allow"\npriority = 1\n\n'
                '[[rule]]\nmcpName = "time"\ntoolName = "convert_time"\n'
                'decision = "ask_user"\npriority = 100\n')
    time.sleep(1.0)  # the watcher applies it

    def python_basic():
        out = c.py("basic", "everything__echo", json.dumps({"message": "through the gateway"}))
        expect(out["server"] == "geminid", out)
        expect("memory__create_entities" in out["tools"] and "time__get_current_time" in out["tools"],
               out["tools"])
        expect("through the gateway" in out["text"] and not out["isError"], out)

    s.check("gateway", "Python SDK client lists and calls through gemctl mcp serve", python_basic)

    def python_modern():
        out = c.py("modern", "everything__echo", json.dumps({"message": "a new era"}),
                   "everything__simple-prompt", "everything__completable-prompt", "department", "E")
        expect("a new era" in out["text"] and not out["isError"], out)
        expect(out["prompt"] and all(isinstance(t, str) for t in out["prompt"]), out)
        expect(out["completed"] == ["Engineering"], out)

    s.check("gateway", "the Python SDK's default client (2026-07-28) calls, gets a prompt and "
            "completes", python_modern)

    def inspector_stdio():
        # The Inspector hands its server a trimmed environment: the suite's socket goes with -e.
        sock = ["-e", f"GEMINID_SOCKET={s.env()['GEMINID_SOCKET']}", "-e",
                f"XDG_STATE_HOME={s.env()['XDG_STATE_HOME']}", "-e", "GEMINI_CLI_TRUST_WORKSPACE=true"]
        listed = c.inspector(*sock, c.gemctl, "mcp", "serve", "--method", "tools/list")
        names = [t["name"] for t in listed["tools"]]
        expect("everything__echo" in names, names)
        called = c.inspector(*sock, c.gemctl, "mcp", "serve", "--method", "tools/call",
                             "--tool-name", "everything__echo", "--tool-arg", "message=inspected")
        expect("inspected" in json.dumps(called) and not called.get("isError"), called)

    s.check("gateway", "MCP Inspector CLI lists and calls over stdio", inspector_stdio)

    def inspector_http():
        p = subprocess.Popen([c.gemctl, "--json", "mcp", "serve", "--http", "127.0.0.1:0"],
                             env=s.env(), cwd=s.ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, text=True)
        try:
            said = json.loads(p.stdout.readline())
            with open(said["tokenFile"]) as f:
                token = f.read().strip()
            auth = f"Authorization: Bearer {token}"
            listed = c.inspector(said["url"], "--transport", "http", "--header", auth,
                                 "--method", "tools/list")
            expect(any(t["name"] == "time__get_current_time" for t in listed["tools"]), listed)
            called = c.inspector(said["url"], "--transport", "http", "--header", auth,
                                 "--method", "tools/call", "--tool-name", "everything__echo",
                                 "--tool-arg", "message=over-http")
            expect("over-http" in json.dumps(called), called)
        finally:
            p.terminate()
            p.wait(timeout=10)

    s.check("gateway", "MCP Inspector CLI lists and calls over streamable HTTP", inspector_http)

    def fastmcp_logs():
        # FastMCP's Client asks each request's log messages at debug (2026-07-28 has no
        # logging/setLevel): a call's messages reach its log handler, over stdio and HTTP, from a
        # server of the earlier eras (SSE) and, asked for in turn by geminid, of the new one.
        p = subprocess.Popen([c.gemctl, "--json", "mcp", "serve", "--http", "127.0.0.1:0"],
                             env=s.env(), cwd=s.ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, text=True)
        try:
            said = json.loads(p.stdout.readline())
            for server in ("py-sse", "py-http"):
                for how in ([], [said["url"], said["tokenFile"]]):
                    out = c.py("fastlogs", f"{server}__note", json.dumps({"text": "hi"}), *how)
                    where = f"{server} over {'HTTP' if how else 'stdio'}: {out}"
                    expect(out["version"] == "2026-07-28" and out["text"] == "noted hi", where)
                    want = [["debug", "debug: hi"], ["info", "info: hi"], ["warning", "warning: hi"]]
                    expect(out["logs"] == want, where)
        finally:
            p.terminate()
            p.wait(timeout=10)

    s.check("gateway", "FastMCP's Client (2026-07-28) gets a call's log messages over stdio and "
            "HTTP", fastmcp_logs)

    def gemini_cli():
        ghome = os.path.join(s.tmp, "gemini-home")
        os.makedirs(os.path.join(ghome, ".gemini"), exist_ok=True)
        with open(os.path.join(ghome, ".gemini", "settings.json"), "w") as f:
            json.dump({"mcpServers": {"geminid": {"command": c.gemctl, "args": ["mcp", "serve"]}}}, f)
        env = dict(s.env(), HOME=ghome, GEMINI_CLI_NO_RELAUNCH="true")
        p = subprocess.run([os.path.join(c.clients, "gemini"), "mcp", "list"], env=env, cwd=s.ws,
                           capture_output=True, text=True, timeout=120)
        out = p.stdout + p.stderr
        expect("geminid" in out and "Connected" in out, out[-1500:])

    s.check("gateway", "Gemini CLI's `gemini mcp list` shows the gateway Connected", gemini_cli)

    def elicitation():
        args = json.dumps({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
        yes = c.py("elicit", "accept", "time__convert_time", args)
        expect(not yes["isError"] and "Asia/Tokyo" in yes["text"], yes)
        expect(len(yes["asked"]) == 1 and "convert_time" in yes["asked"][0], yes)
        no = c.py("elicit", "decline", "time__convert_time", args)
        expect(no["isError"] and "declined" in no["text"], no)

    s.check("gateway", "a confirmation as an elicitation: accepted, then declined", elicitation)

    def server_asks():
        out = c.py("asks")
        # The everything server's own form and sampling request, answered by this client; the
        # form's other fields come back with the schema's defaults geminid filled in.
        expect("Ada" in out["elicited"] and "Monica" in out["elicited"], out)
        expect("sampled by the gateway client" in out["sampled"] and "gw-client-model" in out["sampled"], out)
        expect(len(out["asked"]) == 2 and "hello" in out["asked"][1], out)

    s.check("gateway", "the everything server's elicitation and sampling reach the client that called", server_asks)

    def shared_upstreams():
        # Four clients in two workspaces hold their gateways open at once.
        held = []
        try:
            for cwd in (s.ws, s.ws, s.ws2, s.ws2):
                p = subprocess.Popen([c.python, c.script, c.gemctl, "hold", "memory__read_graph", "{}"],
                                     env=s.env(), cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
                held.append(p)
                expect(p.stdout.readline().strip() == "READY", "a client did not get going")
            procs = {}
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        ours = s.tmp.encode() in f.read()
                except OSError:
                    continue
                for name in ("mcp-server-memory", "mcp-server-everything", "mcp-server-time"):
                    if ours and name in cmd:
                        procs.setdefault(name, set()).add(pid)
            for name in ("mcp-server-memory", "mcp-server-time"):
                expect(len(procs.get(name, ())) == 1, f"{name}: {procs.get(name)}")
        finally:
            for p in held:
                p.stdin.close()
                p.wait(timeout=30)

    s.check("gateway", "four clients in two workspaces share one upstream process per server",
            shared_upstreams)

    def changed_and_cancelled():
        p = subprocess.Popen([c.python, c.script, c.gemctl, "changed"], env=s.env(), cwd=s.ws,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            expect(p.stdout.readline().strip() == "READY", "the client did not get going")
            path = os.path.join(s.home, ".gemini", "settings.json")
            with open(path) as f:
                settings = json.load(f)
            settings["mcpServers"]["fx"] = {"command": os.path.join(s.bin, "mcp-fixture"),
                                            "args": ["--rich"]}
            with open(path, "w") as f:
                json.dump(settings, f, indent=2)
            p.stdin.write("go\n")
            p.stdin.flush()
            out, _ = p.communicate(timeout=90)
        finally:
            if p.poll() is None:
                p.kill()
        out = last_json(out)
        expect(out["changed"], f"no tools/list_changed: {out}")
        expect("fx__wait" in out["after"], out["after"])
        expect(out["cancelled"] not in ("", "0"), f"the upstream server saw no cancel: {out}")

    s.check("gateway", "tools/list_changed after a settings edit; a cancel reaches upstream",
            changed_and_cancelled)
