"""Real-browser test of the course's widgets: ``make test-browser``.

For every notebook in notebooks/ whose code uses a widget, in one JupyterLab server (on a temp
copy of the notebooks) and headless Chromium: open it, Edit > Clear Outputs of All Cells,
Run > Run All Cells, wait for the kernel, assert that no cell shows an error, then move the
first slider (and the first dropdown, checkbox/toggle and text box, where there are ones) with
the keyboard and assert that the widget's output changed. One line per notebook, then
``N passed, M failed``; screenshots in .browser-test/. Skips (exit 0) without Chromium or
Playwright.

    python browser/run_browser_test.py [GLOB ...] [--notebooks DIR] [--timeout S]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

__all__ = ["widget_notebooks", "main"]

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
WIDGET_CODE = re.compile(r"ipywidgets|\binteract|widgets\.|_widget\(")
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


def test_notebook(context, lab, path: Path, timeout: float, shots: Path) -> tuple:
    """Returns (ok, detail)."""
    from lab_page import Deadline, TestFailure, cell_errors, run_all_and_wait, wait_kernel_ready
    from widget_controls import exercise, find_controls

    deadline = Deadline(timeout)
    page = context.new_page()
    moved, ok, detail = [], False, ""
    try:
        t0 = time.monotonic()
        page.goto(lab.url(path.name), timeout=60_000)
        wait_kernel_ready(page, deadline)
        t1 = time.monotonic()
        n_cells, unrun = run_all_and_wait(page, deadline)
        t2 = time.monotonic()
        errors = cell_errors(page)
        if errors:
            raise TestFailure("; ".join(f"cell {i}: {' | '.join(m)}" for i, m in errors[:3]))
        if unrun:
            raise TestFailure(f"Run All stopped: cells {unrun[:5]} never ran")
        wait_widgets_rendered(page, deadline)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", default=["*"], help="notebook name globs")
    parser.add_argument("--notebooks", type=Path, default=REPO / "notebooks")
    parser.add_argument(
        "--timeout",
        type=float,
        default=float(os.environ.get("BROWSER_TEST_TIMEOUT", 300)),
        help="seconds per notebook (default 300)",
    )
    parser.add_argument("--out", type=Path, default=REPO / ".browser-test")
    args = parser.parse_args(argv)

    reason = skip_reason()
    if reason:
        print(f"browser test SKIPPED: {reason}")
        return 0
    notebooks = widget_notebooks(args.notebooks, args.patterns)
    if not notebooks:
        print(f"browser test SKIPPED: no notebook with a widget in {args.notebooks}")
        return 0

    from lab_server import LabServer
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.png"):
        old.unlink()
    start = time.monotonic()
    passed = failed = 0
    print(f"browser test: {len(notebooks)} notebook(s) with widgets, JupyterLab + {CHROMIUM}", flush=True)
    others = sorted(
        set(p.name for p in args.notebooks.glob("*.ipynb"))
        - set(p.name for p in widget_notebooks(args.notebooks))
    )
    if others:
        print(f"no widget in: {', '.join(others)} (not browser-tested)", flush=True)
    with LabServer(args.notebooks, args.out / "jupyter.log") as lab, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        for path in notebooks:
            t0 = time.monotonic()
            ok, detail = test_notebook(context, lab, path, args.timeout, args.out)
            passed, failed = passed + ok, failed + (not ok)
            print(
                f"{'PASS' if ok else 'FAIL'} {path.name} ({time.monotonic() - t0:.1f} s): {detail}",
                flush=True,
            )
            lab.shutdown_kernels()
        browser.close()
    print(f"total {time.monotonic() - start:.1f} s; screenshots in {args.out}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
