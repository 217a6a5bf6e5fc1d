"""The differential suite's policy cases: what a headless session decides for one MCP tool call,
Gemini CLI 0.61's `gemini -p` (its model a loopback mock that calls `mcp_fx_echo`) against
geminid on the same `~/.gemini/policies/` file and settings.

A case writes one to three seeded rules (a tool name exact, with a wildcard or almost right; an
`mcpName`; allow, deny or ask_user; a priority; an argument pattern) and maybe the server's
`trust`, `tools.allowed` or `tools.exclude`, and the arguments the model sends. Compared:
whether the tool is offered to the model (Gemini CLI's declarations; geminid's `mcp tools`
not `hidden`) and whether the call runs (Gemini CLI's functionResponse has an
`output`; geminid's `policy check --headless` allows, and the tool is offered), and which
rules each refuses. Gemini CLI skips the whole file for one bad rule, geminid only that rule
(the README says so): such a case asks Gemini CLI again without the rules it named. The
messages of a refusal differ on purpose (the README says why) and are not compared.
"""

import json
import os
import re
import shutil
import tempfile

import gemini_cli
import warm_bench
from differential_hooks import function_responses

TOOL_NAMES = ["mcp_fx_echo", "mcp_fx_*", "mcp_*", "mcp_fx_ech", "mcp_fx2_echo", "mcp_f_echo",
              "mcp_fx_echo*", None]
SERVERS = ["fx", "fx2", "f"]
PATTERNS = ['"text":"secret', "hello", "^\\{", "nothing-like-this"]
TEXTS = ["hello", "secret value"]
# Gemini CLI names each field that breaks its schema: `Field "rule.2.priority": ...`.
REFUSED = re.compile(r'Field "rule\.(\d+)[."]')
MODE_CASES = int(os.environ.get("GEMINID_DIFF_POLICY_MODE_CASES", "16"))
ADMIN_CASES = int(os.environ.get("GEMINID_DIFF_POLICY_ADMIN_CASES", "8"))
WORKSPACE_CASES = int(os.environ.get("GEMINID_DIFF_POLICY_WORKSPACE_CASES", "6"))
# geminid's mode names, and Gemini CLI's `--approval-mode` for each.
MODES = {"default": "default", "autoEdit": "auto_edit", "yolo": "yolo", "plan": "plan"}
WORKSPACE_README = ("Gemini CLI 0.61 has the tier, with the same hash check written and switched "
                    "off, and does not load it.")
README = ("a rule that breaks the schema (priority 1000, a `decision` of `maybe`) costs only "
          "itself, said with its file, line and column; Gemini CLI skips the whole file")


def rule(rng):
    r = {}
    name = rng.choice(TOOL_NAMES)
    if name is not None:
        r["toolName"] = name
    if name is None or rng.random() < 0.3:
        r["mcpName"] = rng.choice(SERVERS)
    r["decision"] = rng.choice(["allow", "deny", "ask_user"])
    if rng.random() < 0.85:  # both refuse a rule without one
        r["priority"] = rng.randrange(1, 999)
    if rng.random() < 0.3:
        r["argsPattern"] = rng.choice(PATTERNS)
    return r


def toml(rules):
    out = []
    for r in rules:
        out.append("[[rule]]")
        for k, v in r.items():
            out.append(f"{k} = {json.dumps(v)}")
        out.append("")
    return "\n".join(out)


def case(rng):
    rules = [rule(rng) for _ in range(1 + rng.randrange(3))]
    server = {}
    if rng.random() < 0.2:
        server["trust"] = True
    tools = {}
    if rng.random() < 0.15:
        tools["allowed"] = [rng.choice(["mcp_fx_echo", "mcp_fx_*", "echo"])]
    if rng.random() < 0.1:
        tools["exclude"] = [rng.choice(["mcp_fx_echo", "echo"])]
    return rules, server, tools, rng.choice(TEXTS)


def hand_picked():
    """(rules, server fields, tools settings, text): the edges, each on its own."""
    return [
        ([], {}, {}, "hello"),
        ([], {"trust": True}, {}, "hello"),
        ([{"toolName": "mcp_fx_echo", "decision": "allow"}], {}, {}, "hello"),
        ([{"mcpName": "fx", "decision": "allow"}], {}, {}, "hello"),
        ([{"toolName": "mcp_fx_*", "decision": "allow"},
          {"toolName": "mcp_fx_echo", "decision": "deny", "priority": 10}], {}, {}, "hello"),
        ([{"toolName": "mcp_fx_echo", "decision": "allow", "argsPattern": '"text":"secret'}],
         {}, {}, "secret value"),
        ([{"toolName": "mcp_fx_echo", "decision": "allow", "argsPattern": '"text":"secret'}],
         {}, {}, "hello"),
        ([{"toolName": "mcp_fx_ech", "decision": "allow"}], {}, {}, "hello"),
        ([], {"trust": True}, {"exclude": ["mcp_fx_echo"]}, "hello"),
        ([], {}, {"allowed": ["mcp_fx_echo"]}, "hello"),
    ]


def settings(fixture, server, tools):
    out = {"security": {"auth": {"selectedType": "gemini-api-key"}},
           "mcpServers": {"fx": dict({"command": fixture}, **server)}}
    if tools:
        out["tools"] = tools
    return out


def run(s, h, totals, rng, count, expect):
    """The hand-picked cases and `count` seeded ones in the home `h` of the differential suite."""
    tmp, log, mock, port = warm_bench.start_mock("differential-policy",
                                                 {"suffix": "mcp_fx_echo", "args": {}})
    fixture = os.path.join(s.bin, "mcp-fixture")
    gemini_dir = os.path.join(h.home, ".gemini")
    user_file = os.path.join(gemini_dir, "settings.json")
    policy_file = os.path.join(gemini_dir, "policies", "differential.toml")
    ws = os.path.join(h.tmp, "ws-policy")
    os.makedirs(ws, exist_ok=True)
    env = dict(h.env("env-true"), GEMINI_API_KEY="interop-fake-key",
               GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}")
    with open(os.path.join(s.root, "README.md")) as f:
        expect(README in " ".join(f.read().split()), f"the README no longer says: {README}")
    cases = [(f"hand-picked {i}", *c) for i, c in enumerate(hand_picked())]
    cases += [(f"seed case {i}", *case(rng)) for i in range(count)]
    try:
        for what, rules, server, tools, text in cases:
            def one(rules=rules, server=server, tools=tools, text=text):
                os.makedirs(os.path.dirname(policy_file), exist_ok=True)
                h.write(os.path.join(gemini_dir, "trustedFolders.json"), {})
                h.write(user_file, settings(fixture, server, tools))
                h.write(os.path.join(gemini_dir, "mcp-server-enablement.json"), None)
                args = {"text": text}
                with open(log + ".plan", "w") as f:
                    json.dump({"suffix": "mcp_fx_echo", "args": args}, f)

                def gemini(rules):
                    with open(policy_file, "w") as f:
                        f.write(toml(rules))
                    start = os.path.getsize(log) if os.path.exists(log) else 0
                    argv = [h.gemini, "-p", "call the tool", "-m", "gemini-2.5-flash"]
                    code, out = gemini_cli.run(argv, env, ws, 180)
                    responses, declared = function_responses(log, start)
                    expect(len(responses) <= 1, f"Gemini CLI sent {len(responses)} functionResponses")
                    runs = bool(responses) and "output" in (responses[0].get("response") or {})
                    refused = {int(n) for n in REFUSED.findall(out)}
                    return {"offered": "mcp_fx_echo" in declared, "runs": runs}, refused, out

                theirs, refused, out = gemini(rules)
                if refused:
                    # Gemini CLI skips the whole file for one bad rule, geminid only that rule
                    # (the README says so): Gemini CLI is asked again without it.
                    kept = [r for i, r in enumerate(rules) if i not in refused]
                    theirs, _, out = gemini(kept)
                    with open(policy_file, "w") as f:
                        f.write(toml(rules))
                    totals["accepted"] += 1

                h.gemctl(["mcp", "reload"], ws, "env-true")
                _, listed, err = h.gemctl(["--json", "policy", "list"], ws, "env-true")
                starts = [i + 1 for i, line in enumerate(toml(rules).splitlines()) if line == "[[rule]]"]
                ours_refused = {max(i for i, at in enumerate(starts) if at <= d["line"])
                                for d in json.loads(listed)["diagnostics"]
                                if d["file"].endswith("differential.toml") and d["severity"] == "error"
                                and d.get("line")}
                _, listed, err = h.gemctl(["--json", "mcp", "tools"], ws, "env-true")
                try:
                    tool = [t for t in json.loads(listed)["tools"] if t["name"] == "mcp_fx_echo"]
                except ValueError:
                    raise AssertionError(f"gemctl mcp tools: {listed}{err}")
                offered = bool(tool) and not tool[0].get("hidden")
                _, decided, err = h.gemctl(["--json", "policy", "check", "mcp_fx_echo",
                                            json.dumps(args), "--headless"], ws, "env-true")
                decision = json.loads(decided)["decision"]
                ours = {"offered": offered, "runs": offered and decision == "allow"}
                theirs["refused rules"], ours["refused rules"] = sorted(refused), sorted(ours_refused)

                differ = []
                for field in ("offered", "runs", "refused rules"):
                    if theirs[field] == ours[field]:
                        totals["agreed"] += 1
                    else:
                        totals["differ"] += 1
                        differ.append(f"{field}: Gemini CLI {theirs[field]}, geminid {ours[field]}"
                                      f" (geminid decided {decision})")
                setup = json.dumps({"rules": rules, "server": server, "tools": tools, "args": args})
                expect(not differ, f"{setup}:\n      " + "\n      ".join(differ)
                       + (f"\n      Gemini CLI: {out[-800:]}" if differ else ""))

            s.check("differential", f"policy in -p, {what}", one)
    finally:
        if os.path.exists(policy_file):
            os.remove(policy_file)
        h.write(user_file, {})
        mock.terminate()
        mock.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


def ask_gemini(h, env, ws, log, extra=()):
    """Gemini CLI's `-p` once: whether it offered mcp_fx_echo and ran it, and its output."""
    start = os.path.getsize(log) if os.path.exists(log) else 0
    argv = [h.gemini, "-p", "call the tool", "-m", "gemini-2.5-flash", *extra]
    code, out = gemini_cli.run(argv, env, ws, 180)
    responses, declared = function_responses(log, start)
    runs = bool(responses) and "output" in (responses[0].get("response") or {})
    return {"offered": "mcp_fx_echo" in declared, "runs": runs}, out


def valid_rule(rng, modes=False):
    r = rule(rng)
    r["priority"] = rng.randrange(1, 999)
    if modes and rng.random() < 0.6:
        r["modes"] = rng.sample(list(MODES), rng.randint(1, 2))
    return r


def tier_cases(rng):
    """(what, mode, user rules, admin rules, admin form, workspace rules), seeded."""
    out = []
    for i in range(MODE_CASES):
        mode = list(MODES)[i % len(MODES)]
        rules = [valid_rule(rng, True) for _ in range(rng.randrange(3))]
        out.append((f"mode {mode} case {i}", mode, rules, [], None, []))
    # The admin tier over the user's highest priority, both ways, and plan mode's read-only.
    allow = {"toolName": "mcp_fx_echo", "decision": "allow", "priority": 999}
    deny = {"toolName": "mcp_fx_echo", "decision": "deny", "priority": 1}
    out.append(("admin deny over a user allow", "default", [allow], [deny], "folder", []))
    out.append(("admin allow over a user deny", "default", [dict(deny, priority=999)],
                [dict(allow, priority=1)], "file", []))
    out.append(("a user allow in plan mode", "plan", [allow], [], None, []))
    out.append(("a user allow for yolo only, in autoEdit", "autoEdit", [dict(allow, modes=["yolo"])],
                [], None, []))
    for i in range(ADMIN_CASES):
        user = [valid_rule(rng) for _ in range(rng.randrange(3))]
        admin = [valid_rule(rng) for _ in range(1 + rng.randrange(2))]
        form = rng.choice(["folder", "file"])
        out.append((f"admin tier ({form}) case {i}", "default", user, admin, form, []))
    for i in range(WORKSPACE_CASES):
        user = [valid_rule(rng) for _ in range(rng.randrange(2))]
        ws_rules = [valid_rule(rng) for _ in range(1 + rng.randrange(2))]
        if i == 0:  # the repository that allows its own tool
            ws_rules = [{"toolName": "mcp_fx_echo", "decision": "allow", "priority": 1}]
        out.append((f"workspace tier case {i}", "default", user, [], None, ws_rules))
    return out


def run_tiers(s, h, totals, rng, expect):
    """Approval modes, the admin tier and the workspace tier, Gemini CLI against geminid."""
    tmp, log, mock, port = warm_bench.start_mock("differential-policy-tiers",
                                                 {"suffix": "mcp_fx_echo", "args": {}})
    fixture = os.path.join(s.bin, "mcp-fixture")
    gemini_dir = os.path.join(h.home, ".gemini")
    user_file = os.path.join(gemini_dir, "settings.json")
    policy_file = os.path.join(gemini_dir, "policies", "differential.toml")
    # Gemini CLI skips a system settings file in a folder others may write, or under one (as
    # /tmp is): both read one in a folder of the cache, the daemon started again to read it.
    secure = tempfile.mkdtemp(prefix="differential-system-", dir=s.cache)
    system_file = os.path.join(secure, "settings.json")
    admin_dir = os.path.join(secure, "admin-policies")
    plain_env = h.env
    h.env = lambda trust: dict(plain_env(trust), GEMINI_CLI_SYSTEM_SETTINGS_PATH=system_file)
    h.stop()
    h.start()
    env = dict(h.env("env-true"), GEMINI_API_KEY="interop-fake-key",
               GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}")
    with open(os.path.join(s.root, "README.md")) as f:
        expect(WORKSPACE_README in " ".join(f.read().split()),
               f"the README no longer says: {WORKSPACE_README}")
    # Gemini CLI also skips it when any folder above it is writable by others (a clone under
    # /tmp): the admin rows then compare nothing of the admin tier, and are left out, said.
    above = os.path.dirname(secure)
    while not os.stat(above).st_mode & 0o022 and os.path.dirname(above) != above:
        above = os.path.dirname(above)
    open_above = above if os.stat(above).st_mode & 0o022 else None
    if open_above:
        print(f"note    differential: the admin tier's rows are left out: {open_above}, above "
              f"{secure}, is writable by others, so Gemini CLI reads no system settings there",
              flush=True)
    try:
        for n, (what, mode, user, admin, form, ws_rules) in enumerate(tier_cases(rng)):
            if admin and open_above:
                continue
            def one(n=n, mode=mode, user=user, admin=admin, form=form, ws_rules=ws_rules):
                ws = os.path.join(h.tmp, f"ws-policy-tiers-{n}")
                os.makedirs(ws, exist_ok=True)
                h.write(os.path.join(gemini_dir, "trustedFolders.json"), {})
                h.write(user_file, settings(fixture, {}, {}))
                h.write(os.path.join(gemini_dir, "mcp-server-enablement.json"), None)
                os.makedirs(os.path.dirname(policy_file), exist_ok=True)
                # No user rules: no file. An emptied file is a save in progress to geminid
                # until it stays empty 2 s (README: "An input file is taken only once it is
                # settled"), and the last case's rules stay in force till then: a case
                # without user rules ran under them (an ask_user of `mcp_*` with
                # argsPattern "hello" made case 4 ask where Gemini CLI refused).
                if user:
                    with open(policy_file, "w") as f:
                        f.write(toml(user))
                elif os.path.exists(policy_file):
                    os.remove(policy_file)
                shutil.rmtree(admin_dir, ignore_errors=True)
                system = {}
                if admin:
                    os.makedirs(admin_dir)
                    target = os.path.join(admin_dir, "admin.toml")
                    with open(target, "w") as f:
                        f.write(toml(admin))
                    system["adminPolicyPaths"] = [admin_dir if form == "folder" else target]
                h.write(system_file, system)
                if ws_rules:
                    ws_policy = os.path.join(ws, ".gemini", "policies", "repo.toml")
                    os.makedirs(os.path.dirname(ws_policy), exist_ok=True)
                    with open(ws_policy, "w") as f:
                        f.write(toml(ws_rules))
                args = {"text": rng.choice(TEXTS)}
                with open(log + ".plan", "w") as f:
                    json.dump({"suffix": "mcp_fx_echo", "args": args}, f)
                theirs, out = ask_gemini(h, env, ws, log, ["--approval-mode", MODES[mode]])

                def ours():
                    h.gemctl(["mcp", "reload"], ws, "env-true")
                    _, shown, err = h.gemctl(["--json", "session", "show"], ws, "env-true")
                    session = json.loads(shown)["id"]
                    code, _, err = h.gemctl(["session", "update", session, "--mode", mode], ws,
                                            "env-true")
                    expect(code == 0, f"session update --mode {mode}: {err}")
                    _, listed, err = h.gemctl(["--json", "mcp", "tools"], ws, "env-true")
                    tool = [t for t in json.loads(listed)["tools"] if t["name"] == "mcp_fx_echo"]
                    offered = bool(tool) and not tool[0].get("hidden")
                    check = ["--json", "policy", "check", "mcp_fx_echo", json.dumps(args),
                             "--headless"]
                    _, decided, err = h.gemctl(check, ws, "env-true")
                    decision = json.loads(decided)["decision"]
                    rule = json.loads(decided).get("rule")
                    if rule:  # which file decided, in a row that differs
                        decision += f" by {rule['tier']} {rule['file']}:{rule.get('line')}"
                    # The session's mode decides as `--mode` names it.
                    _, named, err = h.gemctl(check + ["--mode", mode], ws, "env-true")
                    expect(json.loads(named)["decision"] == decision.split()[0],
                           f"policy check in the session's mode {mode}: {decision}, with --mode: {named}")
                    runs = offered and decision.split()[0] == "allow"
                    return {"offered": offered, "runs": runs}, decision

                phases = [("", False)] + ([(" after policy accept", True)] if ws_rules else [])
                differ = []
                for phase, accept in phases:
                    if accept:
                        code, _, err = h.gemctl(["policy", "accept"], ws, "env-true")
                        expect(code == 0, f"gemctl policy accept: {err}")
                    mine, decision = ours()
                    for field in ("offered", "runs"):
                        if theirs[field] == mine[field]:
                            totals["agreed"] += 1
                        elif accept:
                            totals["accepted"] += 1
                        else:
                            totals["differ"] += 1
                            differ.append(f"{field}{phase}: Gemini CLI {theirs[field]}, geminid "
                                          f"{mine[field]} (geminid decided {decision})")
                setup = json.dumps({"mode": mode, "user": user, "admin": admin, "form": form,
                                    "workspace": ws_rules, "args": args})
                expect(not differ, f"{setup}:\n      " + "\n      ".join(differ)
                       + (f"\n      Gemini CLI: {out[-800:]}" if differ else ""))

            s.check("differential", f"policy tiers in -p, {what}", one)
    finally:
        if os.path.exists(policy_file):
            os.remove(policy_file)
        h.env = plain_env
        h.stop()
        h.start()
        shutil.rmtree(secure, ignore_errors=True)
        h.write(user_file, {})
        mock.terminate()
        mock.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
