#!/bin/sh
# tools.callCommand: geminid (as Gemini CLI) runs it with the tool's name as its one argument
# and the arguments as JSON on stdin.
exec python3 "$(dirname "$0")/tools.py" "$1"
