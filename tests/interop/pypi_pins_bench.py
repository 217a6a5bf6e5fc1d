#!/usr/bin/env python3
"""The cost of artifact pinning on an unchanged uvx server's start (issue 72; BENCHMARKS.md).

One daemon, two servers running the same fixture package from a loopback PEP 503 index
(pypi_pins.py's), one with `artifactPinning: enforce` and one with `off`, each restarted N times,
interleaved. Prints the medians from the daemon's "restart requested" to the spawn ("started")
and to "connected over stdio" in each server's log, and how often the index page was asked for.
Not part of the suite (it times, it does not check). After `cargo build --workspace --bins` and
`tests/interop/run.sh --install-only`:
    python3 tests/interop/pypi_pins_bench.py --root . --cache .cache/interop --restarts 20
"""

import argparse
import os
import shutil
import statistics
import sys
from datetime import datetime


def medians(log):
    spawn, connected, asked, started = [], [], None, None
    for line in log.splitlines():
        try:
            t = datetime.fromisoformat(line.split(" ")[0].replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        if "restart requested" in line:
            asked = t
        elif "[geminid] started" in line and asked:
            spawn.append((t - asked) * 1000)
            started = asked
        elif "connected over stdio" in line and started:
            connected.append((t - started) * 1000)
            asked = started = None
    return len(spawn), statistics.median(spawn), statistics.median(connected)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--restarts", type=int, default=20)
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import checks
    import pypi_pins
    root, cache = os.path.abspath(a.root), os.path.abspath(a.cache)
    tools = os.path.join(cache, "pytools", "bin")
    own = checks.Suite(root, cache)
    index = pypi_pins.Index(own.tmp)
    index.publish(os.path.join(root, "target", "debug", "mcp-fixture"), "1.0.0", "v100", 1)
    os.makedirs(os.path.join(own.tmp, "markers"))
    servers = pypi_pins.Servers(own)
    for mode in ("enforce", "off"):
        servers.own[mode] = {
            "command": os.path.join(tools, "uvx"), "args": [pypi_pins.NAME],
            "artifactPinning": mode,
            "env": {"UV_DEFAULT_INDEX": index.url, "UV_PYTHON_DOWNLOADS": "never",
                    "UV_CACHE_DIR": os.path.join(own.tmp, f"uv-cache-{mode}"),
                    "MARKERS": os.path.join(own.tmp, "markers"),
                    "PATH": f"{tools}:{os.environ['PATH']}"}}
    servers.write()
    try:
        own.start_daemon()
        own.gemctl("mcp", "start", check=False)
        for mode in ("enforce", "off"):
            servers.reaches(mode, "connected")
        for _ in range(a.restarts):
            for mode in ("enforce", "off"):
                servers.restart(mode)
                servers.reaches(mode, "connected")
        for mode in ("enforce", "off"):
            _, log, _ = own.gemctl("mcp", "logs", mode, "-n", "5000")
            n, spawn, connected = medians(log)
            print(f"{mode}: {n} restarts, median restart->spawn {spawn:.1f} ms, "
                  f"restart->connected {connected:.1f} ms", flush=True)
        print(f"the index page was asked for {index.pages_asked()} times in all "
              "(the first starts included)", flush=True)
        with open("/proc/loadavg") as f:
            print(f"load average: {f.read().split()[0]}", flush=True)
    finally:
        own.stop_daemon()
        index.stop()
        shutil.rmtree(own.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
