#!/usr/bin/env python3
"""Interop checks of several MCP clients behind one gateway (issue 65, items 1 and 2), with
clients nobody here wrote: the TypeScript SDK (ts_gw_client.mjs) that declares elicitation and
the Python SDK (gw_client.py) that declares none or never answers. What a client is shown, and
whether its call can be confirmed, depends on that client alone; a client gone without a DELETE
takes its waiting call with it.

The home is its own, with a daemon of its own and the default policy: `fx` (the fixture) is
untrusted, so each of its calls needs a confirmation; `ok` (the fixture too) is trusted. Run
from checks.py, or alone (the debug binaries built, the pinned clients installed):
    python3 tests/interop/many_clients.py --root . --cache .cache/interop
"""

import argparse
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import homes

START_TIMEOUT = 30.0
# A client's wait for an answer it should get at once (the calls time out at 30 s: old daemons
# let a call nobody could confirm hang until then).
PROMPT = 20.0
# How long a gone client's call may outlive it: about 10 s now (gateway/presence.rs's GRACE), at
# the 5-minute confirmation deadline before.
GONE = 60.0
ECHO = json.dumps({"text": "from a client"})


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


class Lines:
    """A client process whose stdout is read a JSON line at a time, each waited for."""

    def __init__(self, argv, env, cwd, stdin=subprocess.PIPE):
        self.p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                                  text=True)
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.strip())
        self.q.put(None)

    def next(self, timeout=60.0):
        """The next line that is JSON (or ASKED), waited for at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line from {self.p.args[:3]} in {timeout} s") from None
            if line is None:
                raise AssertionError(f"{self.p.args[:3]} ended (exit {self.p.wait()})")
            if line == "ASKED":
                return line
            if line.startswith("{"):
                return json.loads(line)

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def end(self, timeout=30):
        if self.p.stdin and not self.p.stdin.closed:
            self.p.stdin.close()
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError(f"{self.p.args[:3]} did not end") from None


class Home:
    """A home with a geminid of its own, the fixture untrusted in its settings."""

    def __init__(self, s):
        self.s = s
        self.tmp = tempfile.mkdtemp(prefix="geminid-many-clients-")
        homes.make(self.tmp)
        self.ws = os.path.join(self.tmp, "ws")
        os.makedirs(self.ws)
        self.calls = os.path.join(self.tmp, "calls.log")
        self.log_path = os.path.join(self.tmp, "geminid.log")
        self.gemctl_bin = os.path.join(s.bin, "gemctl")
        self.sdk = os.path.join(s.cache, "clients", "node_modules", "@modelcontextprotocol", "sdk")
        self.python = os.path.join(s.cache, "venv", "bin", "python")
        here = os.path.dirname(os.path.abspath(__file__))
        self.py_client = os.path.join(here, "gw_client.py")
        self.ts_client = os.path.join(here, "ts_gw_client.mjs")
        self.daemon = None
        self.gateways = []
        fixture = os.path.join(s.bin, "mcp-fixture")
        with open(os.path.join(self.tmp, "home", ".gemini", "settings.json"), "w") as f:
            json.dump({"mcpServers": {
                "fx": {"command": fixture, "env": {"FIXTURE_CALL_LOG": self.calls}},
                "ok": {"command": fixture, "trust": True},
            }}, f, indent=2)

    def env(self):
        return homes.env(self.tmp, self.s.bin, SDK=self.sdk)

    def gemctl(self, *args):
        p = subprocess.run([self.gemctl_bin, "--no-autostart", *args], env=self.env(), cwd=self.ws,
                           capture_output=True, text=True, timeout=60)
        expect(p.returncode == 0, f"gemctl {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p.stdout

    def start(self):
        log = open(self.log_path, "a")
        self.daemon = subprocess.Popen(
            [os.path.join(self.s.bin, "geminid")], env=dict(self.env(), RUST_LOG="info"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while subprocess.run([self.gemctl_bin, "--no-autostart", "status"], env=self.env(),
                             capture_output=True).returncode != 0:
            expect(time.monotonic() < deadline, "geminid did not start")
            time.sleep(0.05)
        started = json.loads(self.gemctl("--json", "mcp", "start"))
        expect(all(x["state"] == "connected" for x in started), f"not connected: {started}")

    def http_gateway(self):
        """`gemctl mcp serve --http` on a free port: its URL and token file."""
        p = subprocess.Popen([self.gemctl_bin, "--json", "mcp", "serve", "--http", "127.0.0.1:0"],
                             env=self.env(), cwd=self.ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, text=True)
        self.gateways.append(p)
        said = json.loads(p.stdout.readline())
        return [said["url"], said["tokenFile"]]

    def ts(self, scenario, *args, gw=None):
        """The TypeScript SDK client (declares elicitation): over stdio, or HTTP at `gw`."""
        how = ["http", *gw] if gw else ["stdio", self.gemctl_bin, "mcp", "serve"]
        return Lines(["node", self.ts_client, scenario, *args, *how], self.env(), self.ws)

    def py(self, scenario, *args):
        return Lines([self.python, self.py_client, self.gemctl_bin, scenario, *args], self.env(),
                     self.ws, stdin=subprocess.DEVNULL)

    def audit(self, n):
        return json.loads(self.gemctl("--json", "audit", "-n", str(n)))["records"]

    def echoes(self):
        """How many fx__echo calls reached fx (the fixture logs each call's tool)."""
        if not os.path.exists(self.calls):
            return 0
        with open(self.calls) as f:
            return f.read().split().count("echo")

    def stop(self):
        for p in self.gateways:
            p.terminate()
            p.wait(timeout=10)
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()


def fx_tools(tools):
    return sorted(t for t in tools if t.startswith("fx__"))


def refused_at_once(h, *gw):
    """The Python SDK client, declaring no elicitation, over stdio (or HTTP at `gw`): shown none
    of fx's tools (each needs a confirmation) but ok's, and its call to fx__echo ended at once
    saying how to allow it, unrun."""
    who, ran = "the Python SDK client", h.echoes()
    out = h.py("plain", "fx__echo", ECHO, *gw).next()
    expect(not fx_tools(out["tools"]), f"{who} was shown {fx_tools(out['tools'])}")
    expect("ok__echo" in out["tools"], f"{who} was not shown the trusted server's tools: {out}")
    expect("cannot be asked" in out.get("error", ""), f"{who}'s call: {out}")
    expect(out["seconds"] < PROMPT, f"{who}'s call took {out['seconds']} s")
    expect(h.echoes() == ran, f"{who}'s call ran")


def asked_and_ran(h, ts, who):
    """`ts`, an eliciting client holding on: asked to confirm its call, which then runs."""
    ran = h.echoes()
    ts.send(f"fx__echo {ECHO}")
    out = ts.next()
    expect(len(out["asked"]) == 1 and "echo" in out["asked"][0], f"{who} was asked: {out}")
    expect(not out["isError"] and "from a client" in out["text"], f"{who}'s call: {out}")
    expect(h.echoes() == ran + 1, f"{who}'s call did not reach fx")


def wait_gone(h, key, who):
    """The call `who` left waiting (its arguments' keys `text` and `key`: the audit keeps only
    their names) ends, cancelled, within GONE seconds, unrun."""
    gone, ran = time.monotonic(), h.echoes()
    while True:
        ended = [r for r in h.audit(10)
                 if r["tool"] == "mcp_fx_echo" and r["argKeys"] == sorted([key, "text"])]
        if ended:
            break
        expect(time.monotonic() - gone < GONE, f"{who}'s call outlived it by {GONE} s")
        time.sleep(0.2)
    expect(not ended[0]["ok"] and "cancelled" in json.dumps(ended[0].get("error")),
           f"{who}'s call: {ended[0]}")
    expect(h.echoes() == ran, f"{who}'s call ran")
    return time.monotonic() - gone


def run(s):
    h = Home(s)
    failed = s.failed
    check(s, h, "a home of its own: its daemon starts, fx and ok connect", h.start)
    if s.failed > failed:
        h.stop()
        return

    def stdio_beside_eliciting():
        ts = h.ts("hold")
        try:
            shown = ts.next()["tools"]
            expect("fx__echo" in shown, f"the TS SDK client (elicits) was not shown fx__echo: {shown}")
            refused_at_once(h)
            asked_and_ran(h, ts, "the TS SDK client")
        finally:
            ts.end()

    check(s, h, "over stdio, beside the TS SDK client that elicits, the Python SDK client that "
          "cannot is shown none of fx's tools and its call ends at once", stdio_beside_eliciting)

    def http_beside_eliciting():
        gw = h.http_gateway()
        ts = h.ts("hold", gw=gw)
        try:
            shown = ts.next()["tools"]
            expect("fx__echo" in shown, f"the TS SDK client (elicits) was not shown fx__echo: {shown}")
            refused_at_once(h, *gw)
            asked_and_ran(h, ts, "the TS SDK client")
        finally:
            ts.end()

    check(s, h, "over HTTP, the same", http_beside_eliciting)

    def http_after_gone():
        gw = h.http_gateway()
        ts = h.ts("leave", gw=gw)
        expect("fx__echo" in ts.next()["tools"], "the TS SDK client was not shown fx__echo")
        expect(ts.end() == 0, "the TS SDK client's close() failed")
        refused_at_once(h, *gw)

    check(s, h, "over HTTP, just after a TS SDK client that elicits closed without a DELETE, the "
          "Python SDK client that cannot is shown none of fx's tools and its call ends at once",
          http_after_gone)

    def ts_closed_at_the_question():
        gw = h.http_gateway()
        ts = h.ts("ask-leave", "fx__echo", json.dumps({"text": "left", "ts": "closed"}), gw=gw)
        expect("echo" in ts.next()["asked"], "the TS SDK client was not asked")
        expect(ts.end() == 0, "the TS SDK client's close() failed")
        took = wait_gone(h, "ts", "the TS SDK client")
        print(f"        (its call ended {took:.1f} s after it closed)", flush=True)

    check(s, h, "over HTTP, the TS SDK client's call is cancelled within seconds when it closes "
          "(no DELETE) while asked to confirm it", ts_closed_at_the_question)

    def py_killed_at_the_question():
        gw = h.http_gateway()
        py = h.py("hang", "fx__echo", json.dumps({"py": "killed", "text": "left"}), *gw)
        try:
            expect(py.next() == "ASKED", "the Python SDK client was not asked")
        finally:
            py.p.kill()
            py.p.wait()
        took = wait_gone(h, "py", "the killed Python SDK client")
        print(f"        (its call ended {took:.1f} s after it was killed)", flush=True)

    check(s, h, "over HTTP, the Python SDK client's call is cancelled within seconds when it is "
          "killed while asked to confirm it", py_killed_at_the_question)

    h.stop()
    time.sleep(0.5)
    left = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if h.tmp.encode() in f.read():
                    left.append(int(pid))
        except OSError:
            pass
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    check(s, h, "no process of the home is left behind",
          lambda: expect(not left, f"left behind: {left}"))
    if not s.failed:
        shutil.rmtree(h.tmp, ignore_errors=True)


def check(s, h, name, fn):
    try:
        fn()
        s.passed += 1
        print(f"ok      many clients: {name}", flush=True)
    except Exception as e:  # noqa: BLE001
        s.failed += 1
        print(f"FAILED  many clients: {name}: {e}", flush=True)
        print(f"  daemon log: {h.log_path}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--bin", help="the binaries' folder (default: ROOT/target/debug)")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    s = argparse.Namespace(root=root, cache=os.path.abspath(a.cache), passed=0, failed=0,
                           bin=os.path.abspath(a.bin or os.path.join(root, "target", "debug")))
    started = time.time()
    run(s)
    print(f"many clients took {time.time() - started:.1f} s", flush=True)
    print(f"{s.passed} passed, {s.failed} failed", flush=True)
    sys.exit(1 if s.failed else 0)


if __name__ == "__main__":
    main()
