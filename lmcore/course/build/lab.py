"""``make lab``: build or refresh the learner's workspace, then start JupyterLab on it.

- ``make lab`` (``--edition learner``): the workspace ``workspace/`` (git-ignored, see
  :mod:`lmcore.course.build.workspace`), opened on its start page. Autosave stays on: the
  folder is the learner's.
- ``make lab LANG=zh`` (``--lang zh``): the same from the Chinese edition (``zh/notebooks/``) in
  ``workspace-zh/``, opened on its Chinese start page.
- ``make lab EDITION=instructor``: the repository itself (``notebooks/``, solutions in place),
  with autosave off, so opening a notebook never rewrites a tracked file.

Both use their own Lab settings and workspace state in ``.lab/<edition>/`` (git-ignored): no
news pop-up, no update check, every cell in the page, Markdown opening rendered. ``--dry-run``
builds the workspace and prints the command instead of starting it (the tests use it).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from .paths import DEFAULT_WORKSPACE, LAB_STATE, course_root
from .workspace import LANGUAGES, build_workspace, report

__all__ = ["EDITIONS", "lab_settings", "lab_command", "write_settings", "main"]

EDITIONS = ("learner", "instructor")
_NOTIFY = "@jupyterlab/apputils-extension/notification.jupyterlab-settings"
_DOCS = "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings"
_NOTEBOOK = "@jupyterlab/notebook-extension/tracker.jupyterlab-settings"


def lab_settings(edition: str = "learner") -> dict:
    """JupyterLab user settings (file under the settings dir -> values) for ``edition``."""
    if edition not in EDITIONS:
        raise ValueError(f"edition must be one of {EDITIONS}, got {edition!r}")
    return {
        _NOTIFY: {"fetchNews": "false", "checkForUpdates": False},
        _DOCS: {"autosave": edition == "learner", "defaultViewers": {"markdown": "Markdown Preview"}},
        _NOTEBOOK: {"windowingMode": "none"},
    }


def write_settings(settings_dir, edition: str = "learner") -> None:
    """Write ``lab_settings(edition)`` under ``settings_dir``; a file already there is left alone
    (it holds what the user changed in Lab's settings editor)."""
    for rel, values in lab_settings(edition).items():
        path = Path(settings_dir) / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values, indent=1) + "\n")


def lab_command(edition: str, root, *, python=sys.executable, as_root: bool = False) -> list[str]:
    """The JupyterLab command line for ``edition`` rooted at ``root``."""
    if edition not in EDITIONS:
        raise ValueError(f"edition must be one of {EDITIONS}, got {edition!r}")
    start = "START_HERE.md" if edition == "learner" else "notebooks/00_start_here.ipynb"
    return [
        python,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={Path(root).resolve()}",
        f"--LabApp.default_url=/lab/tree/{start}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",
        *(["--allow-root"] if as_root else []),
    ]


def _shown(cmd: list[str]) -> str:
    """``cmd`` as this platform's shell would take it (cmd.exe quoting on Windows)."""
    return subprocess.list2cmdline(cmd) if os.name == "nt" else shlex.join(cmd)


def main(argv=None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--edition", default="learner", choices=EDITIONS)
    parser.add_argument("--lang", default="en", choices=LANGUAGES, help="the notebooks' language (zh: 中文)")
    parser.add_argument(
        "--workspace",
        default=None,
        help="the learner's folder (default: workspace, or workspace-zh for --lang zh)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="build or refresh the workspace, print the command, start nothing",
    )
    args = parser.parse_args(argv)
    if args.workspace is None:
        default = Path(DEFAULT_WORKSPACE)
        args.workspace = str(
            default if args.lang == "en" else default.with_name(f"{default.name}-{args.lang}")
        )
    if args.edition == "learner":
        print(report(build_workspace(args.workspace, lang=args.lang), args.workspace), flush=True)
        root = Path(args.workspace)
    else:
        root = course_root() / ("" if args.lang == "en" else args.lang)
    state = LAB_STATE / args.edition
    env = dict(os.environ)
    env["JUPYTERLAB_SETTINGS_DIR"] = str(state / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(state / "workspaces")
    cmd = lab_command(args.edition, root, as_root=hasattr(os, "geteuid") and os.geteuid() == 0)
    if args.dry_run:
        quote = shlex.quote if os.name != "nt" else lambda v: subprocess.list2cmdline([v])
        settings = [f"{k}={quote(env[k])}" for k in ("JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR")]
        print("would run:", *settings, _shown(cmd))
        return 0
    write_settings(state / "settings", args.edition)
    print(f"JupyterLab on {root} ({args.edition} edition); stop it with Ctrl+C", flush=True)
    if os.name == "nt":  # no exec on Windows: Lab runs as a child; Ctrl+C reaches both
        try:
            return subprocess.call(cmd, env=env)
        except KeyboardInterrupt:
            return 130
    os.execvpe(cmd[0], cmd, env)  # Lab takes this process over: Ctrl+C asks Lab to stop
    return 0  # pragma: no cover - execvpe does not return


if __name__ == "__main__":
    sys.exit(main())
