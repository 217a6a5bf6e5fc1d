#!/usr/bin/env bash
# Other agents' real CLIs, for `gemctl clients connect` (issue 69, item 3): Claude Code and
# Codex CLI from npm, pinned, each in its own folder of the interop cache (re-used when present).
# Usage: tests/interop/agents.sh --install-only   (run.sh calls it; clients.py uses the binaries)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="$root/.cache/interop/agents"
# Pinned versions (bump deliberately).
PACKAGES=("@anthropic-ai/claude-code@2.1.337" "@openai/codex@0.171.0")
stamp="$cache/installed-$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-16)"
if [ ! -e "$stamp" ]; then
  echo "interop: installing ${PACKAGES[*]} into $cache" >&2
  mkdir -p "$cache"
  npm install --silent --no-audit --no-fund --prefix "$cache" "${PACKAGES[@]}" >&2
  touch "$stamp"
fi
[ "${1:-}" = "--install-only" ] && exit 0
echo "usage: $0 --install-only" >&2
exit 2
