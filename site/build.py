"""Build the course website: ``make site`` (Sphinx + myst-nb + sphinx-book-theme, offline).

From the committed, executed notebooks, which it never executes nor changes: a copy of each is
made in ``build/site/src`` with the reference solutions behind a toggle, the widget outputs
(views without state: nothing a static page can draw) replaced by a note, and a bar of links
(Colab, download, GitHub) under its title (the Colab install cell is left out); a landing page is made from the README's course map;
Sphinx writes ``build/site/html``. The Chinese edition (``zh/notebooks``, ``zh/README.md``:
lmcore.course.build.i18n) is built the same way by a second Sphinx run, in Chinese, into
``build/site/html/zh``; every page links to the same page in the other language. The GitHub repository the links point to comes from
``--repo``, ``$LMCORE_SITE_REPO``, ``$GITHUB_REPOSITORY`` (set in GitHub Actions) or the
``origin`` remote, in that order, else lmcore.course.colab's REPO_URL.

Without solutions (``--no-solutions``, ``$LMCORE_SITE_NO_SOLUTIONS=1`` or ``make site
SOLUTIONS=0``: the site of a graded class) each exercise shows its stub and no toggle; the links
bar and the widget notes leave out Colab and GitHub (they open the repository's notebooks, the
instructor edition), the download is the graded-class student edition (hints only, outputs
cleared), and site/conf.py turns the theme's repository and Colab buttons off.

    python site/build.py [--out build/site] [--repo OWNER/REPO] [--branch main] [--prepare-only]
                         [--no-solutions]
"""

from __future__ import annotations

import argparse
import functools
import html
import importlib.util
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import nbformat
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

__all__ = [
    "NO_SOLUTIONS_ENV",
    "no_solutions",
    "PLACEHOLDER_REPO",
    "github_repo",
    "colab_url",
    "EDITIONS",
    "editions",
    "landing_page",
    "site_notebook",
    "prepare",
    "build",
    "main",
]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class Edition(NamedTuple):
    """One language of the site: where its notebooks and README are (from the repository's root),
    where its pages go (from the site's root), and the site's own words in it."""

    lang: str
    name: str  # the language's name, in itself: the language switch's label
    notebooks: str
    readme: str
    prefix: str  # "" for English, "zh/" for Chinese
    sections: tuple  # the README sections the landing page shows
    words: dict


_EN_WORDS = {
    "colab": "Open in Colab",
    "download": "Download the notebook (.ipynb)",
    "github": "View on GitHub",
    "solution": "Show the reference solution (the check below ran on it)",
    "notebooks": "Notebooks",
    "about": (
        "This site shows every notebook as it is committed: executed top to bottom, with its "
        "outputs and figures; each exercise's reference solution is behind a toggle. The widgets "
        "need a running Python: open a notebook in Colab (the link under each title), or clone "
        "[the repository](https://github.com/{repo}) and run `make lab`."
    ),
    "about_graded": (
        "This site shows every notebook executed top to bottom, with its outputs and figures; "
        "the exercises are shown without their solutions. The widgets need a running Python: "
        "download a notebook (the link under each title) and run it in your course's environment."
    ),
    "widget": (
        "Interactive widget: its controls need a running Python kernel. Open this notebook in "
        "Colab or run it locally (make lab); the static output above shows it at its start."
    ),
    "widget_html": (
        "<strong>Interactive widget.</strong> Its controls need a running Python kernel: "
        '<a href="{colab}">open this notebook in Colab</a> or run it locally with <code>make lab</code>. '
        "The static output above shows it at its start."
    ),
    "widget_graded": (
        "Interactive widget: its controls need a running Python kernel. Download this notebook "
        "and run it; the static output above shows it at its start."
    ),
    "widget_graded_html": (
        "<strong>Interactive widget.</strong> Its controls need a running Python kernel: download "
        "this notebook and run it. The static output above shows it at its start."
    ),
}
_ZH_WORDS = {
    "colab": "在 Colab 中打开",
    "download": "下载 notebook（.ipynb）",
    "github": "在 GitHub 上查看",
    "solution": "显示参考答案（下面的检查运行的就是它）",
    "notebooks": "Notebook",
    "about": (
        "本站按提交时的样子展示每个 notebook：从头到尾执行过，带着它的输出和插图；每道练习的参考答案"
        "折叠在一个开关后面。代码单元格及其输出与英文版完全相同。小部件需要一个运行中的 Python："
        "在 Colab 中打开 notebook（每个标题下的链接），或者克隆[仓库](https://github.com/{repo})"
        "并运行 `make lab LANG=zh`。"
    ),
    "about_graded": (
        "本站展示每个从头到尾执行过的 notebook，带着它的输出和插图；练习不附答案。小部件需要一个"
        "运行中的 Python：下载 notebook（每个标题下的链接），在你的课程环境中运行它。"
    ),
    "widget": (
        "交互式小部件：它的控件需要一个运行中的 Python 内核。请在 Colab 中打开这个 notebook，或在本地"
        "运行（make lab LANG=zh）；上面的静态输出是它初始时的样子。"
    ),
    "widget_html": (
        "<strong>交互式小部件。</strong>它的控件需要一个运行中的 Python 内核："
        '<a href="{colab}">在 Colab 中打开这个 notebook</a>，或在本地用 <code>make lab LANG=zh</code> 运行。'
        "上面的静态输出是它初始时的样子。"
    ),
    "widget_graded": (
        "交互式小部件：它的控件需要一个运行中的 Python 内核。请下载这个 notebook 并运行；上面的静态"
        "输出是它初始时的样子。"
    ),
    "widget_graded_html": (
        "<strong>交互式小部件。</strong>它的控件需要一个运行中的 Python 内核：请下载这个 notebook "
        "并运行。上面的静态输出是它初始时的样子。"
    ),
}
EDITIONS = {
    "en": Edition(
        "en",
        "English",
        "notebooks",
        "README.md",
        "",
        ("What you will be able to do", "Course map"),
        _EN_WORDS,
    ),
    "zh": Edition(
        "zh", "中文", "zh/notebooks", "zh/README.md", "zh/", ("学完后你将能够", "课程地图"), _ZH_WORDS
    ),
}


def editions(root: Path = ROOT) -> list:
    """The editions the repository holds (English always; another once its notebooks exist)."""
    return [
        e for e in EDITIONS.values() if e.lang == "en" or any((root / e.notebooks).glob("[0-9][0-9]_*.ipynb"))
    ]


NO_SOLUTIONS_ENV = "LMCORE_SITE_NO_SOLUTIONS"  # site/conf.py reads it too
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_REMOTE_RE = re.compile(r"github\.com[:/]+([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")


@functools.cache
def _course(relpath: str):
    """A module of lmcore.course loaded from its file (``build/student.py``, ``colab.py``): their
    top level needs only nbformat, so the site's venv needs neither torch nor lmcore."""
    path = ROOT / "lmcore" / "course" / relpath
    spec = importlib.util.spec_from_file_location(f"_lmcore_site_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The course's own address (lmcore.course.colab.REPO_URL), when nothing names another.
PLACEHOLDER_REPO = _course("colab.py").REPO_URL.removeprefix("https://github.com/")


def github_repo(explicit: str | None = None, env=None, cwd: Path = ROOT) -> str:
    """``owner/repo`` for the Colab and GitHub links: ``explicit``, ``$LMCORE_SITE_REPO``,
    ``$GITHUB_REPOSITORY``, the ``origin`` remote if it is on GitHub, else PLACEHOLDER_REPO (the
    course's address in lmcore.course.colab)."""
    env = os.environ if env is None else env
    for value, source in (
        (explicit, "--repo"),
        (env.get("LMCORE_SITE_REPO"), "LMCORE_SITE_REPO"),
        (env.get("GITHUB_REPOSITORY"), "GITHUB_REPOSITORY"),
    ):
        if value:
            if not _REPO_RE.match(value):
                raise ValueError(f"{source}: expected OWNER/REPO, got {value!r}")
            return value
    try:
        remote = subprocess.run(
            ["git", "remote", "get-url", "origin"], cwd=cwd, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        remote = ""
    m = _REMOTE_RE.search(remote)
    return f"{m.group(1)}/{m.group(2)}" if m else PLACEHOLDER_REPO


def no_solutions(env=None) -> bool:
    """Whether ``$LMCORE_SITE_NO_SOLUTIONS`` asks for the site without solutions (set to anything
    but ``""``, ``0``, ``false`` or ``no``)."""
    env = os.environ if env is None else env
    return env.get(NO_SOLUTIONS_ENV, "").strip().lower() not in ("", "0", "false", "no")


def colab_url(repo: str, name: str, branch: str = "main", folder: str = "notebooks") -> str:
    """Colab's URL for ``<folder>/<name>`` of the GitHub repository ``repo`` at ``branch``
    (lmcore.course.colab's, for that repository)."""
    if not _REPO_RE.match(repo):
        raise ValueError(f"repo: expected OWNER/REPO, got {repo!r}")
    if not name.endswith(".ipynb") or "/" in name:
        raise ValueError(f"name: expected a notebook file name like 00_start_here.ipynb, got {name!r}")
    return _course("colab.py").colab_url(name, f"https://github.com/{repo}", branch, folder)


def _switch(edition: Edition, page: str, others) -> str:
    """The language switch of ``page`` (``index.html``, ``03_x.html``): a link to the same page in
    each edition of ``others`` (``prefix`` folders one level deep, English at the root)."""
    up = "../" if edition.prefix else ""
    links = [
        f'<a class="lmcore-lang" href="{up}{o.prefix}{html.escape(page)}" hreflang="{o.lang}" lang="{o.lang}">{o.name}</a>'
        for o in others
        if o.lang != edition.lang
    ]
    return "".join(links)


def _section(text: str, title: str) -> str:
    """The README section ``## title`` (heading included), up to the next ``## ``."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    if not m:
        raise ValueError(f"README has no '## {title}' section")
    return f"## {title}\n{m.group(1).rstrip()}\n"


def _rewrite_links(markdown: str, repo: str, branch: str, images: list, base: str = "") -> str:
    """The links of markdown kept in the repository's folder ``base``: to notebooks/NN_x.ipynb ->
    that page; a picture -> its path from the repository's root (collected in ``images``, to be
    copied there beside the pages); any other relative link -> the file on GitHub."""

    def link(m):
        bang, label, target = m.group(1), m.group(2), m.group(3)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^[#/]", target):
            return m.group(0)
        path, hash_, fragment = target.partition("#")
        path = posixpath.normpath(posixpath.join(base, path))
        if path.startswith(".."):  # outside the repository: left to Sphinx to report
            return m.group(0)
        if bang:
            images.append(path)
            return f"![{label}]({path})"
        if re.fullmatch(r"notebooks/\d\d_[^/]+\.ipynb", path):
            return f"[{label}]({path.split('/', 1)[1]}{hash_}{fragment})"
        return f"[{label}](https://github.com/{repo}/blob/{branch}/{path}{hash_}{fragment})"

    return re.sub(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)", link, markdown)


def landing_page(
    readme: str,
    repo: str,
    names: list,
    branch: str = "main",
    solutions: bool = True,
    edition: Edition = EDITIONS["en"],
    others=(),
) -> tuple:
    """(markdown of index.md, the README pictures it shows) from the README (``edition``'s): its
    title, its opening paragraph, "What you will be able to do" and the course map, and a toctree
    of ``names`` (the notebooks' file names) for the navigation; a language switch to the landing
    page of each edition in ``others``. ``solutions=False``: the page says the exercises are shown
    without their solutions."""
    title = re.search(r"^# (.+)$", readme, flags=re.M)
    if not title:
        raise ValueError("README has no '# title' line")
    opening = readme[title.end() :].strip().split("\n\n", 1)[0].split("```", 1)[0].strip()
    images: list = []
    about = edition.words["about" if solutions else "about_graded"].format(repo=repo)
    switch = _switch(edition, "index.html", others)
    hero = re.search(r"^!\[[^\]]*\]\([^)]+\)$", readme[: readme.find("\n## ")], flags=re.M)
    body = "\n\n".join(
        [
            f"# {title.group(1).strip()}",
            f'<div class="lmcore-links">{switch}</div>' if switch else "",
            opening,
            about,
            hero.group(0) if hero else "",
            *(_section(readme, title) for title in edition.sections),
        ]
    )
    body = _rewrite_links(body, repo, branch, images)
    pages = "\n".join(Path(n).stem for n in names)
    toc = f"```{{toctree}}\n:hidden:\n:caption: {edition.words['notebooks']}\n:maxdepth: 1\n\n{pages}\n```\n"
    return re.sub(r"\n{3,}", "\n\n", body).rstrip() + "\n\n" + toc, images


def _links_bar(
    repo: str,
    name: str,
    branch: str,
    solutions: bool = True,
    edition: Edition = EDITIONS["en"],
    switch: str = "",
) -> str:
    """Colab, download, GitHub, then the language ``switch``; without solutions the download only
    (Colab and GitHub open the repository's notebooks: the instructor edition)."""
    words = edition.words
    colab = html.escape(colab_url(repo, name, branch, edition.notebooks))
    github = html.escape(f"https://github.com/{repo}/blob/{branch}/{edition.notebooks}/{name}")
    download = (
        f'<a class="lmcore-download" href="notebooks/{html.escape(name)}" download>{words["download"]}</a>'
    )
    if not solutions:
        return f'<div class="lmcore-links">{download}{switch}</div>'
    return (
        '<div class="lmcore-links">'
        f'<a class="lmcore-colab" href="{colab}">{words["colab"]}</a>'
        f"{download}"
        f'<a class="lmcore-github" href="{github}">{words["github"]}</a>'
        f"{switch}</div>"
    )


def _widget_note(
    repo: str, name: str, branch: str, solutions: bool = True, edition: Edition = EDITIONS["en"]
) -> dict:
    words = edition.words
    if solutions:
        colab = html.escape(colab_url(repo, name, branch, edition.notebooks))
        text, inner = words["widget"], words["widget_html"].format(colab=colab)
    else:
        text, inner = words["widget_graded"], words["widget_graded_html"]
    markup = f'<div class="lmcore-widget-note" role="note">{inner}</div>'
    return nbformat.v4.new_output("display_data", data={"text/html": markup, "text/plain": text})


def _solution_toggle(source: str, edition: Edition = EDITIONS["en"]) -> dict:
    """The reference solution behind a toggle, without nbgrader's BEGIN/END SOLUTION lines."""
    source = "\n".join(line for line in source.splitlines() if not _SOLUTION_MARK.match(line))
    code = highlight(source, PythonLexer(), HtmlFormatter(cssclass="highlight"))
    markup = (
        f'<details class="lmcore-solution"><summary>{edition.words["solution"]}</summary>'
        f'<div class="highlight-python notranslate">{code}</div></details>'
    )
    return nbformat.v4.new_output("display_data", data={"text/html": markup, "text/plain": source})


_SOLUTION_MARK = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def site_notebook(
    nb,
    name: str,
    repo: str,
    branch: str = "main",
    images: list | None = None,
    solutions: bool = True,
    edition: Edition = EDITIONS["en"],
    others=(),
):
    """A copy of ``nb`` for the site: outputs kept; nbval's marker lines dropped from the code;
    in each exercise cell the solution replaced
    by the learner's stub and shown whole behind a toggle (``solutions=False``: no toggle, and
    no Colab or GitHub link); every widget output replaced by a note; the Colab install cell
    tagged to be left out; links in the markdown as for the README (pictures collected in
    ``images``); the links bar under the title, with a link to this page in each edition of
    ``others``; widget state dropped; the words the site adds in ``edition``'s language. ``nb``
    is not changed."""
    images = [] if images is None else images
    student, colab = _course("build/student.py"), _course("colab.py")
    nb = nbformat.reads(nbformat.writes(nbformat.from_dict(nb)), as_version=4)  # a deep copy
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            cell.source = _rewrite_links(cell.source, repo, branch, images, base=edition.notebooks)
        if cell.cell_type == "code" and cell.source.startswith(colab.COLAB_MARK):
            cell.metadata.setdefault("tags", []).append("remove-cell")  # Colab's install: not here
        elif cell.cell_type == "code":
            cell.source = student.strip_nbval_markers(cell.source)  # nbval's, not the reader's
            stub = student.strip_solutions(cell.source, where=f"{name}, cell {i}")
            if stub != cell.source:
                toggle = [_solution_toggle(cell.source, edition)] if solutions else []
                cell.outputs = toggle + list(cell.outputs)
                cell.source = stub
            cell.outputs = [
                _widget_note(repo, name, branch, solutions, edition)
                if WIDGET_MIME in out.get("data", {})
                else out
                for out in cell.outputs
            ]
        cells.append(cell)
    title = next(
        (
            i
            for i, c in enumerate(cells)
            if c.cell_type == "markdown" and re.search(r"^# ", c.source, flags=re.M)
        ),
        None,
    )
    if title is None:
        raise ValueError(f"{name}: no markdown cell with a '# title'")
    heading = re.search(r"^# .*$", cells[title].source, flags=re.M)  # the bar goes right under it
    bar = _links_bar(
        repo, name, branch, solutions, edition, _switch(edition, f"{Path(name).stem}.html", others)
    )
    source = cells[title].source
    cells[title].source = f"{source[: heading.end()]}\n\n{bar}\n{source[heading.end() :]}"
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    return nb


def prepare(
    out: Path,
    repo: str,
    branch: str = "main",
    notebooks: Path | None = None,
    solutions: bool = True,
    edition: Edition = EDITIONS["en"],
    others=(),
    root: Path = ROOT,
) -> list:
    """Write ``edition``'s Sphinx sources to ``out/src`` and its downloads to
    ``out/extra/notebooks`` (``src-zh``, ``extra-zh`` for Chinese; both made anew); returns the
    notebooks' file names. Reads ``notebooks`` (default: the edition's) and the edition's README
    only. The downloads are the notebooks themselves, or without ``solutions`` the graded-class
    student edition. Each page links to itself in the editions of ``others`` that have it."""
    suffix = "" if edition.lang == "en" else f"-{edition.lang}"
    src, extra = out / f"src{suffix}", out / f"extra{suffix}" / "notebooks"
    for folder in (src, extra.parent):
        shutil.rmtree(folder, ignore_errors=True)
    src.mkdir(parents=True)
    extra.mkdir(parents=True)
    notebooks = Path(notebooks) if notebooks is not None else root / edition.notebooks
    paths = sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise ValueError(f"no notebook NN_*.ipynb in {notebooks}")
    readme = (root / edition.readme).read_text(encoding="utf-8")
    index, images = landing_page(readme, repo, [p.name for p in paths], branch, solutions, edition, others)
    (src / "index.md").write_text(index, encoding="utf-8")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        has = [o for o in others if (root / o.notebooks / path.name).is_file()]
        page = site_notebook(nb, path.name, repo, branch, images, solutions, edition, has)
        nbformat.write(page, src / path.name)
        if solutions:
            shutil.copy2(path, extra / path.name)
        else:
            student = _course("build/student.py").student_notebook(nb, notes=True, solutions=False)
            nbformat.write(student, extra / path.name)
    for image in sorted(set(images)):
        (src / image).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / image, src / image)
    return [p.name for p in paths]


def search_dictionary(glossary: str) -> str:
    """A jieba user dictionary (one ``word frequency`` line each) of the Chinese terms of
    zh/GLOSSARY.md's table, so that the Chinese site's search finds 困惑度 as one word."""
    words = set()
    for line in glossary.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.search(r"[\u4e00-\u9fff]", cells[1]):
            continue
        for part in re.split(r"\s*/\s*|[（）()「」，、]", cells[1]):
            part = part.strip()
            if re.fullmatch(r"[\u4e00-\u9fff]{2,}", part):
                words.add(part)
    return "".join(f"{w} 100000\n" for w in sorted(words))


def build(out: Path, repo: str, branch: str = "main", jobs: str = "auto", solutions: bool = True) -> Path:
    """prepare(), then Sphinx (warnings are errors) into ``out/html``, for each edition (the
    Chinese one into ``out/html/zh``); returns ``out/html``. ``out`` may be relative to the current
    folder (Sphinx reads site/conf.py's paths from site/)."""
    out = Path(out).resolve()
    html_dir = out / "html"
    shutil.rmtree(html_dir, ignore_errors=True)
    found = editions()
    for edition in found:
        prepare(out, repo, branch, solutions=solutions, edition=edition, others=found)
        suffix = "" if edition.lang == "en" else f"-{edition.lang}"
        env = dict(
            os.environ,
            LMCORE_SITE_REPO=repo,
            LMCORE_SITE_BRANCH=branch,
            LMCORE_SITE_EXTRA=str(out / f"extra{suffix}"),
            LMCORE_SITE_LANG=edition.lang,
        )
        env[NO_SOLUTIONS_ENV] = "0" if solutions else "1"  # site/conf.py: the theme's buttons
        if edition.lang == "zh":
            words = out / "zh-search-dictionary.txt"
            words.write_text(search_dictionary((ROOT / "zh" / "GLOSSARY.md").read_text("utf-8")), "utf-8")
            env["LMCORE_SITE_SEARCH_DICT"] = str(words)
        doctrees = out / f"doctrees{suffix}"
        shutil.rmtree(doctrees, ignore_errors=True)
        target = html_dir / edition.prefix
        cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-j", jobs]
        cmd += ["-c", str(HERE), "-d", str(doctrees), str(out / f"src{suffix}"), str(target)]
        subprocess.run(cmd, check=True, env=env)
    (html_dir / ".nojekyll").touch()  # GitHub Pages: serve _static/ and _images/ as they are
    return html_dir


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--repo", help="OWNER/REPO on GitHub for the Colab and GitHub links")
    parser.add_argument("--branch", default=os.environ.get("LMCORE_SITE_BRANCH", "main"))
    parser.add_argument("--prepare-only", action="store_true", help="write the Sphinx sources only")
    parser.add_argument(
        "--no-solutions",
        action="store_true",
        default=no_solutions(),
        help=f"the site of a graded class: no solution toggles, no Colab or GitHub links (${NO_SOLUTIONS_ENV}=1)",
    )
    args = parser.parse_args(argv)
    solutions = not args.no_solutions
    repo = github_repo(args.repo)
    if repo == PLACEHOLDER_REPO:
        print(f"site: links use the course's default repository {repo} (set LMCORE_SITE_REPO=OWNER/REPO)")
    start = time.monotonic()
    if args.prepare_only:
        found = editions()
        for edition in found:
            names = prepare(args.out, repo, args.branch, solutions=solutions, edition=edition, others=found)
            print(f"site: {len(names)} notebooks ({edition.name}) prepared in {args.out}")
        return 0
    html_dir = build(args.out, repo, args.branch, solutions=solutions)
    what = "" if solutions else ", without solutions"
    print(f"site: built {html_dir} in {time.monotonic() - start:.1f} s (links to github.com/{repo}{what})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
