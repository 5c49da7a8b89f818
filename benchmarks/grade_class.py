"""Grading a synthetic class with nbgrader's autograder (make grade), timed.

A class of ``--students`` submissions of notebooks 00-02 (default 20) answers each exercise at
random, from a fixed seed, with the reference solution, a wrong one (``return 0.0``, ``return
None``, the reference's first line only), the untouched stub, or a syntax error; one student
loops forever in one exercise (it costs the cell limit once) and one hands in a cut-off file. Then
one whole-course submission (every notebook, every exercise answered with its reference) is
graded on its own, with the default cell limit. Prints seconds per submission and per notebook
(from the cells' execution timestamps), the whole-course score, and where ``class.md`` is.

    python benchmarks/grade_class.py                      # 20 students + the whole course
    python benchmarks/grade_class.py --students 5 --no-whole-course --out /tmp/grade-bench
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "teach")]
from _submissions import NOTEBOOKS, answer, answer_all, points, reference_body, release, solution_ids  # noqa: E402

from lmcore.course.build.grade import grade_submissions  # noqa: E402

CLASS_NOTEBOOKS = ["00_start_here", "01_softmax_and_nll", "02_gradients"]
KINDS = ["right"] * 5 + ["wrong"] * 3 + ["untouched"] * 1 + ["syntax"] * 1


def _body(kind: str, ref: list[str], rng: random.Random) -> list[str] | None:
    if kind == "right":
        return ref
    if kind == "wrong":
        return rng.choice([["    return 0.0"], ["    return None"], ref[:1] + ["    return 0.0"]])
    if kind == "syntax":
        return ref + ["    x = (1,"]
    return None  # untouched: the stub stays


def make_class(tmp: Path, n: int, seed: int = 0) -> Path:
    released = release(tmp / "release-class", CLASS_NOTEBOOKS, 20)
    source = {
        name: nbformat.read(tmp / "release-class" / "source" / "lmcore" / f"{name}.ipynb", as_version=4)
        for name in CLASS_NOTEBOOKS
    }
    rng = random.Random(seed)
    subs = tmp / "class"
    for k in range(n):
        student = f"student{k:02d}"
        (subs / student).mkdir(parents=True)
        for name in CLASS_NOTEBOOKS:
            nb = nbformat.read(released / f"{name}.ipynb", as_version=4)
            for fn in solution_ids(source[name]):
                ref = reference_body(source[name], fn)
                kind = "right" if k == 0 else "untouched" if k == 1 else rng.choice(KINDS)
                if k == 2 and name == CLASS_NOTEBOOKS[1] and fn == solution_ids(source[name])[-1]:
                    body = ["    while True:", "        pass"]  # one endless loop in the class
                else:
                    body = _body(kind, ref, rng)
                if body is not None:
                    answer(nb, fn, body)
            if k == 3 and name == CLASS_NOTEBOOKS[-1]:
                (subs / student / f"{name}.ipynb").write_text('{"cells": [')  # a cut-off file
            else:
                nbformat.write(nb, subs / student / f"{name}.ipynb")
    return subs


def make_whole_course(tmp: Path) -> tuple[Path, float]:
    names = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    released = release(tmp / "release-course", names, 300)
    out = tmp / "course" / "whole_course"
    out.mkdir(parents=True)
    total = 0.0
    for name in names:
        src = nbformat.read(tmp / "release-course" / "source" / "lmcore" / f"{name}.ipynb", as_version=4)
        nb = nbformat.read(released / f"{name}.ipynb", as_version=4)
        answer_all(nb, src)
        nbformat.write(nb, out / f"{name}.ipynb")
        total += points(src)
    return tmp / "course", total


def notebook_seconds(autograded: Path) -> dict:
    """Seconds from the first cell's start to the last cell's end, per autograded notebook."""
    out = {}
    for path in sorted(autograded.glob("*.ipynb")):
        stamps = []
        for cell in nbformat.read(path, as_version=4).cells:
            ex = cell.get("metadata", {}).get("execution", {})
            for key in ("iopub.execute_input", "shell.execute_reply"):
                if key in ex:
                    stamps.append(datetime.fromisoformat(ex[key].replace("Z", "+00:00")))
        if stamps:
            out[path.stem] = (max(stamps) - min(stamps)).total_seconds()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--out", default="/tmp/lmcore-grade-bench")
    parser.add_argument("--no-whole-course", action="store_true")
    args = parser.parse_args(argv)
    tmp = Path(args.out)
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.students:
        subs = make_class(tmp, args.students)
        t0 = time.perf_counter()
        report = grade_submissions(subs, tmp / "class-grades", timeout=20, log=lambda *a: None)
        wall = time.perf_counter() - t0
        sec = list(report["seconds"].values())
        print(
            f"class of {len(sec)} (notebooks 00-02, {len(report['columns']) - 2} exercises): {wall:.0f} s in all, "
            f"per submission median {statistics.median(sec):.1f} s, mean {statistics.mean(sec):.1f} s, "
            f"max {max(sec):.1f} s (the endless loop: the 20 s cell limit)"
        )
        print(f"class report: {tmp / 'class-grades' / 'class.md'}")
    if not args.no_whole_course:
        subs, total = make_whole_course(tmp)
        report = grade_submissions(subs, tmp / "course-grades", timeout=300, log=lambda *a: None)
        (row,) = report["rows"]
        print(
            f"whole course ({len(report['columns']) - 2} exercises): {report['seconds']['whole_course']:.0f} s, "
            f"{row[-1]:g} / {total:g} points"
        )
        per = notebook_seconds(tmp / "course-grades" / "course" / "autograded" / "whole_course" / "lmcore")
        print(
            "  per notebook (cells only, no kernel start): "
            + ", ".join(f"{k[:2]} {v:.0f} s" for k, v in per.items())
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
