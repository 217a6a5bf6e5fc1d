#!/usr/bin/env python3
"""Interop checks: a real geminid with real third-party MCP servers, driven through gemctl --json.

Run through tests/interop/run.sh, which installs the pinned servers first. Prints one line per
check and `N passed, M failed` last; exits 1 on any failure. A failure names the server and the
check, with the daemon's log lines for that server.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import homes

START_TIMEOUT = 30.0


class Suite:
    def __init__(self, root, cache):
        self.root = root
        self.cache = cache
        self.bin = os.path.join(root, "target", "debug")
        self.tmp = tempfile.mkdtemp(prefix="geminid-interop-")
        self.home = os.path.join(self.tmp, "home")
        self.ws = os.path.join(self.tmp, "ws")
        self.ws2 = os.path.join(self.tmp, "ws2")
        self.files = os.path.join(self.tmp, "files")
        for d in (self.home, os.path.join(self.home, ".gemini"), self.ws, self.ws2, self.files,
                  os.path.join(self.tmp, "run"), os.path.join(self.tmp, "state")):
            os.makedirs(d, exist_ok=True)
        os.chmod(os.path.join(self.tmp, "run"), 0o700)
        self.daemon = None
        self.network = False
        self.children = []
        self.passed = 0
        self.failed = 0
        self.log_path = os.path.join(self.tmp, "geminid.log")

    def env(self):
        return homes.env(self.tmp, self.bin, GEMINID_INTEROP_HOME=self.tmp)

    def settings(self):
        node_bin = os.path.join(self.cache, "node_modules", ".bin")
        servers = {
            "everything": {"command": os.path.join(node_bin, "mcp-server-everything"), "timeout": 20000},
            "memory": {
                "command": os.path.join(node_bin, "mcp-server-memory"),
                "env": {"MEMORY_FILE_PATH": os.path.join(self.tmp, "memory.jsonl")},
                "timeout": 20000,
            },
            "filesystem": {
                "command": os.path.join(node_bin, "mcp-server-filesystem"),
                "args": [self.files],
                "timeout": 20000,
            },
            "time": {"command": os.path.join(self.cache, "venv", "bin", "mcp-server-time"), "timeout": 20000},
        }
        py = {"timeout": 20000}
        servers["py-sse"] = dict(py, url="http://127.0.0.1:3201/sse", type="sse")
        servers["py-http"] = dict(py, httpUrl="http://127.0.0.1:3202/mcp")
        if self.network:
            servers["everything-sse"] = {"url": "http://127.0.0.1:3101/sse", "type": "sse", "timeout": 20000}
            servers["everything-http"] = {"httpUrl": "http://127.0.0.1:3102/mcp", "timeout": 20000}
        with open(os.path.join(self.home, ".gemini", "settings.json"), "w") as f:
            json.dump({"mcpServers": servers}, f, indent=2)

    def start_python_servers(self):
        """The Python SDK server over SSE and streamable HTTP (it binds 127.0.0.1 itself)."""
        python = os.path.join(self.cache, "venv", "bin", "python")
        script = os.path.join(self.root, "tests", "interop", "py_server.py")
        for mode, port in (("sse", 3201), ("streamable-http", 3202)):
            log = open(os.path.join(self.tmp, f"py-{mode}.log"), "w")
            self.children.append(subprocess.Popen(
                [python, script, mode, str(port)], env=self.env(), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log))
        self.wait_ports((3201, 3202))

    def wait_ports(self, ports):
        import socket
        deadline = time.time() + START_TIMEOUT
        for port in ports:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.time() > deadline:
                        raise RuntimeError(f"no server on port {port}")
                    time.sleep(0.1)

    def start_network_servers(self):
        """The everything server over legacy SSE and streamable HTTP. It listens on every
        interface, so this runs only inside a private network namespace (see run.sh)."""
        node_bin = os.path.join(self.cache, "node_modules", ".bin")
        for mode, port in (("sse", 3101), ("streamableHttp", 3102)):
            log = open(os.path.join(self.tmp, f"everything-{mode}.log"), "w")
            self.children.append(subprocess.Popen(
                [os.path.join(node_bin, "mcp-server-everything"), mode],
                env=dict(self.env(), PORT=str(port)), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log))
        self.wait_ports((3101, 3102))

    def start_daemon(self):
        log = open(self.log_path, "a")
        self.daemon = subprocess.Popen(
            [os.path.join(self.bin, "geminid"), "--mcp-backoff", "200ms", "--mcp-linger", "60s"],
            env=dict(self.env(), RUST_LOG="info"), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            if self.gemctl("--no-autostart", "status", check=False)[0] == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("geminid did not start")

    def stop_daemon(self, sig=signal.SIGTERM):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(sig)
            try:
                self.daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()

    def gemctl(self, *args, cwd=None, check=True, stdin=None):
        p = subprocess.run([os.path.join(self.bin, "gemctl"), *args], env=self.env(),
                           cwd=cwd or self.ws, capture_output=True, text=True, input=stdin,
                           timeout=120)
        if check and p.returncode != 0:
            raise AssertionError(f"gemctl {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
        return p.returncode, p.stdout, p.stderr

    def json(self, *args, cwd=None):
        _, out, _ = self.gemctl("--json", *args, cwd=cwd)
        return json.loads(out)

    def call(self, tool, args=None, cwd=None):
        """Call a tool; a tool error (exit 1 with a result on stdout) is returned, not raised."""
        code, out, err = self.gemctl("--json", "call", tool, json.dumps(args or {}), cwd=cwd, check=False)
        try:
            result = json.loads(out)
        except json.JSONDecodeError:
            raise AssertionError(f"gemctl call {tool} exited {code}: {err.strip()}") from None
        if "error" in result:
            raise AssertionError(f"gemctl call {tool}: {result['error']['message']}")
        return result

    def server_log(self, name):
        try:
            return "\n".join(self.gemctl("mcp", "logs", name, "-n", "20", check=False)[1].splitlines())
        except Exception as e:  # noqa: BLE001
            return f"(no log: {e})"

    def check(self, server, name, fn):
        try:
            fn()
            self.passed += 1
            print(f"ok      {server}: {name}", flush=True)
        except Exception as e:  # noqa: BLE001
            self.failed += 1
            print(f"FAILED  {server}: {name}: {e}", flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc()
            print("  --- its log ---\n  " + self.server_log(server).replace("\n", "\n  "), flush=True)

    def leftovers(self):
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if self.tmp.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
        return found


def describe(pid):
    """A process as `pid (ppid, state): command line`, for a report."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return f"{pid} (parent {fields[1]}, {fields[0]}): {cmd}"
    except OSError:
        return f"{pid} (gone)"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def text_of(result):
    return result.get("display", "")


def run(s):
    s.start_python_servers()
    if s.network:
        s.start_network_servers()
    s.settings()
    s.start_daemon()
    servers = {}

    def started():
        listed = s.json("mcp", "start")
        for srv in listed:
            servers[srv["name"]] = srv
        bad = [f"{x['name']}: {x['state']} {x.get('lastError', '')}" for x in listed if x["state"] != "connected"]
        expect(not bad, f"not connected: {bad}")

    s.check("all", "every server connects over stdio", started)

    tools = {}

    def listed():
        for t in s.json("mcp", "tools")["tools"]:
            tools[t["name"]] = t
        expect("mcp_everything_echo" in tools, f"no echo in {sorted(tools)[:10]}")

    s.check("everything", "tools are listed with Gemini names", listed)

    def echo():
        r = s.call("mcp_everything_echo", {"message": "hello interop"})
        expect("hello interop" in text_of(r), f"echo answered {r}")

    s.check("everything", "echo round trip", echo)

    def everything_asks():
        # It offers these tools to a client that declares roots, elicitation and sampling.
        roots = [n for n in tools if n.startswith("mcp_everything_") and "roots" in n]
        expect(roots, f"no roots tool in {sorted(tools)}")
        r = s.call(roots[0])
        expect("file://" + s.ws in text_of(r), f"roots: {text_of(r)}")
        elicit = [n for n in tools if n.startswith("mcp_everything_") and "elicitation" in n]
        expect(elicit, f"no elicitation tool in {sorted(tools)}")
        # Nobody attached answers elicitations here: declined at once, not left hanging.
        r = s.call(elicit[0])
        expect("decline" in json.dumps(r["result"]).lower(), f"elicitation: {r['result']}")

    s.check("everything", "roots are the session's; an unanswerable elicitation is declined", everything_asks)

    if s.network:
        def same_tools():
            def own(server):
                return sorted(t["tool"] for t in tools.values() if t["server"] == server)
            stdio, sse, http = own("everything"), own("everything-sse"), own("everything-http")
            expect(stdio and stdio == sse == http, f"stdio {stdio} / sse {sse} / http {http}")
            for server in ("everything-sse", "everything-http"):
                expect(servers[server]["transport"] == ("sse" if server.endswith("sse") else "http"),
                       f"{server} transport {servers[server]['transport']}")
                r = s.call(f"mcp_{server}_echo", {"message": f"over {server}"})
                expect(f"over {server}" in text_of(r), f"{server} echo answered {r}")

        s.check("everything", "the same tools over stdio, legacy SSE and streamable HTTP", same_tools)
    else:
        print("SKIPPED everything over SSE and streamable HTTP: no private network namespace "
              "(unshare -n is not permitted here)", flush=True)

    def image():
        names = [n for n in tools if "image" in n.lower()]
        expect(names, "no image tool")
        tool = names[0]
        schema = tools[tool]["declaration"]["parametersJsonSchema"]
        args = {}
        for k, v in schema.get("properties", {}).items():
            if k in schema.get("required", []):
                args[k] = v.get("enum", ["x"])[0] if "enum" in v else ("x" if v.get("type") == "string" else 1)
        r = s.call(tool, args)
        inline = [p for p in r["parts"] if "inlineData" in p]
        expect(inline and inline[0]["inlineData"]["mimeType"].startswith("image/"), f"no image part in {r['parts']}")

    s.check("everything", "an image result becomes inlineData", image)

    def prompts():
        listed = s.json("mcp", "prompts")["prompts"]
        with_args = [p for p in listed if p["server"] == "everything" and any(a.get("required") for a in p["arguments"])]
        expect(with_args, f"no prompt with required arguments in {[p['name'] for p in listed]}")
        p = with_args[0]
        args = [f"--{a['name']}=value" for a in p["arguments"] if a.get("required")]
        r = s.json("prompt", p["name"], *args)
        expect(r["submit"].startswith('"'), f"submit is not a JSON string: {r['submit'][:80]}")

    s.check("everything", "a prompt with arguments", prompts)

    def resources():
        listed = s.json("mcp", "resources")["resources"]
        mine = [r for r in listed if r["server"] == "everything"]
        # (Paging itself is covered against the fixture, which pages every list.)
        expect(mine, "no resources")
        texts = [r for r in mine if (r["resource"].get("mimeType") or "").startswith("text/")]
        expect(texts, f"no text resource in {[r['reference'] for r in mine]}")
        t = s.json("read", texts[0]["reference"])
        expect(t["contents"] and "text" in t["contents"][0], f"text resource read as {t}")
        # A binary one through the server's blob template.
        templates = [t["template"]["uriTemplate"] for t in s.json("mcp", "resources")["templates"]]
        blob = [u for u in templates if "blob" in u]
        expect(blob, f"no blob template in {templates}")
        uri = blob[0].replace("{resourceId}", "1")
        b = s.json("read", f"@everything:{uri}")
        expect(b["parts"][1]["text"].startswith("[Binary resource content"), f"blob read as {b['parts']}")

    s.check("everything", "resources listed and read (text and blob)", resources)

    def memory_write():
        r = s.call("mcp_memory_create_entities", {"entities": [{"name": "geminid", "entityType": "daemon", "observations": ["shares servers"]}]})
        expect(not r["isError"], f"create_entities failed: {r}")

    s.check("memory", "create entities", memory_write)

    def memory_restart():
        s.stop_daemon()
        s.start_daemon()
        s.gemctl("mcp", "start")
        r = s.call("mcp_memory_read_graph")
        expect("shares servers" in text_of(r), f"read back {text_of(r)[:200]}")

    s.check("memory", "entities survive a daemon restart", memory_restart)

    def memory_kill():
        before = {x["name"]: x for x in s.json("mcp", "list")}["memory"]
        expect(before.get("pid"), f"no pid: {before}")
        os.kill(before["pid"], signal.SIGKILL)
        deadline = time.time() + 30
        while time.time() < deadline:
            now = {x["name"]: x for x in s.json("mcp", "list")}["memory"]
            if now["state"] == "connected" and now.get("pid") not in (None, before["pid"]):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"memory did not come back: {now}")
        r = s.call("mcp_memory_read_graph")
        expect("shares servers" in text_of(r), "no answer after restart")

    s.check("memory", "kill -9: it comes back and answers", memory_kill)

    # The filesystem server asks for MCP roots, and they replace the directories on its command
    # line: it serves the calling session's workspace, not `s.files`.
    notes = os.path.join(s.ws, "notes")
    os.makedirs(notes, exist_ok=True)
    with open(os.path.join(notes, "hello.txt"), "w") as f:
        f.write("hello from the filesystem\n")

    def fs_read():
        names = [n for n in tools if n.startswith("mcp_filesystem_")]
        expect(names, "no filesystem tools")
        listing = s.call("mcp_filesystem_list_directory", {"path": notes})
        expect("hello.txt" in text_of(listing), f"listing: {text_of(listing)}")
        read = [n for n in names if n in ("mcp_filesystem_read_text_file", "mcp_filesystem_read_file")][0]
        r = s.call(read, {"path": os.path.join(notes, "hello.txt")})
        expect("hello from the filesystem" in text_of(r), f"read: {text_of(r)}")

    s.check("filesystem", "list and read files in the session's root (MCP roots)", fs_read)

    def fs_outside():
        for outside in ("/etc", s.files):
            r = s.call("mcp_filesystem_list_directory", {"path": outside})
            expect(r["isError"], f"reading {outside} was not an error: {r}")
            text = json.dumps(r["result"]).lower()
            expect("outside" in text or "denied" in text, f"error text: {r['result']}")

    s.check("filesystem", "confined to the calling session's root, not its command line", fs_outside)

    def time_server():
        r = s.call("mcp_time_get_current_time", {"timezone": "UTC"})
        expect("UTC" in text_of(r), f"time: {text_of(r)}")

    s.check("time", "get_current_time over stdio", time_server)

    for server, transport in (("py-sse", "sse"), ("py-http", "http")):
        def python_sdk(server=server, transport=transport):
            expect(servers[server]["transport"] == transport, f"transport {servers[server]['transport']}")
            r = s.call(f"mcp_{server}_add", {"a": 2, "b": 40})
            expect(text_of(r) == "42", f"add answered {text_of(r)!r}")
            r = s.json("read", f"@{server}:interop://greeting")
            expect(r["contents"][0].get("text") == "hello from python", f"read {r['contents']}")

        s.check(server, f"Python SDK server over {transport}: a tool and a resource", python_sdk)

    def shared():
        a = s.json("mcp", "list")
        s.gemctl("mcp", "start", cwd=s.ws2)
        b = s.json("mcp", "list", cwd=s.ws2)
        # stdio servers: the same process; network ones: the same connection (identity).
        pa = {x["name"]: x.get("pid") or x.get("identity") for x in a}
        pb = {x["name"]: x.get("pid") or x.get("identity") for x in b}
        expect(all(pa.values()) and pa.keys() == pb.keys(), f"differ: {pa} vs {pb}")
        # A server that asks for roots (filesystem; everything asks too) is shared only between
        # sessions with equal roots, so the other workspace has its own; the rest are shared.
        asks = {n for n in pa
                if "roots/list answered" in s.gemctl("mcp", "logs", n, check=False)[1]}
        expect("filesystem" in asks, f"filesystem never asked for roots: {sorted(asks)}")
        own = {n for n in asks if pa[n] != pb[n]}
        expect(own == asks, f"servers asking for roots shared across roots: {sorted(asks - own)}")
        for n in asks:
            pa.pop(n)
            pb.pop(n)
        expect(pa == pb, f"differ: {pa} vs {pb}")
        r = s.call("mcp_filesystem_list_directory", {"path": s.ws2}, cwd=s.ws2)
        expect(not r["isError"], f"the second workspace's own server refused its root: {r}")
        r = s.call("mcp_filesystem_list_directory", {"path": notes}, cwd=s.ws2)
        expect(r["isError"], f"the second workspace's server read the first's: {r}")

    s.check("all", "one process per server across two workspaces (those asking for roots: one per root)", shared)

    import gateway
    gateway.run(s)

    import many_clients
    many_clients.run(s)

    import extensions
    extensions.run(s)

    import skills
    skills.run(s)

    import fastmcp_oauth
    fastmcp_oauth.run(s)

    import pypi_pins
    pypi_pins.run(s)

    import gemini_e2e
    gemini_e2e.run(s)

    import acp
    acp.run(s, rounds=1)

    import prometheus
    prometheus.run(s)

    import otlp
    otlp.run(s)

    import artifact_npm
    artifact_npm.run(s)

    import clients
    clients.run(s)

    import differential
    differential.run(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--network", action="store_true",
                    help="also run network servers (only inside a private network namespace)")
    a = ap.parse_args()
    s = Suite(a.root, a.cache)
    s.network = a.network
    started = time.time()
    try:
        run(s)
    except Exception as e:  # noqa: BLE001
        s.failed += 1
        print(f"FAILED  suite: {e}", flush=True)
        traceback.print_exc()
    finally:
        s.stop_daemon()
        for child in s.children:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
        time.sleep(0.5)
        left = s.leftovers()
        described = []
        for pid in left:
            described.append(describe(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if left:
            s.failed += 1
            print(f"FAILED  suite: processes left behind: {described}", flush=True)
        if s.failed:
            print(f"daemon log: {s.log_path}", flush=True)
        else:
            shutil.rmtree(s.tmp, ignore_errors=True)
    print(f"interop took {time.time() - started:.1f} s", flush=True)
    print(f"{s.passed} passed, {s.failed} failed", flush=True)
    sys.exit(1 if s.failed else 0)


if __name__ == "__main__":
    main()
