#!/usr/bin/env python3
"""A loopback stand-in for the Gemini API, for running Gemini CLI end to end without a model.

Usage: mock_gemini.py PORT_FILE LOG_FILE
Binds 127.0.0.1 on a free port and writes it to PORT_FILE. Every request's path and body go to
LOG_FILE (one JSON object per line). What the "model" does is read from `<LOG_FILE>.plan` at
each request (JSON: {"suffix": "_echo", "args": {...}}), so one mock serves several runs:
- a `streamGenerateContent` whose last turn holds a `functionResponse` is answered with text
  quoting it (or, while the conversation holds fewer than the plan's `calls` responses, default
  1, with the same call again; the plan's `vary` names an argument given the call's number);
- otherwise with a `functionCall` to the declared function whose name ends with the plan's
  suffix, with the plan's arguments (text saying so when none is declared);
- `generateContent` with a short text, `countTokens` with a count, anything else `{}`.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, LOG_FILE = sys.argv[1], sys.argv[2]
LOCK = threading.Lock()


def plan():
    try:
        with open(LOG_FILE + ".plan") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"suffix": "_echo", "args": {}}


def declared(body):
    names = []
    for tool in body.get("tools") or []:
        for d in tool.get("functionDeclarations") or []:
            names.append(d.get("name", ""))
    return names


def candidate(parts):
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    }


def answer(body):
    contents = body.get("contents") or []
    last = contents[-1] if contents else {}
    responses = [p["functionResponse"] for p in last.get("parts", []) if "functionResponse" in p]
    p = plan()
    answered = sum(1 for c in contents for part in c.get("parts", []) if "functionResponse" in part)
    if responses and answered >= p.get("calls", 1):
        return candidate([{"text": "mock: the tool said " + json.dumps(responses[0])}])
    names = [n for n in declared(body) if n.endswith(p["suffix"])]
    if not names:
        return candidate([{"text": f"mock: no declared tool ends with {p['suffix']}"}])
    args = dict(p.get("args", {}))
    if p.get("vary") in args:
        # Each call's arguments differ, so that Gemini CLI's loop detection sees no loop.
        args[p["vary"]] = f"{args[p['vary']]} {answered}"
    return candidate([{"functionCall": {"name": names[0], "args": args}}])


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        with LOCK, open(LOG_FILE, "a") as f:
            f.write(json.dumps({"path": self.path, "body": body, "t": time.time()}) + "\n")
        if ":streamGenerateContent" in self.path:
            data = json.dumps(answer(body))
            out = f"data: {data}\r\n\r\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        if ":generateContent" in self.path:
            reply = candidate([{"text": "mock"}])
        elif ":countTokens" in self.path:
            reply = {"totalTokens": 10}
        else:
            reply = {}
        out = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
