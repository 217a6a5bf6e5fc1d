"""A git server on 127.0.0.1 for the interop suite: git's own smart HTTP (`git http-backend`,
as CGI) over the repositories under one folder, so that Gemini CLI, which takes only `http(s)`,
`git@`, `ssh`, `sso`, `github:` and `gitlab:` sources as git, installs and updates from a
repository as it would from a forge.

    server = GitHttp(root); url = server.publish(work, "name", {"path": "text"}); ...
    server.stop()
"""

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BACKEND = subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip()


def git(cwd, *args):
    p = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                        "-c", "init.defaultBranch=main", *args], cwd=cwd, capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {p.stderr}")


class GitHttp:
    def __init__(self, root):
        self.root = root

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.backend()

            def do_POST(self):
                self.backend()

            def backend(self):
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1",
                           PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                           CONTENT_TYPE=self.headers.get("Content-Type", ""),
                           CONTENT_LENGTH=str(len(body)), REMOTE_ADDR="127.0.0.1",
                           GIT_PROTOCOL=self.headers.get("Git-Protocol", ""),
                           HTTP_CONTENT_ENCODING=self.headers.get("Content-Encoding", ""))
                out = subprocess.run([os.path.join(BACKEND, "git-http-backend")], input=body,
                                     env=env, capture_output=True).stdout
                head, _, payload = out.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode("latin-1").split("\r\n"):
                    key, _, value = line.partition(": ")
                    if key.lower() == "status":
                        status = int(value.split()[0])
                    elif key:
                        headers.append((key, value))
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name):
        return f"http://127.0.0.1:{self.server.server_port}/{name}"

    def publish(self, work, name, files):
        """Commit `files` ({path: text}) in the working repository `work` (made when new) and
        serve it as `name.git` (pushed when it is already served); its URL."""
        if not os.path.isdir(os.path.join(work, ".git")):
            os.makedirs(work, exist_ok=True)
            git(work, "init", "-q")
        for rel, text in files.items():
            with open(os.path.join(work, rel), "w") as f:
                f.write(text)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", "version")
        bare = os.path.join(self.root, f"{name}.git")
        if os.path.isdir(bare):
            git(work, "push", "-q", bare, "HEAD:main")
        else:
            git(work, "clone", "-q", "--bare", work, bare)
        return self.url(f"{name}.git")

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
