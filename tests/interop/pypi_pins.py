#!/usr/bin/env python3
"""Artifact pinning of Python servers (issue 72): `uvx`, `uv tool run` and `pipx run` against a
local PEP 503 index, offline.

The index is a static folder (`simple/fixture-srv/index.html` with `#sha256=` links, and the
files) behind `python3 -m http.server --bind 127.0.0.1`. The fixture package is a wheel built
here with `zipfile` (no build backend): its console script writes `$MARKERS/<tag>` when it
starts, then runs the tests' MCP fixture. It is published as 1.0.0, then 1.0.1 (a changed
tool), then 1.0.1 again with other bytes. Each change must be held before its code runs (its
marker never appears), a cold first start records, an unchanged start from uv's warm cache asks
nothing of the index, `warn` runs and says so, `mcp accept` runs the new one.

uv and pipx come from the interop cache (tests/interop/run.sh installs them, pinned, into
$cache/pytools). Run through checks.py, or alone (after `cargo build --workspace --bins`):
    python3 tests/interop/pypi_pins.py --root . --cache .cache/interop
"""

import argparse
import base64
import hashlib
import html
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile

NAME = "fixture-srv"
WAIT = 60.0


class Index:
    """A static PEP 503 index on loopback."""

    def __init__(self, root):
        self.dir = os.path.join(root, "index")
        os.makedirs(os.path.join(self.dir, "files"), exist_ok=True)
        self.log_path = os.path.join(root, "index.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
             "--directory", self.dir],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        # "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        words = line.split()
        port = words[words.index("port") + 1]
        self.url = f"http://127.0.0.1:{port}/simple"

    def pages_asked(self):
        """How many times the project page was asked for."""
        with open(self.log_path) as f:
            return sum(1 for line in f if f"GET /simple/{NAME}/" in line)

    def publish(self, fixture, version, tag, tools):
        """The fixture's wheel `version`, whose start writes `$MARKERS/<tag>` and lists `tools`
        tools, replacing any file of that version; then the project page again."""
        dist = NAME.replace("-", "_")
        mod, info = dist + "_srv", f"{dist}-{version}.dist-info"
        files = {
            f"{mod}/__init__.py": (
                "import os\n"
                "def main():\n"
                f"    open(os.path.join(os.environ['MARKERS'], {tag!r}), 'w').write('started')\n"
                f"    os.execv({fixture!r}, [{fixture!r}, '--tools', {str(tools)!r}])\n"),
            f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n",
            f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: pypi_pins\nRoot-Is-Purelib: true\n"
                             "Tag: py3-none-any\n",
            f"{info}/entry_points.txt": f"[console_scripts]\n{NAME} = {mod}:main\n",
        }
        record = []
        for path, text in files.items():
            digest = hashlib.sha256(text.encode()).digest()
            b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            record.append(f"{path},sha256={b64},{len(text.encode())}")
        record.append(f"{info}/RECORD,,")
        files[f"{info}/RECORD"] = "\n".join(record) + "\n"
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for path, text in files.items():
                z.writestr(zipfile.ZipInfo(path, date_time=(2026, 12, 7, 0, 0, 0)), text)
        filename = f"{dist}-{version}-py3-none-any.whl"
        tmp = os.path.join(self.dir, "files", filename + ".new")
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())
        os.replace(tmp, os.path.join(self.dir, "files", filename))
        links = []
        for fn in sorted(os.listdir(os.path.join(self.dir, "files"))):
            with open(os.path.join(self.dir, "files", fn), "rb") as f:
                h = hashlib.sha256(f.read()).hexdigest()
            links.append(f'<a href="../../files/{html.escape(fn)}#sha256={h}">{html.escape(fn)}</a><br/>')
        page = os.path.join(self.dir, "simple", NAME)
        os.makedirs(page, exist_ok=True)
        with open(os.path.join(page, "index.html.new"), "w") as f:
            f.write("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
        os.replace(os.path.join(page, "index.html.new"), os.path.join(page, "index.html"))
        return "sha256:" + hashlib.sha256(buf.getvalue()).hexdigest()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


class Servers:
    """The servers of one home: written to ~/.gemini/settings.json and geminid's own
    servers.json (where `artifactPinning` lives), watched in `gemctl mcp list`."""

    def __init__(self, s):
        self.s = s
        self.user, self.own = {}, {}

    def write(self):
        with open(os.path.join(self.s.home, ".gemini", "settings.json"), "w") as f:
            json.dump({"mcpServers": self.user}, f, indent=2)
        own = os.path.join(self.s.home, ".gemini", "geminid")
        os.makedirs(own, exist_ok=True)
        with open(os.path.join(own, "servers.json"), "w") as f:
            json.dump({"mcpServers": self.own}, f, indent=2)

    def status(self, name):
        for srv in self.s.json("mcp", "list"):
            if srv["name"] == name:
                return srv
        return None

    def reaches(self, name, state):
        deadline = time.time() + WAIT
        st = None
        while time.time() < deadline:
            st = self.status(name)
            if st and st["state"] == state:
                return st
            time.sleep(0.1)  # Poll: gemctl has no wait-for-state; each poll is a process.
        raise AssertionError(f"{name} never reached {state}: {json.dumps(st)}")

    def restart(self, name):
        self.s.gemctl("mcp", "restart", name, check=False)


def run(s, fixture=None):
    """The checks, reported through `s.check` (checks.Suite), each on a home of its own."""
    import checks
    tools = os.path.join(s.cache, "pytools", "bin")
    if not os.path.exists(os.path.join(tools, "uv")):
        raise RuntimeError(f"uv is not installed in {tools}: run tests/interop/run.sh --install-only")
    own = checks.Suite(s.root, s.cache)
    index = Index(own.tmp)
    fixture = fixture or os.path.join(s.root, "target", "debug", "mcp-fixture")
    try:
        _run(s, own, index, tools, fixture)
    finally:
        own.stop_daemon()
        index.stop()
        left = own.leftovers()
        for pid in left:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        if not left:
            shutil.rmtree(own.tmp, ignore_errors=True)


def _check(s, own, server, name, fn):
    """`s.check`, with the log of this home's server on a failure."""
    try:
        fn()
        s.passed += 1
        print(f"ok      {server}: {name}", flush=True)
    except Exception as e:  # noqa: BLE001
        s.failed += 1
        print(f"FAILED  {server}: {name}: {e}", flush=True)
        log = own.server_log(server).replace("\n", "\n  ")
        print(f"  --- its log ---\n  {log}", flush=True)


def _run(s, own, index, tools, fixture):
    started = time.time()
    markers = {k: os.path.join(own.tmp, "markers", k) for k in ("uvx", "warn", "pipx")}
    for d in markers.values():
        os.makedirs(d)

    def ran(server, tag):
        return os.path.exists(os.path.join(markers[server], tag))

    def env(server, **extra):
        return dict({"UV_DEFAULT_INDEX": index.url, "UV_PYTHON_DOWNLOADS": "never",
                     "UV_CACHE_DIR": os.path.join(own.tmp, f"uv-cache-{server}"),
                     "MARKERS": markers[server], "PATH": f"{tools}:{os.environ['PATH']}"}, **extra)

    v100 = index.publish(fixture, "1.0.0", "v100", 1)
    servers = Servers(own)
    servers.user["uvx"] = {"command": os.path.join(tools, "uvx"), "args": [NAME],
                           "env": env("uvx"), "timeout": 30000}
    servers.write()
    own.start_daemon()
    facts = {}

    def cold_first_start_records():
        own.gemctl("mcp", "start", check=False)
        st = servers.reaches("uvx", "connected")
        a = st.get("artifact") or {}
        pinned = a.get("pinned") or {}
        expect(pinned.get("kind") == "pypi" and pinned.get("version") == "1.0.0", f"recorded {a}")
        expect(pinned.get("digest") == v100 and a.get("firstUse"), f"recorded {a} (the wheel is {v100})")
        expect(ran("uvx", "v100"), "1.0.0 did not run")

    _check(s, own, "uvx", "a cold first start runs and records the exact version and the wheel's sha256",
            cold_first_start_records)

    def newer_release_is_not_run():
        index.publish(fixture, "1.0.1", "v101", 2)
        asked = index.pages_asked()
        t = time.time()
        servers.restart("uvx")
        servers.reaches("uvx", "connected")
        facts["warm restart"] = time.time() - t
        expect(not ran("uvx", "v101"), "1.0.1 ran over the recorded 1.0.0")
        # uv's cache holds the recorded wheel: neither geminid nor uv (--offline) asked.
        expect(index.pages_asked() == asked, "an unchanged start asked the index")

    _check(s, own, "uvx", "a newer release is not run: the recorded version runs from uv's cache, offline",
            newer_release_is_not_run)

    def new_version_is_held_until_accepted():
        servers.user["uvx"]["args"] = [f"{NAME}==1.0.1"]
        servers.write()
        # Another entry is another server (its identity): it starts with the session's next start.
        own.gemctl("mcp", "reload", check=False)
        own.gemctl("mcp", "start", check=False)
        st = servers.reaches("uvx", "blocked")
        expect(not ran("uvx", "v101"), "1.0.1 ran before it was accepted")
        a = st.get("artifact") or {}
        expect(a.get("held") and (a.get("differs") or {}).get("version") == "1.0.1", f"held {a}")
        _, out, _ = own.gemctl("mcp", "review", "uvx")
        expect(f"{NAME} 1.0.0" in out and f"{NAME} 1.0.1" in out, f"review: {out}")
        own.gemctl("mcp", "accept", "uvx")
        servers.reaches("uvx", "connected")
        expect(ran("uvx", "v101"), "the accepted 1.0.1 did not run")

    _check(s, own, "uvx", "a new version the entry asks for is held before it runs; review shows "
            "1.0.0 -> 1.0.1; accept runs it", new_version_is_held_until_accepted)

    def republished_is_held():
        evil = index.publish(fixture, "1.0.1", "evil", 2)
        # uv's cache still holds the recorded bytes: those run, offline.
        servers.restart("uvx")
        servers.reaches("uvx", "connected")
        expect(not ran("uvx", "evil"), "the republished bytes ran from a warm cache")
        # A cleaned cache (or a new machine): the index's sha256 differs, held.
        shutil.rmtree(env("uvx")["UV_CACHE_DIR"])
        servers.restart("uvx")
        st = servers.reaches("uvx", "blocked")
        expect(not ran("uvx", "evil"), "the republished 1.0.1 ran")
        a = st.get("artifact") or {}
        old, new = a.get("pinned") or {}, a.get("differs") or {}
        expect(old.get("version") == new.get("version") == "1.0.1", f"{a}")
        expect(new.get("digest") == evil and old.get("digest") != evil, f"{a}")
        _, out, _ = own.gemctl("mcp", "review", "uvx")
        expect(old.get("digest", "-") in out and evil in out, f"review: {out}")

    _check(s, own, "uvx", "1.0.1 republished with other bytes is held before it runs",
            republished_is_held)

    def warn_runs_and_says_so():
        # `uv tool run --from` in geminid's own servers file, artifactPinning warn.
        servers.own["warn"] = {"command": os.path.join(tools, "uv"),
                               "args": ["tool", "run", "--from", NAME, NAME],
                               "env": env("warn"), "artifactPinning": "warn", "timeout": 30000}
        servers.write()
        own.gemctl("mcp", "start", check=False)
        st = servers.reaches("warn", "connected")
        pinned = (st.get("artifact") or {}).get("pinned") or {}
        expect(pinned.get("version") == "1.0.1" and ran("warn", "evil"), f"{st.get('artifact')}")
        index.publish(fixture, "1.0.1", "other", 3)
        shutil.rmtree(env("warn")["UV_CACHE_DIR"])
        servers.restart("warn")
        deadline = time.time() + WAIT
        while not ran("warn", "other") and time.time() < deadline:
            time.sleep(0.1)  # Poll: the marker appears when the new bytes start.
        expect(ran("warn", "other"), "warn held the republished bytes")
        st = servers.reaches("warn", "connected")
        a = st.get("artifact") or {}
        expect(not a.get("held") and a.get("differs"), f"{a}")
        _, log, _ = own.gemctl("mcp", "logs", "warn", "-n", "50")
        expect("artifact pinning is warn" in log, f"log: {log}")

    _check(s, own, "warn", "uv tool run under warn starts a republished version and says so", warn_runs_and_says_so)

    def pipx_pins_too():
        servers.user["pipx"] = {"command": os.path.join(tools, "pipx"), "args": ["run", NAME],
                                "env": env("pipx", PIPX_HOME=os.path.join(own.tmp, "pipx")),
                                "timeout": 30000}
        servers.write()
        own.gemctl("mcp", "start", check=False)
        st = servers.reaches("pipx", "connected")
        pinned = (st.get("artifact") or {}).get("pinned") or {}
        expect(pinned.get("version") == "1.0.1" and ran("pipx", "other"), f"{st.get('artifact')}")
        index.publish(fixture, "1.0.1", "pipx-evil", 4)
        servers.restart("pipx")
        st = servers.reaches("pipx", "blocked")
        expect(not ran("pipx", "pipx-evil"), "pipx ran the republished 1.0.1")
        new = (st.get("artifact") or {}).get("differs") or {}
        expect(new.get("digest") != pinned.get("digest"), f"{st.get('artifact')}")

    _check(s, own, "pipx", "pipx run records and holds a republished version", pipx_pins_too)
    print(f"pypi_pins: took {time.time() - started:.1f} s; a warm unchanged restart "
          f"{facts.get('warm restart', 0) * 1000:.0f} ms (gemctl restart to connected)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cache", required=True)
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import checks
    s = checks.Suite(os.path.abspath(a.root), os.path.abspath(a.cache))
    try:
        run(s)
    finally:
        shutil.rmtree(s.tmp, ignore_errors=True)
    print(f"{s.passed} passed, {s.failed} failed", flush=True)
    sys.exit(1 if s.failed else 0)


if __name__ == "__main__":
    main()
