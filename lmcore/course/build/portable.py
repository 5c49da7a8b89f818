"""nbval under other CPU code paths, against the committed outputs: ``make test-portable``.

A training run or a long float reduction changes in its last digits from one kernel path to
another, so the notebooks print measurements as verdicts with honest tolerances (README,
"Any CPU, any device"). This re-runs nbval over the notebooks under two other paths:

- ``default``: PyTorch's non-vectorised kernels (``ATEN_CPU_CAPABILITY=default``) and MKL's
  conditional-reproducibility code path (``MKL_CBWR=COMPATIBLE``). ``ATEN_CPU_CAPABILITY``
  switches PyTorch's own vector kernels but not MKL's matrix multiplications, which pick their
  code path from the CPU model by themselves; ``MKL_CBWR=COMPATIBLE`` sends them down MKL's
  generic path, so a machine whose MKL path differs from the authoring machine's is covered too.
- ``avx2``: PyTorch's AVX2 kernels (``ATEN_CPU_CAPABILITY=avx2``; where the CPU lacks AVX2,
  PyTorch falls back and says so).

The two paths run at the same time, one pytest process each (each notebook's kernel runs its
tiny models on one or two threads, so two processes fill two cores); each one's output goes to
``build/portable/<path>.log`` and its summary line is printed here. Exit status 1 if either failed.

    python -m lmcore.course.build.portable [GLOB ...]      # default: every notebook
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["PATHS", "run_paths", "main"]

PATHS = {
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
}
REPO = Path(__file__).resolve().parents[3]


def _notebooks(folder: Path, patterns) -> list[Path]:
    found = [
        p
        for p in sorted(folder.glob("*.ipynb"))
        if any(fnmatch.fnmatch(p.name, g) or fnmatch.fnmatch(p.stem, g) for g in patterns)
    ]
    if not found:
        raise ValueError(f"patterns {list(patterns)!r} match no notebook in {folder}.")
    return found


def _summary(log: Path) -> str:
    lines = [
        ln.strip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()
    ]
    return lines[-1] if lines else "(no output)"


def run_paths(notebooks, out: Path, paths=PATHS, *, cwd=REPO, log=print) -> dict:
    """nbval over ``notebooks`` under each of ``paths`` (name -> environment variables), all at
    once. Returns name -> (exit status, seconds, summary line)."""
    out.mkdir(parents=True, exist_ok=True)
    procs = {}
    for name, env_vars in paths.items():
        env = {**os.environ, **env_vars}
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval",
            *map(str, notebooks),
        ]
        handle = open(out / f"{name}.log", "w", encoding="utf-8")  # closed once the process ends
        procs[name] = (
            subprocess.Popen(cmd, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT),
            handle,
        )
        shown = " ".join(f"{k}={v}" for k, v in env_vars.items())
        log(f"{name}: {shown} pytest --nbval ({len(notebooks)} notebooks) -> {out / f'{name}.log'}")
    start, results = time.monotonic(), {}
    for name, (proc, handle) in procs.items():
        code = proc.wait()
        handle.close()
        results[name] = (code, time.monotonic() - start, _summary(out / f"{name}.log"))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", default=["*"], help="notebook name globs (default: all)")
    parser.add_argument("--notebooks", type=Path, default=REPO / "notebooks")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "portable")
    args = parser.parse_args(argv)
    notebooks = _notebooks(args.notebooks, args.patterns)
    results = run_paths(notebooks, args.out)
    failed = [name for name, (code, _, _) in results.items() if code != 0]
    for name, (code, seconds, summary) in results.items():
        print(f"{'PASS' if code == 0 else 'FAIL'} {name} ({seconds:.0f} s): {summary}")
        if code != 0:
            print((args.out / f"{name}.log").read_text(encoding="utf-8", errors="replace")[-6000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
