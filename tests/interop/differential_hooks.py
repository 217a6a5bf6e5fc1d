"""The differential suite's hook cases: one MCP tool call made by Gemini CLI 0.61 (`gemini -p
--yolo`, its model a loopback mock that calls `mcp_fx_echo`) and the same call made through
geminid (`gemctl --json call`), with the same BeforeTool and AfterTool hooks in
`~/.gemini/settings.json`. Each hook writes the JSON it reads on stdin to a file and answers
with the case's outcome: for BeforeTool nothing, a rewritten input, a deny or exit code 2; for
AfterTool nothing, added context, a block or exit code 2 (six hand-picked cases that hold each
outcome, then seeded ones).

Compared field by field: what each hook read (all but `session_id`, `transcript_path` and
`timestamp`, which name each tool's own session), and the `functionResponse` the model gets
(its `response`; Gemini CLI's carries the model's call id). A call a hook stops is, in
geminid, an error answer to `gemctl call`: its message is compared as the `{"error": ...}`
response Gemini CLI sends.
"""

import json
import os
import shutil
import subprocess
import sys

import gemini_cli
import warm_bench

# Each hook's outcome: nothing, a rewritten input, a deny, exit code 2; nothing, added
# context, a block, exit code 2. A call a hook stops is compared as the error the model reads.
BEFORE = ["pass", "rewrite", "deny", "exit2"]
AFTER = ["pass", "context", "block", "exit2"]
VOLATILE = {"session_id", "transcript_path", "timestamp"}

HOOK = r'''
import json, os, sys
event, outcome, dump = sys.argv[1], sys.argv[2], sys.argv[3]
data = json.load(sys.stdin)
with open(os.path.join(dump, event + ".json"), "w") as f:
    json.dump(data, f)
answers = {
    "deny": {"decision": "deny", "reason": "denied by the differential"},
    "rewrite": {"hookSpecificOutput": {"hookEventName": "BeforeTool",
                                       "tool_input": {"text": "rewritten by the hook"}}},
    "context": {"hookSpecificOutput": {"hookEventName": "AfterTool",
                                       "additionalContext": "context from the hook"}},
    "block": {"decision": "block", "reason": "blocked by the differential"},
}
if outcome == "exit2":
    sys.stderr.write("stopped by exit code 2")
    sys.exit(2)
if outcome in answers:
    print(json.dumps(answers[outcome]))
'''


def cases(rng, n):
    out = [("pass", "pass"), ("rewrite", "context"), ("deny", "pass"), ("exit2", "pass"),
           ("pass", "block"), ("rewrite", "exit2")]
    out += [(rng.choice(BEFORE), rng.choice(AFTER)) for _ in range(max(0, n - len(out)))]
    return out[:n]


def settings(fixture, hook, dump, before, after):
    def entry(event, outcome):
        command = f"{sys.executable} {hook} {event} {outcome} {dump}"
        return [{"matcher": "mcp_fx_echo", "hooks": [{"type": "command", "command": command}]}]

    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "mcpServers": {"fx": {"command": fixture}},
        "hooksConfig": {"enabled": True},
        "hooks": {"BeforeTool": entry("BeforeTool", before), "AfterTool": entry("AfterTool", after)},
    }


def read_dump(dump):
    got = {}
    for event in ("BeforeTool", "AfterTool"):
        path = os.path.join(dump, event + ".json")
        if os.path.exists(path):
            with open(path) as f:
                got[event] = {k: v for k, v in json.load(f).items() if k not in VOLATILE}
    return got


def function_responses(log, start):
    """The functionResponses Gemini CLI sent the mock model after `start` in its log, and the
    names of the functions it declared."""
    found, declared = [], set()
    with open(log) as f:
        f.seek(start)
        for line in f:
            if not line.strip():
                continue
            body = json.loads(line)["body"]
            for t in body.get("tools") or []:
                declared |= {d.get("name") for d in t.get("functionDeclarations") or []}
            for c in body.get("contents") or []:
                found += [p["functionResponse"] for p in c.get("parts", []) if "functionResponse" in p]
    return found, declared


def compare(totals, theirs, ours):
    """Two {field: value} answers field by field, counted in `totals`: the differing fields,
    said."""
    differ = []
    for field in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(field, "(nothing)"), ours.get(field, "(nothing)")
        if a == b:
            totals["agreed"] += 1
        else:
            totals["differ"] += 1
            differ.append(f"{field}\n        Gemini CLI: {a}\n        geminid:    {b}")
    return differ


def rows(dumped, response):
    """What is compared, as (field, value) rows."""
    out = []
    for event in ("BeforeTool", "AfterTool"):
        stdin = dumped.get(event)
        if stdin is None:
            out.append((f"{event} stdin", "(the hook did not run)"))
            continue
        for key in sorted(stdin):
            out.append((f"{event} stdin .{key}", json.dumps(stdin[key], sort_keys=True)))
    out.append(("functionResponse.response", json.dumps(response, sort_keys=True)))
    return out


def run(s, h, totals, rng, count, expect):
    """`count` seeded hook cases in the home `h` of the differential suite (its daemon up)."""
    tmp, log, mock, port = warm_bench.start_mock("differential", {"suffix": "mcp_fx_echo",
                                                                  "args": {"text": "from the model"}})
    hook = os.path.join(h.tmp, "hook.py")
    with open(hook, "w") as f:
        f.write(HOOK)
    fixture = os.path.join(s.bin, "mcp-fixture")
    user_file = os.path.join(h.home, ".gemini", "settings.json")
    ws = os.path.join(h.tmp, "ws-hooks")
    os.makedirs(ws, exist_ok=True)
    env = dict(h.env("env-true"), GEMINI_API_KEY="interop-fake-key",
               GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}")
    try:
        for i, (before, after) in enumerate(cases(rng, count)):
            def case(i=i, before=before, after=after):
                dumps = {}
                for who in ("gemini", "geminid"):
                    dump = os.path.join(h.tmp, f"hooks-{i}-{who}")
                    os.makedirs(dump, exist_ok=True)
                    h.write(os.path.join(h.home, ".gemini", "trustedFolders.json"), {})
                    h.write(user_file, settings(fixture, hook, dump, before, after))
                    h.write(os.path.join(h.home, ".gemini", "mcp-server-enablement.json"), None)
                    if who == "gemini":
                        start = os.path.getsize(log) if os.path.exists(log) else 0
                        argv = [h.gemini, "-p", "call the tool", "-m", "gemini-2.5-flash", "--yolo"]
                        code, out = gemini_cli.run(argv, env, ws, 180)
                        expect(code == 0, f"gemini -p exited {code}: {out[-1500:]}")
                        responses, _ = function_responses(log, start)
                        expect(len(responses) == 1, f"Gemini CLI sent {len(responses)} "
                               f"functionResponses: {out[-1500:]}")
                        response = responses[0].get("response")
                    else:
                        h.gemctl(["mcp", "reload"], ws, "env-true")
                        p = subprocess.run(
                            [os.path.join(s.bin, "gemctl"), "--json", "call", "mcp_fx_echo",
                             json.dumps({"text": "from the model"})],
                            env=env, cwd=ws, capture_output=True, text=True, timeout=120)
                        try:
                            r = json.loads(p.stdout)
                        except ValueError:
                            raise AssertionError(f"gemctl call printed no result: {p.stdout}{p.stderr}")
                        if "error" in r:
                            response = {"error": r["error"].get("message")}
                        else:
                            response = r["functionResponse"]["functionResponse"].get("response")
                    dumps[who] = rows(read_dump(dump), response)
                    shutil.rmtree(dump, ignore_errors=True)
                differ = compare(totals, dict(dumps["gemini"]), dict(dumps["geminid"]))
                expect(not differ, f"hooks case {i} (BeforeTool {before}, AfterTool {after}):\n      "
                       + "\n      ".join(differ))

            s.check("differential", f"hooks, BeforeTool {before} / AfterTool {after} (case {i})",
                    case)
    finally:
        h.write(user_file, {})
        mock.terminate()
        mock.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
