#!/usr/bin/env bash
# Interop suite: real third-party MCP servers, driven through gemctl against a real geminid.
# Installs pinned packages into .cache/interop (re-used when present), then runs checks.py and
# the MCP conformance suite's client scenarios (conformance.sh).
# Usage: tests/interop/run.sh   (from anywhere; builds the debug binaries if needed)
#        tests/interop/run.sh --install-only   (the packages alone, for running one part by hand)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="$root/.cache/interop"
mkdir -p "$cache"

# Pinned versions (bump deliberately).
NPM_PACKAGES=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
)
PIP_PACKAGES=("mcp-server-time==2026.10.19" "mcp==2.3.0" "fastmcp==4.2.3")
# MCP clients of the gateway; the Inspector needs Node 22, installed from npm beside them. The
# TypeScript SDK's client (many_clients.py) runs on the machine's Node.
CLIENT_PACKAGES=("@modelcontextprotocol/inspector@2.12.0" "@google/gemini-cli@0.61.0"
  "@modelcontextprotocol/sdk@1.32.2")
NODE22="node@22.23.3"

stamp="$cache/installed-$(printf '%s\n' "${NPM_PACKAGES[@]}" "${PIP_PACKAGES[@]}" "${CLIENT_PACKAGES[@]}" "$NODE22" | sha256sum | cut -c1-16)"
if [ ! -e "$stamp" ]; then
  echo "interop: installing pinned servers and clients into $cache" >&2
  (cd "$cache" && npm install --silent --no-audit --no-fund --prefix "$cache" "${NPM_PACKAGES[@]}" >&2)
  mkdir -p "$cache/clients" "$cache/node22"
  npm install --silent --no-audit --no-fund --prefix "$cache/clients" "${CLIENT_PACKAGES[@]}" >&2
  npm install --silent --no-audit --no-fund --prefix "$cache/node22" "$NODE22" >&2
  python3 -m venv "$cache/venv"
  "$cache/venv/bin/pip" install --quiet "${PIP_PACKAGES[@]}" >&2
  touch "$stamp"
fi
# The editor of the ACP check (acp.py): the Agent Client Protocol's TypeScript SDK, in a folder
# of its own with a stamp of its own, so that adding it did not reinstall everything above.
ACP_PACKAGES=("@agentclientprotocol/sdk@2.4.0")
acp_stamp="$cache/acp/installed-$(printf '%s\n' "${ACP_PACKAGES[@]}" | sha256sum | cut -c1-16)"
if [ ! -e "$acp_stamp" ]; then
  echo "interop: installing the ACP editor's SDK into $cache/acp" >&2
  mkdir -p "$cache/acp"
  npm install --silent --no-audit --no-fund --prefix "$cache/acp" "${ACP_PACKAGES[@]}" >&2
  touch "$acp_stamp"
fi

# The OTLP receiver of the telemetry check (otlp.py): OpenTelemetry's official protobufs, into
# the venv above with a stamp of their own, so that adding them did not reinstall everything.
OTEL_PIP_PACKAGES=("opentelemetry-proto==1.45.2")
otel_stamp="$cache/otel/installed-$(printf '%s\n' "${OTEL_PIP_PACKAGES[@]}" | sha256sum | cut -c1-16)"
if [ ! -e "$otel_stamp" ]; then
  echo "interop: installing the OTLP receiver's protobufs into $cache/venv" >&2
  mkdir -p "$cache/otel"
  "$cache/venv/bin/pip" install --quiet "${OTEL_PIP_PACKAGES[@]}" >&2
  touch "$otel_stamp"
fi

# A local npm registry for the artifact-pinning check (artifact_npm.py): verdaccio, in a folder
# of its own with a stamp of its own, like the ACP editor's SDK.
REGISTRY_PACKAGES=("verdaccio@6.10.4")
registry_stamp="$cache/registry/installed-$(printf '%s\n' "${REGISTRY_PACKAGES[@]}" | sha256sum | cut -c1-16)"
if [ ! -e "$registry_stamp" ]; then
  echo "interop: installing the local npm registry into $cache/registry" >&2
  mkdir -p "$cache/registry"
  npm install --silent --no-audit --no-fund --prefix "$cache/registry" "${REGISTRY_PACKAGES[@]}" >&2
  touch "$registry_stamp"
fi

# uv and pipx, for the artifact pinning of `uvx` / `uv tool run` / `pipx run` servers
# (pypi_pins.py): a venv of their own with a stamp of its own. PyPI's `uv` is a wheel holding
# the binary.
PYTOOLS_PACKAGES=("uv==0.13.10" "pipx==1.18.16")
pytools_stamp="$cache/pytools/installed-$(printf '%s\n' "${PYTOOLS_PACKAGES[@]}" | sha256sum | cut -c1-16)"
if [ ! -e "$pytools_stamp" ]; then
  echo "interop: installing uv and pipx into $cache/pytools" >&2
  python3 -m venv "$cache/pytools"
  "$cache/pytools/bin/pip" install --quiet "${PYTOOLS_PACKAGES[@]}" >&2
  touch "$pytools_stamp"
fi

# The MCP conformance suite's client scenarios (tests/interop/conformance.sh) run after the
# checks, in the same place; their packages are installed here, while the network is there.
"$root/tests/interop/conformance.sh" --install-only
# Claude Code and Codex CLI, for `gemctl clients connect` (clients.py).
"$root/tests/interop/agents.sh" --install-only
if [ "${1:-}" = "--install-only" ]; then
  exit 0
fi

(cd "$root" && cargo build --workspace --locked --quiet)
checks=(python3 "$root/tests/interop/checks.py" --root "$root" --cache "$cache")
conformance="$root/tests/interop/conformance.sh"
# Network servers that cannot be told to bind loopback only run in a private network namespace
# (loopback up, nothing else); where that is not permitted, the suite says it skips them.
if unshare -n true 2>/dev/null && command -v ip >/dev/null; then
  exec unshare -n sh -c 'ip link set lo up && "$@" && exec "$0"' "$conformance" "${checks[@]}" --network
fi
"${checks[@]}"
exec "$conformance"
