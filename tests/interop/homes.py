"""A temporary home for a geminid of the interop suite's own, and the environment its daemon,
gemctl and Gemini CLI run with: every path of theirs inside it (socket, state, settings), the
workspace trusted, and nothing of the machine's own geminid or Gemini CLI set-up."""

import os


def make(tmp):
    """The home's folders under `tmp` (the socket's 0700)."""
    for d in (os.path.join(tmp, "home", ".gemini"), os.path.join(tmp, "run"),
              os.path.join(tmp, "state")):
        os.makedirs(d, exist_ok=True)
    os.chmod(os.path.join(tmp, "run"), 0o700)


def env(tmp, bin_dir, **extra):
    """The environment for a home under `tmp`, with `extra` set too."""
    e = dict(os.environ)
    e.update({
        "HOME": os.path.join(tmp, "home"),
        "XDG_STATE_HOME": os.path.join(tmp, "state"),
        "XDG_RUNTIME_DIR": os.path.join(tmp, "run-unused"),
        "GEMINID_SOCKET": os.path.join(tmp, "run", "geminid.sock"),
        "GEMINID_BIN": os.path.join(bin_dir, "geminid"),
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH": os.path.join(tmp, "etc-settings.json"),
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    })
    e.update(extra)
    # The default secrets store: what a user runs (a test that needs another says so).
    for k in ("GEMINID_DATA_DIR", "GEMINI_CLI_HOME", "GEMINID_SESSION", "GEMINID_SECRETS"):
        e.pop(k, None)
    return e
