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

The suite judges a tool's answer by its content, and it takes the text of a call geminid
declined (an `isError` result saying so) as the answer: `tools-call-simple-text` passed with
every call declined. So the tools the suite called (the proxy notes them) that its scenarios
expect to succeed must also have run in geminid, as its audit says: a call declined, denied
or never audited fails the run. Of 2025-11-25 that is every tool called but the one called for
its error (EXPECT_ERROR); of 2026-07-28 (an alpha whose scenarios also call tools to be
refused: tampered state, undeclared capabilities, invalid arguments) the tools-call-*
scenarios' tools (TOOLS_CALL).

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
# The tools the scenarios call for an error of the tool's own (tools-call-error).
EXPECT_ERROR = {"test_error_handling"}
# The tools of the tools-call-* scenarios that judge a successful answer's content.
TOOLS_CALL = {"test_simple_text", "test_image_content", "test_audio_content",
              "test_embedded_resource", "test_multiple_content_types", "test_tool_with_progress",
              "test_tool_with_logging", "test_sampling", "test_elicitation"}
# revision → the server behind the gateway (one of that era: `conf26` speaks 2026-07-28 and
# asks by input_required), the suite release that covers it, its options, and the tools called
# that must have run (None: every one but EXPECT_ERROR).
RUNS = [
    ("2025-11-25", "conf", os.path.join(CACHE, "conformance", "2025-11-25"), [], None),
    ("2026-07-28", "conf26", os.path.join(CACHE, "conformance", "2026-07-28"),
     ["--spec-version", "2026-07-28", "--timeout", "15000"], TOOLS_CALL),
]
# How a confirmation goes for a call that runs (AuditConfirmation, and ConfirmOutcome under
# `answered`).
CONFIRMED = {"byClient", "byCaller", "remembered"}
ALLOWED = {"once", "session", "always"}


def declined(gemctl, env, ws, server, calls_file, expect_run):
    """The tools the suite called through `server`'s gateway, expecting them to succeed
    (`expect_run`, None: all but EXPECT_ERROR), that geminid did not run, each with why (its
    audit record, or none)."""
    with open(calls_file) if os.path.exists(calls_file) else open(os.devnull) as f:
        called = {line.strip() for line in f if line.strip()}
    called = called - EXPECT_ERROR if expect_run is None else called & expect_run
    p = subprocess.run([gemctl, "--json", "audit", "-n", "1000"], env=env, cwd=ws,
                       capture_output=True, text=True, check=True)
    ran, refused = set(), {}
    for r in json.loads(p.stdout)["records"]:
        if r["server"] != server:
            continue
        tool = r["tool"].removeprefix(f"mcp_{server}_")
        confirmation = r.get("confirmation")
        confirmed = confirmation in CONFIRMED if isinstance(confirmation, str) else \
            (confirmation or {}).get("answered") in ALLOWED
        if r.get("decision") == "allow" or (r.get("decision") == "ask_user" and confirmed):
            ran.add(tool)
        else:
            refused[tool] = {k: r.get(k) for k in ("decision", "confirmation", "error")}
    return {t: refused.get(t, "no audit record: geminid never ran it") for t in called - ran}


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

        def calls_file(name):
            return os.path.join(tmp, f"calls-{name}")

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
                 str(port), said["tokenFile"], port_file, calls_file(name)],
                stdin=subprocess.DEVNULL))
            wait_for(port_file, "the token proxy")
            with open(port_file) as f:
                return f"http://127.0.0.1:{int(f.read())}/mcp"

        for rev, name, suite, options, expect_run in RUNS:
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
            refused = declined(gemctl, env, ws, name, calls_file(name), expect_run)
            if refused:
                status = 1
                verdict += "; but geminid did not run calls the scenarios expect to succeed, " \
                    "which the suite passed on their error text: " + json.dumps(refused)
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
