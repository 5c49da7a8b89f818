"""nbval under other CPU code paths, against the committed outputs: ``make test-portable``.

A training run or a long float reduction changes in its last digits from one kernel path to
another, so the notebooks print measurements as verdicts with honest tolerances (README,
"Any CPU, any device"). This re-runs nbval over the notebooks under two other paths:

- ``default``: PyTorch's non-vectorised kernels (``ATEN_CPU_CAPABILITY=default``).
- ``avx2-mkl``: PyTorch's AVX2 kernels (``ATEN_CPU_CAPABILITY=avx2``; where the CPU lacks AVX2,
  PyTorch falls back and says so) with MKL's matrix multiplications on another code path than
  the machine's own (``MKL_CBWR``, MKL's conditional-reproducibility switch).
  ``ATEN_CPU_CAPABILITY`` switches PyTorch's own vector kernels but not MKL's, which pick their
  path from the CPU model by themselves; so ``MKL_CBWR`` is set by :func:`mkl_path`: on a CPU with
  AVX-512, ``AVX2`` (the path of most learners' laptops, 1.2x the time of the native path for
  08's training here); on any other, ``COMPATIBLE`` (MKL's generic path: on an AVX2 machine the
  ``AVX2`` and ``SSE4_2`` paths give the native path's bits, so only it differs; 2x to 3.4x the
  time of a matmul-bound training run).

Each (path, notebook) pair is one job: a pytest process over a copy of the notebook in
``build/portable/<path>/`` (08 writes its run beside itself, and two paths must not share it),
its kernel on one thread (``OMP_NUM_THREADS=1`` unless set: kernels side by side with torch's
default threads spin-wait on each other). ``--jobs`` of them run at once (default: one per
core, at most the number of jobs), the largest notebooks first, so the long ones (08 trains
1,500 steps under each path) overlap the rest. One line per job, its log in
``build/portable/<path>/<notebook>.log``, then ``N passed, M failed`` over the jobs; exit status
1 if any failed.

    python -m lmcore.course.build.portable [GLOB ...] [--jobs N]      # default: every notebook
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .paths import REPO

__all__ = ["PATHS", "mkl_path", "run_paths", "main"]


def mkl_path(capability: str | None = None) -> str:
    """The ``MKL_CBWR`` value that moves MKL off this machine's own path: ``"AVX2"`` where
    PyTorch finds AVX-512 (``capability``, default ``torch.backends.cpu.get_cpu_capability()``),
    else ``"COMPATIBLE"``."""
    if capability is None:
        import torch

        capability = torch.backends.cpu.get_cpu_capability()
    if not isinstance(capability, str):
        raise TypeError(f"capability must be a str such as 'AVX512'; got {type(capability).__name__}.")
    return "AVX2" if capability.upper().startswith("AVX512") else "COMPATIBLE"


PATHS = {
    "default": {"ATEN_CPU_CAPABILITY": "default"},
    "avx2-mkl": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": mkl_path()},
}


def _notebooks(folder: Path, patterns) -> list[Path]:
    found = [
        p
        for p in sorted(Path(folder).glob("*.ipynb"))
        if any(fnmatch.fnmatch(p.name, g) or fnmatch.fnmatch(p.stem, g) for g in patterns)
    ]
    if not found:
        raise ValueError(f"patterns {list(patterns)!r} match no notebook in {folder}.")
    return found


def _summary(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def _copies(notebooks, folder: Path) -> list[Path]:
    """Copies of ``notebooks`` in ``folder`` (emptied first)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return [Path(shutil.copy2(nb, folder / Path(nb).name)) for nb in notebooks]


def _run_one(notebook: Path, env: dict, cwd) -> tuple:
    """nbval over one notebook in its own pytest process; (exit status, seconds, summary)."""
    start = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", str(notebook)]
    run = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, errors="replace")
    notebook.with_suffix(".log").write_text(run.stdout + run.stderr, encoding="utf-8")
    return run.returncode, time.monotonic() - start, _summary(run.stdout + run.stderr)


def run_paths(notebooks, out: Path, paths=PATHS, *, jobs: int | None = None, cwd=REPO, log=print) -> dict:
    """nbval over ``notebooks`` under each of ``paths`` (name -> environment variables), one job
    per (path, notebook), ``jobs`` at once, largest notebook first. Returns
    (path, notebook name) -> (exit status, seconds, summary line), in the order they ended."""
    out.mkdir(parents=True, exist_ok=True)
    work = []
    for name, env_vars in paths.items():
        env = {"OMP_NUM_THREADS": "1", **os.environ, **env_vars}
        work += [(name, copy, env) for copy in _copies(notebooks, out / name)]
    work.sort(key=lambda job: -job[1].stat().st_size)  # stable: the paths alternate within a size
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(work)))
    results = {}

    def job(item):
        name, copy, env = item
        code, seconds, summary = _run_one(copy, env, cwd)
        results[(name, copy.name)] = (code, seconds, summary)
        log(f"{'PASS' if code == 0 else 'FAIL'} {name} {copy.name} ({seconds:.0f} s): {summary}")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(job, work))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", default=["*"], help="notebook name globs (default: all)")
    parser.add_argument("--notebooks", type=Path, default=REPO / "notebooks")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "portable")
    parser.add_argument("--jobs", type=int, default=None, help="jobs at once (default: one per core)")
    args = parser.parse_args(argv)
    notebooks = _notebooks(args.notebooks, args.patterns)
    for name, env_vars in PATHS.items():
        print(f"{name}: " + " ".join(f"{k}={v}" for k, v in env_vars.items()), flush=True)
    start = time.monotonic()
    results = run_paths(notebooks, args.out, jobs=args.jobs, log=lambda line: print(line, flush=True))
    failed = [key for key, (code, _, _) in results.items() if code != 0]
    for name, nb in failed:
        log = (args.out / name / nb).with_suffix(".log")
        print(f"--- {name} {nb} ({log}) ---")
        print(log.read_text(encoding="utf-8", errors="replace")[-6000:])
    print(f"portable: {len(notebooks)} notebooks x {len(PATHS)} paths in {time.monotonic() - start:.0f} s")
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
