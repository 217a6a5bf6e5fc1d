#!/usr/bin/env python3
"""An editor's integration with geminid, standard library only (docs/PROTOCOL.md).

It speaks JSON-RPC 2.0 through `gemctl rpc` (one message per line; a client that opens the
socket itself uses its WebSocket, `ws://localhost/`, for the same). It says hello, opens the
folder's session with its environment, listens for confirmations *before* it lists the tools
(a session nobody answers for is headless, and lists only what needs no confirmation), calls a
tool, answers the confirmation that call raises while it waits, and closes the session.

Usage, in the project's folder: client.py TOOL [JSON-ARGUMENTS]
"""
import itertools
import json
import os
import subprocess
import sys


class Daemon:
    def __init__(self):
        self.rpc = subprocess.Popen(["gemctl", "rpc"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
        self.ids = itertools.count(1)

    def send(self, method, params):
        """Send a request; its id."""
        id = next(self.ids)
        self.rpc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id, "method": method,
                                         "params": params}) + "\n")
        self.rpc.stdin.flush()
        return id

    def read(self):
        return json.loads(self.rpc.stdout.readline())

    def call(self, method, params):
        """A request and its result (notifications that come meanwhile are not needed here)."""
        id = self.send(method, params)
        while (msg := self.read()).get("id") != id:
            pass
        if "error" in msg:
            raise SystemExit(f"{method}: {msg['error']['message']}")
        return msg["result"]


def main():
    tool, args = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "{}")
    d = Daemon()
    d.call("daemon/hello", {"protocolVersion": 2, "client": {"name": "example-editor",
                                                            "version": "1.0"}})
    # A session of its own; the environment expands `$VAR`s in the servers' settings (an API
    # key in a header): without it they expand to nothing.
    session = d.call("session/create", {"workspace": os.getcwd(), "env": dict(os.environ)})["id"]
    d.call("asks/listen", {"session": session, "kinds": ["confirmation"]})
    tools = d.call("tools/list", {"session": session})["tools"]
    print(f"{len(tools)} tools")
    # The call waits for its confirmation: keep reading, and answer it on this connection.
    call = d.send("tools/call", {"session": session, "name": tool, "args": args})
    while (msg := d.read()).get("id") != call:
        notice = msg.get("params", {}).get("result", {})
        if msg.get("method") == "asks/notice" and notice.get("type") == "asked":
            print(f"confirming: {notice['ask']['title']}")
            d.send("asks/respond", {"session": session, "id": notice["ask"]["id"],
                                    "answer": {"outcome": "once"}})
    if "error" in msg:
        raise SystemExit(f"tools/call: {msg['error']['message']}")
    print(msg["result"]["display"])
    d.call("session/close", {"id": session})


if __name__ == "__main__":
    main()
