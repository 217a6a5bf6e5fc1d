"""Running Gemini CLI in the suite's home, and reaping what it leaves behind.

Gemini CLI starts every configured MCP server for some commands (`skills list`, COMPAT §12) and
may exit before they do: a server it started then lives on with no parent (one of the faults
geminid exists to fix). Such a process is Gemini CLI's, not geminid's, so it must not count as
one geminid left behind: every Gemini CLI run carries a marker in its environment, which its
children inherit and nothing of geminid's has, and what still carries it after the run is
killed and said.
"""

import os
import signal
import subprocess
import time
import uuid


def marked(marker):
    """Processes whose environment holds `marker`."""
    found = []
    needle = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def run(argv, env, cwd, timeout):
    """Run Gemini CLI to its end: (exit code, stdout + stderr). Its leftover processes are killed
    (after a moment to exit on their own) and named on stderr."""
    marker = f"GEMINID_INTEROP_GEMINI_RUN={uuid.uuid4().hex}"
    name, value = marker.split("=", 1)
    p = subprocess.run(argv, env=dict(env, **{name: value}), cwd=cwd, capture_output=True,
                       text=True, timeout=timeout)
    deadline = time.time() + 2
    left = marked(marker)
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = marked(marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if left:
        print(f"note    Gemini CLI left {len(left)} process(es) of its own behind "
              f"(`{' '.join(os.path.basename(a) for a in argv[:2])}`); killed", flush=True)
    return p.returncode, p.stdout + p.stderr
