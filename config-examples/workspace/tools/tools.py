#!/usr/bin/env python3
"""Custom tools for Gemini CLI and geminid (`tools.discoveryCommand` / `tools.callCommand`).

`tools.py --list` prints the declarations; `tools.py NAME` runs one, its arguments as JSON on
stdin, its result on stdout (anything on stderr, or a non-zero exit, makes the call an error).
"""
import json
import sys

DECLARATIONS = [
    {
        "name": "word_count",
        "description": "Counts the words of a text",
        "parametersJsonSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text"}},
            "required": ["text"],
        },
    }
]


def main():
    if sys.argv[1:] == ["--list"]:
        print(json.dumps(DECLARATIONS))
        return 0
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    args = json.load(sys.stdin)
    if name == "word_count":
        print(len(str(args.get("text", "")).split()))
        return 0
    print(f"no tool named {name!r}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
