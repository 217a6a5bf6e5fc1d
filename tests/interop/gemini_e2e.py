"""Gemini CLI itself, end to end, before and after `gemctl mcp import`: a loopback mock of the
Gemini API (mock_gemini.py) logs what Gemini CLI declares to the model and makes the model call
a tool. In a home of its own (its own daemon), a Gemini CLI user's world: the fixture server in
~/.gemini/settings.json, no policy of theirs, the default secrets store.

Checks: the same function names and schemas are declared before and after the import, in `-p`
and `-p --yolo`, server-everything's among them (it lists three tools more to a client that
declares elicitation and sampling, which Gemini CLI does not); the call reaches the real server, an extension's server's too; the user's deny rule and a geminid hook that
blocks reach the model as the tool's error; the user's hooks run once per call after the import
(Gemini CLI runs them, geminid does not again); two Gemini CLI processes share one server process;
unimport gives back the bytes `gemini mcp add` wrote.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

import gemini_cli
import homes


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


class World:
    def __init__(self, s):
        self.s = s
        self.tmp = tempfile.mkdtemp(prefix="geminid-gemini-e2e-")
        self.home = os.path.join(self.tmp, "home")
        self.ws = os.path.join(self.tmp, "ws")
        homes.make(self.tmp)
        os.makedirs(self.ws, exist_ok=True)
        self.log = os.path.join(self.tmp, "model.jsonl")
        port_file = os.path.join(self.tmp, "port")
        self.mock = subprocess.Popen(
            ["python3", os.path.join(s.root, "tests", "interop", "mock_gemini.py"), port_file,
             self.log], stdin=subprocess.DEVNULL)
        deadline = time.time() + 15
        while not os.path.exists(port_file):
            expect(time.time() < deadline, "the mock Gemini API did not start")
            time.sleep(0.05)
        with open(port_file) as f:
            self.port = int(f.read())
        self.gemini = os.path.join(s.cache, "clients", "node_modules", ".bin", "gemini")
        self.gemctl = os.path.join(s.bin, "gemctl")
        self.fixture = os.path.join(s.bin, "mcp-fixture")

    def env(self):
        return homes.env(self.tmp, self.s.bin, GEMINI_CLI_NO_RELAUNCH="true",
                         GEMINI_API_KEY="interop-fake-key",
                         GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{self.port}")

    def settings(self, servers):
        with open(os.path.join(self.home, ".gemini", "settings.json"), "w") as f:
            json.dump({"security": {"auth": {"selectedType": "gemini-api-key"}},
                       "mcpServers": servers}, f, indent=2)

    def gemctl_run(self, *args):
        p = subprocess.run([self.gemctl, *args], env=self.env(), cwd=self.ws, capture_output=True,
                           text=True, timeout=120)
        return p.returncode, p.stdout + p.stderr

    def ask(self, suffix, args, *flags):
        """One `gemini -p` run: (the model's requests during it, Gemini CLI's output)."""
        with open(self.log + ".plan", "w") as f:
            json.dump({"suffix": suffix, "args": args}, f)
        start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        argv = [self.gemini, "-p", "call the tool", "-m", "gemini-2.5-flash", *flags]
        code, out = gemini_cli.run(argv, self.env(), self.ws, 180)
        requests = []
        if os.path.exists(self.log):
            with open(self.log) as f:
                f.seek(start)
                requests = [json.loads(line) for line in f if line.strip()]
        expect(code == 0, f"gemini {flags} exited {code}: {out[-2000:]}")
        return requests, out

    def stop(self):
        self.gemctl_run("daemon", "stop")
        self.mock.terminate()
        try:
            self.mock.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.mock.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


def declarations(requests):
    """The MCP functions declared in the first model request: name -> schema."""
    for r in requests:
        if ":streamGenerateContent" not in r["path"]:
            continue
        out = {}
        for tool in r["body"].get("tools") or []:
            for d in tool.get("functionDeclarations") or []:
                if d.get("name", "").startswith("mcp_"):
                    out[d["name"]] = d.get("parametersJsonSchema", d.get("parameters"))
        return out
    return {}


def responses(requests):
    """The functionResponse parts Gemini CLI sent back to the model."""
    found = []
    for r in requests:
        for c in r["body"].get("contents") or []:
            found += [p["functionResponse"] for p in c.get("parts", []) if "functionResponse" in p]
    return found


def fixture_processes(w):
    """The processes of the fixture as fx runs it, started in this world (by geminid or by
    Gemini CLI)."""
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/environ", "rb") as f:
                ours = w.tmp.encode() in f.read()
        except OSError:
            continue
        if ours and b"mcp-fixture" in cmd and b"--rich" not in cmd:
            found.add(pid)
    return found


def run(s):
    w = World(s)
    try:
        steps(s, w)
    finally:
        w.stop()


def extension(w):
    """An extension with a server of its own, started in the extension's folder, installed as
    a user does (Gemini CLI loads what geminid installs)."""
    src = os.path.join(w.tmp, "ex-src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "gemini-extension.json"), "w") as f:
        json.dump({"name": "ex", "version": "1.0.0", "mcpServers": {
            "xs": {"command": w.fixture, "args": ["--rich"], "cwd": "${extensionPath}"}}}, f)
    code, out = w.gemctl_run("extensions", "install", src, "--consent")
    expect(code == 0, out)


def steps(s, w):
    # fx as most servers are; ft trusted (Gemini CLI offers its tools even without --yolo);
    # xs an extension's.
    # server-everything lists its trigger-* tools only to a client that declares elicitation
    # or sampling (Gemini CLI declares neither).
    everything = os.path.join(s.cache, "node_modules", ".bin", "mcp-server-everything")
    w.settings({"fx": {"command": w.fixture, "args": []},
                "ft": {"command": w.fixture, "args": ["--rich"], "trust": True},
                "everything": {"command": everything, "timeout": 20000}})
    extension(w)
    before = {}

    def direct():
        for flags in ((), ("--yolo",)):
            reqs, out = w.ask("mcp_fx_echo", {"text": "hello-direct"}, *flags)
            before[flags] = declarations(reqs)
        yolo = sorted(before[("--yolo",)])
        expect("mcp_fx_echo" in yolo and "mcp_xs_echo" in yolo, f"direct --yolo: {yolo}")
        capable = {f"mcp_everything_trigger-{t}" for t in
                   ("elicitation-request", "sampling-request", "url-elicitation")}
        expect("mcp_everything_echo" in yolo and not capable & set(yolo),
               f"direct --yolo, server-everything: {yolo}")
        plain = sorted(before[()])
        expect("mcp_ft_echo" in plain and "mcp_fx_echo" not in plain, f"direct -p: {plain}")
        said = json.dumps(responses(reqs))
        expect("hello-direct" in said, f"direct: the tool's answer did not reach the model: {said}")

    s.check("gemini-cli", "Gemini CLI with the server configured directly (the baseline)", direct)

    def imported():
        code, out = w.gemctl_run("trust")
        expect(code == 0, out)
        code, out = w.gemctl_run("mcp", "import")
        expect(code == 0 and "--confirm client" in out, out)
        kept = None
        for flags in ((), ("--yolo",)):
            reqs, out = w.ask("mcp_fx_echo", {"text": "hello-imported"}, *flags)
            # geminid's fx process, started for the first run's gateway, is the one each run
            # leaves: the reaper of Gemini CLI's leftovers leaves geminid's servers alone (it
            # killed them, and the next run, listing in the restart's backoff, declared none).
            now = fixture_processes(w)
            expect(now and now == (kept or now),
                   f"{flags}: geminid's fx server after the run: {now}, after the first: {kept}")
            kept = now
            after = declarations(reqs)
            expect(sorted(after) == sorted(before[flags]),
                   f"{flags}: declared {sorted(after)}, before the import {sorted(before[flags])}")
            for name, schema in after.items():
                expect(schema == before[flags][name],
                       f"{flags}: {name}'s schema changed: {schema} != {before[flags][name]}")
        said = json.dumps(responses(reqs))
        expect("hello-imported" in said, f"imported --yolo: {said}; {out[-1500:]}")
        code, audit = w.gemctl_run("--json", "audit", "-n", "1")
        rec = json.loads(audit)["records"][0]
        expect(rec["tool"] == "mcp_fx_echo" and rec.get("confirmation") == "byClient", rec)
        # The extension's server too: Gemini CLI merges the import's entry over the
        # extension's, and reaches geminid's process of it.
        reqs, out = w.ask("mcp_xs_echo", {"text": "hello-extension"}, "--yolo")
        said = json.dumps(responses(reqs))
        expect("hello-extension" in said, f"the extension's server: {said}; {out[-1500:]}")
        code, audit = w.gemctl_run("--json", "audit", "-n", "1")
        rec = json.loads(audit)["records"][0]
        expect(rec["tool"] == "mcp_xs_echo" and rec.get("confirmation") == "byClient", rec)

    s.check("gemini-cli", "after `gemctl mcp import`: the same functions and schemas, -p and "
            "-p --yolo, and the call reaches the server through geminid (an extension's "
            "server too)", imported)

    def denied():
        # The user's own deny rule, read by Gemini CLI and geminid alike: it holds as before.
        policies = os.path.join(w.home, ".gemini", "policies")
        os.makedirs(policies, exist_ok=True)
        rule = os.path.join(policies, "e2e.toml")
        with open(rule, "w") as f:
            f.write('[[rule]]\nmcpName = "fx"\ntoolName = "echo"\nargsPattern = "forbidden"\n'
                    'decision = "deny"\npriority = 500\n')
        time.sleep(1.0)
        reqs, out = w.ask("mcp_fx_echo", {"text": "forbidden"}, "--yolo")
        said = json.dumps(responses(reqs)).lower()
        expect("denied" in said or "deny" in said, f"the deny did not reach the model: {said}")
        os.remove(rule)
        time.sleep(1.0)

    s.check("gemini-cli", "the user's deny rule still reaches the model as the tool's error",
            denied)

    def blocked():
        # A BeforeTool hook in geminid's own file (Gemini CLI does not read it): geminid blocks
        # the call, and the model reads the hook's reason as the tool's error.
        own = os.path.join(w.home, ".gemini", "geminid", "servers.json")
        with open(own) as f:
            kept = json.load(f)
        hook = {"type": "command",
                "command": "echo '{\"decision\": \"deny\", \"reason\": \"blocked by geminid e2e\"}'"}
        with open(own, "w") as f:
            json.dump(dict(kept, hooks={"BeforeTool": [{"matcher": "mcp_fx_echo", "hooks": [hook]}]}),
                      f, indent=2)
        time.sleep(1.0)
        try:
            reqs, out = w.ask("mcp_fx_echo", {"text": "hooked"}, "--yolo")
            said = json.dumps(responses(reqs))
            expect("blocked by geminid e2e" in said, f"the hook's reason did not reach the model: {said}")
            code, audit = w.gemctl_run("--json", "audit", "-n", "1")
            rec = json.loads(audit)["records"][0]
            expect(rec["tool"] == "mcp_fx_echo" and not rec["ok"], rec)
        finally:
            with open(own, "w") as f:
                json.dump(kept, f, indent=2)
            time.sleep(1.0)

    s.check("gemini-cli", "a geminid BeforeTool hook that blocks reaches the model as the tool's "
            "error", blocked)

    def hooks_once():
        # The user's own hooks in ~/.gemini/settings.json, which Gemini CLI runs itself: after
        # the import each runs once per call (Gemini CLI's run), not again in geminid.
        user = os.path.join(w.home, ".gemini", "settings.json")
        with open(user) as f:
            kept = f.read()
        log = os.path.join(w.tmp, "hooks.jsonl")
        script = os.path.join(w.tmp, "hook_log.py")
        with open(script, "w") as f:
            f.write("import json, sys\n"
                    "j = json.load(sys.stdin)\n"
                    f"with open({log!r}, 'a') as f:\n"
                    "    f.write(json.dumps([j.get('hook_event_name'), "
                    "'gemini-cli' if j.get('transcript_path') else 'geminid']) + '\\n')\n"
                    "print(json.dumps({'decision': 'allow'}))\n")
        hook = [{"matcher": "mcp_fx_echo",
                 "hooks": [{"type": "command", "command": f"python3 {script}"}]}]
        with open(user, "w") as f:
            json.dump(dict(json.loads(kept), hooks={"BeforeTool": hook, "AfterTool": hook}), f,
                      indent=2)
        time.sleep(1.0)
        try:
            reqs, out = w.ask("mcp_fx_echo", {"text": "hooked once"}, "--yolo")
            said = json.dumps(responses(reqs))
            expect("hooked once" in said, f"the call did not reach the model: {said}; {out[-1500:]}")
            with open(log) as f:
                ran = sorted(tuple(json.loads(line)) for line in f if line.strip())
            expect(ran == [("AfterTool", "gemini-cli"), ("BeforeTool", "gemini-cli")],
                   f"hook runs per call: {ran}")
            code, audit = w.gemctl_run("--json", "audit", "-n", "1")
            rec = json.loads(audit)["records"][0]
            expect(rec["tool"] == "mcp_fx_echo" and rec.get("hooks") == "byClient", rec)
        finally:
            with open(user, "w") as f:
                f.write(kept)
            time.sleep(1.0)

    s.check("gemini-cli", "after the import, the user's BeforeTool and AfterTool hooks run once "
            "per call (by Gemini CLI), and the audit says the client ran them", hooks_once)

    def shared():
        seen = set()
        most = 0
        argv = [w.gemini, "-p", "call the tool", "-m", "gemini-2.5-flash", "--yolo"]
        with open(w.log + ".plan", "w") as f:
            json.dump({"suffix": "mcp_fx_sleep", "args": {"ms": 3000}}, f)
        runs = [subprocess.Popen(argv, env=w.env(), cwd=w.ws, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(2)]
        try:
            while any(p.poll() is None for p in runs):
                now = fixture_processes(w)
                seen |= now
                most = max(most, len(now))
                time.sleep(0.1)
        finally:
            for p in runs:
                if p.poll() is None:
                    p.kill()
        expect(all(p.returncode == 0 for p in runs), [p.returncode for p in runs])
        expect(most == 1 and len(seen) == 1, f"fixture processes: at most {most} at once, {seen}")

    s.check("gemini-cli", "two Gemini CLI sessions share one server process through geminid",
            shared)

    def undone():
        code, out = w.gemctl_run("mcp", "unimport")
        expect(code == 0 and "fx" in out, out)
        with open(os.path.join(w.home, ".gemini", "settings.json")) as f:
            servers = json.load(f)["mcpServers"]
        expect(servers["fx"] == {"command": w.fixture, "args": []}, servers)
        expect(servers["ft"].get("trust") is True and "--rich" in servers["ft"]["args"], servers)
        expect("xs" not in servers and "xs" in out, f"the extension's entry stays: {out} {servers}")

    s.check("gemini-cli", "`gemctl mcp unimport` gives Gemini CLI its server back", undone)

    def same_bytes():
        # The file as Gemini CLI writes it (`gemini mcp add`: arrays one item a line, no final
        # newline); the extension's entry is added by the import and taken out by the undo.
        user = os.path.join(w.home, ".gemini", "settings.json")
        with open(user, "w") as f:
            f.write('{\n  "security": {"auth": {"selectedType": "gemini-api-key"}}\n}')
        for add in (["fa", w.fixture, "--", "--rich"], ["-t", "http", "web", "http://127.0.0.1:9/mcp"]):
            code, out = gemini_cli.run([w.gemini, "mcp", "add", "-s", "user", *add], w.env(), w.ws, 120)
            expect(code == 0, f"gemini mcp add {add}: {out[-1500:]}")
        with open(user, "rb") as f:
            before = f.read()
        expect(b'"fa"' in before and b'"web"' in before, before)
        for args in (("mcp", "import"), ("mcp", "unimport")):
            code, out = w.gemctl_run(*args)
            expect(code == 0 and "fa, web" in out, out)
        with open(user, "rb") as f:
            after = f.read()
        expect(after == before, f"unimport wrote {after!r}, `gemini mcp add` had written {before!r}")

    s.check("gemini-cli", "`gemini mcp add`, `gemctl mcp import`, `gemctl mcp unimport`: "
            "Gemini CLI's file comes back byte for byte", same_bytes)
