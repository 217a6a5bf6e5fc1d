#!/usr/bin/env python3
"""The whole picture (issue 69, item 4): the same five MCP servers (acp.py's: the fixture twice,
two memory servers from npm, the time server from PyPI) given to Gemini CLI 0.61, Claude Code
and Codex CLI (agents.sh's pinned versions) and an editor's three ACP threads, in two homes:
  direct    each client's own file holds the five servers; each client starts them itself
  geminid   `gemctl clients connect claude-code`, `... codex` and `gemctl mcp import` (Gemini
            CLI), as a user runs them: every client reaches geminid's five through the gateway
Each round, one home after the other (interleaved; round 0 warms the caches and is not counted):
- Gemini CLI: a `gemini --acp` with the mock model (mock_gemini.py) and one session, held open
  (`initialize` and `session/new` timed): a user's Gemini CLI with its servers connected;
- the editor: another `gemini --acp` under acp_editor.mjs (the ACP TypeScript SDK) with three
  sessions in two workspaces, held open (each `session/new` timed);
- Claude Code: `claude mcp list` (it starts and checks every server, then exits; no login
  needed), timed, with the server processes sampled while it runs: the longer-running modes
  of Claude Code need a model login, so its servers are counted at that peak only;
- Codex CLI: `codex mcp list` (timed; it reads the servers but starts none: Codex starts them
  only for a conversation, which needs a model: not run, so Codex adds no server process to
  either home's count, and its start-up time is the listing's);
then, with both `gemini --acp` open and at the peak of Claude Code's check, the server processes
counted from /proc (the environment of the home) and their resident memory summed (a server's
children with it), with geminid's daemon and its gateway processes (`gemctl mcp serve`) added on
geminid's side.

Not part of checks.py (CI time). Run alone, the debug binaries built and run.sh --install-only
(and agents.sh --install-only) done:
    python3 tests/interop/picture.py --root . --cache .cache/interop [--rounds 3]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import acp  # noqa: E402
from many_clients import expect  # noqa: E402
from warm_bench import start_mock  # noqa: E402

# A busy machine's Gemini CLI took over acp.py's 120 s to initialize once: wait longer here.
acp.TURN = 300.0


class Side(acp.Home):
    """acp.py's home, with Claude Code's and Codex CLI's files holding the same five servers."""

    def __init__(self, s, kind, port):
        super().__init__(s, kind, port)
        self.agents = os.path.join(s.cache, "agents", "node_modules", ".bin")
        self.parents = {}
        home = os.path.join(self.tmp, "home")
        with open(os.path.join(home, ".gemini", "settings.json")) as f:
            servers = json.load(f)["mcpServers"]
        # Each client's own form of the same entries (no `trust`: Gemini CLI's own key).
        plain = {n: {k: v for k, v in e.items() if k != "trust"} for n, e in servers.items()}
        claude = {n: dict({"type": "stdio", "args": []}, **e) for n, e in plain.items()}
        trusted = {w: {"hasTrustDialogAccepted": True} for w in self.ws}
        with open(os.path.join(home, ".claude.json"), "w") as f:
            json.dump({"numStartups": 1, "mcpServers": claude, "projects": trusted}, f, indent=2)
        toml = []
        for n, e in plain.items():
            toml.append(f"[mcp_servers.{n}]\ncommand = {json.dumps(e['command'])}\nargs = []\n")
            if e.get("env"):
                toml.append(f"[mcp_servers.{n}.env]\n" + "".join(
                    f"{k} = {json.dumps(v)}\n" for k, v in e["env"].items()))
        os.makedirs(os.path.join(home, ".codex"))
        with open(os.path.join(home, ".codex", "config.toml"), "w") as f:
            f.write("\n".join(toml))

    def env(self):
        e = super().env()
        e.update(DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1",
                 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                 CODEX_HOME=os.path.join(self.tmp, "home", ".codex"))
        return e

    def start(self):
        """geminid's home: the daemon, then each client connected as a user does it (Claude
        Code's and Codex's first: `mcp import` gives Gemini CLI every server geminid has)."""
        if self.kind != "geminid":
            return
        log = open(self.log_path, "a")
        self.daemon = subprocess.Popen(
            [os.path.join(self.s.bin, "geminid")], env=dict(self.env(), RUST_LOG="info"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + acp.START_TIMEOUT
        while subprocess.run([self.gemctl_bin, "--no-autostart", "status"], env=self.env(),
                             capture_output=True).returncode != 0:
            expect(time.monotonic() < deadline, "geminid did not start")
            time.sleep(0.05)  # Poll: the daemon's socket has no event to wait on from here.
        for client in ("claude-code", "codex"):
            self.gemctl("clients", "connect", client, "--command", self.gemctl_bin)
        self.gemctl("mcp", "import", "--command", self.gemctl_bin)
        out = json.loads(self.gemctl("--json", "clients", "list"))
        for row in out:
            if row["client"] in ("gemini", "claude-code", "codex"):
                expect(sorted(row["throughGeminid"]) == sorted(acp.SERVERS)
                       and not row["startsItself"], f"not connected: {row}")

    def agent(self, name, *args):
        """A client's command, timed: (milliseconds, output)."""
        t = time.monotonic()
        p = subprocess.run([os.path.join(self.agents, name), *args], env=self.env(),
                           cwd=self.ws[0], capture_output=True, text=True, timeout=180,
                           stdin=subprocess.DEVNULL)
        ms = (time.monotonic() - t) * 1000
        expect(p.returncode == 0, f"{name} {' '.join(args)}: {p.stdout}{p.stderr}")
        return ms, p.stdout

    def costs(self):
        """(server processes, their RSS in MiB with geminid's daemon and gateways)."""
        found = self.servers()
        if self.daemon:
            # Which process started each server: geminid, or a client itself.
            for p in found:
                self.parents.setdefault(p, acp.parent(p) == self.daemon.pid)
        pids = set(found)
        extra = set()
        if self.daemon:
            extra.add(self.daemon.pid)
            extra.update(gateways(self.tmp))
        return len(found), sum(rss_tree(p) for p in pids | extra) / 1024


def gateways(tmp):
    """The `gemctl mcp serve` processes of a home."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if tmp.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if os.path.basename(argv[0]) == b"gemctl" and b"serve" in argv:
            out.append(int(pid))
    return out


def rss_tree(pid):
    """Resident KiB of a process and its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def sampled(h, fn):
    """Run fn while sampling the home's costs: (fn's result, the peak count, the peak MiB)."""
    peak = [0, 0.0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            n, mib = h.costs()
            peak[0], peak[1] = max(peak[0], n), max(peak[1], mib)
            done.wait(0.05)  # Poll: a sample every 50 ms while the client runs.

    t = threading.Thread(target=watch)
    t.start()
    try:
        r = fn()
    finally:
        done.set()
        t.join()
    n, mib = h.costs()
    return r, max(peak[0], n), max(peak[1], mib)


def one_round(h):
    row = {}
    gem, init = h.editor()
    editor = None
    try:
        row["gemini initialize"] = init["ms"]
        row["gemini session/new"] = acp.new_session(h, gem, h.ws[0])["ms"]
        editor, init = h.editor()
        row["editor initialize"] = init["ms"]
        news = [acp.new_session(h, editor, w)["ms"] for w in (h.ws[0], h.ws[0], h.ws[1])]
        row["editor 3x session/new"] = sum(news)
        row["held servers"], row["held MiB"] = h.costs()
        (ms, out), row["peak servers"], row["peak MiB"] = sampled(
            h, lambda: h.agent("claude", "mcp", "list"))
        connected = sum(1 for l in out.splitlines() if "Connected" in l)
        expect(connected == 5, f"claude mcp list: {out}")
        row["claude mcp list"] = ms
        ms, out = h.agent("codex", "mcp", "list", "--json")
        expect(len(json.loads(out)) == 5, f"codex mcp list: {out}")
        row["codex mcp list"] = ms
    finally:
        if editor:
            acp.end(h, editor)
        acp.end(h, gem)
    if h.daemon:
        row["servers not geminid's"] = sum(1 for by in h.parents.values() if not by)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--bin", help="the binaries' folder (default: ROOT/target/debug)")
    ap.add_argument("--rounds", type=int, default=3, help="counted rounds")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    s = argparse.Namespace(root=root, cache=os.path.abspath(a.cache), passed=0, failed=0,
                           bin=os.path.abspath(a.bin or os.path.join(root, "target", "debug")))
    print(f"load average at the start: {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    tmp, log, mock, port = start_mock("picture", {"suffix": "_none", "args": {}})
    sides = [Side(s, "geminid", port), Side(s, "direct", port)]
    rows = {h.kind: [] for h in sides}
    ok = False
    try:
        sides[0].start()
        for n in range(a.rounds + 1):
            for h in sides:
                r = one_round(h)
                print(f"round {n} {h.kind:<8} " + ", ".join(
                    f"{k} {v:.0f}" for k, v in r.items()), flush=True)
                if n:
                    rows[h.kind].append(r)
        ok = True
    finally:
        for h in sides:
            h.stop()
        mock.terminate()
        mock.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        for h in sides:
            if ok:
                shutil.rmtree(h.tmp, ignore_errors=True)
            else:
                print(f"home kept: {h.tmp}", flush=True)
    print(f"load average at the end: {os.getloadavg()}", flush=True)
    if not rows["direct"]:
        return
    keys = list(rows["geminid"][0])
    print("| | " + " | ".join(h.kind for h in sides) + " |")
    print("|---|" + "---|" * len(sides))
    for k in keys:
        unit = "" if "servers" in k else (" MiB" if "MiB" in k else " ms")
        cells = []
        for h in sides:
            xs = [r[k] for r in rows[h.kind] if k in r]
            if not xs:
                cells.append("-")
                continue
            cells.append(f"{statistics.median(xs):.0f}{unit} ({min(xs):.0f}-{max(xs):.0f})")
        print(f"| {k} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
