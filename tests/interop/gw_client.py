#!/usr/bin/env python3
"""A Python MCP SDK client of geminid's gateway (`gemctl mcp serve`), for the interop suite.

Usage: gw_client.py GEMCTL SCENARIO [ARGS...]; prints one JSON object on the last line.
Scenarios:
  basic TOOL ARGS_JSON        list the tools, call TOOL
  changed                     list; print READY; wait for a line on stdin (the suite edits the
                              settings), then for tools/list_changed; list again; then call
                              fx__wait, cancel it, and ask fx__cancelled how many were cancelled
  elicit ACTION TOOL ARGS     a client that elicits and answers ACTION (accept | decline) calls TOOL
  hold                        list, call TOOL once, print READY and stay until stdin closes
  modern TOOL ARGS_JSON PROMPT CPROMPT CARG CVALUE
                              the SDK's default client (`mcp.Client`, mode "auto": it
                              negotiates 2026-07-28): list the tools, call TOOL, get PROMPT,
                              complete CPROMPT's argument CARG from CVALUE
  asks                        a client that elicits (accepting with a name), samples (a fixed
                              answer) and has roots calls the everything server's
                              trigger-elicitation-request and trigger-sampling-request
  plain TOOL ARGS_JSON [URL TOKEN_FILE]
                              a client that declares no elicitation, over stdio or streamable
                              HTTP at URL: the tools it is shown, and how its call to TOOL ended
                              (its text or error, and the seconds it took; 30 s at most)
  hang TOOL ARGS_JSON URL TOKEN_FILE
                              a client that elicits, over streamable HTTP, calls TOOL; when asked,
                              prints ASKED and answers nothing (the suite kills it)
  fastlogs TOOL ARGS_JSON [URL TOKEN_FILE]
                              FastMCP's `Client` with every default (2026-07-28, log level
                              debug asked per request) and a log handler calls TOOL over stdio,
                              or over streamable HTTP at URL: the log messages it was handed
"""

import contextlib
import json
import os
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
import mcp.types as types


def text(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def modern(params, tool, args, prompt, complete):
    # As a user writes it: every default of the SDK's own client.
    from mcp import Client
    out = {}
    async with Client(params) as c:
        out["tools"] = [t.name for t in (await c.list_tools()).tools]
        res = await c.call_tool(tool, args)
        out["text"] = text(res)
        out["isError"] = bool(res.is_error)
        got = await c.get_prompt(prompt)
        out["prompt"] = [getattr(m.content, "text", "") for m in got.messages]
        from mcp_types import PromptReference
        ref = PromptReference(type="ref/prompt", name=complete[0])
        done = await c.complete(ref, {"name": complete[1], "value": complete[2]})
        out["completed"] = done.completion.values
    return out


async def fastlogs(gemctl, tool, args, http):
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport
    logs = []

    async def on_log(message):
        logs.append([message.level, message.data])

    if http:
        with open(http[1]) as f:
            target = http[0], f.read().strip()
        client = Client(target[0], auth=target[1], log_handler=on_log)
    else:
        client = Client(StdioTransport(gemctl, ["mcp", "serve"], env=dict(os.environ)),
                        log_handler=on_log)
    async with client as c:
        res = await c.call_tool(tool, args, raise_on_error=False)
        return {"version": c.protocol_version, "text": text(res), "logs": logs}


@contextlib.asynccontextmanager
async def transport(gemctl, http):
    """Streams to the gateway: over stdio (gemctl mcp serve), or streamable HTTP at `http`."""
    if http:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client
        with open(http[1]) as f:
            auth = {"Authorization": f"Bearer {f.read().strip()}"}
        async with create_mcp_http_client(headers=auth) as h:
            async with streamable_http_client(http[0], http_client=h) as (r, w):
                yield r, w
    else:
        params = StdioServerParameters(command=gemctl, args=["mcp", "serve"], env=dict(os.environ))
        async with stdio_client(params) as (r, w):
            yield r, w


async def one_client(gemctl, scenario, tool, args, http):
    """`plain` and `hang`: one call, by a client that cannot be asked or one that never answers."""
    kwargs = {}
    if scenario == "hang":
        async def on_elicit(context, params):
            print("ASKED", flush=True)
            await anyio.sleep_forever()
        kwargs["elicitation_callback"] = on_elicit
    out = {}
    async with transport(gemctl, http) as (r, w):
        async with ClientSession(r, w, **kwargs) as s:
            await s.initialize()
            out["tools"] = [t.name for t in (await s.list_tools()).tools]
            started = time.monotonic()
            try:
                res = await s.call_tool(tool, args, read_timeout_seconds=30)
                out["text"], out["isError"] = text(res), bool(res.is_error)
            except Exception as e:  # noqa: BLE001 (an error answer, or the timeout)
                out["error"] = f"{type(e).__name__}: {e}"
            out["seconds"] = round(time.monotonic() - started, 1)
    return out


async def main():
    gemctl, scenario, *rest = sys.argv[1:]
    if scenario in ("plain", "hang"):
        out = await one_client(gemctl, scenario, rest[0], json.loads(rest[1]), rest[2:4])
        print(json.dumps(out), flush=True)
        return
    if scenario == "fastlogs":
        out = await fastlogs(gemctl, rest[0], json.loads(rest[1]), rest[2:4])
        print(json.dumps(out), flush=True)
        return
    # The suite's daemon is on its own socket (GEMINID_SOCKET), which the SDK's trimmed default
    # environment would drop: pass the environment on, as a client entry's `env` would.
    params = StdioServerParameters(command=gemctl, args=["mcp", "serve"], env=dict(os.environ))
    if scenario == "modern":
        out = await modern(params, rest[0], json.loads(rest[1]), rest[2], rest[3:6])
        print(json.dumps(out), flush=True)
        return
    changed = anyio.Event()
    asked = []

    async def on_message(message):
        # A notification arrives as itself, or wrapped (`.root`), by SDK version.
        for m in (message, getattr(message, "root", None)):
            if isinstance(m, types.ToolListChangedNotification):
                changed.set()

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=rest[0], content={} if rest[0] == "accept" else None)

    async def on_elicit_form(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_sample(context, params):
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled by the gateway client"),
            model="gw-client-model", stopReason="endTurn")

    kwargs = {"message_handler": on_message}
    if scenario == "elicit":
        kwargs["elicitation_callback"] = on_elicit
    if scenario == "asks":
        kwargs["elicitation_callback"] = on_elicit_form
        kwargs["sampling_callback"] = on_sample
    out = {}
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w, **kwargs) as s:
            init = await s.initialize()
            out["server"] = init.server_info.name
            tools = [t.name for t in (await s.list_tools()).tools]
            out["tools"] = tools
            if scenario == "basic":
                res = await s.call_tool(rest[0], json.loads(rest[1]))
                out["text"] = text(res)
                out["isError"] = bool(res.is_error)
            elif scenario == "hold":
                res = await s.call_tool(rest[0], json.loads(rest[1]))
                out["text"] = text(res)
                print("READY", flush=True)
                await anyio.to_thread.run_sync(sys.stdin.read)
            elif scenario == "changed":
                print("READY", flush=True)
                await anyio.to_thread.run_sync(sys.stdin.readline)
                with anyio.move_on_after(20):
                    await changed.wait()
                out["changed"] = changed.is_set()
                out["after"] = [t.name for t in (await s.list_tools()).tools]
                with anyio.move_on_after(1):
                    await s.call_tool("fx__wait", {"ms": 60000})
                count = "0"
                with anyio.move_on_after(10):
                    while count == "0":
                        count = text(await s.call_tool("fx__cancelled", {})).strip()
                        await anyio.sleep(0.1)
                out["cancelled"] = count
            elif scenario == "asks":
                res = await s.call_tool("everything__trigger-elicitation-request", {})
                out["elicited"] = text(res)
                res = await s.call_tool("everything__trigger-sampling-request", {"prompt": "hello"})
                out["sampled"] = text(res)
                out["asked"] = asked
            elif scenario == "elicit":
                res = await s.call_tool(rest[1], json.loads(rest[2]))
                out["text"] = text(res)
                out["isError"] = bool(res.is_error)
                out["asked"] = asked
    print(json.dumps(out), flush=True)


anyio.run(main)
