"""``make test-wheel``: the course as a learner without a clone gets it, checked end to end.

Builds the wheel from this repository, installs it with the ``course`` extra into a fresh venv
in a temporary folder outside the repository (the versions pinned by ``requirements.txt`` as
constraints, so it is the tested stack), and there, in an empty folder: ``lmcore-course doctor``,
``lmcore-course lab --dry-run`` (which builds ``workspace/`` from the notebooks the wheel
installed) and notebook 00 of that workspace executed top to bottom by the venv's own kernel
(no cell may raise). Nothing in it can import the repository: the venv is new, the folder is
empty, ``PYTHONPATH`` is dropped. Paths, venvs and subprocesses as on Windows and macOS too (no
shell). Prints each step's seconds; exit 1 with the failing step's output on a failure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

from .paths import REPO

__all__ = ["venv_bin", "build_wheel", "check_wheel", "main"]


def venv_bin(env_dir, name: str) -> Path:
    """The path of ``name`` (python, a console script) in the venv ``env_dir``, on this OS."""
    if os.name == "nt":
        return Path(env_dir) / "Scripts" / (name if name.endswith(".exe") else f"{name}.exe")
    return Path(env_dir) / "bin" / name


def _run(step: str, cmd: list, log, **kw) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    run = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    log(
        f"{step}: {'ok' if run.returncode == 0 else f'FAILED (exit {run.returncode})'} ({time.perf_counter() - t0:.0f} s)"
    )
    if run.returncode != 0:
        raise RuntimeError(f"{step} failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}")
    return run


def build_wheel(out, *, repo=REPO, log=print) -> Path:
    """Build lmcore's wheel from ``repo`` into ``out``; returns its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("lmcore-*.whl"):
        old.unlink()
    _run("build the wheel", [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", repo, "-w", out], log)
    (wheel,) = out.glob("lmcore-*.whl")
    return wheel


def check_wheel(wheel, scratch, *, constraints=REPO / "requirements.txt", log=print) -> dict:
    """Install ``wheel`` (with its ``course`` extra) into a new venv under ``scratch`` and run the
    learner's first steps there; returns the outputs of doctor and lab --dry-run."""
    scratch = Path(scratch)
    env_dir, home = scratch / "venv", scratch / "empty folder"
    home.mkdir(parents=True)
    t0 = time.perf_counter()
    venv.create(env_dir, with_pip=True)
    log(f"a fresh venv: ok ({time.perf_counter() - t0:.0f} s)")
    python = venv_bin(env_dir, "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "LMCORE_NOTEBOOKS")}
    pins = ["-c", constraints] if constraints and Path(constraints).is_file() else []
    _run(
        "install the wheel [course]",
        [python, "-m", "pip", "install", "-q", f"{wheel}[course]", *pins],
        log,
        env=env,
    )
    where = _run(
        "import lmcore", [python, "-c", "import lmcore; print(lmcore.__file__)"], log, env=env, cwd=home
    )
    if Path(where.stdout.strip()).resolve().is_relative_to(Path(REPO).resolve()):
        raise RuntimeError(
            f"the venv imports lmcore from the repository ({where.stdout.strip()}), not the wheel"
        )
    course = venv_bin(env_dir, "lmcore-course")
    doctor = _run("lmcore-course doctor", [course, "doctor", "--device", "cpu"], log, env=env, cwd=home)
    lab = _run("lmcore-course lab --dry-run", [course, "lab", "--dry-run"], log, env=env, cwd=home)
    notebook = home / "workspace" / "notebooks" / "00_start_here.ipynb"
    if not notebook.is_file():
        raise RuntimeError(f"lab --dry-run wrote no {notebook}:\n{lab.stdout}")
    # make notebooks' runner as the venv installed it (its kernel: the venv's python); a cell
    # that raises fails the step
    run00 = [python, "-m", "lmcore.course.build.nbtools", notebook]
    _run("notebook 00 of the workspace", run00, log, env=env, cwd=home)
    return {"doctor": doctor.stdout, "lab": lab.stdout}


def main(argv=None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "build" / "wheel", help="where the wheel goes")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        wheel = build_wheel(args.out)
        with tempfile.TemporaryDirectory(prefix="lmcore-wheel-") as scratch:
            outputs = check_wheel(wheel, scratch)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    print(outputs["doctor"].rstrip())
    print(f"the wheel {wheel.name} works without a clone ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
