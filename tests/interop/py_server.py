"""A small MCP server on the Python SDK (`mcp` 2.x), for the interop suite.

Usage: py_server.py sse|streamable-http PORT   (binds 127.0.0.1 only)
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("geminid-interop-py", instructions="A Python SDK server for geminid's interop suite.")


@server.tool()
def add(a: int, b: int) -> str:
    """Adds two integers."""
    return str(a + b)


@server.tool()
def shout(text: str) -> str:
    """Returns the text in capitals."""
    return text.upper()


@server.tool()
async def note(text: str, ctx: Context) -> str:
    """Logs the text at debug, info and warning (notifications/message), then answers."""
    await ctx.debug(f"debug: {text}")
    await ctx.info(f"info: {text}")
    await ctx.warning(f"warning: {text}")
    return f"noted {text}"


@server.resource("interop://greeting")
def greeting() -> str:
    """A fixed text."""
    return "hello from python"


if __name__ == "__main__":
    transport, port = sys.argv[1], int(sys.argv[2])
    server.run(transport, host="127.0.0.1", port=port)
