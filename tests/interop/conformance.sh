#!/usr/bin/env bash
# The MCP conformance suite's client scenarios against geminid in the client role: for each
# protocol revision, `conformance client --suite all` runs tests/src/bin/conformance-client.rs
# (a fresh geminid whose one server is the scenario's) and must fail only what the revision's
# baseline (conformance/<revision>.yml, each entry with its reason) expects. Results land in
# .cache/interop/conformance/results-<revision>/; docs/CONFORMANCE.md records them. Then the
# suite's server scenarios against geminid's gateway (conformance_server.py).
# Usage: tests/interop/conformance.sh [--install-only]   (needs the debug binaries built)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="$root/.cache/interop"
here="$root/tests/interop/conformance"

# revision → the suite's release that covers it (0.1.16 is the latest stable; the 2026-07-28
# scenarios are only in the 0.2 alphas). Both need Node 22.
REVISIONS=("2025-11-25" "2026-07-28")
PACKAGES=("@modelcontextprotocol/conformance@0.1.16" "@modelcontextprotocol/conformance@0.2.0-alpha.12")
NODE22="node@22.23.3"

for i in "${!REVISIONS[@]}"; do
  dir="$cache/conformance/${REVISIONS[$i]}"
  stamp="$dir/installed-$(printf '%s' "${PACKAGES[$i]}" | sha256sum | cut -c1-16)"
  if [ ! -e "$stamp" ]; then
    echo "conformance: installing ${PACKAGES[$i]} into $dir" >&2
    mkdir -p "$dir"
    npm install --silent --no-audit --no-fund --prefix "$dir" "${PACKAGES[$i]}" >&2
    touch "$stamp"
  fi
done
if [ ! -x "$cache/node22/node_modules/.bin/node" ]; then
  npm install --silent --no-audit --no-fund --prefix "$cache/node22" "$NODE22" >&2
fi
[ "${1:-}" = "--install-only" ] && exit 0

adapter="$root/target/debug/conformance-client"
[ -x "$adapter" ] || { echo "conformance: build first (cargo build --workspace)" >&2; exit 1; }
export PATH="$cache/node22/node_modules/.bin:$PATH"
status=0
for i in "${!REVISIONS[@]}"; do
  rev="${REVISIONS[$i]}"
  out="$cache/conformance/results-$rev"
  rm -rf "$out"
  echo "conformance: client scenarios of $rev (${PACKAGES[$i]})" >&2
  log="$cache/conformance/run-$rev.log"
  if (cd "$cache/conformance" && "$cache/conformance/$rev/node_modules/.bin/conformance" client \
        --command "$adapter" --suite all --spec-version "$rev" \
        --expected-failures "$here/$rev.yml" -o "$out" >"$log" 2>&1); then
    verdict="only the expected failures"
  else
    verdict="UNEXPECTED (see $log)"
    status=1
  fi
  echo "conformance: $rev: $verdict"
  python3 "$here/summary.py" "$out"
done
# The server scenarios, against the gateway (conformance_server.py: its own daemon and home).
python3 "$root/tests/interop/conformance_server.py" "$root" "$cache" || status=1
exit "$status"
