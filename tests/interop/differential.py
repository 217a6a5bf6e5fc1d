"""Differential checks: the same generated set-ups given to Gemini CLI 0.61 and to geminid, the
answers compared line by line.

Each case writes a user and a workspace `settings.json`, the MCP enablement file and the trust
set-up from a seeded generator (plus hand-picked edge cases), in a home of its own with a daemon
of its own, and compares `gemini mcp list` with `gemctl mcp list` (every line Gemini CLI prints:
headers, warnings, and one per server with its name, origin, target, transport and state). Every
server is unreachable (`true`, port 9), so both say the same state without racing a start.
Then `gemini skills list` against `gemctl skills list` (`GEMINID_DIFF_SKILL_CASES` seeded
cases, default 16): skills in the user's and the workspace's folders with names that differ
only in case, `skills.disabled` in either settings file, skills turned off, four kinds of
trust (restricted mode among them); each skill's name, state, description and location, in
order. Then `GEMINID_DIFF_HOOK_CASES` (default 6) hook cases (differential_hooks.py): the
stdin BeforeTool and AfterTool hooks read and the functionResponse, or the error a stopped
call gives, Gemini CLI's `-p` against `gemctl call`. Then `GEMINID_DIFF_EXTENSION_CASES`
(default 8) extension cases (differential_extensions.py): each install, update, disable and
uninstall done by either tool, `extensions list` compared field by field, no false tamper.
Then ten hand-picked and `GEMINID_DIFF_POLICY_CASES` (default 20) seeded policy cases
(differential_policy.py): rules in `~/.gemini/policies/`, whether `gemini -p` offers and runs
the tool against geminid's headless decision. Then twelve hand-picked and
`GEMINID_DIFF_CONTEXT_CASES` (default 40) seeded context-file cases (differential_context.py):
the files and their text, imports inlined, `gemini -p` sends its model against
`gemctl config context`, in order. Then the custom-command cases (differential_commands.py,
hand-picked and `GEMINID_DIFF_COMMAND_CASES`, default 20, seeded): `gemini -p "/name args"`
in each approval mode against `gemctl commands expand --no-confirm`, the prompt sent and
whether its `!{...}` ran.

A difference is accepted only when a line of the README's "Where geminid differs from Gemini
CLI" explains it; `ACCEPTED` names that line, and the suite fails if the README no longer has
it: before any case runs, every README line a differential module quotes (`ACCEPTED`, `QUOTED`,
and each constant whose name holds `README`) is looked for, and those missing are named. Then
`GEMINID_DIFF_TOOL_CASES` (default 12) tool cases and the hand-picked result, environment and
refusal cases (differential_tools.py): which tools of a listing reach the model and their
parameters, what a result that breaks the schema becomes, `\\$VAR` in `env`, a refusal's text.
Prints `differential: N rows agreed, M accepted (README), K differ` and one check per case.
Reproduce one case: `GEMINID_DIFF_SEED=41 GEMINID_DIFF_CASES=40` (the defaults) and the case's
number in the failure.
"""

import difflib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time

import differential_context
import differential_extensions
import differential_hooks
import differential_commands
import differential_policy
import differential_tools
import gemini_cli
import homes

SEED = int(os.environ.get("GEMINID_DIFF_SEED", "41"))
CASES = int(os.environ.get("GEMINID_DIFF_CASES", "40"))
SKILL_CASES = int(os.environ.get("GEMINID_DIFF_SKILL_CASES", "16"))
HOOK_CASES = int(os.environ.get("GEMINID_DIFF_HOOK_CASES", "6"))
EXTENSION_CASES = int(os.environ.get("GEMINID_DIFF_EXTENSION_CASES", "8"))
POLICY_CASES = int(os.environ.get("GEMINID_DIFF_POLICY_CASES", "20"))
COMMAND_CASES = int(os.environ.get("GEMINID_DIFF_COMMAND_CASES", "20"))

# Names that differ only in case or spacing are distinct entries to both (settings keys are
# exact); enablement and the allow/exclude lists compare them lower-cased and trimmed.
NAMES = ["alpha", "Zeta", "beta", "Alpha", "srv-1", "my_srv", "kit-srv"]
LIST_NAMES = NAMES + ["ALPHA", " beta ", "zeta", "gamma"]

SERVER = re.compile(r"^(\S+) (.+?)(?: \(from ([^)]+)\))?: (.*) \((stdio|http|sse)\) - ([A-Za-z ]+)$")


def same_state(theirs, ours):
    """Gemini CLI connects each server to list it, so one it cannot reach is `✗ Disconnected`;
    `gemctl mcp list` starts nothing, and says of a server no session started `○ Not started`."""
    return theirs[6] == ours[6] or (theirs[6] == "Disconnected" and ours[6] == "Not started"
                                    and theirs[1] == "✗" and ours[1] == "○")


def not_started(theirs, ours):
    """The same server, which Gemini CLI could not reach and geminid has not started."""
    a, b = SERVER.match(theirs), SERVER.match(ours)
    return bool(a and b and a.groups()[1:5] == b.groups()[1:5] and same_state(a, b))


def extension_over_settings(theirs, ours):
    """Gemini CLI's list shows a settings entry over an extension's server of the same name
    alone; geminid shows it as the extension's server with the entry's fields over it (as
    Gemini CLI runs it), so the name carries `(from EXT)` and the target may gain fields."""
    a, b = SERVER.match(theirs), SERVER.match(ours)
    return bool(a and b and a[3] is None and b[3] == EXTENSION["name"] and a[2] == b[2]
                and b[2] in EXTENSION["mcpServers"] and same_state(a, b))


# (a test of a differing pair of lines, the README line that explains it)
ACCEPTED = [
    (extension_over_settings,
     "A settings entry that adds fields to an extension's server of the same name shows in "
     "`mcp list` as `(from EXT)`"),
    (not_started,
     "`gemctl mcp list` shows a server no session has started as `○ NAME: ... - Not started`"),
]

EXTENSION = {
    "name": "kit",
    "version": "1.0.0",
    "mcpServers": {
        "kit-srv": {"command": "true", "args": ["kit"]},
        "alpha": {"command": "true", "args": ["from-kit"]},
    },
}


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def server(rng):
    kind = rng.choice(["stdio", "stdio-args", "url", "url-sse", "url-http", "httpUrl"])
    if kind == "stdio":
        return {"command": "true"}
    if kind == "stdio-args":
        return {"command": "true", "args": rng.sample(["a", "b c", "--flag", "x=1"], rng.randint(1, 3))}
    if kind == "url":
        return {"url": "http://127.0.0.1:9/mcp"}
    if kind == "url-sse":
        return {"url": "http://127.0.0.1:9/sse", "type": "sse"}
    if kind == "url-http":
        return {"url": "http://127.0.0.1:9/mcp", "type": "http"}
    return {"httpUrl": "http://127.0.0.1:9/mcp"}


def generate(rng):
    """One case: (user settings, workspace settings, enablement file or None, trust mode)."""
    user = {"mcpServers": {n: server(rng) for n in rng.sample(NAMES, rng.randint(0, 4))}}
    ws = {"mcpServers": {n: server(rng) for n in rng.sample(NAMES, rng.randint(0, 3))}}
    for settings in (user, ws):
        if rng.random() < 0.3:
            settings.setdefault("mcp", {})["excluded"] = rng.sample(LIST_NAMES, rng.randint(1, 2))
        if rng.random() < 0.2:
            settings.setdefault("mcp", {})["allowed"] = rng.sample(LIST_NAMES, rng.randint(1, 3))
    enablement = None
    if rng.random() < 0.4:
        enablement = {n.lower(): {"enabled": False} for n in rng.sample(NAMES, rng.randint(1, 2))}
    trust = rng.choice(["env-true", "trusted", "untrusted", "no-rule", "trust-off", "restricted"])
    return user, ws, enablement, trust


SKILL_NAMES = ["alpha", "Alpha", "beta", "Zeta", "my-skill", "gamma_2"]
SKILL_LIST_NAMES = SKILL_NAMES + ["ALPHA", "zeta", " beta "]


def skills_case(rng):
    """One skills case: (user skills, workspace skills, user settings, workspace settings,
    trust), the skills as {name: description}."""
    user_skills = {n: f"user {n}" for n in rng.sample(SKILL_NAMES, rng.randint(0, 3))}
    ws_skills = {n: f"workspace {n}" for n in rng.sample(SKILL_NAMES, rng.randint(0, 3))}
    user, ws = {}, {}
    for settings in (user, ws):
        if rng.random() < 0.4:
            settings["skills"] = {"disabled": rng.sample(SKILL_LIST_NAMES, rng.randint(1, 2))}
    if rng.random() < 0.1:
        user.setdefault("skills", {})["enabled"] = False
    trust = rng.choice(["env-true", "trusted", "untrusted", "restricted"])
    return user_skills, ws_skills, user, ws, trust


SKILL_ENTRY = re.compile(r"^(\S.*) \[(Enabled|Disabled)\]$")


def skill_rows(out):
    """`skills list` as rows: its heading, then one row per skill with what Gemini CLI prints
    of it (name, state, description, location). geminid's own detail lines (`Source:`,
    `Overrides:`) and both tools' warnings are not compared: the README's skills line says
    how they differ."""
    rows, entry = [], None
    for line in out.splitlines():
        m = SKILL_ENTRY.match(line)
        if m:
            entry = {"name": m[1], "state": m[2]}
            rows.append(entry)
        elif line.startswith("  ") and entry is not None:
            key, _, value = line.strip().partition(":")
            if key in ("Description", "Location"):
                entry[key] = value.strip()
        elif line.strip() in ("Discovered Agent Skills:", "No skills discovered."):
            rows.append(line.strip())
            entry = None
    return [r if isinstance(r, str) else json.dumps(r) for r in rows]


def hand_picked():
    """Edge cases worth a fixed place (Gemini CLI's own tests and past differences)."""
    untouched = {"mcpServers": {}}
    return [
        ("no servers at all", untouched, untouched, None, "env-true"),
        ("a workspace entry takes the user entry's place in the order",
         {"mcpServers": {"Zeta": {"command": "true"}, "alpha": {"command": "true"},
                         "beta": {"command": "true"}}},
         {"mcpServers": {"alpha": {"command": "true", "args": ["ws"]}, "gamma": {"command": "true"}}},
         None, "env-true"),
        ("excluded in an untrusted folder: Blocked before Disabled",
         {"mcpServers": {"alpha": {"command": "true"}, "beta": {"command": "true"}},
          "mcp": {"excluded": ["alpha"]}},
         untouched, None, "untrusted"),
        ("allowed list with case and spaces",
         {"mcpServers": {"alpha": {"command": "true"}, "beta": {"command": "true"}},
          "mcp": {"allowed": [" ALPHA "]}},
         untouched, None, "env-true"),
        ("a settings entry over the extension's server",
         {"mcpServers": {"alpha": {"url": "http://127.0.0.1:9/mcp"}}}, untouched, None, "env-true"),
        ("disabled in the enablement file, by its lower-cased name",
         {"mcpServers": {"Zeta": {"command": "true"}, "beta": {"httpUrl": "http://127.0.0.1:9/mcp"}}},
         untouched, {"zeta": {"enabled": False}}, "env-true"),
    ]


class Home:
    """A home with a geminid of its own, in which both tools run."""

    def __init__(self, s):
        self.s = s
        self.tmp = tempfile.mkdtemp(prefix="geminid-differential-")
        homes.make(self.tmp)
        self.home = os.path.join(self.tmp, "home")
        self.gemini = os.path.join(s.cache, "clients", "node_modules", ".bin", "gemini")
        self.log_path = os.path.join(self.tmp, "geminid.log")
        self.daemon = None

    def env(self, trust):
        e = homes.env(self.tmp, self.s.bin, GEMINI_CLI_NO_RELAUNCH="true")
        if trust == "restricted":
            # Restricted mode distrusts before GEMINI_CLI_TRUST_WORKSPACE=true trusts.
            e["GEMINI_RESTRICTED_MODE"] = "true"
        elif trust != "env-true":
            e.pop("GEMINI_CLI_TRUST_WORKSPACE", None)
        return e

    def start(self):
        log = open(self.log_path, "a")
        self.daemon = subprocess.Popen(
            [os.path.join(self.s.bin, "geminid")], env=dict(self.env("env-true"), RUST_LOG="info"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.gemctl(["--no-autostart", "status"], self.tmp, "env-true")[0] == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("geminid did not start")

    def stop(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()

    def gemctl(self, args, cwd, trust):
        p = subprocess.run([os.path.join(self.s.bin, "gemctl"), *args], env=self.env(trust),
                           cwd=cwd, capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    def write(self, path, value):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if value is None:
            if os.path.exists(path):
                os.remove(path)
            return
        with open(path, "w") as f:
            json.dump(value, f, indent=2)

    def set_up(self, n, user, ws_settings, enablement, trust):
        """Write the case's files; returns its workspace (a new one: a new session)."""
        ws = os.path.join(self.tmp, f"ws-{n}")
        os.makedirs(ws, exist_ok=True)
        user = json.loads(json.dumps(user))
        if trust in ("trusted", "untrusted", "no-rule"):
            user.setdefault("security", {})["folderTrust"] = {"enabled": True}
        gemini_dir = os.path.join(self.home, ".gemini")
        self.write(os.path.join(gemini_dir, "settings.json"), user)
        self.write(os.path.join(ws, ".gemini", "settings.json"), ws_settings)
        self.write(os.path.join(gemini_dir, "mcp-server-enablement.json"), enablement)
        rules = {"trusted": {ws: "TRUST_FOLDER"}, "untrusted": {ws: "DO_NOT_TRUST"}}.get(trust)
        self.write(os.path.join(gemini_dir, "trustedFolders.json"), rules or {})
        return ws


LINE = re.compile(r"^(\S+) (.+) - ([A-Za-z ]+)$")


def lines(out):
    """What a reader of `mcp list` sees, without our detail lines (indented) or blank ones."""
    kept = []
    for line in out.splitlines():
        if not line.strip() or line.startswith("    "):
            continue
        if line.startswith(("Loaded cached credentials", "Ripgrep")):
            continue
        kept.append(" ".join(line.split()))
    return kept


def accepted(theirs, ours):
    for test, readme in ACCEPTED:
        if test(theirs, ours):
            return readme
    return None


def pairs(a, b):
    """The two lists aligned (difflib), a line missing on one side given as "(nothing)"."""
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            out.append((left[k] if k < len(left) else "(nothing)",
                        right[k] if k < len(right) else "(nothing)"))
    return out


def quoted_readme_lines():
    """Every README line the differential modules quote: `ACCEPTED`'s, `QUOTED`, and each
    string constant whose name holds `README` (a row that accepts a difference names one)."""
    import sys
    lines = []
    for name, module in sorted(sys.modules.items()):
        if not name.startswith("differential") or module is None:
            continue
        for attr, value in vars(module).items():
            if attr == "ACCEPTED":
                lines += [line for _, line in value]
            elif attr == "QUOTED":
                lines += list(value)
            elif "README" in attr and isinstance(value, str):
                lines.append(value)
    return list(dict.fromkeys(lines))


def run(s):
    with open(os.path.join(s.root, "README.md")) as f:
        readme = " ".join(f.read().split())
    missing = [line for line in quoted_readme_lines() if " ".join(line.split()) not in readme]
    expect(not missing, "the README no longer says:\n      " + "\n      ".join(missing))

    h = Home(s)
    totals = {"agreed": 0, "accepted": 0, "differ": 0}
    try:
        h.start()
        # One extension, installed by geminid, whose servers both list (and one a settings
        # entry may override).
        src = os.path.join(h.tmp, "kit-src")
        h.write(os.path.join(src, "gemini-extension.json"), EXTENSION)
        code, _, err = h.gemctl(["extensions", "install", src, "--consent"], h.tmp, "env-true")
        expect(code == 0, f"installing the extension: {err}")

        rng = random.Random(SEED)
        cases = [(f"hand-picked: {what}", *rest) for what, *rest in hand_picked()]
        cases += [(f"seed {SEED} case {i}", *generate(rng)) for i in range(CASES)]
        for n, (what, user, ws_settings, enablement, trust) in enumerate(cases):
            def case(n=n, user=user, ws_settings=ws_settings, enablement=enablement, trust=trust):
                ws = h.set_up(n, user, ws_settings, enablement, trust)
                code, theirs = gemini_cli.run([h.gemini, "mcp", "list"], h.env(trust), ws, 120)
                expect(code == 0, f"gemini mcp list exited {code}: {theirs[-1500:]}")
                h.gemctl(["mcp", "reload"], ws, trust)
                code, ours, err = h.gemctl(["mcp", "list"], ws, trust)
                expect(code == 0, f"gemctl mcp list exited {code}: {err}")
                a, b = lines(theirs), lines(ours)
                differ = []
                for x, y in pairs(a, b):
                    if x == y:
                        totals["agreed"] += 1
                    elif accepted(x, y):
                        totals["accepted"] += 1
                    else:
                        totals["differ"] += 1
                        differ.append(f"Gemini CLI: {x!r}\n      geminid:    {y!r}")
                setup = json.dumps({"user": user, "workspace": ws_settings,
                                    "enablement": enablement, "trust": trust})
                expect(not differ, f"case {n} ({setup}):\n      " + "\n      ".join(differ))

            s.check("differential", f"mcp list, {what}", case)

        for i in range(SKILL_CASES):
            user_skills, ws_skills, user, ws_settings, trust = skills_case(rng)

            def case(i=i, user_skills=user_skills, ws_skills=ws_skills, user=user,
                     ws_settings=ws_settings, trust=trust):
                ws = h.set_up(1000 + i, user, ws_settings, None, trust)
                skills_dir = os.path.join(h.home, ".gemini", "skills")
                shutil.rmtree(skills_dir, ignore_errors=True)
                for base, skills in ((skills_dir, user_skills),
                                     (os.path.join(ws, ".gemini", "skills"), ws_skills)):
                    for name, description in skills.items():
                        folder = os.path.join(base, name)
                        os.makedirs(folder, exist_ok=True)
                        with open(os.path.join(folder, "SKILL.md"), "w") as f:
                            f.write(f"---\nname: {name}\ndescription: {description}\n---\nDo it.\n")
                code, theirs = gemini_cli.run([h.gemini, "skills", "list"], h.env(trust), ws, 120)
                expect(code == 0, f"gemini skills list exited {code}: {theirs[-1500:]}")
                code, ours, err = h.gemctl(["skills", "list"], ws, trust)
                expect(code == 0, f"gemctl skills list exited {code}: {err}")
                differ = []
                for x, y in pairs(skill_rows(theirs), skill_rows(ours)):
                    if x == y:
                        totals["agreed"] += 1
                    else:
                        totals["differ"] += 1
                        differ.append(f"Gemini CLI: {x}\n      geminid:    {y}")
                setup = json.dumps({"user skills": user_skills, "workspace skills": ws_skills,
                                    "user": user, "workspace": ws_settings, "trust": trust})
                expect(not differ, f"skills case {i} ({setup}):\n      " + "\n      ".join(differ))

            s.check("differential", f"skills list, seed {SEED} case {i}", case)

        differential_hooks.run(s, h, totals, rng, HOOK_CASES, expect)
        differential_extensions.run(s, h, totals, rng, EXTENSION_CASES, expect)
        differential_policy.run(s, h, totals, rng, POLICY_CASES, expect)
        differential_tools.run(s, h, totals, rng, differential_tools.CASES, expect)
        differential_policy.run_tiers(s, h, totals, rng, expect)
        differential_commands.run(s, h, totals, rng, COMMAND_CASES, expect)
        differential_context.run(s, h, totals, rng, differential_context.CASES, expect)
    finally:
        h.stop()
        print(f"differential: {totals['agreed']} rows agreed, {totals['accepted']} accepted "
              f"(README), {totals['differ']} differ", flush=True)
        if not totals["differ"]:
            shutil.rmtree(h.tmp, ignore_errors=True)
        else:
            print(f"differential home kept: {h.tmp}", flush=True)
