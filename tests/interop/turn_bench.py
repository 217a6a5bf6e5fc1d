#!/usr/bin/env python3
"""A tool call inside a Gemini CLI turn (issue 39), through geminid's gateway against the same
server configured directly, measured side by side in one run.

Gemini CLI runs `gemini -p` against the loopback mock model (`mock_gemini.py`), which answers
with a call to `everything`'s `echo` until the conversation holds CALLS answers. A call's time
is what Gemini CLI spends between the model's answer naming the call and its next request
holding the result: its scheduling and policy, the MCP call, and the request's assembly, the
same work on both sides but for the MCP call's path. Rounds alternate the two homes (the
gateway's daemon kept running, its servers warm), each after a second of quiet.

Usage: python3 tests/interop/turn_bench.py [--rounds N] [--calls N] [--bin DIR]
Needs the packages tests/interop/run.sh installs in .cache/interop; DIR defaults to
target/release (build it with `cargo build --release --workspace`).
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemini_cli  # noqa: E402
from warm_bench import CACHE, ROOT, Home, start_mock  # noqa: E402


def turn(h, log, calls):
    """The milliseconds of each tool call in one `gemini -p`, in order."""
    start_at = os.path.getsize(log) if os.path.exists(log) else 0
    argv = [os.path.join(CACHE, "clients", "node_modules", ".bin", "gemini"), "-p", "echo, please",
            "-m", "gemini-2.5-flash"]
    code, out = gemini_cli.run(argv, h.env(), h.ws, 180)
    if code != 0:
        raise RuntimeError(f"gemini exited {code}: {out[-1500:]}")
    asked, took = None, []
    with open(log) as f:
        f.seek(start_at)
        for line in f:
            r = json.loads(line)
            if ":streamGenerateContent" not in r["path"]:
                continue
            last = (r["body"].get("contents") or [{}])[-1]
            if asked is not None and any("functionResponse" in p for p in last.get("parts", [])):
                took.append((r["t"] - asked) * 1000)
            asked = r["t"]
    if len(took) != calls:
        raise RuntimeError(f"{len(took)} tool calls answered, not {calls}: {out[-1500:]}")
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release"))
    a = ap.parse_args()
    tmp, log, mock, port = start_mock("turn", {"suffix": "_echo", "args": {"message": "hi"},
                                               "vary": "message", "calls": a.calls})
    direct, gateway = Home(a.bin, port, "direct"), Home(a.bin, port, "gateway")
    first = {"direct": [], "gateway": []}
    later = {"direct": [], "gateway": []}
    pairs = []
    try:
        gateway.start()
        for h in (direct, gateway):  # npm's and Python's caches, the gateway's servers
            turn(h, log, a.calls)
        for n in range(a.rounds):
            medians = {}
            for name, h in (("direct", direct), ("gateway", gateway)):
                time.sleep(1)
                took = turn(h, log, a.calls)
                first[name].append(took[0])
                later[name].extend(took[1:])
                medians[name] = statistics.median(took[1:] or took)
                print(f"round {n + 1} {name:<8} " + " ".join(f"{t:6.1f}" for t in took) + " ms",
                      file=sys.stderr, flush=True)
            pairs.append(medians["gateway"] - medians["direct"])
    finally:
        for h in (direct, gateway):
            h.close()
        mock.terminate()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nA tool call inside a `gemini -p` turn (everything's echo), {a.rounds} rounds of "
          f"{a.calls} calls, medians (min-max)")
    print("| row | direct | gateway | gateway − direct |")
    print("|---|---|---|---|")
    for label, rows in (("the first call of a run", first), ("the calls after it", later)):
        d, g = rows["direct"], rows["gateway"]
        print(f"| {label} | {statistics.median(d):.1f} ms ({min(d):.1f}-{max(d):.1f}) | "
              f"{statistics.median(g):.1f} ms ({min(g):.1f}-{max(g):.1f}) | "
              f"{statistics.median(g) - statistics.median(d):+.1f} ms |")
    slower = sum(1 for p in pairs if p > 0)
    print(f"| rounds where the gateway's median was slower | {slower} of {len(pairs)} "
          f"(median difference {statistics.median(pairs):+.1f} ms) | | |")


if __name__ == "__main__":
    main()
