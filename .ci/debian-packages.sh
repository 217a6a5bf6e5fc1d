#!/usr/bin/env bash
# The Debian packages the tests use, installed with apt-get where a command is missing (CI runs
# as root; elsewhere, run this with sudo once):
# - gnome-keyring and dbus: the keyring tests run a real Secret Service (GNOME Keyring on a
#   private D-Bus session bus); under CI they fail rather than skip when it is missing;
# - stress-ng: the end-to-end suite runs a second time beside two CPU-bound workers (README,
#   "Set-up");
# - prometheus: the interop suite's Prometheus check (tests/interop/prometheus.py) scrapes the
#   daemon's /metrics with a real Prometheus and asks its query API.
set -euo pipefail
wanted=()
command -v gnome-keyring-daemon >/dev/null || wanted+=(gnome-keyring)
command -v dbus-send >/dev/null || wanted+=(dbus)
command -v stress-ng >/dev/null || wanted+=(stress-ng)
command -v prometheus >/dev/null || wanted+=(prometheus)
if [ "${#wanted[@]}" -gt 0 ]; then
  apt-get update -qq
  # The package's service is not started (no init here, and the check starts its own).
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${wanted[@]}" >/dev/null
fi
