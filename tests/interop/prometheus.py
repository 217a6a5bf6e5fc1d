#!/usr/bin/env python3
"""A real Prometheus (Debian's `prometheus`, installed by .ci/debian-packages.sh) scrapes a
geminid's `/metrics` (`--metrics-listen`) on loopback while the everything server's echo is
called through it; Prometheus' query API (`/api/v1/query`) must then return the MCP operation
histograms with the conventions' labels and buckets, and the daemon's gauges.

The daemon is one of this check's own, in a home of its own, so the suite's other checks see
nothing of it. Without the `prometheus` command the check says SKIPPED.

Alone: python3 tests/interop/prometheus.py --root . --cache .cache/interop
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import homes

BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, float("inf")]


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def query(port, q):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise AssertionError(f"{q}: {body}")
    return body["data"]["result"]


def until(what, fn, timeout=60.0):
    """fn() until it returns something truthy (Prometheus scrapes each second)."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
            if last:
                return last
        except OSError as e:
            last = e
        time.sleep(0.25)  # Poll: Prometheus' next scrape.
    raise AssertionError(f"{what}: nothing within {timeout:.0f} s (last: {last})")


class Own:
    """The check's own daemon and Prometheus."""

    def __init__(self, s):
        self.s = s
        self.tmp = tempfile.mkdtemp(prefix="geminid-prom-")
        homes.make(self.tmp)
        self.ws = os.path.join(self.tmp, "ws")
        os.makedirs(self.ws)
        self.env = homes.env(self.tmp, s.bin)
        self.metrics = free_port()
        self.web = free_port()
        self.children = []

    def start(self, prometheus):
        node_bin = os.path.join(self.s.cache, "node_modules", ".bin")
        settings = {"mcpServers": {"everything": {
            "command": os.path.join(node_bin, "mcp-server-everything"), "timeout": 20000}}}
        with open(os.path.join(self.tmp, "home", ".gemini", "settings.json"), "w") as f:
            json.dump(settings, f)
        log = open(os.path.join(self.tmp, "geminid.log"), "w")
        self.children.append(subprocess.Popen(
            [os.path.join(self.s.bin, "geminid"), "--metrics-listen", f"127.0.0.1:{self.metrics}"],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log))
        until("geminid's status", lambda: self.gemctl("--no-autostart", "status").returncode == 0)
        config = os.path.join(self.tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: geminid\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{self.metrics}']\n")
        plog = open(os.path.join(self.tmp, "prometheus.log"), "w")
        self.children.append(subprocess.Popen(
            [prometheus, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(self.tmp, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{self.web}"],
            env=self.env, cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=plog, stderr=plog))

    def gemctl(self, *args):
        return subprocess.run([os.path.join(self.s.bin, "gemctl"), *args], env=self.env,
                              cwd=self.ws, capture_output=True, text=True, timeout=120)

    def stop(self):
        for child in reversed(self.children):
            child.terminate()
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def run(s):
    prometheus = shutil.which("prometheus")
    if not prometheus:
        print("SKIPPED prometheus: no `prometheus` command (.ci/debian-packages.sh installs it)",
              flush=True)
        return
    own = Own(s)
    try:
        checks(s, own, prometheus)
    finally:
        own.stop()
        if not s.failed:
            shutil.rmtree(own.tmp, ignore_errors=True)


def checks(s, own, prometheus):
    def started():
        own.start(prometheus)
        for i in range(3):
            p = own.gemctl("--json", "call", "mcp_everything_echo", json.dumps({"message": f"n{i}"}))
            if p.returncode != 0:
                raise AssertionError(f"gemctl call exited {p.returncode}: {p.stderr.strip()}")

    s.check("prometheus", "geminid --metrics-listen and Prometheus start; three calls", started)

    def client_histogram():
        q = "mcp_client_operation_duration_seconds_count"
        got = until(q, lambda: query(own.web, q))
        expect(len(got) == 1, f"one series: {got}")
        labels, value = got[0]["metric"], got[0]["value"][1]
        want = {"job": "geminid", "mcp_method_name": "tools/call", "gen_ai_tool_name": "echo",
                "gen_ai_operation_name": "execute_tool", "mcp_server_name": "everything",
                "network_transport": "pipe"}
        wrong = {k: labels.get(k) for k, v in want.items() if labels.get(k) != v}
        expect(not wrong, f"labels {wrong} in {labels}")
        expect(value == "3", f"count {value}")

    s.check("prometheus", "mcp.client.operation.duration with the conventions' labels", client_histogram)

    def buckets():
        q = 'mcp_client_operation_duration_seconds_bucket{mcp_server_name="everything"}'
        got = until(q, lambda: query(own.web, q))
        les = sorted(float(r["metric"]["le"]) for r in got)
        expect(les == BUCKETS, f"buckets {les}")
        inf = [r for r in got if r["metric"]["le"] == "+Inf"]
        expect(inf and inf[0]["value"][1] == "3", f"+Inf {inf}")

    s.check("prometheus", "the conventions' buckets, 0.01 s to 300 s", buckets)

    def server_histogram():
        q = 'mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call"}'
        got = until(q, lambda: query(own.web, q))
        tools = {r["metric"].get("gen_ai_tool_name"): r["value"][1] for r in got}
        expect(tools.get("mcp_everything_echo") == "3", f"served {tools}")

    s.check("prometheus", "mcp.server.operation.duration of the calls served", server_histogram)

    def quantile():
        q = ("histogram_quantile(0.99, sum by (le, mcp_server_name) "
             "(mcp_client_operation_duration_seconds_bucket))")
        got = until(q, lambda: query(own.web, q))
        p99 = float(got[0]["value"][1])
        expect(0 < p99 <= 300, f"p99 {p99}")

    s.check("prometheus", "histogram_quantile gives a server's p99", quantile)

    def gauges():
        q = 'geminid_mcp_servers{geminid_mcp_server_state="connected"}'
        got = until(q, lambda: query(own.web, q))
        expect(got[0]["value"][1] == "1", f"{got}")
        for q in ("geminid_asks_pending", 'geminid_mcp_definitions{geminid_definition_kind="tool"}',
                  "geminid_mcp_idle_memory_bytes"):
            expect(query(own.web, q), f"no {q}")
        up = query(own.web, 'up{job="geminid"}')
        expect(up and up[0]["value"][1] == "1", f"up {up}")

    s.check("prometheus", "the daemon's gauges, and the target is up", gauges)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    import argparse
    import sys

    import checks as suite
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cache", required=True)
    a = ap.parse_args()
    s = suite.Suite(os.path.abspath(a.root), os.path.abspath(a.cache))
    run(s)
    shutil.rmtree(s.tmp, ignore_errors=True)
    print(f"{s.passed} passed, {s.failed} failed", flush=True)
    sys.exit(1 if s.failed else 0)


if __name__ == "__main__":
    main()
