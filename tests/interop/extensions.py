"""Interop checks of extensions with Gemini CLI 0.61 in the same home: what geminid installs,
Gemini CLI lists and updates (its integrity check of geminid's records passes: both use the
key in Gemini CLI's keychain, on this machine its FileKeychain file); what Gemini CLI installs,
geminid verifies. Run from checks.py on the same daemon and home.
"""

import json
import os

import gemini_cli
import git_http


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def run(s):
    gemini = os.path.join(s.cache, "clients", "node_modules", ".bin", "gemini")
    env = dict(s.env(), GEMINI_CLI_NO_RELAUNCH="true")
    src_root = os.path.join(s.tmp, "ext-src")

    def g(*args):
        return gemini_cli.run([gemini, *args], env, s.ws, 120)

    def make(name, version):
        d = os.path.join(src_root, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "gemini-extension.json"), "w") as f:
            json.dump({"name": name, "version": version}, f)
        with open(os.path.join(d, "GEMINI.md"), "w") as f:
            f.write(f"{name} {version}\n")
        return d

    def ext(name):
        # `extensions verify` exits 1 while one is tampered: its answer is read all the same.
        _, out, _ = s.gemctl("--json", "extensions", "verify", check=False)
        for e in json.loads(out)["extensions"]:
            if e["name"] == name:
                return e
        raise AssertionError(f"geminid does not list {name}")

    def edited_is_tampering(name):
        """Someone else appends to the installed GEMINI.md: geminid must stop loading it."""
        installed = os.path.join(s.home, ".gemini", "extensions", name, "GEMINI.md")
        with open(installed, "a") as f:
            f.write("appended by someone else\n")
        e = ext(name)
        expect(e["integrity"] == "tampered" and not e["active"], e)

    def by_geminid():
        src = make("by-geminid", "1.0.0")
        s.gemctl("extensions", "install", src, "--consent")
        code, out = g("extensions", "list")
        expect(code == 0 and "by-geminid (1.0.0)" in out, out[-1500:])
        make("by-geminid", "1.1.0")
        code, out = g("extensions", "update", "by-geminid")
        expect("cannot be verified" not in out and "1.0.0 → 1.1.0" in out, out[-1500:])
        # An update from its recorded (signed) local source: legitimate, no accept needed.
        e = ext("by-geminid")
        expect(e["integrity"] == "verified" and e["version"] == "1.1.0" and e["active"], e)
        # Anyone else's edit of the installed files is still tampering.
        edited_is_tampering("by-geminid")
        s.gemctl("extensions", "accept", "by-geminid")
        expect(ext("by-geminid")["integrity"] == "verified", ext("by-geminid"))

    s.check("extensions", "installed by geminid, updated by Gemini CLI: legitimate (no accept); an edit is tampering", by_geminid)

    def by_gemini():
        src = make("by-gemini", "2.0.0")
        code, out = g("extensions", "install", src, "--consent")
        expect(code == 0 and "installed successfully" in out, out[-1500:])
        e = ext("by-gemini")
        expect(e["integrity"] in ("verified", "recorded") and e["active"], e)
        expect(any(f.endswith("by-gemini/GEMINI.md") for f in e["contextFiles"]), e)
        # Gemini CLI updates its own install: legitimate to geminid too.
        make("by-gemini", "2.1.0")
        code, out = g("extensions", "update", "by-gemini")
        expect("2.0.0 → 2.1.0" in out, out[-1500:])
        e = ext("by-gemini")
        expect(e["integrity"] == "verified" and e["version"] == "2.1.0" and e["active"], e)

    s.check("extensions", "installed and updated by Gemini CLI: geminid verifies its record with the shared key and takes the update", by_gemini)

    # Git sources, served over smart HTTP on 127.0.0.1 (Gemini CLI takes no file:// URL).
    git_root = os.path.join(s.tmp, "git-root")
    os.makedirs(git_root, exist_ok=True)
    server = git_http.GitHttp(git_root)

    def repo(name, version):
        """The repository `name.git` served, at `version`; its URL."""
        manifest = json.dumps({"name": name, "version": version})
        return server.publish(os.path.join(s.tmp, "git-work", name), name,
                              {"gemini-extension.json": manifest, "GEMINI.md": f"{name} {version}\n"})

    def git_by_geminid():
        url = repo("git-by-geminid", "1.0.0")
        s.gemctl("extensions", "install", url, "--consent")
        expect(ext("git-by-geminid")["integrity"] == "verified", ext("git-by-geminid"))
        repo("git-by-geminid", "1.1.0")
        code, out = g("extensions", "update", "git-by-geminid")
        expect(code == 0 and "1.0.0 → 1.1.0" in out, out[-1500:])
        # The repository cloned again Gemini CLI's way gives these files: legitimate.
        e = ext("git-by-geminid")
        expect(e["integrity"] == "verified" and e["version"] == "1.1.0" and e["active"], e)
        edited_is_tampering("git-by-geminid")

    def git_by_gemini():
        url = repo("git-by-gemini", "3.0.0")
        code, out = g("extensions", "install", url, "--consent")
        expect(code == 0 and "installed successfully" in out, out[-1500:])
        e = ext("git-by-gemini")
        expect(e["integrity"] in ("verified", "recorded") and e["active"], e)
        repo("git-by-gemini", "3.1.0")
        code, out = g("extensions", "update", "git-by-gemini")
        expect(code == 0 and "3.0.0 → 3.1.0" in out, out[-1500:])
        e = ext("git-by-gemini")
        expect(e["integrity"] == "verified" and e["version"] == "3.1.0" and e["active"], e)
        # geminid updates what Gemini CLI installed from git, and Gemini CLI sees it.
        repo("git-by-gemini", "3.2.0")
        s.gemctl("extensions", "update", "git-by-gemini")
        code, out = g("extensions", "list")
        expect(code == 0 and "git-by-gemini (3.2.0)" in out, out[-1500:])

    try:
        s.check("extensions", "installed by geminid from git, updated by Gemini CLI: legitimate (cloned again to compare); an edit is tampering", git_by_geminid)
        s.check("extensions", "installed and updated from git by Gemini CLI, then by geminid: legitimate each time", git_by_gemini)
    finally:
        server.stop()
