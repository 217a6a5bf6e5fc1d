"""A FastMCP server behind FastMCP's in-memory OAuth authorization server, for the interop suite:
the most used Python MCP framework, signed in to with `gemctl mcp auth`.

Usage: fastmcp_server.py PORT   (binds 127.0.0.1 only)
"""

import sys

from fastmcp import FastMCP
from fastmcp.server.auth.auth import ClientRegistrationOptions
from fastmcp.server.auth.providers.in_memory import InMemoryOAuthProvider

port = int(sys.argv[1])
base = f"http://127.0.0.1:{port}"
# Registration open, as a server for MCP clients has it; authorization approves at once (no
# person), redirecting to the client's callback with a code.
auth = InMemoryOAuthProvider(
    base_url=base, client_registration_options=ClientRegistrationOptions(enabled=True))
server = FastMCP("geminid-interop-fastmcp", auth=auth)


@server.tool
def whoami() -> str:
    """Says the caller got in."""
    return "signed in to fastmcp"


if __name__ == "__main__":
    server.run(transport="http", host="127.0.0.1", port=port)
