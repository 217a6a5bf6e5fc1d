"""The differential suite's tool cases: what one MCP server's tools become for the model, Gemini
CLI 0.61's `gemini -p` (its model the loopback mock) against geminid, on the same settings.

Listings (`GEMINID_DIFF_TOOL_CASES`, default 12, after hand-picked ones): the fixture's raw
server lists one to four seeded tools, each well-formed or in one of the shapes the MCP schema
refuses (`properties` a list, a `type` other than `"object"`, none, a `required` that is not a
list of strings, a property that is not a schema, a description that is not text, no name, no
`inputSchema`, an annotation of the wrong type). Compared per tool: whether it is offered to
the model (Gemini CLI's declarations; geminid's `mcp tools`), and for a tool both offer, its
declaration's `parametersJsonSchema`. Gemini CLI's SDK refuses the whole listing for one bad
tool, geminid only that tool: a good tool beside a bad one is offered by geminid alone, which
the README says (`README_LISTING`).

Results: the model calls a tool whose result breaks the schema (content not a list, a content
item of an unknown type, `isError` a string, `structuredContent` a list) or conforms. Compared:
whether the model is told of an error (Gemini CLI's functionResponse; geminid's `gemctl call`),
and for a conforming one the response itself. Gemini CLI's SDK refuses a result that breaks the
schema; geminid converts what it can read (`README_RESULTS`).

Environment: a server's `env` with `\\$VAR`, `$VAR` and `\\$VAR and $VAR`, read back through the
fixture's `env` tool by either tool (`README_ENV` says what each does).

Refusals: the text the model reads for a call a policy rule denies, with and without a
`denyMessage`, and for one that needs a confirmation in a headless run: Gemini CLI's text
begins geminid's (`README_REFUSAL`), and geminid's names no absolute path.
"""

import json
import os
import shutil
import subprocess

import gemini_cli
import warm_bench
from differential_hooks import function_responses

CASES = int(os.environ.get("GEMINID_DIFF_TOOL_CASES", "12"))

README_LISTING = ("A tool the MCP schema refuses (no name, an `inputSchema` whose `type` is not "
                  "`\"object\"`, `properties` that are not an object, a `required` that is not a "
                  "list of strings, ...) is left out alone and said in `mcp list` too; Gemini "
                  "CLI's SDK refuses the server's whole listing for it")
README_RESULTS = ("A tool result that breaks the MCP schema (`content` not a list, a content item "
                  "of an unknown type, `isError` that is not a boolean, `structuredContent` that "
                  "is not an object) is converted as far as it reads")
README_ENV = ("In `env` and `headers` values, `\\$VAR` gives a backslash followed by the "
              "variable's value in both")
README_REFUSAL = ("A call policy refuses answers Gemini CLI's text (`Tool execution denied by "
                  "policy.` and the rule's `denyMessage`")
QUOTED = [README_LISTING, README_RESULTS, README_ENV, README_REFUSAL]

# (kind, inputSchema or a whole tool's extra fields), good ones first.
GOOD = [
    ("plain", {"inputSchema": {"type": "object"}}),
    ("props", {"inputSchema": {"type": "object", "properties": {"q": {"type": "string"}},
                               "required": ["q"]}}),
    ("nullable", {"inputSchema": {"type": "object",
                                  "properties": {"n": {"type": ["integer", "null"]}}}}),
    ("described", {"description": "Does a thing", "annotations": {"readOnlyHint": True},
                   "inputSchema": {"type": "object", "properties": {"a": {"type": "boolean"}},
                                   "additionalProperties": False}}),
]
BAD = [
    ("props_list", {"inputSchema": {"type": "object", "properties": [{"q": {}}]}}),
    ("not_object", {"inputSchema": {"type": "array"}}),
    ("untyped", {"inputSchema": {"properties": {}}}),
    ("required_text", {"inputSchema": {"type": "object", "required": "q"}}),
    ("required_numbers", {"inputSchema": {"type": "object", "required": [1]}}),
    ("prop_number", {"inputSchema": {"type": "object", "properties": {"q": 1}}}),
    ("description_number", {"description": 7, "inputSchema": {"type": "object"}}),
    ("no_schema", {}),
    ("hint_text", {"annotations": {"readOnlyHint": "yes"}, "inputSchema": {"type": "object"}}),
    ("no_name", {"inputSchema": {"type": "object"}}),
]
RESULTS = [
    ("conforming", {"content": [{"type": "text", "text": "fine"}]}, False),
    ("content_object", {"content": {"type": "text", "text": "not in a list"}}, True),
    ("unknown_type", {"content": [{"type": "text", "text": "a"}, {"type": "hologram"}]}, True),
    ("is_error_text", {"content": [{"type": "text", "text": "x"}], "isError": "true"}, True),
    ("structured_list", {"content": [{"type": "text", "text": "x"}], "structuredContent": [1]},
     True),
]
ENV = [("\\$DIFF_V", "escaped"), ("$DIFF_V", "plain"), ("\\$DIFF_V and $DIFF_V", "both")]


def tool(i, kind, fields):
    t = {"name": f"t{i}_{kind}"}
    if kind == "no_name":
        t = {}
    t.update(json.loads(json.dumps(fields)))
    return t


def listing(rng):
    """One to four seeded tools, each good with probability 0.6."""
    out = []
    for i in range(1 + rng.randrange(4)):
        kind, fields = rng.choice(GOOD) if rng.random() < 0.6 else rng.choice(BAD)
        out.append((kind, tool(i, kind, fields)))
    return out


def hand_picked():
    return [
        [(k, tool(i, k, f)) for i, (k, f) in enumerate(GOOD)],
        [("props", tool(0, "props", GOOD[1][1])), ("props_list", tool(1, *BAD[0]))],
        [(k, tool(i, k, f)) for i, (k, f) in enumerate(BAD)],
    ]


class Runner:
    """Gemini CLI and geminid, run in the differential home `h` on one server `tl`."""

    def __init__(self, s, h, env, log, ws):
        self.s, self.h, self.env, self.log, self.ws = s, h, env, log, ws
        self.gemini_dir = os.path.join(h.home, ".gemini")

    def settings(self, server, extra=None):
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                    "mcpServers": {"tl": dict(server, trust=True)}}
        settings.update(extra or {})
        self.h.write(os.path.join(self.gemini_dir, "settings.json"), settings)
        self.h.write(os.path.join(self.gemini_dir, "trustedFolders.json"), {})
        self.h.write(os.path.join(self.gemini_dir, "mcp-server-enablement.json"), None)

    def gemini(self, plan):
        with open(self.log + ".plan", "w") as f:
            json.dump(plan, f)
        start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        argv = [self.h.gemini, "-p", "call the tool", "-m", "gemini-2.5-flash"]
        code, out = gemini_cli.run(argv, self.env, self.ws, 180)
        responses, _ = function_responses(self.log, start)
        declarations = {}
        with open(self.log) as f:
            f.seek(start)
            for line in f:
                if line.strip():
                    for t in json.loads(line)["body"].get("tools") or []:
                        for d in t.get("functionDeclarations") or []:
                            declarations[d.get("name")] = d
        return code, out, responses, declarations

    def gemctl(self, *args):
        p = subprocess.run([os.path.join(self.s.bin, "gemctl"), *args], env=self.env,
                           cwd=self.ws, capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def ours_tools(self):
        self.gemctl("mcp", "reload")
        self.gemctl("mcp", "restart", "tl")
        _, out, err = self.gemctl("--json", "mcp", "tools")
        try:
            return {t["name"]: t for t in json.loads(out)["tools"] if not t.get("hidden")}
        except ValueError:
            raise AssertionError(f"gemctl mcp tools: {out}{err}")

    def ours_call(self, name, args):
        _, out, err = self.gemctl("--json", "call", name, json.dumps(args))
        try:
            return json.loads(out)
        except ValueError:
            raise AssertionError(f"gemctl call printed no result: {out}{err}")


def parameters(declaration):
    """A declaration's parameters as both tools give them (geminid's may be named either)."""
    d = declaration.get("declaration", declaration)
    p = d.get("parametersJsonSchema", d.get("parameters"))
    return json.dumps(p, sort_keys=True)


def count(totals, differ, field, theirs, ours, accepted=None):
    if os.environ.get("GEMINID_DIFF_VERBOSE"):
        print(f"  {field}: Gemini CLI {theirs!r} / geminid {ours!r}", flush=True)
    if theirs == ours:
        totals["agreed"] += 1
    elif accepted:
        totals["accepted"] += 1
    else:
        totals["differ"] += 1
        differ.append(f"{field}: Gemini CLI {theirs}, geminid {ours}")


def listing_case(r, totals, tools, listing_file):
    with open(listing_file, "w") as f:
        json.dump({"tools": [t for _, t in tools]}, f)
    r.settings({"command": os.path.join(r.s.bin, "mcp-fixture"),
                "args": ["--raw", "--listing", listing_file]})
    _, out, _, declared = r.gemini({"suffix": "__no_such_tool", "args": {}})
    ours = r.ours_tools()
    any_bad = any(kind in dict(BAD) for kind, _ in tools)
    differ = []
    for kind, t in tools:
        if "name" not in t:
            continue  # nobody can offer it; its absence shows in the other rows' counts
        fqn = f"mcp_tl_{t['name']}"
        theirs_offered, ours_offered = fqn in declared, fqn in ours
        good = kind in dict(GOOD)
        # A good tool beside a bad one: Gemini CLI's SDK refuses the whole listing.
        count(totals, differ, f"{fqn} offered", theirs_offered, ours_offered,
              accepted=good and any_bad and ours_offered and not theirs_offered)
        if theirs_offered and ours_offered:
            count(totals, differ, f"{fqn} parameters", parameters(declared[fqn]),
                  parameters(ours[fqn]))
    return differ, out


def results_case(r, totals, kind, result, listing_file):
    name = f"r_{kind}"
    with open(listing_file, "w") as f:
        json.dump({"tools": [{"name": name, "inputSchema": {"type": "object"}}],
                   "results": {name: result}}, f)
    r.settings({"command": os.path.join(r.s.bin, "mcp-fixture"),
                "args": ["--raw", "--listing", listing_file]})
    _, out, responses, _ = r.gemini({"suffix": f"mcp_tl_{name}", "args": {}})
    theirs = responses[0].get("response") if responses else None
    r.ours_tools()
    ours = r.ours_call(f"mcp_tl_{name}", {})
    ours_response = (ours.get("functionResponse") or {}).get("functionResponse", {}).get("response")
    theirs_error = theirs is None or "error" in theirs
    ours_error = "error" in ours or (ours_response or {}).get("error") is not None
    differ = []
    count(totals, differ, f"{kind}: the model is told of an error", theirs_error, ours_error,
          accepted=not ours_error and theirs_error)
    if not theirs_error and not ours_error:
        count(totals, differ, f"{kind}: functionResponse", json.dumps(theirs, sort_keys=True),
              json.dumps(ours_response, sort_keys=True))
    return differ, out


def env_case(r, totals, value):
    r.settings({"command": os.path.join(r.s.bin, "mcp-fixture"), "env": {"DIFF_ENV": value}})
    _, out, responses, _ = r.gemini({"suffix": "mcp_tl_env", "args": {"name": "DIFF_ENV"}})
    theirs = json.dumps(responses[0].get("response") if responses else None, sort_keys=True)
    r.ours_tools()
    ours = r.ours_call("mcp_tl_env", {"name": "DIFF_ENV"})
    ours = (ours.get("functionResponse") or {}).get("functionResponse", {}).get("response", ours)
    differ = []
    count(totals, differ, f"env {value!r}", theirs, json.dumps(ours, sort_keys=True))
    return differ, out


def refusal_case(r, totals, rule, args):
    policy = os.path.join(r.gemini_dir, "policies", "differential-tools.toml")
    os.makedirs(os.path.dirname(policy), exist_ok=True)
    # The tool is allowed (so it is offered in a headless run), the rule denies this call.
    rules = [{"toolName": "mcp_tl_echo", "decision": "allow", "priority": 50}, rule]
    with open(policy, "w") as f:
        f.write("".join("[[rule]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in x.items())
                        for x in rules))
    try:
        # Not trusted: the rule decides.
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                    "mcpServers": {"tl": {"command": os.path.join(r.s.bin, "mcp-fixture")}}}
        r.h.write(os.path.join(r.gemini_dir, "settings.json"), settings)
        _, out, responses, _ = r.gemini({"suffix": "mcp_tl_echo", "args": args})
        theirs = (responses[0].get("response") or {}).get("error") if responses else None
        r.gemctl("mcp", "reload")
        # A deny is a deny for the person too: `gemctl call` gets the text a model gets.
        ours = r.ours_call("mcp_tl_echo", args)
        ours_text = (ours.get("error") or {}).get("message") if "error" in ours else None
    finally:
        os.remove(policy)
    differ = []
    home = r.h.home
    if ours_text and home in ours_text:
        totals["differ"] += 1
        differ.append(f"geminid's refusal names the home folder: {ours_text}")
    else:
            count(totals, differ, f"refusal of {json.dumps(rule)}", theirs, ours_text,
              accepted=bool(theirs and ours_text and ours_text.startswith(theirs)))
    return differ, out


def run(s, h, totals, rng, count_, expect):
    """The tool cases in the home `h` of the differential suite (its daemon up)."""
    with open(os.path.join(s.root, "README.md")) as f:
        readme = " ".join(f.read().split())
    for line in QUOTED:
        expect(" ".join(line.split()) in readme, f"the README no longer says: {line}")
    tmp, log, mock, port = warm_bench.start_mock("differential-tools",
                                                 {"suffix": "__no_such_tool", "args": {}})
    ws = os.path.join(h.tmp, "ws-tools")
    os.makedirs(ws, exist_ok=True)
    env = dict(h.env("env-true"), GEMINI_API_KEY="interop-fake-key", DIFF_V="from-the-session",
               GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}")
    r = Runner(s, h, env, log, ws)
    listing_file = os.path.join(h.tmp, "tools-listing.json")
    try:
        listings = [(f"hand-picked {i}", t) for i, t in enumerate(hand_picked())]
        listings += [(f"seed case {i}", listing(rng)) for i in range(count_)]
        for what, tools in listings:
            def one(tools=tools):
                differ, out = listing_case(r, totals, tools, listing_file)
                expect(not differ, json.dumps([t for _, t in tools]) + ":\n      "
                       + "\n      ".join(differ) + (f"\n      Gemini CLI: {out[-600:]}" if differ else ""))
            s.check("differential", f"tool listing, {what}", one)
        for kind, result, _ in RESULTS:
            def one(kind=kind, result=result):
                differ, out = results_case(r, totals, kind, result, listing_file)
                expect(not differ, "\n      ".join(differ) + f"\n      Gemini CLI: {out[-600:]}")
            s.check("differential", f"tool result, {kind}", one)
        for value, what in ENV:
            def one(value=value):
                differ, out = env_case(r, totals, value)
                expect(not differ, "\n      ".join(differ) + f"\n      Gemini CLI: {out[-600:]}")
            s.check("differential", f"env value, {what}", one)
        for rule, args in [
            ({"toolName": "mcp_tl_echo", "decision": "deny", "priority": 100,
              "argsPattern": "secret"}, {"text": "secret"}),
            ({"toolName": "mcp_tl_echo", "decision": "deny", "priority": 100,
              "argsPattern": "secret", "deny_message": "No secrets."}, {"text": "secret"}),
        ]:
            def one(rule=rule, args=args):
                differ, out = refusal_case(r, totals, rule, args)
                expect(not differ, "\n      ".join(differ) + f"\n      Gemini CLI: {out[-600:]}")
            s.check("differential", f"refusal text, {json.dumps(rule)}", one)
    finally:
        h.write(os.path.join(h.home, ".gemini", "settings.json"), {})
        mock.terminate()
        mock.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
