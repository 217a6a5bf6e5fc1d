#!/usr/bin/env python3
"""Kept warm (issue 45), measured side by side in one run: how long `gemini -p` takes to reach
its first model request with five real MCP servers (everything, filesystem, two memory servers
from npm, time from PyPI), through geminid's gateway (`gemctl mcp serve`) in the situations a
user meets, against the same servers configured directly and against no server at all.

Rows, interleaved round by round (the machine is noisy: compare within the run), each after
2 s of quiet (a row run right after a daemon's restart shares the machine with the servers it
starts):
  floor          no MCP server: Gemini CLI alone
  direct         the five in ~/.gemini/settings.json (Gemini CLI starts them every run)
  pause, 60s     gateway, the servers stopped after the previous session (geminid's old 60 s
                 linger, scaled: --mcp-linger 1s and a 2 s pause)
  pause, kept    gateway, default flags, the same pause (the servers are kept warm)
  restart, now   gateway, the daemon restarted (default flags) just before; Gemini CLI starts
                 as soon as the socket answers, while the daemon warms the workspace's servers
  restart, 5 s   the same, Gemini CLI 5 s after the restart (a login, then a terminal)
  restart, off   the daemon restarted with --mcp-warm-workspaces 0 (what a restart cost before)
Each row also reports its idle servers' memory where it has some.

Usage: python3 tests/interop/warm_bench.py [--rounds N] [--bin DIR]
Needs the packages tests/interop/run.sh installs in .cache/interop; DIR defaults to
target/release (build it with `cargo build --release --workspace`).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemini_cli  # noqa: E402
import homes  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, ".cache", "interop")


def servers(tmp):
    node_bin = os.path.join(CACHE, "node_modules", ".bin")
    files = os.path.join(tmp, "files")
    os.makedirs(files, exist_ok=True)
    memory = os.path.join(node_bin, "mcp-server-memory")
    return {
        "everything": {"command": os.path.join(node_bin, "mcp-server-everything"), "trust": True},
        "files": {"command": os.path.join(node_bin, "mcp-server-filesystem"), "args": [files],
                  "trust": True},
        "memory": {"command": memory, "env": {"MEMORY_FILE_PATH": os.path.join(tmp, "m1.json")},
                   "trust": True},
        "notes": {"command": memory, "env": {"MEMORY_FILE_PATH": os.path.join(tmp, "m2.json")},
                  "trust": True},
        "time": {"command": os.path.join(CACHE, "venv", "bin", "mcp-server-time"), "trust": True},
    }


class Home:
    """A user's home: its settings, its own geminid (when it has one)."""

    def __init__(self, bin_dir, port, kind):
        self.bin = bin_dir
        self.port = port
        self.tmp = tempfile.mkdtemp(prefix=f"geminid-warm-{kind}-")
        self.home = os.path.join(self.tmp, "home")
        self.ws = os.path.join(self.tmp, "ws")
        homes.make(self.tmp)
        os.makedirs(self.ws, exist_ok=True)
        self.daemon = None
        self.answered = None
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        if kind == "direct":
            settings["mcpServers"] = servers(self.tmp)
        elif kind == "gateway":
            gemctl = os.path.join(bin_dir, "gemctl")
            settings["mcpServers"] = {"geminid": {"command": gemctl, "args": ["mcp", "serve"],
                                                 "trust": True}}
            own = os.path.join(self.home, ".gemini", "geminid")
            os.makedirs(own, exist_ok=True)
            with open(os.path.join(own, "servers.json"), "w") as f:
                json.dump({"mcpServers": servers(self.tmp)}, f, indent=2)
        with open(os.path.join(self.home, ".gemini", "settings.json"), "w") as f:
            json.dump(settings, f, indent=2)

    def env(self):
        return homes.env(self.tmp, self.bin, GEMINI_CLI_NO_RELAUNCH="true",
                         GEMINI_API_KEY="bench-fake-key",
                         GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{self.port}")

    def gemctl(self, *args):
        p = subprocess.run([os.path.join(self.bin, "gemctl"), *args], env=self.env(), cwd=self.ws,
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def start(self, *flags):
        """Start its daemon; how long until the socket's first answer."""
        began = time.time()
        log = open(os.path.join(self.tmp, "geminid.log"), "a")
        self.daemon = subprocess.Popen([os.path.join(self.bin, "geminid"), *flags],
                                       env=self.env(), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + 30
        while self.gemctl("--no-autostart", "status")[0] != 0:
            if time.time() > deadline:
                raise RuntimeError("geminid did not start")
            time.sleep(0.01)
        self.answered = time.time() - began
        return self.answered

    def stop(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            self.daemon.wait(timeout=30)
        self.daemon = None

    def idle_memory(self):
        code, out = self.gemctl("--no-autostart", "mcp", "list", "--all", "--json")
        if code != 0:
            return None
        try:
            listed = json.loads(out)
        except ValueError:
            return None
        items = listed if isinstance(listed, list) else listed.get("servers", [])
        idle = [s for s in items if s.get("idleSecs") is not None]
        return len(idle), sum(s.get("rssBytes", 0) for s in idle)

    def close(self):
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def start_mock(kind, plan):
    """The loopback mock model with `plan`, in a new temporary folder: (folder, its request
    log, the process, its port)."""
    tmp = tempfile.mkdtemp(prefix=f"geminid-{kind}-mock-")
    log, port_file = os.path.join(tmp, "model.jsonl"), os.path.join(tmp, "port")
    with open(log + ".plan", "w") as f:
        json.dump(plan, f)
    mock = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "interop",
                                                          "mock_gemini.py"), port_file, log])
    while not os.path.exists(port_file):
        time.sleep(0.05)
    return tmp, log, mock, int(open(port_file).read())


def first_request(h, log):
    """Seconds from launching `gemini -p` to its first model request, and the MCP functions
    it declared."""
    start_at = os.path.getsize(log) if os.path.exists(log) else 0
    argv = [os.path.join(CACHE, "clients", "node_modules", ".bin", "gemini"), "-p", "hi",
            "-m", "gemini-2.5-flash"]
    launched = time.time()
    code, out = gemini_cli.run(argv, h.env(), h.ws, 180)
    if code != 0:
        raise RuntimeError(f"gemini exited {code}: {out[-1500:]}")
    with open(log) as f:
        f.seek(start_at)
        for line in f:
            r = json.loads(line)
            if ":streamGenerateContent" in r["path"]:
                declared = [d["name"] for t in r["body"].get("tools") or []
                            for d in t.get("functionDeclarations") or []
                            if d.get("name", "").startswith("mcp_")]
                return r["t"] - launched, len(declared)
    raise RuntimeError("no model request")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release"))
    a = ap.parse_args()
    tmp, log, mock, port = start_mock("warm", {"suffix": "_none", "args": {}})
    floor, direct = Home(a.bin, port, "none"), Home(a.bin, port, "direct")
    old, kept = Home(a.bin, port, "gateway"), Home(a.bin, port, "gateway")
    rows = {k: [] for k in ("floor", "direct", "pause, 60s", "pause, kept", "restart, now",
                            "restart, 5 s", "restart, off")}
    declared, memory, answered = {}, {}, {k: [] for k in rows}
    try:
        old.start("--mcp-linger", "1s")
        kept.start()
        # Warm-up: npm's and Python's caches, and one session in each gateway home.
        for h in (floor, direct, old, kept):
            first_request(h, log)
        for n in range(a.rounds):
            for name, h, before in (
                ("floor", floor, lambda: time.sleep(2)),
                ("direct", direct, lambda: time.sleep(2)),
                ("pause, 60s", old, lambda: time.sleep(2)),
                ("pause, kept", kept, lambda: time.sleep(2)),
                ("restart, now", kept, lambda: (kept.stop(), kept.start())),
                ("restart, 5 s", kept, lambda: (kept.stop(), kept.start(), time.sleep(5))),
                ("restart, off", kept, lambda: (kept.stop(),
                                                kept.start("--mcp-warm-workspaces", "0"))),
            ):
                if before:
                    before()
                    if name.startswith("pause"):
                        memory[name] = h.idle_memory()
                    elif name.startswith("restart"):
                        answered[name].append(kept.answered)
                secs, mcp = first_request(h, log)
                rows[name].append(secs)
                declared[name] = mcp
                print(f"round {n + 1} {name:<13} {secs * 1000:7.0f} ms  ({mcp} MCP functions)",
                      file=sys.stderr, flush=True)
            # Back to default flags, and one session (untimed) to remember the workspace again:
            # `--mcp-warm-workspaces 0` forgot it.
            kept.stop()
            kept.start()
            first_request(kept, log)
    finally:
        for h in (floor, direct, old, kept):
            h.close()
        mock.terminate()
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(rows["floor"])
    print(f"\n`gemini -p` to its first model request, {a.rounds} rounds, medians "
          f"(min-max); ratio to the floor")
    print("| row | time | × floor | MCP functions declared | idle servers before | daemon's first answer after its start |")
    print("|---|---|---|---|---|---|")
    for name, xs in rows.items():
        med = statistics.median(xs)
        mem = memory.get(name)
        idle = f"{mem[0]}, {mem[1] / (1 << 20):.0f} MiB" if mem else "-"
        first = answered[name]
        first = f"{statistics.median(first) * 1000:.0f} ms" if first else "-"
        print(f"| {name} | {med * 1000:.0f} ms ({min(xs) * 1000:.0f}-{max(xs) * 1000:.0f}) | "
              f"{med / base:.2f}× | {declared.get(name, 0)} | {idle} | {first} |")


if __name__ == "__main__":
    main()
