"""Real-browser test of the course's widgets: ``make test-browser``.

For every notebook in notebooks/ whose code uses a widget, in each edition (the instructor's
notebooks/ served in place, and a fresh learner workspace as ``make lab`` builds it), in one
JupyterLab server with ``make lab``'s settings and headless Chromium: open it and check that no
saved output shows a widget repr, Edit > Clear Outputs of All Cells, Run > Run All Cells, wait
for the kernel, assert that no cell shows an error and every widget rendered, move the first
slider (and the first dropdown, checkbox/toggle and text box, where there are ones) with the
keyboard and assert that the widget's output changed, walk every slider marked ``asks=`` to the
values its text asks about. At the end, ``git status`` of notebooks/ and figures/ must be as
before. One line per notebook, then ``N passed, M failed``; screenshots in .browser-test/.
Skips (exit 0) without Chromium or Playwright.

With ``--jobs 2`` (``BROWSER_TEST_JOBS=2``, as CI runs it) the (edition, notebook) pairs are
split into two lanes of about equal size (by the notebooks' file sizes, largest first, each to the
lighter lane) and the second lane runs in a second process, each with its own JupyterLab server
per edition and each notebook kernel on one thread; the default is one pair after the other.
``--instructor GLOB[,GLOB]`` narrows the instructor edition to those notebooks (default: the
same as the learner's); CI runs it over 00 and 01 only (its solutions, served in place, and the
git check), as every widget is the same in both editions and the learner edition moves each one.
In the learner edition every notebook must
print "not attempted yet" (its stubs raise, its checks go on): the student edition's Run All.
Notebook 08 loads its committed reference run
(``LMCORE_USE_REFERENCE_RUN=1``) instead of training, as grading does: nbval verifies its
training, and this test what the browser shows (``--train`` trains it here too). In the learner
edition 08 starts training as a learner's would: the test waits for its progress bar to move and
its curve to draw, interrupts the kernel from the menu, and checks that the partial-run message
is printed and that the notebook then goes on with the reference run, with no error in any cell
(``--no-interrupt``: it loads the reference run there too).
``--zh GLOB[,GLOB]`` (``BROWSER_TEST_ZH``) adds the Chinese edition's learner workspace, as
``make lab LANG=zh`` builds it from zh/notebooks, with those notebooks (edition ``learner-zh``;
CI runs 01): the same code in translated markdown, so the same widgets and the same checks.

    python browser/run_browser_test.py [GLOB ...] [--edition both|instructor|learner] [--timeout S]
                                       [--instructor GLOB,...] [--zh GLOB,...] [--jobs 1|2] [--train]
                                       [--no-interrupt]
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(REPO))

__all__ = ["widget_notebooks", "expected_text", "main"]

CHROMIUM = os.environ.get("BROWSER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDGET_CODE = re.compile(r"ipywidgets|\binteract|widgets\.|_widget\(|_explorer\(|lmcore\.course\.widgets")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def widget_notebooks(folder: Path, patterns=("*",)) -> list:
    """Notebooks (sorted) with a code cell that uses ipywidgets / interact / a *_widget(), or
    a saved widget output (a widget made by a helper with another name)."""
    found = []
    for path in sorted(Path(folder).glob("*.ipynb")):
        if not any(fnmatch.fnmatch(path.name, p) or fnmatch.fnmatch(path.stem, p) for p in patterns):
            continue
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        code = [c for c in cells if c.get("cell_type") == "code"]
        if any(
            WIDGET_CODE.search("".join(c.get("source", "")))
            or any(WIDGET_MIME in o.get("data", {}) for o in c.get("outputs", []))
            for c in code
        ):
            found.append(path)
    return found


def skip_reason() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} not found (Debian/Ubuntu: apt-get install chromium; or set BROWSER_TEST_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Python package playwright missing (pip install -r requirements-browser.txt)"
    return None


def wait_widgets_rendered(page, deadline, *, first: float = 15.0, settle: float = 1.0) -> None:
    """Widget views attach just after the kernel goes idle: wait (at most ``first`` s) for
    one, then until their number holds still for ``settle`` s."""
    end = min(time.monotonic() + first, deadline.end)
    count, since = -1, time.monotonic()
    while time.monotonic() < end:
        now = page.locator(".jp-NotebookPanel .jupyter-widgets").count()
        if now != count:
            count, since = now, time.monotonic()
        elif count > 0 and time.monotonic() - since >= settle:
            return
        time.sleep(0.2)


# Printed by the kit's checks when an exercise still holds its stub (every notebook has one), and by
# notebook 08 when it loads its reference run instead of training.
NOT_ATTEMPTED = "not attempted yet"
REFERENCE_LINE = "the reference run, committed with lmcore (not trained here)"


EDITIONS = ("instructor", "learner", "learner-zh")  # learner-zh: the Chinese edition's learner workspace


def _kind(edition: str) -> str:
    """instructor or learner: what an edition is, whatever its language."""
    return edition.split("-", 1)[0]


def interrupts(edition: str, path: Path, args) -> bool:
    """Whether this run of ``path`` trains 08 and interrupts it (the learner edition's 08)."""
    return (
        _kind(edition) == "learner"
        and path.stem.startswith("08_")
        and not args.train
        and not args.no_interrupt
    )


def expected_text(edition: str, path: Path, *, train: bool, interrupt: bool = False) -> list:
    """What Run All of ``path`` must print in this edition: every learner notebook says its
    exercises are "not attempted yet" (the stubs raise, the checks go on); 08 says it loaded its
    reference run unless ``train``, or, interrupted, that it kept the partial run. (This is the
    student edition's Run All check: CI runs it here.)"""
    from training_run import INTERRUPTED_LINE

    expect = [NOT_ATTEMPTED] if _kind(edition) == "learner" else []
    if path.stem.startswith("08_") and interrupt:
        expect.append(INTERRUPTED_LINE)
    elif path.stem.startswith("08_") and not train:
        expect.append(REFERENCE_LINE)
    return expect


def test_notebook(context, lab, path: Path, timeout: float, shots: Path, expect=(), during=None) -> tuple:
    """Returns (ok, detail). ``expect``: texts Run All must print (:func:`expected_text`);
    ``during(page, deadline)``: what to do while Run All runs (it returns what it saw)."""
    from lab_page import Deadline, TestFailure, cell_errors, output_text, run_all_and_wait, wait_kernel_ready
    from widget_controls import exercise, find_controls, reach_asked, widget_reprs

    deadline = Deadline(timeout)
    page = context.new_page()
    moved, ok, detail = [], False, ""
    try:
        t0 = time.monotonic()
        page.goto(lab.url(path.name), timeout=60_000)
        wait_kernel_ready(page, deadline)
        shown = widget_reprs(page, ran=False)
        if shown:
            raise TestFailure(f"as saved, cell {shown[0][0]} shows a widget repr: {shown[0][1]!r}")
        t1 = time.monotonic()
        if during is not None:
            seen = []
            n_cells, unrun = run_all_and_wait(page, deadline, during=lambda p, d: seen.append(during(p, d)))
            moved += seen
        else:
            n_cells, unrun = run_all_and_wait(page, deadline)
        t2 = time.monotonic()
        errors = cell_errors(page)
        if errors:
            raise TestFailure("; ".join(f"cell {i}: {' | '.join(m)}" for i, m in errors[:3]))
        if unrun:
            raise TestFailure(f"Run All stopped: cells {unrun[:5]} never ran")
        text = output_text(page)
        missing = [t for t in expect if t not in text]
        if missing:
            raise TestFailure(f"Run All never printed {missing[0]!r}")
        wait_widgets_rendered(page, deadline)
        shown = widget_reprs(page, ran=True)
        if shown:
            raise TestFailure(f"after Run All, cell {shown[0][0]} shows {shown[0][1]!r}, not the widget")
        controls = find_controls(page)
        if not controls:
            raise TestFailure("no widget control (slider, dropdown, toggle, text) rendered")
        for kind, control in controls:
            moved.append(exercise(page, kind, control, deadline))
            errors = cell_errors(page)
            if errors:
                raise TestFailure(
                    f"after moving {kind}: " + "; ".join(f"cell {i}: {' | '.join(m)}" for i, m in errors[:3])
                )
        moved += reach_asked(page, deadline)
        ok, detail = (
            True,
            (
                f"open {t1 - t0:.0f} s, {n_cells} cells ran in {t2 - t1:.0f} s, "
                f"widgets {time.monotonic() - t2:.0f} s; " + "; ".join(moved)
            ),
        )
    except Exception as exc:  # any failure of this notebook is reported, the rest still run
        done = ("; ".join(moved) + "; ") if moved else ""
        detail = done + f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        try:
            page.screenshot(path=str(shots / f"{path.stem}.{'pass' if ok else 'FAIL'}.png"))
        except Exception:
            pass
        page.close()
    return ok, detail


def git_status() -> str | None:
    """``git status --porcelain`` of what a learner's session could change: the repository's
    notebooks/, figures/ and zh/, untracked files included (None outside a git checkout)."""
    cmd = ["git", "status", "--porcelain", "--untracked-files=all", "--", "notebooks", "figures", "zh"]
    try:
        run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    except OSError:
        return None
    return run.stdout if run.returncode == 0 else None


def learner_workspace(tmp: Path, source: Path, lang: str = "en") -> Path:
    """A fresh learner workspace built from ``source`` as ``make lab`` (``LANG=zh``) builds one;
    its notebooks/."""
    sys.path.insert(0, str(REPO))
    from lmcore.course.build.workspace import build_workspace

    folder = tmp / ("workspace" if lang == "en" else f"workspace-{lang}")
    build_workspace(folder, source, lang=lang)
    for path in (folder / "notebooks").glob("*.ipynb"):  # the translated edition, not a copy of the English
        if lang != "en" and json.loads(path.read_text(encoding="utf-8"))["metadata"].get("language") != lang:
            raise RuntimeError(f"{path.name} of the {lang} workspace is not the {lang} edition")
    return folder / "notebooks"


def run_edition(edition, folder, patterns, args, pw) -> tuple:
    """Every widget notebook of ``folder`` in one server, served in place with ``make lab``'s
    settings for ``edition``. Returns (passed, failed)."""
    from lab_server import LabServer

    from lmcore.course.build.lab import lab_settings

    notebooks = widget_notebooks(folder, patterns)
    print(f"{edition} edition ({folder}): {len(notebooks)} notebook(s) with widgets", flush=True)
    passed = failed = 0
    if not notebooks:
        return passed, failed
    from training_run import watch_then_interrupt

    from lmcore.course.training.reference import REFERENCE_ENV

    log = args.out / f"jupyter-{edition}.log"
    trains = any(interrupts(edition, p, args) for p in notebooks)
    with contextlib.ExitStack() as stack:
        saved = os.environ.pop(REFERENCE_ENV, None) if trains else None  # its kernels train 08
        try:
            lab = stack.enter_context(
                LabServer(folder, log, serve_in_place=True, settings=lab_settings(_kind(edition)))
            )
        finally:
            if saved is not None:
                os.environ[REFERENCE_ENV] = saved
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        shots = args.out / edition
        shots.mkdir(parents=True, exist_ok=True)
        for path in notebooks:
            t0 = time.monotonic()
            interrupt = interrupts(edition, path, args)
            expect = expected_text(edition, path, train=args.train, interrupt=interrupt)
            during = watch_then_interrupt if interrupt else None
            ok, detail = test_notebook(context, lab, path, args.timeout, shots, expect, during)
            passed, failed = passed + ok, failed + (not ok)
            print(
                f"{'PASS' if ok else 'FAIL'} {edition} {path.name} ({time.monotonic() - t0:.1f} s): {detail}",
                flush=True,
            )
            lab.shutdown_kernels()
        browser.close()
    return passed, failed


def split_lanes(items: list, weight) -> tuple:
    """Two lanes of (edition, notebook name) ``items``: largest ``weight`` first, each to the
    lighter lane; each lane keeps the items' order."""
    lanes, loads = ([], []), [0, 0]
    for item in sorted(items, key=lambda it: -weight(it)):
        lane = 0 if loads[0] <= loads[1] else 1
        lanes[lane].append(item)
        loads[lane] += weight(item)
    return tuple([it for it in items if it in lane] for lane in lanes)


def _encode(items) -> str:
    return ",".join(f"{edition}:{name}" for edition, name in items)


def _decode(text: str) -> list:
    items = [tuple(part.split(":", 1)) for part in text.split(",") if part]
    if any(len(it) != 2 or it[0] not in EDITIONS for it in items):
        raise ValueError(f"--items must be edition:notebook pairs separated by commas; got {text!r}.")
    return items


def _second_lane(args, items) -> subprocess.Popen:
    """The second lane in a second process (same limits and output folder); its lines go to
    ``<out>/lane-2.log``, printed when it ends. The git check stays with this one."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--items", _encode(items)]
    cmd += ["--notebooks", str(args.notebooks), "--timeout", str(args.timeout), "--out", str(args.out)]
    cmd += ["--jobs", "1", "--no-git-check"] + (["--train"] if args.train else [])
    cmd += ["--no-interrupt"] if args.no_interrupt else []
    path = args.out / "lane-2.log"
    log = open(path, "w", encoding="utf-8")  # closed by _finish
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    proc.log, proc.log_path = log, path
    return proc


def _finish(proc: subprocess.Popen) -> tuple:
    """Wait for the second lane; print its lines; return (passed, failed) from its summary."""
    code = proc.wait()
    proc.log.close()
    text = proc.log_path.read_text(encoding="utf-8", errors="replace")
    print(text, end="" if text.endswith("\n") else "\n")
    found = re.findall(r"^(\d+) passed, (\d+) failed$", text, flags=re.M)
    if not found and "SKIPPED" in text and code == 0:
        return 0, 0
    if not found:
        return 0, 1  # it died before its summary: a failure, never a silent pass
    passed, failed = map(int, found[-1])
    return passed, failed + (1 if code != 0 and not failed else 0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", default=["*"], help="notebook name globs")
    parser.add_argument("--notebooks", type=Path, default=REPO / "notebooks")
    parser.add_argument(
        "--edition",
        choices=["both", "instructor", "learner"],
        default=os.environ.get("BROWSER_TEST_EDITION", "both"),
        help="instructor (notebooks/, served in place), learner (a fresh workspace) or both",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=float(os.environ.get("BROWSER_TEST_TIMEOUT", 300)),
        help="seconds per notebook (default 300)",
    )
    parser.add_argument("--out", type=Path, default=REPO / ".browser-test")
    parser.add_argument(
        "--jobs",
        type=int,
        choices=[1, 2],
        default=int(os.environ.get("BROWSER_TEST_JOBS", 1)),
        help="2: two lanes of notebooks at once, in two processes, one kernel thread each (default 1)",
    )
    parser.add_argument(
        "--instructor",
        default=os.environ.get("BROWSER_TEST_INSTRUCTOR") or None,
        help="comma-separated globs: the instructor edition's notebooks (default: the same as the learner's)",
    )
    parser.add_argument(
        "--zh",
        default=os.environ.get("BROWSER_TEST_ZH") or None,
        help="comma-separated globs: the Chinese edition's learner notebooks to test too (default: none)",
    )
    parser.add_argument("--train", action="store_true", help="08 trains instead of loading its reference run")
    parser.add_argument(
        "--no-interrupt", action="store_true", help="the learner edition's 08 loads its reference run too"
    )
    parser.add_argument("--no-git-check", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--items", type=_decode, default=None, help=argparse.SUPPRESS)  # a second lane
    args = parser.parse_args(argv)

    reason = skip_reason()
    if reason:
        print(f"browser test SKIPPED: {reason}")
        return 0
    if not widget_notebooks(args.notebooks, args.patterns):
        print(f"browser test SKIPPED: no notebook with a widget in {args.notebooks}")
        return 0

    from playwright.sync_api import sync_playwright

    from lmcore.course.training.reference import REFERENCE_ENV

    chinese = args.notebooks.parent / "zh" / "notebooks"  # the Chinese edition, beside notebooks/
    if not args.train:
        os.environ[REFERENCE_ENV] = "1"  # the servers' kernels inherit it
    editions = ["instructor", "learner"] if args.edition == "both" else [args.edition]
    if args.items is not None:  # a second lane: exactly these
        items = args.items
        editions = [e for e in EDITIONS if any(it[0] == e for it in items)]
    else:
        globs = {"instructor": args.instructor.split(",") if args.instructor else args.patterns}
        items = [
            (e, p.name)
            for e in editions
            for p in widget_notebooks(args.notebooks, globs.get(e, args.patterns))
        ]
        if args.zh:
            zh = [("learner-zh", p.name) for p in widget_notebooks(chinese, args.zh.split(","))]
            if not zh:
                print(f"browser test: --zh {args.zh} names no notebook with a widget in {chinese}")
                return 1
            items, editions = items + zh, editions + ["learner-zh"]
    second = []
    if args.jobs == 2 and len(items) > 1:
        items, second = split_lanes(items, lambda it: (args.notebooks / it[1]).stat().st_size)
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # two kernels at once: one thread each
    args.out.mkdir(parents=True, exist_ok=True)
    if args.items is None:  # a second lane's parent has cleared them
        for old in [*args.out.glob("*.png"), *(p for e in editions for p in args.out.glob(f"{e}/*.png"))]:
            old.unlink()
    start, before = time.monotonic(), None if args.no_git_check else git_status()
    passed = failed = 0
    print(
        f"browser test: JupyterLab + {CHROMIUM}" + (" (two lanes in parallel)" if second else ""), flush=True
    )
    others = sorted(
        set(p.name for p in args.notebooks.glob("*.ipynb"))
        - set(p.name for p in widget_notebooks(args.notebooks))
    )
    if others and args.items is None:
        print(f"no widget in: {', '.join(others)} (not browser-tested)", flush=True)
    lane = _second_lane(args, second) if second else None
    try:
        with tempfile.TemporaryDirectory(prefix="lmcore-learner-") as tmp, sync_playwright() as pw:
            for edition in editions:
                names = [name for e, name in items if e == edition]
                if not names:
                    continue
                if edition == "instructor":
                    folder = args.notebooks
                elif edition == "learner-zh":
                    folder = learner_workspace(Path(tmp), chinese, lang="zh")
                else:
                    folder = learner_workspace(Path(tmp), args.notebooks)
                p, f = run_edition(edition, folder, names, args, pw)
                passed, failed = passed + p, failed + f
    finally:
        if lane is not None:
            p, f = _finish(lane)
            passed, failed = passed + p, failed + f
    after = None if args.no_git_check else git_status()
    if before is not None and after != before:
        changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
        print(f"FAIL the repository changed while the test ran (git status): {changed[:5]}")
        failed += 1
    elif before is not None:
        print("git status of the repository: unchanged")
    print(f"total {time.monotonic() - start:.1f} s; screenshots in {args.out}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
