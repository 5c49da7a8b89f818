"""A throwaway JupyterLab server for the browser test.

It serves a temporary COPY of the notebooks, or (``serve_in_place``, as ``make lab`` does, with
autosave off for the instructor edition) the folder itself, so the test can prove that a session
changes nothing there; it binds 127.0.0.1 on a free port with a random token, and keeps its config, runtime,
settings and workspace state in the same temporary folder, so neither the user's own Lab
settings nor anything left by a previous run can change what the test sees. The lab
extensions (ipywidgets' among them) are still found under the venv's ``share/jupyter``,
which stays on Jupyter's search path.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["LabServer", "free_port"]

# Lab settings that keep the page quiet and deterministic: every cell stays in the DOM
# (no windowing), no news/update toasts, no autosave churn.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LabServer:
    """Start with ``with LabServer(notebook_dir, log_path) as lab:``; ``lab.url(name)``."""

    def __init__(
        self,
        notebook_dir: Path,
        log_path: Path,
        *,
        start_timeout: float = 120.0,
        serve_in_place: bool = False,
        settings: dict | None = None,
    ):
        """``serve_in_place``: serve ``notebook_dir``'s parent itself, as ``make lab`` does (the
        test then proves that nothing in it changes); ``settings``: extra Lab user settings
        (``make lab``'s, from :func:`lmcore.course.build.lab.lab_settings`)."""
        self.source = Path(notebook_dir)
        self.serve_in_place = serve_in_place
        self.settings = {rel: dict(v) for rel, v in LAB_SETTINGS.items()}
        for rel, values in (settings or {}).items():
            self.settings.setdefault(rel, {}).update(values)
        self.log_path = Path(log_path)
        self.start_timeout = start_timeout
        self.token = secrets.token_hex(16)
        self.port = 0
        self.tmp: Path | None = None
        self.root: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._log = None

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> LabServer:
        self.tmp = Path(tempfile.mkdtemp(prefix="lmcore-browser-"))
        repo = self.source.resolve().parent
        if self.serve_in_place:
            served, self.root = repo, self.source.resolve()
        else:
            served = self.tmp / "repo"
            served.mkdir()
            self.root = served / self.source.name
            # Like a fresh clone: no checkpoints or training runs left by earlier sessions.
            shutil.copytree(
                self.source,
                self.root,
                ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "runs", "student"),
            )
            # Markdown images such as ../figures/x.png resolve as in the real repo.
            if (repo / "figures").is_dir():
                shutil.copytree(repo / "figures", served / "figures")
        env = self._environment()
        self.port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={served}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=self.root, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:
            self._wait_until_up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # jupyter_server shuts its kernels down on SIGTERM
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _environment(self) -> dict:
        env = dict(os.environ)
        dirs = {
            "JUPYTER_CONFIG_DIR": "config",
            "JUPYTER_RUNTIME_DIR": "runtime",
            "JUPYTER_DATA_DIR": "data",
            "JUPYTERLAB_SETTINGS_DIR": "settings",
            "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
            "IPYTHONDIR": "ipython",
            "MPLCONFIGDIR": "mpl",
        }
        for var, sub in dirs.items():
            path = self.tmp / sub
            path.mkdir()
            env[var] = str(path)
        # Only the user-level dirs move; sys.prefix/share/jupyter (lab extensions, kernels)
        # stays visible. Drop a caller's JUPYTER_PATH/CONFIG_PATH overrides for the same reason.
        for var in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_PREFER_ENV_PATH"):
            env.pop(var, None)
        for rel, values in self.settings.items():
            path = self.tmp / "settings" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with code {self.proc.returncode}; see {self.log_path}")
            try:
                self.api("GET", "/api/status")
                self.api("GET", "/lab")  # the Lab page itself, not just the REST API
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        raise RuntimeError(
            f"JupyterLab did not answer within {self.start_timeout:.0f} s; see {self.log_path}"
        )

    # ---------------------------------------------------------------- requests
    def api(self, method: str, path: str):
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        if resp.headers.get_content_type() == "application/json" and body:
            return json.loads(body)
        return body

    def url(self, notebook_name: str) -> str:
        """The Lab URL that opens one notebook alone in a fresh workspace."""
        return (
            f"http://127.0.0.1:{self.port}/lab/tree/{self.root.name}/{notebook_name}?reset&token={self.token}"
        )

    def shutdown_kernels(self) -> None:
        """End every session and kernel, so the next notebook gets the CPUs to itself."""
        for session in self.api("GET", "/api/sessions") or []:
            try:
                self.api("DELETE", f"/api/sessions/{session['id']}")
            except urllib.error.HTTPError:
                pass
        for kernel in self.api("GET", "/api/kernels") or []:
            try:
                self.api("DELETE", f"/api/kernels/{kernel['id']}")
            except urllib.error.HTTPError:
                pass
