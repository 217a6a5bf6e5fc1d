"""The differential suite's custom-command cases: what a command file's prompt becomes and
whether its `!{...}` runs, Gemini CLI 0.61's `gemini -p "/name args"` (its model a loopback
mock; `--approval-mode` each of default, auto_edit, yolo and plan) against geminid's
`gemctl commands expand --no-confirm` in a session of the same mode, headless.

A case writes one command file in `~/.gemini/commands/`, maybe a file it includes with `@{...}`
(one that documents `!{...}` and `{{args}}` among them), and maybe an allowed prefix
(`tools.allowed: ["run_shell_command(echo)"]` in the user's settings, or a policy rule with
`commandPrefix = "echo"`). The shell lines chain, redirect and substitute (`&&`, `;`, `|`,
`||`, `>`, `>>`, `$(...)`, backticks, a subshell), and the arguments carry quotes, spaces to
trim and shell text. Compared, each a row: whether the shell ran (a marker file the lines
make) and the prompt (the text Gemini CLI sent the mock model, nothing when `-p` stopped;
geminid's expansion, nothing when it refused or would ask). Ten and more hand-picked cases,
then `GEMINID_DIFF_COMMAND_CASES` (default 20) seeded ones. A line that is not plain shell
(`$VAR`, arithmetic, a comment, ...) and only a prefix allows is asked about by geminid where
Gemini CLI runs it (README_PLAIN).
"""

import json
import os
import re
import shutil

import gemini_cli
import warm_bench

NAME = "dc"
MODES = {"default": "default", "auto_edit": "autoEdit", "yolo": "yolo", "plan": "plan"}
DOC = "Docs: run !{touch x} with {{args}}."
NOTES = "plain notes"
# README lines ("Where geminid differs from Gemini CLI") that explain a difference.
README_FILES = ("A file a custom command includes with `@{...}` is text: its `!{...}` never run "
                "and its `{{args}}` stays, even when the command's own prompt has them")
README_SIGNAL = ("Gemini CLI 0.61's `gemini -p` says `[Shell command '...' terminated by signal 0]` "
                 "after each `!{...}` that exited 0 and drops the last new line of its output")
README_PLAIN = ("geminid asks about any shell line of a custom command's `!{...}` that is not plain "
                "when only a prefix, a pattern or `tools.allowed` allows it")


def not_plain(line):
    """What makes a line not plain (commands/plain.rs), roughly: enough to tell which rows the
    README line explains."""
    rest = line.replace("{{args}}", "").replace("&&", "").replace("&>", "")
    return re.search(r"[$`\\#(){}&]|<<", rest) is not None


SHELL_LINES = ["echo A", "echo A && touch x", "echo A; touch x", "echo A | tee x",
               "echo A || touch x", "echo A > x", "echo A >> x", "echo $(touch x)",
               "echo `touch x`", "echo A && (touch x)", "echo 'A && touch x'", "touch x",
               "printf B > x", "echo \"$(touch x)\""]
ARGS = ["", "a", "  a   b  ", "it's", 'say "hi"', "$(touch x)", "a; touch x", "\tspaced\t out "]


def hand_picked():
    """(mode, prompt, args, allowed prefix, included files): the edges, each on its own."""
    touch = "M !{touch x}"
    out = [(mode, touch, "", None, {}) for mode in MODES]
    # Arguments that close the author's quotes: Gemini CLI checks each command of the line
    # with them pasted in (`touch` is asked, or denied in plan mode).
    closing = "{{args}} -> !{echo '{{args}} && touch x'}"
    out += [(mode, closing, "a; touch x", "policy", {}) for mode in ("default", "plan")]
    out += [("default", "!{echo A}", "", None, {}),
            ("yolo", "!{echo A > x}", "", None, {})]
    for line in SHELL_LINES[:10]:
        out.append(("default", "!{" + line + "}", "", "tools", {}))
    for line in ("echo A", "echo A && touch x", "echo A > x", "echo `touch x`"):
        out.append(("default", "!{" + line + "}", "", "policy", {}))
    out += [
        ("auto_edit", "!{echo A > x}", "", "tools", {}),
        ("default", "Hi {{args}}!", "  a   b  ", None, {}),
        ("default", "P", " x  y ", None, {}),
        ("yolo", "[{{args}}] !{echo {{args}}}", 'it\'s "q" $(touch x)', None, {}),
        ("yolo", "See @{doc.md}", "zz", None, {"doc.md": DOC}),
        ("yolo", "!{echo hi} @{doc.md} {{args}}", "q", None, {"doc.md": DOC}),
        ("yolo", "{{args}}: @{doc.md}", "q", None, {"doc.md": DOC}),
        # Not plain: Gemini CLI runs these under an allowed echo, geminid asks.
        ("default", "!{echo $HOME}", "", "tools", {}),
        ("auto_edit", "!{echo a # b}", "", "policy", {}),
        ("default", "!{echo \\$x}", "", "policy", {}),
        ("yolo", "!{echo $((1+2))}", "", "tools", {}),
    ]
    return out


def case(rng):
    mode = rng.choice(list(MODES))
    allowed = rng.choice([None, "tools", "policy"])
    line = rng.choice(SHELL_LINES)
    if rng.random() < 0.3:
        line = line.replace("A", "{{args}}", 1)
    prompt = rng.choice(["", "Run: ", "{{args}} -> "]) + "!{" + line + "}"
    files = {}
    if rng.random() < 0.3:
        prompt += " @{notes.txt}"
        files["notes.txt"] = NOTES
    if rng.random() < 0.3:
        prompt += " {{args}}"
    return mode, prompt, rng.choice(ARGS), allowed, files


def sent_prompt(log, start):
    """The text of the last turn of Gemini CLI's first model request after `start` in the
    mock's log (the prompt it submitted), or None when it sent none."""
    if not os.path.exists(log):
        return None
    with open(log) as f:
        f.seek(start)
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if ":streamGenerateContent" not in r["path"]:
                continue
            contents = r["body"].get("contents") or []
            if not contents:
                return None
            text = "".join(p.get("text", "") for p in contents[-1].get("parts", []))
            # `-p` puts its session context in front of the prompt, in the same turn.
            return re.sub(r"\A<session_context>.*?</session_context>", "", text, flags=re.S)
    return None


SIGNAL_0 = re.compile(r"\n\[Shell command '.*?' terminated by signal 0\]")


def accepted(prompt, files, theirs, ours):
    """The README line that explains a difference of this case, if one does."""
    a, b = theirs["prompt"], ours["prompt"]
    if a and b is not None and SIGNAL_0.search(a) and (
            "".join(SIGNAL_0.sub("", a).split()) == "".join(b.split())):
        return README_SIGNAL
    lines = re.findall(r"!\{(.*?)\}(?!\})", prompt)
    if a and b is None and not theirs["ran"] and any(not_plain(x) for x in lines):
        return README_PLAIN
    if any("!{" in t or "{{args}}" in t for t in files.values()) and (
            "!{" in prompt or "{{args}}" in prompt):
        return README_FILES
    return None


def run(s, h, totals, rng, count, expect):
    """The hand-picked cases and `count` seeded ones in the home `h` of the differential suite."""
    with open(os.path.join(s.root, "README.md")) as f:
        readme = " ".join(f.read().split())
    for line in (README_FILES, README_SIGNAL, README_PLAIN):
        expect(line in readme, f"the README no longer says: {line}")
    tmp, log, mock, port = warm_bench.start_mock("differential-commands",
                                                 {"suffix": "no_such_tool", "args": {}})
    gemini_dir = os.path.join(h.home, ".gemini")
    user_file = os.path.join(gemini_dir, "settings.json")
    policy_file = os.path.join(gemini_dir, "policies", "differential-commands.toml")
    command_file = os.path.join(gemini_dir, "commands", f"{NAME}.toml")
    env = dict(h.env("env-true"), GEMINI_API_KEY="interop-fake-key",
               GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}")
    cases = [(f"hand-picked {i}", *c) for i, c in enumerate(hand_picked())]
    cases += [(f"seed case {i}", *case(rng)) for i in range(count)]
    try:
        for n, (what, mode, prompt, args, allowed, files) in enumerate(cases):
            def one(n=n, mode=mode, prompt=prompt, args=args, allowed=allowed, files=files):
                ws = os.path.join(h.tmp, f"ws-commands-{n}")
                os.makedirs(ws, exist_ok=True)
                for name, text in files.items():
                    with open(os.path.join(ws, name), "w") as f:
                        f.write(text)
                settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
                if allowed == "tools":
                    settings["tools"] = {"allowed": ["run_shell_command(echo)"]}
                h.write(user_file, settings)
                h.write(os.path.join(gemini_dir, "trustedFolders.json"), {})
                os.makedirs(os.path.dirname(policy_file), exist_ok=True)
                if allowed == "policy":
                    with open(policy_file, "w") as f:
                        f.write('[[rule]]\ntoolName = "run_shell_command"\n'
                                'commandPrefix = "echo"\ndecision = "allow"\npriority = 100\n')
                elif os.path.exists(policy_file):
                    os.remove(policy_file)
                os.makedirs(os.path.dirname(command_file), exist_ok=True)
                with open(command_file, "w") as f:
                    f.write(f"prompt = {json.dumps(prompt)}\n")
                marker = os.path.join(ws, "x")

                def fresh():
                    if os.path.exists(marker):
                        os.remove(marker)

                fresh()
                start = os.path.getsize(log) if os.path.exists(log) else 0
                argv = [h.gemini, "-p", f"/{NAME} {args}".rstrip(), "-m", "gemini-2.5-flash",
                        "--approval-mode", mode]
                code, out = gemini_cli.run(argv, env, ws, 120)
                theirs = {"ran": os.path.exists(marker), "prompt": sent_prompt(log, start)}
                fresh()

                h.gemctl(["mcp", "reload"], ws, "env-true")
                code, _, err = h.gemctl(["session", "update", "--mode", MODES[mode], "--headless"],
                                        ws, "env-true")
                expect(code == 0, f"gemctl session update: {err}")
                argv = ["--json", "commands", "expand", "--no-confirm", NAME]
                if args:
                    argv.append(args)
                code, got, err = h.gemctl(argv, ws, "env-true")
                r = json.loads(got) if code == 0 or got.strip().startswith("{") else {}
                refused = code != 0 or bool(r.get("needsConfirmation"))
                ours = {"ran": os.path.exists(marker), "prompt": None if refused else r.get("text")}
                fresh()

                differ = []
                why = None
                for field in ("ran", "prompt"):
                    if theirs[field] == ours[field]:
                        totals["agreed"] += 1
                        continue
                    why = why or accepted(prompt, files, theirs, ours)
                    if why:
                        totals["accepted"] += 1
                    else:
                        totals["differ"] += 1
                        differ.append(f"{field}: Gemini CLI {theirs[field]!r}, "
                                      f"geminid {ours[field]!r}")
                setup = json.dumps({"mode": mode, "prompt": prompt, "args": args,
                                    "allowed": allowed, "files": files})
                expect(not differ, f"{setup}:\n      " + "\n      ".join(differ)
                       + (f"\n      Gemini CLI: {out[-600:]}\n      geminid: {err[-400:]}"
                          if differ else ""))

            s.check("differential", f"commands in -p, {what}", one)
    finally:
        for path in (policy_file, command_file):
            if os.path.exists(path):
                os.remove(path)
        h.write(user_file, {})
        mock.terminate()
        mock.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
