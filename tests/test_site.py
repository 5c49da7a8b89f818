"""The course website's preparation (site/build.py), without Sphinx: the copy of each notebook
the site renders, the landing page, the Colab links and the repository they name, and that the
Makefile, the Pages workflow and the build agree on where the site is. (The build itself and
the pages in a browser: `make test-site`.)"""

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
REPO = "alice/lm-course"


def _load_build():
    spec = importlib.util.spec_from_file_location("lmcore_site_build", ROOT / "site" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


site = _load_build()


def _outputs(nb, mime):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if mime in o.get("data", {})]


def test_colab_url_is_the_github_path_of_the_notebook():
    assert (
        site.colab_url(REPO, "03_sequence_to_loss.ipynb")
        == "https://colab.research.google.com/github/alice/lm-course/blob/main/notebooks/03_sequence_to_loss.ipynb"
    )
    assert "/blob/dev/notebooks/" in site.colab_url(REPO, "03_x.ipynb", branch="dev")


@pytest.mark.parametrize(
    "repo, name",
    [("alice", "00_x.ipynb"), ("a/b/c", "00_x.ipynb"), (REPO, "00_x.py"), (REPO, "x/00_x.ipynb")],
)
def test_colab_url_rejects_what_is_not_a_repo_and_a_notebook(repo, name):
    with pytest.raises(ValueError, match="repo|name"):
        site.colab_url(repo, name)


def test_repo_comes_from_the_option_then_the_environment():
    env = {"LMCORE_SITE_REPO": "bob/x", "GITHUB_REPOSITORY": "carol/y"}
    assert site.github_repo("dave/z", env=env) == "dave/z"
    assert site.github_repo(None, env=env) == "bob/x"
    assert site.github_repo(None, env={"GITHUB_REPOSITORY": "carol/y"}) == "carol/y"
    with pytest.raises(ValueError, match="LMCORE_SITE_REPO"):
        site.github_repo(None, env={"LMCORE_SITE_REPO": "not a repo"})


@pytest.mark.parametrize(
    "remote, expected",
    [
        ("git@github.com:alice/lm-course.git", REPO),
        ("https://github.com/alice/lm-course", REPO),
        ("https://github.com/alice/lm-course.git", REPO),
        ("https://gitlab.com/alice/lm-course.git", site.PLACEHOLDER_REPO),
        (None, site.PLACEHOLDER_REPO),
    ],
)
def test_repo_falls_back_to_the_origin_remote_then_a_placeholder(tmp_path, remote, expected):
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    if remote:
        subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", remote], check=True)
    assert site.github_repo(None, env={}, cwd=tmp_path) == expected


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_site_notebook_hides_solutions_replaces_widgets_keeps_outputs(path):
    original = nbformat.read(path, as_version=4)
    before = nbformat.writes(original)
    page = site.site_notebook(original, path.name, REPO)
    assert nbformat.writes(original) == before, "the notebook given was changed"

    exercises = [c for c in original.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    code = [c for c in page.cells if c.cell_type == "code"]
    assert not any("### BEGIN SOLUTION" in c.source or "### END SOLUTION" in c.source for c in code)
    assert not any("NBVAL_" in c.source for c in code), "nbval's markers shown to the reader"
    toggles = [o for o in _outputs(page, "text/html") if "lmcore-solution" in o["data"]["text/html"]]
    assert len(toggles) == len(exercises) > 0
    for toggle, cell in zip(toggles, exercises):
        whole = [
            x
            for x in cell.source.splitlines()
            if x.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
            and not x.strip().startswith("# NBVAL_")
        ]
        assert toggle["data"]["text/plain"].splitlines() == whole  # the whole cell but nbgrader's markers
        assert toggle["data"]["text/html"].startswith('<details class="lmcore-solution">')
        assert "SOLUTION" not in toggle["data"]["text/html"]

    assert _outputs(page, WIDGET_MIME) == [] and "widgets" not in page.metadata
    colab_cells = [c for c in code if c.source.startswith("# Colab only:")]
    assert all("remove-cell" in c.metadata.get("tags", []) for c in colab_cells)
    assert sum("remove-cell" in c.metadata.get("tags", []) for c in code) == len(colab_cells)
    notes = [o for o in _outputs(page, "text/html") if "lmcore-widget-note" in o["data"]["text/html"]]
    assert len(notes) == len(_outputs(original, WIDGET_MIME)) > 0
    assert site.colab_url(REPO, path.name) in notes[0]["data"]["text/html"]
    assert len(_outputs(page, "image/png")) == len(_outputs(original, "image/png"))
    streams = [o for c in code for o in c.outputs if o["output_type"] == "stream"]
    assert len(streams) == sum(
        o["output_type"] == "stream" for c in original.cells for o in c.get("outputs", [])
    )

    lines = next(c.source for c in page.cells if c.cell_type == "markdown" and "\n# " in "\n" + c.source)
    lines = lines.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("# "))
    assert lines[at + 1] == "" and lines[at + 2].startswith('<div class="lmcore-links">'), (
        "bar under the title"
    )
    assert f'href="{site.colab_url(REPO, path.name)}"' in lines[at + 2]
    assert f'href="notebooks/{path.name}" download' in lines[at + 2]
    assert len(page.cells) == len(original.cells)


def _solution_lines(nb) -> list:
    """The lines (over 12 characters) between the solution markers of every exercise of ``nb``."""
    lines, inside = [], False
    for cell in nb.cells:
        for line in cell.source.splitlines() if cell.cell_type == "code" else []:
            if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
                inside = "BEGIN" in line
            elif inside and len(line.strip()) > 12:
                lines.append(line.strip())
    return lines


def _page_text(nb) -> str:
    """Everything a page shows: the sources and every output's text, HTML and plain."""
    parts = [c.source for c in nb.cells]
    for c in nb.cells:
        for out in c.get("outputs", []):
            parts.append(str(out.get("text", "")))
            parts += [str(v) for k, v in out.get("data", {}).items() if k.startswith("text/")]
    return "\n".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_site_without_solutions_shows_no_solution_and_no_colab_or_github_link(path):
    original = nbformat.read(path, as_version=4)
    page = site.site_notebook(original, path.name, REPO, solutions=False)
    text = _page_text(page)
    assert "lmcore-solution" not in text and "### BEGIN SOLUTION" not in text
    leaked = [line for line in _solution_lines(original) if line in text]
    assert not leaked, f"solution code on the page without solutions: {leaked[:3]}"
    assert "colab.research.google.com" not in text and f"github.com/{REPO}/blob" not in text
    assert f'href="notebooks/{path.name}" download' in text  # the download stays
    assert len(page.cells) == len(original.cells)
    with_them = site.site_notebook(original, path.name, REPO)  # the default keeps its toggles
    assert "lmcore-solution" in _page_text(with_them)


def test_prepare_without_solutions_downloads_the_graded_edition(tmp_path):
    student = site._course("build/student.py")
    names = site.prepare(tmp_path, REPO, solutions=False)
    index = (tmp_path / "src" / "index.md").read_text(encoding="utf-8")
    assert "without their solutions" in index and "toggle" not in index
    for name in names:
        original = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        download = nbformat.read(tmp_path / "extra" / "notebooks" / name, as_version=4)
        text = _page_text(download)
        assert not [line for line in _solution_lines(original) if line in text]
        assert "reference solution" not in text and "then solution" not in text
        first_hint = student.NOTE_HINTS_ONLY.splitlines()[1].split("{name}")[1]
        assert first_hint in text
        assert all(not c.get("outputs") for c in download.cells if c.cell_type == "code")


def test_no_solutions_is_the_option_or_the_environment_and_the_makefile_passes_it():
    assert site.no_solutions({"LMCORE_SITE_NO_SOLUTIONS": "1"})
    assert not any(site.no_solutions({"LMCORE_SITE_NO_SOLUTIONS": v}) for v in ("", "0", "false", "no"))
    assert not site.no_solutions({})
    conf = (ROOT / "site" / "conf.py").read_text()
    assert (
        'os.environ.get("LMCORE_SITE_NO_SOLUTIONS"' in conf
        and '"use_repository_button": not NO_SOLUTIONS' in conf
    )
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    for target, stamp, command in (
        ("site", ".venv-site/.installed", "site/build.py"),
        ("student", ".venv/.installed", "lmcore-course student student"),
    ):
        run = [["make", "-n", target, "-o", stamp, *more] for more in (["SOLUTIONS=0"], [])]
        graded, default = (subprocess.run(r, cwd=ROOT, capture_output=True, text=True).stdout for r in run)
        assert any(command in line and "--no-solutions" in line for line in graded.splitlines()), graded
        assert command in default and "--no-solutions" not in default


def test_site_notebook_links_point_at_pages_pictures_and_github():
    text = (
        "# T\n[03](03_sequence_to_loss.ipynb#the-shift) [readme](../README.md#tests) "
        "[web](https://example.org/a) [here](#t) ![f](../figures/label_shift.png)"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])
    images = []
    page = site.site_notebook(nb, "00_x.ipynb", REPO, images=images)
    title, blank, bar, blank2, links = page.cells[0].source.split("\n")
    assert (title, blank, blank2) == ("# T", "", "") and bar.startswith('<div class="lmcore-links">')
    assert links == (
        "[03](03_sequence_to_loss.ipynb#the-shift) "
        f"[readme](https://github.com/{REPO}/blob/main/README.md#tests) "
        "[web](https://example.org/a) [here](#t) ![f](figures/label_shift.png)"
    )
    assert images == ["figures/label_shift.png"]


def test_site_notebook_needs_a_title():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("no heading")])
    with pytest.raises(ValueError, match="title"):
        site.site_notebook(nb, "00_x.ipynb", REPO)


def test_landing_page_is_the_course_map_with_links_to_the_pages():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    names = [p.name for p in NOTEBOOKS]
    index, images = site.landing_page(readme, REPO, names)
    assert index.startswith("# lmcore")
    assert "## Course map" in index and "## What you will be able to do" in index
    for name in names:  # each row of the map links the page, and the toctree lists it
        assert f"]({name})" in index
        assert re.search(rf"^{Path(name).stem}$", index, flags=re.M)
    assert "](notebooks/" not in index
    for target in re.findall(r"(?<!!)\[[^\]]*\]\(([^)]+)\)", index):
        assert target in names or target.startswith("https://"), target
    assert all((ROOT / image).is_file() for image in images)


def test_landing_page_rejects_a_readme_without_a_course_map():
    with pytest.raises(ValueError, match="Course map"):
        site.landing_page("# t\n\nintro\n\n## What you will be able to do\n- x\n", REPO, [])


def _digest(folder):
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()
    }


def test_prepare_writes_a_copy_and_leaves_the_notebooks_alone(tmp_path):
    before = _digest(ROOT / "notebooks")
    names = site.prepare(tmp_path, REPO)
    assert _digest(ROOT / "notebooks") == before
    assert names == [p.name for p in NOTEBOOKS]
    assert sorted(p.name for p in (tmp_path / "src").glob("*.ipynb")) == names
    downloads = tmp_path / "extra" / "notebooks"
    assert {n: _digest(downloads)[n] for n in names} == {n: before[n] for n in names}
    assert (tmp_path / "src" / "index.md").is_file()
    for name in names:
        nb = json.loads((tmp_path / "src" / name).read_text(encoding="utf-8"))
        assert "### BEGIN SOLUTION" not in "".join("".join(c["source"]) for c in nb["cells"])


ZH = site.EDITIONS["zh"]
ZH_NOTEBOOKS = sorted((ROOT / "zh" / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_colab_url_names_the_chinese_editions_folder_and_rejects_another_path():
    assert site.colab_url(REPO, "03_x.ipynb", folder="zh/notebooks").endswith(
        "/blob/main/zh/notebooks/03_x.ipynb"
    )
    for folder in ("../x", "zh/notebooks/", "https://x", ""):
        with pytest.raises(ValueError, match="folder"):
            site.colab_url(REPO, "03_x.ipynb", folder=folder)


def test_the_repository_has_both_editions():
    assert [e.lang for e in site.editions()] == (["en", "zh"] if ZH_NOTEBOOKS else ["en"])
    assert [e.lang for e in site.editions(ROOT / "no-such-folder")] == ["en"]


@pytest.mark.skipif(not ZH_NOTEBOOKS, reason="no Chinese notebook yet")
def test_prepare_the_chinese_edition_in_chinese_with_a_switch_both_ways(tmp_path):
    both = site.editions()
    names = site.prepare(tmp_path, REPO, edition=ZH, others=both)
    assert names == [p.name for p in ZH_NOTEBOOKS] and names == [p.name for p in NOTEBOOKS]
    index = (tmp_path / "src-zh" / "index.md").read_text(encoding="utf-8")
    assert (
        index.startswith("# lmcore · 因果语言模型")
        and "## 课程地图" in index
        and "## 学完后你将能够" in index
    )
    assert 'href="../index.html" hreflang="en"' in index and "折叠在一个开关后面" in index
    assert "这是课程 README" not in index  # the translation's note about itself is not the site's
    for name in names:
        assert f"]({name})" in index
        page = nbformat.read(tmp_path / "src-zh" / name, as_version=4)
        text = _page_text(page)
        assert f"github/{REPO}/blob/main/zh/notebooks/{name}" in text  # Colab opens the Chinese
        assert f'href="../{Path(name).stem}.html" hreflang="en"' in text
        assert "下载 notebook" in text and "Download the notebook" not in text
        if _outputs(page, "text/html") and "lmcore-widget-note" in text:
            assert "交互式小部件" in text and "Interactive widget" not in text
        assert (tmp_path / "extra-zh" / "notebooks" / name).read_bytes() == (
            ROOT / "zh" / "notebooks" / name
        ).read_bytes()
    site.prepare(tmp_path, REPO, edition=site.EDITIONS["en"], others=both)
    english = _page_text(nbformat.read(tmp_path / "src" / names[3], as_version=4))
    assert f'href="zh/{Path(names[3]).stem}.html" hreflang="zh"' in english
    assert 'href="zh/index.html" hreflang="zh"' in (tmp_path / "src" / "index.md").read_text(encoding="utf-8")
    alone = site.prepare(tmp_path / "alone", REPO)  # no other edition: no switch
    assert alone == names and "lmcore-lang" not in (tmp_path / "alone" / "src" / "index.md").read_text(
        "utf-8"
    )


def test_the_chinese_search_dictionary_holds_the_glossarys_chinese_terms():
    words = site.search_dictionary((ROOT / "zh" / "GLOSSARY.md").read_text(encoding="utf-8")).split("\n")
    terms = {line.split()[0] for line in words if line}
    assert {"困惑度", "标签移位", "损失", "填充", "交叉熵"} <= terms
    assert not [t for t in terms if re.search(r"[A-Za-z0-9]", t)]
    assert (
        site.search_dictionary("| a | b |\n|---|---|\n| perplexity | 困惑度（PPL）/ 熵 |\n")
        == "困惑度 100000\n"
    )


def test_the_makefile_the_build_and_the_pages_workflow_agree_on_the_site():
    makefile = (ROOT / "Makefile").read_text()
    pages = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert re.search(r"^site: .*\n\t.*site/build\.py", makefile, flags=re.M)
    assert re.search(r"^test-site: site .*\n\t.*browser/site_test\.py build/site/html", makefile, flags=re.M)
    assert re.search(r"^\s*run: make site$", pages, flags=re.M)
    assert re.search(r"^\s*path: build/site/html$", pages, flags=re.M)
    assert "actions/deploy-pages@" in pages and "pages: write" in pages
    conf = (ROOT / "site" / "conf.py").read_text()
    assert re.search(r'^nb_execution_mode = "off"$', conf, flags=re.M)


def test_the_site_stack_is_pinned():
    pins = {}
    for line in (ROOT / "requirements-site.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            assert "==" in line, f"unpinned: {line}"
            name, version = line.split("==")
            pins[name.lower()] = version
    assert {"sphinx", "myst-nb", "sphinx-book-theme", "sphinx-mathjax-offline"} <= set(pins)


SEARCH_JS = ROOT / "site" / "_static" / "lmcore-search.js"


@pytest.mark.parametrize(
    "text, plain",
    [
        ("the loss \\(-\\ln p\\) grows", "the loss -ln p grows"),
        (
            "\\[\\mathrm{PPL} = \\exp\\Big(\\frac{1}{N}\\sum_{i=1}^{N} \\ell_i\\Big)\\]",
            "PPL = exp(1/N Σ_i=1^N ℓ_i)",
        ),
        ("\\(\\frac{\\partial L}{\\partial z_{i}} = p_i - y_i\\)", "(∂ L)/(∂ z_i) = p_i - y_i"),
        ("at init \\(\\ln V \\approx 4.17\\) nats", "at init ln V ≈ 4.17 nats"),
        ("\\(\\underbrace{x+y}_{\\text{sum}}\\)", "x+y"),
        ("print('a\\nb')  # code keeps its backslashes", "print('a\\nb')  # code keeps its backslashes"),
    ],
)
def test_search_snippets_show_formulas_as_plain_text(text, plain):
    """site/_static/lmcore-search.js, run by node where it is installed (the site test checks the
    search page itself in Chromium)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (
        SEARCH_JS.read_text(encoding="utf-8") + "\nprocess.stdout.write(lmcorePlainMath(process.argv[1]));"
    )
    out = subprocess.run([node, "-e", script, text], capture_output=True, text=True, encoding="utf-8")
    assert out.returncode == 0, out.stderr
    assert out.stdout == plain


def test_the_search_script_is_deferred_so_it_wraps_sphinxs_search():
    text = (ROOT / "site" / "conf.py").read_text()
    assert 'html_js_files = [("lmcore-search.js", {"defer": "defer"})]' in text
