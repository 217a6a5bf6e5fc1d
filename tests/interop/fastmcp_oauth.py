"""Signing in to a server built on FastMCP (the most used Python MCP framework), behind
FastMCP's own in-memory authorization server: discovery, registration, the browser's redirect
to geminid's callback, the token exchange (FastMCP reads the client id from the form body),
and a call with the token. Servers bind 127.0.0.1 only."""

import json
import os
import subprocess
import sys

from checks import expect

PORT = 3203


def run(s):
    python = os.path.join(s.cache, "venv", "bin", "python")
    script = os.path.join(s.root, "tests", "interop", "fastmcp_server.py")
    log = open(os.path.join(s.tmp, "fastmcp.log"), "w")
    s.children.append(subprocess.Popen([python, script, str(PORT)], env=s.env(),
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=log))
    s.wait_ports((PORT,))
    # The person's browser: it opens the authorization URL and follows the redirect to the
    # loopback callback, as FastMCP's in-memory server approves at once.
    browser = os.path.join(s.tmp, "browser.py")
    with open(browser, "w") as f:
        f.write("import sys, urllib.request\nurllib.request.urlopen(sys.argv[1], timeout=20).read()\n")

    def sign_in():
        s.gemctl("mcp", "add", "-s", "user", "-t", "http", "fastmcp", f"http://127.0.0.1:{PORT}/mcp")
        env = dict(s.env(), BROWSER=f"{sys.executable} {browser}")
        env.pop("OAUTH_CALLBACK_PORT", None)
        p = subprocess.run([os.path.join(s.bin, "gemctl"), "mcp", "auth", "fastmcp"], env=env,
                           cwd=s.ws, capture_output=True, text=True, timeout=120)
        expect(p.returncode == 0, f"gemctl mcp auth exited {p.returncode}: {p.stderr.strip()}")
        status = s.json("mcp", "auth", "--status")
        row = next((r for r in status["servers"] if r["name"] == "fastmcp"), None)
        expect(row and row["state"] == "signed-in", f"auth --status: {json.dumps(status)}")
        r = s.call("mcp_fastmcp_whoami")
        texts = [c.get("text") for c in r["result"]["content"]]
        expect(texts == ["signed in to fastmcp"], f"whoami answered {texts}")

    s.check("fastmcp", "sign in to FastMCP's in-memory authorization server, then call", sign_in)
    s.gemctl("mcp", "remove", "-s", "user", "fastmcp", check=False)
