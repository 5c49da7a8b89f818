"""Real-browser test of the course website (``make site``): ``make test-site``.

Serves the built site (default build/site/html) on 127.0.0.1 and drives headless Chromium,
launched as run_browser_test.py launches it, over every page reachable from the landing page.
Any request that leaves 127.0.0.1 is blocked and counts as a failure (the site must work
offline). Asserts, per page: no console error, no page error, no failed or >= 400 request;
every image loaded; every internal link (page, file, #anchor) resolves; no formula failed to
typeset. Per notebook page: its Colab and download links (the download is the notebook
with its solutions); one solution toggle per exercise, closed at first and showing the
solution when clicked; one note per widget output and no widget repr or error; the
previous/next links.
The landing page links every notebook. The search page's snippets show formulas as plain text,
not LaTeX source. The Chinese edition (``zh/``, when the site has one) is crawled and checked the
same way against zh/notebooks, its search with Chinese queries; every page of each edition links
to the same page in the other. One line per page, then ``N passed, M failed``;
screenshots in .browser-test/site/. Skips (exit 0) without Chromium or Playwright.

    python browser/site_test.py [SITE_DIR] [--out DIR] [--notebooks DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from run_browser_test import CHROMIUM, CHROMIUM_ARGS, WIDGET_MIME, skip_reason  # noqa: E402

__all__ = ["serve", "main"]

COLAB = re.compile(r"^https://colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/[\w.-]+/(.+)$")
WIDGET_REPR = re.compile(
    r"\b(?:VBox|HBox|interactive|IntSlider|FloatSlider|FloatLogSlider|Dropdown)\(children"
    r"|Error displaying widget|Loading widget"
)
NOTEBOOK_PAGE = re.compile(r"^(\d\d_\w+)\.html$")
# The site's editions: the folder of its pages (from the site's root) -> the notebooks they show
# (from the repository's root), and the search queries each must answer.
EDITIONS = {"": "notebooks", "zh/": "zh/notebooks"}
# "softmax" reaches 01-02's formulas: without lmcore-search.js 3 of its 12 snippets showed LaTeX
SEARCH = {"": ("perplexity", "entropy", "softmax"), "zh/": ("困惑度", "标签移位", "softmax")}


def _page(site_base: str, url: str) -> tuple:
    """(edition prefix, page name) of a URL of the site: ``("zh/", "03_x.html")``."""
    path = urlsplit(url).path[len(urlsplit(site_base).path) :]
    for prefix in sorted(EDITIONS, key=len, reverse=True):
        rest = path[len(prefix) :]
        if path.startswith(prefix) and "/" not in rest:
            return prefix, rest or "index.html"
    return "", path


# Wait for MathJax to typeset (it starts on load), force lazy images to load, then report.
SETTLE_JS = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const imgs = Array.from(document.images);
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  return {
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    hidden_figures: imgs.filter(i => i.closest('.cell_output') && i.getBoundingClientRect().width === 0)
                        .map(i => i.getAttribute('src')),
    math_errors: document.querySelectorAll('mjx-merror').length,
    math: document.querySelectorAll('mjx-container').length,
    links: Array.from(document.querySelectorAll('a[href]'), a => a.href),
    ids: Array.from(document.querySelectorAll('[id], a[name]'), e => e.id || e.getAttribute('name')),
    text: (document.querySelector('article') || document.body).innerText,
  };
}"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reports what matters itself
        pass


def serve(folder: Path) -> ThreadingHTTPServer:
    """A static file server for ``folder`` on 127.0.0.1 (a free port), in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _expected(notebooks: Path) -> dict:
    """Per notebook stem: (exercise cells, widget outputs) of the committed notebook."""
    return {
        path.stem: _counts(json.loads(path.read_text(encoding="utf-8"))["cells"])
        for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))
    }


def _counts(cells: list) -> tuple:
    """(exercise cells, widget outputs) among a notebook's cells."""
    code = [c for c in cells if c["cell_type"] == "code"]
    exercises = sum("### BEGIN SOLUTION" in "".join(c["source"]) for c in code)
    return exercises, sum(WIDGET_MIME in o.get("data", {}) for c in code for o in c.get("outputs", []))


class Site:
    """The crawl: pages visited, their ids, links still to resolve, files fetched."""

    def __init__(self, base: str):
        self.base, self.ids, self.anchors, self.files = base, {}, [], {}

    def internal(self, url: str) -> bool:
        return url.startswith(self.base)

    def fetch(self, url: str) -> tuple:
        if url not in self.files:
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    self.files[url] = (response.status, response.read())
            except urllib.error.HTTPError as err:
                self.files[url] = (err.code, b"")
        return self.files[url]


def _href(page, selector: str):
    found = page.locator(selector)
    return found.first.get_attribute("href") if found.count() else None


def _graded_download(body: bytes, exercises: int) -> str | None:
    """What is wrong with a graded-class download (None: nothing): it must be the student edition,
    no solution lines, every exercise a stub, outputs cleared."""
    try:
        cells = json.loads(body)["cells"]
    except (ValueError, KeyError, TypeError):
        return "not a notebook"
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    if any("### BEGIN SOLUTION" in src for src in code):
        return "holds the solutions"
    if sum("NotImplementedError" in src for src in code) < exercises:
        return "fewer stubs than exercises"
    if any(c.get("outputs") for c in cells if c["cell_type"] == "code"):
        return "outputs not cleared"
    return None


def check_notebook_page(
    page,
    stem: str,
    expected: tuple,
    order: list,
    site: Site,
    solutions: bool = True,
    folder: str = "notebooks",
) -> list:
    """The notebook page's own assertions (``solutions=False``: the graded-class site, with no
    toggle, no Colab or GitHub link and the student edition as the download); returns the problems."""
    problems = []
    exercises, widgets = expected
    name = f"{stem}.ipynb"
    colab = _href(page, "article a.lmcore-colab") or ""
    if not solutions:
        return _check_graded_page(page, name, exercises, site) + _check_common(page, stem, widgets, order)
    m = COLAB.match(colab)
    if not (m and m.group(1) == f"{folder}/{name}"):
        problems.append(f"no Colab link to {folder}/{name}")
    download = page.locator("article a.lmcore-download")
    if download.count() != 1:
        problems.append("no download link")
    else:
        status, body = site.fetch(download.evaluate("a => a.href"))
        try:
            got = _counts(json.loads(body)["cells"]) if status == 200 else None
        except (ValueError, KeyError, TypeError):
            got = None
        if got != expected:  # the notebook with its solutions and widget outputs, not the site's copy
            problems.append(f"download: HTTP {status}, (exercises, widget outputs) {got}, want {expected}")
    toggles = page.locator("article details.lmcore-solution")
    if toggles.count() != exercises:
        problems.append(f"{toggles.count()} solution toggles for {exercises} exercises")
    for i in range(toggles.count()):
        toggle = toggles.nth(i)
        code = toggle.locator("pre")
        if toggle.get_attribute("open") is not None or code.is_visible():
            problems.append(f"solution {i + 1} shown before its toggle is clicked")
            continue
        toggle.locator("summary").click()
        text = code.inner_text() if code.is_visible() else ""
        if not text.strip():
            problems.append(f"solution {i + 1} not shown after a click on its toggle")
        elif "### BEGIN SOLUTION" in text or "### END SOLUTION" in text:
            problems.append(f"solution {i + 1} shows nbgrader's BEGIN/END SOLUTION lines")
    stubs = page.locator("article .cell_input pre", has_text="NotImplementedError")
    if exercises and stubs.count() < exercises:
        problems.append(f"{stubs.count()} exercise stubs for {exercises} exercises")
    problems += _check_common(page, stem, widgets, order)
    return problems


def _check_graded_page(page, name: str, exercises: int, site: Site) -> list:
    problems = []
    if page.locator("a.lmcore-colab, details.lmcore-solution").count():
        problems.append("a Colab link or a solution toggle on the graded-class site")
    if page.locator("a[href*='github.com'], a[href*='colab.research.google.com']").count():
        problems.append("a link to the repository or to Colab (both open the instructor edition)")
    download = page.locator("article a.lmcore-download")
    if download.count() != 1:
        return problems + ["no download link"]
    status, body = site.fetch(download.evaluate("a => a.href"))
    wrong = _graded_download(body, exercises) if status == 200 else f"HTTP {status}"
    if wrong:
        problems.append(f"download {name}: {wrong}")
    stubs = page.locator("article .cell_input pre", has_text="NotImplementedError")
    if exercises and stubs.count() < exercises:
        problems.append(f"{stubs.count()} exercise stubs for {exercises} exercises")
    return problems


def _check_common(page, stem: str, widgets: int, order: list) -> list:
    """Widget notes, outputs and the previous/next links: the same on both sites."""
    problems = []
    notes = page.locator("article .lmcore-widget-note")
    if notes.count() != widgets or any(not notes.nth(i).is_visible() for i in range(notes.count())):
        problems.append(f"{notes.count()} widget notes for {widgets} widget outputs")
    if page.locator("article .cell_output").count() == 0:
        problems.append("no cell output shown")
    i = order.index(stem)
    prev_href, next_href = (_href(page, f"a.{cls}") for cls in ("left-prev", "right-next"))
    want_prev = f"{order[i - 1]}.html" if i else "index.html"
    want_next = f"{order[i + 1]}.html" if i + 1 < len(order) else None
    if prev_href != want_prev or (want_next and next_href != want_next):
        problems.append(f"navigation: previous {prev_href}, next {next_href} (want {want_prev}, {want_next})")
    return problems


def _check_switch(page, url: str, prefix: str, name: str, expected: dict) -> list:
    """The language switch: a link to this page in every other edition that has it."""
    targets = sorted(a.get_attribute("href") or "" for a in page.locator("a.lmcore-lang").all())
    want = sorted(
        (other, name)
        for other, stems in expected.items()
        if other != prefix and (name == "index.html" or Path(name).stem in stems)
    )
    base = url[: len(url) - len(prefix + name)]
    got = sorted(_page(base, urljoin(url, href)) for href in targets)  # (edition, page): the same page
    if got != want:
        return [f"language switch: links to {got or 'no edition'}, want {want}"]
    return []


def visit(
    context, url: str, site: Site, queue: deque, seen: set, shots: Path, expected: dict, solutions=True
):
    """Loads one page, checks it; returns (name, problems, notebooks linked from the article).
    ``expected``: per edition prefix, per notebook stem, (exercises, widget outputs)."""
    page = context.new_page()
    problems = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text[:200]}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {str(e)[:200]}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    page.on(
        "requestfailed",
        lambda r: site.internal(r.url) and problems.append(f"request failed: {r.url} ({r.failure})"),
    )
    prefix, page_name = _page(site.base, url)
    name = prefix + page_name
    linked = []
    try:
        page.goto(url, wait_until="load", timeout=60_000)
        info = page.evaluate(SETTLE_JS)
        problems += [f"image not loaded: {src}" for src in info["broken"]]
        problems += [f"figure not visible: {src}" for src in info["hidden_figures"]]
        if info["math_errors"]:
            problems.append(f"{info['math_errors']} formulas failed to typeset")
        if WIDGET_REPR.search(info["text"]):
            problems.append(f"widget placeholder shown: {WIDGET_REPR.search(info['text']).group(0)}")
        site.ids[url] = set(info["ids"])
        for link in info["links"]:
            target, fragment = urldefrag(link)
            if not site.internal(target):
                continue
            if fragment:
                site.anchors.append((url, target, fragment))
            if target.endswith(".html") or target.endswith("/"):
                if target not in seen:
                    seen.add(target)
                    queue.append(target)
            elif site.fetch(target)[0] != 200:
                problems.append(f"broken link: {target}")
        linked = page.eval_on_selector_all(
            "article a.reference.internal[href]", "els => els.map(a => a.getAttribute('href'))"
        )
        m = NOTEBOOK_PAGE.match(page_name)
        mine = expected.get(prefix, {})
        if m and m.group(1) in mine:
            problems += check_notebook_page(
                page, m.group(1), mine[m.group(1)], list(mine), site, solutions, EDITIONS[prefix]
            )
        if page_name == "index.html" or (m and m.group(1) in mine):
            problems += _check_switch(page, url, prefix, page_name, expected)
    except Exception as exc:  # report it with the page, go on with the others
        problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    finally:
        try:
            page.evaluate("window.scrollTo(0, 0)")
            shot = name.removesuffix(".html").replace("/", "_")
            page.screenshot(path=str(shots / f"{shot}.{'FAIL' if problems else 'pass'}.png"))
            toggle = page.locator("article details.lmcore-solution").first
            if name == "01_softmax_and_nll.html" and toggle.count():
                toggle.scroll_into_view_if_needed()
                page.screenshot(path=str(shots / "01_softmax_and_nll.solution.png"))
                note = page.locator("article .lmcore-widget-note").first
                note.scroll_into_view_if_needed()
                page.screenshot(path=str(shots / "01_softmax_and_nll.widget.png"))
        except Exception:
            pass
        page.close()
    return name, problems, linked


LATEX = re.compile(r"\\[()\[\]]|\\(?:frac|ln|log|exp|sum|mathrm|text|cdot|left|right|approx|sqrt|ell)\b")
SEARCH_QUERIES = SEARCH[""]


def check_search(context, site, prefix: str = "", queries=SEARCH_QUERIES) -> list:
    """search.html: results for each query, every snippet without LaTeX source (lmcore-search.js
    wraps Sphinx's Search.htmlToText; checked on a formula, then on the real snippets)."""
    problems, page = [], context.new_page()
    page.on("pageerror", lambda e: problems.append(f"page error: {str(e)[:200]}"))
    try:
        for query in queries:
            page.goto(f"{site.base}{prefix}search.html?q={query}", wait_until="load", timeout=60_000)
            page.wait_for_function(
                """() => { const items = document.querySelectorAll('#search-results li');
                           return items.length > 0 && [...items].every(li => li.querySelector('p.context')); }""",
                timeout=60_000,
            )
            plain = page.evaluate("Search.htmlToText('<div role=\"main\">\\\\(\\\\ln V\\\\)</div>')")
            if plain != "ln V":
                problems.append(f"search: a formula's snippet reads {plain!r}, not 'ln V'")
            snippets = page.eval_on_selector_all(
                "#search-results p.context", "els => els.map(e => e.textContent)"
            )
            latex = [t for t in snippets if LATEX.search(t)]
            if latex:
                problems.append(
                    f"search {prefix}{query!r}: {len(latex)} of {len(snippets)} snippets show LaTeX: {latex[0][:120]!r}"
                )
            print(f"search {prefix}{query!r}: {len(snippets)} results, snippets in plain text", flush=True)
    except Exception as exc:
        problems.append(f"search: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    finally:
        page.close()
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, default=REPO / "build" / "site" / "html")
    parser.add_argument(
        "--notebooks",
        type=Path,
        default=REPO / "notebooks",
        help="the English edition's (zh/notebooks: the Chinese)",
    )
    parser.add_argument("--out", type=Path, default=REPO / ".browser-test" / "site")
    parser.add_argument(
        "--no-solutions",
        action="store_true",
        help="the graded-class site (make site SOLUTIONS=0): no toggle, no Colab or GitHub link, the student edition as download",
    )
    args = parser.parse_args(argv)

    reason = skip_reason()
    if reason:
        print(f"site test SKIPPED: {reason}")
        return 0
    if not (args.site / "index.html").exists():
        print(f"site test: no {args.site / 'index.html'} (make site builds it)")
        return 2
    # the editions the site has (its zh/ folder), each against its notebooks
    expected = {"": _expected(args.notebooks)}
    for prefix, folder in EDITIONS.items():
        if prefix and (args.site / prefix / "index.html").exists():
            expected[prefix] = _expected(args.notebooks.parent / folder)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.png"):
        old.unlink()
    start = time.monotonic()
    server = serve(args.site)
    site = Site(f"http://127.0.0.1:{server.server_address[1]}/")
    external = []
    results = {}
    print(f"site test: {args.site} over {site.base}, {CHROMIUM}", flush=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})

        def route(r):
            if site.internal(r.request.url):
                r.continue_()
            else:
                external.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        queue, seen = deque([site.base + "index.html"]), {site.base + "index.html"}
        while queue:
            url = queue.popleft()
            t0 = time.monotonic()
            name, problems, linked = visit(
                context, url, site, queue, seen, args.out, expected, solutions=not args.no_solutions
            )
            prefix = name[: -len("index.html")]
            if name.endswith("index.html") and prefix in expected:
                listed = {NOTEBOOK_PAGE.match(h).group(1) for h in linked if NOTEBOOK_PAGE.match(h)}
                missing = sorted(set(expected[prefix]) - listed)
                if missing or not expected[prefix]:
                    problems.append(f"landing page does not list: {', '.join(missing) or 'any notebook'}")
                else:
                    print(f"{name} lists all {len(expected[prefix])} notebooks", flush=True)
            results[name] = problems
            print(
                f"{'FAIL' if problems else 'PASS'} {name} ({time.monotonic() - t0:.1f} s)"
                + (": " + "; ".join(problems[:4]) if problems else ""),
                flush=True,
            )
        for prefix in expected:
            key = f"{prefix}search.html?q=..."
            results[key] = check_search(context, site, prefix, SEARCH[prefix])
            if results[key]:
                print(f"FAIL {prefix}search: " + "; ".join(results[key]), flush=True)
        browser.close()
    server.shutdown()
    anchor_problems = [
        f"{urlsplit(src).path} -> {urlsplit(target).path}#{frag}"
        for src, target, frag in site.anchors
        if target in site.ids and frag not in site.ids[target]
    ]
    missing_pages = sorted(
        f"{prefix}{s}.html"
        for prefix, stems in expected.items()
        for s in stems
        if f"{prefix}{s}.html" not in results
    )
    missing_pages += [  # an edition the repository has must be on the site
        f"{prefix}index.html"
        for prefix, folder in EDITIONS.items()
        if prefix not in expected and any((args.notebooks.parent / folder).glob("[0-9][0-9]_*.ipynb"))
    ]
    failed = sum(bool(p) for p in results.values())
    for label, items in (
        ("broken #anchors", sorted(set(anchor_problems))),
        ("requests outside 127.0.0.1 (blocked)", sorted(set(external))),
        ("notebook pages never reached", missing_pages),
    ):
        if items:
            failed += 1
            print(f"FAIL {label}: {', '.join(items[:6])}{' ...' if len(items) > 6 else ''}")
    print(f"total {time.monotonic() - start:.1f} s; {len(results)} pages; screenshots in {args.out}")
    print(f"{len(results) - sum(bool(p) for p in results.values())} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
