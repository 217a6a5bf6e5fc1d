#!/usr/bin/env python3
"""Gemini CLI's ACP mode behind geminid (issue 69, item 1): an editor written with the Agent
Client Protocol's TypeScript SDK (acp_editor.mjs) launches `gemini --acp` (0.61) with the mock
model (mock_gemini.py) on two homes with the same five MCP servers and two workspaces:
  geminid   the servers moved behind the gateway by `gemctl mcp import` (what a user does)
  direct    the servers in ~/.gemini/settings.json as they were (Gemini CLI starts them itself)
  none      no MCP server (the floor of the timing)
Gemini CLI builds a configuration when it starts and a new one for each ACP session, and each
starts every MCP server again; what is checked, from outside:
- three sessions (two in one workspace, one in the other): the server processes alive, counted
  from /proc (geminid: 5; direct: 20, five at the start and five per session), and every
  session's model request declares all five servers' tools;
- a tool call the mock model asks for, on an untrusted server: the editor is asked through
  `session/request_permission`; allowed, the call reaches the server (the fixture's call log)
  and its answer the editor; rejected, nothing reaches the server;
- the editor and its agent killed with a session open: the gateways end, geminid's servers
  stay (the same processes) and serve the next editor;
- `initialize` and `session/new` timed, interleaved round by round: each round a new
  `gemini --acp` per home and two sessions in it (the first, and a further one).

The servers are the fixture twice (`fx` untrusted with a call log, `ok` trusted), two memory
servers from npm and the time server from PyPI: none asks for roots, which geminid shares only
between sessions of equal roots (the filesystem and everything servers would be one per
workspace, as checks.py's "one process per server" shows).

Run from checks.py, or alone (the debug binaries built, run.sh --install-only done):
    python3 tests/interop/acp.py --root . --cache .cache/interop [--rounds N]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemini_cli  # noqa: E402
import homes  # noqa: E402
from many_clients import Lines, expect  # noqa: E402
from warm_bench import start_mock  # noqa: E402

START_TIMEOUT = 30.0
# What an editor gives `session/new` (Zed: 30 s) and a prompt turn here.
TURN = 120.0
SERVERS = ("fx", "ok", "memory", "notes", "time")
SERVER_FILES = {"mcp-fixture", "mcp-server-memory", "mcp-server-time"}


class Home:
    """A user's home with the five servers and two workspaces; `kind` geminid or direct."""

    def __init__(self, s, kind, port):
        self.s, self.kind, self.port = s, kind, port
        self.tmp = tempfile.mkdtemp(prefix=f"geminid-acp-{kind}-")
        homes.make(self.tmp)
        self.ws = [os.path.join(self.tmp, "ws1"), os.path.join(self.tmp, "ws2")]
        for w in self.ws:
            os.makedirs(w)
        self.calls = os.path.join(self.tmp, "calls.log")
        self.log_path = os.path.join(self.tmp, "geminid.log")
        self.gemctl_bin = os.path.join(s.bin, "gemctl")
        self.daemon = None
        self.marker = f"GEMINID_INTEROP_ACP={uuid.uuid4().hex}"
        fixture = os.path.join(s.bin, "mcp-fixture")
        node_bin = os.path.join(s.cache, "node_modules", ".bin")
        memory = os.path.join(node_bin, "mcp-server-memory")
        servers = {
            "fx": {"command": fixture, "env": {"FIXTURE_CALL_LOG": self.calls}},
            "ok": {"command": fixture, "trust": True},
            "memory": {"command": memory, "trust": True,
                       "env": {"MEMORY_FILE_PATH": os.path.join(self.tmp, "m1.json")}},
            "notes": {"command": memory, "trust": True,
                      "env": {"MEMORY_FILE_PATH": os.path.join(self.tmp, "m2.json")}},
            "time": {"command": os.path.join(s.cache, "venv", "bin", "mcp-server-time"),
                     "trust": True},
        }
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        if kind != "none":
            settings["mcpServers"] = servers
        with open(os.path.join(self.tmp, "home", ".gemini", "settings.json"), "w") as f:
            json.dump(settings, f, indent=2)

    def env(self):
        name, value = self.marker.split("=", 1)
        return homes.env(self.tmp, self.s.bin, GEMINI_CLI_NO_RELAUNCH="true",
                         GEMINI_API_KEY="acp-fake-key",
                         GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{self.port}",
                         ACP_SDK=os.path.join(self.s.cache, "acp", "node_modules",
                                              "@agentclientprotocol", "sdk"),
                         ACP_AGENT_LOG=os.path.join(self.tmp, "gemini.log"),
                         **{name: value})

    def gemctl(self, *args):
        p = subprocess.run([self.gemctl_bin, "--no-autostart", *args], env=self.env(),
                           cwd=self.ws[0], capture_output=True, text=True, timeout=60)
        expect(p.returncode == 0, f"gemctl {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p.stdout

    def start(self):
        """geminid's home: its daemon, then `gemctl mcp import` as the user runs it."""
        if self.kind != "geminid":
            return
        log = open(self.log_path, "a")
        self.daemon = subprocess.Popen(
            [os.path.join(self.s.bin, "geminid")], env=dict(self.env(), RUST_LOG="info"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while subprocess.run([self.gemctl_bin, "--no-autostart", "status"], env=self.env(),
                             capture_output=True).returncode != 0:
            expect(time.monotonic() < deadline, "geminid did not start")
            time.sleep(0.05)
        # The suite's gemctl, named: without --command, import prefers a gemctl on PATH to one
        # in a build tree, and another one may be installed on the machine (or come and go).
        self.gemctl("mcp", "import", "--command", self.gemctl_bin)
        with open(os.path.join(self.tmp, "home", ".gemini", "settings.json")) as f:
            entries = json.load(f)["mcpServers"]
        expect(sorted(entries) == sorted(SERVERS), f"import left {sorted(entries)}")
        expect(all(e["command"] == self.gemctl_bin for e in entries.values()),
               f"import did not point every entry at gemctl: {entries}")

    def editor(self):
        """A new `gemini --acp` under the editor, initialized: (the editor, its init line)."""
        gemini = os.path.join(self.s.cache, "clients", "node_modules", ".bin", "gemini")
        here = os.path.dirname(os.path.abspath(__file__))
        ed = Lines(["node", os.path.join(here, "acp_editor.mjs"), gemini, "--acp", "-m",
                   "gemini-2.5-flash"], self.env(),
                   self.ws[0])
        init = waited(self, ed, "initialize")
        expect(init.get("op") == "init" and "error" not in init, f"initialize: {init}")
        return ed, init

    def servers(self):
        """The server processes of this home alive now (a wrapper whose parent is one of them
        is not counted twice): {pid: name}."""
        found = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if self.tmp.encode() not in f.read():
                        continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            names = {os.path.basename(a.decode(errors="replace")) for a in argv[:2]}
            if names & SERVER_FILES:
                found[int(pid)] = sorted(names & SERVER_FILES)[0]
        return {p: n for p, n in found.items() if parent(p) not in found}

    def echoes(self):
        if not os.path.exists(self.calls):
            return 0
        with open(self.calls) as f:
            return f.read().split().count("echo")

    def leftovers(self):
        """Kill what Gemini CLI left of this home's runs (not geminid's servers): how many."""
        left = gemini_cli.marked(self.marker)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return len(left)

    def stop(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        self.leftovers()


def want_servers(h):
    """Server processes for three sessions: geminid's five, or Gemini CLI's five at its start
    and five for each session."""
    return 5 if h.kind == "geminid" else 5 * (1 + 3)


def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def waited(h, ed, what):
    """The editor's next line, or a failure saying what was waited for and the agent's last
    words."""
    try:
        return ed.next(TURN)
    except AssertionError as e:
        try:
            with open(os.path.join(h.tmp, "gemini.log")) as f:
                tail = f.read()[-600:]
        except OSError:
            tail = ""
        raise AssertionError(f"{h.kind}, {what}: {e}; Gemini CLI's stderr ends {tail!r}") from None


def end(h, ed):
    """End an editor and the agent it started; then what that agent left."""
    ed.end(timeout=30)
    deadline = time.monotonic() + 5
    while gemini_cli.marked(h.marker) and time.monotonic() < deadline:
        time.sleep(0.1)  # Poll: Gemini CLI's children exit after it.
    h.leftovers()


def new_session(h, ed, cwd):
    ed.send(json.dumps({"op": "new", "cwd": cwd}))
    r = waited(h, ed, "session/new")
    expect(r.get("op") == "new" and r.get("sessionId"), f"session/new: {r}")
    return r


def prompt(h, ed, sid, text, answer, log):
    """A prompt turn; with it the MCP servers whose tools its first model request declared."""
    at = os.path.getsize(log) if os.path.exists(log) else 0
    ed.send(json.dumps({"op": "prompt", "sessionId": sid, "text": text, "answer": answer}))
    r = waited(h, ed, "session/prompt")
    expect(r.get("op") == "prompt" and "error" not in r, f"session/prompt: {r}")
    declared = set()
    with open(log) as f:
        f.seek(at)
        for line in f:
            req = json.loads(line)
            if ":streamGenerateContent" in req["path"]:
                for t in req["body"].get("tools") or []:
                    for d in t.get("functionDeclarations") or []:
                        declared.add(d.get("name", ""))
                break
    r["servers"] = sorted(n for n in SERVERS if any(d.startswith(f"mcp_{n}_") for d in declared))
    return r


def set_plan(log, plan):
    with open(log + ".plan.tmp", "w") as f:
        json.dump(plan, f)
    os.replace(log + ".plan.tmp", log + ".plan")


def wait_count(h, n):
    """The home's server processes once there are `n` (or what there are after 30 s)."""
    deadline = time.monotonic() + 30
    found = h.servers()
    while len(found) < n and time.monotonic() < deadline:
        time.sleep(0.2)  # Poll: servers a session started come up in their own time.
        found = h.servers()
    return found


def three_sessions(h, log):
    """Three sessions in two workspaces; each declares all five servers; the processes."""
    set_plan(log, {"suffix": "_none", "args": {}})
    ed, _ = h.editor()
    try:
        sids = [new_session(h, ed, w)["sessionId"] for w in (h.ws[0], h.ws[0], h.ws[1])]
        for sid in sids:
            r = prompt(h, ed, sid, "hi", "reject", log)
            expect(r["servers"] == sorted(SERVERS), f"session {sid} declared {r['servers']}")
        want = want_servers(h)
        found = wait_count(h, want)
        # A moment more: a process past the count shows up too.
        time.sleep(1)  # Kept: the count must not grow after it reached `want`.
        found = h.servers()
        by = {}
        for name in found.values():
            by[name] = by.get(name, 0) + 1
        expect(len(found) == want, f"{len(found)} server processes, want {want}: {by}")
        return len(found)
    finally:
        end(h, ed)


def permission(h, log):
    """The editor is asked for fx's echo: allowed it runs, rejected it does not."""
    set_plan(log, {"suffix": "fx_echo", "args": {"text": "from the editor"}})
    ed, _ = h.editor()
    try:
        sid = new_session(h, ed, h.ws[0])["sessionId"]
        ran = h.echoes()
        r = prompt(h, ed, sid, "echo it", "allow", log)
        expect(len(r["asked"]) == 1, f"asked {r['asked']} (allow)")
        expect("allow_once" in r["asked"][0]["kinds"] and "reject_once" in r["asked"][0]["kinds"],
               f"options {r['asked'][0]}")
        expect(h.echoes() == ran + 1, f"allowed, the call reached fx {h.echoes() - ran} times")
        expect([t["status"] for t in r["tools"]] == ["completed"], f"tool calls {r['tools']}")
        expect("from the editor" in r["text"], f"the editor got {r['text']!r}")
        expect(r["stopReason"] == "end_turn", f"stop {r['stopReason']}")
        r = prompt(h, ed, sid, "echo it again", "reject", log)
        expect(len(r["asked"]) == 1, f"asked {r['asked']} (reject)")
        expect(h.echoes() == ran + 1, "rejected, the call reached fx")
        expect(all(t["status"] != "completed" for t in r["tools"]), f"tool calls {r['tools']}")
        return r
    finally:
        end(h, ed)


def editor_killed(h, log):
    """The editor and its agent killed (SIGKILL, a crash) with a session open: Gemini CLI's
    `gemctl mcp serve` processes end, geminid keeps its five servers, and the next editor's
    session has them. (Gemini CLI 0.61 outlives an editor killed alone: it does not end when
    its stdin does, so a crash is both.)"""
    ed, _ = h.editor()
    new_session(h, ed, h.ws[0])
    agents = [p for p in gemini_cli.marked(h.marker) if parent(p) == ed.p.pid]
    expect(len(agents) == 1, f"the editor's agent: {agents}")
    ed.p.kill()
    ed.p.wait()
    os.kill(agents[0], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while gemini_cli.marked(h.marker):
        expect(time.monotonic() < deadline,
               f"30 s after the agent died, left: {gemini_cli.marked(h.marker)}")
        time.sleep(0.2)  # Poll: each gateway sees its stdin end.
    found = h.servers()
    expect(len(found) == 5, f"{len(found)} server processes after the editor died")
    set_plan(log, {"suffix": "_none", "args": {}})
    ed, _ = h.editor()
    try:
        sid = new_session(h, ed, h.ws[0])["sessionId"]
        r = prompt(h, ed, sid, "hi", "reject", log)
        expect(r["servers"] == sorted(SERVERS), f"the next session declared {r['servers']}")
        expect(h.servers() == found, f"the servers changed: {found} then {h.servers()}")
    finally:
        end(h, ed)


def timing(homes_, log, rounds):
    """session/new times, interleaved: {kind: {"first": [...], "further": [...]}}."""
    set_plan(log, {"suffix": "_none", "args": {}})
    rows = {h.kind: {"initialize": [], "first": [], "further": []} for h in homes_}
    for n in range(rounds + 1):
        for h in homes_:
            ed, init = h.editor()
            try:
                first = new_session(h, ed, h.ws[n % 2])["ms"]
                further = new_session(h, ed, h.ws[n % 2])["ms"]
            finally:
                end(h, ed)
            if n:  # round 0 warms npm's, Python's and geminid's caches
                rows[h.kind]["initialize"].append(init["ms"])
                rows[h.kind]["first"].append(first)
                rows[h.kind]["further"].append(further)
                print(f"        round {n} {h.kind:<8} initialize {init['ms']:6.0f} ms, "
                      f"session/new {first:6.0f} ms, "
                      f"a further one {further:6.0f} ms", flush=True)
    return rows


def med(xs):
    return f"{statistics.median(xs):.0f} ms ({min(xs):.0f}-{max(xs):.0f})"


def run(s, rounds=3):
    tmp, log, mock, port = start_mock("acp", {"suffix": "_none", "args": {}})
    hs = [Home(s, "geminid", port), Home(s, "direct", port)]
    failed = s.failed
    try:
        check(s, "geminid's home: its daemon, `gemctl mcp import`", hs[0].start)
        if s.failed > failed:
            return
        for h in hs:
            want = want_servers(h)
            check(s, f"{h.kind}: 3 ACP sessions in 2 workspaces, each with all 5 servers' tools, "
                  f"run {want} server processes", lambda h=h: three_sessions(h, log))
        for h in hs:
            check(s, f"{h.kind}: the editor is asked through session/request_permission; "
                  "allowed, the call reaches the server and its answer the editor; rejected, "
                  "nothing runs", lambda h=h: permission(h, log))
        check(s, "geminid: the editor and its agent killed with a session open, the gateways "
              "end, geminid's five servers stay and serve the next editor",
              lambda: editor_killed(hs[0], log))
        if rounds:
            rows = {}
            floor = Home(s, "none", port)
            hs.append(floor)
            check(s, f"session/new timed, {rounds} rounds interleaved",
                  lambda: rows.update(timing(hs, log, rounds)))
            if rows:
                print("        | home | initialize | first session/new | a further one |")
                for kind, r in rows.items():
                    print(f"        | {kind} | {med(r['initialize'])} | {med(r['first'])} | "
                          f"{med(r['further'])} |", flush=True)
    finally:
        for h in hs:
            h.stop()
        mock.terminate()
        mock.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        if s.failed == failed:
            for h in hs:
                shutil.rmtree(h.tmp, ignore_errors=True)
        else:
            print(f"  homes kept: {[h.tmp for h in hs]}", flush=True)


def check(s, name, fn):
    try:
        fn()
        s.passed += 1
        print(f"ok      acp: {name}", flush=True)
    except Exception as e:  # noqa: BLE001
        s.failed += 1
        print(f"FAILED  acp: {name}: {e}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--bin", help="the binaries' folder (default: ROOT/target/debug)")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (0: none)")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    s = argparse.Namespace(root=root, cache=os.path.abspath(a.cache), passed=0, failed=0,
                           bin=os.path.abspath(a.bin or os.path.join(root, "target", "debug")))
    started = time.time()
    run(s, a.rounds)
    print(f"acp took {time.time() - started:.1f} s", flush=True)
    print(f"{s.passed} passed, {s.failed} failed", flush=True)
    sys.exit(1 if s.failed else 0)


if __name__ == "__main__":
    main()
