"""The differential suite's extension cases: Gemini CLI 0.61 and geminid manage the same
extensions in one home, each step done by either tool (seeded), and list them side by side.

A case makes one to three extensions (a version, a description, servers, context files,
excluded tools), each in a local folder or a git repository served on 127.0.0.1
(git_http.py), then for each: installs it with one tool, maybe updates it to a new version
with one tool, maybe disables it for the user or for the workspace with one tool (and maybe
enables it again with one tool). Then `gemini extensions list` is compared with `gemctl --json
extensions list` field by field: for each extension its version, whether it is enabled in the
workspace and for the user (`gemctl` run in the home folder), its path, source and install
type, context files, MCP servers and excluded tools. geminid must hold every one as legitimate (no false tamper, whichever tool
wrote it). Last, each is uninstalled with one tool, and both must list nothing.
"""

import json
import os
import shutil

import differential_hooks
import gemini_cli
import git_http

NAMES = ["alpha-kit", "Beta", "gamma-2", "delta"]
SERVERS = ["srv", "files", "Search"]
TOOLS = ["rm", "write_file", "mcp_srv_drop"]


def extension(rng, name):
    man = {"name": name, "version": f"1.{rng.randrange(10)}.0"}
    if rng.random() < 0.5:
        man["description"] = f"The {name} extension"
    servers = rng.sample(SERVERS, rng.randrange(3))
    if servers:
        man["mcpServers"] = {s: {"command": "true", "args": [name]} for s in servers}
    context = rng.choice(["none", "default", "named", "list"])
    if context == "named":
        man["contextFileName"] = "CONTEXT.md"
    elif context == "list":
        man["contextFileName"] = ["A.md", "missing.md", "B.md"]
    if rng.random() < 0.4:
        man["excludeTools"] = rng.sample(TOOLS, 1 + rng.randrange(2))
    return man, context


def case(rng):
    """[(manifest, context kind, source kind, installer, updater or None, (scope, disabler,
    enabler or None) or None, remover)]"""
    tools = ["gemini", "geminid"]
    out = []
    for name in rng.sample(NAMES, 1 + rng.randrange(3)):
        man, context = extension(rng, name)
        kind = rng.choice(["local", "local", "git"])
        updater = rng.choice(tools) if rng.random() < 0.4 else None
        disable = None
        if rng.random() < 0.6:
            enabler = rng.choice(tools) if rng.random() < 0.4 else None
            disable = (rng.choice(["user", "workspace"]), rng.choice(tools), enabler)
        out.append((man, context, kind, rng.choice(tools), updater, disable, rng.choice(tools)))
    return out


def theirs(out):
    """Gemini CLI's list as {name: {field: value}}."""
    found, cur, section = {}, None, None
    for line in out.splitlines():
        if line[:2] in ("✓ ", "✗ "):
            name, _, version = line[2:].rpartition(" (")
            cur = found[name] = {"version": version.rstrip(")"), "enabled here": line[0] == "✓",
                                 "context files": [], "MCP servers": [], "excluded tools": []}
            section = None
        elif cur is None or not line.startswith(" "):
            cur = None if not line.strip() else cur
        elif line.startswith("  ") and section:
            cur[section].append(line.strip())
        else:
            key, _, value = line.strip().partition(":")
            value = value.strip()
            section = {"Context files": "context files", "MCP servers": "MCP servers",
                       "Excluded tools": "excluded tools"}.get(key)
            if key == "Path":
                cur["path"] = value
            elif key == "Source":
                source, _, kind = value.rpartition(" (Type: ")
                cur["source"], cur["type"] = source, kind.rstrip(")")
            elif key == "Enabled (User)":
                cur["enabled (user)"] = value == "true"
    return found


def ours(listed, at_home):
    """geminid's list in the same shape, and each one's integrity."""
    user = {e["name"]: e["enabled"] for e in at_home["extensions"]}
    found, integrity = {}, {}
    for e in listed["extensions"]:
        found[e["name"]] = {
            "version": e.get("version"), "enabled here": e["enabled"],
            "enabled (user)": user.get(e["name"]), "path": e["path"], "source": e.get("source"),
            "type": e.get("installType"), "context files": e["contextFiles"],
            "MCP servers": e["servers"], "excluded tools": e["excludeTools"]}
        integrity[e["name"]] = e["integrity"]
    return found, integrity


def rows(listed):
    out = []
    for name in sorted(listed):
        for field in sorted(listed[name]):
            out.append((f"{name} {field}", json.dumps(listed[name][field])))
    return out or [("extensions", "(none)")]


def run(s, h, totals, rng, count, expect):
    """`count` seeded extension cases in the home `h` of the differential suite (its daemon up)."""
    ws = os.path.join(h.tmp, "ws-extensions")
    os.makedirs(ws, exist_ok=True)
    env = h.env("env-true")
    h.write(os.path.join(h.home, ".gemini", "settings.json"), {})

    def gemini(*args, cwd=ws):
        code, out = gemini_cli.run([h.gemini, "extensions", *args], env, cwd, 120)
        expect(code == 0, f"gemini extensions {' '.join(args)} exited {code}: {out[-1500:]}")
        return out

    def gemctl(*args, cwd=ws):
        code, out, err = h.gemctl(["extensions", *args], cwd, "env-true")
        expect(code == 0, f"gemctl extensions {' '.join(args)} exited {code}: {err}")
        return out

    def by(tool, *args):
        return gemini(*args) if tool == "gemini" else gemctl(*args)

    def compare(n, what, steps):
        their = theirs(gemini("list"))
        mine, integrity = ours(json.loads(gemctl("--json", "list")),
                               json.loads(gemctl("--json", "list", cwd=h.home)))
        false = {k: v for k, v in integrity.items() if v not in ("verified", "recorded")}
        expect(not false, f"extension case {n}, {what}: geminid holds as not legitimate {false}"
               f" ({json.dumps(steps)})")
        differ = differential_hooks.compare(totals, dict(rows(their)), dict(rows(mine)))
        expect(not differ, f"extension case {n}, {what} ({json.dumps(steps)}):\n      "
               + "\n      ".join(differ))

    server = git_http.GitHttp(os.path.join(h.tmp, "git-root"))

    def publish(n, man, context, kind):
        """The extension's source, written (or its new version committed): what to install."""
        files = {"gemini-extension.json": json.dumps(man)}
        for f in {"none": [], "default": ["GEMINI.md"], "named": ["CONTEXT.md"],
                  "list": ["A.md", "B.md"]}[context]:
            files[f] = f"{man['name']} {f}\n"
        src = os.path.join(h.tmp, f"ext-{n}", man["name"])
        if kind == "git":
            return server.publish(src, f"{man['name']}-{n}", files)
        for rel, text in files.items():
            os.makedirs(src, exist_ok=True)
            with open(os.path.join(src, rel), "w") as f:
                f.write(text)
        return src

    try:
        for n in range(count):
            steps = case(rng)

            def one(n=n, steps=steps):
                try:
                    for man, context, kind, installer, updater, disable, _ in steps:
                        by(installer, "install", publish(n, man, context, kind), "--consent")
                        if updater:
                            man = dict(man, version="2.0.0")
                            publish(n, man, context, kind)
                            by(updater, "update", man["name"])
                        if disable:
                            scope, tool, enabler = disable
                            by(tool, "disable", man["name"], "--scope", scope)
                            if enabler:
                                by(enabler, "enable", man["name"], "--scope", scope)
                    compare(n, "installed", steps)
                    for man, *_, remover in steps:
                        by(remover, "uninstall", man["name"])
                    compare(n, "uninstalled", steps)
                except AssertionError as e:
                    raise AssertionError(f"{e}\n      steps: {json.dumps(steps)}") from None
                finally:
                    shutil.rmtree(os.path.join(h.tmp, f"ext-{n}"), ignore_errors=True)
                    for man, *_ in steps:
                        h.gemctl(["extensions", "uninstall", man["name"]], ws, "env-true")

            what = ", ".join(f"{m['name']} ({k}) by {i}" for m, _, k, i, *_ in steps)
            s.check("differential", f"extensions, seed case {n} ({what})", one)
    finally:
        server.stop()
