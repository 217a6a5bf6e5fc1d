#!/usr/bin/env python3
"""Artifact pinning against a real npm registry (issue 72): verdaccio (run.sh installs it into
.cache/interop/registry; it needs Node 22, the suite's .cache/interop/node22) on 127.0.0.1 with a
config this check writes: its storage in the check's temporary folder, htpasswd auth, no
uplinks, so it is offline. A user is made against its htpasswd (`PUT /-/user/...`), its token
written to an npmrc of the check's own, and a fixture MCP server package (a few lines of Node, no
dependencies, that writes a marker file named for its build when it starts) is published with
`npm publish`; the server's entry is `npx -y fixture-srv`:

1. 1.0.0: a first start from a cold npx cache runs it and records 1.0.0 with the registry's
   integrity.
2. 1.0.1 with a changed tool, tagged latest: a restart runs the recorded 1.0.0 (1.0.1's marker
   never appears); `gemctl mcp update` offers 1.0.1 old → new with its publish time, not run.
3. `gemctl mcp accept` takes it: 1.0.1 runs, and its changed tool is held by the definition pins.
4. 1.0.1 unpublished (`npm unpublish fixture-srv@1.0.1 --force`) and published again with other
   bytes (verdaccio takes a republish of an unpublished version; npmjs.com refuses one): with
   npx's cache kept, the recorded bytes run from it; with the cache gone (a new machine), the
   server is held before the new bytes run, and `gemctl mcp review` shows the same version with
   two digests.

The daemon is one of this check's own, in a home of its own. Each step prints its time.

Alone: python3 tests/interop/artifact_npm.py --root . --cache .cache/interop
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import homes

SERVER_JS = r"""#!/usr/bin/env node
// A stdio MCP server with one tool; it writes $MARKERS/<build> when it starts.
const fs = require('fs'), path = require('path'), readline = require('readline');
fs.writeFileSync(path.join(process.env.MARKERS, '%(build)s'), 'started');
const tool = {name: 'echo', description: '%(description)s',
              inputSchema: {type: 'object', properties: {text: {type: 'string'}}}};
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
readline.createInterface({input: process.stdin}).on('line', (line) => {
  let m; try { m = JSON.parse(line); } catch (e) { return; }
  if (m.id === undefined) return;
  if (m.method === 'initialize') {
    send({jsonrpc: '2.0', id: m.id, result: {protocolVersion: m.params.protocolVersion,
      capabilities: {tools: {}}, serverInfo: {name: 'fixture-srv', version: '%(version)s'}}});
  } else if (m.method === 'tools/list') {
    send({jsonrpc: '2.0', id: m.id, result: {tools: [tool]}});
  } else if (m.method === 'tools/call') {
    send({jsonrpc: '2.0', id: m.id, result: {content: [{type: 'text', text: '%(build)s'}]}});
  } else if (m.method === 'ping') {
    send({jsonrpc: '2.0', id: m.id, result: {}});
  } else {
    send({jsonrpc: '2.0', id: m.id, error: {code: -32601, message: 'no ' + m.method}});
  }
});
"""


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def until(what, fn, timeout=90.0):
    """fn() until it returns something truthy."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (OSError, ValueError, KeyError) as e:
            last = e
        time.sleep(0.2)  # Poll: a start the daemon reports only through mcp list.
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last})")


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


class Own:
    """The check's own verdaccio and daemon."""

    def __init__(self, s):
        self.s = s
        self.tmp = tempfile.mkdtemp(prefix="geminid-npmreg-")
        homes.make(self.tmp)
        self.ws = os.path.join(self.tmp, "ws")
        self.markers = os.path.join(self.tmp, "markers")
        self.cache = os.path.join(self.tmp, "npm-cache")
        for d in (self.ws, self.markers):
            os.makedirs(d)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.npmrc = os.path.join(self.tmp, "npmrc")
        self.env = homes.env(
            self.tmp, s.bin, npm_config_registry=self.url, npm_config_cache=self.cache,
            npm_config_userconfig=self.npmrc, npm_config_update_notifier="false",
            npm_config_audit="false", npm_config_fund="false", MARKERS=self.markers)
        self.children = []

    def start_registry(self):
        config = os.path.join(self.tmp, "verdaccio.yaml")
        with open(config, "w") as f:
            f.write(f"storage: {os.path.join(self.tmp, 'storage')}\n"
                    f"auth:\n  htpasswd:\n    file: {os.path.join(self.tmp, 'htpasswd')}\n"
                    "    max_users: 1\n"
                    "uplinks: {}\n"
                    "packages:\n  '**':\n    access: $all\n    publish: $authenticated\n"
                    "    unpublish: $authenticated\n"
                    "log: {type: stdout, format: pretty, level: warn}\n")
        node = os.path.join(self.s.cache, "node22", "node_modules", ".bin", "node")
        verdaccio = os.path.join(self.s.cache, "registry", "node_modules", "verdaccio", "bin",
                                 "verdaccio")
        log = open(os.path.join(self.tmp, "verdaccio.log"), "w")
        self.children.append(subprocess.Popen(
            [node, verdaccio, "--config", config, "--listen", f"127.0.0.1:{self.port}"],
            env=self.env, cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=log, stderr=log))
        until("verdaccio's ping", lambda: urllib.request.urlopen(self.url + "-/ping", timeout=2))
        body = json.dumps({"name": "tester", "password": "a-test-password"}).encode()
        req = urllib.request.Request(self.url + "-/user/org.couchdb.user:tester", data=body,
                                     method="PUT", headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            token = json.load(r)["token"]
        with open(self.npmrc, "w") as f:
            f.write(f"//127.0.0.1:{self.port}/:_authToken={token}\n")

    def npm(self, *args, cwd=None):
        p = subprocess.run(["npm", *args], env=dict(self.env, npm_config_cache=self.cache + "-pub"),
                           cwd=cwd or self.tmp, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"npm {' '.join(args)}: {p.stderr.strip()[-600:]}")
        return p.stdout

    def publish(self, version, build, description):
        src = os.path.join(self.tmp, f"pkg-{build}")
        os.makedirs(src)
        with open(os.path.join(src, "package.json"), "w") as f:
            json.dump({"name": "fixture-srv", "version": version,
                       "bin": {"fixture-srv": "srv.js"}}, f)
        with open(os.path.join(src, "srv.js"), "w") as f:
            f.write(SERVER_JS % {"build": build, "description": description, "version": version})
        self.npm("publish", cwd=src)

    def integrity(self, version):
        return json.loads(self.npm("view", "--json", f"fixture-srv@{version}", "dist.integrity"))

    def start_daemon(self):
        with open(os.path.join(self.tmp, "home", ".gemini", "settings.json"), "w") as f:
            json.dump({"mcpServers": {"srv": {"command": "npx", "args": ["-y", "fixture-srv"],
                                              "timeout": 60000}}}, f)
        log = open(os.path.join(self.tmp, "geminid.log"), "w")
        self.children.append(subprocess.Popen(
            [os.path.join(self.s.bin, "geminid"), "--mcp-backoff", "200ms"],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log))
        until("geminid's status", lambda: self.gemctl("--no-autostart", "status").returncode == 0)

    def gemctl(self, *args):
        return subprocess.run([os.path.join(self.s.bin, "gemctl"), *args], env=self.env,
                              cwd=self.ws, capture_output=True, text=True, timeout=180)

    def ok(self, *args):
        p = self.gemctl(*args)
        if p.returncode != 0:
            raise AssertionError(f"gemctl {' '.join(args)} exited {p.returncode}: "
                                 f"{p.stderr.strip()}{p.stdout.strip()}")
        return p.stdout

    def srv(self):
        servers = json.loads(self.ok("--json", "mcp", "list"))
        return next(x for x in servers if x["name"] == "srv")

    def reaches(self, state):
        return until(f"srv {state}", lambda: (lambda x: x if x["state"] == state else None)(
            self.srv()))

    def started(self, build):
        return os.path.exists(os.path.join(self.markers, build))

    def stop(self):
        for child in reversed(self.children):
            child.terminate()
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def run(s):
    node22 = os.path.join(s.cache, "node22", "node_modules", ".bin", "node")
    verdaccio = os.path.join(s.cache, "registry", "node_modules", "verdaccio")
    if not (os.path.exists(node22) and os.path.isdir(verdaccio)):
        print("SKIPPED artifact-npm: verdaccio or Node 22 is not installed (tests/interop/run.sh "
              "--install-only installs them)", flush=True)
        return
    own = Own(s)
    try:
        checks(s, own)
    finally:
        own.stop()
        if not s.failed:
            shutil.rmtree(own.tmp, ignore_errors=True)


def timed(s, name, fn):
    """s.check, then the step's time on a line of its own."""
    started = time.time()
    s.check("artifact-npm", name, fn)
    print(f"        ({time.time() - started:.1f} s)", flush=True)


def checks(s, own):
    recorded = {}

    def first():
        own.start_registry()
        own.publish("1.0.0", "v100", "Returns its text")
        own.start_daemon()
        own.ok("mcp", "start")
        x = own.reaches("connected")
        a = x.get("artifact") or {}
        pinned = a.get("pinned") or {}
        expect(pinned.get("version") == "1.0.0", f"recorded {a}")
        expect(pinned.get("digest") == own.integrity("1.0.0"), f"not the registry's integrity: {a}")
        expect(a.get("firstUse"), f"not a first use: {a}")
        expect(own.started("v100"), "1.0.0 never ran")
        recorded.update(pinned)

    timed(s, "verdaccio on loopback; 1.0.0 from a cold npx cache runs and is recorded", first)

    def newer():
        own.publish("1.0.1", "v101", "Returns its text, and reads ~/.ssh")
        own.ok("mcp", "restart", "srv")
        own.reaches("connected")
        expect(not own.started("v101"), "1.0.1 ran over the recorded 1.0.0")
        u = json.loads(own.ok("--json", "mcp", "update", "srv"))
        expect(u["recorded"]["version"] == "1.0.0" and u["newest"]["version"] == "1.0.1", f"{u}")
        expect(u["newest"]["digest"] == own.integrity("1.0.1"), f"{u}")
        expect(u["newest"].get("published"), f"no publish time: {u}")
        expect(not u.get("accepted") and not own.started("v101"), "the offer ran before accept")
        review = own.ok("mcp", "review", "srv")
        expect("Update offered" in review and "fixture-srv 1.0.1" in review, review)

    timed(s, "1.0.1 with a changed tool: the recorded 1.0.0 runs; mcp update offers 1.0.1", newer)

    def accepted():
        own.ok("mcp", "accept", "srv")
        until("1.0.1's start", lambda: own.started("v101"))
        x = own.reaches("connected")
        expect(x["artifact"]["pinned"]["version"] == "1.0.1", f"{x['artifact']}")
        differs = (x.get("pins") or {}).get("differs") or []
        expect([d["name"] for d in differs] == ["echo"] and differs[0]["held"],
               f"the changed tool is not held: {x.get('pins')}")

    timed(s, "accepted: 1.0.1 runs, and its changed tool is held by the definition pins", accepted)

    def republished():
        own.npm("unpublish", "fixture-srv@1.0.1", "--force")
        own.publish("1.0.1", "evil", "Returns its text")
        other = own.integrity("1.0.1")
        expect(other != recorded.get("digest"), "the republish kept the bytes")
        # npx's cache holds the recorded bytes: they run, without the network.
        own.ok("mcp", "restart", "srv")
        own.reaches("connected")
        expect(not own.started("evil"), "the republished 1.0.1 ran over the cached one")
        # A new machine: no cache. Held before the new bytes run.
        shutil.rmtree(own.cache)
        own.gemctl("mcp", "restart", "srv")
        x = own.reaches("blocked")
        expect(not own.started("evil"), "the republished 1.0.1 ran")
        a = x["artifact"]
        expect(a.get("held") and a["pinned"]["version"] == a["differs"]["version"] == "1.0.1", f"{a}")
        expect(a["differs"]["digest"] == other and a["pinned"]["digest"] != other, f"{a}")
        review = own.ok("mcp", "review", "srv")
        expect(other in review and a["pinned"]["digest"] in review, review)

    timed(s, "1.0.1 unpublished and republished with other bytes: held before it runs",
          republished)


def main():
    import argparse
    import sys

    import checks as suite
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cache", required=True)
    a = ap.parse_args()
    s = suite.Suite(os.path.abspath(a.root), os.path.abspath(a.cache))
    started = time.time()
    run(s)
    shutil.rmtree(s.tmp, ignore_errors=True)
    print(f"artifact-npm took {time.time() - started:.1f} s", flush=True)
    print(f"{s.passed} passed, {s.failed} failed", flush=True)
    sys.exit(1 if s.failed else 0)


if __name__ == "__main__":
    main()
