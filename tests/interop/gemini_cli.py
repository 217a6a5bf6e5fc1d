"""Running Gemini CLI in the suite's home, and reaping what it leaves behind.

Gemini CLI starts every configured MCP server for some commands (`skills list`, COMPAT §12) and
may exit before they do: a server it started then lives on with no parent (one of the faults
geminid exists to fix). Such a process is Gemini CLI's, not geminid's, so it must not count as
one geminid left behind: every Gemini CLI run carries a marker in its environment, which its
children inherit, and what still carries it after the run is
killed and said.

The marker is also in a server geminid starts for a gateway that Gemini CLI ran (the daemon gives
a session's servers the environment of the client that opened the session): such a server is
geminid's, kept warm for the next client, and is left alone. Killing it made the next `gemini -p`
list while geminid waited out its restart backoff, and Gemini CLI drops a server that lists
nothing for the whole run (declared none of its tools).
"""

import os
import signal
import subprocess
import time
import uuid


def geminids():
    """The pids of geminid daemons running now."""
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
                if os.path.basename(exe) == "geminid":
                    found.add(int(pid))
            except OSError:
                pass
    return found


def under(pid, parents):
    """Whether `pid` descends from one of `parents`."""
    seen = 0
    while pid > 1 and seen < 64:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid in parents:
            return True
        seen += 1
    return False


def marked(marker):
    """Processes whose environment holds `marker`, but geminid's (a daemon a gateway started,
    its servers)."""
    found = []
    needle = marker.encode()
    daemons = geminids()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read() and int(pid) not in daemons and not under(int(pid), daemons):
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
