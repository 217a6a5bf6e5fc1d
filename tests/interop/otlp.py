#!/usr/bin/env python3
"""OpenTelemetry export checked against the MCP semantic conventions by a receiver built on
the official protobufs (PyPI `opentelemetry-proto`, pinned in run.sh; otlp_receiver.py, run by
the interop venv's Python, decodes each ExportTraceServiceRequest and
ExportMetricsServiceRequest): a daemon of the check's own exports to it over OTLP/HTTP, as
Gemini CLI's `telemetry` settings say, while a raw JSON-RPC client calls the fixture's echo
through `gemctl mcp serve` with a `traceparent` in `params._meta`. Checked: span names, kinds,
attributes and parent links (the gateway's SERVER span a child of the client's context; the
policy and hook spans and the CLIENT span to the server its children; the server's own
`_meta` carrying the CLIENT span's context), a server's start as a trace of its own, and the
four duration histograms' bucket boundaries.

Attribute names as the conventions have them (semantic-conventions-genai, docs/gen-ai/mcp.md,
model/mcp/spans.yaml): mcp.method.name, gen_ai.tool.name, gen_ai.operation.name,
jsonrpc.request.id, mcp.session.id, mcp.protocol.version, network.transport, error.type.

Without the venv's `opentelemetry-proto` (run.sh installs it) the check says SKIPPED.
Alone: python3 tests/interop/otlp.py --root . --cache .cache/interop
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

import homes

TRACE = "5bf92f3577b34da6a3ce929d0e0e4737"
PARENT = "10f067aa0ba902b8"
BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
HISTOGRAMS = ["mcp.server.operation.duration", "mcp.client.operation.duration",
              "mcp.server.session.duration", "mcp.client.session.duration"]


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def until(what, fn, timeout=30.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.1)  # Poll: the exporter's batch (1 s) lands in the receiver's file.
    raise AssertionError(f"{what}: nothing within {timeout:.0f} s (last: {last})")


class Own:
    """The check's own receiver, daemon and gateway client."""

    def __init__(self, s):
        self.s = s
        self.tmp = tempfile.mkdtemp(prefix="geminid-otlp-")
        homes.make(self.tmp)
        self.ws = os.path.join(self.tmp, "ws")
        os.makedirs(self.ws)
        self.env = homes.env(self.tmp, s.bin)
        self.out = os.path.join(self.tmp, "received.jsonl")
        self.meta_log = os.path.join(self.tmp, "meta.jsonl")
        self.children = []
        self.gateway = None

    def start(self, python):
        port_file = os.path.join(self.tmp, "port")
        here = os.path.dirname(os.path.abspath(__file__))
        self.children.append(subprocess.Popen(
            [python, os.path.join(here, "otlp_receiver.py"), "--port-file", port_file,
             "--out", self.out], stdin=subprocess.DEVNULL))
        port = until("the receiver's port", lambda: os.path.exists(port_file)
                     and open(port_file).read().strip())
        gemini = os.path.join(self.tmp, "home", ".gemini")
        settings = {
            "mcpServers": {"fx": {"command": os.path.join(self.s.bin, "mcp-fixture"),
                                  "env": {"FIXTURE_META_LOG": self.meta_log}}},
            "hooks": {"BeforeTool": [{"matcher": "mcp_fx_echo",
                                      "hooks": [{"type": "command", "command": "true"}]}]},
            "telemetry": {"enabled": True, "otlpEndpoint": f"http://127.0.0.1:{port}",
                          "otlpProtocol": "http"},
        }
        with open(os.path.join(gemini, "settings.json"), "w") as f:
            json.dump(settings, f)
        os.makedirs(os.path.join(gemini, "policies"))
        with open(os.path.join(gemini, "policies", "allow.toml"), "w") as f:
            f.write('[[rule]]\ntoolName = "*"\nmcpName = "fx"\ndecision = "allow"\npriority = 1\n')
        log = open(os.path.join(self.tmp, "geminid.log"), "w")
        self.children.append(subprocess.Popen(
            [os.path.join(self.s.bin, "geminid")], env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=log))
        until("geminid's status", lambda: subprocess.run(
            [os.path.join(self.s.bin, "gemctl"), "--no-autostart", "status"], env=self.env,
            cwd=self.ws, capture_output=True).returncode == 0)
        self.gateway = subprocess.Popen(
            [os.path.join(self.s.bin, "gemctl"), "mcp", "serve"], env=self.env, cwd=self.ws,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.children.append(self.gateway)
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "otlp-check", "version": "1"}})
        self.notify("notifications/initialized")

    def notify(self, method):
        self.gateway.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.gateway.stdin.flush()

    def rpc(self, method, params, _ids=iter(range(1, 1 << 30))):
        n = next(_ids)
        self.gateway.stdin.write(json.dumps(
            {"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + "\n")
        self.gateway.stdin.flush()
        while True:
            line = self.gateway.stdout.readline()
            if not line:
                raise AssertionError(f"{method}: the gateway closed")
            msg = json.loads(line)
            if msg.get("id") == n and ("result" in msg or "error" in msg):
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg["result"]

    def received(self):
        if not os.path.exists(self.out):
            return []
        with open(self.out) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        for child in reversed(self.children):
            if child.poll() is None:
                child.terminate()
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def run(s):
    python = os.path.join(s.cache, "venv", "bin", "python")
    has = subprocess.run([python, "-c", "import opentelemetry.proto.collector.trace.v1"],
                         capture_output=True)
    if has.returncode != 0:
        print("SKIPPED otlp: the interop venv has no opentelemetry-proto (tests/interop/run.sh "
              "installs it)", flush=True)
        return
    own = Own(s)
    try:
        checks(s, own, python)
    finally:
        own.stop()
        if not s.failed:
            shutil.rmtree(own.tmp, ignore_errors=True)


def checks(s, own, python):
    def called():
        own.start(python)
        r = own.rpc("tools/call", {"name": "fx__echo", "arguments": {"text": "traced"},
                                   "_meta": {"traceparent": f"00-{TRACE}-{PARENT}-01",
                                             "baggage": "user=ada"}})
        expect(not r.get("isError"), f"{r}")

    s.check("otlp", "geminid exports to an OTLP receiver on the official protobufs; a call with "
            "a traceparent in _meta", called)

    def by_name(name):
        return [x for x in own.received() if x.get("span") == name]

    def trace():
        until("the call's spans", lambda: all(by_name(n) for n in
                                              ("tools/call fx__echo", "tools/call echo", "policy", "hook")))
        errors = [x for x in own.received() if "error" in x]
        expect(not errors, f"undecodable exports: {errors}")
        server = by_name("tools/call fx__echo")[0]
        expect(server["kind"] == "SPAN_KIND_SERVER", f"{server}")
        expect((server["trace"], server["parent"]) == (TRACE, PARENT), f"the client's _meta: {server}")
        a = server["attributes"]
        want = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "fx__echo",
                "gen_ai.operation.name": "execute_tool", "network.transport": "pipe",
                "mcp.protocol.version": "2025-06-18"}
        wrong = {k: a.get(k) for k, v in want.items() if a.get(k) != v}
        expect(not wrong, f"attributes {wrong} in {a}")
        expect(a.get("jsonrpc.request.id") and a.get("mcp.session.id"), f"{a}")
        expect("error.type" not in a and server["status"] != "STATUS_CODE_ERROR", f"{server}")
        expect(server["service"] == "geminid", f"service.name {server['service']}")
        client = by_name("tools/call echo")[0]
        expect(client["kind"] == "SPAN_KIND_CLIENT", f"{client}")
        expect((client["trace"], client["parent"]) == (TRACE, server["id"]), f"{client}")
        expect(client["attributes"].get("mcp.server.name") == "fx", f"{client}")
        for name in ("policy", "hook"):
            child = by_name(name)[0]
            expect((child["trace"], child["parent"]) == (TRACE, server["id"]), f"{name}: {child}")
            expect(child["kind"] == "SPAN_KIND_INTERNAL", f"{child}")
        with open(own.meta_log) as f:
            meta = json.loads(f.read().splitlines()[-1])["meta"]
        expect(meta.get("traceparent") == f"00-{TRACE}-{client['id']}-01",
               f"the server's _meta carries the CLIENT span: {meta}")
        expect(meta.get("baggage") == "user=ada", f"baggage: {meta}")

    s.check("otlp", "SERVER span from the client's _meta; policy, hook and CLIENT children; the "
            "server's _meta", trace)

    def start():
        spans = until("start fx", lambda: by_name("start fx"))
        a = spans[0]["attributes"]
        expect(spans[0]["parent"] == "" and spans[0]["kind"] == "SPAN_KIND_INTERNAL", f"{spans}")
        expect(a.get("mcp.server.name") == "fx" and a.get("network.transport") == "pipe", f"{a}")
        expect(a.get("geminid.mcp.server.start.outcome") == "connected", f"{a}")

    s.check("otlp", "a server's start is a trace of its own", start)

    def histograms():
        own.gateway.stdin.close()
        own.gateway.wait(timeout=15)
        # The daemon's end sends what it holds (the sessions' durations among it).
        daemon = own.children[1]
        daemon.terminate()
        daemon.wait(timeout=30)
        points = [x for x in own.received() if x.get("type") == "histogram"]
        seen = {p["metric"] for p in points}
        expect(set(HISTOGRAMS) <= seen, f"histograms {sorted(seen)}")
        for p in points:
            if p["metric"] in HISTOGRAMS:
                expect(p["bounds"] == BUCKETS, f"{p['metric']} bounds {p['bounds']}")
                expect(p["unit"] == "s", f"{p['metric']} unit {p['unit']}")
        served = [p for p in points if p["metric"] == "mcp.server.operation.duration"]
        expect(any(p["attributes"].get("gen_ai.tool.name") == "fx__echo" and p["count"] >= 1
                   for p in served), f"{served}")

    s.check("otlp", "the four duration histograms with the conventions' buckets", histograms)


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
