"""Interop checks of skills with Gemini CLI 0.61 in the same home: a skill geminid installs,
Gemini CLI lists; one Gemini CLI installs, geminid lists; `skills.disabled` written by either
is honoured by the other (one settings file, read in place). Run from checks.py on the same
daemon and home.
"""

import json
import os

import gemini_cli


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def run(s):
    gemini = os.path.join(s.cache, "clients", "node_modules", ".bin", "gemini")
    env = dict(s.env(), GEMINI_CLI_NO_RELAUNCH="true")
    src_root = os.path.join(s.tmp, "skill-src")

    def g(*args):
        return gemini_cli.run([gemini, *args], env, s.ws, 180)

    def make(name, description):
        d = os.path.join(src_root, name)
        os.makedirs(os.path.join(d, "scripts"), exist_ok=True)
        with open(os.path.join(d, "SKILL.md"), "w") as f:
            # A description with colons: Gemini CLI's line reader is what reads it.
            f.write(f"---\nname: {name}\ndescription: {description}\n---\nSteps of {name}.\n")
        with open(os.path.join(d, "scripts", "run.sh"), "w") as f:
            f.write("echo run\n")
        return d

    def ours(name):
        _, out, _ = s.gemctl("--json", "skills", "list")
        for sk in json.loads(out)["skills"]:
            if sk["name"] == name:
                return sk
        raise AssertionError(f"geminid does not list {name}: {out[-1500:]}")

    def gemini_state(out, name):
        for line in out.splitlines():
            if line.startswith(name + " ["):
                return line[len(name) + 1:]
        raise AssertionError(f"Gemini CLI does not list {name}: {out[-1500:]}")

    def by_geminid():
        src = make("by-geminid-skill", "Use it for: interop, checks")
        s.gemctl("skills", "install", src, "--consent")
        code, out = g("skills", "list")
        expect(code == 0 and gemini_state(out, "by-geminid-skill").startswith("[Enabled]"), out[-1500:])
        expect("Use it for: interop, checks" in out, out[-1500:])
        s.gemctl("skills", "disable", "by-geminid-skill", "--scope", "user")
        code, out = g("skills", "list")
        expect(gemini_state(out, "by-geminid-skill").startswith("[Disabled]"), out[-1500:])
        s.gemctl("skills", "enable", "by-geminid-skill")
        code, out = g("skills", "list")
        expect(gemini_state(out, "by-geminid-skill").startswith("[Enabled]"), out[-1500:])

    s.check("skills", "installed and disabled by geminid: Gemini CLI lists it, disabled, then enabled", by_geminid)

    def by_gemini():
        src = make("by-gemini-skill", "Installed by Gemini CLI")
        code, out = g("skills", "install", src, "--consent")
        expect(code == 0 and "by-gemini-skill" in out, out[-1500:])
        sk = ours("by-gemini-skill")
        expect(sk["enabled"] and sk["source"]["scope"] == "user", sk)
        expect(sk["location"].endswith(".gemini/skills/by-gemini-skill/SKILL.md"), sk)
        # Gemini CLI's default scope for disable is the workspace's settings.
        code, out = g("skills", "disable", "by-gemini-skill")
        expect(code == 0, out[-1500:])
        expect(not ours("by-gemini-skill")["enabled"], "geminid still has it enabled")
        code, _, err = s.gemctl("skills", "activate", "by-gemini-skill", check=False)
        expect(code != 0 and "disabled" in err, err)
        code, out = g("skills", "enable", "by-gemini-skill")
        expect(code == 0 and ours("by-gemini-skill")["enabled"], out[-1500:])

    s.check("skills", "installed and disabled by Gemini CLI: geminid lists it, disabled, then enabled", by_gemini)
