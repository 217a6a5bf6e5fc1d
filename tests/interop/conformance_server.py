#!/usr/bin/env python3
"""The MCP conformance suite's *server* scenarios against geminid's gateway, as a user would
serve one server to an automated client: a daemon in a home of its own whose servers are
tests/src/bin/conformance-server.rs (every tool, prompt and resource the scenarios call), of
the eras before 2026-07-28 (`conf`) and of 2026-07-28 (`conf26`), each revision's scenarios
run against `gemctl mcp serve --http 127.0.0.1:0 --server <its server> --confirm client`,
and, because the suite
cannot send a bearer token, authproxy.py in front of it adding the gateway's token (Host and
Origin pass unchanged, so the DNS-rebinding scenario still judges the gateway). Each
revision must fail exactly its baseline (conformance/server-<revision>.yml, each entry with its
reason). Results land in .cache/interop/conformance/server-results-<revision>/.

Usage: conformance_server.py ROOT CACHE
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import homes

ROOT, CACHE = sys.argv[1], sys.argv[2]
HERE = os.path.join(ROOT, "tests", "interop", "conformance")
BIN = os.path.join(ROOT, "target", "debug")
# revision → the server behind the gateway (one of that era: `conf26` speaks 2026-07-28 and
# asks by input_required), the suite release that covers it, and its options.
RUNS = [
    ("2025-11-25", "conf", os.path.join(CACHE, "conformance", "2025-11-25"), []),
    ("2026-07-28", "conf26", os.path.join(CACHE, "conformance", "2026-07-28"),
     ["--spec-version", "2026-07-28", "--timeout", "15000"]),
]


def wait_for(path, what, timeout=30):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)


def main():
    tmp = tempfile.mkdtemp(prefix="geminid-conformance-server-")
    home, ws = os.path.join(tmp, "home"), os.path.join(tmp, "ws")
    homes.make(tmp)
    os.makedirs(ws, exist_ok=True)
    env = homes.env(tmp, BIN)
    with open(os.path.join(home, ".gemini", "settings.json"), "w") as f:
        server = os.path.join(BIN, "conformance-server")
        json.dump({"mcpServers": {"conf": {"command": server},
                                  "conf26": {"command": server, "args": ["--modern"]}}}, f)
    gemctl = os.path.join(BIN, "gemctl")
    children = []
    status = 0
    try:
        subprocess.run([gemctl, "trust"], env=env, cwd=ws, check=True, capture_output=True)

        def gateway(name):
            """`gemctl mcp serve --http` of the server `name`, behind the token proxy: its URL."""
            gw = subprocess.Popen([gemctl, "--json", "mcp", "serve", "--http", "127.0.0.1:0",
                                   "--server", name, "--confirm", "client"],
                                  env=env, cwd=ws, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            children.append(gw)
            said = json.loads(gw.stdout.readline())
            port = int(said["url"].rsplit(":", 1)[1].split("/")[0])
            port_file = os.path.join(tmp, f"proxy-port-{name}")
            children.append(subprocess.Popen(
                [sys.executable, os.path.join(ROOT, "tests", "interop", "authproxy.py"),
                 str(port), said["tokenFile"], port_file], stdin=subprocess.DEVNULL))
            wait_for(port_file, "the token proxy")
            with open(port_file) as f:
                return f"http://127.0.0.1:{int(f.read())}/mcp"

        for rev, name, suite, options in RUNS:
            url = gateway(name)
            out = os.path.join(CACHE, "conformance", f"server-results-{rev}")
            shutil.rmtree(out, ignore_errors=True)
            log = os.path.join(CACHE, "conformance", f"server-run-{rev}.log")
            argv = [os.path.join(suite, "node_modules", ".bin", "conformance"), "server",
                    "--url", url, "--suite", "all", *options,
                    "--expected-failures", os.path.join(HERE, f"server-{rev}.yml"), "-o", out]
            with open(log, "w") as f:
                code = subprocess.run(argv, cwd=os.path.join(CACHE, "conformance"), env=os.environ,
                                      stdout=f, stderr=subprocess.STDOUT, timeout=900).returncode
            verdict = "only the expected failures" if code == 0 else f"UNEXPECTED (see {log})"
            status |= code != 0
            print(f"conformance: server scenarios of {rev} through the gateway: {verdict}",
                  flush=True)
            subprocess.run([sys.executable, os.path.join(HERE, "summary.py"), out])
    finally:
        for c in children:
            c.terminate()
        for c in children:
            try:
                c.wait(timeout=10)
            except subprocess.TimeoutExpired:
                c.kill()
        subprocess.run([gemctl, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
