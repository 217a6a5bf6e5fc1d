#!/usr/bin/env python3
"""A loopback proxy that adds `Authorization: Bearer <token>` to every request, for clients
that cannot send one (the MCP conformance suite). Everything else passes unchanged both ways:
method, path, headers (`Host` and `Origin` too, so the gateway's own checks still see the
client's), body, and the response streamed as it comes (SSE).

Usage: authproxy.py UPSTREAM_PORT TOKEN_FILE PORT_FILE [CALLS_FILE]   (binds 127.0.0.1 on a
free port and writes it to PORT_FILE; with CALLS_FILE, appends the name of each tool the client
calls, a line each, so what it called can be held against what geminid ran)
"""

import http.client
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM, TOKEN_FILE, PORT_FILE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
CALLS_FILE = sys.argv[4] if len(sys.argv) > 4 else None
CALLS_LOCK = threading.Lock()


def note_calls(body):
    """Append the tools `body` (a JSON-RPC message or batch) calls to CALLS_FILE."""
    try:
        msg = json.loads(body)
    except ValueError:
        return
    names = [m["params"]["name"] for m in (msg if isinstance(msg, list) else [msg])
             if isinstance(m, dict) and m.get("method") == "tools/call"
             and isinstance(m.get("params"), dict) and "name" in m["params"]]
    if names:
        with CALLS_LOCK, open(CALLS_FILE, "a") as f:
            f.write("".join(f"{n}\n" for n in names))
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-authorization", "proxy-connection"}


class Proxy(BaseHTTPRequestHandler):
    # One request per connection: the body is streamed until the upstream ends it.
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def forward(self):
        with open(TOKEN_FILE) as f:
            token = f.read().strip()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if CALLS_FILE and body:
            note_calls(body)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["Authorization"] = f"Bearer {token}"
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=120)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                self.wfile.write(chunk)
                self.wfile.flush()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()

    do_GET = do_POST = do_DELETE = do_PUT = do_OPTIONS = forward


server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
server.daemon_threads = True
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
