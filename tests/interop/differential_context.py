"""The differential suite's context-file cases: the GEMINI.md files (and the names
`context.fileName` adds) Gemini CLI 0.61 sends its model, against `gemctl --json config context`.

Each case lays out, from a seeded generator (plus hand-picked edges): the global folder
`~/.gemini`, a folder above the project, the project root (with `.git`), folders down to the
workspace and one below it, and maybe the private project memory
(`~/.gemini/tmp/<project>/memory/`, found through `projects.json`, a `.project_root` marker or
the older folder named by the path's SHA-256); in them files named from `context.fileName`'s
list, `GEMINI.md`, and a name nobody asks for; their text empty, blank, plain, or with `@path`
imports that work, are missing, go round in a cycle, leave the project root, or sit in
backticks. An extension with two context files is installed throughout. `gemini -p hi` runs against the loopback mock model, whose logged request holds each
file as `--- Context from: PATH ---` blocks (the global files and the memory in the system
instruction, the extensions' and the project's in the first user turn); geminid's list gives
each file's path and text. Compared, in order: one row per file, its path and its text.

The memory folder's name is compared as `<project>`: when Gemini CLI first meets a workspace
whose older hashed folder holds the memory, it copies that into a new folder it names then,
which does not exist when geminid is asked; the text is the same but for that folder's name
in a failed import's message.

Hand-picked: each bad import alone, six deep, in code, empty files, a name list,
`context.includeDirectories`, `context.importFormat: "flat"`, `context.memoryBoundaryMarkers`;
then `GEMINID_DIFF_CONTEXT_CASES` (default 40) seeded cases.
"""

import hashlib
import json
import os
import re
import shutil

import gemini_cli
import warm_bench

CASES = int(os.environ.get("GEMINID_DIFF_CONTEXT_CASES", "40"))
NAME_LISTS = [None, "AGENTS.md", ["AGENTS.md"], ["CONTEXT.md", "AGENTS.md"],
              ["GEMINI.md", "AGENTS.md"], [" ./AGENTS.md ", ""], "GEMINI.md"]
BLOCK = re.compile(r"--- Context from: (.+?) ---\n(.*?)\n--- End of Context from: \1 ---", re.S)
TMP = re.compile(r"/\.gemini/tmp/[^/]+/")


def names_of(setting):
    names = [setting] if isinstance(setting, str) else list(setting or [])
    out = []
    for n in names + ["GEMINI.md"]:
        n = os.path.normpath(n.strip()) if n.strip() else ""
        if n and n not in out:
            out.append(n)
    return out


class Layout:
    """One case's folders and files, written under `base` and the home."""

    def __init__(self, base, home, rng, setting):
        self.base, self.home, self.rng = base, home, rng
        self.setting = setting
        self.names = names_of(setting) + ["OTHER.md"]
        self.root = os.path.join(base, "repo")
        self.cwd = os.path.join(self.root, *rng.choice([[], ["a"], ["a", "b"]]))
        self.files = {}
        self.n = 0

    def text(self, folder):
        """A file's text: empty, blank, plain or with imports of every kind."""
        rng = self.rng
        kind = rng.choices(["empty", "blank", "plain", "imports"], [1, 1, 3, 4])[0]
        if kind == "empty":
            return ""
        if kind == "blank":
            return rng.choice(["  \n\t\n", "\n", " "])
        self.n += 1
        parts = [f"rule {self.n}: keep it tidy"]
        if kind == "plain":
            return "\n".join(parts) + rng.choice(["", "\n", "\n\n  "])
        for _ in range(rng.randint(1, 3)):
            what = rng.choice(["ok", "missing", "cycle", "outside", "code", "absolute", "nested"])
            k = self.n * 10 + rng.randint(0, 9)
            if what == "ok":
                self.files[os.path.join(folder, f"inc-{k}.md")] = f"included {k}"
                parts.append(f"see @./inc-{k}.md please")
            elif what == "missing":
                parts.append(f"@./missing-{k}.md")
            elif what == "cycle":
                self.files[os.path.join(folder, f"cyc-a-{k}.md")] = f"A {k} @./cyc-b-{k}.md"
                self.files[os.path.join(folder, f"cyc-b-{k}.md")] = f"B {k} @./cyc-a-{k}.md"
                parts.append(f"cycle @./cyc-a-{k}.md")
            elif what == "outside":
                self.files[os.path.join(self.base, f"out-{k}.md")] = f"outside {k}"
                rel = os.path.relpath(os.path.join(self.base, f"out-{k}.md"), folder)
                parts.append(f"@{rel}")
            elif what == "code":
                self.files[os.path.join(folder, f"inc-{k}.md")] = f"included {k}"
                parts.append(rng.choice([f"`@./inc-{k}.md`", f"```\n@./inc-{k}.md\n```"]))
            elif what == "absolute":
                path = os.path.join(self.root, f"abs-{k}.md")
                self.files[path] = f"absolute {k}"
                parts.append(f"@{path}")
            else:
                os.makedirs(os.path.join(folder, "docs"), exist_ok=True)
                self.files[os.path.join(folder, "docs", f"n-{k}.md")] = f"nested {k} @../inc-{k}.md"
                self.files[os.path.join(folder, f"inc-{k}.md")] = f"included {k}"
                parts.append(f"@docs/n-{k}.md")
        return "\n".join(parts)

    def put(self, folder, count):
        for name in self.rng.sample(self.names, min(count, len(self.names))):
            self.files[os.path.join(folder, name)] = self.text(folder)

    def memory(self, how, index):
        """The private project memory, found `how`: its folder."""
        gemini = os.path.join(self.home, ".gemini")
        if how == "hash":
            slug = hashlib.sha256(self.cwd.encode()).hexdigest()
        else:
            slug = f"proj-{self.rng.randint(0, 999)}"
            self.files[os.path.join(gemini, "tmp", slug, ".project_root")] = self.cwd
            if how == "registry":
                self.files[os.path.join(gemini, "projects.json")] = json.dumps(
                    {"projects": {self.cwd: slug}})
        folder = os.path.join(gemini, "tmp", slug, "memory")
        if index:
            self.files[os.path.join(folder, "MEMORY.md")] = self.text(folder)
        self.put(folder, self.rng.randint(0, 2))
        return folder

    def generate(self):
        rng = self.rng
        self.put(os.path.join(self.home, ".gemini"), rng.randint(0, 2))
        self.put(self.base, rng.randint(0, 1))
        for folder in {self.root, os.path.join(self.root, "a"), self.cwd}:
            self.put(folder, rng.randint(0, 2))
        self.put(os.path.join(self.cwd, "below"), rng.randint(0, 1))
        if rng.random() < 0.5:
            self.memory(rng.choice(["registry", "marker", "hash"]), rng.random() < 0.6)

    def write(self):
        os.makedirs(os.path.join(self.root, ".git"), exist_ok=True)
        os.makedirs(self.cwd, exist_ok=True)
        for path, text in self.files.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)


def hand_picked():
    """The edges, each on its own in the workspace (the project root): (what, `context`
    settings, files relative to it, trust). An untrusted folder is not among them: Gemini
    CLI's `-p` refuses to run in one."""
    names = {"fileName": ["CONTEXT.md", "AGENTS.md"]}
    return [
        ("a missing import", {}, {"GEMINI.md": "x @./gone.md y"}, "env-true"),
        ("an import cycle", {}, {"GEMINI.md": "@./a.md", "a.md": "a @./b.md", "b.md": "b @./a.md"},
         "env-true"),
        ("a file that imports itself", {}, {"GEMINI.md": "me @./GEMINI.md"}, "env-true"),
        ("an import out of the project root", {},
         {"GEMINI.md": "@../secret.md", "../secret.md": "s"}, "env-true"),
        ("an empty file and a blank one", names, {"GEMINI.md": "", "AGENTS.md": " \n\t"},
         "env-true"),
        ("imports six deep", {}, {"GEMINI.md": "@./d1.md", "d7.md": "end",
                                  **{f"d{i}.md": f"d{i} @./d{i + 1}.md" for i in range(1, 7)}},
         "env-true"),
        ("an import in code", {}, {"GEMINI.md": "`@./a.md` and ```\n@./a.md\n``` and @./a.md",
                                   "a.md": "A"}, "env-true"),
        ("a file that is only an import of an empty one", {},
         {"GEMINI.md": "@./e.md", "e.md": ""}, "env-true"),
        ("a name list", names, {"AGENTS.md": "agents", "CONTEXT.md": "context",
                                "GEMINI.md": "gemini"}, "env-true"),
        ("an include directory", {"includeDirectories": ["{base}/other"]},
         {"GEMINI.md": "ws", "../other/GEMINI.md": "other @./x.md", "../other/x.md": "x",
          "../GEMINI.md": "above the project root"}, "env-true"),
        ("the flat import format", {"importFormat": "flat"},
         {"GEMINI.md": "@./a.md @./b.md @./gone.md", "a.md": "A @./b.md", "b.md": "B"},
         "env-true"),
        ("other boundary markers", {"memoryBoundaryMarkers": ["package.json"]},
         {"GEMINI.md": "ws", "../GEMINI.md": "above", "../package.json": "{}"}, "env-true"),
    ]


def project(text):
    """`text` with the memory folder's name as `<project>` (see the module's note)."""
    return TMP.sub("/.gemini/tmp/<project>/", text)


def sent(log, start):
    """(path, text) of each context block in the first model request after `start`."""
    with open(log) as f:
        f.seek(start)
        for line in f:
            r = json.loads(line)
            if ":streamGenerateContent" not in r["path"]:
                continue
            body = r["body"]
            texts = [p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts", [])]
            contents = body.get("contents") or [{}]
            texts += [p.get("text", "") for p in contents[0].get("parts", [])]
            return [(project(p), project(t)) for p, t in BLOCK.findall("\n".join(texts))]
    raise AssertionError("Gemini CLI sent the model no request")


def clean(home):
    gemini = os.path.join(home, ".gemini")
    for name in ("tmp", "history"):
        shutil.rmtree(os.path.join(gemini, name), ignore_errors=True)
    for name in os.listdir(gemini):
        if name.endswith(".md") or name == "projects.json":
            os.remove(os.path.join(gemini, name))


def run(s, h, totals, rng, count=CASES, expect=None):
    """Hand-picked cases and `count` seeded ones in the home `h` of the differential suite."""
    tmp, log, mock, port = warm_bench.start_mock("differential-context", {"suffix": "-none-"})
    gemini_dir = os.path.join(h.home, ".gemini")
    user_file = os.path.join(gemini_dir, "settings.json")
    env_model = {"GEMINI_API_KEY": "interop-fake-key",
                 "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}"}
    # An extension with two context files (one imports a file beside it, one is blank), in
    # every case.
    src = os.path.join(h.tmp, "ctx-kit-src")
    h.write(os.path.join(src, "gemini-extension.json"),
            {"name": "ctx-kit", "version": "1.0.0", "contextFileName": ["KIT.md", "BLANK.md"]})
    for name, text in (("KIT.md", "kit rules @./kit-more.md"), ("kit-more.md", "more"),
                       ("BLANK.md", "\n ")):
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    code, _, err = h.gemctl(["extensions", "install", src, "--consent"], h.tmp, "env-true")
    expect(code == 0, f"installing the extension: {err}")
    cases = [(f"hand-picked: {what}", context, files, trust)
             for what, context, files, trust in hand_picked()]
    for i in range(count):
        name = rng.choice(NAME_LISTS)
        cases.append((f"seed case {i}", {} if name is None else {"fileName": name}, None, "env-true"))
    try:
        for n, (what, context, files, trust) in enumerate(cases):
            base = os.path.join(h.tmp, f"ctx-{n}")
            context = json.loads(json.dumps(context).replace("{base}", base))
            layout = Layout(base, h.home, rng, context.get("fileName"))
            if files is None:
                layout.generate()
            else:
                layout.cwd = layout.root
                layout.files = {os.path.normpath(os.path.join(layout.root, k)): v
                                for k, v in files.items()}

            def one(layout=layout, context=context, trust=trust):
                clean(h.home)
                settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
                if context:
                    settings["context"] = context
                if trust == "untrusted":
                    settings["security"]["folderTrust"] = {"enabled": True}
                h.write(user_file, settings)
                h.write(os.path.join(gemini_dir, "trustedFolders.json"),
                        {layout.cwd: "DO_NOT_TRUST"} if trust == "untrusted" else {})
                layout.write()
                h.gemctl(["mcp", "reload"], layout.cwd, trust)
                code, out, err = h.gemctl(["--json", "config", "context"], layout.cwd, trust)
                expect(code == 0, f"gemctl config context exited {code}: {err}")
                # A file geminid did not read (its error says why) is not the model's.
                ours = [(project(f["path"]), project(f.get("text", "")))
                        for f in json.loads(out)["files"] if "error" not in f]
                start = os.path.getsize(log) if os.path.exists(log) else 0
                code, said = gemini_cli.run([h.gemini, "-p", "hi", "-m", "gemini-2.5-flash"],
                                            dict(h.env(trust), **env_model), layout.cwd, 180)
                expect(code == 0, f"gemini -p exited {code}: {said[-1500:]}")
                theirs = sent(log, start)
                differ = []
                for i in range(max(len(theirs), len(ours))):
                    a = theirs[i] if i < len(theirs) else "(nothing)"
                    b = ours[i] if i < len(ours) else "(nothing)"
                    if a == b:
                        totals["agreed"] += 1
                    else:
                        totals["differ"] += 1
                        differ.append(f"Gemini CLI: {a!r}\n      geminid:    {b!r}")
                setup = json.dumps({"context": context, "trust": trust, "cwd": layout.cwd,
                                    "files": layout.files})
                expect(not differ, f"{setup}:\n      " + "\n      ".join(differ))

            s.check("differential", f"context files, {what}", one)
    finally:
        h.gemctl(["extensions", "uninstall", "ctx-kit"], h.tmp, "env-true")
        clean(h.home)
        h.write(user_file, {})
        h.write(os.path.join(gemini_dir, "trustedFolders.json"), {})
        mock.terminate()
        mock.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
